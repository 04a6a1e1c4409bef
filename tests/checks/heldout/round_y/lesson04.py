"""Held-out catalogue (round y), lesson 04: causal_mask, padding_mask, masked_attention (numpy)."""

import math

import numpy as np

from entry import Entry


# ============================================================================ causal_mask
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_ones(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_arange_orientation(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    q_pos = np.arange(n_q)[None, :] + (n_k - n_q)
    k_pos = np.arange(n_k)[:, None]
    return k_pos <= q_pos


def causal_one_future_key(n_q, n_k=None):
    n_k = n_k or n_q
    offset = n_k - n_q + 1
    return np.tril(np.ones((n_q, n_k), dtype=bool), offset)


def causal_true_means_blocked(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_comprehension(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_outer(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    # gap[i, j] = (i + n_k - n_q) - j >= 0
    gap = np.subtract.outer(np.arange(n_q) + (n_k - n_q), np.arange(n_k))
    return gap >= 0


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_three_dims(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :]


def padding_transposed_reshape(lengths, n):
    lengths = np.asarray(lengths)
    B = lengths.shape[0]
    keep = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return keep.reshape(B, 1, 1, n)


def padding_true_is_pad(lengths, n):
    lens = np.asarray(lengths).reshape(-1, 1, 1, 1)
    return np.arange(n).reshape(1, 1, 1, n) >= lens


def padding_int_mask(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(n)
    m = np.where(positions[None, :] < lengths[:, None], 1, 0)
    return m[:, np.newaxis, np.newaxis, :]


def padding_left_aligned(lengths, n):
    lengths = [int(v) for v in lengths]
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, L in enumerate(lengths):
        mask[b, 0, 0, n - L:] = True
    return mask


def padding_loop(lengths, n):
    rows = []
    for length in np.asarray(lengths).tolist():
        rows.append([pos < length for pos in range(n)])
    return np.array(rows, dtype=bool).reshape(len(rows), 1, 1, n)


def padding_broadcast4d(lengths, n):
    lens = np.asarray(lengths)[:, None, None, None]
    return np.arange(n) < lens


# ============================================================================ masked_attention
def masked_big_negative(q, k, v, mask):
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    z = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    return weights @ v, weights


def masked_after_softmax(q, k, v, mask):
    scale = 1.0 / np.sqrt(q.shape[-1])
    logits = np.einsum("...id,...jd->...ij", q, k) * scale
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask
    return np.einsum("...ij,...jd->...id", p, v), p


def masked_multiply_scores(q, k, v, mask):
    s = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    s = s * mask
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    w = np.where(mask.any(axis=-1, keepdims=True), w, 0.0)
    return w @ v, w


def masked_scale_by_n_k(q, k, v, mask):
    n_k = k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(n_k)
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(s - m)
    tot = np.sum(e, axis=-1, keepdims=True)
    w = e / np.where(tot == 0, 1.0, tot)
    return w @ v, w


def masked_out_from_unmasked(q, k, v, mask):
    d_k = q.shape[-1]
    raw = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)
    shifted = raw - raw.max(axis=-1, keepdims=True)
    attn = np.exp(shifted)
    attn = attn / attn.sum(axis=-1, keepdims=True)
    masked = np.where(mask, raw, -np.inf)
    mx = masked.max(axis=-1, keepdims=True)
    mx = np.where(np.isinf(mx), 0.0, mx)
    ex = np.exp(masked - mx)
    den = ex.sum(axis=-1, keepdims=True)
    weights = np.where(den > 0, ex / np.where(den > 0, den, 1.0), 0.0)
    return attn @ v, weights


def masked_log_mask(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    with np.errstate(divide="ignore"):
        bias = np.log(np.asarray(mask, dtype=np.float64))  # 0 where allowed, -inf where not
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + bias
    row_max = s.max(axis=-1, keepdims=True)
    empty = np.isneginf(row_max)
    e = np.exp(s - np.where(empty, 0.0, row_max))
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(empty, 1.0, z)
    return w @ v, w


def masked_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    mb = np.broadcast_to(np.asarray(mask, dtype=bool), lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    inv = 1.0 / math.sqrt(q.shape[-1])
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keys = np.flatnonzero(mb[idx][i])
            if keys.size == 0:
                continue
            s = kb[idx][keys] @ qb[idx][i] * inv
            p = np.exp(s - s.max())
            p /= p.sum()
            weights[idx + (i,)][keys] = p
            out[idx + (i,)] = p @ vb[idx][keys]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "top-left-aligned",
          "np.tril without an offset aligns the mask top-left (key j <= i), so when n_k > n_q the "
          "queries cannot see the earlier cached keys (and when n_q > n_k they see too many)",
          causal_top_left),
    Entry("causal_mask", "wrong", "offset-sign-flipped",
          "the tril offset is n_q - n_k instead of n_k - n_q, so the diagonal moves the wrong way "
          "when n_q != n_k", causal_offset_sign),
    Entry("causal_mask", "wrong", "float-mask",
          "np.ones defaults to float, so the mask is an array of 1.0/0.0 instead of a boolean array",
          causal_float_ones),
    Entry("causal_mask", "wrong", "aranges-transposed",
          "the two aranges are broadcast the wrong way round (queries along columns, keys along "
          "rows), so the mask is (n_k, n_q), the transpose of the right one",
          causal_arange_orientation),
    Entry("causal_mask", "wrong", "offset-plus-one",
          "the offset is n_k - n_q + 1, so every query may also attend the next, future key",
          causal_one_future_key),
    Entry("causal_mask", "wrong", "true-means-blocked",
          "it returns the blocked positions (np.triu above the diagonal, PyTorch attn_mask style) "
          "so True means 'may not attend', the opposite of the course convention",
          causal_true_means_blocked),
    Entry("causal_mask", "right", "list-comprehension", None, causal_comprehension),
    Entry("causal_mask", "right", "subtract-outer", None, causal_outer),

    Entry("padding_mask", "wrong", "le-instead-of-lt",
          "the comparison is j <= lengths[b] instead of j < lengths[b], so one padding position "
          "past each sequence is allowed", padding_le),
    Entry("padding_mask", "wrong", "shape-b-1-n",
          "only one singleton axis is inserted, so the mask is (B, 1, n) instead of (B, 1, 1, n)",
          padding_three_dims),
    Entry("padding_mask", "wrong", "transposed-then-reshaped",
          "the comparison is built as (n, B) (positions along rows) and reshape, not a transpose, "
          "turns it into (B, 1, 1, n), scrambling which entries belong to which sequence",
          padding_transposed_reshape),
    Entry("padding_mask", "wrong", "true-marks-padding",
          "j >= lengths[b] marks the padding positions as True, the opposite of True = may attend",
          padding_true_is_pad),
    Entry("padding_mask", "wrong", "int-mask",
          "np.where(..., 1, 0) returns an integer 0/1 array instead of a boolean mask",
          padding_int_mask),
    Entry("padding_mask", "wrong", "left-padding",
          "the valid tokens are put at the end of each row (mask[b, ..., n - L:]), as for left "
          "padding, instead of key positions j < lengths[b]", padding_left_aligned),
    Entry("padding_mask", "right", "python-loop", None, padding_loop),
    Entry("padding_mask", "right", "broadcast-4d", None, padding_broadcast4d),

    Entry("masked_attention", "wrong", "fill-minus-1e9",
          "masked scores are set to -1e9 instead of -inf with a zero-row guard, so a fully masked "
          "row gets uniform weights over all keys instead of zeros", masked_big_negative),
    Entry("masked_attention", "wrong", "mask-inverted",
          "np.where(mask, -inf, scores) removes the allowed keys and keeps the masked ones: True is "
          "treated as 'blocked'", masked_inverted),
    Entry("masked_attention", "wrong", "mask-after-softmax",
          "the mask multiplies the weights after the softmax, so the surviving weights are not "
          "renormalised and rows no longer sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "multiply-scores-by-mask",
          "the scores are multiplied by the mask, which sets masked scores to 0 instead of -inf, so "
          "masked keys still get weight exp(0 - max)", masked_multiply_scores),
    Entry("masked_attention", "wrong", "scale-by-sqrt-n_k",
          "the scores are divided by sqrt(N_k) (k.shape[-2], the number of keys) instead of "
          "sqrt(d_k)", masked_scale_by_n_k),
    Entry("masked_attention", "wrong", "output-from-unmasked-weights",
          "the output is computed with the unmasked attention weights (a variable from before the "
          "mask) while the returned weights are masked, so out ignores the mask",
          masked_out_from_unmasked),
    Entry("masked_attention", "right", "additive-log-mask-float64", None, masked_log_mask),
    Entry("masked_attention", "right", "per-row-allowed-keys-loop", None, masked_row_loop),
]
