"""No learner's numbers make two answers of a fill-in look alike: for every draw of a variant
question (and the one fixed binding set of the others), the key and each known slip give
values that the judge tells apart at the question's tolerance. Where two coincide, the learner
who made one slip is told the other one's reason (or a slip is marked right). The wrong answers
of the test tables (answers/lessonNN.py REJECT) are held apart from the key the same way."""

from __future__ import annotations

import numpy as np
import pytest

from mhalib.quiz.expression import ExpressionError, evaluate
from mhalib.quiz.judge import _matches
from mhalib.quiz.question import FillIn
from mhalib.quiz.variant import rng_for
from tests.quiz.banks import LEARNERS, all_items, answers

DRAWS = 200  # seeds per variant question, on top of the named learners
FILL_INS = [item for item in all_items() if isinstance(item[2], FillIn)]


def _variants(question: FillIn) -> list[str]:
    if question.variant is None:
        return ["seed:0"]  # no per-learner numbers: one set of bindings
    return [*LEARNERS, *(f"seed:{i}" for i in range(DRAWS))]


def _alike(a: list, b: list, rtol: float) -> bool:
    """The judge would take one for the other: they match in every binding (either way round)."""
    return all(_matches(x, y, rtol) or _matches(y, x, rtol) for x, y in zip(a, b))


@pytest.mark.parametrize("item", FILL_INS, ids=[qid for _, qid, *_ in FILL_INS])
def test_key_and_slips_stay_distinct_for_every_draw(item):
    lesson, qid, question, key, _ = item
    expressions = {"the key": key.answer, **{slip: slip for slip in key.mistakes or {}}}
    rejected = [text for text in answers(lesson).REJECT[qid] if isinstance(text, str)]
    clashes = set()
    for variant in _variants(question):
        numbers = question.numbers(rng_for(variant, qid))
        bindings = question.bindings(numbers)
        values = {name: [evaluate(text, b) for b in bindings]
                  for name, text in expressions.items()}
        names = list(values)
        pairs = [(first, second) for i, first in enumerate(names) for second in names[i + 1:]]
        for text in rejected:
            try:
                values[text] = [evaluate(text, b) for b in bindings]
            except ExpressionError:  # refused as malformed, never judged by value
                continue
            pairs.append(("the key", text))
        for first, second in pairs:
            if _alike(values[first], values[second], question.rtol):
                shown = {k: v for k, v in numbers.items()
                         if isinstance(v, (int, float, str, np.integer, np.floating))}
                clashes.add(f"{first!r} == {second!r} for {shown}")
    assert not clashes, f"{qid}: " + "; ".join(sorted(clashes)[:6])
