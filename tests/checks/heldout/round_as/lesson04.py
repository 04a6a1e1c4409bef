"""Held-out catalogue, lesson 04 (causal_mask, padding_mask, masked_attention), written blind."""

import math

import numpy as np

from entry import Entry


# -------------------------------------------------------------------------- causal_mask, wrong
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_tri_swapped(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_k, n_q, n_k - n_q, dtype=bool)


def causal_future_mask(n_q, n_k=None):
    n_k = n_k or n_q
    # block the future: keys after the query's position
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


# -------------------------------------------------------------------------- causal_mask, right
def causal_nested_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_subtract_outer(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    lag = np.subtract.outer(np.arange(n_q), np.arange(n_k))  # i - j
    return lag >= n_q - n_k


# ------------------------------------------------------------------------- padding_mask, wrong
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_no_singletons(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n) < lengths[:, None]


def padding_inverted(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad[:, None, None, :]


def padding_reshape_transposed(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return keep.reshape(len(lengths), 1, 1, n)


def padding_float_ones(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b in range(B):
        mask[b, 0, 0, :lengths[b]] = 1
    return mask


def padding_loop_all_rows(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for length in lengths:
        mask[:, :, :, :length] = True
    return mask


# ------------------------------------------------------------------------- padding_mask, right
def padding_less_outer(lengths, n):
    lens = np.asarray(lengths)
    return np.less.outer(np.arange(n), lens).T[:, None, None, :]


def padding_list_comprehension(lengths, n):
    lens = [int(v) for v in np.asarray(lengths).ravel()]
    rows = [[pos < L for pos in range(n)] for L in lens]
    return np.array(rows, dtype=bool).reshape(len(lens), 1, 1, n)


# --------------------------------------------------------------------- masked_attention, wrong
def masked_nan_rows(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_multiply_scores(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_after_softmax(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    probs = probs * mask
    return probs @ v, probs


def masked_softmax_axis_minus2(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-2, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
    e = np.exp(s - m)
    z = e.sum(axis=-2, keepdims=True)
    w = np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)
    return w @ v, w


# --------------------------------------------------------------------- masked_attention, right
def masked_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2] if np.ndim(mask) > 2 else ())
    qb = np.broadcast_to(q, lead + (n_q, d)).reshape(-1, n_q, d)
    kb = np.broadcast_to(k, lead + (n_k, d)).reshape(-1, n_k, d)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    mb = np.broadcast_to(np.asarray(mask, dtype=bool), lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, d_v))
    wts = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            allowed = np.flatnonzero(mb[b, i])
            if allowed.size == 0:
                continue
            s = kb[b, allowed] @ qb[b, i] / math.sqrt(d)
            e = np.exp(s - s.max())
            wts[b, i, allowed] = e / e.sum()
            out[b, i] = wts[b, i] @ vb[b]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


def masked_exp_times_mask(q, k, v, mask):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    allow = np.asarray(mask, dtype=bool)
    logits = np.einsum("...qd,...kd->...qk", q64, k64) * (q64.shape[-1] ** -0.5)
    shift = np.max(np.where(allow, logits, -np.inf), axis=-1, keepdims=True)
    shift = np.nan_to_num(shift, neginf=0.0)
    unnorm = np.exp(np.minimum(logits - shift, 0.0)) * allow
    total = unnorm.sum(axis=-1, keepdims=True)
    weights = unnorm / np.maximum(total, np.finfo(np.float64).tiny) * (total > 0)
    return weights @ v64, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "top-left-aligned",
          "uses np.tril with no offset, a top-left aligned mask: right only when n_q == n_k, "
          "whereas the contract aligns the queries with the last n_q keys", causal_top_left),
    Entry("causal_mask", "wrong", "strict-less-than",
          "the comparison keeps the diagonal out: `<` where `<=` belongs, so no query may "
          "attend its own position", causal_strict),
    Entry("causal_mask", "wrong", "offset-sign-flipped",
          "gives np.tril the offset n_q - n_k instead of n_k - n_q (sign flipped)",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float-mask",
          "np.ones without dtype=bool makes a float 0/1 mask, but the contract fixes a boolean "
          "mask", causal_float_mask),
    Entry("causal_mask", "wrong", "np-tri-args-swapped",
          "calls np.tri(n_k, n_q, ...) with the row and column counts swapped, so the mask is "
          "(n_k, n_q) with the wrong pattern when n_q != n_k", causal_tri_swapped),
    Entry("causal_mask", "wrong", "returns-future-mask",
          "returns the mask of the future keys (True = blocked), the opposite of the course's "
          "True = may attend convention", causal_future_mask),
    Entry("causal_mask", "right", "nested-list-comprehension", None, causal_nested_lists),
    Entry("causal_mask", "right", "subtract-outer", None, causal_subtract_outer),
    Entry("padding_mask", "wrong", "less-or-equal",
          "compares j <= lengths[b]: one padded position too many is allowed (off by one)",
          padding_le),
    Entry("padding_mask", "wrong", "no-singleton-axes",
          "returns the (B, n) comparison without adding the head and query axes, not "
          "(B, 1, 1, n)", padding_no_singletons),
    Entry("padding_mask", "wrong", "true-marks-padding",
          "marks the padded positions True (j >= length), the opposite of True = may attend",
          padding_inverted),
    Entry("padding_mask", "wrong", "reshape-not-transpose",
          "builds the comparison as (n, B) and reshapes it to (B, 1, 1, n) instead of "
          "transposing, which scrambles the rows", padding_reshape_transposed),
    Entry("padding_mask", "wrong", "float-ones",
          "fills a float array created with np.zeros, returning a 0/1 float mask instead of a "
          "boolean one", padding_float_ones),
    Entry("padding_mask", "wrong", "loop-sets-every-row",
          "inside the loop over lengths it writes mask[:, ..., :length] for every sequence "
          "instead of row b, so each row gets the longest length", padding_loop_all_rows),
    Entry("padding_mask", "right", "less-outer-transpose", None, padding_less_outer),
    Entry("padding_mask", "right", "list-comprehension", None, padding_list_comprehension),
    Entry("masked_attention", "wrong", "nan-on-fully-masked-rows",
          "fills masked scores with -inf but does not guard a row with no allowed key: "
          "-inf - (-inf) gives NaN instead of a zero row", masked_nan_rows),
    Entry("masked_attention", "wrong", "minus-1e9-fill",
          "fills masked scores with -1e9 instead of -inf: fine while a row has an allowed key, "
          "but a fully masked row gets uniform weights instead of zeros", masked_big_negative),
    Entry("masked_attention", "wrong", "mask-inverted",
          "np.where(mask, -inf, scores) blocks the keys where mask is True, reading the mask "
          "as True = masked", masked_inverted),
    Entry("masked_attention", "wrong", "scores-times-mask",
          "multiplies the scores by the mask, which only sets masked scores to 0: masked keys "
          "still get weight exp(0) in the softmax", masked_multiply_scores),
    Entry("masked_attention", "wrong", "mask-after-softmax",
          "zeroes the masked weights after the softmax without renormalising, so rows no longer "
          "sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "softmax-over-queries",
          "normalises along axis -2 (over the queries) instead of the keys", 
          masked_softmax_axis_minus2),
    Entry("masked_attention", "right", "per-row-loop", None, masked_row_loop),
    Entry("masked_attention", "right", "exp-times-mask-float64", None, masked_exp_times_mask),
]
