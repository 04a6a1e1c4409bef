"""nbgrader configuration of the course (used by `nbgrader ...` run from grading/ and by mhalib).

The instructor master lives in solutions/ (nbgrader's "source"), the learner release in
notebooks/ (nbgrader's "release"); everything a class produces goes under grading/course/. The
course is the folder above this file; the settings themselves are
mhalib.classroom.nbgrader_config.configure, the same for a class hub's instructor.
"""

from pathlib import Path

from mhalib.classroom.course_folder import locate
from mhalib.classroom.nbgrader_config import configure

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

configure(c, locate(root=Path(__file__).resolve().parent.parent))
