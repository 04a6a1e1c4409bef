"""Quick checks of lesson 08 (what heads learn: previous-token and induction heads, sinks):
what the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson08.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.quiz.question import FillIn, MultipleChoice

SEQ_LEN = 48  # the training sequences of section 2


def _repeat_query(rng: np.random.Generator) -> dict:
    """A training-like sequence (prefix, then a span repeated to the end) and a query in its
    third copy, so that the most recent earlier copy is not the first one."""
    span = int(rng.integers(5, 11))  # 5..10
    # prefix != span, so that "subtract the prefix too" never lands on the first copy's key
    prefix = int(rng.choice([p for p in range(3, 13) if p != span]))
    third = prefix + 2 * span
    query = int(rng.integers(third, min(third + span, SEQ_LEN)))
    return {"prefix": prefix, "span": span, "query": query}


def _sequence_length(rng: np.random.Generator) -> dict:
    return {"tokens": int(rng.choice([12, 16, 20, 24, 32, 40, 48]))}


QUESTIONS = {
    "qc_period_two": MultipleChoice(
        id="qc_period_two",
        prompt="You run induction_score with period = 2, on sequences of the form A B A B "
               "(N = 4). Besides a perfect induction head, which of these heads also scores 1?",
        options=("A duplicate-token head",
                 "A head that puts all its weight on key 0",
                 "None: only an induction head can score 1",
                 "A perfect previous-token head"),
        transfer=True,
    ),
    "qc_induction_key": FillIn(
        id="qc_induction_key",
        prompt="A sequence like the training data of section 2 (positions from 0): {prefix} "
               "random tokens, then a span of {span} different tokens repeated until position "
               "47. The query sits at position {query}. An induction head attends to the key "
               "right after the most recent earlier occurrence of the query's token. Which "
               "key position is that?",
        template="key = ____",
        names={"prefix": "number of random tokens before the span",
               "span": "length of the repeated span", "query": "position of the query"},
        variant=_repeat_query,
        transfer=True,
    ),
    "qc_induction_circuit": MultipleChoice(
        id="qc_induction_circuit",
        prompt="An induction head at query i attends to the key j whose previous token equals "
               "token i. In this lesson's model, what puts 'my previous token' into position "
               "j's residual stream?",
        options=("A head of layer 0 that attends from j to key j - 1",
                 "The position embedding added at position j",
                 "An MLP of layer 0, applied at position j",
                 "The induction head itself, within its own layer"),
    ),
    "qc_sink_previous": FillIn(
        id="qc_sink_previous",
        prompt="A causal head puts, at every query i >= 1, half of its weight on the first "
               "token (key 0) and half on key i - 1. What does previous_token_score give "
               "for it on a sequence of N = {tokens} tokens?",
        template="score = ____",
        names={"tokens": "N, the sequence length"},
        variant=_sequence_length,
        rtol=0.002,
        transfer=True,
    ),
}
