"""Held-out learners' answers, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np
from scipy.special import logsumexp

from entry import Entry


# ============================================================================ causal_mask
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_offset_flipped(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_mask(n_q, n_k=None):
    n_k = n_k if n_k is not None else n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    allowed = np.ones((n_q, n_k), dtype=bool)
    return np.triu(allowed, k=n_k - n_q)


def causal_keys_on_rows(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    offset = n_k - n_q
    return np.arange(n_k)[:, None] <= np.arange(n_q)[None, :] + offset


def causal_np_tri(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    return np.tri(n_q, cols, k=cols - n_q, dtype=bool)


def causal_nested_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    rows = []
    for i in range(n_q):
        pos = i + n_k - n_q
        rows.append([j <= pos for j in range(n_k)])
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_2d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_true_is_pad(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n) >= lengths[:, None]
    return pad[:, None, None, :]


def padding_int_mask(lengths, n):
    lengths = np.asarray(lengths)
    m = (np.arange(n)[None, :] < lengths[:, None]).astype(np.int64)
    return m.reshape(len(lengths), 1, 1, n)


def padding_negative_slice(lengths, n):
    B = len(lengths)
    mask = np.ones((B, 1, 1, n), dtype=bool)
    for b, L in enumerate(lengths):
        mask[b, 0, 0, -(n - L):] = False
    return mask


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


def padding_python_lists(lengths, n):
    out = []
    for L in list(lengths):
        out.append([[[pos < int(L) for pos in range(n)]]])
    return np.array(out, dtype=bool).reshape(len(out), 1, 1, n)


def padding_greater_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n))[:, None, None, :]


# ============================================================================ masked_attention
def masked_nan_rows(q, k, v, mask):
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_polarity_flipped(q, k, v, mask):
    scale = 1.0 / np.sqrt(q.shape[-1])
    logits = (q @ np.swapaxes(k, -1, -2)) * scale
    logits = np.where(mask, -np.inf, logits)
    top = logits.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(logits - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    p = s / s.sum(axis=-1, keepdims=True)
    p = p * mask
    return p @ v, p


def masked_scale_by_nk(q, k, v, mask):
    n_k = k.shape[-2]
    s = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(n_k)
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(z == 0, 1.0, z)
    return w @ v, w


def masked_boolean_index(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores[~mask] = -np.inf
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isinf(row_max), 0.0, row_max)
    ex = np.exp(scores - row_max)
    total = ex.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, ex / np.where(total > 0, total, 1.0), 0.0)
    return weights @ v, weights


def masked_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    qb = np.broadcast_to(q, lead + q.shape[-2:]).reshape(-1, n_q, q.shape[-1])
    kb = np.broadcast_to(k, lead + k.shape[-2:]).reshape(-1, n_k, k.shape[-1])
    vb = np.broadcast_to(v, lead + v.shape[-2:]).reshape(-1, n_k, v.shape[-1])
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    weights = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            keys = np.flatnonzero(mb[b, i])
            if keys.size == 0:
                continue
            s = kb[b, keys] @ qb[b, i] / math.sqrt(q.shape[-1])
            s = np.exp(s - s.max())
            weights[b, i, keys] = s / s.sum()
    out = weights @ vb
    return out.reshape(lead + (n_q, v.shape[-1])), weights.reshape(lead + (n_q, n_k))


def masked_logsumexp_b(q, k, v, mask):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    allowed = np.broadcast_to(mask, s.shape)
    with np.errstate(divide="ignore"):
        lse = logsumexp(s, axis=-1, b=allowed.astype(s.dtype), keepdims=True)
    lse = np.where(np.isfinite(lse), lse, 0.0)
    w = np.where(allowed, np.exp(s - lse), 0.0)
    return np.einsum("...qk,...kv->...qv", w, v), w


ENTRIES = [
    Entry("causal_mask", "wrong", "top-left-aligned",
          "np.tril without the offset k = n_k - n_q aligns the mask top-left, so when "
          "n_q != n_k the queries do not sit at the last n_q positions", causal_top_left),
    Entry("causal_mask", "wrong", "strict-less-than",
          "the mask keeps the diagonal out: `<` where `<=` belongs, so a query cannot attend "
          "its own position", causal_strict),
    Entry("causal_mask", "wrong", "offset-sign-flipped",
          "the tril offset is n_q - n_k instead of n_k - n_q, so for n_q != n_k the mask is "
          "shifted the wrong way", causal_offset_flipped),
    Entry("causal_mask", "wrong", "float-mask",
          "np.tril(np.ones(...)) without dtype=bool returns a float 0/1 array instead of "
          "the boolean mask the contract asks for", causal_float_mask),
    Entry("causal_mask", "wrong", "triu-not-tril",
          "np.triu keeps the upper triangle, so queries may attend the future (and the "
          "diagonal) instead of the past", causal_triu),
    Entry("causal_mask", "wrong", "keys-on-rows",
          "the two aranges are broadcast the other way round (keys along the rows), so it "
          "returns the transposed pattern with shape (n_k, n_q): on a square mask the upper "
          "triangle instead of the lower", causal_keys_on_rows),
    Entry("causal_mask", "right", "np-tri-bool", None, causal_np_tri),
    Entry("causal_mask", "right", "nested-lists", None, causal_nested_lists),

    Entry("padding_mask", "wrong", "less-or-equal",
          "the comparison is j <= lengths[b] instead of j < lengths[b], so one padding "
          "position past each sequence is allowed", padding_le),
    Entry("padding_mask", "wrong", "missing-singleton-axes",
          "it returns the (B, n) comparison without the two singleton axes, not "
          "(B, 1, 1, n)", padding_2d),
    Entry("padding_mask", "wrong", "true-marks-padding",
          "True marks the padded positions (j >= length, the old key_padding_mask "
          "convention) instead of the positions that may be attended", padding_true_is_pad),
    Entry("padding_mask", "wrong", "int-mask",
          "it casts the mask to int64 0/1 instead of returning a boolean array",
          padding_int_mask),
    Entry("padding_mask", "wrong", "negative-slice-at-full-length",
          "it clears the padding with the slice -(n - L):, which for a full-length sequence "
          "(L == n) is -0: = 0:, so the whole row is masked instead of none of it",
          padding_negative_slice),
    Entry("padding_mask", "wrong", "width-from-max-length",
          "the mask is as wide as the longest length instead of n, so it has too few key "
          "positions when no sequence fills all n", padding_width_from_lengths),
    Entry("padding_mask", "right", "python-lists", None, padding_python_lists),
    Entry("padding_mask", "right", "greater-outer", None, padding_greater_outer),

    Entry("masked_attention", "wrong", "nan-on-empty-rows",
          "fully masked rows are not guarded: their maximum is -inf, -inf - (-inf) is NaN, "
          "so they come out NaN instead of zeros", masked_nan_rows),
    Entry("masked_attention", "wrong", "fill-minus-1e9",
          "masked scores are set to -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights over all keys instead of zeros", masked_big_negative),
    Entry("masked_attention", "wrong", "polarity-flipped",
          "it blanks the scores where mask is True, reading True as 'masked out' although "
          "True means 'may attend'", masked_polarity_flipped),
    Entry("masked_attention", "wrong", "mask-after-softmax",
          "it multiplies the softmax weights by the mask after normalising, so the remaining "
          "weights of a row no longer sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "scale-by-n-k",
          "the scores are divided by sqrt(N_k) (k.shape[-2], the number of keys) instead of "
          "sqrt(d_k)", masked_scale_by_nk),
    Entry("masked_attention", "wrong", "boolean-index-no-broadcast",
          "scores[~mask] = -inf uses boolean indexing, which does not broadcast: a mask "
          "that is only broadcastable (e.g. a padding mask (B, 1, 1, N_k)) raises "
          "IndexError", masked_boolean_index),
    Entry("masked_attention", "right", "per-row-allowed-keys-loop", None, masked_row_loop),
    Entry("masked_attention", "right", "logsumexp-with-b-weights", None, masked_logsumexp_b),
]
