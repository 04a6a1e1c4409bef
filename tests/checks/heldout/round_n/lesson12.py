"""Lesson 12 (backward): softmax_backward, attention_backward, attention_backward_flops,
flash_attention_backward. No torch.autograd anywhere."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ softmax_backward
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_dim0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (p * g).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_row_term_unweighted(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = g.sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_float32_result(weights, grad_weights):
    p, g = weights.float(), grad_weights.float()
    dot = torch.einsum("...n,...n->...", p, g).unsqueeze(-1)
    return p * (g - dot)


def sb_p_and_g_swapped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1, keepdim=True)
    return (g * (p - row)).to(weights.dtype)


def sb_resoftmax(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = torch.softmax(weights.to(ct), dim=-1)  # probabilities of the "scores"
    g = grad_weights.to(ct)
    return (p * (g - (g * p).sum(-1, keepdim=True))).to(weights.dtype)


def sb_right_full_jacobian(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_right_numpy(weights, grad_weights):
    p = weights.detach().cpu().to(torch.float64).numpy()
    g = grad_weights.detach().cpu().to(torch.float64).numpy()
    pg = np.einsum("...i,...i->...", p, g)[..., None]
    res = p * g - p * pg
    return torch.from_numpy(res).to(device=weights.device, dtype=weights.dtype)


# ============================================================================ attention_backward
def _bottom_right(n_q, n_k):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def _safe_softmax(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    t = e.sum(-1, keepdim=True)
    return e / torch.where(t == 0, torch.ones_like(t), t)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, g = (t.to(ct) for t in (q, k, v, grad_out))
    d = q.shape[-1]
    s = qq @ kk.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_bottom_right(q.shape[-2], k.shape[-2]), -math.inf)
    p = _safe_softmax(s)
    dv = p.transpose(-2, -1) @ g
    dp = g @ vv.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ kk / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ qq
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_grad_v_untransposed(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, g = (t.to(ct) for t in (q, k, v, grad_out))
    scale = q.shape[-1] ** -0.5
    s = (qq @ kk.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(~_bottom_right(q.shape[-2], k.shape[-2]), -math.inf)
    p = _safe_softmax(s)
    dv = p @ g
    dp = g @ vv.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ kk * scale).to(q.dtype), (ds.transpose(-2, -1) @ qq * scale).to(k.dtype),
            dv.to(v.dtype))


def ab_top_left_causal(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, g = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    s = torch.einsum("...qd,...kd->...qk", qq, kk) * scale
    if causal:
        s = s.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool).triu(1), -math.inf)
    p = _safe_softmax(s)
    dv = torch.einsum("...qk,...qe->...ke", p, g)
    dp = torch.einsum("...qe,...ke->...qk", g, vv)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = torch.einsum("...qk,...kd->...qd", ds, kk) * scale
    dk = torch.einsum("...qk,...qd->...kd", ds, qq) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_empty_rows_nan(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, g = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = qq @ kk.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_bottom_right(q.shape[-2], k.shape[-2]), float("-inf"))
    p = torch.softmax(s, dim=-1)
    dv = p.transpose(-2, -1) @ g
    dp = g @ vv.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ kk * scale).to(q.dtype), (ds.transpose(-2, -1) @ qq * scale).to(k.dtype),
            dv.to(v.dtype))


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, g = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = qq @ kk.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_bottom_right(q.shape[-2], k.shape[-2]), -math.inf)
    p = _safe_softmax(s)
    dv = p.transpose(-2, -1) @ g
    dp = g @ vv.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(dim=-2, keepdim=True))
    return ((ds @ kk * scale).to(q.dtype), (ds.transpose(-2, -1) @ qq * scale).to(k.dtype),
            dv.to(v.dtype))


def ab_grad_q_from_v(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, g = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = qq @ kk.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_bottom_right(q.shape[-2], k.shape[-2]), -math.inf)
    p = _safe_softmax(s)
    dv = p.transpose(-2, -1) @ g
    dp = g @ vv.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ vv * scale
    dk = ds.transpose(-2, -1) @ qq * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_right_row_jacobian(q, k, v, grad_out, causal=False):
    """float64, the softmax Jacobian of every query row built explicitly."""
    q64, k64, v64, g64 = (t.to(torch.float64) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    s = torch.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(d)
    if causal:
        allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
    else:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool)
    s = torch.where(allowed, s, torch.full_like(s, -math.inf))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.where(allowed, torch.exp(s - m), torch.zeros_like(s))
    z = e.sum(-1, keepdim=True)
    p = torch.where(z > 0, e / torch.where(z > 0, z, torch.ones_like(z)), torch.zeros_like(e))
    grad_v = torch.einsum("...ij,...ie->...je", p, g64)
    grad_p = torch.einsum("...ie,...je->...ij", g64, v64)
    jac = torch.diag_embed(p) - torch.einsum("...ij,...ik->...ijk", p, p)  # (..., N_q, N_k, N_k)
    grad_s = torch.einsum("...ijk,...ik->...ij", jac, grad_p)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, k64) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, q64) / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_right_delta_identity(q, k, v, grad_out, causal=False):
    """The row term from rowsum(grad_out * out), as FlashAttention-2 does (float64)."""
    dt = torch.float64
    qd, kd, vd, gd = q.to(dt), k.to(dt), v.to(dt), grad_out.to(dt)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    qs = qd / math.sqrt(d)
    s = qs @ kd.transpose(-1, -2)
    if causal:
        hide = torch.triu(torch.ones(n_q, n_k, dtype=torch.bool), diagonal=n_k - n_q + 1)
        s = s.masked_fill(hide, -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    lse = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse)
    p = torch.exp(s - lse)  # rows with no key: exp(-inf - inf) = 0
    out = p @ vd
    delta = (gd * out).sum(-1, keepdim=True)
    ds = p * (gd @ vd.transpose(-1, -2) - delta)
    return ((ds @ kd / math.sqrt(d)).to(q.dtype), (ds.transpose(-1, -2) @ qs).to(k.dtype),
            (p.transpose(-1, -2) @ gd).to(v.dtype))


# ============================================================================ attention_backward_flops
def abf_mac_as_one(seq_len, head_dim, recompute=True):
    per_product = seq_len * seq_len * head_dim
    total = 4 * per_product
    if recompute:
        total += per_product
    return total


def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    n2d = seq_len ** 2 * head_dim
    flops = 8 * n2d
    if not recompute:
        flops += 2 * n2d
    return flops


def abf_three_products(seq_len, head_dim, recompute=True):
    # grad_v, grad_q, grad_k: one product each
    flops = 3 * 2 * seq_len * seq_len * head_dim
    if recompute:
        flops += 2 * seq_len * seq_len * head_dim
    return flops


def abf_d_squared(seq_len, head_dim, recompute=True):
    unit = 2 * seq_len * head_dim ** 2
    return unit * (5 if recompute else 4)


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return 2.5 * forward if recompute else 2 * forward


def abf_ternary_precedence(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + 2 * seq_len ** 2 * head_dim if recompute else 0


def abf_right_product_list(seq_len, head_dim, recompute=True):
    # (m, k, n) of each matrix product of the backward, one head, one sequence
    products = [
        (seq_len, seq_len, head_dim),  # grad_v = p^T grad_out
        (seq_len, head_dim, seq_len),  # grad_p = grad_out v^T
        (seq_len, seq_len, head_dim),  # grad_q = grad_s k
        (seq_len, seq_len, head_dim),  # grad_k = grad_s^T q
    ]
    if recompute:
        products.append((seq_len, head_dim, seq_len))  # s = q k^T again
    return sum(2 * m * kk * n for m, kk, n in products)


def abf_right_multiplier(seq_len, head_dim, recompute=True):
    return (10 if recompute else 8) * seq_len * seq_len * head_dim


# ============================================================================ flash_attention_backward
def fb_top_left_causal(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(ct) * sc
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(n_q)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(ct), v[:, :, start:stop].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, start:stop] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, start:stop] = ds.transpose(-2, -1) @ qs
    return (dq * sc).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_lse_unguarded(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(ct) * sc
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(ct), v[:, :, start:stop].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, start:stop] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, start:stop] = ds.transpose(-2, -1) @ qs
    return (dq * sc).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_delta_per_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(ct) * sc
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(ct), v[:, :, start:stop].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, start:stop] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))  # row term of this block only
        dq += ds @ kb
        dk[:, :, start:stop] = ds.transpose(-2, -1) @ qs
    return (dq * sc).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(ct) * sc
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(ct), v[:, :, start:stop].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, start:stop] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[:, :, start:stop] = ds.transpose(-2, -1) @ qs
    return (dq * sc).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(ct) * sc
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(ct), v[:, :, start:stop].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp2(s - L)  # as in the Triton kernel
        dv[:, :, start:stop] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, start:stop] = ds.transpose(-2, -1) @ qs
    return (dq * sc).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_final_scale_missing(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(ct), v[:, :, start:stop].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, start:stop] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, start:stop] = ds.transpose(-2, -1) @ qs
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_right_2d_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries and keys, einsum, float64."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.float64
    scale = d ** -0.5
    q64, k64, v64 = q.to(f), k.to(f), v.to(f)
    g64, o64 = grad_out.to(f), out.to(f)
    lse64 = lse.to(f)
    dq = torch.zeros(q.shape, dtype=f)
    dk = torch.zeros(k.shape, dtype=f)
    dv = torch.zeros(v.shape, dtype=f)
    for qs in range(0, n_q, block_size):
        qe = min(qs + block_size, n_q)
        qb, gb = q64[:, :, qs:qe], g64[:, :, qs:qe]
        lb = lse64[:, :, qs:qe]
        empty = torch.isneginf(lb)[..., None]
        lb = torch.where(torch.isneginf(lb), torch.zeros_like(lb), lb)[..., None]
        delta = (gb * o64[:, :, qs:qe]).sum(-1, keepdim=True)
        rows = torch.arange(qs, qe)[:, None] + (n_k - n_q)
        for ks in range(0, n_k, block_size):
            ke = min(ks + block_size, n_k)
            kb, vb = k64[:, :, ks:ke], v64[:, :, ks:ke]
            s = torch.einsum("bhid,bhjd->bhij", qb, kb) * scale
            vis = ~empty
            if causal:
                vis = vis & (torch.arange(ks, ke)[None, :] <= rows)
            p = torch.where(vis, torch.exp(s - lb), torch.zeros_like(s))
            dv[:, :, ks:ke] += torch.einsum("bhij,bhid->bhjd", p, gb)
            dp = torch.einsum("bhid,bhjd->bhij", gb, vb)
            ds = p * (dp - delta)
            dq[:, :, qs:qe] += torch.einsum("bhij,bhjd->bhid", ds, kb) * scale
            dk[:, :, ks:ke] += torch.einsum("bhij,bhid->bhjd", ds, qb) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_right_head_loop_mm(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """One (batch, head) at a time with torch.mm over key blocks."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.float64
    dq = torch.empty(q.shape, dtype=q.dtype)
    dk = torch.empty(k.shape, dtype=k.dtype)
    dv = torch.empty(v.shape, dtype=v.dtype)
    last_key = torch.arange(n_q) + (n_k - n_q)  # (N_q,)
    for b in range(B):
        for h in range(H):
            Q = q[b, h].to(f) / math.sqrt(d)
            G = grad_out[b, h].to(f)
            D = (G * out[b, h].to(f)).sum(dim=1, keepdim=True)  # (N_q, 1)
            row_lse = lse[b, h].to(f)
            no_key = torch.isneginf(row_lse)
            row_lse = torch.where(no_key, torch.zeros_like(row_lse), row_lse)[:, None]
            gq = torch.zeros(n_q, d, dtype=f)
            for start in range(0, n_k, block_size):
                stop = min(start + block_size, n_k)
                Kb, Vb = k[b, h, start:stop].to(f), v[b, h, start:stop].to(f)
                S = torch.mm(Q, Kb.t())
                keep = ~no_key[:, None].expand(n_q, stop - start)
                if causal:
                    keep = keep & (torch.arange(start, stop)[None, :] <= last_key[:, None])
                P = torch.where(keep, torch.exp(S - row_lse), torch.zeros_like(S))
                dv[b, h, start:stop] = torch.mm(P.t(), G).to(v.dtype)
                dS = P * (torch.mm(G, Vb.t()) - D)
                gq = gq + torch.mm(dS, Kb)
                dk[b, h, start:stop] = torch.mm(dS.t(), Q).to(k.dtype)
            dq[b, h] = (gq / math.sqrt(d)).to(q.dtype)
    return dq, dk, dv


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "Sums the row term without keepdim=True, so the (...,) row sums broadcast along the "
          "last axis instead of along their rows: a shape error, a wrongly broadcast shape or "
          "wrong values, right only for a single (n,) row.",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_dim0",
          "Sums grad_weights * weights over dim=0 instead of the last axis, mixing different "
          "rows into each row term (right only for a single (n,) row).", sb_sum_dim0),
    Entry("softmax_backward", "wrong", "row_term_unweighted",
          "Uses the plain sum of grad_weights as the row term instead of the weighted sum "
          "(grad_weights * weights).sum(-1), dropping the p in the p p^T part of the Jacobian.",
          sb_row_term_unweighted),
    Entry("softmax_backward", "wrong", "returns_float32",
          "Computes in float32 and returns the float32 result instead of casting back to "
          "weights' dtype, so float64, float16 and bfloat16 inputs come back as float32.",
          sb_float32_result),
    Entry("softmax_backward", "wrong", "weights_and_grad_swapped",
          "Writes grad_weights * (weights - row) instead of weights * (grad_weights - row), "
          "swapping the roles of the probabilities and the upstream gradient.",
          sb_p_and_g_swapped),
    Entry("softmax_backward", "wrong", "softmax_of_weights",
          "Applies torch.softmax to weights as if they were scores, though they are already "
          "the softmax's output, and uses those probabilities in the formula.", sb_resoftmax),
    Entry("softmax_backward", "right", "explicit_jacobian_float64", None,
          sb_right_full_jacobian),
    Entry("softmax_backward", "right", "numpy_einsum", None, sb_right_numpy),

    Entry("attention_backward", "wrong", "grad_k_missing_scale",
          "Computes grad_k = grad_s^T q without the 1/sqrt(d) factor that grad_q does get, so "
          "grad_k is sqrt(d) times too large.", ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "grad_v_untransposed_p",
          "Computes grad_v = p @ grad_out instead of p^T @ grad_out, which raises a shape error "
          "when N_q != N_k and gives wrong values when they are equal.",
          ab_grad_v_untransposed),
    Entry("attention_backward", "wrong", "top_left_causal",
          "Masks with triu(1), a top-left aligned causal mask (key j visible when j <= i), "
          "instead of lesson 04's bottom-right alignment j <= i + N_k - N_q, which is wrong "
          "whenever N_q != N_k.", ab_top_left_causal),
    Entry("attention_backward", "wrong", "empty_rows_nan",
          "Uses torch.softmax on the masked scores, which returns NaN for a query row with no "
          "visible key (causal with N_q > N_k), and the NaN spreads into all three gradients.",
          ab_empty_rows_nan),
    Entry("attention_backward", "wrong", "row_term_summed_over_queries",
          "Sums grad_p * p over dim=-2 (the queries) instead of over the keys in the softmax "
          "backward's row term.", ab_row_term_wrong_axis),
    Entry("attention_backward", "wrong", "grad_q_from_v",
          "Computes grad_q = grad_s @ v (copy-pasted from the values) instead of grad_s @ k, "
          "which gives grad_q the wrong shape (..., N_q, d_v) when d_v != d and wrong values "
          "when they match.", ab_grad_q_from_v),
    Entry("attention_backward", "right", "explicit_row_jacobian_einsum", None,
          ab_right_row_jacobian),
    Entry("attention_backward", "right", "delta_identity_float64", None,
          ab_right_delta_identity),

    Entry("attention_backward_flops", "wrong", "multiply_add_as_one",
          "Counts one FLOP per multiply-add instead of two, returning half the FLOPs.",
          abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "recompute_condition_inverted",
          "Adds the 2 N^2 d of the recomputation when recompute is False instead of when it "
          "is True.", abf_recompute_inverted),
    Entry("attention_backward_flops", "wrong", "three_products",
          "Counts three N x N x d products (grad_v, grad_q, grad_k) and forgets the fourth, "
          "grad_p = grad_out v^T, so the base is 6 N^2 d instead of 8 N^2 d.",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "head_dim_squared",
          "Uses N d^2 instead of N^2 d per product, squaring the head dimension instead of "
          "the sequence length.", abf_d_squared),
    Entry("attention_backward_flops", "wrong", "float_from_ratio",
          "Computes the recompute case as 2.5 times the forward's 4 N^2 d, which returns a "
          "float instead of a plain int.", abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "Writes 8 N^2 d + 2 N^2 d if recompute else 0, which Python reads as "
          "(8 N^2 d + 2 N^2 d) if recompute else 0, so recompute=False returns 0.",
          abf_ternary_precedence),
    Entry("attention_backward_flops", "right", "sum_over_product_shapes", None,
          abf_right_product_list),
    Entry("attention_backward_flops", "right", "multiplier_10_or_8", None,
          abf_right_multiplier),

    Entry("flash_attention_backward", "wrong", "top_left_causal",
          "Compares key positions with the query index i instead of i + N_k - N_q, a "
          "top-left aligned causal mask that is wrong whenever N_q != N_k.", fb_top_left_causal),
    Entry("flash_attention_backward", "wrong", "lse_neg_inf_unguarded",
          "Recomputes p = exp(s - lse) without guarding rows whose lse is -inf, so a query with "
          "no visible key gives exp(-inf - (-inf)) = NaN in all three gradients.",
          fb_lse_unguarded),
    Entry("flash_attention_backward", "wrong", "row_term_per_block",
          "Takes the softmax backward's row term as rowsum(grad_p * p) over the current key "
          "block only instead of delta = rowsum(grad_out * out) over the whole row, so it is "
          "wrong as soon as a row spans more than one block.", fb_delta_per_block),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "Assigns grad_q = grad_s @ k_block in each iteration instead of accumulating with "
          "+=, so only the last key block's contribution to grad_q survives.",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "exp2_with_natural_lse",
          "Recomputes the probabilities with torch.exp2 as the Triton kernel does, but lse "
          "and the scores are in natural-log units (the kernel folds log2(e) into its scale), "
          "so p is wrong.", fb_exp2),
    Entry("flash_attention_backward", "wrong", "grad_q_final_scale_missing",
          "Accumulates grad_q as sum of grad_s @ k_block but never multiplies it by 1/sqrt(d) "
          "at the end, so grad_q is sqrt(d) times too large.", fb_grad_q_final_scale_missing),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fb_right_2d_tiles),
    Entry("flash_attention_backward", "right", "per_head_torch_mm", None,
          fb_right_head_loop_mm),
]
