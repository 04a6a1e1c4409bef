"""Pieces of the report that need no class: score bins, the re-teach ranking, pseudonyms."""

from __future__ import annotations

import pytest

from mhalib.classroom.report.build import score_distribution
from mhalib.classroom.report.exercises import ExerciseSummary, MistakeRow
from mhalib.classroom.report.grid import pseudonyms
from mhalib.classroom.report.quick_checks import Choice, QuickCheckSummary
from mhalib.classroom.report.reteach import reteach


def test_score_bins_one_point_wide_up_to_20_then_tenths():
    small = score_distribution([0, 0.5, 3, 11, 11], 11)
    assert [(lo, hi) for lo, hi, _ in small.bins][:2] == [(0, 1), (1, 2)]
    assert len(small.bins) == 11 and small.bins[-1] == (10, 11, 2)  # the maximum counts
    assert (small.mean, small.median) == (5.1, 3)
    big = score_distribution([0, 49, 50, 100], 100)
    assert [n for *_, n in big.bins] == [1, 0, 0, 0, 1, 1, 0, 0, 0, 1]
    assert score_distribution([], 11).students == 0


def _exercise(name, *counts):
    rows = [MistakeRow(name, f"m{i}", n, n / 10, 1, 3, "msg") for i, n in enumerate(counts)]
    return ExerciseSummary("01-single-head", name, 10, 3, 1, {}, 0, rows, [])


def test_reteach_ranks_by_students_then_share_then_course_order():
    check = QuickCheckSummary("01-single-head", "qc_x", "multiple_choice", "?", 10, 5, 2, 0.4,
                              None, None, [Choice(0, "key", True, 2, 0.4, 1),
                                           Choice(1, "d1", False, 3, 0.6, 0),
                                           Choice(2, "d2", False, 0, 0.0, 0)])
    ranked = reteach([_exercise("softmax", 3, 1), _exercise("attention", 4)], [check], top=4)
    assert [(r.item, r.name, r.students) for r in ranked] == [
        ("attention", "m0", 4), ("qc_x", "d1", 3),  # 3 of 5 answered before 3 of 10
        ("softmax", "m0", 3), ("softmax", "m1", 1)]
    assert reteach([_exercise("softmax", 3)], [], top=0) == []
    with pytest.raises(ValueError, match="top=-1"):
        reteach([], [], top=-1)


def test_pseudonyms_are_stable_and_say_nothing_of_the_roster_order():
    students = [f"student-{i:02d}" for i in range(12)]
    labels = pseudonyms(students)
    assert sorted(labels.values()) == [f"S{i:03d}" for i in range(1, 13)]
    assert labels == pseudonyms(list(reversed(students)))
    assert [labels[s] for s in students] != sorted(labels.values())
    assert pseudonyms(students, names=True)["student-03"] == "student-03"


def test_results_written_before_responses_were_kept_still_count():
    from mhalib.classroom.report.quick_checks import UNRECOGNISED, summarise_quick_check
    from mhalib.classroom.report.reading import GradedAssignment, StudentWork
    from mhalib.grading.records import ItemVerdict
    from mhalib.quiz import get_question
    from mhalib.quiz.keys import instructor_keys, parse_key
    from tests.checkout import COURSE

    def work(student, passed, flags=()):
        verdict = ItemVerdict("quick_check", "qc_weights_shape", passed, float(passed), "d",
                              flags=list(flags), max_points=1, points=float(passed))
        return StudentWork(student, "01-single-head", {"qc_weights_shape": verdict},
                           item_scores={"qc_weights_shape": float(passed)}, total=3.0 + passed)

    graded = GradedAssignment("01-single-head", [work("a", True), work("b", False),
                                                 work("c", False, ["no_record"])], [],
                              ["qc_weights_shape"])
    question = get_question("qc_weights_shape")
    key = parse_key(question, instructor_keys("01-single-head", COURSE.keys)["qc_weights_shape"])
    summary = summarise_quick_check(graded, "qc_weights_shape", question, key)
    assert (summary.students, summary.answered, summary.right) == (3, 2, 1)
    counts = {c.choice: c.count for c in summary.choices}
    assert counts[0] == 1 and counts[UNRECOGNISED] == 1  # right: the key; wrong: unknown
    assert summary.unpicked == []  # which distractor was picked is not known


def test_stems():
    from mhalib.classroom.report.output import report_stem

    assert report_stem(["01-single-head"], every_graded=True) == "01-single-head"
    assert report_stem(["01-single-head", "05-flops"], every_graded=True) == "class"
    assert report_stem(["05-flops", "01-single-head"], every_graded=False) == \
        "05-flops+01-single-head"
