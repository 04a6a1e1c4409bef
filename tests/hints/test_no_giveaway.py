"""No hint before the last gives the answer away; the last one nearly does.

The rule and its two halves (the answer key's own expressions, and the hand-written decisive
patterns of each exercise) are explained in tests/hints/giveaways.py.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from functools import cache

import pytest

from mhalib import course
from mhalib.hints import ladder
from tests.checkout import REPO
from tests.hints.claims import normalise
from tests.hints.giveaways import GIVEAWAYS, MIN_EXPRESSION_CHARS

EXERCISES = course.exercise_names()


@cache
def solution_code(exercise: str) -> str:
    """The lines of the answer key between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in
    the answer cell (grade_id = exercise) of the lesson's solutions notebook, dedented."""
    for cell in _notebook(exercise)["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == exercise:
            source = "".join(cell["source"])
            inside = source.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
            return textwrap.dedent(inside.split("\n", 1)[1])
    raise AssertionError(f"no answer cell with grade_id {exercise!r} in its lesson")


def _notebook(exercise: str) -> dict:
    lesson = course.lesson_of_exercise(exercise)
    return json.loads((REPO / "solutions" / lesson.assignment / lesson.notebook).read_text())


@cache
def lesson_text(exercise: str) -> str:
    """Every markdown cell of the exercise's lesson, without whitespace or backticks."""
    return normalise("".join("".join(cell["source"]) for cell in _notebook(exercise)["cells"]
                             if cell["cell_type"] == "markdown"))


@cache
def answer_expressions(exercise: str) -> tuple[str, ...]:
    """The expressions of the answer key's statements (assigned, returned or evaluated),
    without whitespace, at least MIN_EXPRESSION_CHARS long, that the lesson does not write."""
    code = solution_code(exercise)
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)) \
                and node.value is not None:
            expression = normalise(ast.get_source_segment(code, node.value))
            if len(expression) >= MIN_EXPRESSION_CHARS and expression not in \
                    lesson_text(exercise):
                found.append(expression)
    return tuple(found)


def giveaways_in(exercise: str, text: str) -> list[str]:
    """What in ``text`` gives the answer of ``exercise`` away (empty: nothing)."""
    flat = normalise(text)
    return ([e for e in answer_expressions(exercise) if e in flat]
            + [p for p in GIVEAWAYS.get(exercise, ()) if re.search(p, flat)])


def test_every_exercise_names_its_decisive_expressions():
    missing = [name for name in EXERCISES if not GIVEAWAYS.get(name)]
    assert not missing, f"add the decisive expressions of {missing} to tests/hints/giveaways.py"
    assert set(GIVEAWAYS) <= set(EXERCISES), sorted(set(GIVEAWAYS) - set(EXERCISES))


@pytest.mark.parametrize("exercise", EXERCISES)
def test_each_pattern_spells_the_answer(exercise):
    """A pattern that matches neither the answer key nor the last hint could never fire."""
    answer, last = normalise(solution_code(exercise)), normalise(ladder(exercise)[-1])
    for pattern in GIVEAWAYS.get(exercise, ()):
        assert re.search(pattern, answer) or re.search(pattern, last), (
            f"{exercise}: {pattern!r} matches neither the answer key nor the last hint")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_no_hint_before_the_last_gives_the_answer_away(exercise):
    for number, text in enumerate(ladder(exercise)[:-1], start=1):
        assert giveaways_in(exercise, text) == [], (
            f"hint {number} of {exercise} gives the answer away: {giveaways_in(exercise, text)}"
            f"\n{text}")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_last_hint_gives_the_decisive_expression(exercise):
    assert giveaways_in(exercise, ladder(exercise)[-1]), (
        f"the last hint of {exercise} is not nearly the answer: it holds none of its decisive "
        "expressions")


def test_the_rule_catches_an_answer_key_line_even_reformatted():
    line = "scores=q  @ np.swapaxes( k, -1, -2 )/np.sqrt(q.shape[-1])"
    assert giveaways_in("attention", f"Try this: `{line}`.")
    assert giveaways_in("crossover_seq_len", "So N = 2 * d, of course.")
    assert not giveaways_in("attention", "Divide the scores by sqrt(d_k) before the softmax.")
