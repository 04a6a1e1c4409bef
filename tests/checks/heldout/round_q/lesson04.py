"""Round q, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention.

Six wrong answers (one slip each) and two right answers (unusual routes) per exercise.
"""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ causal_mask
def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    q_pos = np.arange(n_q)[:, None] + n_k - n_q
    return np.arange(n_k)[None, :] < q_pos  # strict: the diagonal is masked out


def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))  # no offset: aligned top-left


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)  # offset with the wrong sign


def causal_float(n_q, n_k=None):
    n_k = n_k if n_k is not None else n_q
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)  # float ones and zeros, not bool


def causal_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q) + (n_k - n_q)
    j = np.arange(n_k)
    return j[:, None] <= i[None, :]  # keys on the rows: (n_k, n_q)


def causal_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)  # triu keeps j >= i + k


def causal_nested_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    return np.array([[j - shift <= i for j in range(n_k)] for i in range(n_q)], dtype=bool)


def causal_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ============================================================================ padding_mask
def pad_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]  # one position too many
    return keep[:, None, None, :]


def pad_2d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n) < lengths[:, None]  # (B, n): singleton axes missing


def pad_axes_wrong_place(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, :, None, None]  # (B, n, 1, 1)


def pad_broadcast_reshape(lengths, n):
    lengths = np.asarray(lengths)
    grid = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return grid.reshape(len(lengths), 1, 1, n)  # reshape does not transpose


def pad_inverted(lengths, n):
    lengths = np.asarray(lengths)
    padded = np.arange(n)[None, :] >= lengths[:, None]  # True marks padding
    return padded[:, None, None, :]


def pad_float_fill(lengths, n):
    lengths = np.asarray(lengths)
    mask = np.zeros((len(lengths), 1, 1, n))  # float array
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = 1
    return mask


def pad_loop_bool(lengths, n):
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(np.asarray(lengths).tolist()):
        out[b, ..., :length] = True
    return out


def pad_reshape_compare(lengths, n):
    return np.arange(n) < np.asarray(lengths).reshape(-1, 1, 1, 1)


# ============================================================================ masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def ma_nan_rows(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = np.where(mask, _scores(q, k), -np.inf)
    s = s - s.max(axis=-1, keepdims=True)  # -inf - (-inf) = NaN on empty rows
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_big_negative(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = np.where(mask, _scores(q, k), -1e9)  # finite fill value
    w = _safe_softmax(s)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    w = _safe_softmax(_scores(q, k)) * mask  # zeroed after the softmax, not renormalised
    return w @ v, w


def ma_inverted(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = np.where(mask, -np.inf, _scores(q, k))  # True treated as "masked out"
    w = _safe_softmax(s)
    return w @ v, w


def ma_scale_by_nk(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2])  # N_k, not d_k
    w = _safe_softmax(np.where(mask, s, -np.inf))
    return w @ v, w


def ma_mask_transposed(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    m = np.asarray(mask).T  # .T reverses the mask's axes
    w = _safe_softmax(np.where(m, _scores(q, k), -np.inf))
    return w @ v, w


def ma_rowwise_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    qb = np.broadcast_to(q, lead + q.shape[-2:]).reshape(-1, n_q, q.shape[-1])
    kb = np.broadcast_to(k, lead + k.shape[-2:]).reshape(-1, n_k, k.shape[-1])
    vb = np.broadcast_to(v, lead + v.shape[-2:]).reshape(-1, n_k, d_v)
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, d_v))
    wts = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            keys = np.flatnonzero(mb[b, i])
            if keys.size == 0:
                continue
            s = kb[b, keys] @ qb[b, i] / math.sqrt(q.shape[-1])
            e = np.exp(s - s.max())
            wts[b, i, keys] = e / e.sum()
            out[b, i] = wts[b, i] @ vb[b]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


def ma_torch_nan_to_num(q, k, v, mask):
    qt, kt, vt = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    m = torch.as_tensor(np.asarray(mask))
    s = (qt @ kt.transpose(-1, -2)) / math.sqrt(qt.shape[-1])
    w = torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1)
    w = torch.nan_to_num(w, nan=0.0)  # empty rows: softmax gives NaN, the contract wants 0
    return (w @ vt).numpy(), w.numpy()


