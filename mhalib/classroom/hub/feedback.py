"""Returning feedback written by ``mhalib grade`` through nbgrader's exchange.

``nbgrader release_feedback`` files each page under a name derived from the submission's
``submission_secret.txt`` and ``timestamp.txt``, which it expects next to the page in
``feedback/<student>/<assignment>/`` (nbgrader's ``generate_feedback`` copies them there).
``mhalib grade`` writes only the pages, so they are paired with the submissions here first.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PAIRED_FILES = ("timestamp.txt", "submission_secret.txt")


def pair_feedback_with_submissions(course: Path, assignment: str) -> list[str]:
    """Copy each submission's timestamp and secret next to its feedback; return the students.

    Students with feedback but no collected submission (graded from a zip) are skipped: they
    cannot fetch through the exchange anyway.
    """
    feedback_root = course / "feedback"
    if not feedback_root.is_dir():
        raise ValueError(f"no feedback in {feedback_root}: run `mhalib grade` first")
    paired = []
    for page_folder in sorted(feedback_root.glob(f"*/{assignment}")):
        student = page_folder.parent.name
        submitted = course / "submitted" / student / assignment
        if all((submitted / name).is_file() for name in PAIRED_FILES):
            for name in PAIRED_FILES:
                shutil.copy2(submitted / name, page_folder / name)
            paired.append(student)
    if not paired:
        raise ValueError(f"no feedback of {assignment!r} in {feedback_root} matches a "
                         f"collected submission in {course / 'submitted'}")
    return paired


def release_feedback(course: Path, assignment: str, nbgrader: str | None = None) -> list[str]:
    """Pair the pages, then ``nbgrader release_feedback`` them; return the students.

    ``nbgrader`` is the command (default: on PATH, else beside this Python)."""
    nbgrader = nbgrader or shutil.which("nbgrader") or str(Path(sys.executable).parent /
                                                           "nbgrader")
    students = pair_feedback_with_submissions(course, assignment)
    subprocess.run([nbgrader, "release_feedback", assignment], check=True, cwd=course)
    return students
