"""Round k, lesson 04 (numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


# ============================================================================ causal_mask
@add("causal_mask", "wrong", "top_left_aligned",
     "It uses np.tril with no offset, aligning the mask top-left, so when n_q != n_k query i "
     "does not sit at position i + n_k - n_q.")
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


@add("causal_mask", "wrong", "strict_less_than",
     "It compares keys with < instead of <=, so every query is barred from its own position.")
def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return j < i


@add("causal_mask", "wrong", "triu_for_tril",
     "It calls np.triu where np.tril is needed: triu keeps the upper triangle, so the mask "
     "allows the future and blocks the past.")
def causal_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


@add("causal_mask", "wrong", "offset_sign_flipped",
     "The diagonal offset is n_q - n_k instead of n_k - n_q, shifting the mask the wrong way "
     "whenever n_q != n_k.")
def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), n_q - n_k)


@add("causal_mask", "wrong", "float_ones_tril",
     "It returns np.tril of a float array of ones, so the mask is 0.0/1.0 floats instead of a "
     "boolean array.")
def causal_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


@add("causal_mask", "wrong", "key_range_uses_n_q",
     "The key positions are built with np.arange(n_q) instead of np.arange(n_k), so the mask "
     "has shape (n_q, n_q).")
def causal_keys_nq(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    rows = np.arange(n_q).reshape(-1, 1) + n_k - n_q
    cols = np.arange(n_q).reshape(1, -1)
    return cols <= rows


@add("causal_mask", "right", "greater_equal_outer")
def causal_outer(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.greater_equal.outer(np.arange(n_q) + (n_k - n_q), np.arange(n_k))


@add("causal_mask", "right", "torch_tril")
def causal_torch(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q).numpy()


# ============================================================================ padding_mask
@add("padding_mask", "wrong", "less_equal",
     "It uses j <= lengths[b] instead of j < lengths[b], letting each sequence attend one "
     "padding position too many.")
def pad_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


@add("padding_mask", "wrong", "singletons_in_front",
     "It adds the two singleton axes in front, returning (1, 1, B, n) instead of (B, 1, 1, n).")
def pad_front_axes(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[None, None]


@add("padding_mask", "wrong", "lengths_not_expanded",
     "It compares np.arange(n) < lengths without adding an axis to lengths, so the comparison "
     "broadcasts position against batch and raises for batches larger than one.")
def pad_no_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths
    return keep.reshape(len(lengths), 1, 1, n)


@add("padding_mask", "wrong", "true_marks_padding",
     "It marks the padding positions (j >= length) as True, the 'True = masked' convention, "
     "instead of True = may attend.")
def pad_inverted(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n) >= lengths[:, None])[:, None, None, :]


@add("padding_mask", "wrong", "batch_loop_off_by_one",
     "The loop over the batch stops one early (range(len(lengths) - 1)), so the last sequence "
     "gets an all-False row.")
def pad_loop(lengths, n):
    b = len(lengths)
    mask = np.zeros((b, 1, 1, n), dtype=bool)
    for i in range(b - 1):
        mask[i, 0, 0, :lengths[i]] = True
    return mask


@add("padding_mask", "wrong", "width_from_max_length",
     "It sizes the key axis by the longest length (lengths.max()) instead of n, so the mask is "
     "too narrow whenever every sequence is shorter than n.")
def pad_max_len(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(lengths.max())
    return (positions[None, :] < lengths[:, None]).reshape(len(lengths), 1, 1, -1)


@add("padding_mask", "right", "torch_compare")
def pad_torch(lengths, n):
    lens = torch.as_tensor(np.asarray(lengths, dtype=np.int64))
    keep = torch.arange(n)[None, :] < lens[:, None]
    return keep.view(-1, 1, 1, n).numpy()


@add("padding_mask", "right", "fill_by_slices")
def pad_fill(lengths, n):
    out = np.zeros((len(lengths), n), dtype=np.bool_)
    for row, length in zip(out, lengths):
        row[:int(length)] = True
    return out[:, np.newaxis, np.newaxis, :]


# ============================================================================ masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def _safe_softmax(s):
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


@add("masked_attention", "wrong", "fill_minus_1e9",
     "It fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
     "weights (and a non-zero output) instead of zeros.")
def masked_big_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = _safe_softmax(s)
    return w @ v, w


@add("masked_attention", "wrong", "multiply_scores_by_mask",
     "It multiplies the scores by the mask, which sets masked scores to 0 instead of removing "
     "those keys from the softmax.")
def masked_multiply(q, k, v, mask):
    s = _scores(q, k) * mask
    w = _safe_softmax(s)
    return w @ v, w


@add("masked_attention", "wrong", "true_means_blocked",
     "It treats True as 'blocked' (np.where(mask, -inf, scores)), the opposite of the course's "
     "True = may attend convention.")
def masked_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    w = _safe_softmax(s)
    return w @ v, w


@add("masked_attention", "wrong", "zero_after_softmax_no_renorm",
     "It applies the softmax to the unmasked scores and then zeroes the masked weights without "
     "renormalising, so the rows no longer sum to 1.")
def masked_post_zero(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


@add("masked_attention", "wrong", "nan_on_empty_rows",
     "It subtracts the row maximum even for fully masked rows, where it is -inf, so those rows "
     "become NaN instead of zeros.")
def masked_nan_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


@add("masked_attention", "wrong", "scale_by_n_k",
     "It scales the scores by 1/sqrt(k.shape[-2]) (the number of keys) instead of "
     "1/sqrt(d_k).")
def masked_scale_nk(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-2])
    w = _safe_softmax(np.where(mask, s, -np.inf))
    return w @ v, w


@add("masked_attention", "right", "torch_nan_to_num")
def masked_torch(q, k, v, mask):
    dtype = np.result_type(q, k, v)
    qt, kt, vt = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    m = torch.from_numpy(np.asarray(mask, dtype=bool))
    s = (qt @ kt.transpose(-2, -1)) / math.sqrt(qt.shape[-1])
    s = s.masked_fill(~m, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return (w @ vt).numpy().astype(dtype), w.numpy().astype(dtype)


@add("masked_attention", "right", "scipy_logsumexp_rows")
def masked_lse(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    empty = ~np.isfinite(lse)
    w = np.exp(s - np.where(empty, 0.0, lse))
    w = np.where(empty, 0.0, w)
    return w @ v, w
