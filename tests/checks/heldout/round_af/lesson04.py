"""Held-out catalogue, lesson 04 (masks): causal_mask, padding_mask, masked_attention."""

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
    i = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return j < i


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_ones(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_shape_swapped(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    rows = np.arange(n_k)[:, None]
    cols = np.arange(n_q)[None, :]
    return cols <= rows + (n_k - n_q)


def causal_true_means_blocked(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_nested_lists(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_subtract_outer(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.subtract.outer(np.arange(n_k), np.arange(n_q)).T <= n_k - n_q


# ============================================================================ padding_mask
def padding_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_one_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths[:, None]
    return keep[:, None, :]


def padding_transposed_broadcast(lengths, n):
    lens = np.asarray(lengths)
    keep = np.arange(n)[:, None] < lens[None, :]
    return keep[:, None, None, :]


def padding_float_buffer(lengths, n):
    lengths = np.asarray(lengths)
    mask = np.zeros((len(lengths), 1, 1, n))
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = 1
    return mask


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(lengths.max())
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def padding_left_padded(lengths, n):
    lengths = np.asarray(lengths)
    m = np.zeros((lengths.shape[0], 1, 1, n), dtype=bool)
    for b in range(lengths.shape[0]):
        m[b, 0, 0, -lengths[b]:] = True
    return m


def padding_bool_loop(lengths, n):
    lengths = np.asarray(lengths)
    m = np.zeros((lengths.shape[0], 1, 1, n), dtype=bool)
    for b in range(lengths.shape[0]):
        m[b, ..., : int(lengths[b])] = True
    return m


def padding_less_outer(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.less.outer(np.arange(n), lengths).T  # (B, n)
    return keep.reshape(lengths.shape[0], 1, 1, n)


# ============================================================================ masked_attention
def masked_nan_rows(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_large_negative(q, k, v, mask):
    d = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(d)
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_multiply(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) * (1.0 / np.sqrt(q.shape[-1]))
    scores = scores * mask
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    w = np.where(mask.any(axis=-1, keepdims=True), w, 0.0)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    dk = q.shape[-1]
    logits = q @ np.swapaxes(k, -1, -2) / dk ** 0.5
    logits = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    probs = probs * mask
    return probs @ v, probs


def masked_inverted(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_scale_by_keys(q, k, v, mask):
    n_k = k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(n_k)
    s = np.where(mask, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.where(tot > 0, e / np.where(tot > 0, tot, 1.0), 0.0)
    return w @ v, w


def masked_row_loop(q, k, v, mask):
    q, k, v, mask = np.asarray(q), np.asarray(k), np.asarray(v), np.asarray(mask)
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], mask.shape[:-2])
    qb = np.broadcast_to(q, lead + (n_q, d))
    kb = np.broadcast_to(k, lead + (n_k, d))
    vb = np.broadcast_to(v, lead + (n_k, d_v))
    mb = np.broadcast_to(mask, lead + (n_q, n_k))
    w = np.zeros(lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, d_v))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = np.flatnonzero(mb[idx][i])
            if allowed.size == 0:
                continue
            s = np.array([qb[idx][i] @ kb[idx][j] for j in allowed]) / np.sqrt(d)
            s = np.exp(s - s.max())
            s /= s.sum()
            w[idx][i, allowed] = s
            out[idx][i] = s @ vb[idx][allowed]
    return out.astype(q.dtype), w.astype(q.dtype)


def masked_torch_nan_to_num(q, k, v, mask):
    dtype = np.asarray(q).dtype
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    tm = torch.from_numpy(np.asarray(mask))
    scores = tq @ tk.transpose(-1, -2) / tq.shape[-1] ** 0.5
    scores = scores.masked_fill(~tm, float("-inf"))
    w = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return (w @ tv).numpy().astype(dtype), w.numpy().astype(dtype)


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without the offset n_k - n_q, so the mask is aligned top-left "
          "instead of bottom-right when n_q != n_k", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less",
          "compares with < where <= belongs, so each query cannot see its own position "
          "(the diagonal is masked out)", causal_strict_less),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes the tril offset as n_q - n_k instead of n_k - n_q", causal_offset_sign),
    Entry("causal_mask", "wrong", "float_not_bool",
          "returns np.tril of a float array of ones, so the mask is float 0/1 instead of "
          "boolean", causal_float_ones),
    Entry("causal_mask", "wrong", "shape_transposed",
          "builds the mask with keys along the rows and queries along the columns, giving "
          "shape (n_k, n_q) instead of (n_q, n_k)", causal_shape_swapped),
    Entry("causal_mask", "wrong", "true_means_blocked",
          "returns True for the blocked (future) keys, the 'True = masked' convention, "
          "instead of True = may attend", causal_true_means_blocked),
    Entry("causal_mask", "right", "nested_list_comprehension", None, causal_nested_lists),
    Entry("causal_mask", "right", "subtract_outer", None, causal_subtract_outer),

    Entry("padding_mask", "wrong", "less_equal",
          "keeps key j when j <= lengths[b]: one padding position too many", padding_less_equal),
    Entry("padding_mask", "wrong", "one_broadcast_axis",
          "adds only one of the two broadcast axes, returning (B, 1, n) instead of "
          "(B, 1, 1, n)", padding_one_axis),
    Entry("padding_mask", "wrong", "transposed_broadcast",
          "puts positions down the rows and lengths along the columns, so the mask comes "
          "out as (n, 1, 1, B)", padding_transposed_broadcast),
    Entry("padding_mask", "wrong", "float_buffer",
          "fills a float np.zeros buffer with ones, so the mask is float 0/1 instead of "
          "boolean", padding_float_buffer),
    Entry("padding_mask", "wrong", "width_from_max_length",
          "builds the positions with np.arange(lengths.max()) instead of np.arange(n), so the "
          "mask is too narrow when no sequence fills all n positions", padding_width_from_lengths),
    Entry("padding_mask", "wrong", "left_padding",
          "marks the last lengths[b] positions (left padding) instead of the first; a length "
          "of 0 even marks the whole row since -0: is the full slice", padding_left_padded),
    Entry("padding_mask", "right", "bool_loop", None, padding_bool_loop),
    Entry("padding_mask", "right", "less_outer", None, padding_less_outer),

    Entry("masked_attention", "wrong", "nan_on_empty_rows",
          "does not guard rows with no allowed key: their max is -inf and the softmax gives "
          "NaN instead of zeros", masked_nan_rows),
    Entry("masked_attention", "wrong", "minus_1e9_fill",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights over all keys instead of zeros", masked_large_negative),
    Entry("masked_attention", "wrong", "multiply_by_mask",
          "multiplies the scores by the mask, so masked keys get score 0 (still a positive "
          "weight) instead of -inf", masked_multiply),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "zeros the masked weights after the softmax without renormalising, so the rows no "
          "longer sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "true_means_blocked",
          "reads the mask as True = blocked and hides the allowed keys instead of the "
          "forbidden ones", masked_inverted),
    Entry("masked_attention", "wrong", "scale_by_n_k",
          "scales the scores by 1/sqrt(N_k) (k's key axis) instead of 1/sqrt(d_k)",
          masked_scale_by_keys),
    Entry("masked_attention", "right", "row_loop_allowed_keys", None, masked_row_loop),
    Entry("masked_attention", "right", "torch_float64_nan_to_num", None,
          masked_torch_nan_to_num),
]
