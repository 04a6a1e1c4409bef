"""Held-out catalogue, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ---------------------------------------------------------------------------- causal_mask (wrong)
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
    n_k = n_k if n_k is not None else n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_ones(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def causal_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_keys_on_rows(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :]
    return keys <= queries + n_k - n_q


# ---------------------------------------------------------------------------- causal_mask (right)
def causal_python_lists(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_not_future(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    future = np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)
    return ~future


# --------------------------------------------------------------------------- padding_mask (wrong)
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_flat(lengths, n):
    return np.arange(n)[None, :] < np.asarray(lengths)[:, None]


def padding_no_new_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths
    return keep.reshape(len(lengths), 1, 1, n)


def padding_inverted(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad[:, None, None, :]


def padding_width_from_max(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


def padding_init_ones(lengths, n):
    mask = np.ones((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = True
    return mask


# --------------------------------------------------------------------------- padding_mask (right)
def padding_loop_zeros(lengths, n):
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b in range(len(lengths)):
        out[b, ..., :int(lengths[b])] = True
    return out


def padding_greater_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n))[:, None, None, :]


# ----------------------------------------------------------------------- masked_attention (wrong)
def masked_big_negative(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    weights = weights * mask
    return weights @ v, weights


def masked_inverted(q, k, v, mask):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_nan_rows(q, k, v, mask):
    d_k = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_k)
    scores = np.where(mask, scores, -np.inf)
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= np.sum(w, axis=-1, keepdims=True)
    return np.matmul(w, v), w


def masked_scale_by_nk(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2])
    s = np.where(mask, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(s - top)
    z = e.sum(axis=-1, keepdims=True)
    w = np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)
    return w @ v, w


def masked_multiply_scores(q, k, v, mask):
    s = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    s = s * mask  # masked scores become 0
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


# ----------------------------------------------------------------------- masked_attention (right)
def masked_logsumexp(q, k, v, mask):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = q64 @ np.swapaxes(k64, -1, -2) / math.sqrt(q64.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
        w = np.where(np.isfinite(lse), np.exp(s - lse), 0.0)
    return w @ v64, w


def masked_rowwise_loop(q, k, v, mask):
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    allowed = np.broadcast_to(mask, scores.shape)
    flat_s = scores.reshape(-1, scores.shape[-1])
    flat_m = allowed.reshape(-1, scores.shape[-1])
    weights = np.zeros_like(flat_s)
    for r in range(flat_s.shape[0]):
        keep = flat_m[r]
        if keep.any():
            row = flat_s[r, keep]
            ex = np.exp(row - row.max())
            weights[r, keep] = ex / ex.sum()
    weights = weights.reshape(scores.shape)
    return np.einsum("...ij,...jd->...id", weights, v), weights


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned", "uses np.tril with no offset, so the "
          "mask is aligned top-left: with n_k > n_q the queries cannot see the cached keys "
          "they are entitled to", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less", "the mask keeps the diagonal out: `<` where "
          "`<=` belongs, so a query cannot attend its own position", causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_flipped", "the tril offset is n_q - n_k instead "
          "of n_k - n_q", causal_offset_flipped),
    Entry("causal_mask", "wrong", "float_not_bool", "returns np.tril of float ones, a float "
          "array, where the contract asks for a boolean mask", causal_float_ones),
    Entry("causal_mask", "wrong", "triu_for_tril", "uses np.triu, which keeps the upper "
          "triangle (the future keys), instead of np.tril", causal_triu),
    Entry("causal_mask", "wrong", "keys_on_rows", "puts the keys on the rows and the queries on "
          "the columns, returning the transposed (n_k, n_q) mask instead of (n_q, n_k)", causal_keys_on_rows),
    Entry("causal_mask", "right", "python_lists", None, causal_python_lists),
    Entry("causal_mask", "right", "not_future_triu", None, causal_not_future),
    Entry("padding_mask", "wrong", "less_equal", "uses j <= lengths[b] where j < lengths[b] "
          "belongs, so one padding position per sequence is allowed", padding_le),
    Entry("padding_mask", "wrong", "no_singleton_axes", "returns the (B, n) mask without the "
          "two length-1 axes, not (B, 1, 1, n)", padding_flat),
    Entry("padding_mask", "wrong", "lengths_not_a_column", "compares arange(n) with lengths "
          "directly instead of lengths[:, None], so the shapes (n,) and (B,) do not broadcast "
          "(raises)", padding_no_new_axis),
    Entry("padding_mask", "wrong", "inverted_convention", "marks the padding positions True "
          "(j >= lengths[b]), the opposite of True = may attend", padding_inverted),
    Entry("padding_mask", "wrong", "width_from_max_length", "sizes the key axis by "
          "lengths.max() instead of the argument n", padding_width_from_max),
    Entry("padding_mask", "wrong", "starts_all_true", "fills the valid prefix into an array "
          "made with np.ones, so the padding positions stay True", padding_init_ones),
    Entry("padding_mask", "right", "loop_zeros", None, padding_loop_zeros),
    Entry("padding_mask", "right", "greater_outer", None, padding_greater_outer),
    Entry("masked_attention", "wrong", "minus_1e9_fill", "fills masked scores with -1e9 instead "
          "of -inf and has no rule for empty rows, so a fully masked row gets uniform weights "
          "(the mean of v) instead of zeros", masked_big_negative),
    Entry("masked_attention", "wrong", "mask_after_softmax", "multiplies the weights by the "
          "mask after the softmax without renormalising, so rows no longer sum to 1",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "mask_inverted", "puts -inf where the mask is True, "
          "treating True as 'blocked' instead of 'may attend'", masked_inverted),
    Entry("masked_attention", "wrong", "nan_on_empty_rows", "a fully masked row gives "
          "-inf - (-inf) = NaN, with no guard that returns zeros", masked_nan_rows),
    Entry("masked_attention", "wrong", "scale_by_n_k", "scales by 1/sqrt(k.shape[-2]), the "
          "number of keys, instead of 1/sqrt(d_k)", masked_scale_by_nk),
    Entry("masked_attention", "wrong", "mask_multiplies_scores", "multiplies the scores by "
          "the boolean mask, so masked keys get score 0 (and still weight) instead of -inf",
          masked_multiply_scores),
    Entry("masked_attention", "right", "scipy_logsumexp", None, masked_logsumexp),
    Entry("masked_attention", "right", "row_loop_allowed_keys", None, masked_rowwise_loop),
]
