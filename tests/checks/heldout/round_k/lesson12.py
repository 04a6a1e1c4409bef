"""Round k, lesson 12 (torch): softmax_backward, attention_backward, attention_backward_flops,
flash_attention_backward."""

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


def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


# ============================================================================ softmax_backward
@add("softmax_backward", "wrong", "row_sum_without_keepdim",
     "The row sum (grad_weights * weights).sum(-1) drops the reduced axis (no keepdim=True), so "
     "it broadcasts against the wrong axis: a shape error on most inputs, wrong values on square "
     "ones.")
def sb_no_keepdim(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    row = (g * p).sum(-1)
    return (p * (g - row)).to(weights.dtype)


@add("softmax_backward", "wrong", "missing_leading_weights",
     "It returns grad_weights - rowsum(grad_weights * weights) and forgets to multiply by "
     "weights, the diag(p) factor of the Jacobian.")
def sb_no_p(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (g - (g * p).sum(dim=-1, keepdim=True)).to(weights.dtype)


@add("softmax_backward", "wrong", "torch_diag_on_batch",
     "It builds the Jacobian with torch.diag(weights), which for a 2-D batch extracts a diagonal "
     "instead of building one diagonal matrix per row, so batched input raises or gives wrong "
     "values.")
def sb_torch_diag(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    jac = torch.diag(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


@add("softmax_backward", "wrong", "uses_autograd",
     "It recovers logits with log(weights) and calls .backward() on a softmax, but lesson 12 "
     "forbids torch.autograd, so the call fails under the checker.")
def sb_autograd(weights, grad_weights):
    c = _c(weights)
    z = weights.to(c).log().detach().requires_grad_(True)
    torch.softmax(z, dim=-1).backward(grad_weights.to(c))
    return z.grad.nan_to_num(0.0).to(weights.dtype)


@add("softmax_backward", "wrong", "grad_squared_in_row_term",
     "The row term multiplies grad_weights by itself, rowsum(grad_weights * grad_weights), "
     "instead of rowsum(grad_weights * weights).")
def sb_wrong_var(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    row = (g * g).sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


@add("softmax_backward", "wrong", "mean_instead_of_sum",
     "It takes the row term with .mean(-1) instead of .sum(-1), dividing p . g by n.")
def sb_mean(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).mean(dim=-1, keepdim=True))).to(weights.dtype)


@add("softmax_backward", "right", "explicit_jacobian_float64")
def sb_jacobian(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - torch.einsum("...i,...j->...ij", p, p)
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


@add("softmax_backward", "right", "numpy_float64")
def sb_numpy(weights, grad_weights):
    p = weights.detach().cpu().double().numpy()
    g = grad_weights.detach().cpu().double().numpy()
    dot = np.einsum("...i,...i->...", p, g)[..., None]
    return torch.from_numpy(p * g - p * dot).to(weights.dtype)


# ============================================================================ attention_backward
def _probs(s):
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    tot = e.sum(dim=-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


def _visible(n_q, n_k):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


@add("attention_backward", "wrong", "chain_rule_drops_scale",
     "It forgets the 1/sqrt(d) factor of the chain rule in grad_q and grad_k (the forward "
     "scale is right).")
def ab_no_scale(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), -math.inf)
    p = _probs(s)
    dv = p.transpose(-2, -1) @ g_
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return (ds @ k_).to(q.dtype), (ds.transpose(-2, -1) @ q_).to(k.dtype), dv.to(v.dtype)


@add("attention_backward", "wrong", "transpose_dims_0_1",
     "It transposes p and grad_s with transpose(0, 1), which swaps the leading axes rather than "
     "the last two, so grad_k and grad_v are right only for 2-D inputs and batched inputs raise.")
def ab_transpose01(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    scale = q.shape[-1] ** -0.5
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), -math.inf)
    p = _probs(s)
    dv = p.transpose(0, 1) @ g_
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ k_ * scale
    dk = ds.transpose(0, 1) @ q_ * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@add("attention_backward", "wrong", "causal_top_left",
     "Its causal mask is tril() with no offset (top-left), not bottom-right aligned, so causal "
     "gradients are wrong whenever N_q != N_k.")
def ab_top_left(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(),
                          -math.inf)
    p = _probs(s)
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ k_) * scale).to(q.dtype), ((ds.transpose(-2, -1) @ q_) * scale).to(k.dtype), \
        (p.transpose(-2, -1) @ g_).to(v.dtype)


@add("attention_backward", "wrong", "returns_float32",
     "It computes in float32 and returns the float32 gradients without casting back, although "
     "the contract says the result has the inputs' dtype.")
def ab_float32(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = (t.float() for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), -math.inf)
    p = _probs(s)
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ k_ * scale, ds.transpose(-2, -1) @ q_ * scale, p.transpose(-2, -1) @ g_


@add("attention_backward", "wrong", "torch_softmax_nan_rows",
     "It uses torch.softmax on the masked scores, which gives NaN for a query row with no "
     "allowed key, so those rows poison the gradients instead of contributing nothing.")
def ab_nan_rows(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), -math.inf)
    p = torch.softmax(s, dim=-1)
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return (ds @ k_ * scale).to(q.dtype), (ds.transpose(-2, -1) @ q_ * scale).to(k.dtype), \
        (p.transpose(-2, -1) @ g_).to(v.dtype)


