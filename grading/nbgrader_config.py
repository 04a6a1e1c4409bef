"""nbgrader configuration of the course (used by `nbgrader ...` run from grading/ and by mhalib).

The instructor master lives in solutions/ (nbgrader's "source"), the learner release in
notebooks/ (nbgrader's "release"); everything a class produces goes under grading/course/.
"""

import os

from mhalib import course
from mhalib.grading import nbgrader_quick_checks

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COURSE = os.path.join(REPO, "grading", "course")

c.CourseDirectory.course_id = "mha-course"
c.CourseDirectory.root = REPO
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = os.path.join("grading", "course", "submitted")
c.CourseDirectory.autograded_directory = os.path.join("grading", "course", "autograded")
c.CourseDirectory.feedback_directory = os.path.join("grading", "course", "feedback")
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE, "gradebook.db")

# the assignments of the course manifest (mhalib.course), in course order
c.CourseDirectory.db_assignments = [dict(name=a) for a in course.assignments()]

# Release: no outputs, locked read-only cells, solutions and hidden tests removed.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.enforce_metadata = True
c.Execute.timeout = 120
c.Execute.allow_errors = True

# Quick checks are scored from the answer saved in the submitted notebook, with the keys on the
# instructor's side (grading/quick_checks): stash the answers before nbgrader clears outputs,
# score them right after the notebook ran (mhalib.grading.nbgrader_quick_checks).
nbgrader_quick_checks.install(c)
