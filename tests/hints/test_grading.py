"""The grader reads hint use from the submitted notebook, reports it (results, feedback, CSV, the
command's summary) and prices it as the rubric says: free by default, ``hint_cost`` per hint."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil

import pytest

from mhalib.cli import main
from mhalib.grading.assignment import load_assignment
from mhalib.grading.credit import Credit, with_hint_cost
from mhalib.grading.rubric import RubricError, default_rubric, rubric_from_table
from mhalib.grading.scorer import score_notebook
from mhalib.hints.record import bundle
from tests.checkout import REPO
from tests.grading.answers import lesson01 as answers
from tests.grading.conftest import ASSIGNMENT, SOURCE, TEST_LIMITS, read_results

SEED = 11


def priced(table: dict):
    return default_rubric().overlaid(rubric_from_table(table, "the course rubric", "test"))


def test_hints_are_free_by_default_and_priced_where_the_rubric_says():
    rubric = priced({"hint_cost": "1/10", "softmax": {"hint_cost": 0}})
    assert default_rubric().cost_per_hint("attention") == 0
    assert rubric.cost_per_hint("attention") == pytest.approx(0.1)
    assert rubric.cost_per_hint("softmax") == 0
    assert priced({"attention": {"hint_cost": "1/4"}}).cost_per_hint("attention") == 0.25


@pytest.mark.parametrize("table, says", [
    ({"hint_cost": 2}, "hint_cost = 2 must be a share between 0 and 1"),
    ({"attention": {"hint_cost": "x"}}, "attention.hint_cost = 'x' must be a share"),
    ({"attention": {"hints": 1}}, "allowed: 'mistakes', 'unnamed_cap', 'hint_cost'"),
])
def test_a_bad_hint_cost_is_named(table, says):
    with pytest.raises(RubricError, match=says):
        rubric_from_table(table, "the course rubric", "rubric.toml")


def test_each_hint_costs_its_share_never_below_zero():
    rubric = priced({"hint_cost": "1/10"})
    full = with_hint_cost(Credit(1.0), "attention", 3, rubric)
    assert full.share == pytest.approx(0.7)
    assert full.note(3) == ("2.1 of 3 points, less 3 hints taken at 1/10 of the points each, "
                            "as the course rubric sets.")
    partial = with_hint_cost(Credit(1 / 3, "as the course rubric sets for this mistake (no_scale)"),
                             "attention", 4, rubric)
    assert partial.share == 0 and "(no_scale); less 4 hints taken" in partial.basis
    assert with_hint_cost(Credit(0.0, "nothing"), "attention", 2, rubric) == Credit(0.0, "nothing")
    assert with_hint_cost(Credit(1.0), "attention", 2, default_rubric()) == Credit(1.0)


def test_the_scorer_reports_the_hints_on_each_exercise_and_prices_them():
    model = load_assignment(ASSIGNMENT, SOURCE)[0]
    records = {"attention": {"generic": answers.record_text("attention", answers.correct, SEED)}}
    free = score_notebook(model, records, {}, {}, default_rubric(), hints={"attention": 2})
    assert free["attention"].hints == 2 and free["attention"].points == 3
    assert free["softmax"].hints == 0
    paid = score_notebook(model, records, {}, {}, priced({"hint_cost": "1/6"}),
                          hints={"attention": 2})
    assert paid["attention"].points == pytest.approx(2.0)
    assert "less 2 hints taken at 1/6 of the points each" in paid["attention"].credit


@pytest.fixture(scope="module")
def graded_with_hints(tmp_path_factory):
    """The demo class's correct notebook with hint records (as an assessed release leaves them:
    an earlier record, and the last one), graded by ``mhalib grade`` with a rubric that prices
    hints at 1/10 of an exercise's points, except softmax's."""
    root = tmp_path_factory.mktemp("hints-graded")
    notebook_name = "single_head_attention.ipynb"
    source = REPO / "grading" / "examples" / "submitted" / "ada-correct" / ASSIGNMENT
    notebook = json.loads((source / notebook_name).read_text(encoding="utf-8"))
    code_cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    for cell, counts in ((code_cells[2], {"attention": 1}),
                         (code_cells[-1], {"softmax": 1, "attention": 3})):
        cell["outputs"].append({"output_type": "display_data", "metadata": {},
                                "data": bundle(counts, {})})
    for student, nb in (("ana", notebook), ("bo", json.loads(
            (source / notebook_name).read_text(encoding="utf-8")))):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / notebook_name).write_text(json.dumps(nb), encoding="utf-8")
    (root / "rubric.toml").write_text('hint_cost = "1/10"\n[softmax]\nhint_cost = 0\n')
    course, printed = root / "course", io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["grade", "--assignment", ASSIGNMENT, str(root / "submitted"), "--course",
                     str(course), "--seed", "5", "--no-progress", "--no-class-cache",
                     "--rubric", str(root / "rubric.toml"), *TEST_LIMITS[:2]])
    assert code == 0
    yield course, printed.getvalue()
    shutil.rmtree(root, ignore_errors=True)


def test_mhalib_grade_prices_and_reports_recorded_hints(graded_with_hints):
    course, printed = graded_with_hints
    summary = {line.split()[0]: line for line in printed.splitlines() if line.startswith("  ")}
    assert summary["ana"].endswith("hints taken: 4") and "hints" not in summary["bo"]
    results = read_results(course)
    ana, bo = results["ana"]["verdicts"], results["bo"]["verdicts"]
    assert (ana["attention"]["hints"], ana["softmax"]["hints"]) == (3, 1)
    assert ana["attention"]["points"] == pytest.approx(3 * 0.7)
    assert "less 3 hints taken at 1/10 of the points each" in ana["attention"]["credit"]
    assert ana["softmax"]["points"] == bo["softmax"]["points"] == 3  # free for softmax
    assert bo["attention"]["hints"] == 0 and bo["attention"]["points"] == 3

    feedback = (course / "feedback" / "ana" / ASSIGNMENT /
                "single_head_attention.html").read_text(encoding="utf-8")
    assert "Hints taken: 3." in feedback and "Hints taken: 1." in feedback

    rows = list(csv.DictReader(open(course / "exports" / f"{ASSIGNMENT}.csv", encoding="utf-8")))
    hints = {(r["student"], r["exercise"]): r["hints"] for r in rows}
    assert hints[("ana", "attention")] == "3" and hints[("ana", "(total)")] == "4"
    assert hints[("bo", "attention")] == "0" and hints[("bo", "(total)")] == "0"
    assert hints[("ana", "qc_scale_divisor")] == ""