@add("attention_backward", "wrong", "row_term_over_queries",
     "The softmax row term sums grad_p * p over dim -2 (the queries) instead of dim -1 (the "
     "keys).")
def ab_row_axis(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), -math.inf)
    p = _probs(s)
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-2, keepdim=True))
    return (ds @ k_ * scale).to(q.dtype), (ds.transpose(-2, -1) @ q_ * scale).to(k.dtype), \
        (p.transpose(-2, -1) @ g_).to(v.dtype)


@add("attention_backward", "right", "einsum_jacobian_float64")
def ab_einsum(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        keep = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = torch.where(keep, s, torch.full_like(s, -math.inf))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    dv = torch.einsum("...ij,...ie->...je", p, g_)
    dp = torch.einsum("...ie,...je->...ij", g_, v_)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
    ds = torch.einsum("...ijk,...ik->...ij", jac, dp)
    dq = torch.einsum("...ij,...jd->...id", ds, k_) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, q_) / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@add("attention_backward", "right", "numpy_scipy_float64")
def ab_numpy(q, k, v, grad_out, causal=False):
    qa, ka, va, ga = (t.detach().cpu().double().numpy() for t in (q, k, v, grad_out))
    d = qa.shape[-1]
    n_q, n_k = qa.shape[-2], ka.shape[-2]
    s = qa @ np.swapaxes(ka, -1, -2) / np.sqrt(d)
    if causal:
        s = np.where(np.tri(n_q, n_k, n_k - n_q, dtype=bool), s, -np.inf)
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    empty = np.isneginf(lse)
    p = np.where(empty, 0.0, np.exp(s - np.where(empty, 0.0, lse)))
    dv = np.swapaxes(p, -1, -2) @ ga
    dp = ga @ np.swapaxes(va, -1, -2)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True))
    dq = ds @ ka / np.sqrt(d)
    dk = np.swapaxes(ds, -1, -2) @ qa / np.sqrt(d)
    return tuple(torch.from_numpy(np.ascontiguousarray(a)).to(t.dtype)
                 for a, t in ((dq, q), (dk, k), (dv, v)))


# ============================================================================ attention_backward_flops
@add("attention_backward_flops", "wrong", "recompute_whole_forward",
     "With recompute it adds the whole forward (4 N^2 d, scores and weighted sum) instead of "
     "only the scores q k^T (2 N^2 d).")
def abf_whole_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    backward = 8 * n * n * d
    return backward + (4 * n * n * d if recompute else 0)


@add("attention_backward_flops", "wrong", "multiply_adds",
     "It counts one multiply-add as 1 instead of 2 FLOPs, halving every term.")
