"""Lesson 04 answer key: causal and padding masks, and attention that respects them (numpy).

Masks are boolean with True = may attend, broadcastable to (..., N_q, N_k).
"""

from __future__ import annotations

import numpy as np

from mhalib.reference.single_head import softmax
from mhalib.validate import as_float_array, positive_int, require_ndim


def causal_mask(n_q, n_k=None):
    """Bool (n_q, n_k) mask aligned bottom-right: query i sits at position i + n_k - n_q.

    With a KV cache the queries are the last n_q of n_k positions, so query i may attend
    keys j <= i + n_k - n_q.
    """
    n_q = positive_int("n_q", n_q)
    n_k = n_q if n_k is None else positive_int("n_k", n_k)
    query_pos = np.arange(n_q)[:, None] + (n_k - n_q)  # (n_q, 1)
    key_pos = np.arange(n_k)[None, :]  # (1, n_k)
    return key_pos <= query_pos  # (n_q, n_k)


def padding_mask(lengths, n):
    """lengths (B,) ints -> bool (B, 1, 1, n), True where key position j < lengths[b]."""
    n = positive_int("n", n)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(
            f"lengths must be a 1-D array of ints, got dtype={lengths.dtype} shape={lengths.shape}"
        )
    if np.any(lengths < 0) or np.any(lengths > n):
        raise ValueError(f"lengths must lie in [0, n={n}], got lengths={lengths.tolist()}")
    keep = np.arange(n)[None, :] < lengths[:, None]  # (B, n)
    return keep[:, None, None, :]  # (B, 1, 1, n)


def masked_attention(q, k, v, mask):
    """Attention where ``mask`` (bool, True = may attend) removes keys; fully masked rows give 0.

    q: (..., N_q, d_k), k: (..., N_k, d_k), v: (..., N_k, d_v), mask broadcastable to
    (..., N_q, N_k). Returns (out (..., N_q, d_v), weights (..., N_q, N_k)).
    """
    q, k, v = (as_float_array(n, a) for n, a in (("q", q), ("k", k), ("v", v)))
    for name, array in (("q", q), ("k", k), ("v", v)):
        require_ndim(name, array, 2)
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype={mask.dtype}")
    n_q, n_k = q.shape[-2], k.shape[-2]
    try:
        np.broadcast_shapes(mask.shape, q.shape[:-2] + (n_q, n_k))
    except ValueError:
        raise ValueError(
            f"mask.shape={mask.shape} does not broadcast to (..., N_q, N_k)="
            f"{q.shape[:-2] + (n_q, n_k)}"
        ) from None
    scale = float(1.0 / np.sqrt(q.shape[-1]))
    scores = (q @ np.swapaxes(k, -1, -2)) * scale  # (..., N_q, N_k)
    scores = np.where(mask, scores, -np.inf)  # (..., N_q, N_k)
    weights = softmax(scores, axis=-1)  # (..., N_q, N_k), rows with no key are all 0
    return weights @ v, weights
