"""Shared fixtures: the fixture lesson, and one graded run of the whole catalogue class.

The catalogue is graded once per session through the real command line (``mhalib grade
--jobs 2``) and the tests read what it left in the course folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mhalib.grading.sandbox_host import bwrap_problem
from tests.checkout import COURSE

FIXTURES = Path(__file__).parent / "fixtures"
SOURCE = FIXTURES / "solutions"
ASSIGNMENT = "01-single-head"
TEST_LIMITS = ["--timeout", "10", "--cell-timeout", "2", "--call-timeout", "0.3",
               "--memory-mb", "1024", "--max-notebook-bytes", "1000000"]


# MHALIB_TEST_SANDBOX=none runs everything as on a machine without bubblewrap
FORCED_MODE = os.environ.get("MHALIB_TEST_SANDBOX")


@pytest.fixture(scope="session")
def bwrap_usable() -> bool:
    return FORCED_MODE != "none" and bwrap_problem() is None


@pytest.fixture(scope="session")
def fixture_model():
    from mhalib.grading.assignment import load_assignment

    return load_assignment(ASSIGNMENT, SOURCE)[0]


def read_results(course: Path, assignment: str = ASSIGNMENT) -> dict[str, dict]:
    folder = course / "mhalib-results" / assignment
    return {path.parent.name: json.loads(path.read_text(encoding="utf-8"))
            for path in folder.glob("*/*.json")}


@pytest.fixture(scope="session")
def catalogue_run(tmp_path_factory, fixture_model, bwrap_usable):
    """Grade the catalogue class once: returns a dict with paths, results and the CLI output."""
    from mhalib.cli import main
    from tests.grading.grading_catalogue import CATALOGUE, write_class

    root = tmp_path_factory.mktemp("catalogue")
    submitted, course = root / "submitted", root / "course"
    gradebook = course / "gradebook.db"
    context = {"paths": [str(SOURCE / ASSIGNMENT / fixture_model.notebook), str(gradebook),
                         str(submitted / "correct" / ASSIGNMENT / fixture_model.notebook),
                         "/etc/shadow", str(Path.home() / ".bash_history")],
               "gradebook": str(gradebook)}
    cases = [c for c in CATALOGUE if bwrap_usable or not c.needs_bwrap]
    write_class(fixture_model, submitted, context, cases)
    code = main(["grade", "--assignment", ASSIGNMENT, str(submitted), "--source", str(SOURCE),
                 "--course", str(course), "--keys", str(COURSE.keys), "--jobs", "2",
                 "--seed", "1234", "--no-progress",
                 "--sandbox", "auto" if bwrap_usable else "none", *TEST_LIMITS])
    return {"code": code, "root": root, "submitted": submitted, "course": course,
            "results": read_results(course), "cases": cases, "context": context}
