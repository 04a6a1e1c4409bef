"""One outcome per student and exercise, in the documented order."""

from __future__ import annotations

import pytest

from mhalib.classroom.report.outcomes import (
    is_flagged,
    mistake_message,
    named_mistake,
    outcome,
)
from mhalib.grading.records import ItemVerdict


def verdict(passed=False, points=0.0, flags=(), response=None, diagnosis="attention: wrong"):
    return ItemVerdict("exercise", "attention", passed, points / 3, diagnosis,
                       flags=list(flags), max_points=3.0, points=points,
                       response=response or {})


@pytest.mark.parametrize("made, expected", [
    (verdict(passed=True, points=3.0), "passed"),
    (verdict(points=1.0, flags=["mistake:no_scale"]), "partial"),
    (verdict(flags=["call_error"], response={"answer": "stub", "blank": True}), "blank"),
    (verdict(flags=["missing"], response={}), "blank"),
    (verdict(flags=["no_record"], response={"answer": "def f(): ...", "blank": False}),
     "not_graded"),
    (verdict(flags=["bad_record"]), "not_graded"),
    (verdict(flags=["mistake:wrong_scale"], response={"answer": "x", "blank": False}),
     "failed"),
    (verdict(flags=["call_error"], response={"answer": "x", "blank": False}), "failed"),
    (verdict(flags=["missing"], response={"answer": "def g(): pass", "blank": False}),
     "failed"),
])
def test_outcome(made, expected):
    assert outcome(made) == expected


def test_a_blank_answer_that_never_ran_is_still_blank():
    # the answer cell was the stub; the kernel died before the exercise's test
    assert outcome(verdict(flags=["no_record"], response={"answer": "s", "blank": True})) == \
        "blank"


def test_named_mistake_and_its_message():
    made = verdict(flags=["call_error", "mistake:no_scale"],
                   diagnosis="attention: the output matches attention without the scale")
    assert named_mistake(made) == "no_scale"
    assert mistake_message(made) == "the output matches attention without the scale"
    assert named_mistake(verdict()) is None


def test_flagged_reads_item_and_notebook_flags():
    assert is_flagged(verdict(flags=["call_timeout"]), [])
    assert is_flagged(verdict(), ["kernel_died"])
    assert not is_flagged(verdict(flags=["mistake:no_scale", "call_error"]), ["no_sandbox"])
