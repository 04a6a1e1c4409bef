"""Learner-style answers to lesson 04 (see answers/lesson01.py for the layout)."""

import numpy as np
import torch
import torch.nn.functional as F

from tests.checks.answers.lesson01 import softmax_keepdims


# -- causal_mask -------------------------------------------------------------------------------
def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[None, :] < np.arange(n_q)[:, None] + (n_k - n_q)


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_inverted(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q).T


def causal_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_square_only(n_q, n_k=None):
    return np.tril(np.ones((n_q, n_q), dtype=bool))


def causal_one_ahead(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q) + 1


def causal_offset_backwards(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_q - n_k)


def causal_float_minus_inf(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.full((n_q, n_k), -np.inf), k=n_k - n_q + 1)


def causal_keys_square(n_q, n_k=None):
    size = n_k if n_k is not None else n_q
    return np.tri(size, dtype=bool)


def causal_tril(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_positions(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    query_position = np.arange(n_k - n_q, n_k)
    return query_position[:, None] >= np.arange(n_k)[None, :]


def causal_loops(n_q, n_k=None):
    n_k = n_k or n_q
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        for j in range(n_k):
            mask[i, j] = j <= i + n_k - n_q
    return mask


def causal_torch(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q).numpy()


# -- padding_mask ------------------------------------------------------------------------------
def padding_inverted(lengths, n):
    return (np.arange(n)[None, :] >= np.asarray(lengths)[:, None])[:, None, None, :]


def padding_off_by_one(lengths, n):
    return (np.arange(n)[None, :] <= np.asarray(lengths)[:, None])[:, None, None, :]


def padding_flat(lengths, n):
    return np.arange(n)[None, :] < np.asarray(lengths)[:, None]


def padding_three_dims(lengths, n):
    return (np.arange(n) < np.asarray(lengths)[:, None])[:, None, :]


def padding_masks_queries(lengths, n):
    keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
    return keep[:, None, :, None]


def padding_ints(lengths, n):
    keep = (np.arange(n)[None, :] < np.asarray(lengths)[:, None]).astype(int)
    return keep.reshape(len(keep), 1, 1, n)


def padding_drops_last_token(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :max(length - 1, 0)] = True
    return mask


def padding_longest_width(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    return (np.arange(width) < lengths[:, None]).reshape(len(lengths), 1, 1, width)


def padding_added_axes_in_front(lengths, n):
    keep = np.arange(n) < np.asarray(lengths)[:, None]
    return keep.reshape(1, 1, *keep.shape)


def padding_square(lengths, n):
    real = np.arange(n) < np.asarray(lengths)[:, None]
    return (real[:, :, None] & real[:, None, :])[:, None]


def padding_right_aligned(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, n - length:] = True
    return mask


def padding_counted_from_the_end(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :-(n - int(length))] = True  # [:-0] is empty when nothing is padded
    return mask


def padding_broadcast(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n) < lengths[:, None]).reshape(-1, 1, 1, n)


def padding_loops(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = True
    return mask


def padding_torch(lengths, n):
    lengths = torch.as_tensor(np.asarray(lengths))
    return (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :].numpy()


# -- masked_attention --------------------------------------------------------------------------
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def masked_nan(q, k, v, mask):
    w = softmax_keepdims(np.where(mask, _scores(q, k), -np.inf))
    return w @ v, w


def masked_finite_fill(q, k, v, mask):
    w = softmax_keepdims(np.where(mask, _scores(q, k), -1e9))
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    w = softmax_keepdims(_scores(q, k)) * mask
    return w @ v, w


def masked_fill_zero(q, k, v, mask):
    w = softmax_keepdims(np.where(mask, _scores(q, k), 0))
    return w @ v, w


def masked_inverted(q, k, v, mask):
    scores = np.where(mask, -np.inf, _scores(q, k))
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w @ v, w


def masked_inverted_naive(q, k, v, mask):
    w = softmax_keepdims(np.where(~mask, _scores(q, k), -np.inf))
    return w @ v, w


def masked_ignored(q, k, v, mask):
    w = softmax_keepdims(_scores(q, k))
    return w @ v, w


def masked_no_scale(q, k, v, mask):
    scores = np.where(mask, q @ np.swapaxes(k, -1, -2), -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w @ v, w


def masked_plus_mask(q, k, v, mask):
    w = softmax_keepdims(_scores(q, k) + mask)
    return w @ v, w


def masked_only_out(q, k, v, mask):
    w = np.nan_to_num(softmax_keepdims(np.where(mask, _scores(q, k), -np.inf)))
    return w @ v


def masked_minus_scores(q, k, v, mask):
    scores = np.where(mask, -(q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1]), -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w @ v, w


def masked_columns(q, k, v, mask):
    w = softmax_keepdims(np.where(mask, _scores(q, k), -np.inf), axis=-2)
    w = np.where(np.isnan(w), 0.0, w)
    return w @ v, w


def masked_plain_exp(q, k, v, mask):
    e = np.exp(_scores(q, k)) * mask
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_guarded(q, k, v, mask):
    scores = np.where(mask, _scores(q, k), -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w @ v, w


def masked_nan_to_num(q, k, v, mask):
    with np.errstate(invalid="ignore"):
        w = softmax_keepdims(np.where(mask, _scores(q, k), -np.inf))
    w = np.nan_to_num(w)
    return w @ v, w


def masked_renormalised(q, k, v, mask):
    scores = _scores(q, k)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True)) * mask
    total = e.sum(axis=-1, keepdims=True)
    w = e / np.where(total > 0, total, 1.0)
    return w @ v, w


def masked_big_negative_then_zero(q, k, v, mask):
    full = np.broadcast_to(mask, _scores(q, k).shape)
    w = softmax_keepdims(np.where(full, _scores(q, k), -1e30))
    w = np.where(full.any(axis=-1, keepdims=True), w, 0.0)
    return w @ v, w


def masked_torch_sdpa(q, k, v, mask):
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    tm = torch.from_numpy(np.ascontiguousarray(np.broadcast_to(mask, _scores(q, k).shape)))
    out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
    scores = (tq @ tk.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~tm, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    has_key = tm.any(dim=-1, keepdim=True)
    return (torch.where(has_key, out, 0.0).numpy(),
            torch.where(has_key, w, 0.0).numpy())


def masked_float32(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    return masked_guarded(q, k, v, mask)


# -- answers that reach mhalib's own answer ----------------------------------------------------
def causal_from_reference(n_q, n_k=None):
    from mhalib.reference import causal_mask

    return causal_mask(n_q, n_k)


def causal_from_torch_module(n_q, n_k=None):
    from mhalib.nn import causal_mask

    return causal_mask(n_q, n_k).numpy()


def padding_from_reference(lengths, n):
    from mhalib import reference

    return reference.padding_mask(lengths, n)


def masked_from_reference(q, k, v, mask):
    from mhalib.reference import masked_attention

    return masked_attention(q, k, v, mask)


def masked_from_attend(q, k, v, mask):
    from mhalib.nn import attend

    t = [torch.from_numpy(np.asarray(a, dtype=np.float64))[None, None] for a in (q, k, v)]
    m = torch.from_numpy(np.ascontiguousarray(mask))
    out = attend(*t, attn_mask=m)[0, 0].numpy()
    w = masked_guarded(q, k, v, mask)[1]
    return out, w


WRONG = {
    "causal_mask": {
        "strict": causal_strict,
        "top_left": causal_top_left,
        "inverted": causal_inverted,
        "upside_down": causal_triu,
        "transposed": causal_transposed,
        "not_boolean": causal_float,
        "ignores_n_k": causal_square_only,
        "sees_next": causal_one_ahead,
        "offset_sign_flipped": causal_offset_backwards,
        "additive_mask": causal_float_minus_inf,
        "square_n_k": causal_keys_square,
    },
    "padding_mask": {
        "inverted": padding_inverted,
        "off_by_one": padding_off_by_one,
        "flat_shape": padding_flat,
        "three_dims": padding_three_dims,
        "masks_queries": padding_masks_queries,
        "not_boolean": padding_ints,
        "one_short": padding_drops_last_token,
        "width_from_lengths": padding_longest_width,
        "batch_not_first": padding_added_axes_in_front,
        "masks_queries_and_keys": padding_square,
        "left_padding": padding_right_aligned,
        "full_rows_empty": padding_counted_from_the_end,
    },
    "masked_attention": {
        "nan_on_empty_rows": masked_nan,
        "finite_fill_on_empty_rows": masked_finite_fill,
        "mask_after_softmax": masked_after_softmax,
        "shift_by_masked_max": masked_renormalised,
        "zero_fill": masked_fill_zero,
        "inverted_mask": masked_inverted,
        "ignores_mask": masked_ignored,
        "no_scale": masked_no_scale,
        "mask_added": masked_plus_mask,
        "returns_only_output": masked_only_out,
        "negated_scores": masked_minus_scores,
        "softmax_over_queries": masked_columns,
        "no_max_shift": masked_plain_exp,
    },
}

ALSO_WRONG = {"masked_attention": {"inverted_mask": masked_inverted_naive}}

RIGHT = {
    "causal_mask": [causal_tril, causal_positions, causal_loops, causal_torch],
    "padding_mask": [padding_broadcast, padding_loops, padding_torch],
    "masked_attention": [masked_guarded, masked_nan_to_num, masked_big_negative_then_zero,
                         masked_torch_sdpa, masked_float32],
}

ANSWER_KEY = {
    "causal_mask": [causal_from_reference, causal_from_torch_module],
    "padding_mask": [padding_from_reference],
    "masked_attention": [masked_from_reference, masked_from_attend],
}
