"""Lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np

from entry import Entry


# ------------------------------------------------------------------ causal_mask: wrong
def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None] + n_k - n_q
    j = np.arange(n_k)[None, :]
    return j < i


def causal_float(n_q, n_k=None):
    n_k = n_k or n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_inverted(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_keys_as_rows(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    key = np.arange(n_k)[:, None]
    query = np.arange(n_q)[None, :] + (n_k - n_q)
    return key <= query


# ------------------------------------------------------------------ causal_mask: right
def causal_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        for j in range(n_k):
            mask[i, j] = j - i <= n_k - n_q
    return mask


def causal_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ------------------------------------------------------------------ padding_mask: wrong
def pad_le(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pad_three_dims(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n) < lengths[:, None])[:, None, :]


def pad_key_axis_first(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, :, None, None]


def pad_inverted(lengths, n):
    lengths = np.asarray(lengths)
    padded = np.arange(n)[None, :] >= lengths[:, None]
    return padded.reshape(len(lengths), 1, 1, n)


def pad_left_aligned(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] >= (n - lengths)[:, None]
    return keep[:, None, None, :]


def pad_one_based(lengths, n):
    positions = np.arange(1, n + 1)
    keep = positions[None, :] < np.asarray(lengths)[:, None]
    return keep[:, None, None, :]


# ------------------------------------------------------------------ padding_mask: right
def pad_loops(lengths, n):
    lengths = [int(x) for x in np.asarray(lengths)]
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = True
    return mask


def pad_less_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n))[:, np.newaxis, np.newaxis, :]


# ------------------------------------------------------------------ masked_attention helpers
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


# ------------------------------------------------------------------ masked_attention: wrong
def ma_big_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = _safe_softmax(s)
    return w @ v, w


def ma_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    w = _safe_softmax(s)
    return w @ v, w


def ma_zero_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def ma_nan_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_add_inf_product(q, k, v, mask):
    s = _scores(q, k) + (~np.asarray(mask)) * -np.inf
    w = _safe_softmax(s)
    return w @ v, w


def ma_mask_transposed(q, k, v, mask):
    s = np.where(np.swapaxes(mask, -1, -2), _scores(q, k), -np.inf)
    w = _safe_softmax(s)
    return w @ v, w


# ------------------------------------------------------------------ masked_attention: right
def ma_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], np.shape(mask)[:-2])
    m = np.broadcast_to(mask, lead + (n_q, n_k))
    q = np.broadcast_to(q, lead + q.shape[-2:])
    k = np.broadcast_to(k, lead + k.shape[-2:])
    v = np.broadcast_to(v, lead + v.shape[-2:])
    out = np.zeros(lead + (n_q, v.shape[-1]))
    w = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keys = np.flatnonzero(m[idx][i])
            if keys.size == 0:
                continue
            s = k[idx][keys] @ q[idx][i] / math.sqrt(q.shape[-1])
            e = np.exp(s - s.max())
            w[idx][i, keys] = e / e.sum()
            out[idx][i] = w[idx][i] @ v[idx]
    return out, w


def ma_exp_times_mask(q, k, v, mask):
    q64, k64 = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    s = np.einsum("...id,...jd->...ij", q64, k64) / np.sqrt(q64.shape[-1])
    s_masked = np.where(mask, s, -np.inf)
    top = np.max(s_masked, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.exp(s - top) * mask
    total = e.sum(axis=-1, keepdims=True)
    w = e / np.where(total == 0, 1.0, total)
    return np.einsum("...ij,...jv->...iv", w, v), w


ENTRIES = [
    Entry("causal_mask", "wrong", "top-left-aligned",
          "Aligns the mask top-left with np.tril, ignoring the n_k - n_q offset a KV cache "
          "needs.", causal_top_left),
    Entry("causal_mask", "wrong", "diagonal-excluded",
          "Uses a strict j < i + n_k - n_q, so a query may not attend to its own position.",
          causal_strict),
    Entry("causal_mask", "wrong", "float-mask",
          "Returns the 0/1 float array from np.tril instead of a boolean mask.", causal_float),
    Entry("causal_mask", "wrong", "offset-sign-flipped",
          "Shifts the diagonal by n_q - n_k instead of n_k - n_q.", causal_offset_sign),
    Entry("causal_mask", "wrong", "blocked-positions-true",
          "Marks the future (blocked) keys True, inverting the True = may attend convention.",
          causal_inverted),
    Entry("causal_mask", "wrong", "keys-as-rows",
          "Builds the mask with keys as rows, shape (n_k, n_q), instead of (n_q, n_k).",
          causal_keys_as_rows),
    Entry("causal_mask", "right", "nested-loops", None, causal_loops),
    Entry("causal_mask", "right", "np-tri", None, causal_np_tri),

    Entry("padding_mask", "wrong", "less-or-equal",
          "Uses j <= lengths[b], letting each sequence attend one padding position too.",
          pad_le),
    Entry("padding_mask", "wrong", "one-singleton-axis",
          "Returns shape (B, 1, n) with one singleton axis instead of (B, 1, 1, n).",
          pad_three_dims),
    Entry("padding_mask", "wrong", "key-axis-second",
          "Adds the singleton axes after the key axis, giving (B, n, 1, 1).",
          pad_key_axis_first),
    Entry("padding_mask", "wrong", "padding-marked-true",
          "Marks the padding positions True instead of the real tokens.", pad_inverted),
    Entry("padding_mask", "wrong", "left-padding",
          "Keeps the last lengths[b] positions (left padding) instead of the first.",
          pad_left_aligned),
    Entry("padding_mask", "wrong", "one-based-positions",
          "Numbers the key positions from 1, so each sequence loses its last real token.",
          pad_one_based),
    Entry("padding_mask", "right", "slice-loop", None, pad_loops),
    Entry("padding_mask", "right", "less-outer", None, pad_less_outer),

    Entry("masked_attention", "wrong", "fill-minus-1e9",
          "Fills masked scores with -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform distribution instead of zeros.", ma_big_negative),
    Entry("masked_attention", "wrong", "mask-inverted",
          "Puts -inf where the mask is True, treating True as 'blocked'.", ma_inverted),
    Entry("masked_attention", "wrong", "zero-after-softmax",
          "Zeroes the masked weights after the softmax without renormalising the rows.",
          ma_zero_after_softmax),
    Entry("masked_attention", "wrong", "nan-on-empty-rows",
          "Subtracts the row max without a guard, so a fully masked row is -inf - (-inf) = "
          "NaN.", ma_nan_rows),
    Entry("masked_attention", "wrong", "add-inf-times-mask",
          "Adds (~mask) * -inf to the scores, and 0 * -inf = NaN at every allowed position.",
          ma_add_inf_product),
    Entry("masked_attention", "wrong", "mask-transposed",
          "Transposes the mask's last two axes, treating its rows as keys.",
          ma_mask_transposed),
    Entry("masked_attention", "right", "per-row-allowed-keys", None, ma_row_loop),
    Entry("masked_attention", "right", "exp-times-mask", None, ma_exp_times_mask),
]
