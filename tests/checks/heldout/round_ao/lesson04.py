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


def causal_float_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_ignores_n_k(n_q, n_k=None):
    n_k = n_q if n_k is None else n_q
    offset = n_k - n_q
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + offset


def causal_true_means_blocked(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_axes_swapped(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :] + (n_k - n_q)
    return keys <= queries


def causal_ufunc_outer(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.greater_equal.outer(np.arange(n_q) + (n_k - n_q), np.arange(n_k))


def causal_python_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    rows = [[key <= query + shift for key in range(n_k)] for query in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


# ============================================================================ padding_mask
def padding_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_missing_axes(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_true_at_pads(lengths, n):
    lengths = np.asarray(lengths)
    pads = np.arange(n)[None, :] >= lengths[:, None]
    return pads[:, None, None, :]


def padding_arange_batch(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(len(lengths))
    mask = positions[None, :] < lengths[:, None]
    return mask[:, None, None, :]


def padding_float_ones(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b, L in enumerate(lengths):
        mask[b, 0, 0, :L] = 1
    return mask


def padding_left_padded(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n), dtype=bool)
    for b in range(B):
        mask[b, 0, 0, -lengths[b]:] = True
    return mask


def padding_concat_blocks(lengths, n):
    rows = [np.concatenate([np.ones(int(L), dtype=bool), np.zeros(n - int(L), dtype=bool)])
            for L in np.asarray(lengths).tolist()]
    return np.stack(rows)[:, None, None, :]


def padding_torch(lengths, n):
    lens = torch.as_tensor(np.asarray(lengths), dtype=torch.int64)
    keep = torch.arange(n).unsqueeze(0) < lens.unsqueeze(1)
    return keep.view(-1, 1, 1, n).numpy()


# ============================================================================ masked_attention
def masked_fill_minus_1e9(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    weights = weights * mask
    return weights @ v, weights


def masked_multiply_scores(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    w = np.where(mask.any(axis=-1, keepdims=True), w, 0.0)
    return w @ v, w


def masked_scale_by_d_v(q, k, v, mask):
    d = v.shape[-1]
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(d)
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    w = np.exp(s - m)
    z = w.sum(axis=-1, keepdims=True)
    w = w / np.where(z == 0, 1.0, z)
    return np.einsum("...ij,...jd->...id", w, v), w


def masked_nan_fixed_after_output(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = e / e.sum(axis=-1, keepdims=True)
    out = weights @ v
    weights = np.nan_to_num(weights, nan=0.0)
    return out, weights


def masked_row_loop(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    Q = np.broadcast_to(q, lead + q.shape[-2:]).reshape(-1, n_q, q.shape[-1])
    K = np.broadcast_to(k, lead + k.shape[-2:]).reshape(-1, n_k, k.shape[-1])
    V = np.broadcast_to(v, lead + v.shape[-2:]).reshape(-1, n_k, d_v)
    M = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((Q.shape[0], n_q, d_v))
    wts = np.zeros((Q.shape[0], n_q, n_k))
    for b in range(Q.shape[0]):
        for i in range(n_q):
            keys = np.flatnonzero(M[b, i])
            if keys.size == 0:
                continue
            s = K[b, keys] @ Q[b, i] / math.sqrt(q.shape[-1])
            s = np.exp(s - s.max())
            wts[b, i, keys] = s / s.sum()
            out[b, i] = wts[b, i] @ V[b]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


def masked_torch_softmax(q, k, v, mask):
    Q, K, V = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    allowed = torch.as_tensor(np.asarray(mask))
    s = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    s = s.masked_fill(~allowed, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return (w @ V).numpy(), w.numpy()


ENTRIES = [
    # causal_mask
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without the offset n_k - n_q, so the mask is aligned top-left: with "
          "n_q != n_k query i may attend only keys j <= i instead of j <= i + n_k - n_q",
          causal_top_left),
    Entry("causal_mask", "wrong", "strict_less_than",
          "compares with `<` where `<=` belongs, so each query may not attend its own position "
          "(the diagonal is masked out)",
          causal_strict_less),
    Entry("causal_mask", "wrong", "float_mask",
          "builds the mask from np.ones without dtype=bool, so it returns a float array of "
          "1.0/0.0 instead of a boolean mask",
          causal_float_mask),
    Entry("causal_mask", "wrong", "n_k_overwritten_by_n_q",
          "the default line `n_k = n_q if n_k is None else n_q` puts n_q in both branches, so "
          "an explicit n_k is ignored and the mask is always square",
          causal_ignores_n_k),
    Entry("causal_mask", "wrong", "true_means_blocked",
          "returns the future positions (np.triu above the allowed band), i.e. True = blocked, "
          "the opposite of the course's True = may attend",
          causal_true_means_blocked),
    Entry("causal_mask", "wrong", "key_axis_first",
          "puts the key positions on the rows and the queries on the columns, so the mask is "
          "transposed: a square mask lets each query see the future instead of the past, and "
          "with n_q != n_k the shape is (n_k, n_q) instead of (n_q, n_k)",
          causal_axes_swapped),
    Entry("causal_mask", "right", "greater_equal_outer", None, causal_ufunc_outer),
    Entry("causal_mask", "right", "nested_list_comprehension", None, causal_python_lists),
    # padding_mask
    Entry("padding_mask", "wrong", "less_equal",
          "compares j <= lengths[b] where j < lengths[b] belongs, so one padding position too "
          "many may be attended",
          padding_less_equal),
    Entry("padding_mask", "wrong", "missing_broadcast_axes",
          "returns the (B, n) mask without the two singleton axes, so it is not (B, 1, 1, n) "
          "and would broadcast against the wrong axes of the scores",
          padding_missing_axes),
    Entry("padding_mask", "wrong", "true_at_padding",
          "marks the padding positions (j >= lengths[b]) as True, the opposite of True = may "
          "attend",
          padding_true_at_pads),
    Entry("padding_mask", "wrong", "arange_over_batch",
          "builds the positions with np.arange(len(lengths)) (the batch size) instead of "
          "np.arange(n), so the key axis has length B",
          padding_arange_batch),
    Entry("padding_mask", "wrong", "float_zeros_mask",
          "fills a np.zeros float array with 1s, so it returns 1.0/0.0 floats instead of a "
          "boolean mask",
          padding_float_ones),
    Entry("padding_mask", "wrong", "left_padding",
          "keeps the last lengths[b] positions (`-lengths[b]:`), as if sequences were padded on "
          "the left; for a length of 0 the slice `-0:` even keeps the whole row",
          padding_left_padded),
    Entry("padding_mask", "right", "concatenated_blocks", None, padding_concat_blocks),
    Entry("padding_mask", "right", "torch_arange", None, padding_torch),
    # masked_attention
    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights over all keys instead of zeros",
          masked_fill_minus_1e9),
    Entry("masked_attention", "wrong", "mask_inverted",
          "puts -inf where the mask is True, so it removes the allowed keys and keeps the "
          "masked ones",
          masked_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "applies the softmax to all scores and multiplies by the mask afterwards without "
          "renormalising, so the kept weights do not sum to 1",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "scores_multiplied_by_mask",
          "multiplies the scores by the mask, which sets masked scores to 0 (still a positive "
          "weight) instead of -inf",
          masked_multiply_scores),
    Entry("masked_attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(v.shape[-1]) (d_v) instead of 1/sqrt(d_k)",
          masked_scale_by_d_v),
    Entry("masked_attention", "wrong", "nan_fixed_after_output",
          "replaces the NaN weights of fully masked rows with 0 only after computing "
          "out = weights @ v, so those output rows stay NaN",
          masked_nan_fixed_after_output),
    Entry("masked_attention", "right", "broadcast_row_loop", None, masked_row_loop),
    Entry("masked_attention", "right", "torch_softmax_nan_to_num", None, masked_torch_softmax),
]
