"""The gradebook after grading: nbgrader reads it, a re-run keeps hand grades, backups exist."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys

from mhalib.grading.gradebook import integrity_check, open_gradebook
from tests.grading.conftest import ASSIGNMENT, SOURCE, TEST_LIMITS, read_results


def _copy_course(catalogue_run, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(catalogue_run["course"], course)
    return course, f"sqlite:///{course / 'gradebook.db'}"


def test_rerun_keeps_hand_grades_and_backs_up(catalogue_run, tmp_path):
    from mhalib.cli import main

    course, db_url = _copy_course(catalogue_run, tmp_path)
    with open_gradebook(db_url) as gradebook:
        grade = gradebook.find_grade("test_softmax", "single_head_attention", ASSIGNMENT,
                                     "partly-wrong")
        grade.manual_score = 1.5
        comment = gradebook.find_comment("softmax", "single_head_attention", ASSIGNMENT,
                                         "partly-wrong")
        comment.manual_comment = "Talked about the max shift in class."
        manual = gradebook.find_grade("explain_scaling", "single_head_attention", ASSIGNMENT,
                                      "correct")
        manual.manual_score = 1.0
        gradebook.db.commit()
    backups = course / "backups"
    before = set(os.listdir(backups)) if backups.is_dir() else set()
    code = main(["grade", "--assignment", ASSIGNMENT, str(catalogue_run["submitted"]),
                 "--source", str(SOURCE), "--course", str(course), "--student", "partly-wrong",
                 "--student", "correct", "--seed", "99", "--no-progress", *TEST_LIMITS])
    assert code == 0
    assert len(set(os.listdir(backups)) - before) == 1
    with open_gradebook(db_url) as gradebook:
        grade = gradebook.find_grade("test_softmax", "single_head_attention", ASSIGNMENT,
                                     "partly-wrong")
        assert grade.manual_score == 1.5 and grade.needs_manual_grade
        assert 0 < grade.auto_score < grade.max_score
        comment = gradebook.find_comment("softmax", "single_head_attention", ASSIGNMENT,
                                         "partly-wrong")
        assert comment.manual_comment == "Talked about the max shift in class."
        assert gradebook.find_grade("explain_scaling", "single_head_attention", ASSIGNMENT,
                                    "correct").manual_score == 1.0
    assert integrity_check(db_url) == "ok"
    results = read_results(course)
    assert results["partly-wrong"]["seed"] != catalogue_run["results"]["partly-wrong"]["seed"]
    rows = list(csv.DictReader(open(course / "exports" / f"{ASSIGNMENT}.csv")))
    row = next(r for r in rows if r["student"] == "correct" and r["exercise"] == "(total)")
    assert float(row["score"]) == 7.0  # 6 automatic points + the hand-graded one


def test_nbgrader_export_reads_our_gradebook(catalogue_run, tmp_path):
    course, db_url = _copy_course(catalogue_run, tmp_path)
    target = tmp_path / "grades.csv"
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep
           + os.environ.get("PATH", "")}
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export", f"--db={db_url}",
                           f"--to={target}"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(target))}
    assert float(rows["correct"]["score"]) == 6.0 and float(rows["correct"]["max_score"]) == 7.0
    assert float(rows["invalid-json"]["score"]) == 0.0


def test_flagged_notebooks_need_manual_review(catalogue_run):
    db_url = f"sqlite:///{catalogue_run['course'] / 'gradebook.db'}"
    with open_gradebook(db_url) as gradebook:
        def needs(student):
            submission = gradebook.find_submission_notebook("single_head_attention",
                                                            ASSIGNMENT, student)
            return {g.name: g.needs_manual_grade for g in submission.grades}
        assert needs("invalid-json")["test_softmax"]
        assert needs("kills-own-kernel")["test_attention"]
        assert not needs("correct")["test_softmax"]
        assert needs("correct")["explain_scaling"]  # a written answer always needs a human


def test_one_grading_run_writes_a_course_at_a_time(tmp_path):
    import pytest

    from mhalib.grading.pipeline import course_lock

    with course_lock(tmp_path):
        with pytest.raises(ValueError, match="another `mhalib grade`"):
            with course_lock(tmp_path):
                pass
    with course_lock(tmp_path):  # released again
        pass


def test_a_new_gradebook_needs_no_activated_environment_and_leaves_path_alone(tmp_path,
                                                                               monkeypatch):
    """nbgrader runs ``alembic`` from PATH to create a gradebook; the environment's bin/ is put
    first only while it does."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with open_gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        assert gradebook.students == []
    assert os.environ["PATH"] == "/usr/bin:/bin"
