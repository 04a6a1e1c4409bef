"""Round l, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

from __future__ import annotations

import math

import numpy as np
import torch

from entry import Entry

# ============================================================================ causal_mask


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return j < i


def causal_float_tril(n_q, n_k=None):
    n_k = n_k or n_q
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def causal_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q
    return np.arange(n_q)[None, :] + offset >= np.arange(n_k)[:, None]


def causal_clamped_offset(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    offset = max(n_k - n_q, 0)
    rows = np.arange(n_q).reshape(-1, 1)
    cols = np.arange(n_k).reshape(1, -1)
    return cols <= rows + offset


def causal_np_tri(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


def causal_comprehension(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.array([[j <= i + n_k - n_q for j in range(n_k)] for i in range(n_q)], dtype=bool)


# ============================================================================ padding_mask


def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_axes_after(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, :, None, None]


def padding_reshape_transposed(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[:, None] < lengths[None, :]
    return keep.reshape(len(lengths), 1, 1, n)


def padding_key_padding_convention(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad[:, None, None, :]


def padding_left_side(lengths, n):
    lengths = np.asarray(lengths)
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, -length:] = True
    return mask


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width) < lengths[:, None]
    return keep[:, None, None, :]


def padding_torch(lengths, n):
    lens = torch.as_tensor(np.asarray(lengths), dtype=torch.long)
    keep = torch.arange(n) < lens[:, None]
    return keep.view(-1, 1, 1, n).numpy()


def padding_comprehension(lengths, n):
    rows = [[j < length for j in range(n)] for length in np.asarray(lengths).tolist()]
    return np.array(rows, dtype=bool).reshape(len(rows), 1, 1, n)


# ============================================================================ masked_attention


def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def masked_multiply(q, k, v, mask):
    s = _scores(q, k) * mask
    w = _safe_softmax(s)
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = _safe_softmax(s)
    return w @ v, w


def masked_torch_masked_fill(q, k, v, mask):
    tq, tk, tv = (torch.from_numpy(np.asarray(a)) for a in (q, k, v))
    m = torch.from_numpy(np.asarray(mask))
    s = tq @ tk.transpose(-1, -2) / math.sqrt(tq.shape[-1])
    s = s.masked_fill(m, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return (w @ tv).numpy(), w.numpy()


def masked_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def masked_isnan_guard(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    top = np.where(np.isnan(top), 0.0, top)
    e = np.exp(s - top)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_scale_by_keys(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2])
    w = _safe_softmax(np.where(mask, s, -np.inf))
    return w @ v, w


def masked_torch_nan_to_num(q, k, v, mask):
    dtype = np.result_type(q, k, v)
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    m = torch.from_numpy(np.asarray(mask))
    s = (tq @ tk.transpose(-1, -2)) / math.sqrt(tq.shape[-1])
    s = s.masked_fill(~m, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return (w @ tv).numpy().astype(dtype), w.numpy().astype(dtype)


def masked_max_over_allowed(q, k, v, mask):
    s = _scores(q, k)
    allowed = np.broadcast_to(mask, s.shape)
    top = np.max(np.where(allowed, s, -np.inf), axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, s - top, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    w = e / np.where(total > 0, total, 1.0)
    return w @ v, w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left",
          "Aligns the triangle top-left (np.tril with no offset), so when n_k != n_q query i "
          "does not sit at position i + n_k - n_q.",
          causal_top_left),
    Entry("causal_mask", "wrong", "offset_sign",
          "Passes the diagonal offset as n_q - n_k instead of n_k - n_q, shifting the "
          "triangle the wrong way when n_q != n_k.",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "strict",
          "Compares with < instead of <=, so no query may attend its own position.",
          causal_strict),
    Entry("causal_mask", "wrong", "float_tril",
          "Builds the mask from np.ones without dtype=bool, returning 0.0/1.0 floats instead "
          "of a boolean array.",
          causal_float_tril),
    Entry("causal_mask", "wrong", "transposed",
          "Puts keys on the rows and queries on the columns, returning the (n_k, n_q) "
          "transpose of the mask.",
          causal_transposed),
    Entry("causal_mask", "wrong", "clamped_offset",
          "Clamps the offset n_k - n_q at 0, which is wrong when n_q > n_k: the first "
          "n_q - n_k queries should see no key at all.",
          causal_clamped_offset),
    Entry("causal_mask", "right", "np_tri", None, causal_np_tri),
    Entry("causal_mask", "right", "comprehension", None, causal_comprehension),

    Entry("padding_mask", "wrong", "less_equal",
          "Compares j <= lengths[b] instead of j < lengths[b], letting one padded position "
          "through.",
          padding_le),
    Entry("padding_mask", "wrong", "axes_after",
          "Adds the two singleton axes after the key axis, giving shape (B, n, 1, 1) instead "
          "of (B, 1, 1, n).",
          padding_axes_after),
    Entry("padding_mask", "wrong", "reshape_transposed",
          "Builds the comparison as (n, B) and reshapes it to (B, 1, 1, n), which scrambles "
          "positions across sequences instead of transposing.",
          padding_reshape_transposed),
    Entry("padding_mask", "wrong", "key_padding_convention",
          "Uses nn.MultiheadAttention's key_padding_mask convention (True = padding), the "
          "opposite of the course's True = may attend.",
          padding_key_padding_convention),
    Entry("padding_mask", "wrong", "left_side",
          "Marks the last lengths[b] positions (left padding) instead of the first, and a "
          "length of 0 marks the whole row since -0: is the full slice.",
          padding_left_side),
    Entry("padding_mask", "wrong", "width_from_lengths",
          "Uses lengths.max() as the key width instead of n, so the mask is too narrow when "
          "no sequence fills all n positions.",
          padding_width_from_lengths),
    Entry("padding_mask", "right", "torch", None, padding_torch),
    Entry("padding_mask", "right", "comprehension", None, padding_comprehension),

    Entry("masked_attention", "wrong", "multiply",
          "Multiplies the scores by the mask, so masked keys get score 0 (and still some "
          "weight) instead of -inf.",
          masked_multiply),
    Entry("masked_attention", "wrong", "big_negative",
          "Fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights instead of zeros.",
          masked_big_negative),
    Entry("masked_attention", "wrong", "torch_masked_fill",
          "Passes the mask straight to masked_fill, which fills where the mask is True, so it "
          "blocks the allowed keys and keeps the masked ones.",
          masked_torch_masked_fill),
    Entry("masked_attention", "wrong", "after_softmax",
          "Applies the mask after the softmax without renormalising, so the remaining weights "
          "no longer sum to 1.",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "isnan_guard",
          "Guards the row maximum with isnan, but a fully masked row's maximum is -inf, so "
          "those rows still come out NaN.",
          masked_isnan_guard),
    Entry("masked_attention", "wrong", "scale_by_keys",
          "Scales the scores by 1/sqrt(N_k) (k.shape[-2]) instead of 1/sqrt(d_k) "
          "(k.shape[-1]).",
          masked_scale_by_keys),
    Entry("masked_attention", "right", "torch_nan_to_num", None, masked_torch_nan_to_num),
    Entry("masked_attention", "right", "max_over_allowed", None, masked_max_over_allowed),
]
