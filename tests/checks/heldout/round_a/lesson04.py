"""Lesson 04 (numpy): causal_mask, padding_mask and masked_attention, as learners write them."""

import numpy as np

from entry import Entry


# ----------------------------------------------------------------------------- causal_mask: wrong
def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    query_position = np.arange(n_q)[:, None] + (n_k - n_q)
    key_position = np.arange(n_k)[None, :]
    return key_position < query_position


def causal_inverted(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    query_position = np.arange(n_q)[:, None] + (n_k - n_q)
    key_position = np.arange(n_k)[None, :]
    return key_position > query_position  # True marks the future


def causal_upper_triangle(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_float_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_offset_wrong_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_no_default(n_q, n_k=None):
    offset = n_k - n_q
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + offset


# ----------------------------------------------------------------------------- causal_mask: right
def causal_tril_offset(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_nested_lists(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    rows = [[j <= i + n_k - n_q for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


# ----------------------------------------------------------------------------- padding_mask: wrong
def padding_no_broadcast_axes(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_off_by_one_inclusive(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_inverted(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]  # True on the padding
    return pad[:, None, None, :]


def padding_axes_in_front(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[None, None]  # (1, 1, B, n)


def padding_one_based_positions(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(1, n + 1)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


def padding_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]  # (B, 1, n, 1): masks queries instead of keys


# ----------------------------------------------------------------------------- padding_mask: right
def padding_loop_fill(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = True
    return mask


def padding_broadcast_4d(lengths, n):
    return np.arange(n) < np.asarray(lengths)[:, None, None, None]


# ----------------------------------------------------------------------------- masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def masked_fill_zero(q, k, v, mask):
    scores = np.where(mask, _scores(q, k), 0.0)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    s = _scores(q, k)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    w = w * mask  # zero the forbidden weights
    return w @ v, w


def masked_nan_on_empty_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    m = s.max(axis=-1, keepdims=True)
    w = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    t = w.sum(axis=-1, keepdims=True)
    w = np.divide(w, t, out=np.zeros_like(w), where=t > 0)
    return w @ v, w


def masked_fill_large_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_patch_output_only(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    out = np.nan_to_num(w @ v)  # NaN rows of the output become 0; the weights keep their NaN
    return out, w


def masked_no_scale(q, k, v, mask):
    s = np.where(mask, q @ np.swapaxes(k, -1, -2), -np.inf)
    m = s.max(axis=-1, keepdims=True)
    w = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    t = w.sum(axis=-1, keepdims=True)
    w = np.divide(w, t, out=np.zeros_like(w), where=t > 0)
    return w @ v, w


# ----------------------------------------------------------------------------- masked_attention: right
def masked_nan_to_num_weights(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    with np.errstate(invalid="ignore"):
        w = np.exp(s - s.max(axis=-1, keepdims=True))
        w = w / w.sum(axis=-1, keepdims=True)
    w = np.nan_to_num(w, nan=0.0)  # rows with no allowed key: 0/0 -> 0
    return w @ v, w


def masked_multiply_renormalise(q, k, v, mask):
    s = _scores(q, k)
    allowed = np.broadcast_to(mask, s.shape)
    finite_max = np.max(np.where(allowed, s, -np.finfo(s.dtype).max), axis=-1, keepdims=True)
    e = np.exp(np.minimum(s - finite_max, 0.0)) * allowed  # forbidden keys multiplied by 0
    total = e.sum(axis=-1, keepdims=True)
    w = e / np.where(total > 0, total, 1.0)
    return w @ v, w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left",
          "Aligns the triangle top-left (np.tril with no offset), which is only right when "
          "n_q == n_k; with a cache the queries are the last n_q positions.", causal_top_left),
    Entry("causal_mask", "wrong", "strict_excludes_diagonal",
          "Uses < instead of <=, so a token may not attend to itself.", causal_strict),
    Entry("causal_mask", "wrong", "inverted",
          "Marks the future keys True (the positions to hide) instead of the allowed ones.",
          causal_inverted),
    Entry("causal_mask", "wrong", "upper_triangle",
          "Takes the upper triangle (np.triu) instead of the lower one.", causal_upper_triangle),
    Entry("causal_mask", "wrong", "float_not_bool",
          "Returns a float array of 0s and 1s (np.tril of np.ones) instead of a boolean mask.",
          causal_float_mask),
    Entry("causal_mask", "wrong", "offset_wrong_sign",
          "Shifts the diagonal by n_q - n_k instead of n_k - n_q.", causal_offset_wrong_sign),
    Entry("causal_mask", "wrong", "no_default_for_n_k",
          "Never replaces n_k=None by n_q, so causal_mask(n) fails.", causal_no_default),
    Entry("causal_mask", "right", "tril_offset", None, causal_tril_offset),
    Entry("causal_mask", "right", "nested_lists", None, causal_nested_lists),

    Entry("padding_mask", "wrong", "no_broadcast_axes",
          "Returns a (B, n) mask without the two singleton axes, so it lines up with "
          "(N_q, N_k) instead of broadcasting over heads and queries.", padding_no_broadcast_axes),
    Entry("padding_mask", "wrong", "inclusive_length",
          "Uses j <= lengths[b], which lets every sequence attend one padding key.",
          padding_off_by_one_inclusive),
    Entry("padding_mask", "wrong", "inverted",
          "Marks the padding positions True instead of the real keys.", padding_inverted),
    Entry("padding_mask", "wrong", "singleton_axes_in_front",
          "Adds the singleton axes in front, giving (1, 1, B, n) instead of (B, 1, 1, n).",
          padding_axes_in_front),
    Entry("padding_mask", "wrong", "one_based_positions",
          "Numbers the key positions from 1 (np.arange(1, n + 1)), which hides each sequence's "
          "last real key.", padding_one_based_positions),
    Entry("padding_mask", "wrong", "masks_queries",
          "Puts the key axis in the query slot, (B, 1, n, 1), so it masks queries instead of "
          "keys.", padding_query_axis),
    Entry("padding_mask", "right", "loop_fill", None, padding_loop_fill),
    Entry("padding_mask", "right", "broadcast_4d", None, padding_broadcast_4d),

    Entry("masked_attention", "wrong", "fill_with_zero",
          "Replaces forbidden scores by 0 instead of -inf, so masked keys still get weight "
          "(e^0 = 1).", masked_fill_zero),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "Zeroes the forbidden weights after the softmax, so the rows no longer sum to 1.",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "nan_on_fully_masked_rows",
          "Does not guard rows with no allowed key: their max is -inf and -inf - (-inf) gives "
          "NaN weights and outputs.", masked_nan_on_empty_rows),
    Entry("masked_attention", "wrong", "inverted_mask",
          "Reads the mask the other way round (True = hide), hiding the allowed keys.",
          masked_inverted),
    Entry("masked_attention", "wrong", "fill_large_negative",
          "Fills forbidden scores with -1e9 instead of -inf, so a row with no allowed key "
          "gets uniform weights instead of zeros.", masked_fill_large_negative),
    Entry("masked_attention", "wrong", "patches_output_not_weights",
          "Replaces the NaN output rows of fully masked queries by 0 but returns the weights "
          "with their NaN rows.", masked_patch_output_only),
    Entry("masked_attention", "wrong", "no_scale",
          "Masks correctly but forgets to divide the scores by sqrt(d_k).", masked_no_scale),
    Entry("masked_attention", "right", "nan_to_num_weights", None, masked_nan_to_num_weights),
    Entry("masked_attention", "right", "multiply_renormalise", None, masked_multiply_renormalise),
]
