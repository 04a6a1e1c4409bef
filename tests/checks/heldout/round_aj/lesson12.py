"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (p * g).sum(dim=-1)
    return (p * (g - dot)).to(weights.dtype)


def sb_row_term_unweighted(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    row = torch.sum(g * p, dim=-1, keepdim=True)
    return (p * g - row).to(weights.dtype)


def sb_sum_axis0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_mean_not_sum(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - (g * p).mean(-1, keepdim=True))).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_einsum_float64(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    inner = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * inner).to(weights.dtype)


def sb_bmm_rows(weights, grad_weights):
    shape = weights.shape
    n = shape[-1]
    p = weights.reshape(-1, n).to(torch.float32 if weights.dtype != torch.float64 else
                                  torch.float64)
    g = grad_weights.reshape(-1, n).to(p.dtype)
    dots = torch.bmm(p.unsqueeze(1), g.unsqueeze(2)).squeeze(2)  # (rows, 1) = p . g
    return (p * g - p * dots).reshape(shape).to(weights.dtype)


# ============================================================ attention_backward: wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_top_left_causal(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(nq, nk, dtype=torch.bool)), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_ / math.sqrt(d)).to(q.dtype), (gs.transpose(-2, -1) @ q_ / math.sqrt(d)).to(
        k.dtype), gv.to(v.dtype))


