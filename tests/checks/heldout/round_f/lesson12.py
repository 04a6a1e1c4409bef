"""Lesson 12 (torch, no autograd): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import numpy as np
import torch

from entry import Entry


def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


# ---------------------------------------------------------------- softmax_backward, wrong
def sb_no_p_factor(weights, grad_weights):
    p, g = weights.to(_c(weights)), grad_weights.to(_c(weights))
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_row_without_p(weights, grad_weights):
    p, g = weights.to(_c(weights)), grad_weights.to(_c(weights))
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_keepdim_forgotten(weights, grad_weights):
    p, g = weights.to(_c(weights)), grad_weights.to(_c(weights))
    return (p * (g - (g * p).sum(-1))).to(weights.dtype)


def sb_sum_axis_0(weights, grad_weights):
    p, g = weights.to(_c(weights)), grad_weights.to(_c(weights))
    return (p * (g - (g * p).sum(0, keepdim=True))).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    p, g = weights.to(_c(weights)), grad_weights.to(_c(weights))
    return (p * ((g * p).sum(-1, keepdim=True) - g)).to(weights.dtype)


def sb_mean_row(weights, grad_weights):
    p, g = weights.to(_c(weights)), grad_weights.to(_c(weights))
    return (p * (g - (g * p).mean(-1, keepdim=True))).to(weights.dtype)


# ---------------------------------------------------------------- softmax_backward, right
def sb_numpy64(weights, grad_weights):
    p = weights.detach().cpu().to(torch.float64).numpy()
    g = grad_weights.detach().cpu().to(torch.float64).numpy()
    res = p * g - p * np.einsum("...i,...i->...", p, g)[..., None]
    return torch.from_numpy(res).to(dtype=weights.dtype, device=weights.device)


def sb_matvec(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    dot = (p.unsqueeze(-2) @ g.unsqueeze(-1)).squeeze(-1)  # (..., 1): p . g per row
    return torch.addcmul(-p * dot, p, g).to(weights.dtype)


# ---------------------------------------------------------------- attention_backward
def _probs(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


def _ab(q, k, v, grad_out, causal, *, k_scale=True, top_left=False, row_term=True,
        cast_back=True, nan_rows=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _c(q)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(0 if top_left else n_k - n_q)
        s = s.masked_fill(~allowed, -math.inf)
    p = torch.softmax(s, dim=-1) if nan_rows else _probs(s)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True)) if row_term else p * grad_p
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * (scale if k_scale else 1.0)
    if cast_back:
        return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)
    return grad_q, grad_k, grad_v


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, k_scale=False)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, top_left=True)


def ab_no_row_term(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, row_term=False)


def ab_not_cast_back(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, cast_back=False)


def ab_empty_rows_nan(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, nan_rows=True)


def ab_autograd(q, k, v, grad_out, causal=False):
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q_, k_, v_ = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-1))
    out = p @ v_
    return torch.autograd.grad(out, (q_, k_, v_), grad_out)


def ab_delta_trick64(q, k, v, grad_out, causal=False):
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q64, k64, v64, g64 = (t.double() for t in (q, k, v, grad_out))
    s = torch.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(d)
    if causal:
        keep = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = torch.where(keep, s, torch.full_like(s, -math.inf))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = p @ v64
    delta = (g64 * out).sum(-1, keepdim=True)  # equals rowsum(grad_p * p)
    ds = p * (g64 @ v64.transpose(-2, -1) - delta)
    gq = torch.einsum("...ij,...jd->...id", ds, k64) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", ds, q64) / math.sqrt(d)
    gv = torch.einsum("...ij,...ie->...je", p, g64)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_row_jacobians(q, k, v, grad_out, causal=False):
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q64, k64, v64, g64 = (t.double() for t in (q, k, v, grad_out))
    s = q64 @ k64.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1), -math.inf)
    p = _probs(s)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., N_q, N_k, N_k)
    grad_p = g64 @ v64.transpose(-2, -1)
    grad_s = (jac @ grad_p.unsqueeze(-1)).squeeze(-1)
    gq = grad_s @ (k64 / math.sqrt(d))
    gk = grad_s.transpose(-2, -1) @ (q64 / math.sqrt(d))
    gv = p.transpose(-2, -1) @ g64
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ---------------------------------------------------------------- attention_backward_flops
def abf_recompute_ignored(seq_len, head_dim, recompute=True):
    return 8 * seq_len * seq_len * head_dim


def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + (0 if recompute else 2 * seq_len ** 2 * head_dim)


def abf_macs(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_three_products(seq_len, head_dim, recompute=True):
    products = 3 + (1 if recompute else 0)  # grad_v, grad_q, grad_k (+ scores)
    return products * 2 * seq_len * seq_len * head_dim


def abf_forward_added(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    forward = 4 * n * n * d
    backward = 8 * n * n * d + (2 * n * n * d if recompute else 0)
    return forward + backward


def abf_ratio_of_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def abf_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(d, n, n), (n, n, d), (n, d, n), (n, n, d)]  # grad_v, grad_p, grad_q, grad_k
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * a * b * c for a, b, c in shapes)


def abf_factored(seq_len, head_dim, recompute=True):
    return 2 * seq_len * seq_len * head_dim * (5 if recompute is True else 4)


# ---------------------------------------------------------------- flash_attention_backward
def _fb(q, k, v, out, lse, grad_out, block_size, causal, *, use_delta=True, delta_from_v=False,
        overwrite_q=False, keepdim=True, scaled=True, drop_tail=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _c(q)
    qs = q.to(c) * (1.0 / math.sqrt(d) if scaled else 1.0)
    qk = q.to(c) * (1.0 / math.sqrt(d))
    g = grad_out.to(c)
    delta = (g * (v if delta_from_v else out).to(c)).sum(-1, keepdim=keepdim)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)
    lse_ = lse_[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qk)
    gk = torch.zeros(k.shape, dtype=c)
    gv = torch.zeros(v.shape, dtype=c)
    last = n_k - block_size + 1 if drop_tail else n_k
    for start in range(0, last, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(c), v[..., start:stop, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        gv[..., start:stop, :] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        gs = p * (gp - delta) if use_delta else p * gp
        if overwrite_q:
            gq = gs @ kb
        else:
            gq = gq + gs @ kb
        gk[..., start:stop, :] = gs.transpose(-2, -1) @ qk
    gq = gq / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_no_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, use_delta=False)


def fb_delta_from_v(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, delta_from_v=True)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, overwrite_q=True)


def fb_delta_keepdim(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, keepdim=False)


def fb_recompute_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, scaled=False)


def fb_ragged_block_dropped(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, drop_tail=True)


def fb_tiled_2d_64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.float64
    scale = 1.0 / math.sqrt(d)
    q64, k64, v64, g64 = (t.to(f) for t in (q, k, v, grad_out))
    delta = (g64 * out.to(f)).sum(-1)  # (B, H, N_q)
    lse64 = lse.to(f)
    gq = torch.zeros((b, h, n_q, d), dtype=f)
    gk = torch.zeros((b, h, n_k, d), dtype=f)
    gv = torch.zeros((b, h, n_k, d), dtype=f)
    for qs in range(0, n_q, block_size):
        qe = min(n_q, qs + block_size)
        row_lse = lse64[..., qs:qe, None]
        empty = torch.isneginf(row_lse)
        for ks in range(0, n_k, block_size):
            ke = min(n_k, ks + block_size)
            s = (q64[..., qs:qe, :] @ k64[..., ks:ke, :].transpose(-2, -1)) * scale
            if causal:
                ok = (torch.arange(ks, ke)[None, :]
                      <= torch.arange(qs, qe)[:, None] + (n_k - n_q))
                s = s.masked_fill(~ok, -math.inf)
            p = torch.where(empty, torch.zeros_like(s),
                            torch.exp(s - torch.where(empty, torch.zeros_like(row_lse), row_lse)))
            gv[..., ks:ke, :] += p.transpose(-2, -1) @ g64[..., qs:qe, :]
            ds = p * (g64[..., qs:qe, :] @ v64[..., ks:ke, :].transpose(-2, -1)
                      - delta[..., qs:qe, None])
            gq[..., qs:qe, :] += ds @ k64[..., ks:ke, :] * scale
            gk[..., ks:ke, :] += ds.transpose(-2, -1) @ q64[..., qs:qe, :] * scale
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_key_blocks_list(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    g = grad_out.to(c)
    q_c = q.to(c)
    delta = torch.einsum("bhnd,bhnd->bhn", g, out.to(c)).unsqueeze(-1)
    neg = torch.isneginf(lse).unsqueeze(-1)
    lse_c = torch.where(neg, torch.zeros_like(lse, dtype=c).unsqueeze(-1), lse.to(c).unsqueeze(-1))
    gq = torch.zeros_like(q_c)
    gk_parts, gv_parts = [], []
    for start in range(0, n_k, block_size):
        kb = k[..., start:start + block_size, :].to(c)
        vb = v[..., start:start + block_size, :].to(c)
        s = (q_c @ kb.transpose(-2, -1)) / math.sqrt(d)
        if causal:
            kpos = torch.arange(start, start + kb.shape[-2])
            hidden = kpos[None, :] - torch.arange(n_q)[:, None] > n_k - n_q
            s = s.masked_fill(hidden, -math.inf)
        p = torch.exp(s - lse_c).masked_fill(neg, 0.0)
        gv_parts.append(p.transpose(-2, -1) @ g)
        ds = p * (g @ vb.transpose(-2, -1) - delta) / math.sqrt(d)
        gq = gq + ds @ kb
        gk_parts.append(ds.transpose(-2, -1) @ q_c)
    return (gq.to(q.dtype), torch.cat(gk_parts, dim=-2).to(k.dtype),
            torch.cat(gv_parts, dim=-2).to(v.dtype))


E = Entry
ENTRIES = [
    E("softmax_backward", "wrong", "weights_factor_forgotten",
      "Returns grad_weights - rowsum(grad_weights * weights) and forgets to multiply by the "
      "weights.", sb_no_p_factor),
    E("softmax_backward", "wrong", "row_term_without_weights",
      "Subtracts rowsum(grad_weights) instead of rowsum(grad_weights * weights).",
      sb_row_without_p),
    E("softmax_backward", "wrong", "keepdim_forgotten",
      "Sums the row term without keepdim=True, so it broadcasts against the wrong axis.",
      sb_keepdim_forgotten),
    E("softmax_backward", "wrong", "row_term_summed_over_axis_0",
      "Sums grad_weights * weights over axis 0 instead of the last axis.", sb_sum_axis_0),
    E("softmax_backward", "wrong", "sign_flipped",
      "Computes weights * (rowsum - grad_weights), the negative of the gradient.",
      sb_sign_flipped),
    E("softmax_backward", "wrong", "mean_instead_of_sum",
      "Uses the mean of grad_weights * weights over the row instead of the sum.",
      sb_mean_row),
    E("softmax_backward", "right", "numpy_float64_einsum", None, sb_numpy64),
    E("softmax_backward", "right", "batched_matvec_addcmul", None, sb_matvec),

    E("attention_backward", "wrong", "grad_k_missing_scale",
      "Forgets the 1/sqrt(d) factor in grad_k (it is applied to grad_q only).",
      ab_grad_k_unscaled),
    E("attention_backward", "wrong", "causal_top_left",
      "Builds the causal mask with tril(0) (top-left) instead of the bottom-right alignment "
      "of lesson 04.", ab_causal_top_left),
    E("attention_backward", "wrong", "softmax_row_term_dropped",
      "Uses grad_s = p * grad_p, dropping the - rowsum(grad_p * p) term of the softmax "
      "gradient.", ab_no_row_term),
    E("attention_backward", "wrong", "not_cast_back_to_input_dtype",
      "Computes in float32 and returns float32 gradients for half-precision inputs instead "
      "of the inputs' dtype.", ab_not_cast_back),
    E("attention_backward", "wrong", "fully_masked_rows_nan",
      "Uses a plain torch.softmax after masking, so causal rows with no visible key give "
      "NaN gradients.", ab_empty_rows_nan),
    E("attention_backward", "wrong", "uses_autograd",
      "Gets the gradients with torch.autograd.grad, which the exercise forbids.",
      ab_autograd),
    E("attention_backward", "right", "delta_trick_einsum_float64", None, ab_delta_trick64),
    E("attention_backward", "right", "per_row_jacobians", None, ab_row_jacobians),

    E("attention_backward_flops", "wrong", "recompute_ignored",
      "Always returns 8 N^2 d, ignoring the extra 2 N^2 d of recompute=True.",
      abf_recompute_ignored),
    E("attention_backward_flops", "wrong", "recompute_condition_inverted",
      "Adds the 2 N^2 d recomputation when recompute is False instead of True.",
      abf_recompute_inverted),
    E("attention_backward_flops", "wrong", "multiply_adds_not_flops",
      "Counts one FLOP per multiply-add instead of 2, halving the count.", abf_macs),
    E("attention_backward_flops", "wrong", "grad_p_product_forgotten",
      "Counts three backward products (grad_v, grad_q, grad_k) and forgets grad_p = "
      "grad_out v^T.", abf_three_products),
    E("attention_backward_flops", "wrong", "forward_included",
      "Adds the forward pass's 4 N^2 d to the backward count.", abf_forward_added),
    E("attention_backward_flops", "wrong", "float_ratio_of_forward",
      "Computes 2.5 x the forward with a float factor, returning a float instead of an int.",
      abf_ratio_of_forward),
    E("attention_backward_flops", "right", "product_shape_list", None, abf_product_list),
    E("attention_backward_flops", "right", "factored", None, abf_factored),

    E("flash_attention_backward", "wrong", "delta_term_dropped",
      "Uses grad_s = p * grad_p and forgets to subtract delta = rowsum(grad_out * out).",
      fb_no_delta),
    E("flash_attention_backward", "wrong", "delta_from_v_not_out",
      "Computes delta = rowsum(grad_out * v) instead of rowsum(grad_out * out) (same shapes, "
      "wrong tensor).", fb_delta_from_v),
    E("flash_attention_backward", "wrong", "grad_q_overwritten",
      "Assigns grad_q = grad_s @ k_block in each key block instead of accumulating with +=.",
      fb_grad_q_overwritten),
    E("flash_attention_backward", "wrong", "delta_keepdim_forgotten",
      "Computes delta = rowsum(grad_out * out) without keepdim=True, so subtracting it from "
      "the (N_q, block) tile lines it up with the key axis instead of the query rows.",
      fb_delta_keepdim),
    E("flash_attention_backward", "wrong", "recomputed_scores_unscaled",
      "Recomputes the block's scores as q k^T without the 1/sqrt(d) factor before "
      "exp(s - lse).", fb_recompute_unscaled),
    E("flash_attention_backward", "wrong", "ragged_last_block_dropped",
      "Loops with range(0, N - block_size + 1, block_size), so a shorter last key block is "
      "never visited and its grad_k / grad_v stay zero (and grad_q misses it).",
      fb_ragged_block_dropped),
    E("flash_attention_backward", "right", "two_d_tiles_float64", None, fb_tiled_2d_64),
    E("flash_attention_backward", "right", "key_blocks_concatenated", None, fb_key_blocks_list),
]
