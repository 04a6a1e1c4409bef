"""Held-out catalogue, lesson 04 (masks): causal_mask, padding_mask, masked_attention. numpy."""

import math

import numpy as np
import scipy.special

from entry import Entry


# =============================================================================== causal_mask
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict_less(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_tril(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def causal_masked_positions(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_default_typo(n_q, n_k=None):
    n_k = n_q if n_k is None else n_q
    rows = np.arange(n_q).reshape(-1, 1)
    cols = np.arange(n_k).reshape(1, -1)
    return cols <= rows + n_k - n_q


def causal_np_tri(n_q, n_k=None):
    m = n_q if n_k is None else n_k
    return np.tri(n_q, m, k=m - n_q, dtype=bool)


def causal_nested_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    return np.array([[j - i <= shift for j in range(n_k)] for i in range(n_q)],
                    dtype=bool).reshape(n_q, n_k)


# ============================================================================== padding_mask
def pad_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pad_no_singleton_axes(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def pad_masks_queries(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def pad_reshape_not_transpose(lengths, n):
    lengths = np.asarray(lengths)
    table = np.arange(n)[:, None] < lengths  # (n, B)
    return table.reshape(len(lengths), 1, 1, n)


def pad_int_dtype(lengths, n):
    lengths = np.asarray(lengths)
    return np.where(np.arange(n) < lengths[:, None], 1, 0)[:, None, None, :]


def pad_negative_slice(lengths, n):
    lengths = list(np.asarray(lengths))
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :-(n - length)] = True
    return mask


def pad_fill_loop(lengths, n):
    lengths = np.asarray(lengths)
    mask = np.zeros((lengths.shape[0], 1, 1, n), dtype=bool)
    for b in range(lengths.shape[0]):
        for j in range(int(lengths[b])):
            mask[b, 0, 0, j] = True
    return mask


def pad_four_d_broadcast(lengths, n):
    return np.arange(n) < np.asarray(lengths)[:, None, None, None]


# ========================================================================== masked_attention
def _stable_softmax_rows(s):
    top = np.max(s, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def ma_fill_minus_1e9(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    w = _stable_softmax_rows(s)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    w = _stable_softmax_rows(s) * mask
    return w @ v, w


def ma_mask_inverted(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    w = _stable_softmax_rows(s)
    return w @ v, w


def ma_scale_by_dv(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(v.shape[-1])
    s = np.where(mask, s, -np.inf)
    w = _stable_softmax_rows(s)
    return np.matmul(w, v), w


def ma_mask_transposed(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    mask = np.asarray(mask).T
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    w = _stable_softmax_rows(np.where(mask, s, -np.inf))
    return w @ v, w


def ma_boolean_index(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores[~np.asarray(mask)] = -np.inf
    w = _stable_softmax_rows(scores)
    return w @ v, w


def ma_scipy_nan_to_num(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    with np.errstate(invalid="ignore"):
        w = scipy.special.softmax(np.where(mask, s, -np.inf), axis=-1)
    w = np.nan_to_num(w, nan=0.0)
    return np.einsum("...ij,...jd->...id", w, v), w


def ma_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, lead + (n_q, d)).reshape(-1, n_q, d)
    kb = np.broadcast_to(k, lead + (n_k, d)).reshape(-1, n_k, d)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, d_v))
    wts = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            keys = np.flatnonzero(mb[b, i])
            if keys.size == 0:
                continue
            s = kb[b, keys] @ qb[b, i] / math.sqrt(d)
            e = np.exp(s - s.max())
            wts[b, i, keys] = e / e.sum()
            out[b, i] = wts[b, i, keys] @ vb[b, keys]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


E = Entry
ENTRIES = [
    E("causal_mask", "wrong", "top_left_aligned",
      "np.tril without the offset n_k - n_q aligns the mask top-left: with n_k > n_q the "
      "queries cannot see the cached keys before them (and with n_q > n_k too many keys)",
      causal_top_left),
    E("causal_mask", "wrong", "strict_less_than",
      "the comparison is `<` where `<=` belongs, so each query cannot attend its own "
      "position (the diagonal is masked)",
      causal_strict_less),
    E("causal_mask", "wrong", "offset_sign_flipped",
      "the tril offset is n_q - n_k instead of n_k - n_q, so the mask is shifted the wrong way "
      "whenever n_q != n_k",
      causal_offset_sign),
    E("causal_mask", "wrong", "float_not_bool",
      "np.tril(np.ones(...)) returns a float array of 0.0/1.0, not the boolean mask the "
      "contract requires",
      causal_float_tril),
    E("causal_mask", "wrong", "true_means_masked",
      "it returns True on the future positions (the keys to hide), the opposite of the "
      "convention True = may attend",
      causal_masked_positions),
    E("causal_mask", "wrong", "default_typo_ignores_n_k",
      "`n_k = n_q if n_k is None else n_q` always sets n_k to n_q, so an explicit n_k is "
      "ignored and the mask is (n_q, n_q)",
      causal_default_typo),
    E("causal_mask", "right", "np_tri_with_offset", None, causal_np_tri),
    E("causal_mask", "right", "nested_list_comprehension", None, causal_nested_lists),

    E("padding_mask", "wrong", "less_equal",
      "the comparison is `j <= lengths[b]` where `<` belongs, so one padding position per "
      "sequence is kept (off by one)",
      pad_less_equal),
    E("padding_mask", "wrong", "missing_singleton_axes",
      "it returns the (B, n) table without the two length-1 axes, so it is not (B, 1, 1, n) "
      "and would broadcast against the wrong axes of the scores",
      pad_no_singleton_axes),
    E("padding_mask", "wrong", "masks_query_axis",
      "the key positions are put on axis 2 (the queries), shape (B, 1, n, 1), so it masks "
      "query rows instead of key columns",
      pad_masks_queries),
    E("padding_mask", "wrong", "reshape_instead_of_transpose",
      "the comparison table is built as (n, B) and then reshaped to (B, 1, 1, n); a reshape "
      "is not a transpose, so the entries are scrambled between sequences",
      pad_reshape_not_transpose),
    E("padding_mask", "wrong", "int_mask",
      "np.where(..., 1, 0) gives an integer array of 0/1, not the boolean mask the contract "
      "requires",
      pad_int_dtype),
    E("padding_mask", "wrong", "negative_slice_empty_when_full",
      "the slice `:-(n - length)` is `:0` (empty) when length == n, so a sequence with no "
      "padding gets an all-False row",
      pad_negative_slice),
    E("padding_mask", "right", "python_fill_loop", None, pad_fill_loop),
    E("padding_mask", "right", "four_d_broadcast_compare", None, pad_four_d_broadcast),

    E("masked_attention", "wrong", "fill_minus_1e9",
      "masked scores are set to -1e9 instead of -inf, so a fully masked row gets uniform "
      "weights over all keys instead of zeros",
      ma_fill_minus_1e9),
    E("masked_attention", "wrong", "mask_after_softmax",
      "the mask multiplies the weights after the softmax, so the remaining weights are not "
      "renormalised and rows with a masked key no longer sum to 1",
      ma_mask_after_softmax),
    E("masked_attention", "wrong", "mask_inverted",
      "np.where(mask, -inf, scores) hides the keys marked True, reading the mask as "
      "True = masked instead of True = may attend",
      ma_mask_inverted),
    E("masked_attention", "wrong", "scale_by_d_v",
      "the scores are divided by sqrt(v.shape[-1]) (d_v) instead of sqrt(d_k); wrong "
      "whenever d_v != d_k",
      ma_scale_by_dv),
    E("masked_attention", "wrong", "mask_transposed",
      "the mask is transposed (mask.T) as if its rows were keys: a non-square or batched mask "
      "then does not broadcast against the scores at all, and a square one lets queries see "
      "the wrong keys",
      ma_mask_transposed),
    E("masked_attention", "wrong", "boolean_index_assignment",
      "scores[~mask] = -inf needs a mask of exactly the scores' shape: boolean indexing does "
      "not broadcast, so a broadcastable (B, 1, 1, N_k) mask raises IndexError",
      ma_boolean_index),
    E("masked_attention", "right", "scipy_softmax_nan_to_num", None, ma_scipy_nan_to_num),
    E("masked_attention", "right", "per_row_allowed_keys_loop", None, ma_row_loop),
]
