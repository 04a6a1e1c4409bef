"""Quick checks of lesson 01 (single-head attention): what the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson01.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.quiz.question import FillIn, MultipleChoice


def _logits(rng: np.random.Generator) -> list[dict]:
    rows = [rng.normal(size=shape) * scale
            for shape, scale in (((3, 5), 3.0), ((4, 4), 3.0), ((1, 6), 3.0), ((2, 7), 1000.0))]
    return [{"x": x, "m": x.max(axis=-1, keepdims=True)} for x in rows]


def _widths(rng: np.random.Generator) -> list[dict]:
    return [{"d_k": d, "q": rng.normal(size=(3, d)), "k": rng.normal(size=(5, d))}
            for d in (16, 64, 3)]


def _weights_memory(rng: np.random.Generator) -> dict:
    dtype, size = [("float32", 4), ("bfloat16", 2), ("float16", 2)][rng.integers(3)]
    return {"tokens": int(rng.choice([2048, 4096, 8192, 16384, 32768])), "dtype": dtype,
            "bytes_per_value": size}


QUESTIONS = {
    "qc_log_softmax": FillIn(
        id="qc_log_softmax",
        prompt="Losses often need log softmax(x) rather than softmax(x). x holds one row of "
               "logits per query and m = x.max(axis=-1, keepdims=True) is each row's maximum. "
               "Fill in the blank so that log_p is the log softmax along the last axis, with no "
               "overflow even for logits in the thousands.",
        template="log_p = x - m - ____",
        names={"x": "the (rows, N_k) logits", "m": "each row's maximum, shape (rows, 1)"},
        scenarios=_logits,
        transfer=True,
    ),
    "qc_scale_divisor": FillIn(
        id="qc_scale_divisor",
        prompt="Fill in the divisor that keeps the scores at unit variance when the entries of "
               "q and k are independent with mean 0 and variance 1.",
        template="scores = q @ k.T / ____",
        names={"d_k": "the width of each query and key", "q": "the (N_q, d_k) queries",
               "k": "the (N_k, d_k) keys"},
        scenarios=_widths,
    ),
    "qc_weights_shape": MultipleChoice(
        id="qc_weights_shape",
        prompt="A library stores the scores transposed: s = k @ q.T, of shape (N_k, N_q), one "
               "row per key and one column per query. Along which axis must its softmax run?",
        options=("axis=0: each column sums to 1",
                 "axis=-1, so that each row sums to 1",
                 "Over the whole (N_k, N_q) array at once",
                 "Either axis: the product with v comes out the same"),
        transfer=True,
    ),
    "qc_weights_memory": FillIn(
        id="qc_weights_memory",
        prompt="One head materialises its full (N, N) weight matrix for N = {tokens} tokens, "
               "stored in {dtype} ({bytes_per_value} bytes per value). How many MiB does that "
               "one matrix take (1 MiB = 2**20 bytes)?",
        template="mib = ____",
        names={"tokens": "N", "bytes_per_value": "bytes per stored value"},
        variant=_weights_memory,
        rtol=0.01,
        transfer=True,
    ),
    "qc_shared_scale": FillIn(
        id="qc_shared_scale",
        prompt="Some code (the attention of OpenAI's guided-diffusion models, for one) does not "
               "divide the scores: it multiplies q and k by the same factor c before the "
               "product, which keeps float16 values smaller. Fill in c so that the scores equal "
               "q @ k.T / sqrt(d_k).",
        template="c = ____  # scores = (q * c) @ (k * c).T",
        names={"d_k": "the width of each query and key", "q": "the (N_q, d_k) queries",
               "k": "the (N_k, d_k) keys"},
        scenarios=_widths,
        transfer=True,
    ),
}
