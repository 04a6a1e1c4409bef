"""Merging a submitted notebook with the release, and where the grader records (no sandbox)."""

from __future__ import annotations

import json

import pytest

from mhalib.grading.answered_notebook import answer_sources, submission
from mhalib.grading.assignment import item_of, load_assignment
from mhalib.grading.plan import NotebookUnreadable, build_plan, parse_notebook


def _ids(plan):
    return [c["metadata"].get("nbgrader", {}).get("grade_id") for c in plan.cells]


def _flags(plan):
    return {issue.flag for issue in plan.issues}


def test_grade_cells_map_to_exercises_and_quick_checks(fixture_model):
    kinds = {g.grade_id: (g.kind, g.item) for g in fixture_model.grade_cells}
    assert kinds["test_softmax"] == ("exercise", "softmax")
    assert kinds["test_attention"] == ("exercise", "attention")
    assert kinds["qc_weights_shape"] == ("quick_check", "qc_weights_shape")
    assert kinds["explain_scaling"] == ("manual", None)
    assert fixture_model.points_of("attention") == 3.0


def test_longest_exercise_name_wins():
    names = ["softmax", "softmax_jacobian", "softmax_entropy"]
    assert item_of("test_softmax_jacobian_hidden", names, set()) == ("exercise",
                                                                      "softmax_jacobian")
    assert item_of("test_softmax_hidden", names, set()) == ("exercise", "softmax")
    assert item_of("qc_scale_divisor_test", names, {"qc_scale", "qc_scale_divisor"}) == (
        "quick_check", "qc_scale_divisor")
    assert item_of("free_text", names, set()) == ("manual", None)


def test_release_has_no_solutions_or_hidden_tests(fixture_model):
    text = json.dumps(fixture_model.release)
    assert "HIDDEN-TEST-MARKER" not in text and "BEGIN SOLUTION" not in text
    assert "np.swapaxes(k" not in text


def test_clean_submission_runs_learner_answers_and_records_after_tests(fixture_model):
    plan = build_plan(submission(fixture_model, answer_sources(fixture_model)), fixture_model)
    assert plan.issues == []
    kinds = [(s["kind"], s.get("exercises")) for s in plan.steps]
    records = [k for k in kinds if k[0] == "record"]
    # quick checks are not recorded in the sandbox: their answers are read from the file
    assert records == [("record", ["softmax"]), ("record", ["attention"])]
    sources = "".join(s.get("source", "") for s in plan.steps)
    assert "np.swapaxes" in sources  # the learner's (here: the instructor's) answer runs
    assert "HIDDEN-TEST-MARKER" not in sources  # hidden tests never enter the sandbox


def test_edited_test_cell_is_replaced_by_the_release(fixture_model):
    notebook = submission(fixture_model, answer_sources(fixture_model))
    test = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get(
        "grade_id") == "test_softmax")
    test["source"] = "print('passed')"
    plan = build_plan(notebook, fixture_model)
    assert "edited_test_cell" in _flags(plan)
    assert not any("print('passed')" in s.get("source", "") for s in plan.steps)


def test_deleted_test_cell_is_restored_in_place(fixture_model):
    notebook = submission(fixture_model, answer_sources(fixture_model), drop=("test_softmax",))
    plan = build_plan(notebook, fixture_model)
    ids = _ids(plan)
    assert ids.index("test_softmax") == ids.index("softmax") + 1
    assert "restored_cell" in _flags(plan)


def test_deleted_answer_cell_is_not_restored_over_the_learner(fixture_model):
    notebook = submission(fixture_model, answer_sources(fixture_model), drop=("softmax",))
    plan = build_plan(notebook, fixture_model)
    assert "softmax" not in _ids(plan)
    assert "missing_answer_cell" in _flags(plan)


def test_malformed_cells_are_skipped_not_fatal(fixture_model):
    notebook = submission(fixture_model, answer_sources(fixture_model))
    notebook["cells"].insert(0, {"cell_type": "code", "source": 42})
    notebook["cells"].insert(0, "not a cell")
    plan = build_plan(notebook, fixture_model)
    assert "invalid_cell" in _flags(plan)
    assert plan.runnable


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b'{"cells": []}', b"\xff\xfe\x00",
                                  b'{"cells": [], "nbformat": 3}'])
def test_unreadable_files_are_named(data):
    with pytest.raises(NotebookUnreadable):
        parse_notebook(data)


def test_real_lesson_01_maps_every_grade_cell(tmp_path):
    from pathlib import Path

    source = Path(__file__).resolve().parents[2] / "solutions"
    if not (source / "01-single-head").is_dir():
        pytest.skip("lesson 01 source not present")
    model = load_assignment("01-single-head", source)[0]
    graded = {g.item for g in model.grade_cells if g.item}
    assert {"softmax", "attention"} <= graded
    assert all(g.kind != "manual" or g.cell_type == "markdown" for g in model.grade_cells)
