"""The hint ladders, found through the course manifest.

Each lesson's ladders are ``HINTS`` in ``mhalib.hints.lessonNN``
(:attr:`mhalib.course.Lesson.hints`): exercise name -> a tuple of 2 to 4 hints, plain text
(markdown allowed), from a nudge to nearly the answer. A lesson whose module does not exist yet
simply has no hints; a module that exists is held to that format here, so a malformed ladder
fails loudly instead of showing half a hint.
"""

from __future__ import annotations

import difflib
import importlib
from types import ModuleType

from mhalib import course

MIN_RUNGS, MAX_RUNGS = 2, 4


class NoHints(LookupError):
    """An exercise of the course that has no hint ladder (yet)."""


def lesson_of(exercise: str) -> course.Lesson:
    """The lesson of ``exercise``; an unknown name is a ValueError that lists the known ones."""
    if not isinstance(exercise, str):
        raise TypeError(f"exercise={exercise!r} must be an exercise name (a str), e.g. "
                        f"hint('attention')")
    try:
        return course.lesson_of_exercise(exercise)
    except ValueError:
        names = course.exercise_names()
        close = difflib.get_close_matches(exercise, names, n=1)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"exercise={exercise!r} is not an exercise of the course.{guess} "
                         f"The exercises: {', '.join(names)}") from None


def hints_module(lesson: course.Lesson) -> ModuleType | None:
    """``mhalib.hints.lessonNN`` of ``lesson``, or None when the lesson has no hints module."""
    try:
        return importlib.import_module(lesson.hints)
    except ModuleNotFoundError as error:
        if error.name != lesson.hints:
            raise
        return None


def check_ladder(exercise: str, rungs) -> tuple[str, ...]:
    """``rungs`` as a tuple, after checking the format (2 to 4 non-empty strings)."""
    if not isinstance(rungs, (tuple, list)) or not MIN_RUNGS <= len(rungs) <= MAX_RUNGS:
        count = len(rungs) if isinstance(rungs, (tuple, list)) else type(rungs).__name__
        raise ValueError(f"HINTS[{exercise!r}] must hold {MIN_RUNGS} to {MAX_RUNGS} hints, "
                         f"got {count}")
    for number, rung in enumerate(rungs, start=1):
        if not isinstance(rung, str) or not rung.strip():
            raise ValueError(f"HINTS[{exercise!r}] hint {number} must be non-empty text, got "
                             f"{rung!r}")
    return tuple(rungs)


def ladder(exercise: str) -> tuple[str, ...]:
    """The hints of ``exercise``, nudge first (raises :class:`NoHints` when it has none)."""
    lesson = lesson_of(exercise)
    module = hints_module(lesson)
    if module is None:
        raise NoHints(f"exercise={exercise!r}: lesson {lesson.assignment} has no hints yet "
                      f"({lesson.hints} does not exist)")
    table = getattr(module, "HINTS", None)
    if not isinstance(table, dict):
        raise ValueError(f"{lesson.hints} must define HINTS, a dict of exercise name -> hints")
    strangers = sorted(set(table) - set(lesson.exercises))
    if strangers:
        raise ValueError(f"{lesson.hints}: HINTS names {strangers}, which are not exercises of "
                         f"{lesson.assignment} ({', '.join(lesson.exercises)})")
    if exercise not in table:
        raise NoHints(f"exercise={exercise!r}: {lesson.hints} has no hints for it")
    return check_ladder(exercise, table[exercise])


def ladders() -> dict[str, tuple[str, ...]]:
    """Every exercise of the course that has a ladder, in course order."""
    found = {}
    for lesson in course.LESSONS:
        module = hints_module(lesson)
        table = getattr(module, "HINTS", {}) if module is not None else {}
        found.update({name: ladder(name) for name in lesson.exercises if name in table})
    return found