ENTRIES = [
    Entry("causal_mask", "wrong", "strict-less-than",
          "The comparison is strict, j < i + n_k - n_q, so each query cannot attend to its own "
          "position: `<` where `<=` belongs.", causal_strict),
    Entry("causal_mask", "wrong", "top-left-aligned",
          "np.tril without the offset aligns the mask top-left, so when n_q != n_k the queries "
          "are not placed at the last n_q positions.", causal_top_left),
    Entry("causal_mask", "wrong", "offset-sign-flipped",
          "The tril offset is n_q - n_k instead of n_k - n_q, so the diagonal shifts the wrong "
          "way whenever n_q != n_k.", causal_offset_sign),
    Entry("causal_mask", "wrong", "float-not-bool",
          "np.ones gives a float array, so the mask is 1.0/0.0 floats instead of booleans.",
          causal_float),
    Entry("causal_mask", "wrong", "keys-on-rows",
          "The broadcasting puts keys on the rows, so it returns the (n_k, n_q) transpose "
          "(an upper-triangular mask) instead of (n_q, n_k).", causal_transposed),
    Entry("causal_mask", "wrong", "triu-instead-of-tril",
          "np.triu keeps j >= i + k, the future, instead of np.tril's j <= i + k.", causal_triu),
    Entry("causal_mask", "right", "nested-list-comprehension", None, causal_nested_lists),
    Entry("causal_mask", "right", "np-tri", None, causal_np_tri),

    Entry("padding_mask", "wrong", "less-or-equal",
          "It uses j <= lengths[b], so one padding position past each sequence's end is "
          "allowed: `<=` where `<` belongs.", pad_le),
    Entry("padding_mask", "wrong", "missing-singleton-axes",
          "It returns the (B, n) mask without the two singleton axes, so it is not (B, 1, 1, n) "
          "and would broadcast against the wrong axes of the scores.", pad_2d),
    Entry("padding_mask", "wrong", "singleton-axes-at-end",
          "The singleton axes are inserted after the key axis, giving (B, n, 1, 1) instead of "
          "(B, 1, 1, n).", pad_axes_wrong_place),
    Entry("padding_mask", "wrong", "transposed-then-reshaped",
          "The comparison is broadcast as (n, B) and then reshaped to (B, 1, 1, n); reshape "
          "does not transpose, so the values end up in the wrong sequences.",
          pad_broadcast_reshape),
    Entry("padding_mask", "wrong", "true-marks-padding",
          "True marks the padding positions (j >= length) instead of the keys that may be "
          "attended to.", pad_inverted),
    Entry("padding_mask", "wrong", "float-mask",
          "The mask is filled into np.zeros, a float array, so it returns 1.0/0.0 instead of a "
          "boolean mask.", pad_float_fill),
    Entry("padding_mask", "right", "loop-fill-bool", None, pad_loop_bool),
    Entry("padding_mask", "right", "reshape-lengths-4d", None, pad_reshape_compare),

    Entry("masked_attention", "wrong", "nan-on-empty-rows",
          "A fully masked row has maximum -inf, and -inf - (-inf) is NaN, so rows with no "
          "allowed key come out NaN instead of zeros.", ma_nan_rows),
    Entry("masked_attention", "wrong", "fill-minus-1e9",
          "Masked scores are set to -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights (and the mean of v) instead of zeros.", ma_big_negative),
    Entry("masked_attention", "wrong", "mask-after-softmax",
          "The mask is applied by multiplying the weights after the softmax, without "
          "renormalising, so the remaining weights of each row no longer sum to 1.",
          ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "true-means-masked",
          "The mask convention is inverted: scores where mask is True are set to -inf, but "
          "True means 'may attend'.", ma_inverted),
    Entry("masked_attention", "wrong", "scale-by-n_k",
          "The scores are divided by sqrt(N_k) (k.shape[-2]) instead of sqrt(d_k) "
          "(k.shape[-1]).", ma_scale_by_nk),
    Entry("masked_attention", "wrong", "mask-dot-T",
          "It applies mask.T: .T reverses the mask's axes, so the mask fails to broadcast "
          "(raises) or, when square, masks keys by the wrong query.", ma_mask_transposed),
    Entry("masked_attention", "right", "row-loop-over-allowed-keys", None, ma_rowwise_loop),
    Entry("masked_attention", "right", "torch-softmax-nan-to-num", None, ma_torch_nan_to_num),
]
