"""The course manifest (mhalib.course) against the contract (../shared/curriculum.md), the
instructor sources (solutions/) and the modules each lesson must have: drift fails here.

The contract has two lesson tables: the landed lessons (names in backquotes) and, under
"### Lessons in progress", lessons specified but not necessarily built yet (plain names). A
lesson in progress may be absent from the manifest; once present it must match its row
exactly, and it comes after the landed lessons, in the order of its table."""

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
IN_PROGRESS_HEADING = "### Lessons in progress"
PLAIN_ROW = re.compile(r"^\| (?P<assignment>\d\d-[a-z0-9-]+) \| (?P<notebook>[\w.-]+\.ipynb) \| "
                       r"(?P<exercises>[\w, ]+) \|$")


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


def in_progress_lessons() -> dict[str, tuple[str, list[str]]]:
    """assignment -> (notebook, exercise names) from the contract's "Lessons in progress"
    table (the rows between that heading and the next one)."""
    contract_lessons()  # skips when the contract is not beside this checkout
    lines = CURRICULUM.read_text(encoding="utf-8").splitlines()
    assert IN_PROGRESS_HEADING in lines, f"no {IN_PROGRESS_HEADING!r} section in {CURRICULUM}"
    rows = {}
    for line in lines[lines.index(IN_PROGRESS_HEADING) + 1:]:
        if line.startswith("#"):
            break
        match = PLAIN_ROW.match(line.strip())
        if match:
            rows[match["assignment"]] = (match["notebook"],
                                         [name.strip() for name in match["exercises"].split(",")])
    return rows


def contract_row(assignment: str) -> tuple[str, list[str]]:
    """The contract's row of a lesson in the manifest: landed, or in progress."""
    landed, in_progress = contract_lessons(), in_progress_lessons()
    assert assignment in landed or assignment in in_progress, (
        f"{assignment} is in the manifest but in neither table of the contract")
    return landed.get(assignment) or in_progress[assignment]


def graded_cells(assignment: str) -> list[dict]:
    lesson = course.lesson(assignment)
    notebook = nbformat.read(str(REPO / "solutions" / assignment / lesson.notebook), as_version=4)
    return [cell.metadata["nbgrader"] for cell in notebook.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id")]


def test_manifest_lists_the_contract_lessons_in_order():
    """Every landed lesson, in order; then those in progress that are built, in their order."""
    landed, in_progress = contract_lessons(), in_progress_lessons()
    assert not set(landed) & set(in_progress), "a lesson is in both tables of the contract"
    built = [a for a in in_progress if a in course.assignments()]
    assert course.assignments() == list(landed) + built


def test_the_in_progress_table_is_read():
    """The parser finds the rows of the in-progress table (an empty table would make the
    checks above pass without looking)."""
    text = CURRICULUM.read_text(encoding="utf-8") if CURRICULUM.is_file() else ""
    section = text.split(IN_PROGRESS_HEADING, 1)[-1].split("\n#", 1)[0]
    data_rows = [line for line in section.splitlines() if line.startswith("| ")
                 and not line.startswith("| assignment") and not line.startswith("|---")]
    assert len(in_progress_lessons()) == len(data_rows)


@pytest.mark.parametrize("lesson", course.LESSONS, ids=lambda lesson: lesson.assignment)
def test_notebook_and_exercises_follow_the_contract(lesson):
    notebook, exercises = contract_row(lesson.assignment)
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
