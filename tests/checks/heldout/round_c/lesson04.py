"""Round c, lesson 04: causal_mask, padding_mask, masked_attention (numpy)."""

import numpy as np
import torch

from entry import Entry


# ------------------------------------------------------------------ causal_mask
def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_inverted(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + n_k - n_q


def causal_torch(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def causal_np_tri(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


def causal_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        for j in range(n_k):
            mask[i, j] = j <= i + (n_k - n_q)
    return mask


# ------------------------------------------------------------------ padding_mask
def pad_off_by_one(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pad_flat(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def pad_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :, None]


def pad_inverted(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= lengths[:, None])[:, None, None, :]


def pad_int(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None]).astype(int)[:, None, None, :]


def pad_max_length(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    return (np.arange(width)[None, :] < lengths[:, None])[:, None, None, :]


def pad_loop(lengths, n):
    lengths = np.asarray(lengths)
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :int(length)] = True
    return mask


def pad_greater_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n)).reshape(-1, 1, 1, n)


# ------------------------------------------------------------------ masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def ma_large_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = _safe_softmax(s)
    return w @ v, w


def ma_multiply_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def ma_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    w = _safe_softmax(s)
    return w @ v, w


def ma_nan_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_scores_times_mask(q, k, v, mask):
    s = _scores(q, k) * mask
    w = _safe_softmax(s)
    return w @ v, w


def ma_returns_out_only(q, k, v, mask):
    w = _safe_softmax(np.where(mask, _scores(q, k), -np.inf))
    return w @ v


def ma_renormalise(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    tot = w.sum(axis=-1, keepdims=True)
    w = np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)
    return w @ v, w


def ma_row_loop(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = _scores(q, k)
    m = np.broadcast_to(mask, s.shape)
    w = np.zeros_like(s)
    for idx in np.ndindex(s.shape[:-1]):
        allowed = m[idx]
        if allowed.any():
            row = s[idx][allowed]
            e = np.exp(row - row.max())
            w[idx][allowed] = e / e.sum()
    return w @ v, w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned", "Uses np.tril without an offset, aligning the mask top-left so that with n_q < n_k the queries cannot see the cached keys before them.", causal_top_left),
    Entry("causal_mask", "wrong", "float_mask", "Returns a float array of ones and zeros instead of a boolean mask.", causal_float),
    Entry("causal_mask", "wrong", "true_means_masked", "Marks the future keys True (True = masked), the opposite of the course's True = may attend convention.", causal_inverted),
    Entry("causal_mask", "wrong", "offset_sign", "Uses the diagonal offset n_q - n_k instead of n_k - n_q.", causal_offset_sign),
    Entry("causal_mask", "wrong", "strict_inequality", "Uses j < i + n_k - n_q, so a query may not attend its own position.", causal_strict),
    Entry("causal_mask", "wrong", "returns_torch_tensor", "Builds the mask with torch and returns a torch.Tensor in a numpy lesson.", causal_torch),
    Entry("causal_mask", "right", "np_tri", None, causal_np_tri),
    Entry("causal_mask", "right", "double_loop", None, causal_loops),
    Entry("padding_mask", "wrong", "off_by_one", "Uses j <= lengths[b], letting each sequence attend one padded position.", pad_off_by_one),
    Entry("padding_mask", "wrong", "no_broadcast_axes", "Returns shape (B, n) without the two singleton axes for heads and queries.", pad_flat),
    Entry("padding_mask", "wrong", "query_axis", "Puts the key positions on the query axis, shape (B, 1, n, 1), instead of the last axis.", pad_query_axis),
    Entry("padding_mask", "wrong", "true_means_padding", "Marks the padded positions True instead of the positions that may be attended.", pad_inverted),
    Entry("padding_mask", "wrong", "int_mask", "Returns an integer 0/1 array instead of a boolean mask.", pad_int),
    Entry("padding_mask", "wrong", "width_from_max_length", "Sizes the key axis by the longest length instead of the given n.", pad_max_length),
    Entry("padding_mask", "right", "loop_fill", None, pad_loop),
    Entry("padding_mask", "right", "greater_outer", None, pad_greater_outer),
    Entry("masked_attention", "wrong", "large_negative_fill", "Fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform weights instead of zeros.", ma_large_negative),
    Entry("masked_attention", "wrong", "mask_after_softmax", "Multiplies the softmax weights by the mask without renormalising, so the remaining weights no longer sum to 1.", ma_multiply_after_softmax),
    Entry("masked_attention", "wrong", "inverted_mask", "Fills -inf where the mask is True, treating True as masked.", ma_inverted),
    Entry("masked_attention", "wrong", "nan_on_empty_rows", "Does not handle fully masked rows: max is -inf, so the row becomes NaN instead of zeros.", ma_nan_rows),
    Entry("masked_attention", "wrong", "scores_times_mask", "Multiplies the scores by the mask, so masked keys get score 0 (still weighted) instead of -inf.", ma_scores_times_mask),
    Entry("masked_attention", "wrong", "returns_out_only", "Returns only the output instead of the (out, weights) pair.", ma_returns_out_only),
    Entry("masked_attention", "right", "renormalise_after_mask", None, ma_renormalise),
    Entry("masked_attention", "right", "row_loop", None, ma_row_loop),
]