def ab_dot_T(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    nq, nk, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
    scale = d ** -0.5
    S = Q @ K.transpose(-2, -1) * scale
    if causal:
        S = S.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = torch.nan_to_num(S.amax(-1, keepdim=True), neginf=0.0)
    E = torch.exp(S - m)
    Z = E.sum(-1, keepdim=True)
    P = E / torch.where(Z == 0, torch.ones_like(Z), Z)
    dV = P.T @ G
    dP = G @ V.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K * scale
    dK = dS.transpose(-2, -1) @ Q * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        mask = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_no_scale(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk = q.shape[-2], k.shape[-2]
    s = q_ @ k_.transpose(-2, -1)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return (gs @ k_).to(q.dtype), (gs.transpose(-2, -1) @ q_).to(k.dtype), gv.to(v.dtype)


def ab_grad_k_from_k(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    c = 1.0 / math.sqrt(d)
    s = (q_ @ k_.transpose(-2, -1)) * c
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ * c
    gk = gs.transpose(-2, -1) @ k_ * c
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ attention_backward: right
def ab_einsum_float64(q, k, v, grad_out, causal=False):
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    nq, nk, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        keep = torch.arange(nk)[None, :] <= torch.arange(nq)[:, None] + (nk - nq)
        s = torch.where(keep, s, torch.tensor(-math.inf, dtype=torch.float64))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    gv = torch.einsum("...qk,...qe->...ke", p, G)
    gp = torch.einsum("...qe,...ke->...qk", G, V)
    row = torch.einsum("...qk,...qk->...q", gp, p)[..., None]
    gs = p * gp - p * row
    gq = torch.einsum("...qk,...kd->...qd", gs, K) / math.sqrt(d)
    gk = torch.einsum("...qk,...qd->...kd", gs, Q) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_delta_from_output(q, k, v, grad_out, causal=False):
    """Row term from rowsum(grad_out * out), out recomputed densely (FlashAttention's trick)."""
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    nq, nk, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    s = torch.matmul(Q, K.transpose(-1, -2)) * scale
    if causal:
        hide = torch.ones(nq, nk, dtype=torch.bool).triu(nk - nq + 1)
        s = s.masked_fill(hide, -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse.masked_fill(torch.isneginf(lse), math.inf))
    out = torch.matmul(p, V)
    delta = (G * out).sum(dim=-1, keepdim=True)
    gs = p * (torch.matmul(G, V.transpose(-1, -2)) - delta)
    gq = torch.matmul(gs, K) * scale
    gk = torch.matmul(gs.transpose(-1, -2), Q) * scale
    gv = torch.matmul(p.transpose(-1, -2), G)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    backward = 4 * 2 * n * n * d
    if recompute:
        backward += 2 * (2 * n * n * d)  # q k^T and p v again
    return backward


def abf_mac_one_flop(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 8 * n2d + 2 * n2d if recompute else 0


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len * seq_len * head_dim
    if not recompute:
        flops += 2 * seq_len * seq_len * head_dim
    return flops


def abf_d_squared(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim * head_dim
    return (5 if recompute else 4) * per_product


# ============================================================ attention_backward_flops: right
def abf_product_shapes(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out: (N x N) @ (N x d)
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * c for m, kk, c in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len ** 2 * head_dim


# ============================================================ flash_attention_backward: wrong
def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))
        gq += gs @ kb
        gk[..., s0:s1, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., s0:s1, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_grad_k_unscaled_q(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(ct)
    scale = 1.0 / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    gq = torch.zeros(B, H, nq, d, dtype=ct)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        sc = (qf @ kb.transpose(-2, -1)) * scale
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., s0:s1, :] = gs.transpose(-2, -1) @ qf
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_top_left_causal(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(nq)[:, None]
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > rows, -math.inf)
        p = torch.exp(sc - L)
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., s0:s1, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_floor_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    gq = torch.zeros_like(qs)
    gk = torch.zeros(k.shape, dtype=ct)
    gv = torch.zeros(v.shape, dtype=ct)
    for j in range(max(nk // block_size, 1)):
        s0, s1 = j * block_size, min((j + 1) * block_size, nk)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., s0:s1, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp2(sc - L)  # as in the FlashAttention kernels
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., s0:s1, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_two_level_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries and keys, float64, an explicit per-tile visibility mask."""
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    c = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    G, O = grad_out.double(), out.double()
    L = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).double()
    D = (G * O).sum(-1)  # (B, H, N_q)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for j0 in range(0, nk, block_size):
        j1 = min(j0 + block_size, nk)
        for i0 in range(0, nq, block_size):
            i1 = min(i0 + block_size, nq)
            s = torch.einsum("bhid,bhjd->bhij", Q[:, :, i0:i1], K[:, :, j0:j1]) * c
            if causal:
                qi = torch.arange(i0, i1)[:, None] + (nk - nq)
                kj = torch.arange(j0, j1)[None, :]
                s = torch.where(kj <= qi, s, torch.tensor(-math.inf, dtype=s.dtype))
            p = torch.exp(s - L[:, :, i0:i1, None])
            dV[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", p, G[:, :, i0:i1])
            dp = torch.einsum("bhid,bhjd->bhij", G[:, :, i0:i1], V[:, :, j0:j1])
            ds = p * (dp - D[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += torch.einsum("bhij,bhjd->bhid", ds, K[:, :, j0:j1]) * c
            dK[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", ds, Q[:, :, i0:i1]) * c
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_key_blocks_cat(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Key blocks in float64; grad_k and grad_v pieces collected in lists and concatenated."""
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    scale = d ** -0.5
    q64 = q.to(torch.float64)
    g64 = grad_out.to(torch.float64)
    delta = torch.sum(g64 * out.to(torch.float64), dim=-1, keepdim=True)
    lse64 = lse.to(torch.float64).unsqueeze(-1)
    dead = torch.isneginf(lse64)
    grad_q = torch.zeros_like(q64)
    pieces_k, pieces_v = [], []
    starts = list(range(0, nk, block_size))
    for start in starts:
        kb = k[:, :, start:start + block_size].to(torch.float64)
        vb = v[:, :, start:start + block_size].to(torch.float64)
        s = torch.matmul(q64, kb.transpose(2, 3)) * scale
        if causal:
            visible = torch.ones(nq, kb.shape[2], dtype=torch.bool).tril(nk - nq - start)
            s = s.masked_fill(~visible, -math.inf)
        p = torch.where(dead, torch.zeros_like(s), torch.exp(s - lse64))
        pieces_v.append(torch.matmul(p.transpose(2, 3), g64))
        ds = p * (torch.matmul(g64, vb.transpose(2, 3)) - delta)
        grad_q = grad_q + torch.matmul(ds, kb)
        pieces_k.append(torch.matmul(ds.transpose(2, 3), q64) * scale)
    grad_k = torch.cat(pieces_k, dim=2)
    grad_v = torch.cat(pieces_v, dim=2)
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so the (..., ) row sums broadcast along the "
          "last axis instead of down their rows: a shape error for non-square rows, and rows "
          "mixed up for square ones", sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_not_weighted",
          "takes the row term as grad_weights.sum(-1) instead of (grad_weights * weights)"
          ".sum(-1): the p p^T part of the Jacobian loses its p", sb_row_term_unweighted),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "writes p * g - row instead of p * (g - row), so the row term is not multiplied "
          "by p", sb_precedence),
    Entry("softmax_backward", "wrong", "row_sum_over_axis0",
          "sums the row term over dim=0 (across rows) instead of over the last axis",
          sb_sum_axis0),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes in float32 and returns it without casting back to weights' dtype, so "
          "float16 / bfloat16 inputs get float32 out", sb_returns_float32),
    Entry("softmax_backward", "wrong", "mean_instead_of_sum",
          "uses .mean(-1) for the row term instead of .sum(-1), dividing it by n",
          sb_mean_not_sum),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "bmm_row_dots", None, sb_bmm_rows),

    Entry("attention_backward", "wrong", "grad_k_missing_scale",
          "applies 1/sqrt(d) to grad_q but not to grad_k = grad_s^T q", ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() (diagonal 0), a top-left alignment, instead of "
          "tril(N_k - N_q) aligned bottom-right", ab_top_left_causal),
    Entry("attention_backward", "wrong", "dot_T_on_batched_tensor",
          "uses P.T for p^T: on a batched tensor .T reverses every axis, not just the last "
          "two, so grad_v is wrong (a shape error) whenever there are leading axes",
          ab_dot_T),
    Entry("attention_backward", "wrong", "torch_softmax_nan_rows",
          "uses torch.softmax on the masked scores, which returns NaN for a query row with no "
          "visible key instead of zeros, and the NaN spreads into the gradients",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "no_sqrt_d_scale",
          "leaves the 1/sqrt(d) scale out, both in the recomputed scores and in grad_q / "
          "grad_k", ab_no_scale),
    Entry("attention_backward", "wrong", "grad_k_from_k",
          "computes grad_k as grad_s^T @ k instead of grad_s^T @ q: the wrong tensor reused "
          "(a shape error when N_q != N_k, wrong values when they are equal)",
          ab_grad_k_from_k),
    Entry("attention_backward", "right", "einsum_float64", None, ab_einsum_float64),
    Entry("attention_backward", "right", "delta_from_recomputed_out", None,
          ab_delta_from_output),

    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "counts the recomputation as the whole forward (q k^T and p v, 4 N^2 d) instead of "
          "the scores alone (2 N^2 d)", abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "multiply_add_as_one_flop",
          "counts a multiply-add as 1 FLOP, giving N^2 d per product instead of 2 N^2 d",
          abf_mac_one_flop),
    Entry("attention_backward_flops", "wrong", "float_from_ratio",
          "computes it as 2.5x (or 2x) the forward, which returns a float instead of a plain "
          "int", abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "writes 8 * n2d + 2 * n2d if recompute else 0: the conditional takes the whole sum, "
          "so recompute=False returns 0 instead of 8 N^2 d", abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "adds the 2 N^2 d of the recomputation when recompute is False instead of when it is "
          "True", abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "n_d_squared",
          "counts each product as 2 N d^2 instead of 2 N^2 d: seq_len and head_dim swapped in "
          "one factor", abf_d_squared),
    Entry("attention_backward_flops", "right", "sum_of_product_shapes", None,
          abf_product_shapes),
    Entry("attention_backward_flops", "right", "closed_form_int", None, abf_closed_form),

    Entry("flash_attention_backward", "wrong", "row_term_from_block",
          "takes the row term as rowsum(grad_p * p) over the current key block instead of "
          "delta = rowsum(grad_out * out) over all keys, so it is wrong whenever there is "
          "more than one block", fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no_guard_for_empty_rows",
          "computes exp(s - lse) with lse = -inf for a row with no visible key: "
          "exp(-inf - (-inf)) is NaN instead of 0", fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "grad_k_from_unscaled_q",
          "scales the scores but forms grad_k = grad_s^T q with the unscaled q, so grad_k "
          "misses its 1/sqrt(d)", fb_grad_k_unscaled_q),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "masks keys with key > i (top-left) instead of key > i + N_k - N_q, the bottom-right "
          "alignment the forward used", fb_top_left_causal),
    Entry("flash_attention_backward", "wrong", "floor_block_count",
          "loops over N_k // block_size blocks, so the keys of a shorter last block get no "
          "gradient and never reach grad_q", fb_floor_blocks),
    Entry("flash_attention_backward", "wrong", "exp2_with_natural_lse",
          "recomputes the probabilities with exp2(s - lse) although lse is a natural "
          "log-sum-exp (base 2 needs the scores and lse scaled by log2 e)", fb_exp2),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fb_two_level_tiles),
    Entry("flash_attention_backward", "right", "key_blocks_concatenated", None,
          fb_key_blocks_cat),
]
