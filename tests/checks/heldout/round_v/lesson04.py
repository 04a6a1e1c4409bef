"""Held-out catalogue, lesson 04 (masks): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ causal_mask
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict_less(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + n_k - n_q


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_dtype(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_transposed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    query_pos = np.arange(n_q) + (n_k - n_q)
    key_pos = np.arange(n_k)
    return key_pos[:, None] <= query_pos[None, :]


def causal_nested_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_np_tri(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ============================================================================ padding_mask
def pad_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def pad_missing_singletons(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def pad_transposed_reshape(lengths, n):
    lengths = np.asarray(lengths)
    m = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return m.reshape(len(lengths), 1, 1, n)


def pad_float_zeros(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b, L in enumerate(lengths):
        mask[b, 0, 0, :L] = 1
    return mask


def pad_negative_slice(lengths, n):
    B = len(lengths)
    mask = np.ones((B, 1, 1, n), dtype=bool)
    for b in range(B):
        mask[b, ..., lengths[b] - n:] = False  # blank the padded tail
    return mask


def pad_true_is_padding(lengths, n):
    positions = np.arange(n)
    pad = positions[None, :] >= np.asarray(lengths)[:, None]
    return pad.reshape(-1, 1, 1, n)


def pad_expand_dims(lengths, n):
    return np.arange(n) < np.expand_dims(np.asarray(lengths), (1, 2, 3))


def pad_list_comprehension(lengths, n):
    rows = [[j < int(L) for j in range(n)] for L in lengths]
    return np.array(rows, dtype=bool).reshape(len(rows), 1, 1, n)


# ============================================================================ masked_attention
def matt_minus_1e9(q, k, v, mask):
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def matt_inverted(q, k, v, mask):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return weights @ v, weights


def matt_mask_after_softmax(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask
    return p @ v, p


def matt_no_empty_row_guard(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def matt_boolean_index(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores[~mask] = -np.inf
    m = scores.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    z[z == 0] = 1.0
    w = e / z
    return w @ v, w


def matt_scale_from_nk(q, k, v, mask):
    d_k = k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    scores = np.where(mask, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    row_max = np.where(np.isneginf(row_max), 0.0, row_max)
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return weights @ v, weights


def matt_row_loops(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, lead + (n_q, d_k)).reshape(-1, n_q, d_k)
    kb = np.broadcast_to(k, lead + (n_k, d_k)).reshape(-1, n_k, d_k)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, d_v))
    wts = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            keys = np.flatnonzero(mb[b, i])
            if keys.size == 0:
                continue
            s = kb[b, keys] @ qb[b, i] / math.sqrt(d_k)
            e = np.exp(s - s.max())
            wts[b, i, keys] = e / e.sum()
            out[b, i] = wts[b, i] @ vb[b]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


def matt_torch_nan_to_num(q, k, v, mask):
    qt, kt, vt = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    allowed = torch.as_tensor(np.asarray(mask))
    scores = qt @ kt.transpose(-2, -1) / math.sqrt(qt.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return (weights @ vt).numpy(), weights.numpy()


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without the offset n_k - n_q, so the mask is aligned top-left and "
          "queries with n_q != n_k see the wrong keys",
          causal_top_left),
    Entry("causal_mask", "wrong", "strict_less",
          "compares with `<` where `<=` belongs, so every query loses its own key (the "
          "diagonal)",
          causal_strict_less),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes the offset as n_q - n_k instead of n_k - n_q, shifting the diagonal the "
          "wrong way whenever n_q != n_k",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float_mask",
          "builds the mask from np.ones without dtype=bool, so it returns a float array of "
          "0.0/1.0 instead of a boolean mask",
          causal_float_dtype),
    Entry("causal_mask", "wrong", "triu_for_tril",
          "uses np.triu, which keeps the upper triangle (the future keys), instead of np.tril",
          causal_triu),
    Entry("causal_mask", "wrong", "transposed_orientation",
          "puts the key positions on the rows and the query positions on the columns, so it "
          "returns the (n_k, n_q) transpose of the mask",
          causal_transposed),
    Entry("causal_mask", "right", "nested_loops", None, causal_nested_loops),
    Entry("causal_mask", "right", "np_tri", None, causal_np_tri),

    Entry("padding_mask", "wrong", "less_equal",
          "compares j <= lengths[b] where j < lengths[b] belongs, so one padded position per "
          "sequence is allowed",
          pad_less_equal),
    Entry("padding_mask", "wrong", "missing_singleton_axes",
          "returns the (B, n) comparison without the two singleton axes, not (B, 1, 1, n)",
          pad_missing_singletons),
    Entry("padding_mask", "wrong", "transpose_by_reshape",
          "builds the comparison as (n, B) and reshapes it to (B, 1, 1, n) instead of "
          "transposing it, which scrambles the sequences' positions",
          pad_transposed_reshape),
    Entry("padding_mask", "wrong", "float_zeros",
          "fills np.zeros((B, 1, 1, n)) with 1s, so the mask is float 0.0/1.0 instead of bool",
          pad_float_zeros),
    Entry("padding_mask", "wrong", "negative_slice_full_length",
          "blanks the tail with mask[b, ..., L - n:], but for a full-length sequence (L == n) "
          "that slice is [0:] and blanks the whole row",
          pad_negative_slice),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "uses nn.MultiheadAttention's key_padding_mask convention (True = padding, j >= "
          "length) instead of the course's True = may attend",
          pad_true_is_padding),
    Entry("padding_mask", "right", "expand_dims_broadcast", None, pad_expand_dims),
    Entry("padding_mask", "right", "list_comprehension", None, pad_list_comprehension),

    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a row with no allowed key gets "
          "uniform weights over the masked keys instead of zeros",
          matt_minus_1e9),
    Entry("masked_attention", "wrong", "mask_inverted",
          "puts -inf where the mask is True, treating True as 'masked out' instead of the "
          "course's True = may attend",
          matt_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "multiplies the weights by the mask after the softmax without renormalising, so the "
          "rows no longer sum to 1",
          matt_mask_after_softmax),
    Entry("masked_attention", "wrong", "no_empty_row_guard",
          "subtracts the row maximum without a guard: in a fully masked row the maximum is "
          "-inf, -inf - (-inf) is NaN, and the row becomes NaN instead of zeros",
          matt_no_empty_row_guard),
    Entry("masked_attention", "wrong", "boolean_index_no_broadcast",
          "writes scores[~mask] = -inf, but boolean indexing does not broadcast, so a mask of "
          "a broadcastable shape (e.g. padding (B, 1, 1, N)) raises IndexError",
          matt_boolean_index),
    Entry("masked_attention", "wrong", "scale_from_n_k",
          "takes d_k from k.shape[-2] (the number of keys) instead of k.shape[-1], so the "
          "scores are scaled by 1/sqrt(N_k)",
          matt_scale_from_nk),
    Entry("masked_attention", "right", "row_loops_allowed_keys", None, matt_row_loops),
    Entry("masked_attention", "right", "torch_nan_to_num", None, matt_torch_nan_to_num),
]
