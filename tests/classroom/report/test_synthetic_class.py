"""The report recovers the proportions planted in a synthetic class of 240 (three lessons)
built from the course's fixture answers (tests/classroom/report/synthetic_plan.py), and the
fast gradebook writer used to build it writes what the grader's writer writes."""

from __future__ import annotations

import csv
import sqlite3
from contextlib import closing
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from mhalib.classroom.report.build import ReportOptions, build_report
from mhalib.classroom.report.grid import pseudonyms
from mhalib.grading.gradebook import final_scores
from mhalib.grading.rubric import default_rubric
from mhalib.grading.writer import CourseLayout, ResultWriter
from mhalib.quiz import all_questions
from tests.classroom.report.conftest import REPO, SYNTHETIC_STUDENTS
from tests.classroom.report.synthetic_class import build_results, load_models, write_results
from tests.classroom.report.synthetic_plan import NO_ANSWER, OTHER, make_plan

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::RuntimeWarning")]
N = SYNTHETIC_STUDENTS


@pytest.fixture(scope="module")
def report(synthetic):
    return build_report(ReportOptions(course=synthetic.course, source=REPO / "solutions"))


def summaries(report):
    exercises = {(a.assignment, e.exercise): e for a in report.assignments for e in a.exercises}
    checks = {(a.assignment, q.question): q for a in report.assignments for q in a.quick_checks}
    return exercises, checks


def test_exercise_outcomes_and_mistakes_are_recovered_exactly(synthetic, report):
    exercises, _ = summaries(report)
    rubric = default_rubric()
    assert len(exercises) == 9
    for item in (i for i in synthetic.plan.items if i.kind == "exercise"):
        summary = exercises[(item.assignment, item.item)]
        blank, unnamed, slip_b, slip_a, *right = item.bands
        assert (blank.count, unnamed.count, slip_b.count, slip_a.count) == (
            N * Fraction(1, 24), N * Fraction(1, 12), N * Fraction(1, 8), N * Fraction(1, 4))
        priced = [b.count for b in (slip_a, slip_b)
                  if rubric.mistake_share(item.item, b.expect) > 0]
        assert summary.counts == {"passed": sum(b.count for b in right),
                                  "partial": sum(priced),
                                  "failed": unnamed.count + slip_a.count + slip_b.count
                                  - sum(priced),
                                  "blank": blank.count, "not_graded": 0}, item.item
        assert [(m.mistake, m.students, m.share) for m in summary.mistakes] == [
            (slip_a.expect, slip_a.count, slip_a.count / N),
            (slip_b.expect, slip_b.count, slip_b.count / N)]
        assert len(summary.unnamed) == unnamed.count
        assert summary.flagged == len(synthetic.plan.flagged()) == N // 20
        for mistake in summary.mistakes:
            assert mistake.examples and all("#" not in e.split("\n")[0] for e in mistake.examples)


def test_quick_check_choices_are_recovered_exactly(synthetic, report):
    _, checks = summaries(report)
    questions = all_questions()
    planted = [i for i in synthetic.plan.items if i.kind != "exercise"]
    assert len(checks) == len(planted) == 13
    for item in planted:
        summary = checks[(item.assignment, item.item)]
        answered = N - item.count(NO_ANSWER)
        assert (summary.students, summary.answered) == (N, answered)
        counts = {c.choice: c.count for c in summary.choices}
        if item.kind == "multiple_choice":
            key = next(c.choice for c in summary.choices if c.key)
            options = range(len(questions[item.item].options))
            assert counts == {i: item.count(i) for i in options}, item.item
            assert summary.right == item.count(key)
            assert summary.unpicked == [questions[item.item].options[i] for i in options
                                        if i != key and item.count(i) == 0]
        else:
            slips = {b.expect for b in item.bands} - {NO_ANSWER, OTHER, "right"}
            for slip in slips:
                assert counts[slip] == item.count(slip), (item.item, slip)
            assert counts.get(OTHER, 0) == item.count(OTHER)
            assert summary.right == counts["right"] == item.count("right")
        assert summary.facility == summary.right / answered
        for choice in summary.choices:
            assert choice.share == choice.count / answered


def test_only_the_planted_question_looks_broken(synthetic, report):
    _, checks = summaries(report)
    (broken,) = [i for i in synthetic.plan.items if i.broken]
    flagged = [key for key, q in checks.items() if q.broken]
    assert flagged == [(broken.assignment, broken.item)]
    summary = checks[(broken.assignment, broken.item)]
    assert summary.upper_lower == -1.0 and summary.point_biserial < 0
    assert any("more often than the key in the upper group" in text for text in summary.broken)
    unpicked = [key for key, q in checks.items() if q.unpicked]
    # the first multiple-choice question of each lesson (05 has none), and the broken one,
    # whose class picked only the key and the first distractor
    assert unpicked == [("01-single-head", "qc_weights_shape"), ("06-gqa", "qc_gqa_savings"),
                        (broken.assignment, broken.item)]
    assert len(summary.unpicked) == 2