def abf_macs(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


@add("attention_backward_flops", "wrong", "ratio_float",
     "It scales the forward's 4 N^2 d by the ratios 2.5 and 2.0, which makes the count a float "
     "instead of a plain int.")
def abf_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return (2.5 if recompute else 2.0) * forward


@add("attention_backward_flops", "wrong", "recompute_condition_inverted",
     "It adds the recomputation when recompute is False instead of when it is True.")
def abf_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ** 2 * head_dim
    if not recompute:
        flops += 2 * seq_len ** 2 * head_dim
    return flops


@add("attention_backward_flops", "wrong", "three_products",
     "It counts three backward products (grad_v, grad_q, grad_k) and leaves out "
     "grad_p = grad_out v^T, so the base is 6 N^2 d instead of 8 N^2 d.")
def abf_three(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    names = ["grad_v", "grad_q", "grad_k"] + (["scores"] if recompute else [])
    return per_product * len(names)


@add("attention_backward_flops", "wrong", "precedence_only_recompute_scaled",
     "It writes 8 + 2 * recompute * n * n * d, so only the recompute term is multiplied by "
     "N^2 d and the 8 stays a bare constant.")
def abf_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 + 2 * int(recompute) * n * n * d


@add("attention_backward_flops", "right", "sum_of_product_shapes")
def abf_shapes(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d), (n, d, n), (n, n, d), (n, n, d)]
    if recompute:
        shapes.append((n, d, n))
    return sum(2 * m * k * j for m, k, j in shapes)


@add("attention_backward_flops", "right", "bool_arithmetic")
def abf_bool(seq_len, head_dim, recompute=True):
    return int((8 + 2 * bool(recompute)) * seq_len * seq_len * head_dim)


# ============================================================================ flash_attention_backward
@add("flash_attention_backward", "wrong", "block_local_row_term",
     "It computes the softmax row term from the current key block only, rowsum(grad_p * p) "
     "over the block, instead of delta = rowsum(grad_out * out) over the whole row (right only "
     "with a single block).")
def fab_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    c = _c(q)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(c) / math.sqrt(d)
    g = grad_out.to(c)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=c)
    dv = torch.empty(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(c), v[..., start:stop, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True))
        dq += ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@add("flash_attention_backward", "wrong", "no_guard_for_minus_inf_lse",
     "It recomputes p = exp(s - lse) without guarding rows whose lse is -inf, so a query with no "
     "allowed key gives exp(-inf - (-inf)) = NaN instead of zero gradients.")
def fab_no_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    c = _c(q)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    q_c, g_c = q.to(c), grad_out.to(c)
    delta = torch.sum(g_c * out.to(c), dim=-1, keepdim=True)
    lse_c = lse.to(c)[..., None]
    dq = torch.zeros(b, h, n_q, d, dtype=c)
    dk_blocks, dv_blocks = [], []
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(c)
        vb = v[:, :, start:start + block_size].to(c)
        s = (q_c @ kb.transpose(2, 3)) * scale
        if causal:
            keys = torch.arange(start, start + kb.shape[2])
            s = s.masked_fill(keys[None, :] > torch.arange(n_q)[:, None] + n_k - n_q, -math.inf)
        p = torch.exp(s - lse_c)
        dv_blocks.append(p.transpose(2, 3) @ g_c)
        ds = p * (g_c @ vb.transpose(2, 3) - delta)
        dq = dq + (ds @ kb) * scale
        dk_blocks.append((ds.transpose(2, 3) @ q_c) * scale)
    return dq.to(q.dtype), torch.cat(dk_blocks, 2).to(k.dtype), torch.cat(dv_blocks, 2).to(v.dtype)


@add("flash_attention_backward", "wrong", "full_probability_matrix",
     "It recomputes the whole N x N probability matrix at once from lse and then takes the "
     "key blocks out of it, so the values are right but it builds the tensor the exercise "
     "forbids.")
