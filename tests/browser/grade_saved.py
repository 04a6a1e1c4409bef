"""Grade a notebook the browser saved, the way an instructor would: ``mhalib grade``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.browser.lab_server import REPO


def grade_saved(notebook: Path, assignment: str, student: str, scratch: Path) -> dict:
    """The grader's result for ``notebook`` handed in by ``student`` (JSON, as written to the
    course folder), plus ``feedback``: the HTML feedback page's text."""
    submitted = scratch / "submitted"
    target = submitted / student / assignment / notebook.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook, target)
    course = scratch / "course"
    from mhalib.cli import main

    code = main(["grade", "--assignment", assignment, str(submitted), "--root",
                 str(REPO), "--course", str(course), "--seed", "5",
                 "--no-progress", "--no-class-cache"])
    assert code == 0, f"mhalib grade exited with {code}"
    [path] = (course / "mhalib-results" / assignment / student).glob("*.json")
    result = json.loads(path.read_text(encoding="utf-8"))
    pages = list((course / "feedback" / student / assignment).glob("*.html"))
    result["feedback"] = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    return result
