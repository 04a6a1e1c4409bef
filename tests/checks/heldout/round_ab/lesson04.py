"""Held-out learners' answers, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np

from entry import Entry


# ============================================================================ causal_mask
def causal_strict(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float(n_q, n_k=None):
    n_k = n_k or n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_blocked_convention(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    # True where the key lies in the future
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q
    q_pos = np.arange(n_q) + offset
    k_pos = np.arange(n_k)
    return k_pos[:, None] <= q_pos[None, :]


def causal_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    rows = [[j <= i + n_k - n_q for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_complement(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    future = np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)
    return ~future


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_2d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_query_axis(lengths, n):
    lens = np.asarray(lengths).reshape(-1, 1)
    valid = np.arange(n).reshape(1, -1) < lens
    return valid[:, None, :, None]


def padding_true_is_pad(lengths, n):
    lengths = np.asarray(lengths)
    is_pad = np.arange(n)[None, :] >= lengths[:, None]
    return is_pad[:, None, None, :]


def padding_float_loop(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n))
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = 1
    return mask


def padding_max_width(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep.reshape(len(lengths), 1, 1, width)


def padding_ufunc_outer(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.greater.outer(lengths, np.arange(n))  # (B, n): lengths[b] > j
    return keep.reshape(lengths.shape[0], 1, 1, n)


def padding_python_lists(lengths, n):
    rows = [[[[j < int(length) for j in range(n)]]] for length in lengths]
    return np.array(rows, dtype=bool)


# ============================================================================ masked_attention
def masked_big_negative(q, k, v, mask):
    d = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    s = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_multiply_after(q, k, v, mask):
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = np.einsum("...qd,...kd->...qk", q, k) * scale
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask
    return p @ v, p


def masked_scale_by_keys(q, k, v, mask):
    d_k = k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    scores = np.where(mask, scores, -np.inf)
    m = np.max(scores, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    w = np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)
    return w @ v, w


def masked_bool_index(q, k, v, mask):
    scores = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    scores[~mask] = -np.inf
    row_max = scores.max(axis=-1, keepdims=True)
    row_max[np.isneginf(row_max)] = 0.0
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    total[total == 0] = 1.0
    weights = e / total
    return weights @ v, weights


def masked_out_from_unmasked(q, k, v, mask):
    d_k = q.shape[-1]
    raw = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)

    def soft(x):
        mx = x.max(axis=-1, keepdims=True)
        mx = np.where(np.isfinite(mx), mx, 0.0)
        ex = np.exp(x - mx)
        sm = ex.sum(axis=-1, keepdims=True)
        return np.divide(ex, sm, out=np.zeros_like(ex), where=sm > 0)

    weights = soft(np.where(mask, raw, -np.inf))
    out = soft(raw) @ v
    return out, weights


def masked_nan_to_num(q, k, v, mask):
    d_k = q.shape[-1]
    s = np.where(mask, (q @ np.swapaxes(k, -1, -2)) / np.sqrt(d_k), -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))  # NaN on rows with no key
        w = e / e.sum(axis=-1, keepdims=True)
    w = np.nan_to_num(w, nan=0.0)
    return w @ v, w


def masked_row_loops(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    q = np.broadcast_to(q, lead + (n_q, d_k))
    k = np.broadcast_to(k, lead + (n_k, d_k))
    v = np.broadcast_to(v, lead + (n_k, d_v))
    m = np.broadcast_to(mask, lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = [j for j in range(n_k) if m[idx + (i, j)]]
            if not allowed:
                continue
            s = {j: float(q[idx + (i,)] @ k[idx + (j,)]) / math.sqrt(d_k) for j in allowed}
            top = max(s.values())
            ex = {j: math.exp(val - top) for j, val in s.items()}
            tot = sum(ex.values())
            for j in allowed:
                weights[idx + (i, j)] = ex[j] / tot
            out[idx + (i,)] = weights[idx + (i,)] @ v[idx]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "strict_less",
          "compares with < where <= belongs, so each query is kept from its own position "
          "(the diagonal of the square mask is False)",
          causal_strict),
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without the offset n_k - n_q, which aligns the mask top-left: "
          "wrong whenever n_q != n_k (queries that sit at the end of a cache)",
          causal_top_left),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes the offset k=n_q - n_k to np.tril instead of n_k - n_q, shifting the "
          "diagonal the wrong way when n_q != n_k",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float_mask",
          "builds the mask from np.ones without dtype=bool, so it returns a float array of "
          "0.0/1.0 instead of a boolean mask",
          causal_float),
    Entry("causal_mask", "wrong", "true_means_blocked",
          "returns True for the future keys (the blocked positions, the convention of "
          "nn.MultiheadAttention's attn_mask) instead of True = may attend",
          causal_blocked_convention),
    Entry("causal_mask", "wrong", "transposed_broadcast",
          "puts the key positions on the rows and the query positions on the columns, so "
          "the mask comes out (n_k, n_q), transposed",
          causal_transposed),
    Entry("causal_mask", "right", "nested_comprehension", None, causal_loops),
    Entry("causal_mask", "right", "complement_of_triu", None, causal_complement),

    Entry("padding_mask", "wrong", "less_equal",
          "compares j <= lengths[b] where < belongs, so one padded position per sequence "
          "is allowed",
          padding_le),
    Entry("padding_mask", "wrong", "missing_singleton_axes",
          "returns the (B, n) comparison without adding the two singleton axes for heads "
          "and queries, so it is not (B, 1, 1, n)",
          padding_2d),
    Entry("padding_mask", "wrong", "masks_query_axis",
          "puts the positions on the query axis, (B, 1, n, 1), so it hides padded queries "
          "instead of padded keys",
          padding_query_axis),
    Entry("padding_mask", "wrong", "true_is_padding",
          "returns True at the padded positions (j >= lengths[b]) instead of True = may "
          "attend",
          padding_true_is_pad),
    Entry("padding_mask", "wrong", "float_from_zeros",
          "fills an np.zeros array with 1 in a loop, so the mask is float64 instead of "
          "bool",
          padding_float_loop),
    Entry("padding_mask", "wrong", "width_from_max_length",
          "builds the key axis with lengths.max() positions instead of n, so the mask is "
          "too short whenever the longest sequence is shorter than n",
          padding_max_width),
    Entry("padding_mask", "right", "greater_outer", None, padding_ufunc_outer),
    Entry("padding_mask", "right", "python_lists", None, padding_python_lists),

    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a row with no allowed key "
          "gets uniform weights over the masked keys instead of zeros",
          masked_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "sets the scores to -inf where the mask is True, reading True as 'masked' "
          "instead of 'may attend'",
          masked_inverted),
    Entry("masked_attention", "wrong", "zero_after_softmax",
          "multiplies the softmax weights by the mask afterwards without renormalising, "
          "so the remaining weights of a row no longer sum to 1",
          masked_multiply_after),
    Entry("masked_attention", "wrong", "scale_by_num_keys",
          "takes d_k from k.shape[-2], the number of keys, so scores are scaled by "
          "1/sqrt(N_k) instead of 1/sqrt(d_k)",
          masked_scale_by_keys),
    Entry("masked_attention", "wrong", "boolean_indexing",
          "masks with scores[~mask] = -inf; boolean indexing does not broadcast, so a "
          "mask broadcastable to the scores but of another shape (a padding mask) raises "
          "IndexError",
          masked_bool_index),
    Entry("masked_attention", "wrong", "out_from_unmasked_weights",
          "returns masked weights but computes out from the softmax of the unmasked scores, "
          "a wrong variable reused for the weighted sum",
          masked_out_from_unmasked),
    Entry("masked_attention", "right", "nan_to_num_after", None, masked_nan_to_num),
    Entry("masked_attention", "right", "row_loops_allowed_keys", None, masked_row_loops),
]
