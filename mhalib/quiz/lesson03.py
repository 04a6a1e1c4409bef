"""Quick checks of lesson 03 (why the scores are scaled): what the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson03.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.quiz.question import FillIn, MultipleChoice


def _variances(rng: np.random.Generator) -> list[dict]:
    return [{"d_k": 64, "var_q": 1.0, "var_k": 0.5}, {"d_k": 16, "var_q": 0.5, "var_k": 3.0},
            {"d_k": 3, "var_q": 2.0, "var_k": 0.25}, {"d_k": 128, "var_q": 0.1, "var_k": 4.0}]


def _sink_rows(rng: np.random.Generator) -> list[dict]:
    return [{"a": 0.5, "N": 16}, {"a": 0.9, "N": 8}, {"a": 0.2, "N": 1000}, {"a": 0.7, "N": 2}]


def _unscaled_gap(rng: np.random.Generator) -> dict:
    return {"d_k": int(rng.choice([16, 32, 64, 128, 256])),
            "gap": float(rng.choice([0.5, 1.0, 1.5, 2.0]))}


QUESTIONS = {
    "qc_dot_variance": FillIn(
        id="qc_dot_variance",
        prompt="q and k have d_k independent entries with mean 0, but not unit variance: q's "
               "entries have variance var_q and k's have variance var_k. Fill in the variance "
               "of q · k.",
        template="Var(q . k) = ____",
        names={"d_k": "the width of q and k", "var_q": "the variance of each entry of q",
               "var_k": "the variance of each entry of k"},
        scenarios=_variances,
        transfer=True,
    ),
    "qc_unscaled_ratio": FillIn(
        id="qc_unscaled_ratio",
        prompt="A head of width d_k = {d_k} leaves out the division by sqrt(d_k); the entries "
               "of q and k are independent, with mean 0 and variance 1. Two keys' scores differ by "
               "{gap} standard deviations of these unscaled scores. How many times the weight "
               "of the lower one does the higher one get?",
        template="ratio = ____",
        names={"d_k": "the head width", "gap": "the gap in standard deviations"},
        variant=_unscaled_gap,
        rtol=0.01,
        transfer=True,
    ),
    "qc_sink_entropy": FillIn(
        id="qc_sink_entropy",
        prompt="A row of weights over N keys gives weight a to one key (an attention sink, "
               "say the first token) and spreads the remaining 1 - a evenly over the other "
               "N - 1 keys. Fill in its entropy in nats.",
        template="H = ____",
        names={"a": "the weight of the sink, 0 < a < 1", "N": "the number of keys"},
        scenarios=_sink_rows,
        transfer=True,
    ),
    "qc_entropy_direction": MultipleChoice(
        id="qc_entropy_direction",
        prompt="A head leaves out the division, so its scores are the raw q · k. Take one "
               "query's row of scores over N keys, not all equal. Doubling d_k makes the "
               "spread of the scores √2 times larger: treat it as multiplying every score of "
               "that row by √2. What happens to the row's entropy?",
        options=("It stays the same: only score differences matter",
                 "It rises, towards its maximum log N",
                 "It falls, though it stays above 0",
                 "It may rise or fall, depending on the row"),
        transfer=True,
    ),
    "qc_split_jacobian": MultipleChoice(
        id="qc_split_jacobian",
        prompt="A softmax row over N keys splits its weight evenly between keys i and j and "
               "gives every other key almost 0. What is its Jacobian diag(p) − p pᵀ close to?",
        options=("[[1/2, 0], [0, 1/2]] on keys i, j; 0 elsewhere",
                 "Almost the zero matrix, as at any saturated row",
                 "[[−1/4, −1/4], [−1/4, −1/4]] on keys i, j; 0 elsewhere",
                 "[[1/4, −1/4], [−1/4, 1/4]] on keys i, j; 0 elsewhere"),
        transfer=True,
    ),
}
