"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ==================================================================== softmax_backward -- wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (p * g).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_axis_0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_forgets_outer_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_row_term_without_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    work = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(work)
    g = grad_weights.to(work)
    dot = torch.sum(p * g, dim=-1, keepdim=True)
    return p * (g - dot)


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


# ==================================================================== softmax_backward -- right
def sb_full_jacobian(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n), symmetric
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_einsum_dot(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    dot = torch.einsum("...i,...i->...", p, g)
    return (p * g - p * dot[..., None]).to(weights.dtype)


# ================================================================== attention_backward -- wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    sc = 1 / math.sqrt(d)
    s = qf @ kf.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    gv = p.transpose(-2, -1) @ gf
    gp = gf @ vf.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ kf * sc
    gk = gs.transpose(-2, -1) @ qf
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool).triu(1), -math.inf)
    top = s.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
    e = (s - top).exp()
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.to(compute) for t in (q, k, v, grad_out))
    scores = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~vis, -math.inf)
    top = scores.amax(dim=-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    w = torch.exp(scores - top)
    tot = w.sum(dim=-1, keepdim=True)
    p = w / tot.masked_fill(tot == 0, 1.0)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-2, keepdim=True))
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_plain_softmax_nan(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qc, kc, vc, gc = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = torch.matmul(qc, kc.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        allowed = torch.tril(torch.ones(n_q, n_k, dtype=torch.bool), diagonal=n_k - n_q)
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    gv = torch.matmul(p.transpose(-1, -2), gc)
    gp = torch.matmul(gc, vc.transpose(-1, -2))
    gs = p * (gp - (p * gp).sum(-1, keepdim=True))
    gq = torch.matmul(gs, kc) / math.sqrt(d)
    gk = torch.matmul(gs.transpose(-1, -2), qc) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_k_uses_k(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qf @ kf.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    e = torch.exp(s - mx)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    dv = p.transpose(-2, -1) @ gf
    dp = gf @ vf.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ kf / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ kf / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_returns_float32(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    a, b, c, g = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    s = a @ b.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    gp = g @ c.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return (gs @ b / math.sqrt(d), gs.transpose(-2, -1) @ a / math.sqrt(d),
            p.transpose(-2, -1) @ g)


# ================================================================== attention_backward -- right
def ab_flatten_loop_f64(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Q = q.double().reshape(-1, n_q, d)
    K = k.double().reshape(-1, n_k, d)
    V = v.double().reshape(-1, n_k, d_v)
    G = grad_out.double().reshape(-1, n_q, d_v)
    gq, gk, gv = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for i in range(Q.shape[0]):
        s = torch.einsum("qd,kd->qk", Q[i], K[i]) / math.sqrt(d)
        if causal:
            for r in range(n_q):
                s[r, max(r + n_k - n_q + 1, 0):] = -math.inf
        p = torch.zeros_like(s)
        for r in range(n_q):
            if torch.isfinite(s[r]).any():
                p[r] = torch.softmax(s[r], dim=0)
        gv[i] = torch.einsum("qk,qe->ke", p, G[i])
        gp = torch.einsum("qe,ke->qk", G[i], V[i])
        gs = p * (gp - (gp * p).sum(1, keepdim=True))
        gq[i] = torch.einsum("qk,kd->qd", gs, K[i]) / math.sqrt(d)
        gk[i] = torch.einsum("qk,qd->kd", gs, Q[i]) / math.sqrt(d)
    return (gq.reshape(lead + (n_q, d)).to(q.dtype), gk.reshape(lead + (n_k, d)).to(k.dtype),
            gv.reshape(lead + (n_k, d_v)).to(v.dtype))


def ab_delta_from_out_f64(q, k, v, grad_out, causal=False):
    """Row term from delta = rowsum(grad_out * out), as FlashAttention does, in float64."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = Q @ K.transpose(-1, -2) / math.sqrt(d)
    if causal:
        seen = (torch.arange(n_k)[None, :] - torch.arange(n_q)[:, None]) <= (n_k - n_q)
        s = torch.where(seen, s, torch.tensor(-math.inf, dtype=torch.float64))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse.masked_fill(torch.isneginf(lse), math.inf))
    out = p @ V
    delta = (G * out).sum(-1, keepdim=True)
    ds = p * (G @ V.transpose(-1, -2) - delta) / math.sqrt(d)
    return ((ds @ K).to(q.dtype), (ds.transpose(-1, -2) @ Q).to(k.dtype),
            (p.transpose(-1, -2) @ G).to(v.dtype))


# ============================================================ attention_backward_flops -- wrong
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 4 * 2 * seq_len * seq_len * head_dim
    if recompute:
        backward += 4 * seq_len * seq_len * head_dim  # the forward again
    return backward


def abf_mac_as_one(seq_len, head_dim, recompute=True):
    per_product = seq_len * seq_len * head_dim
    n_products = 5 if recompute else 4
    return n_products * per_product


def abf_ratio_of_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_inverted_flag(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len * seq_len * head_dim
    if not recompute:
        flops += 2 * seq_len * seq_len * head_dim
    return flops


def abf_three_products(seq_len, head_dim, recompute=True):
    one = 2 * seq_len * seq_len * head_dim
    total = 3 * one  # grad_v, grad_q, grad_k
    if recompute:
        total += one
    return total


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


# ============================================================ attention_backward_flops -- right
def abf_sum_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_bool_arithmetic(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len ** 2 * head_dim


# ============================================================ flash_attention_backward -- wrong
def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[:, :, a:b].to(ct), v[:, :, a:b].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[:, :, a:b] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))  # row term of this block only
        gq += gs @ kb
        gk[:, :, a:b] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) * (1.0 / math.sqrt(d))
    g_ = grad_out.to(compute)
    delta = (g_ * out.to(compute)).sum(dim=-1, keepdim=True)
    lse_ = lse.to(compute)[..., None]
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q_scaled)
    grad_k = torch.empty(k.shape, dtype=compute)
    grad_v = torch.empty(v.shape, dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk = k[..., start:stop, :].to(compute)
        v_blk = v[..., start:stop, :].to(compute)
        scores = q_scaled @ k_blk.transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        p = torch.exp(scores - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g_
        grad_p = g_ @ v_blk.transpose(-2, -1)
        grad_s = p * (grad_p - delta)
        grad_q += grad_s @ k_blk
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_scaled
    grad_q = grad_q * (1.0 / math.sqrt(d))
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2:]
    nk = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf, gf = q.to(f), grad_out.to(f)
    delta = (gf * out.to(f)).sum(-1, keepdim=True)
    lse_safe = torch.where(torch.isneginf(lse), math.inf, lse.to(f)).unsqueeze(-1)
    last_key = torch.arange(nq)[:, None] + nk - nq
    dq = torch.zeros_like(qf)
    dk = torch.empty(k.shape, dtype=f)
    dv = torch.empty(v.shape, dtype=f)
    for lo in range(0, nk, block_size):
        hi = min(lo + block_size, nk)
        kb, vb = k[:, :, lo:hi].to(f), v[:, :, lo:hi].to(f)
        s = qf @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > last_key, -math.inf)
        p = torch.exp(s - lse_safe)
        dv[:, :, lo:hi] = p.transpose(-1, -2) @ gf
        ds = p * (gf @ vb.transpose(-1, -2) - delta) / math.sqrt(d)
        dq += ds @ kb
        dk[:, :, lo:hi] = ds.transpose(-1, -2) @ qf
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = D ** -0.5
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    row = (g * out.to(ct)).sum(-1, keepdim=True)
    lse_c = lse.to(ct).unsqueeze(-1)
    lse_c = torch.where(torch.isinf(lse_c), torch.full_like(lse_c, math.inf), lse_c)
    rows = torch.arange(Nq).unsqueeze(1)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.zeros(k.shape, dtype=ct)
    grad_v = torch.zeros(v.shape, dtype=ct)
    j = 0
    while j < Nk:
        j2 = min(j + block_size, Nk)
        kb = k[:, :, j:j2].to(ct)
        vb = v[:, :, j:j2].to(ct)
        s = qs @ kb.transpose(2, 3)
        if causal:
            s = s.masked_fill(torch.arange(j, j2).unsqueeze(0) > rows, -math.inf)
        p = torch.exp(s - lse_c)
        grad_v[:, :, j:j2] = p.transpose(2, 3) @ g
        ds = p * (g @ vb.transpose(2, 3) - row)
        grad_q = grad_q + ds @ kb
        grad_k[:, :, j:j2] = ds.transpose(2, 3) @ qs
        j = j2
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(ct) * sc
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[..., st:en, :].to(ct), v[..., st:en, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., st:en, :] = p.transpose(-2, -1) @ go
        gs = p * (go @ vb.transpose(-2, -1) - delta)
        grad_q = gs @ kb
        grad_k[..., st:en, :] = gs.transpose(-2, -1) @ qs
    return (grad_q * sc).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_second_pass_for_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def probs(a, b):
        s = qs @ k[..., a:b, :].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        return torch.exp(s - L)

    blocks = [(a, min(a + block_size, n_k)) for a in range(0, n_k, block_size)]
    delta = torch.zeros(q.shape[:-1] + (1,), dtype=ct)
    for a, b in blocks:  # first pass: the row term rowsum(grad_p * p)
        gp = g @ v[..., a:b, :].to(ct).transpose(-2, -1)
        delta += (gp * probs(a, b)).sum(-1, keepdim=True)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a, b in blocks:
        p = probs(a, b)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ v[..., a:b, :].to(ct).transpose(-2, -1) - delta)
        gq += gs @ k[..., a:b, :].to(ct)
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ flash_attention_backward -- right
def fb_two_level_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over query blocks and key blocks, float64, skipping tiles the mask hides."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q = q.double() / math.sqrt(d)
    K, V, G = k.double(), v.double(), grad_out.double()
    delta = (G * out.double()).sum(-1, keepdim=True)
    L = lse.double().unsqueeze(-1)
    L = torch.where(torch.isneginf(L), torch.full_like(L, math.inf), L)
    gq, gk, gv = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    shift = n_k - n_q
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            if causal and j0 > i1 - 1 + shift:
                continue  # every key of this tile is in every query's future
            s = Q[..., i0:i1, :] @ K[..., j0:j1, :].transpose(-1, -2)
            if causal:
                hide = torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None] + shift
                s = s.masked_fill(hide, -math.inf)
            p = torch.exp(s - L[..., i0:i1, :])
            gv[..., j0:j1, :] += p.transpose(-1, -2) @ G[..., i0:i1, :]
            ds = p * (G[..., i0:i1, :] @ V[..., j0:j1, :].transpose(-1, -2)
                      - delta[..., i0:i1, :])
            gq[..., i0:i1, :] += ds @ K[..., j0:j1, :]
            gk[..., j0:j1, :] += ds.transpose(-1, -2) @ Q[..., i0:i1, :]
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    r = 1.0 / math.sqrt(d)
    Q, G, O = q.double(), grad_out.double(), out.double()
    delta = torch.einsum("bhqd,bhqd->bhq", G, O)
    lse64 = lse.double()
    empty = torch.isneginf(lse64)
    dq = torch.zeros_like(Q)
    dks, dvs = [], []
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kb, Vb = k[:, :, j0:j1].double(), v[:, :, j0:j1].double()
        s = torch.einsum("bhqd,bhkd->bhqk", Q, Kb) * r
        if causal:
            ok = torch.arange(j0, j1)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
            s = torch.where(ok, s, torch.full_like(s, -math.inf))
        p = torch.where(empty[..., None], torch.zeros_like(s), torch.exp(s - lse64[..., None]))
        dvs.append(torch.einsum("bhqk,bhqd->bhkd", p, G))
        dp = torch.einsum("bhqd,bhkd->bhqk", G, Vb)
        ds = p * (dp - delta[..., None])
        dq = dq + torch.einsum("bhqk,bhkd->bhqd", ds, Kb) * r
        dks.append(torch.einsum("bhqk,bhqd->bhkd", ds, Q) * r)
    return dq.to(q.dtype), torch.cat(dks, 2).to(k.dtype), torch.cat(dvs, 2).to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row-term-without-keepdim",
          "sums the row term without keepdim=True, so the (...,) row sums broadcast against "
          "the last axis instead of lining up with their rows: a shape error for (R, n) with "
          "R != n, wrong values for a square input",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row-term-over-axis-0",
          "sums grad_weights * weights over dim=0 (across rows) instead of the last axis",
          sb_sum_axis_0),
    Entry("softmax_backward", "wrong", "forgets-outer-weights",
          "returns grad_weights - rowsum(grad_weights * weights) without the outer "
          "multiplication by weights",
          sb_forgets_outer_p),
    Entry("softmax_backward", "wrong", "row-term-without-weights",
          "uses rowsum(grad_weights) as the row term instead of rowsum(grad_weights * weights)",
          sb_row_term_without_p),
    Entry("softmax_backward", "wrong", "returns-float32",
          "returns the float32 working result without casting back to weights' dtype "
          "(float16 / bfloat16 inputs get float32)",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "missing-parentheses",
          "writes weights * grad_weights - rowsum(...) without parentheses, so the row term "
          "is not multiplied by weights",
          sb_precedence),
    Entry("softmax_backward", "right", "full-jacobian-float64", None, sb_full_jacobian),
    Entry("softmax_backward", "right", "einsum-dot-float64", None, sb_einsum_dot),

    Entry("attention_backward", "wrong", "grad-k-unscaled",
          "applies 1/sqrt(d) to grad_q but forgets it in grad_k = grad_s^T q",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal-top-left",
          "masks with triu(1), the top-left causal mask (key j hidden when j > i), instead of "
          "the bottom-right one (j > i + N_k - N_q); wrong when N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "row-term-over-queries",
          "sums grad_p * p over dim=-2 (the queries) for the row term instead of over the "
          "keys, dim=-1",
          ab_row_term_wrong_axis),
    Entry("attention_backward", "wrong", "softmax-nan-on-empty-rows",
          "uses torch.softmax on the masked scores, which gives NaN for a query row with no "
          "visible key instead of zeros",
          ab_plain_softmax_nan),
    Entry("attention_backward", "wrong", "grad-k-uses-k",
          "computes grad_k = grad_s^T k / sqrt(d), reusing k where q belongs (raises a shape "
          "error when N_q != N_k)",
          ab_grad_k_uses_k),
    Entry("attention_backward", "wrong", "returns-float32",
          "returns the float32 working gradients without casting back to the inputs' dtype",
          ab_returns_float32),
    Entry("attention_backward", "right", "flatten-loop-float64", None, ab_flatten_loop_f64),
    Entry("attention_backward", "right", "delta-from-out-float64", None,
          ab_delta_from_out_f64),

    Entry("attention_backward_flops", "wrong", "recomputes-whole-forward",
          "adds the whole forward, 4 N^2 d, for recompute instead of only the scores q k^T, "
          "2 N^2 d",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "mac-as-one-flop",
          "counts one FLOP per multiply-add (N^2 d per product instead of 2 N^2 d)",
          abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "float-ratio",
          "returns 2.5 or 2 times the forward's FLOPs as a float instead of a plain int",
          abf_ratio_of_forward),
    Entry("attention_backward_flops", "wrong", "recompute-flag-inverted",
          "adds the 2 N^2 d of the recomputation when recompute is False instead of True",
          abf_inverted_flag),
    Entry("attention_backward_flops", "wrong", "forgets-grad-p",
          "counts three products (grad_v, grad_q, grad_k) and forgets grad_p = grad_out v^T",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "conditional-precedence",
          "writes a + b if recompute else 0, which Python reads as (a + b) if recompute else "
          "0: recompute=False returns 0",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "right", "sum-of-product-shapes", None,
          abf_sum_of_products),
    Entry("attention_backward_flops", "right", "bool-arithmetic", None, abf_bool_arithmetic),

    Entry("flash_attention_backward", "wrong", "block-local-row-term",
          "computes the row term inside each key block as rowsum(grad_p * p) of that block "
          "only, instead of delta = rowsum(grad_out * out) over the whole row",
          fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no-neg-inf-lse-guard",
          "recomputes exp(s - lse) without replacing lse = -inf, so a row with no visible key "
          "gives exp(-inf - (-inf)) = NaN",
          fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "unscaled-recompute",
          "recomputes the scores as q k^T without 1/sqrt(d) before exp(s - lse), so the "
          "probabilities do not match the forward's",
          fb_unscaled_recompute),
    Entry("flash_attention_backward", "wrong", "causal-top-left",
          "masks key j when j > i (top-left) instead of j > i + N_k - N_q (bottom-right)",
          fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "grad-q-overwritten",
          "assigns grad_q = grad_s @ k_blk in each block instead of accumulating with +=, so "
          "only the last key block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "second-pass-for-row-term",
          "makes a first pass over the key blocks to sum rowsum(grad_p * p) instead of using "
          "delta = rowsum(grad_out * out): right values, but about 14 N^2 d FLOPs, over one "
          "recomputation's 10 N^2 d",
          fb_second_pass_for_delta),
    Entry("flash_attention_backward", "right", "two-level-tiles-float64", None,
          fb_two_level_tiles_f64),
    Entry("flash_attention_backward", "right", "einsum-key-blocks-float64", None,
          fb_einsum_key_blocks),
]
