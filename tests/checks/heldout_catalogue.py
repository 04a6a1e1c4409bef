"""A held-out catalogue of realistic wrong answers, kept apart from the fixtures.

``CATALOGUE[exercise]`` is a list of ``(expected, func)``: ``expected`` is the mistake the judge
should name (``None``: no known mistake fits, the judge must name none), ``func`` a wrong answer
written the way a learner would write it, independently of the checkers' mistake models and of
the fixtures in tests/checks/answers. Many are other spellings of known slips (the judge must
recognise the slip whatever the code looks like); the rest are slips of the kinds learners make
in every lesson: sign errors, an intermediate returned instead of the result, swapped
arguments, off-by-one offsets, a wrong axis, missing keepdims, one wide head instead of H
heads, units. tests/checks/test_diagnosis_coverage.py measures how many are named.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special
import torch
import torch.nn.functional as F


# == lesson 01 =====================================================================================
def _sm(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_log_probs(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def softmax_log_probs_scipy(x, axis=-1):
    return scipy.special.log_softmax(x, axis=axis)


def softmax_unnormalised(x, axis=-1):
    return np.exp(x - x.max(axis=axis, keepdims=True))


def softmax_negated(x, axis=-1):
    e = np.exp(np.max(x, axis=axis, keepdims=True) - x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_negated_stable(x, axis=-1):
    return scipy.special.softmax(-x, axis=axis)


def softmax_torch_dim0(x, axis=-1):
    return torch.softmax(torch.from_numpy(np.asarray(x)), dim=0).numpy()


def softmax_scipy_no_axis(x, axis=-1):
    return scipy.special.softmax(x)


def softmax_shift_last_axis(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_axis_minus_one(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_moveaxis_forgot_back(x, axis=-1):
    moved = np.moveaxis(x, axis, -1)
    return _sm(moved, -1)


def softmax_divides_by_max(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.max(axis=axis, keepdims=True)


def _att_scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def attention_out_only(q, k, v):
    return _sm(_att_scores(q, k)) @ v


def attention_log_weights(q, k, v):
    scores = _att_scores(q, k)
    logw = scores - scores.max(-1, keepdims=True)
    logw = logw - np.log(np.exp(logw).sum(-1, keepdims=True))
    return np.exp(logw) @ v, logw


def attention_negated_scores(q, k, v):
    w = _sm(-(q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1]))
    return w @ v, w


def attention_swapped_q_k(q, k, v):
    w = _sm(k @ np.swapaxes(q, -1, -2) / np.sqrt(q.shape[-1]))
    return w @ v, w


def attention_scale_by_n_k(q, k, v):
    w = _sm(q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-2]))
    return w @ v, w


def attention_scale_by_shape_1(q, k, v):
    w = _sm(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[1]))
    return w @ v, w


def attention_weights_transposed(q, k, v):
    w = _sm(_att_scores(q, k))
    return w @ v, np.swapaxes(w, -1, -2)


def attention_einsum_no_scale(q, k, v):
    w = scipy.special.softmax(np.einsum("...id,...jd->...ij", q, k), axis=-1)
    return np.einsum("...ij,...jd->...id", w, v), w


def attention_torch_softmax_dim0(q, k, v):
    s = torch.from_numpy(_att_scores(q, k))
    w = torch.softmax(s, dim=0).numpy()
    return w @ v, w


def attention_scores_and_out(q, k, v):
    s = _att_scores(q, k)
    return _sm(s) @ v, s * 1.0


def attention_scale_by_d_model_squared(q, k, v):
    w = _sm(q @ np.swapaxes(k, -1, -2) / q.shape[-1] ** 2)
    return w @ v, w


# == lesson 02 =====================================================================================
def split_stack_axis2(x, num_heads):
    return np.stack(np.split(x, num_heads, axis=-1), axis=2)


def split_strided_moveaxis(x, num_heads):
    b, n, d = x.shape
    return np.moveaxis(x.reshape(b, n, d // num_heads, num_heads), -1, 1)


def split_folded_into_batch(x, num_heads):
    b, n, d = x.shape
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3).reshape(
        b * num_heads, n, d // num_heads)


def split_sizes_swapped(x, num_heads):
    b, n, d = x.shape
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 2, 1, 3)


def split_torch_view_no_transpose(x, num_heads):
    t = torch.from_numpy(x)
    b, n, d = t.shape
    return t.view(b, num_heads, n, d // num_heads).numpy()


def split_stack_axis0(x, num_heads):
    return np.stack(np.array_split(x, num_heads, axis=2))


def merge_summed(x):
    return x.sum(axis=1)


def merge_concat_tokens(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_view_no_transpose_torch(x):
    t = torch.from_numpy(np.ascontiguousarray(x))
    b, h, n, d = t.shape
    return t.view(b, n, h * d).numpy()


def merge_moveaxis_strided(x):
    b, h, n, d = x.shape
    return np.moveaxis(x, 1, -1).reshape(b, n, d * h)


def merge_mean(x):
    return x.mean(axis=1)


def _heads(x, num_heads):
    b, n, d = x.shape
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def _unheads(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _attend(q, k, v, axis=-1, causal=False):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    return _sm(s, axis) @ v


def mha_one_wide_head_d_head_scale(x, w_q, w_k, w_v, w_o, num_heads):
    d_head = x.shape[-1] // num_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head)
    return _sm(s) @ v @ w_o


def mha_one_wide_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    out = []
    for b in range(x.shape[0]):
        q, k, v = x[b] @ w_q, x[b] @ w_k, x[b] @ w_v
        out.append(_sm(q @ k.T / math.sqrt(q.shape[-1])) @ v)
    return np.stack(out) @ w_o


def mha_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return _unheads(_attend(q, k, v, axis=-2)) @ w_o


def mha_swapped_q_k(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return _unheads(_attend(k, q, v)) @ w_o


def mha_swapped_k_v(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return _unheads(_attend(q, v, k)) @ w_o


def mha_returns_weights_too(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _sm(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    return _unheads(w @ v) @ w_o, w


def mha_causal(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return _unheads(_attend(q, k, v, causal=True)) @ w_o


def mha_linear_layout_torch(x, w_q, w_k, w_v, w_o, num_heads):
    t = [torch.from_numpy(a) for a in (x, w_q, w_k, w_v, w_o)]
    q, k, v = (F.linear(t[0], w) for w in t[1:4])
    b, n, d = t[0].shape
    split = [a.view(b, n, num_heads, -1).transpose(1, 2) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*split).transpose(1, 2).reshape(b, n, d)
    return F.linear(out, t[4]).numpy()


def mha_no_w_o_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    q, k, v = (np.einsum("bnd,de->bne", x, w).reshape(b, n, num_heads, -1)
               for w in (w_q, w_k, w_v))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    return np.einsum("bhqk,bkhd->bqhd", _sm(s), v).reshape(b, n, d)


# == lesson 03 =====================================================================================
def variance_mean_of_products(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.mean(q * k, axis=1)))


def variance_torch_std(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return (q * k).sum(-1).std().item()


def variance_squares(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    return float(np.var((q ** 2).sum(axis=1)))


def variance_scaled_dot(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k) / math.sqrt(d_k)))


def variance_rand(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q, k = rng.uniform(size=(2, n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def entropy_terms_only(weights, axis=-1):
    p = np.asarray(weights)
    return -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)


def entropy_keepdims(weights, axis=-1):
    return -np.sum(scipy.special.xlogy(weights, weights), axis=axis, keepdims=True)


def entropy_axis_0(weights, axis=-1):
    return -np.sum(scipy.special.xlogy(weights, weights), axis=0)


def entropy_log2_xlogy(weights, axis=-1):
    return -np.sum(scipy.special.xlogy(weights, weights), axis=axis) / np.log(2)


def entropy_positive_sum(weights, axis=-1):
    return np.sum(scipy.special.xlogy(weights, weights), axis=axis)


def entropy_scipy_no_axis(weights, axis=-1):
    import scipy.stats

    return scipy.stats.entropy(weights)


def entropy_torch_mean(weights, axis=-1):
    p = torch.from_numpy(np.asarray(weights))
    return -torch.special.xlogy(p, p).mean(dim=axis).numpy()


def jacobian_inner_product(p):
    return np.diag(p) - np.dot(p, p)


def jacobian_identity(p):
    return np.eye(len(p)) - np.outer(p, p)


def jacobian_elementwise_square(p):
    return np.diag(p) - p * p


def jacobian_flipped_broadcast(p):
    return p[None, :] * (p[:, None] - np.eye(len(p)))


def jacobian_diag_minus_square(p):
    return np.diag(p - p ** 2)


def jacobian_outer_torch(p):
    t = torch.from_numpy(np.asarray(p))
    return (-torch.outer(t, t)).numpy()


# == lesson 04 =====================================================================================
def causal_sees_next(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_arange_top_left(n_q, n_k=None):
    n_k = n_k or n_q
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None]


def causal_int(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=int), k=n_k - n_q)


def causal_torch_triu_inverted(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1).numpy()


def causal_strict_tril(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q - 1)


def padding_one_short(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None] - 1)[:, None, None, :]


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(lengths.max())[None, :] < lengths[:, None])[:, None, None, :]


def padding_batch_not_first(lengths, n):
    keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
    return keep[None, None]


def padding_float(lengths, n):
    keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
    return keep[:, None, None, :].astype(np.float32)


def padding_inverted_torch(lengths, n):
    lengths = torch.as_tensor(np.asarray(lengths))
    return (torch.arange(n)[None, :] >= lengths[:, None]).reshape(-1, 1, 1, n).numpy()


def padding_le_loop(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length + 1] = True
    return mask


def _scaled(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def masked_mask_added(q, k, v, mask):
    w = _sm(_scaled(q, k) + mask)
    return w @ v, w


def masked_additive_big_negative(q, k, v, mask):
    w = _sm(_scaled(q, k) + (1 - np.asarray(mask, dtype=float)) * -1e9)
    return w @ v, w


def masked_out_only(q, k, v, mask):
    s = np.where(mask, _scaled(q, k), -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0))
    tot = e.sum(-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v


def masked_multiplied(q, k, v, mask):
    w = _sm(_scaled(q, k) * mask)
    return w @ v, w


def masked_negated_scores(q, k, v, mask):
    s = np.where(mask, -_scaled(q, k), -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0))
    tot = e.sum(-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_torch_masked_fill_inverted(q, k, v, mask):
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    m = torch.from_numpy(np.ascontiguousarray(mask))
    s = (tq @ tk.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(m, float("-inf"))
    w = torch.softmax(s, -1).nan_to_num(0.0)
    return (w @ tv).numpy(), w.numpy()


def masked_ignored_einsum(q, k, v, mask):
    w = scipy.special.softmax(np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1]), -1)
    return w @ v, w


# == lesson 05 =====================================================================================
def _parts(n, d, qkv=6, scores=2, ws=2, out=2):
    parts = {"qkv_projections": qkv * n * d * d, "scores": scores * n * n * d,
             "weighted_sum": ws * n * n * d, "output_projection": out * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_causal_halved(seq_len, d_model):
    n, d = seq_len, d_model
    parts = _parts(n, d)
    parts["scores"] //= 2
    parts["weighted_sum"] //= 2
    parts["total"] = parts["qkv_projections"] + parts["output_projection"] + parts["scores"] \
        + parts["weighted_sum"]
    return parts


def flops_all_halved_floats(seq_len, d_model):
    return {key: value / 2 for key, value in _parts(seq_len, d_model).items()}


def flops_qkv_single(seq_len, d_model):
    return _parts(seq_len, d_model, qkv=2)


def flops_missing_output_key(seq_len, d_model):
    parts = _parts(seq_len, d_model)
    del parts["output_projection"]
    parts["total"] = sum(parts.values()) - parts["total"]
    return parts


def flops_head_width_64(seq_len, d_model):
    n, d = seq_len, d_model
    d_head = d // 4 if d % 4 == 0 else d  # four heads
    parts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d_head,
             "weighted_sum": 2 * n * n * d_head, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def flops_total_without_output(seq_len, d_model):
    parts = _parts(seq_len, d_model)
    parts["total"] -= parts["output_projection"]
    return parts


def crossover_half(d_model):
    return d_model / 2  # solved 8 N d^2 = 4 N^2 d the wrong way round


def crossover_search_past(d_model):
    n = 1
    while 4 * n * n * d_model <= 8 * n * d_model * d_model:
        n += 1
    return n


def crossover_four(d_model):
    return 4 * d_model


def crossover_one_and_half(d_model):
    return 3 * d_model // 2


def params_one_bias(d_model, bias=True):
    return 4 * d_model * d_model + (d_model if bias else 0)


def params_flag_inverted(d_model, bias=True):
    return 4 * d_model * d_model + (0 if bias else 4 * d_model)


def params_three(d_model, bias=True):
    return 3 * d_model ** 2 + 3 * d_model * bool(bias)


def params_bias_matrix(d_model, bias=True):
    return 4 * d_model ** 2 * (2 if bias else 1)


# == lesson 06 =====================================================================================
def repeat_cat_tiled(x, n_rep):
    return torch.cat([x] * n_rep, dim=1)


def repeat_expand_wrong_order(x, n_rep):
    b, g, n, d = x.shape
    return x[:, None].expand(b, n_rep, g, n, d).reshape(b, n_rep * g, n, d)


def repeat_batch_axis(x, n_rep):
    return x.repeat_interleave(n_rep, dim=0)


def repeat_not_flattened(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d)


def repeat_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_sequence_cat(x, n_rep):
    return torch.cat([x] * n_rep, dim=2)


def _split6(t, heads):
    b, n, width = t.shape
    return t.reshape(b, n, heads, width // heads).transpose(1, 2)


def _merge6(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, *, swap_kv=False,
         over_queries=False, merge_plain=False, out=True):
    rep = num_heads // num_kv_heads
    q = _split6(x @ w_q, num_heads).double()
    k = _split6(x @ w_k, num_kv_heads).repeat_interleave(rep, 1).double()
    v = _split6(x @ w_v, num_kv_heads).repeat_interleave(rep, 1).double()
    if swap_kv:
        k, v = v, k
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s, dim=-2 if over_queries else -1).nan_to_num(0.0)
    heads = (w @ v).to(x.dtype)
    b, h, n, d = heads.shape
    merged = heads.reshape(b, n, h * d) if merge_plain else _merge6(heads)
    return merged @ w_o if out else merged


def gqa_swapped_k_v(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, swap_kv=True)


def gqa_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, over_queries=True)


def gqa_merge_plain(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, merge_plain=True)


def gqa_tiled_expand(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, _ = x.shape
    rep = num_heads // num_kv_heads
    q = _split6(x @ w_q, num_heads)
    k = _split6(x @ w_k, num_kv_heads)
    v = _split6(x @ w_v, num_kv_heads)
    k = k[:, None].expand(b, rep, *k.shape[1:]).reshape(b, num_heads, n, -1)
    v = v[:, None].expand(b, rep, *v.shape[1:]).reshape(b, num_heads, n, -1)
    return _merge6(F.scaled_dot_product_attention(q, k, v, is_causal=causal)) @ w_o


def gqa_sdpa_no_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    out = F.scaled_dot_product_attention(_split6(x @ w_q, num_heads),
                                         _split6(x @ w_k, num_kv_heads),
                                         _split6(x @ w_v, num_kv_heads), enable_gqa=True)
    return _merge6(out) @ w_o


def gqa_sdpa_scale_one(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    out = F.scaled_dot_product_attention(_split6(x @ w_q, num_heads),
                                         _split6(x @ w_k, num_kv_heads),
                                         _split6(x @ w_v, num_kv_heads), is_causal=causal,
                                         enable_gqa=True, scale=1.0)
    return _merge6(out) @ w_o


def gqa_returns_tuple(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    rep = num_heads // num_kv_heads
    q = _split6(x @ w_q, num_heads)
    k = _split6(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _split6(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s.float(), -1).to(x.dtype)
    return _merge6(w @ v) @ w_o, w


def cache_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_element


def cache_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 30


def cache_gb(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 1e9


def cache_bits_to_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element / 8


def cache_no_kv_heads(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * head_dim * seq_len * batch_size * bytes_per_element


def cache_k_only_elements(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    shape = (num_layers, batch_size, num_kv_heads, seq_len, head_dim)  # forgot the 2
    return math.prod(shape) * bytes_per_element


def cache_float_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element * 8.0


# == lesson 08 =====================================================================================
def prev_diagonal_not_averaged(weights):
    return torch.diagonal(weights, offset=-1, dim1=1, dim2=2)


def prev_keepdim(weights):
    return torch.diagonal(weights, offset=-1, dim1=1, dim2=2).mean(dim=-1, keepdim=True)


def prev_two_back(weights):
    return torch.diagonal(weights, offset=-2, dim1=1, dim2=2).mean(dim=1)


def prev_transposed_index(weights):
    n = weights.shape[-1]
    i = torch.arange(1, n)
    return weights[:, i - 1, i].mean(-1)


def prev_roll(weights):
    n = weights.shape[-1]
    i = torch.arange(n)
    return weights[:, i, (i - 1) % n].mean(-1)


def prev_sum_loop(weights):
    heads, n, _ = weights.shape
    return torch.tensor([sum(float(weights[h, i, i - 1]) for i in range(1, n))
                         for h in range(heads)])


def prev_divide_n_loop(weights):
    heads, n, _ = weights.shape
    return torch.tensor([sum(float(weights[h, i, i - 1]) for i in range(1, n)) / n
                         for h in range(heads)])


def prev_diag_self_tril(weights):
    return torch.diagonal(weights, dim1=-2, dim2=-1).mean(-1)


def ind_key_before(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period - 1].mean(-1)


def ind_skips_first_query(weights, period):
    q = torch.arange(period + 1, 2 * period)
    return weights[:, q, q - period + 1].mean(-1)


def ind_transposed(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q - period + 1, q].mean(-1)


def ind_not_averaged(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1]


def ind_keepdim(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1].mean(-1, keepdim=True)


def ind_diagonal_duplicate(weights, period):
    return torch.diagonal(weights, offset=-period, dim1=1, dim2=2).mean(-1)


def ind_sum(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1].sum(-1)


def ind_loop_divide_n(weights, period):
    out = []
    for head in weights:
        out.append(sum(float(head[i, i - period + 1]) for i in range(period, 2 * period))
                   / weights.shape[-1])
    return torch.tensor(out)


# == a second batch, written after the first had its models ========================================
def softmax_shift_by_mean(x, axis=-1):
    e = np.exp(x - x.mean(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_denominator_unshifted(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return np.exp(x - m) / np.sum(np.exp(x), axis=axis, keepdims=True)


def softmax_clipped(x, axis=-1):
    e = np.exp(np.clip(x, -500, 500))
    return e / e.sum(axis=axis, keepdims=True)


def attention_swapped_k_v(q, k, v):
    w = _sm(q @ np.swapaxes(v, -1, -2) / np.sqrt(q.shape[-1]))
    return w @ k, w


def attention_out_unscaled(q, k, v):
    s = q @ np.swapaxes(k, -1, -2)
    return _sm(s) @ v, _sm(s / np.sqrt(q.shape[-1]))


def merge_tokens_last(x):
    b, h, n, d = x.shape
    return x.swapaxes(1, 2).reshape(b, n, h * d).swapaxes(1, 2)


def mha_softmax_over_heads(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return _unheads(_sm(s, 1) @ v) @ w_o


def mha_residual(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return x + _unheads(_attend(q, k, v)) @ w_o


def mha_scale_by_d_head(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ np.swapaxes(k, -1, -2) / q.shape[-1]
    return _unheads(_sm(s) @ v) @ w_o


def entropy_normalised(weights, axis=-1):
    p = np.asarray(weights)
    h = -np.sum(scipy.special.xlogy(p, p), axis=axis)
    return h / np.log(p.shape[axis])


def jacobian_broadcast_slip(p):
    return p * (np.eye(len(p)) - p)


def causal_additive(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.where(np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q), 0.0, -np.inf)


def padding_queries_and_keys(lengths, n):
    keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
    return keep[:, None, :, None] & keep[:, None, None, :]


def padding_left(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= n - lengths[:, None])[:, None, None, :]


def masked_softmax_over_queries(q, k, v, mask):
    w = np.nan_to_num(_sm(np.where(mask, _scaled(q, k), -np.inf), axis=-2))
    return w @ v, w


def flops_mac_as_one_in_n2(seq_len, d_model):
    n, d = seq_len, d_model
    return _parts(n, d, scores=1, ws=1)


def crossover_no_output_one_n2(d_model):
    return 3 * d_model


def repeat_ignores_n_rep(x, n_rep):
    return x.clone()


def gqa_grouping_by_member(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d = x.shape
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).view(b, n, rep, num_kv_heads, dh)  # (member, group): the wrong order
    k = (x @ w_k).view(b, n, num_kv_heads, dh)
    v = (x @ w_v).view(b, n, num_kv_heads, dh)
    s = torch.einsum("bimgd,bjgd->bmgij", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.einsum("bmgij,bjgd->bimgd", s.softmax(-1), v).reshape(b, n, d)
    return out @ w_o


def cache_no_head_dim(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * seq_len * batch_size * bytes_per_element


def prev_single_number(weights):
    return torch.diagonal(weights, offset=-1, dim1=1, dim2=2).mean()


def ind_single_number(weights, period):
    q = torch.arange(period, 2 * period)
    return weights[:, q, q - period + 1].mean()


# == a third batch, written after the second had its models ========================================
def softmax_whole_unshifted(x, axis=-1):
    e = np.exp(x)
    return e / e.sum()


def softmax_sigmoid(x, axis=-1):
    return 1 / (1 + np.exp(-x))


def attention_unscaled_scores_returned(q, k, v):
    s = q @ np.swapaxes(k, -1, -2)
    return _sm(s / np.sqrt(q.shape[-1])) @ v, s


def attention_out_from_scores(q, k, v):
    s = _att_scores(q, k)
    return s @ v, _sm(s)


def attention_fourth_root(q, k, v):
    w = _sm(q @ np.swapaxes(k, -1, -2) / np.sqrt(np.sqrt(q.shape[-1])))
    return w @ v, w


def mha_heads_and_width_swapped(x, w_q, w_k, w_v, w_o, num_heads):
    d_head = x.shape[-1] // num_heads
    q, k, v = (_heads(x @ w, d_head) for w in (w_q, w_k, w_v))  # d_head heads of width H
    return _unheads(_attend(q, k, v)) @ w_o


def mha_keys_with_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_q, w_v))
    return _unheads(_attend(q, k, v)) @ w_o


def entropy_log_of_inverse(weights, axis=-1):
    return np.sum(weights * np.log(1 / weights), axis=axis)


def entropy_of_softmax(weights, axis=-1):
    p = scipy.special.softmax(weights, axis=axis)
    return -np.sum(p * np.log(p), axis=axis)


def jacobian_of_log_softmax(p):
    return np.eye(len(p)) - p[None, :]


def causal_square_n_k(n_q, n_k=None):
    n = n_q if n_k is None else n_k
    return np.tril(np.ones((n, n), dtype=bool))


def padding_arange_from_one(lengths, n):
    return (np.arange(1, n + 1)[None, :] < np.asarray(lengths)[:, None])[:, None, None, :]


def masked_float_conversion(q, k, v, mask):
    additive = (1 - np.asarray(mask, dtype=float)) * -np.inf  # 0 * -inf is NaN
    w = _sm(_scaled(q, k) + additive)
    return w @ v, w


def masked_exp_no_shift(q, k, v, mask):
    s = _scaled(q, k)
    e = np.where(mask, np.exp(s), 0.0)
    t = e.sum(-1, keepdims=True)
    w = np.divide(e, t, out=np.zeros_like(e), where=t > 0)
    return w @ v, w


def masked_exp_no_shift_nan_to_num(q, k, v, mask):
    e = np.exp(np.where(mask, _scaled(q, k), -np.inf))
    w = np.nan_to_num(e / e.sum(-1, keepdims=True), posinf=0.0)
    return w @ v, w


def repeat_tile(x, n_rep):
    return torch.tile(x, (1, n_rep, 1, 1))


def repeat_tiled_along_sequence(x, n_rep):
    return x.repeat(1, 1, n_rep, 1)


def gqa_values_with_w_k(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    out = F.scaled_dot_product_attention(_split6(x @ w_q, num_heads),
                                         _split6(x @ w_k, num_kv_heads),
                                         _split6(x @ w_k, num_kv_heads), is_causal=causal,
                                         enable_gqa=True)
    return _merge6(out) @ w_o


def cache_assumes_fp32(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 4


def ind_first_half_queries(weights, period):
    q = torch.arange(period - 1, 2 * period - 1)
    return weights[:, q, q - period + 1].mean(-1)


BATCH_3 = {
    "softmax": [("whole_array", softmax_whole_unshifted), ("sigmoid", softmax_sigmoid)],
    "attention": [("returns_scores", attention_unscaled_scores_returned),
                  ("output_from_scores", attention_out_from_scores),
                  ("wrong_scale", attention_fourth_root)],
    "multi_head_attention": [("heads_and_width_swapped", mha_heads_and_width_swapped),
                             ("projection_weight_reused", mha_keys_with_w_q)],
    "softmax_entropy": [("nan_for_zeros", entropy_log_of_inverse),
                        ("softmax_of_weights", entropy_of_softmax)],
    "softmax_jacobian": [("log_softmax_jacobian", jacobian_of_log_softmax)],
    "causal_mask": [("square_n_k", causal_square_n_k)],
    "padding_mask": [("one_short", padding_arange_from_one)],
    "masked_attention": [(None, masked_float_conversion),
                         ("no_max_shift", masked_exp_no_shift),
                         ("no_max_shift", masked_exp_no_shift_nan_to_num)],
    "repeat_kv": [("tiled_groups", repeat_tile), ("sequence_axis", repeat_tiled_along_sequence)],
    "grouped_query_attention": [("projection_weight_reused", gqa_values_with_w_k)],
    "kv_cache_bytes": [("fixed_bytes_per_element", cache_assumes_fp32)],
    "induction_score": [("shifted_query_range", ind_first_half_queries)],
}


# == a fourth batch, written after the third had its models ========================================
def softmax_transposed_after(x, axis=-1):
    return torch.softmax(torch.from_numpy(np.asarray(x)), dim=axis).T.numpy()


def attention_output_transposed(q, k, v):
    w = _sm(_att_scores(q, k))
    return np.swapaxes(v, -1, -2) @ np.swapaxes(w, -1, -2), w


def gqa_first_group_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    q = _split6(x @ w_q, num_heads)
    k = _split6(x @ w_k, num_kv_heads)[:, :1].expand(-1, num_heads, -1, -1)
    v = _split6(x @ w_v, num_kv_heads)[:, :1].expand(-1, num_heads, -1, -1)
    return _merge6(F.scaled_dot_product_attention(q, k, v, is_causal=causal)) @ w_o


def prev_default_diagonal_dims(weights):
    return torch.diagonal(weights, offset=-1).mean(-1)


def ind_default_diagonal_dims(weights, period):
    return torch.diagonal(weights, offset=1 - period).mean(-1)


def mha_scores_from_x(x, w_q, w_k, w_v, w_o, num_heads):
    q = _heads(x @ w_q, num_heads)
    k = _heads(x, num_heads)  # forgot w_k
    v = _heads(x @ w_v, num_heads)
    return _unheads(_attend(q, k, v)) @ w_o


def cache_per_layer(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def padding_lengths_as_last_index(lengths, n):
    return (np.arange(n)[None, :] <= np.asarray(lengths)[:, None] - 1)[:, None, :, None]


BATCH_4 = {
    "softmax": [("softmax_transposed", softmax_transposed_after)],
    "attention": [("output_transposed", attention_output_transposed)],
    "multi_head_attention": [("projection_missing", mha_scores_from_x)],
    "grouped_query_attention": [("first_group_only", gqa_first_group_only)],
    "kv_cache_bytes": [("no_layers", cache_per_layer)],
    "padding_mask": [("masks_queries", padding_lengths_as_last_index)],
    "previous_token_score": [("diagonal_over_wrong_axes", prev_default_diagonal_dims)],
    "induction_score": [("diagonal_over_wrong_axes", ind_default_diagonal_dims)],
}


BATCH_2 = {
    "softmax": [("shift_by_mean", softmax_shift_by_mean),
                ("denominator_not_shifted", softmax_denominator_unshifted),
                (None, softmax_clipped)],
    "attention": [("swapped_k_v", attention_swapped_k_v), (None, attention_out_unscaled)],
    "merge_heads": [("tokens_last", merge_tokens_last)],
    "multi_head_attention": [("softmax_over_heads", mha_softmax_over_heads),
                             ("residual_added", mha_residual),
                             ("scale_by_d_head", mha_scale_by_d_head)],
    "softmax_entropy": [("normalised_by_log_n", entropy_normalised)],
    "softmax_jacobian": [("elementwise_square", jacobian_broadcast_slip)],
    "causal_mask": [("additive_mask", causal_additive)],
    "padding_mask": [("masks_queries_and_keys", padding_queries_and_keys),
                     ("left_padding", padding_left)],
    "masked_attention": [("softmax_over_queries", masked_softmax_over_queries)],
    "mha_flops": [("causal_halved", flops_mac_as_one_in_n2)],
    "crossover_seq_len": [("no_output_projection_one_n2_term", crossover_no_output_one_n2)],
    "repeat_kv": [("ignores_n_rep", repeat_ignores_n_rep)],
    "grouped_query_attention": [("tiled_groups", gqa_grouping_by_member)],
    "kv_cache_bytes": [("no_head_dim", cache_no_head_dim)],
    "previous_token_score": [("single_number", prev_single_number)],
    "induction_score": [("single_number", ind_single_number)],
}


CATALOGUE = {
    "softmax": [
        ("returns_log_probabilities", softmax_log_probs),
        ("returns_log_probabilities", softmax_log_probs_scipy),
        ("no_normalisation", softmax_unnormalised),
        ("negated_logits", softmax_negated),
        ("negated_logits", softmax_negated_stable),
        ("wrong_axis", softmax_torch_dim0),
        ("whole_array", softmax_scipy_no_axis),
        ("max_along_wrong_axis", softmax_shift_last_axis),
        ("sum_along_wrong_axis", softmax_sum_axis_minus_one),
        ("axis_not_moved_back", softmax_moveaxis_forgot_back),
        ("no_normalisation", softmax_divides_by_max),
    ],
    "attention": [
        ("returns_only_output", attention_out_only),
        ("returns_log_weights", attention_log_weights),
        ("negated_scores", attention_negated_scores),
        ("swapped_q_k", attention_swapped_q_k),
        ("wrong_scale", attention_scale_by_n_k),
        ("wrong_scale", attention_scale_by_shape_1),
        ("weights_transposed", attention_weights_transposed),
        ("no_scale", attention_einsum_no_scale),
        ("softmax_over_first_axis", attention_torch_softmax_dim0),
        ("returns_scores", attention_scores_and_out),
        ("wrong_scale", attention_scale_by_d_model_squared),
    ],
    "split_heads": [
        ("heads_last", split_stack_axis2),
        ("strided_heads", split_strided_moveaxis),
        ("heads_folded_into_batch", split_folded_into_batch),
        ("sizes_swapped", split_sizes_swapped),
        ("no_transpose", split_torch_view_no_transpose),
        ("heads_before_batch", split_stack_axis0),
    ],
    "merge_heads": [
        ("heads_summed", merge_summed),
        ("concatenated_along_tokens", merge_concat_tokens),
        ("no_transpose", merge_view_no_transpose_torch),
        ("strided_heads", merge_moveaxis_strided),
        ("heads_summed", merge_mean),
    ],
    "multi_head_attention": [
        ("single_head_d_head_scale", mha_one_wide_head_d_head_scale),
        ("single_head", mha_one_wide_head_loop),
        ("softmax_over_queries", mha_softmax_over_queries),
        ("swapped_q_k", mha_swapped_q_k),
        ("swapped_k_v", mha_swapped_k_v),
        ("returns_weights_too", mha_returns_weights_too),
        ("causal_mask_applied", mha_causal),
        ("transposed_weights", mha_linear_layout_torch),
        ("no_output_projection", mha_no_w_o_einsum),
    ],
    "dot_product_variance": [
        ("scaled_by_d_k", variance_mean_of_products),
        ("standard_deviation", variance_torch_std),
        ("same_vector", variance_squares),
        ("scaled", variance_scaled_dot),
        ("uniform_draws", variance_rand),
    ],
    "softmax_entropy": [
        ("terms_not_summed", entropy_terms_only),
        ("keepdims", entropy_keepdims),
        ("wrong_axis", entropy_axis_0),
        ("bits", entropy_log2_xlogy),
        ("no_minus_sign", entropy_positive_sum),
        ("wrong_axis", entropy_scipy_no_axis),
        ("mean_not_sum", entropy_torch_mean),
    ],
    "softmax_jacobian": [
        ("inner_product", jacobian_inner_product),
        ("identity_not_diag_p", jacobian_identity),
        ("elementwise_square", jacobian_elementwise_square),
        ("sign_flipped", jacobian_flipped_broadcast),
        ("diagonal_only", jacobian_diag_minus_square),
        ("outer_only", jacobian_outer_torch),
    ],
    "causal_mask": [
        ("sees_next", causal_sees_next),
        ("offset_sign_flipped", causal_offset_sign),
        ("top_left", causal_arange_top_left),
        ("not_boolean", causal_int),
        ("inverted", causal_torch_triu_inverted),
        ("strict", causal_strict_tril),
    ],
    "padding_mask": [
        ("one_short", padding_one_short),
        ("width_from_lengths", padding_width_from_lengths),
        ("batch_not_first", padding_batch_not_first),
        ("not_boolean", padding_float),
        ("inverted", padding_inverted_torch),
        ("off_by_one", padding_le_loop),
    ],
    "masked_attention": [
        ("mask_added", masked_mask_added),
        ("finite_fill_on_empty_rows", masked_additive_big_negative),
        ("returns_only_output", masked_out_only),
        ("zero_fill", masked_multiplied),
        ("negated_scores", masked_negated_scores),
        ("inverted_mask", masked_torch_masked_fill_inverted),
        ("ignores_mask", masked_ignored_einsum),
    ],
    "mha_flops": [
        ("causal_halved", flops_causal_halved),
        ("multiply_add_as_one", flops_all_halved_floats),
        ("one_projection", flops_qkv_single),
        ("no_output_projection", flops_missing_output_key),
        ("n2_with_d_head", flops_head_width_64),
        ("no_output_projection", flops_total_without_output),
    ],
    "crossover_seq_len": [
        ("inverted_ratio", crossover_half),
        ("first_n_past_crossover", crossover_search_past),
        ("one_n2_term", crossover_four),
        ("no_output_projection", crossover_one_and_half),
    ],
    "mha_param_count": [
        ("one_bias", params_one_bias),
        ("bias_flag_inverted", params_flag_inverted),
        ("three_matrices", params_three),
        ("bias_d_squared", params_bias_matrix),
    ],
    "repeat_kv": [
        ("tiled_groups", repeat_cat_tiled),
        ("tiled_groups", repeat_expand_wrong_order),
        ("batch_axis", repeat_batch_axis),
        ("not_flattened", repeat_not_flattened),
        ("flattened", repeat_no_dim),
        ("sequence_axis", repeat_sequence_cat),
    ],
    "grouped_query_attention": [
        ("swapped_k_v", gqa_swapped_k_v),
        ("softmax_over_queries", gqa_softmax_over_queries),
        ("merge_without_transpose", gqa_merge_plain),
        ("tiled_groups", gqa_tiled_expand),
        ("causal_ignored", gqa_sdpa_no_causal),
        ("no_scale", gqa_sdpa_scale_one),
        ("returns_weights_too", gqa_returns_tuple),
    ],
    "kv_cache_bytes": [
        ("per_token", cache_per_token),
        ("wrong_unit", cache_gib),
        ("wrong_unit", cache_gb),
        ("divided_by_8", cache_bits_to_bytes),
        ("no_kv_heads", cache_no_kv_heads),
        ("no_factor_2", cache_k_only_elements),
        ("bits_not_bytes", cache_float_bits),
    ],
    "previous_token_score": [
        ("not_averaged", prev_diagonal_not_averaged),
        ("keepdim", prev_keepdim),
        ("two_back", prev_two_back),
        ("next_token", prev_transposed_index),
        ("wraps_query_0", prev_roll),
        ("sum_not_mean", prev_sum_loop),
        ("includes_query_0", prev_divide_n_loop),
        ("self_token", prev_diag_self_tril),
    ],
    "induction_score": [
        ("key_before_duplicate", ind_key_before),
        ("skips_first_query", ind_skips_first_query),
        ("transposed", ind_transposed),
        ("not_averaged", ind_not_averaged),
        ("keepdim", ind_keepdim),
        ("duplicate_token", ind_diagonal_duplicate),
        ("sum_not_mean", ind_sum),
        ("divides_by_n", ind_loop_divide_n),
    ],
}

for _exercise, _answers in BATCH_2.items():
    CATALOGUE[_exercise] = CATALOGUE[_exercise] + _answers
for _exercise, _answers in BATCH_3.items():
    CATALOGUE[_exercise] = CATALOGUE[_exercise] + _answers
for _exercise, _answers in BATCH_4.items():
    CATALOGUE[_exercise] = CATALOGUE[_exercise] + _answers
