"""The ladders: one for every exercise of the manifest, found through it, held to the format."""

from __future__ import annotations

import sys
import types

import pytest

from mhalib import course
from mhalib.hints import NoHints, hint, ladder, ladders
from mhalib.hints.ladder import MAX_RUNGS, MIN_RUNGS, check_ladder


@pytest.mark.parametrize("exercise", course.exercise_names())
def test_every_exercise_of_the_manifest_has_2_to_4_hints(exercise):
    rungs = ladder(exercise)
    assert MIN_RUNGS <= len(rungs) <= MAX_RUNGS
    assert all(isinstance(rung, str) and rung.strip() for rung in rungs)
    assert len(set(rungs)) == len(rungs)


def test_each_lesson_module_is_named_by_the_manifest_and_holds_only_its_exercises():
    for lesson in course.LESSONS:
        assert lesson.hints == f"mhalib.hints.lesson{lesson.number}"
        module = __import__(lesson.hints, fromlist=["HINTS"])
        assert list(module.HINTS) == list(lesson.exercises), lesson.assignment
    assert list(ladders()) == course.exercise_names()


@pytest.fixture
def lesson_99(monkeypatch):
    """A lesson added to the manifest, with its hints module (as lesson 12 will come)."""
    lesson = course.Lesson("99-extra", "extra.ipynb", "Extra", {"extra_step": "x", "other": "x"},
                           "torch")
    module = types.ModuleType(lesson.hints)
    module.HINTS = {"extra_step": ("Look at the shapes.", "Nearly the answer.")}
    monkeypatch.setattr(course, "LESSONS", (*course.LESSONS, lesson))
    monkeypatch.setitem(sys.modules, lesson.hints, module)
    return module


def test_a_new_lesson_in_the_manifest_is_picked_up(lesson_99):
    assert ladder("extra_step") == ("Look at the shapes.", "Nearly the answer.")
    assert "extra_step" in ladders() and "other" not in ladders()
    with pytest.raises(NoHints, match="mhalib.hints.lesson99 has no hints for it"):
        ladder("other")


def test_a_lesson_without_a_hints_module_has_no_hints(monkeypatch):
    lesson = course.Lesson("98-bare", "bare.ipynb", "Bare", {"bare_step": "x"}, "torch")
    monkeypatch.setattr(course, "LESSONS", (*course.LESSONS, lesson))
    with pytest.raises(NoHints, match=r"lesson 98-bare has no hints yet \(mhalib.hints.lesson98"):
        ladder("bare_step")
    assert "bare_step" not in ladders()


def test_a_hint_for_an_exercise_of_another_lesson_is_refused(lesson_99):
    lesson_99.HINTS["attention"] = ("a", "b")
    with pytest.raises(ValueError, match=r"names \['attention'\], which are not exercises of "
                                         "99-extra"):
        ladder("extra_step")


@pytest.mark.parametrize("rungs,says", [
    (("only one",), "must hold 2 to 4 hints, got 1"),
    (("1", "2", "3", "4", "5"), "must hold 2 to 4 hints, got 5"),
    ("a string", "must hold 2 to 4 hints, got str"),
    (("fine", "  "), "hint 2 must be non-empty text"),
    (("fine", 3), "hint 2 must be non-empty text, got 3"),
])
def test_malformed_ladders_are_refused_with_what_is_wrong(rungs, says):
    with pytest.raises(ValueError, match=f"HINTS\\['x'\\] {says}"):
        check_ladder("x", rungs)


def test_an_unknown_name_lists_the_exercises_and_guesses():
    with pytest.raises(ValueError) as error:
        hint("atention")
    message = str(error.value)
    assert "exercise='atention' is not an exercise of the course" in message
    assert "Did you mean 'attention'?" in message and "split_heads" in message
    with pytest.raises(TypeError, match="exercise=3 must be an exercise name"):
        ladder(3)


def test_hint_is_exported_where_the_lessons_import_check():
    from mhalib.checks import hint as exported

    assert exported is hint
