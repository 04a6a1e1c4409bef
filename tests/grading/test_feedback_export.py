"""Learner feedback hides tests and solutions; exports flag what could not be graded."""

from __future__ import annotations

import csv
import html
import re

from mhalib.grading.answered_notebook import answer_sources
from mhalib.grading.flags import REVIEW
from tests.grading.conftest import ASSIGNMENT, SOURCE


def _pages(catalogue_run):
    return sorted((catalogue_run["course"] / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))


def _solution_lines(model) -> set[str]:
    """Lines of the instructor's answers, less those the checkers' own hints quote (a mistake's
    message may say "d_k = q.shape[-1]"; that is advice the learner is meant to read)."""
    from mhalib.checks.registry import get_exercise

    hints = " ".join(m.message for name in model.exercises
                     for m in get_exercise(name).mistakes())
    lines = set()
    for source in answer_sources(model).values():
        lines |= {line.strip() for line in source.splitlines()
                  if len(line.strip()) > 12 and not line.strip().startswith(('"""', "def "))}
    return {line for line in lines if line not in hints}


def test_every_student_gets_feedback(catalogue_run):
    students = {page.parent.parent.name for page in _pages(catalogue_run)}
    assert students == set(catalogue_run["results"])


def test_feedback_never_shows_hidden_tests_or_solutions(catalogue_run, fixture_model):
    hidden = re.compile(r"HIDDEN-TEST-MARKER|BEGIN HIDDEN|BEGIN SOLUTION|check\(")
    secret_lines = _solution_lines(fixture_model)
    source_text = (SOURCE / ASSIGNMENT / fixture_model.notebook).read_text()
    assert "HIDDEN-TEST-MARKER" in source_text and secret_lines
    for page in _pages(catalogue_run):
        text = html.unescape(page.read_text(encoding="utf-8"))
        assert not hidden.search(text), page
        # a diagnosis may quote the learner's own line back ("in your line `...`"): a line the
        # submission itself holds is not leaked, even where it is also the instructor's
        student = page.parent.parent.name
        own = "".join(p.read_text(errors="replace") for p in
                      (catalogue_run["submitted"] / student).rglob("*.ipynb"))
        leaked = [line for line in secret_lines if line in text and line not in own]
        assert not leaked, (page, leaked)


def test_feedback_names_results_and_reasons(catalogue_run):
    feedback = catalogue_run["course"] / "feedback"
    partly = html.unescape((feedback / "partly-wrong" / ASSIGNMENT /
                            "single_head_attention.html").read_text())
    assert "softmax" in partly and "not passed" in partly and "maximum" in partly
    crashed = html.unescape((feedback / "kills-own-kernel" / ASSIGNMENT /
                             "single_head_attention.html").read_text())
    assert "kernel_died" in crashed and "SIGKILL" in crashed
    broken = html.unescape((feedback / "invalid-json" / ASSIGNMENT /
                            "single_head_attention.html").read_text())
    assert "not valid JSON" in broken


def test_learner_strings_are_escaped(catalogue_run):
    page = (catalogue_run["course"] / "feedback" / "reads-outside" / ASSIGNMENT /
            "single_head_attention.html")
    if page.exists():
        assert "<script" not in page.read_text().lower()


def test_exports_flag_instead_of_bare_zero(catalogue_run):
    exports = catalogue_run["course"] / "exports"
    rows = list(csv.DictReader(open(exports / f"{ASSIGNMENT}.csv", encoding="utf-8")))
    course_rows = list(csv.DictReader(open(exports / "course.csv", encoding="utf-8")))
    assert rows == course_rows
    assert {"student", "exercise", "score", "max_score", "flags"} <= set(rows[0])
    by_key = {(r["student"], r["exercise"]): r for r in rows}
    for student, flag in [("invalid-json", "invalid_notebook"), ("too-large", "too_large"),
                          ("missing-notebook", "missing_notebook"), ("os-exit", "kernel_died"),
                          ("ignores-alarm-hangs", "timeout")]:
        row = by_key[(student, "attention")]
        assert float(row["score"]) == 0 and flag in row["flags"].split(), row
        assert row["needs_review"] == "yes"
        assert flag in by_key[(student, "(total)")]["flags"].split()
    assert by_key[("correct", "(total)")]["flags"] == ""
    assert by_key[("correct", "explain_scaling")]["flags"] == "manual_pending"
    for row in rows:
        if float(row["score"] or 0) == 0 and row["kind"] == "exercise":
            assert row["flags"] or row["diagnosis"], row  # every zero says why
        if row["needs_review"] == "yes":
            assert set(row["flags"].split()) & REVIEW
