"""Lesson 01 answer key: a numerically stable softmax and scaled dot-product attention (numpy)."""

from __future__ import annotations

import numpy as np

from mhalib.validate import as_float_array, require_ndim


def softmax(x, axis=-1):
    """Softmax along ``axis`` that never overflows.

    Subtracting the row maximum makes every exponent <= 0, so logits of 1e4 are fine.
    ``-inf`` entries get weight 0; a slice that is entirely ``-inf`` gives all zeros (not NaN).
    The result keeps the input's float dtype and shape.
    """
    x = as_float_array("x", x)
    row_max = np.max(x, axis=axis, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0).astype(x.dtype)  # all -inf rows
    exps = np.exp(x - row_max)
    totals = np.sum(exps, axis=axis, keepdims=True)
    return np.divide(exps, totals, out=np.zeros_like(exps), where=totals > 0)


def attention(q, k, v):
    """Scaled dot-product attention.

    q: (..., N_q, d_k), k: (..., N_k, d_k), v: (..., N_k, d_v)
    returns (out (..., N_q, d_v), weights (..., N_q, N_k)); scores are scaled by 1/sqrt(d_k).
    """
    q, k, v = (as_float_array(n, a) for n, a in (("q", q), ("k", k), ("v", v)))
    for name, array in (("q", q), ("k", k), ("v", v)):
        require_ndim(name, array, 2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share d_k (last axis), got q.shape={q.shape} and k.shape={k.shape}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of keys N_k (axis -2), "
            f"got k.shape={k.shape} and v.shape={v.shape}"
        )
    d_k = q.shape[-1]
    # A Python float keeps float32 inputs in float32 (a numpy float64 scalar would upcast).
    scale = float(1.0 / np.sqrt(d_k))
    scores = (q @ np.swapaxes(k, -1, -2)) * scale  # (..., N_q, N_k)
    weights = softmax(scores, axis=-1)  # (..., N_q, N_k)
    out = weights @ v  # (..., N_q, d_v)
    return out, weights
