"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================================ softmax_backward
# ---------------------------------------------------------------------------- wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (p * g).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_axis0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    f = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(f), grad_weights.to(f)
    row = torch.sum(g * p, dim=-1, keepdim=True)
    return (p * (row - g)).to(weights.dtype)


def sb_unweighted_row(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_keeps_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1, keepdim=True)
    return p * (g - row)


def sb_renormalised(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    p = p / p.sum(dim=-1, keepdim=True)  # make sure the rows sum to one
    g = grad_weights.to(ct)
    return (p * (g - (g * p).sum(dim=-1, keepdim=True))).to(weights.dtype)


# ---------------------------------------------------------------------------- right
def sb_explicit_jacobian_f64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n), symmetric
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_einsum_rowdot(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = torch.einsum("...i,...i->...", p, g)
    return (p * g - p * dot[..., None]).to(weights.dtype)


# ============================================================================ attention_backward
# ---------------------------------------------------------------------------- wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = m.masked_fill(torch.isinf(m), 0.0)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / z.masked_fill(z == 0, 1.0)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    scale = d ** -0.5
    qc, kc, vc, gc = q.to(compute), k.to(compute), v.to(compute), grad_out.to(compute)
    scores = qc @ kc.transpose(-2, -1) * scale
    if causal:
        visible = torch.tril(torch.ones(n_q, n_k, dtype=torch.bool))
        scores = scores.masked_fill(~visible, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    w = torch.exp(scores - top)
    tot = w.sum(dim=-1, keepdim=True)
    p = w / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ gc
    gp = gc @ vc.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(dim=-1, keepdim=True))
    return ((gs @ kc * scale).to(q.dtype), (gs.transpose(-2, -1) @ qc * scale).to(k.dtype),
            gv.to(v.dtype))


def ab_grad_k_uses_k(q, k, v, grad_out, causal=False):
    f = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    q_, k_, v_, g_ = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    sc = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        allowed = torch.arange(nk)[None, :] <= torch.arange(nq)[:, None] + (nk - nq)
        sc = sc.masked_fill(~allowed, -math.inf)
    mx = sc.amax(-1, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    ex = torch.exp(sc - mx)
    den = ex.sum(-1, keepdim=True)
    p = ex / torch.where(den > 0, den, torch.ones_like(den))
    grad_v = torch.einsum("...ij,...ie->...je", p, g_)
    grad_p = torch.einsum("...ie,...je->...ij", g_, v_)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, k_) / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ k_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_no_row_term(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    qq, kk, vv, gg = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = (qq @ kk.transpose(-1, -2)) * sc
    if causal:
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool).triu(nk - nq + 1), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    p = torch.exp(s - mx)
    tot = p.sum(-1, keepdim=True)
    p = p / torch.where(tot == 0, torch.ones_like(tot), tot)
    dv = p.transpose(-1, -2) @ gg
    dp = gg @ vv.transpose(-1, -2)
    ds = p * dp  # softmax backward
    return (ds @ kk * sc).to(q.dtype), (ds.transpose(-1, -2) @ qq * sc).to(k.dtype), dv.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        mask = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    dV = p.transpose(-2, -1) @ G
    dP = G @ V.transpose(-2, -1)
    dS = p * (dP - (dP * p).sum(-1, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-2, -1) @ Q / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_keeps_float32(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    scale = 1 / math.sqrt(d)
    q32, k32, v32, g32 = (t.to(ct) for t in (q, k, v, grad_out))
    s = torch.matmul(q32, k32.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = torch.clamp(s.amax(-1, keepdim=True), min=-1e30)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    gv = torch.matmul(p.transpose(-2, -1), g32)
    gp = torch.matmul(g32, v32.transpose(-2, -1))
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = torch.matmul(gs, k32) * scale
    gk = torch.matmul(gs.transpose(-2, -1), q32) * scale
    return gq, gk, gv


# ---------------------------------------------------------------------------- right
def ab_einsum_f64(q, k, v, grad_out, causal=False):
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    nq, d = Q.shape[-2], Q.shape[-1]
    nk = K.shape[-2]
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        ok = torch.arange(nk)[None, :] - torch.arange(nq)[:, None] <= nk - nq
        s = torch.where(ok, s, torch.tensor(-math.inf, dtype=torch.float64))
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    tot = e.sum(dim=-1, keepdim=True)
    p = torch.where(tot > 0, e / tot.clamp_min(1e-300), torch.zeros_like(e))
    grad_v = torch.einsum("...ij,...ie->...je", p, G)
    grad_p = torch.einsum("...ie,...je->...ij", G, V)
    row = torch.einsum("...ij,...ij->...i", grad_p, p)
    grad_s = p * (grad_p - row[..., None])
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, K) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, Q) / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_delta_trick(q, k, v, grad_out, causal=False):
    f = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    qs = q.to(f) / math.sqrt(d)  # fold the scale into q once
    kf, vf, gf = k.to(f), v.to(f), grad_out.to(f)
    s = qs @ kf.transpose(-2, -1)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = p @ vf
    delta = (gf * out).sum(-1, keepdim=True)  # = rowsum(grad_p * p)
    grad_s = p * (gf @ vf.transpose(-2, -1) - delta)
    grad_q = grad_s @ kf / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ qs
    grad_v = p.transpose(-2, -1) @ gf
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================================ attention_backward_flops
# ---------------------------------------------------------------------------- wrong
def abf_recomputes_whole_forward(seq_len, head_dim, recompute=True):
    backward = 4 * 2 * seq_len * seq_len * head_dim
    forward = 4 * seq_len * seq_len * head_dim  # q k^T and p v again
    return backward + forward if recompute else backward


def abf_macs(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return (2.5 if recompute else 2.0) * forward


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 8 * n2d + 2 * n2d if recompute else 0


def abf_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    total = 3 * per_product  # grad_v, grad_q, grad_k
    if recompute:
        total += per_product
    return total


def abf_flag_ignored(seq_len, head_dim, recompute=True):
    flops = 0
    for _name in ("scores", "grad_v", "grad_p", "grad_q", "grad_k"):
        flops += 2 * seq_len * seq_len * head_dim
    return flops


# ---------------------------------------------------------------------------- right
def abf_shape_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d), (n, d, n), (n, n, d), (n, n, d)]  # grad_v, grad_p, grad_q, grad_k
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    factor = 10 if recompute else 8
    return factor * seq_len ** 2 * head_dim


# ============================================================================ flash_attention_backward
# ---------------------------------------------------------------------------- wrong
def fb_blockwise_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty((B, H, nk, d), dtype=ct)
    dv = torch.empty((B, H, nk, d), dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        row = (dp * p).sum(-1, keepdim=True)  # row term of this block
        ds = p * (dp - row)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_recompute_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    qc = q.to(compute)
    g = grad_out.to(compute)
    delta = (g * out.to(compute)).sum(-1, keepdim=True)
    lse_ = lse.to(compute).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qc)
    grad_k = torch.empty((batch, heads, n_k, d), dtype=compute)
    grad_v = torch.empty((batch, heads, n_k, d), dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb = k[:, :, start:stop].to(compute)
        vb = v[:, :, start:stop].to(compute)
        s = qc @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[:, :, start:stop] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb
        grad_k[:, :, start:stop] = ds.transpose(-2, -1) @ qc
    scale = 1 / math.sqrt(d)
    return (grad_q * scale).to(q.dtype), (grad_k * scale).to(k.dtype), grad_v.to(v.dtype)


def fb_mask_diagonal(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(f) * d ** -0.5
    go = grad_out.to(f)
    D = (go * out.to(f)).sum(dim=-1, keepdim=True)
    lse_f = torch.where(torch.isneginf(lse), math.inf, lse.to(f)).unsqueeze(-1)
    row = torch.arange(nq)[:, None] + nk - nq
    dq = torch.zeros_like(qs)
    dks, dvs = [], []
    for s0 in range(0, nk, block_size):
        kb = k[:, :, s0:s0 + block_size].to(f)
        vb = v[:, :, s0:s0 + block_size].to(f)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            col = torch.arange(s0, s0 + kb.shape[2])[None, :]
            sc = sc.masked_fill(col >= row, -math.inf)
        p = torch.exp(sc - lse_f)
        dvs.append(p.transpose(-2, -1) @ go)
        ds = p * (go @ vb.transpose(-2, -1) - D)
        dq = dq + ds @ kb
        dks.append(ds.transpose(-2, -1) @ qs)
    return ((dq * d ** -0.5).to(q.dtype), torch.cat(dks, 2).to(k.dtype),
            torch.cat(dvs, 2).to(v.dtype))


def fb_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(q_s)
    dk = torch.empty((B, H, nk, d), dtype=ct)
    dv = torch.empty((B, H, nk, d), dtype=ct)
    for j in range(0, nk, block_size):
        e = min(j + block_size, nk)
        kb, vb = k[:, :, j:e].to(ct), v[:, :, j:e].to(ct)
        s = q_s @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j, e)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, j:e] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, j:e] = ds.transpose(-2, -1) @ q_s
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty((B, H, nk, d), dtype=ct)
    grad_v = torch.empty((B, H, nk, d), dtype=ct)
    for lo in range(0, nk, block_size):
        hi = min(lo + block_size, nk)
        kb, vb = k[:, :, lo:hi].to(ct), v[:, :, lo:hi].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        grad_v[:, :, lo:hi] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q = ds @ kb
        grad_k[:, :, lo:hi] = ds.transpose(-2, -1) @ qs
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_keeps_float32(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = torch.sum(g * out.to(ct), dim=-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty((B, H, nk, d), dtype=ct)
    grad_v = torch.empty((B, H, nk, d), dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[:, :, a:b].to(ct), v[:, :, a:b].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        grad_v[:, :, a:b] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb
        grad_k[:, :, a:b] = ds.transpose(-2, -1) @ qs
    return grad_q / math.sqrt(d), grad_k, grad_v


# ---------------------------------------------------------------------------- right
def fb_two_level_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """FlashAttention-2 style: outer loop over key blocks, inner loop over query blocks."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    Q, K, V, O, G = (t.double() for t in (q, k, v, out, grad_out))
    L = lse.double()
    delta = torch.einsum("bhnd,bhnd->bhn", G, O)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for j0 in range(0, nk, block_size):
        j1 = min(j0 + block_size, nk)
        Kj, Vj = K[:, :, j0:j1], V[:, :, j0:j1]
        for i0 in range(0, nq, block_size):
            i1 = min(i0 + block_size, nq)
            Qi, Gi, Li = Q[:, :, i0:i1], G[:, :, i0:i1], L[:, :, i0:i1, None]
            s = torch.einsum("bhid,bhjd->bhij", Qi, Kj) * scale
            live = torch.isfinite(Li).expand_as(s)
            if causal:
                seen = (torch.arange(j0, j1)[None, :]
                        <= torch.arange(i0, i1)[:, None] + (nk - nq))
                live = live & seen
            p = torch.where(live, torch.exp(s - torch.where(torch.isfinite(Li), Li, 0.0)),
                            torch.zeros_like(s))
            dV[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", p, Gi)
            dp = torch.einsum("bhid,bhjd->bhij", Gi, Vj)
            ds = p * (dp - delta[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += torch.einsum("bhij,bhjd->bhid", ds, Kj) * scale
            dK[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", ds, Qi) * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_where_masked_f32(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf, gf = q.to(f), grad_out.to(f)
    delta = (gf * out.to(f)).sum(-1).unsqueeze(-1)
    lse_f = lse.to(f).unsqueeze(-1)
    has_key = torch.isfinite(lse_f)  # (B, H, N_q, 1)
    lse_safe = torch.where(has_key, lse_f, torch.zeros_like(lse_f))
    inv = 1.0 / math.sqrt(d)
    gq = torch.zeros_like(qf)
    gk_parts, gv_parts = [], []
    for kb, vb, j0 in zip(torch.split(k, block_size, 2), torch.split(v, block_size, 2),
                          range(0, nk, block_size)):
        kb, vb = kb.to(f), vb.to(f)
        s = torch.matmul(qf, kb.transpose(2, 3)) * inv
        keep = has_key
        if causal:
            cols = torch.arange(j0, j0 + kb.shape[2])
            keep = keep & (cols[None, :] <= torch.arange(nq)[:, None] + (nk - nq))
        p = torch.where(keep, torch.exp(s - lse_safe), torch.zeros((), dtype=f))
        gv_parts.append(torch.matmul(p.transpose(2, 3), gf))
        ds = p * (torch.matmul(gf, vb.transpose(2, 3)) - delta)
        gq = gq + torch.matmul(ds, kb)
        gk_parts.append(torch.matmul(ds.transpose(2, 3), qf) * inv)
    return ((gq * inv).to(q.dtype), torch.cat(gk_parts, 2).to(k.dtype),
            torch.cat(gv_parts, 2).to(v.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term (grad_weights * weights) without keepdim=True, so it broadcasts "
          "against the last axis instead of its own row: a shape error for most inputs, and "
          "wrong values (or a wrong shape) where the sizes happen to broadcast",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_axis_0",
          "sums grad_weights * weights over dim=0 instead of the last axis, so the row term "
          "mixes rows (it is only right for a single 1-D row)",
          sb_sum_axis0),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "returns weights * (row term - grad_weights), the negative of the gradient",
          sb_sign_flipped),
    Entry("softmax_backward", "wrong", "row_term_unweighted",
          "subtracts grad_weights.sum(-1) instead of (grad_weights * weights).sum(-1): the "
          "p p^T g part of the Jacobian needs the weights inside the sum",
          sb_unweighted_row),
    Entry("softmax_backward", "wrong", "returns_compute_dtype",
          "returns the float32 compute result without casting back, so float16 / bfloat16 "
          "inputs get a float32 gradient",
          sb_keeps_float32),
    Entry("softmax_backward", "wrong", "renormalises_weights",
          "divides the weights by their row sum first, so a fully masked row of zeros becomes "
          "0/0 = NaN instead of a zero gradient",
          sb_renormalised),
    Entry("softmax_backward", "right", "explicit_jacobian_float64", None,
          sb_explicit_jacobian_f64),
    Entry("softmax_backward", "right", "einsum_row_dot", None, sb_einsum_rowdot),

    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "applies 1/sqrt(d) to grad_q but forgets it on grad_k = grad_s^T q",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril(ones(N_q, N_k)) aligned top-left instead of "
          "bottom-right (diagonal N_k - N_q), wrong whenever N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "grad_k_from_k",
          "computes grad_k = grad_s^T @ k instead of grad_s^T @ q (the wrong tensor reused), "
          "which is wrong for square inputs and a shape error when N_q != N_k",
          ab_grad_k_uses_k),
    Entry("attention_backward", "wrong", "softmax_backward_without_row_term",
          "takes grad_s = p * grad_p, forgetting the row term rowsum(grad_p * p) of the "
          "softmax backward",
          ab_no_row_term),
    Entry("attention_backward", "wrong", "nan_for_rows_without_keys",
          "uses torch.softmax on the masked scores, so a causal query with no visible key "
          "(N_q > N_k) gets NaN weights and NaN gradients instead of zeros",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "returns_compute_dtype",
          "returns the gradients in the float32 compute dtype instead of the inputs' dtype",
          ab_keeps_float32),
    Entry("attention_backward", "right", "einsum_float64", None, ab_einsum_f64),
    Entry("attention_backward", "right", "delta_from_out", None, ab_delta_trick),

    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "adds the whole forward, 4 N^2 d, for the recomputation, but FlashAttention only "
          "recomputes the scores q k^T (2 N^2 d), not p v",
          abf_recomputes_whole_forward),
    Entry("attention_backward_flops", "wrong", "counts_macs",
          "counts one FLOP per multiply-add (N^2 d per product) instead of two, halving the "
          "total",
          abf_macs),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "computes 2.5 (or 2.0) times the forward's FLOPs with a float factor, so it returns "
          "a float instead of a plain int",
          abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "conditional_precedence",
          "writes 8 n2d + 2 n2d if recompute else 0: the conditional expression binds last, so "
          "recompute=False returns 0 instead of 8 N^2 d",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "three_products",
          "counts three backward products (grad_v, grad_q, grad_k) and forgets grad_p = "
          "grad_out v^T, so it gives 6 (or 8) N^2 d instead of 8 (or 10)",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "recompute_flag_ignored",
          "always counts the recomputation of the scores, so recompute=False still gives "
          "10 N^2 d instead of 8 N^2 d",
          abf_flag_ignored),
    Entry("attention_backward_flops", "right", "sum_over_product_shapes", None, abf_shape_list),
    Entry("attention_backward_flops", "right", "closed_form", None, abf_closed_form),

    Entry("flash_attention_backward", "wrong", "row_term_per_block",
          "computes the row term as rowsum(grad_p * p) inside each key block instead of "
          "delta = rowsum(grad_out * out) over all keys, so with several blocks each block "
          "subtracts only its own part",
          fb_blockwise_delta),
    Entry("flash_attention_backward", "wrong", "recompute_without_scale",
          "recomputes the block probabilities as exp(q k^T - lse) without the 1/sqrt(d) scale, "
          "so they no longer match the lse the forward stored",
          fb_recompute_unscaled),
    Entry("flash_attention_backward", "wrong", "causal_mask_hides_diagonal",
          "masks keys j >= i + N_k - N_q (>= where > belongs), so each query loses its own "
          "key in the recomputed probabilities",
          fb_mask_diagonal),
    Entry("flash_attention_backward", "wrong", "no_guard_for_minus_inf_lse",
          "computes exp(s - lse) without guarding lse = -inf, so a row with no visible key gets "
          "exp(-inf + inf) = NaN instead of zero probabilities",
          fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_block in each block instead of accumulating with +=, so "
          "only the last key block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "returns_compute_dtype",
          "returns the gradients in the float32 compute dtype instead of casting back to the "
          "inputs' dtype",
          fb_keeps_float32),
    Entry("flash_attention_backward", "right", "two_level_blocks_float64", None,
          fb_two_level_f64),
    Entry("flash_attention_backward", "right", "where_masked_float32", None, fb_where_masked_f32),
]