def _independent_upper_lower(right: np.ndarray, rest: np.ndarray) -> float:
    """Kelley's index with ties at the edge sharing its places, written out plainly."""
    g = max(1, round(0.27 * len(rest)))

    def facility_of(values):  # the g best of ``values``
        edge = np.sort(values)[::-1][g - 1]
        above = values > edge
        tied = values == edge
        return (right[above].sum() + (g - above.sum()) / tied.sum() * right[tied].sum()) / g

    return facility_of(rest) - facility_of(-rest)


def test_discrimination_matches_scipy_on_the_graders_export(synthetic, report, tmp_path):
    """Rest scores from the grader's own CSV export (a path the report does not use)."""
    from mhalib.grading.export import export_course

    layout = CourseLayout.at(synthetic.course)
    export_course(layout.results, tmp_path, layout.db_url,
                  {a: {m.notebook: m} for a, m in synthetic.models.items()})
    rows = list(csv.DictReader(open(tmp_path / "06-gqa.csv")))
    total = {r["student"]: float(r["score"]) for r in rows if r["exercise"] == "(total)"}
    _, checks = summaries(report)
    for question in ("qc_gqa_savings", "qc_kv_cache_gib", "qc_cache_reads"):
        answered = {r["student"] for r in rows if r["exercise"] == question
                    and "no_record" not in r["flags"]}
        got = {r["student"]: float(r["score"]) for r in rows if r["exercise"] == question}
        students = sorted(answered)
        right = np.array([got[s] == 1.0 for s in students], dtype=int)
        rest = np.array([total[s] - got[s] for s in students])
        summary = checks[("06-gqa", question)]
        assert summary.point_biserial == pytest.approx(
            stats.pointbiserialr(right, rest).statistic, abs=1e-12)
        assert summary.upper_lower == pytest.approx(_independent_upper_lower(right, rest))


def test_reteach_puts_the_most_common_misconceptions_first(synthetic, report):
    (broken,) = [i for i in synthetic.plan.items if i.broken]
    first, *rest = report.reteach
    assert (first.item, first.kind, first.students, first.of) == (broken.item, "distractor",
                                                                  N // 2, N)
    answered = N - N // 24
    assert [(r.kind, r.students, r.of) for r in rest] == [("slip", N // 4, answered)] * 4
    order = [i.item for i in synthetic.plan.items]
    assert [order.index(r.item) for r in rest] == sorted(order.index(r.item) for r in rest)


def test_the_grid_and_hidden_names(synthetic, report):
    labels = pseudonyms(synthetic.plan.students)
    assert len(report.grid) == N and len(report.grid_columns) == 9
    rows = {row.label: row for row in report.grid}
    weakest, strongest = synthetic.plan.students[0], synthetic.plan.students[-1]
    assert {c.outcome for c in rows[labels[weakest]].cells} == {"blank"}
    assert {c.outcome for c in rows[labels[strongest]].cells} == {"passed"}
    from mhalib.classroom.report.page import render

    page = render(report)
    assert not any(student in page for student in synthetic.plan.students)


def _gradebook_rows(db: str) -> list[tuple]:
    query = """SELECT sa.student_id, n.name, bc.name, g.auto_score, g.manual_score,
               g.extra_credit, g.needs_manual_grade, c.auto_comment
               FROM grade g JOIN submitted_notebook sn ON g.notebook_id = sn.id
               JOIN submitted_assignment sa ON sn.assignment_id = sa.id
               JOIN notebook n ON sn.notebook_id = n.id JOIN base_cell bc ON g.cell_id = bc.id
               LEFT JOIN base_cell sc ON sc.name = bc.name AND sc.notebook_id = bc.notebook_id
                    AND sc.type = 'SolutionCell'
               LEFT JOIN comment c ON c.notebook_id = sn.id AND c.cell_id = sc.id"""
    with closing(sqlite3.connect(db)) as connection:
        rows = connection.execute(query).fetchall()
        comments = connection.execute(
            "SELECT sa.student_id, bc.name, c.auto_comment FROM comment c "
            "JOIN submitted_notebook sn ON c.notebook_id = sn.id JOIN submitted_assignment sa "
            "ON sn.assignment_id = sa.id JOIN base_cell bc ON c.cell_id = bc.id").fetchall()
    return sorted(map(repr, rows)) + sorted(map(repr, comments))


def test_the_fast_gradebook_is_the_graders(tmp_path):
    plan = make_plan(24, ["01-single-head"])
    models = load_models(plan.assignments)
    results = build_results(plan, models)
    fast = tmp_path / "fast"
    write_results(fast, results, models)
    slow = CourseLayout.at(tmp_path / "slow")
    slow.root.mkdir()
    model = models["01-single-head"]
    from mhalib.grading.gradebook import ensure_assignment

    ensure_assignment(slow.db_url, model)
    writer = ResultWriter(slow, {model.notebook: model})
    for result in results["01-single-head"]:
        writer.write(result)
    writer.close()
    assert _gradebook_rows(str(fast / "gradebook.db")) == _gradebook_rows(
        str(slow.root / "gradebook.db"))
    assert final_scores(f"sqlite:///{fast / 'gradebook.db'}", "01-single-head") == \
        final_scores(slow.db_url, "01-single-head")  # nbgrader's API reads it alike
