"""Checkers for lesson 01: ``softmax`` and ``attention`` (numpy)."""

from __future__ import annotations

import numpy as np

from mhalib.checks.answer_key import answer_key
from mhalib.checks.exercise import Case, Exercise, Mistake


def _naive_softmax(x, axis=-1):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def _stable_softmax(x, axis=-1):
    return answer_key("softmax")(x, axis=axis)


class Softmax(Exercise):
    name = "softmax"
    assignment = "01-single-head"

    def visible_cases(self, rng):
        return [
            Case("a (4, 7) batch of logits", (rng.normal(size=(4, 7)),)),
            Case("axis=0", (rng.normal(size=(5, 3)),), {"axis": 0}),
            Case("logits of magnitude 1e4", (rng.normal(size=(3, 6)) * 1e4,)),
        ]

    def hidden_cases(self, rng):
        with_inf = rng.normal(size=(4, 6))
        with_inf[rng.random((4, 6)) < 0.4] = -np.inf
        with_inf[:, 0] = rng.normal(size=4)  # every row keeps one finite entry
        return [
            Case("-inf entries get weight 0", (with_inf,)),
            Case("a 3-D input with axis=1", (rng.normal(size=(2, 5, 3)) * 3,), {"axis": 1}),
            Case("axis=-2", (rng.normal(size=(3, 4, 2)),), {"axis": -2}),
            Case("float32 logits", (rng.normal(size=(3, 9)).astype(np.float32) * 5,)),
            Case("large negative logits (-1e4)", (-1e4 - rng.random(size=(2, 5)),)),
            Case("a single vector", (rng.normal(size=8),)),
        ]

    def expected(self, case):
        return answer_key("softmax")(*case.args, **case.kwargs)

    def mistakes(self):
        axis = lambda c: c.kwargs.get("axis", -1)  # noqa: E731
        return [
            Mistake("no_max_shift", "exp overflows for large logits (you get NaN or inf): "
                    "subtract the maximum along the axis before np.exp.",
                    lambda c: _naive_softmax(c.args[0], axis(c))),
            Mistake("ignores_axis", "the result is normalised along the last axis whatever "
                    "`axis` says: pass axis (and keepdims=True) to max and sum.",
                    lambda c: _stable_softmax(c.args[0], -1)),
            Mistake("whole_array", "the whole array sums to 1 instead of each slice along "
                    "`axis`: reduce with axis=axis, keepdims=True.",
                    lambda c: _stable_softmax(c.args[0].reshape(-1), -1).reshape(c.args[0].shape)),
            Mistake("no_keepdims", "the sums are divided along the wrong axis: use "
                    "keepdims=True so the shapes broadcast per slice.",
                    lambda c: _no_keepdims(c.args[0], axis(c))),
        ]


def _no_keepdims(x, axis):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis)  # broadcasts against the wrong axis (or fails)


def _attention(q, k, v, scale=None, softmax_axis=-1, stable=True):
    """Attention with one knob turned, for mistake models: (out, weights)."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale  # (..., N_q, N_k)
    weights = (_stable_softmax if stable else _naive_softmax)(scores, softmax_axis)
    return weights @ v, weights


class Attention(Exercise):
    name = "attention"
    assignment = "01-single-head"

    def visible_cases(self, rng):
        return [
            Case("self-attention, N=5, d_k=8", tuple(rng.normal(size=(3, 5, 8)))),
            Case("N_q != N_k and d_v != d_k", (rng.normal(size=(4, 16)), rng.normal(size=(6, 16)),
                                               rng.normal(size=(6, 3)))),
        ]

    def hidden_cases(self, rng):
        big = rng.normal(size=(2, 3, 4, 64))
        return [
            Case("extra batch dims (2, 3)", (big, rng.normal(size=(2, 3, 7, 64)),
                                             rng.normal(size=(2, 3, 7, 5)))),
            Case("logits of about 1e4", (rng.normal(size=(3, 4)) * 100,
                                          rng.normal(size=(5, 4)) * 100, rng.normal(size=(5, 2)))),
            Case("float32 inputs", tuple(rng.normal(size=(3, 6, 32)).astype(np.float32))),
            Case("one query, many keys", (rng.normal(size=(1, 8)), rng.normal(size=(9, 8)),
                                          rng.normal(size=(9, 4)))),
        ]

    def expected(self, case):
        return answer_key("attention")(*case.args)

    def mistakes(self):
        def sqrt_dv(c):
            q, k, v = c.args
            return _attention(q, k, v, scale=1 / np.sqrt(v.shape[-1]))

        return [
            Mistake("no_scale", "the output matches attention without the 1/sqrt(d_k) scale: "
                    "did you forget to divide the scores by sqrt(d_k)?",
                    lambda c: _attention(*c.args, scale=1.0)),
            Mistake("scale_by_d_k", "the scores were divided by d_k instead of sqrt(d_k).",
                    lambda c: _attention(*c.args, scale=1 / c.args[0].shape[-1])),
            Mistake("scale_by_d_v", "the scale uses d_v (v.shape[-1]) instead of d_k "
                    "(q.shape[-1]).", sqrt_dv),
            Mistake("softmax_over_queries", "each column sums to 1 instead of each row: the "
                    "softmax runs over the queries (axis -2) instead of the keys (axis -1).",
                    lambda c: _attention(*c.args, softmax_axis=-2)),
            Mistake("no_max_shift", "large logits overflow to NaN: use a softmax that subtracts "
                    "the row maximum.", lambda c: _attention(*c.args, stable=False)),
            Mistake("returns_scores", "the second value returned is the scaled scores, not the "
                    "softmax weights.", lambda c: (_attention(*c.args)[0], c.args[0]
                    @ np.swapaxes(c.args[1], -1, -2) / np.sqrt(c.args[0].shape[-1]))),
        ]


EXERCISES = {e.name: e for e in (Softmax(), Attention())}
