"""Helpers of the tests that hold every hint to the truth.

Each lesson's test module checks its hints one by one: a hint that states a number, a shape or
the outcome of a step is quoted (:func:`says`, so that rewording the hint brings the test back
to it) and the statement is recomputed; the last hint of every exercise, nearly the answer, is
followed literally in a function that must pass the exercise's checker (:func:`passes`).
"""

from __future__ import annotations

import re

import pytest

from mhalib.checks import CheckFailed, check
from mhalib.hints import ladder


def normalise(text: str) -> str:
    """Text without backticks or whitespace: how a snippet is looked for in a hint."""
    return re.sub(r"\s+", "", text.replace("`", ""))


def rung(exercise: str, number: int) -> str:
    """Hint ``number`` (1 = the nudge) of ``exercise``; ``-1`` is the last."""
    rungs = ladder(exercise)
    return rungs[number - 1] if number > 0 else rungs[number]


def says(exercise: str, number: int, *snippets: str) -> None:
    """Hint ``number`` of ``exercise`` contains every snippet (ignoring spaces and backticks)."""
    text = rung(exercise, number)
    for snippet in snippets:
        assert normalise(snippet) in normalise(text), (
            f"hint {number} of {exercise} no longer says {snippet!r}:\n{text}")


def passes(exercise: str, func, seeds=(0, 1)) -> None:
    """``func`` passes the visible and the hidden checks of ``exercise`` on a few seeds."""
    for suite in ("visible", "hidden"):
        for seed in seeds:
            try:
                check(exercise, func, suite=suite, seed=seed, quiet=True)
            except CheckFailed as failure:
                pytest.fail(f"following the last hint of {exercise} fails its {suite} check "
                            f"(seed {seed}): {failure}")
