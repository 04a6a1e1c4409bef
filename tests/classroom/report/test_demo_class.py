"""The report of the demo class (grading/examples/submitted, graded by ``mhalib grade``),
checked against numbers worked out by hand from the README's description of the seven students:

    ada    correct everywhere                                       11
    bert   softmax without the max shift (1.5 of 3), and so his      8
           attention (no_max_shift, 1.5 of 3); quick checks right
    cleo   the same softmax (1.5); attention without the scale       2.5
           (no_scale, 1 of 3); every quick check wrong ("0", option 1)
    dev    blank: the release's stubs, no quick-check answer         0
    eve    hostile (integrity): softmax returns uniform weights       5
           (no name), attention named wrong_scale (0); checks right
    finn   unreadable notebook (invalid_notebook): nothing graded      0
    gus    kernel dies before the tests (kernel_died); checks right   5
"""

from __future__ import annotations

import csv
import json

import pytest

from mhalib.classroom.report.build import ReportOptions, build_report
from mhalib.classroom.report.grid import pseudonyms
from tests.classroom.report.conftest import REPO

pytestmark = pytest.mark.slow
STUDENTS = ["ada-correct", "bert-partly-wrong", "cleo-wrong", "dev-blank", "eve-hostile",
            "finn-broken", "gus-crashes"]


@pytest.fixture(scope="module")
def report(demo_course):
    return build_report(ReportOptions(course=demo_course["course"], source=REPO / "solutions"))


def test_grading_links_the_report(demo_course):
    assert demo_course["code"] == 0
    page = demo_course["course"] / "reports" / "01-single-head.html"
    assert f"class report: {page}" in demo_course["stdout"]
    assert page.is_file() and (page.parent / "01-single-head-mistakes.csv").is_file()


def test_exercise_outcomes(report):
    (assignment,) = report.assignments
    assert assignment.students == 7
    softmax, attention = assignment.exercises
    # softmax: ada passed; bert, cleo partial; eve failed; dev blank; finn, gus not graded
    assert softmax.counts == {"passed": 1, "partial": 2, "failed": 1, "blank": 1,
                              "not_graded": 2}
    assert attention.counts == softmax.counts  # eve's wrong_scale earns 0: failed
    assert softmax.flagged == attention.flagged == 3  # eve, finn, gus
    assert softmax.mean_points == pytest.approx((3 + 1.5 + 1.5) / 7)
    assert attention.mean_points == pytest.approx((3 + 1.5 + 1.0) / 7)


def test_named_mistakes_ranked_with_messages_prices_and_examples(report):
    softmax, attention = report.assignments[0].exercises
    assert [(m.mistake, m.students) for m in softmax.mistakes] == [("no_max_shift", 2)]
    (shift,) = softmax.mistakes
    assert shift.share == pytest.approx(2 / 7) and shift.price_points == 1.5
    assert shift.message.startswith("exp overflows for large logits")
    # bert's and cleo's softmax are the same code: one distinct example
    assert shift.examples == ["def softmax(x, axis=-1):\n    e = np.exp(x)\n"
                              "    return e / e.sum(axis=axis, keepdims=True)"]
    assert [(m.mistake, m.students, m.price_points) for m in attention.mistakes] == [
        ("no_max_shift", 1, 1.5), ("no_scale", 1, 1.0), ("wrong_scale", 1, 0.0)]
    no_scale = attention.mistakes[1]
    assert no_scale.message.startswith("the output matches attention without the 1/sqrt(d_k)")
    assert "scores = q @ np.swapaxes(k, -1, -2)" in no_scale.examples[0]
    # the failure with no name: eve's uniform softmax, with her (hostile) cell to read
    (eve,) = softmax.unnamed
    assert eve.outcome == "failed" and eve.diagnosis.startswith("softmax: wrong result")
    assert "np.ones_like(x) / x.shape[axis]" in eve.code
    assert attention.unnamed == []