def fab_full(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    c = _c(q)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(c) / math.sqrt(d)
    g = grad_out.to(c)
    s = qs @ k.to(c).transpose(-2, -1)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    l = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    p_all = torch.exp(s - l)
    delta = (g * out.to(c)).sum(-1, keepdim=True)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=c)
    dv = torch.zeros(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        p = p_all[..., start:start + block_size]
        kb = k[..., start:start + block_size, :].to(c)
        vb = v[..., start:start + block_size, :].to(c)
        dv[..., start:start + block_size, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., start:start + block_size, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@add("flash_attention_backward", "wrong", "causal_top_left",
     "Its block mask compares key index with query index directly (top-left), ignoring the "
     "N_k - N_q offset, so causal gradients are wrong whenever N_q != N_k.")
def fab_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    c = _c(q)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(c) / math.sqrt(d)
    g = grad_out.to(c)
    delta = (g * out.to(c)).sum(-1, keepdim=True)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(n_q)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=c)
    dv = torch.zeros(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(c), v[..., start:stop, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > rows, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@add("flash_attention_backward", "wrong", "grad_q_overwritten",
     "It assigns grad_q = grad_s @ k_block in each key block instead of accumulating (+=), so "
     "only the last key block's contribution survives.")
def fab_overwrite(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    c = _c(q)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = d ** -0.5
    qs = q.to(c) * scale
    g = grad_out.to(c)
    delta = (g * out.to(c)).sum(-1, keepdim=True)
    lse_ = torch.where(torch.isneginf(lse), math.inf, lse.to(c)).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dk = torch.zeros(k.shape, dtype=c)
    dv = torch.zeros(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(c), v[..., start:stop, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb * scale
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@add("flash_attention_backward", "wrong", "exp2_with_natural_lse",
     "It recomputes the probabilities as 2 ** (s - lse), the exp2 trick of fused kernels, "
     "although lse here is a natural log, so p is wrong.")
def fab_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    c = _c(q)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(c) / math.sqrt(d)
    g = grad_out.to(c)
    delta = (g * out.to(c)).sum(-1, keepdim=True)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=c)
    dv = torch.zeros(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(c), v[..., start:stop, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp2(s - lse_)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@add("flash_attention_backward", "right", "query_and_key_tiles_float64")
def fab_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    q64, k64, v64 = q.double(), k.double(), v.double()
    g64 = grad_out.double()
    delta = (g64 * out.double()).sum(-1, keepdim=True)
    lse64 = lse.double().unsqueeze(-1)
    dq = torch.zeros_like(q64)
    dk = torch.zeros_like(k64)
    dv = torch.zeros_like(v64)
    for k0 in range(0, n_k, block_size):
        kj, vj = k64[..., k0:k0 + block_size, :], v64[..., k0:k0 + block_size, :]
        kpos = torch.arange(k0, k0 + kj.shape[-2])
        for q0 in range(0, n_q, block_size):
            qi = q64[..., q0:q0 + block_size, :]
            gi = g64[..., q0:q0 + block_size, :]
            qpos = torch.arange(q0, q0 + qi.shape[-2]) + (n_k - n_q)
            s = (qi * scale) @ kj.transpose(-2, -1)
            if causal:
                s = s.masked_fill(kpos[None, :] > qpos[:, None], -math.inf)
            p = torch.exp(s - lse64[..., q0:q0 + block_size, :]).nan_to_num(0.0)
            dv[..., k0:k0 + block_size, :] += p.transpose(-2, -1) @ gi
            dp = gi @ vj.transpose(-2, -1)
            ds = p * (dp - delta[..., q0:q0 + block_size, :])
            dq[..., q0:q0 + block_size, :] += ds @ kj * scale
            dk[..., k0:k0 + block_size, :] += ds.transpose(-2, -1) @ qi * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@add("flash_attention_backward", "right", "key_blocks_einsum_float64")
def fab_einsum(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() * d ** -0.5
    g64 = grad_out.double()
    delta = torch.einsum("bhqd,bhqd->bhq", g64, out.double())
    lse64 = lse.double()
    empty = torch.isneginf(lse64)
    lse_safe = torch.where(empty, torch.zeros_like(lse64), lse64)
    last_key = torch.arange(n_q) + (n_k - n_q)
    grads_q = torch.zeros(b, h, n_q, d, dtype=torch.float64)
    grads_k, grads_v = [], []
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].double()
        vb = v[:, :, start:start + block_size].double()
        s = torch.einsum("bhqd,bhkd->bhqk", q64, kb)
        if causal:
            cols = torch.arange(start, start + kb.shape[2])
            s = s.masked_fill(cols[None, :] > last_key[:, None], float("-inf"))
        p = torch.exp(s - lse_safe[..., None]).masked_fill(empty[..., None], 0.0)
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, g64))
        dp = torch.einsum("bhqd,bhkd->bhqk", g64, vb)
        ds = p * (dp - delta[..., None])
        grads_q += torch.einsum("bhqk,bhkd->bhqd", ds, kb)
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, q64))
    dq = grads_q * d ** -0.5
    return dq.to(q.dtype), torch.cat(grads_k, dim=2).to(k.dtype), \
        torch.cat(grads_v, dim=2).to(v.dtype)
