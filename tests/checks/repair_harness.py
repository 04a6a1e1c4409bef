"""What the repair tests share (mhalib.checks.repairs): the search switched on, which the
suite switches off (tests/conftest.py), and a learner's answer probed and judged as the grader
does. A test module uses them with ``pytestmark = pytest.mark.usefixtures("searching")``."""

from __future__ import annotations

import pytest

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.probe import probe

SEARCH_BUDGET_S = "2"  # seconds: the grader's repair budget


@pytest.fixture
def searching(monkeypatch):
    monkeypatch.setenv("MHALIB_REPAIR_BUDGET_S", SEARCH_BUDGET_S)


def recorded(exercise: str, func, seed: int = 1, suite: str = "grading", **kwargs) -> dict:
    return probe(get_exercise(exercise), func, seed, suite, **kwargs)


def repaired(exercise: str, func, seed: int = 1):
    """``(repair or None, verdict)`` of ``func`` as the grader records and judges it."""
    record = recorded(exercise, func, seed)
    return record.get("repair"), judge_record(exercise, record, seed)
