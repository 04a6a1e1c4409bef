"""Where the course lives: the one place every instructor tool asks.

A course folder is a checkout of this course (or a copy of one)::

    solutions/               the instructor master: nbgrader's source, hidden tests included
    notebooks/               the learner release
    grading/quick_checks/    the quick-check keys: instructor data, never in the package
    grading/course/          what a class produces: submissions, gradebook, feedback, exports

Its top folder is, in this order: what the command line names (``--root``), the environment
variable ``MHALIB_COURSE_ROOT``, the working directory. Each part may be named on its own as
well (``--source``, ``--keys`` or ``MHALIB_QUICK_CHECK_KEYS``, ``--course``...), which wins over
the layout. Never the installed package's own path: installed from a wheel, or in a class hub's
shared environment, that lies in site-packages, far from any course.

The instructor's private course on a class hub is laid out the way nbgrader lays out a course
(``source/``, ``release/``, everything a class produces at its top): :meth:`CourseFiles.nbgrader`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mhalib import course as manifest
from mhalib.quiz.keys import KEYS_VARIABLE

ROOT_VARIABLE = "MHALIB_COURSE_ROOT"


@dataclass(frozen=True)
class CourseFiles:
    """The parts of one course folder, as absolute paths.

    ``course`` is nbgrader's course folder for what a class produces (``submitted/``,
    ``autograded/``, ``feedback/``, ``gradebook.db``, mhalib's ``exports/``...).
    """

    root: Path
    solutions: Path
    notebooks: Path
    keys: Path
    course: Path

    @classmethod
    def checkout(cls, root: Path) -> CourseFiles:
        """The parts of a course checkout at ``root`` (the layout in the module docstring)."""
        root = Path(root).resolve()
        return cls(root, root / manifest.SOURCE_DIR, root / manifest.RELEASE_DIR,
                   root / manifest.KEYS_DIR, root / manifest.GRADING_DIR)

    @classmethod
    def nbgrader(cls, root: Path, keys: str = "quick_check_keys") -> CourseFiles:
        """The parts of a course laid out as nbgrader's defaults have it, at ``root``:
        ``source/``, ``release/``, the keys in ``keys/``, what a class produces at the top."""
        root = Path(root).resolve()
        return cls(root, root / "source", root / "release", root / keys, root)


def locate(root: Path | None = None, *, solutions: Path | None = None,
           notebooks: Path | None = None, keys: Path | None = None, course: Path | None = None,
           environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> CourseFiles:
    """The course folder's parts: each from its argument when given, else from the layout of
    the top folder: ``root``, else ``$MHALIB_COURSE_ROOT``, else the working directory (``cwd``,
    default: this process's). The keys may also come from ``$MHALIB_QUICK_CHECK_KEYS``.

    Nothing is checked to exist here: the tool that needs a part says which one is missing.
    """
    environ = os.environ if environ is None else environ
    top = root or environ.get(ROOT_VARIABLE) or cwd or Path.cwd()
    layout = CourseFiles.checkout(Path(top))
    chosen_keys = keys or environ.get(KEYS_VARIABLE) or layout.keys
    return CourseFiles(
        root=layout.root,
        solutions=Path(solutions).resolve() if solutions else layout.solutions,
        notebooks=Path(notebooks).resolve() if notebooks else layout.notebooks,
        keys=Path(chosen_keys).resolve(),
        course=Path(course).resolve() if course else layout.course)
