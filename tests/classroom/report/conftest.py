"""Fixtures of the class-report tests: the demo class graded once, a synthetic class built once,
and (for the browser test) the headless Chromium of tests/browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import (  # noqa: F401  (fixtures, shared with tests/browser)
    browser,
    chromium_path,
    page,
    pytest_runtest_makereport,
    screenshot_dir,
)

REPO = Path(__file__).resolve().parents[3]
SYNTHETIC_STUDENTS = 240
SYNTHETIC_LESSONS = ["01-single-head", "05-flops", "06-gqa"]


@pytest.fixture(scope="session")
def demo_course(tmp_path_factory) -> dict:
    """grading/examples/submitted graded once by ``mhalib grade`` (as the README's quick
    start does); returns the course folder and what the command printed."""
    import contextlib
    import io

    from mhalib.cli import main

    course = tmp_path_factory.mktemp("demo") / "course"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["grade", str(REPO / "grading" / "examples" / "submitted"),
                     "--assignment", "01-single-head", "--source", str(REPO / "solutions"),
                     "--course", str(course), "--jobs", "2", "--seed", "11", "--no-progress"])
    return {"course": course, "code": code, "stdout": out.getvalue()}


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory):
    """The synthetic class of :data:`SYNTHETIC_STUDENTS` learners over
    :data:`SYNTHETIC_LESSONS` (tests/classroom/report/synthetic_class.py)."""
    from tests.classroom.report.synthetic_class import synthetic_class
    from tests.classroom.report.synthetic_plan import make_plan

    plan = make_plan(SYNTHETIC_STUDENTS, SYNTHETIC_LESSONS)
    return synthetic_class(tmp_path_factory.mktemp("synthetic") / "course", plan)
