"""Quick checks of lesson 08 (what heads learn: previous-token and induction heads)."""

from __future__ import annotations

from mhalib.quiz.question import FillIn, MultipleChoice


def _query(i: int, period: int) -> dict:
    return {"i": i, "period": period}


QUESTIONS = {
    "qc_induction_key": FillIn(
        id="qc_induction_key",
        prompt="The sequence repeats itself after period tokens. At query i in the second "
               "copy, which key does an induction head attend to?",
        template="key = ____",
        scenarios=[_query(10, 8), _query(8, 8), _query(15, 8), _query(40, 25)],
        expected=lambda s: s["i"] - s["period"] + 1,
        explanation="Token i also sits at i - period in the first copy; the token that "
                    "followed it there, at i - period + 1, is the one to predict next.",
        hint="Find the earlier copy of the current token, then move one step right.",
        examples=["i - period + 1", "i + 1 - period"],
    ),
    "qc_uniform_previous": FillIn(
        id="qc_uniform_previous",
        prompt="A causal head spreads its weight evenly over keys 0..i. How much weight does "
               "query i put on key i - 1?",
        template="weight = ____",
        scenarios=[_query(1, 1), _query(4, 1), _query(99, 1)],
        expected=lambda s: 1 / (s["i"] + 1),
        explanation="i + 1 keys share one unit of weight. Such a head's previous-token score "
                    "is the mean of 1 / (i + 1) over the queries: small for long sequences, "
                    "which is why a score near 1 singles a head out.",
        hint="Count the keys query i may see.",
        examples=["1 / (i + 1)"],
    ),
    "qc_induction_circuit": MultipleChoice(
        id="qc_induction_circuit",
        prompt="An induction head at query i looks for the key j whose PREVIOUS token equals "
               "token i. How does position j come to carry 'my previous token was ...'?",
        options=["A previous-token head in an earlier layer copied it into position j's "
                 "residual stream",
                 "The position embedding of j contains it",
                 "The induction head computes it itself in the same layer",
                 "The unembedding adds it after the last layer"],
        key="7cc058efb31db2a4b855",
        explanation="Attention in one layer only sees what is already in the residual stream. "
                    "Layer 0's previous-token head writes token j - 1 into position j; layer "
                    "1's induction head then matches its query (token i) against that. Remove "
                    "the previous-token heads and induction fails.",
        why_wrong={1: "Position embeddings say where a token is, not what came before it.",
                   2: "A head's keys are computed from the residual stream before it runs.",
                   3: "The unembedding acts after all attention has happened."},
    ),
}
