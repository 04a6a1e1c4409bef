"""Reading a graded class: the gradebook's final scores, the stored results, the errors."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from mhalib.classroom.report.reading import check_assignments, graded_assignments, read_class
from mhalib.classroom.report.scores import read_scores
from mhalib.grading.gradebook import final_scores
from mhalib.grading.writer import CourseLayout

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def test_scores_read_with_sql_equal_nbgraders(synthetic):
    layout = CourseLayout.at(synthetic.course)
    scores = read_scores(layout.db_url, ["06-gqa"])
    expected = final_scores(layout.db_url, "06-gqa")
    assert len(scores) == len(expected) == 240
    for (student, notebook), cells in expected.items():
        got = scores[("06-gqa", student)]
        assert {cell: (v.score, v.max_score, v.manual) for (nb, cell), v in got.items()
                if nb == notebook} == {cell: (v["score"], v["max_score"], v["manual"])
                                       for cell, v in cells.items()}


def test_a_hand_grade_counts_in_totals_and_rest_scores(synthetic, tmp_path):
    import shutil

    course = tmp_path / "course"
    shutil.copytree(synthetic.course, course)
    with closing(sqlite3.connect(course / "gradebook.db")) as connection, connection:
        connection.execute(
            "UPDATE grade SET manual_score = 0.5, extra_credit = 0.25 WHERE id IN (SELECT g.id "
            "FROM grade g JOIN submitted_notebook sn ON g.notebook_id = sn.id JOIN "
            "submitted_assignment sa ON sn.assignment_id = sa.id JOIN base_cell bc ON "
            "g.cell_id = bc.id WHERE sa.student_id = 'learner-239' AND bc.name = "
            "'qc_gqa_savings')")
    (graded,) = read_class(course, ["06-gqa"])
    work = next(w for w in graded.students if w.student == "learner-239")
    assert work.item_scores["qc_gqa_savings"] == 0.75
    assert work.total == pytest.approx(sum(v.points for v in work.verdicts.values()) - 0.25)
    assert work.rest_score("qc_gqa_savings") == pytest.approx(work.total - 0.75)
    assert work.max_total == 16.0


def test_assignments_are_checked_and_named(synthetic, tmp_path):
    assert graded_assignments(synthetic.course) == ["01-single-head", "05-flops", "06-gqa"]
    assert check_assignments(None, synthetic.course) == graded_assignments(synthetic.course)
    assert check_assignments(["06-gqa", "01-single-head", "06-gqa"], synthetic.course) == [
        "06-gqa", "01-single-head"]
    with pytest.raises(ValueError, match=r"assignment='02-multi-head' has no graded results .*"
                       r"graded assignments: 01-single-head, 05-flops, 06-gqa"):
        check_assignments(["02-multi-head"], synthetic.course)
    with pytest.raises(ValueError, match="no graded assignment"):
        check_assignments(None, tmp_path)


def test_stray_files_are_skipped(synthetic, tmp_path):
    import shutil

    course = tmp_path / "course"
    shutil.copytree(synthetic.course, course)
    stray = CourseLayout.at(course).results / "05-flops" / "someone" / "notes.json"
    stray.parent.mkdir()
    stray.write_text("{not json")
    (graded,) = read_class(course, ["05-flops"])
    assert len(graded.students) == 240
    assert graded.exercises == ["mha_flops", "crossover_seq_len", "mha_param_count"]
    assert graded.quick_checks == ["qc_causal_skip", "qc_decode_step", "qc_block_crossover",
                                   "qc_mfu"]