def test_quick_checks(report):
    checks = {q.question: q for q in report.assignments[0].quick_checks}
    assert list(checks) == ["qc_log_softmax", "qc_scale_divisor", "qc_weights_shape",
                            "qc_weights_memory", "qc_shared_scale"]
    for q in checks.values():
        # answered by ada, bert, cleo, eve, gus; cleo wrong. Rest scores 10, 7, 2.5, 4, 4:
        # r_pb = 0.559017 (worked out in test_statistics.py); upper group ada, lower cleo: D 1
        assert (q.students, q.answered, q.right) == (7, 5, 4)
        assert q.facility == 0.8
        assert q.point_biserial == pytest.approx(0.5590169943749475)
        assert q.upper_lower == 1.0
        assert q.broken == []
    shape = checks["qc_weights_shape"]
    assert [(c.choice, c.count, c.key) for c in shape.choices] == [
        (0, 4, True), (1, 1, False), (2, 0, False), (3, 0, False)]
    assert shape.unpicked == ["Over the whole (N_k, N_q) array at once",
                              "Either axis: the product with v comes out the same"]
    memory = {c.choice: c.count for c in checks["qc_weights_memory"].choices}
    assert memory == {"right": 4, "tokens ** 2 * bytes_per_value / 10 ** 6": 0,
                      "tokens * bytes_per_value / 2 ** 20": 0, "tokens ** 2 / 2 ** 20": 0,
                      "other": 1}  # cleo's "0" is no known slip


def test_reteach_and_scores(report):
    assert [(r.item, r.name, r.students, r.of) for r in report.reteach] == [
        ("softmax", "no_max_shift", 2, 7),
        ("qc_weights_shape", "axis=-1, so that each row sums to 1", 1, 5),  # 20% before 14%
        ("attention", "no_max_shift", 1, 7), ("attention", "no_scale", 1, 7),
        ("attention", "wrong_scale", 1, 7)]
    assert report.reteach[0].section.title == "1 · From scores to weights: softmax"
    scores = report.assignments[0].scores
    assert (scores.mean, scores.median, scores.minimum, scores.maximum) == (4.5, 5.0, 0, 11)
    assert [(lo, n) for lo, _, n in scores.bins if n] == [(0, 2), (2, 1), (5, 2), (8, 1),
                                                          (10, 1)]


def test_grid_best_first_with_pseudonyms(report):
    labels = pseudonyms(STUDENTS)
    rows = {row.label: row for row in report.grid}
    assert [row.label for row in report.grid][0] == labels["ada-correct"]
    bert = rows[labels["bert-partly-wrong"]]
    assert [(c.outcome, c.mistake) for c in bert.cells] == [("partial", "no_max_shift")] * 2
    assert bert.totals == {"01-single-head": (8.0, 11.0)}
    assert [c.outcome for c in rows[labels["dev-blank"]].cells] == ["blank", "blank"]
    assert all(c.flagged for c in rows[labels["gus-crashes"]].cells)


def test_files_hide_names_unless_asked(demo_course, tmp_path):
    from mhalib.cli import main

    folder = demo_course["course"] / "reports"
    texts = [p.read_text(encoding="utf-8") for p in folder.iterdir()]
    for student in STUDENTS:
        assert not any(student in text for text in texts), student
    assert main(["report", "--course", str(demo_course["course"]), "--names", "--out",
                 str(tmp_path), "--no-progress"]) == 0
    named = (tmp_path / "01-single-head.html").read_text(encoding="utf-8")
    assert all(student in named for student in STUDENTS)


def test_csv_and_json_hold_the_page_numbers(demo_course):
    folder = demo_course["course"] / "reports"
    data = json.loads((folder / "01-single-head.json").read_text())
    assert data["format"] == "mhalib-class-report/1"
    rows = list(csv.DictReader(open(folder / "01-single-head-exercises.csv")))
    assert [(r["exercise"], r["passed"], r["partial"], r["failed"], r["blank"],
             r["not_graded"], r["flagged"]) for r in rows] == [
        ("softmax", "1", "2", "1", "1", "2", "3"), ("attention", "1", "2", "1", "1", "2", "3")]
    quick = {r["question"]: r for r in csv.DictReader(open(folder /
                                                          "01-single-head-quick-checks.csv"))}
    in_json = {q["question"]: q for q in data["assignments"][0]["quick_checks"]}
    assert float(quick["qc_log_softmax"]["point_biserial"]) == \
        in_json["qc_log_softmax"]["point_biserial"]
    page = (folder / "01-single-head.html").read_text()
    assert "0.56" in page and "What to re-teach" in page
    grid = list(csv.DictReader(open(folder / "01-single-head-grid.csv")))
    assert len(grid) == 14 and {r["outcome"] for r in grid} == {
        "passed", "partial", "failed", "blank", "not_graded"}
