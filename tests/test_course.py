"""The course manifest (mhalib.course) against the contract (../shared/curriculum.md), the
instructor sources (solutions/) and the modules each lesson must have: drift fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import nbformat
import pytest

from mhalib import course

REPO = Path(__file__).resolve().parent.parent
CURRICULUM = REPO.parent / "shared" / "curriculum.md"
ROW = re.compile(r"^\| `(?P<assignment>[^`]+)` \| `(?P<notebook>[^`]+)` \| (?P<exercises>.+) \|$")


def contract_lessons() -> dict[str, tuple[str, list[str]]]:
    """assignment -> (notebook, exercise names) from the contract's lesson table."""
    if not CURRICULUM.is_file():
        pytest.skip(f"{CURRICULUM} is not beside this checkout (it is in CI and for developers)")
    rows = {}
    for line in CURRICULUM.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line.strip())
        if match:
            rows[match["assignment"]] = (match["notebook"],
                                         re.findall(r"`([^`]+)`", match["exercises"]))
    assert rows, f"no lesson table found in {CURRICULUM}"
    return rows


def graded_cells(assignment: str) -> list[dict]:
    lesson = course.lesson(assignment)
    notebook = nbformat.read(str(REPO / "solutions" / assignment / lesson.notebook), as_version=4)
    return [cell.metadata["nbgrader"] for cell in notebook.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id")]


def test_manifest_lists_the_contract_lessons_in_order():
    contract = contract_lessons()
    assert course.assignments() == list(contract)


@pytest.mark.parametrize("lesson", course.LESSONS, ids=lambda lesson: lesson.assignment)
def test_notebook_and_exercises_follow_the_contract(lesson):
    notebook, exercises = contract_lessons()[lesson.assignment]
    assert lesson.notebook == notebook
    assert list(lesson.exercise_names) == exercises


@pytest.mark.parametrize("lesson", course.LESSONS, ids=lambda lesson: lesson.assignment)
def test_solutions_grade_ids_follow_the_manifest(lesson):
    cells = graded_cells(lesson.assignment)
    answers = [c["grade_id"] for c in cells if c.get("solution") and not c.get("grade")
               and not c["grade_id"].startswith("qc_")]
    exercise_answers = [a for a in answers if a in lesson.exercises]
    assert exercise_answers == list(lesson.exercise_names), "answer cells out of order or missing"
    tests = [c["grade_id"] for c in cells if c.get("grade")]
    for name in lesson.exercise_names:
        assert any(t.startswith(f"test_{name}") for t in tests), f"no test cell for {name}"
    for grade_id in tests:
        assert grade_id.startswith(("test_", "qc_")), grade_id


@pytest.mark.parametrize("lesson", course.LESSONS, ids=lambda lesson: lesson.assignment)
def test_every_lesson_has_its_modules(lesson):
    checkers = importlib.import_module(lesson.checker).EXERCISES
    assert set(checkers) == set(lesson.exercise_names)
    for name in lesson.exercise_names:
        assert checkers[name].assignment == lesson.assignment
    questions = importlib.import_module(lesson.quiz).QUESTIONS
    assert questions
    from tests.checkout import COURSE, keys_of

    assert (COURSE.keys / lesson.quick_check_keys).is_file()
    assert set(keys_of(lesson.assignment)) == set(questions)
    importlib.import_module(lesson.viz)
    for name, module in lesson.exercises.items():
        assert callable(getattr(importlib.import_module(module), name)), (module, name)


def test_answer_key_reexports_every_exercise():
    import mhalib.reference as reference

    assert sorted(dir(reference)) == sorted(course.exercise_names())
    with pytest.raises(AttributeError, match="no exercise function 'nope'"):
        reference.nope  # noqa: B018


def test_unknown_names_are_refused_by_name():
    with pytest.raises(ValueError, match="assignment='99-x'"):
        course.lesson("99-x")
    with pytest.raises(ValueError, match="exercise='nope'"):
        course.lesson_of_exercise("nope")
    with pytest.raises(ValueError, match="framework='jax'"):
        course.Lesson("99-x", "x.ipynb", "X", {}, "jax")
