"""The course the tests run on: this checkout, laid out as mhalib.classroom finds a course."""

from __future__ import annotations

from pathlib import Path

from mhalib.classroom.course_folder import CourseFiles
from mhalib.quiz.keys import instructor_keys

REPO = Path(__file__).resolve().parents[1]
COURSE = CourseFiles.checkout(REPO)


def keys_of(assignment: str) -> dict[str, dict]:
    """The instructor's quick-check keys of ``assignment`` in this checkout."""
    return instructor_keys(assignment, COURSE.keys)
