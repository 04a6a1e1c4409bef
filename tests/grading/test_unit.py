"""The unit of work: a typed task in, a typed result out, never an exception for a submission."""

from __future__ import annotations

import json

from mhalib.grading.answered_notebook import (
    answer_sources,
    quick_check_answers,
    submission,
    to_bytes,
)
from mhalib.grading.records import GradingResult, GradingTask
from mhalib.grading.rubric import default_rubric
from mhalib.grading.sandbox.limits import Limits
from mhalib.grading.unit import close_sandboxes, grade_unit, grader_error_result
from tests.checkout import keys_of


def _task(model, student: str, data: bytes | None, **changes) -> GradingTask:
    return GradingTask(student=student, assignment=model.assignment, model=model.for_worker(),
                       seed=5, limits=Limits(notebook_seconds=20, cell_seconds=5),
                       rubric=default_rubric(), sandbox="none", submission=data,
                       quick_check_keys=keys_of(model.assignment), **changes)


def test_an_unreadable_notebook_is_graded_without_running(fixture_model):
    result = grade_unit(_task(fixture_model, "broken", b'{"cells": ['))
    assert isinstance(result, GradingResult)
    assert "invalid_notebook" in result.issue_flags()
    assert result.points() == 0 and result.max_points() == 6.0
    assert all("no_record" in v.flags for v in result.verdicts.values())
    assert result.run.exit_code is None  # nothing ran


def test_a_missing_notebook_says_why(fixture_model):
    result = grade_unit(_task(fixture_model, "absent", None,
                              submission_error=("invalid_notebook", "the zip was cut")))
    assert result.issue_flags()[0] == "invalid_notebook"
    assert "the zip was cut" in result.verdicts["softmax"].diagnosis


def test_the_result_file_round_trips(fixture_model):
    result = grader_error_result(_task(fixture_model, "x", None), RuntimeError("boom"))
    stored = json.loads(json.dumps(result.to_json_dict()))
    assert "graded_notebook" not in stored
    again = GradingResult.from_json_dict(stored)
    assert again.verdicts == result.verdicts and again.issues == result.issues
    assert again.grade_cells == result.grade_cells and again.run == result.run


def test_killing_the_grader_process_costs_only_that_notebook(fixture_model):
    """Without bubblewrap a notebook can reach the process above it (its warden); that costs it
    its records, and the next student is still graded."""
    right = answer_sources(fixture_model)
    killer = submission(fixture_model, right, after={
        "imports": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"})
    try:
        first = grade_unit(_task(fixture_model, "killer", to_bytes(killer)))
        second = grade_unit(_task(fixture_model, "next", to_bytes(submission(
            fixture_model, right, quick_checks=quick_check_answers(
                fixture_model, keys_of(fixture_model.assignment))))))
    finally:
        close_sandboxes()
    assert {"sandbox_error", "kernel_died"} & set(first.issue_flags()), first.issue_flags()
    assert all(v.points == 0 for v in first.verdicts.values())
    assert all(v.passed for v in second.verdicts.values())
    assert second.points() == 6.0 and second.run.exit_code == 0
