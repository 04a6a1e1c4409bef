"""The course's nbgrader configuration, written once: every nbgrader config file calls it.

- ``grading/nbgrader_config.py`` (``nbgrader`` run in a course checkout, ``mhalib lab
  --instructor``) and the instructor's ``~/.jupyter/nbgrader_config.py`` that ``mhalib hub``
  writes both call :func:`configure` with their course folder
  (:class:`~mhalib.classroom.course_folder.CourseFiles`);
- the shared config every user of a class hub reads calls :func:`configure_exchange`.
"""

from __future__ import annotations

import os
from pathlib import Path

from mhalib import course
from mhalib.classroom.course_folder import CourseFiles
from mhalib.grading.assignment import CODE_STUB

COURSE_ID = "mha-course"
# nbgrader's submit, closed to everyone but the instructor (mhalib.classroom.nbgrader_submit)
GRADER_ONLY_SUBMIT = "mhalib.classroom.nbgrader_submit.GraderOnlySubmit"
EXECUTE_SECONDS = 120  # per cell, when nbgrader runs a notebook (lesson 08 trains for ~30 s)


def configure(c, files: CourseFiles) -> None:
    """Configure nbgrader (``c``, the config object of an nbgrader_config.py) for the course in
    ``files``: its folders and gradebook, the assignments of the course manifest, the release
    (no outputs, solutions and hidden tests removed, the course's code stub), the execution,
    and the quick-check preprocessors with the instructor's keys."""
    root = Path(files.root)

    def folder(path: Path) -> str:  # nbgrader joins these to the root
        return os.path.relpath(path, root)

    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.source_directory = folder(files.solutions)
    c.CourseDirectory.release_directory = folder(files.notebooks)
    c.CourseDirectory.submitted_directory = folder(files.course / "submitted")
    c.CourseDirectory.autograded_directory = folder(files.course / "autograded")
    c.CourseDirectory.feedback_directory = folder(files.course / "feedback")
    c.CourseDirectory.db_url = f"sqlite:///{files.course / 'gradebook.db'}"
    c.CourseDirectory.db_assignments = [dict(name=a) for a in course.assignments()]

    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    c.ClearSolutions.enforce_metadata = True
    c.Execute.timeout = EXECUTE_SECONDS
    c.Execute.allow_errors = True

    # Quick checks are scored from the answer saved in the submitted notebook, with the keys on
    # the instructor's side: stash the answers before nbgrader clears outputs, score them right
    # after the notebook ran. (Imported here: JupyterHub's configuration reads COURSE_ID and
    # should not import nbgrader's preprocessors.)
    from mhalib.classroom import nbgrader_quick_checks

    nbgrader_quick_checks.install(c, files.keys)


def configure_exchange(c, exchange_root: Path) -> None:
    """Configure nbgrader for every user of a class hub: the course, its exchange folder, and a
    submit that only the instructor can read."""
    c.CourseDirectory.course_id = COURSE_ID
    c.Exchange.root = str(exchange_root)
    c.ExchangeFactory.submit = GRADER_ONLY_SUBMIT
