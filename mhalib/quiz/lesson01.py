"""Quick checks of lesson 01 (single-head attention)."""

from __future__ import annotations

import math

import numpy as np

from mhalib.quiz.question import FillIn, MultipleChoice

_rng = np.random.default_rng(7)


def _scenario(d_k: int, n: int = 3) -> dict:
    return {"d_k": d_k, "q": _rng.normal(size=(n, d_k)), "k": _rng.normal(size=(n + 2, d_k))}


def _logits(rows: int, cols: int) -> dict:
    return {"x": _rng.normal(size=(rows, cols)) * 3}


QUESTIONS = {
    "qc_scale_divisor": FillIn(
        id="qc_scale_divisor",
        prompt="Fill in the divisor that keeps the scores at unit variance.",
        template="scores = q @ k.T / ____",
        scenarios=[_scenario(16), _scenario(64), _scenario(3)],
        expected=lambda s: math.sqrt(s["d_k"]),
        explanation="Each score sums d_k products of unit-variance terms, so its variance is "
                    "d_k; dividing by sqrt(d_k) brings it back to 1.",
        hint="The variance of q . k grows like d_k; what brings its standard deviation to 1?",
        examples=["np.sqrt(d_k)", "d_k ** 0.5", "math.sqrt(q.shape[-1])", "sqrt(k.shape[1])"],
    ),
    "qc_weights_shape": MultipleChoice(
        id="qc_weights_shape",
        prompt="q has shape (N_q, d_k) and k has shape (N_k, d_k). Along which axis of the "
               "(N_q, N_k) score matrix does the softmax run?",
        options=["Along the keys (last axis): each query's weights sum to 1",
                 "Along the queries (first axis): each key's weights sum to 1",
                 "Over the whole matrix: all weights together sum to 1",
                 "Along d_k, before the product"],
        key="a4b79debb69b866227c1",
        explanation="Every query spreads one unit of attention over the keys, so rows sum to 1.",
        why_wrong={1: "That would make each key distribute attention over the queries.",
                   2: "Then a long sequence would leave each query almost no weight.",
                   3: "The softmax acts on scores, after the dot product removed d_k."},
    ),
    "qc_softmax_shift": FillIn(
        id="qc_softmax_shift",
        prompt="x holds one row of logits per query. Fill in what to subtract so that the "
               "largest exponent in every row is exactly 0.",
        template="e = np.exp(x - ____)  # then e / e.sum(axis=-1, keepdims=True)",
        scenarios=[_logits(3, 5), _logits(4, 4), _logits(1, 6)],
        expected=lambda s: s["x"].max(axis=-1, keepdims=True),
        explanation="Softmax does not change when a row is shifted by a constant, and shifting "
                    "by the row's own maximum makes its largest exponent exp(0) = 1: no "
                    "overflow, and at least one term of each sum is 1, so no 0 / 0 either.",
        hint="Use each row's own maximum, shaped (rows, 1) so that it broadcasts.",
        examples=["np.max(x, axis=-1, keepdims=True)", "x.max(axis=1, keepdims=True)",
                  "x.max(-1, keepdims=True)"],
    ),
}
