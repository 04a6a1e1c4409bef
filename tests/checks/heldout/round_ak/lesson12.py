"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward: wrong
def sb_row_term_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_row_term_without_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = torch.sum(p * g, dim=-1, keepdim=True)
    return (p * (dot - g)).to(weights.dtype)


def sb_sum_over_axis0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    p = weights.float()
    g = grad_weights.float()
    return p * (g - (p * g).sum(-1, keepdim=True))


def sb_renormalised_first(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    p = p / p.sum(dim=-1, keepdim=True)  # make sure the rows sum to one
    g = grad_weights.to(ct)
    return (p * (g - (p * g).sum(dim=-1, keepdim=True))).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_explicit_jacobian_f64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n), symmetric
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_einsum_addcmul(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return torch.addcmul(-p * dot, p, g).to(weights.dtype)


# ============================================================ attention_backward: wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    sc = 1 / math.sqrt(d)
    s = Q @ K.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K * sc
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = d ** -0.5
    scores = (q_ @ k_.transpose(-2, -1)) * scale
    if causal:
        future = torch.arange(n_k)[None, :] > torch.arange(n_q)[:, None]
        scores = scores.masked_fill(future, -math.inf)
    top = scores.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isinf(top), 0.0)
    w = torch.exp(scores - top)
    tot = w.sum(-1, keepdim=True)
    p = w / tot.masked_fill(tot == 0, 1.0)
    grad_v = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_) * scale).to(q.dtype), ((gs.transpose(-2, -1) @ q_) * scale).to(k.dtype), \
        grad_v.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_q_uses_v(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, Vv, G = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    S = Q @ K.transpose(-2, -1) * scale
    if causal:
        S = S.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    mx = S.amax(-1, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    E = torch.exp(S - mx)
    Z = E.sum(-1, keepdim=True)
    P = E / torch.where(Z > 0, Z, torch.ones_like(Z))
    dV = P.transpose(-2, -1) @ G
    dP = G @ Vv.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ Vv * scale
    dK = dS.transpose(-2, -1) @ Q * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_dot_T_on_batched(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q_ @ k_.T / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    e = torch.exp(s - mx)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    grad_v = p.T @ g_
    grad_p = g_ @ v_.T
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.T @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_returns_float32(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = q.float(), k.float(), v.float(), grad_out.float()
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    e = torch.exp(s - mx)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return grad_s @ k_ / math.sqrt(d), grad_s.transpose(-2, -1) @ q_ / math.sqrt(d), grad_v


# ============================================================ attention_backward: right
def ab_delta_from_out_f64(q, k, v, grad_out, causal=False):
    f = torch.float64
    Q, K, V, dO = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    S = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        ok = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        S = torch.where(ok, S, torch.full_like(S, -math.inf))
    lse = torch.logsumexp(S, dim=-1, keepdim=True)
    empty = torch.isneginf(lse)
    P = torch.where(empty, torch.zeros_like(S), torch.exp(S - torch.where(empty, 0.0, lse)))
    out = P @ V
    delta = (dO * out).sum(dim=-1, keepdim=True)  # equals rowsum(grad_p * p)
    dP = dO @ V.transpose(-2, -1)
    dS = P * (dP - delta)
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-2, -1) @ Q / math.sqrt(d)
    dV = P.transpose(-2, -1) @ dO
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_einsum_prescaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)  # fold the scale into q once
    kk, vv, go = k.to(ct), v.to(ct), grad_out.to(ct)
    s = torch.einsum("...id,...jd->...ij", qs, kk)
    if causal:
        banned = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
        s = s.masked_fill(banned, float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    dv = torch.einsum("...ij,...ie->...je", p, go)
    dp = torch.einsum("...ie,...je->...ij", go, vv)
    row = torch.einsum("...ij,...ij->...i", dp, p)[..., None]
    ds = p * (dp - row)
    dq = torch.einsum("...ij,...jd->...id", ds, kk) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, qs)  # qs already holds 1/sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len * seq_len * head_dim
    if recompute:
        backward += 4 * seq_len * seq_len * head_dim  # run the forward again
    return backward


def abf_multiply_add_one_flop(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_forgets_grad_p(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    flops = 2 * n * n * d * 3  # grad_v, grad_q, grad_k
    if recompute:
        flops += 2 * n * n * d
    return flops


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 8 * n2d + 2 * n2d if recompute else 0


def abf_causal_half(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    total = per_product * (5 if recompute else 4)
    return total // 2  # only the lower triangle of the scores is needed


# ============================================================ attention_backward_flops: right
def abf_sum_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len ** 2 * head_dim


# ============================================================ flash_attention_backward: wrong
def fb_delta_per_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, nq, d = q.shape
    nk = k.shape[2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(B, H, nk, d, dtype=ct)
    dv = torch.zeros(B, H, nk, d, dtype=ct)
    for a in range(0, nk, block_size):
        e = min(a + block_size, nk)
        kb, vb = k[:, :, a:e].to(ct), v[:, :, a:e].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, e)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:e] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        delta = (dp * p).sum(-1, keepdim=True)  # row term from this block's keys
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[:, :, a:e] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_lse_not_guarded(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    q_s = q.to(ct) * (1.0 / math.sqrt(d))
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(q_s)
    gk = torch.zeros(B, H, n_k, d, dtype=ct)
    gv = torch.zeros(B, H, n_k, d, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = q_s @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[:, :, st:en] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[:, :, st:en] = ds.transpose(-2, -1) @ q_s
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_grad_k_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    qf = q.to(ct)
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros(B, H, n_q, d, dtype=ct)
    gk = torch.zeros(B, H, n_k, d, dtype=ct)
    gv = torch.zeros(B, H, n_k, d, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = (qf @ kb.transpose(-2, -1)) * scale
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[:, :, st:en] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq += (ds @ kb) * scale
        gk[:, :, st:en] = ds.transpose(-2, -1) @ qf
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.to(ct) / math.sqrt(d)
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    rows = torch.arange(n_q)[:, None]
    gq = torch.zeros_like(qs)
    gk = torch.zeros(B, H, n_k, d, dtype=ct)
    gv = torch.zeros(B, H, n_k, d, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        gv[:, :, st:en] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[:, :, st:en] = ds.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.to(ct) / math.sqrt(d)
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.zeros(B, H, n_k, d, dtype=ct)
    gv = torch.zeros(B, H, n_k, d, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[:, :, st:en] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq = ds @ kb
        gk[:, :, st:en] = ds.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_drops_ragged_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.to(ct) / math.sqrt(d)
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.zeros(B, H, n_k, d, dtype=ct)
    gv = torch.zeros(B, H, n_k, d, dtype=ct)
    for st in range(0, n_k - block_size + 1, block_size):
        en = st + block_size
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[:, :, st:en] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[:, :, st:en] = ds.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_query_and_key_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    f = torch.float64
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    Q, K, V, dO = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    D = (dO * out.to(f)).sum(dim=-1, keepdim=True)  # (B, H, N_q, 1)
    L = lse.to(f).unsqueeze(-1)
    dQ = torch.zeros(B, H, n_q, d, dtype=f)
    dK = torch.zeros(B, H, n_k, d, dtype=f)
    dV = torch.zeros(B, H, n_k, d, dtype=f)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        Qi, dOi, Di, Li = Q[:, :, i0:i1], dO[:, :, i0:i1], D[:, :, i0:i1], L[:, :, i0:i1]
        dead = torch.isneginf(Li)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            Kj, Vj = K[:, :, j0:j1], V[:, :, j0:j1]
            S = (Qi @ Kj.transpose(-2, -1)) * scale
            if causal:
                qi = torch.arange(i0, i1)[:, None] + (n_k - n_q)
                kj = torch.arange(j0, j1)[None, :]
                S = torch.where(kj <= qi, S, torch.full_like(S, -math.inf))
            P = torch.where(dead, torch.zeros_like(S), torch.exp(S - torch.where(dead, 0.0, Li)))
            dV[:, :, j0:j1] += P.transpose(-2, -1) @ dOi
            dS = P * (dOi @ Vj.transpose(-2, -1) - Di)
            dQ[:, :, i0:i1] += dS @ Kj * scale
            dK[:, :, j0:j1] += dS.transpose(-2, -1) @ Qi * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_key_blocks_einsum(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    wt = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[2], k.shape[2]
    r = 1.0 / math.sqrt(d)
    qw, gw = q.to(wt), grad_out.to(wt)
    delta = torch.einsum("bhqd,bhqd->bhq", gw, out.to(wt))[..., None]
    lse_w = lse.to(wt)
    lse_w = torch.where(torch.isneginf(lse_w), torch.full_like(lse_w, math.inf), lse_w)[..., None]
    grad_q = torch.zeros_like(qw)
    grads_k, grads_v = [], []
    for kb, vb, start in zip(torch.split(k.to(wt), block_size, dim=2),
                             torch.split(v.to(wt), block_size, dim=2),
                             range(0, n_k, block_size)):
        s = torch.einsum("bhqd,bhkd->bhqk", qw, kb) * r
        if causal:
            kpos = torch.arange(start, start + kb.shape[2])
            hidden = kpos[None, :] > (torch.arange(n_q) + (n_k - n_q))[:, None]
            s = s.masked_fill(hidden, -math.inf)
        p = torch.exp(s - lse_w)
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, gw))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", gw, vb) - delta)
        grad_q = grad_q + torch.einsum("bhqk,bhkd->bhqd", ds, kb) * r
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, qw) * r)
    grad_k = torch.cat(grads_k, dim=2)
    grad_v = torch.cat(grads_v, dim=2)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim", (
        "the row term (grad_weights * weights).sum(-1) drops its axis, so it broadcasts "
        "against the last axis instead of lining up with its row (a shape error, or silently "
        "wrong values on square inputs)"),
        sb_row_term_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_without_weights", (
        "the row term is grad_weights.sum(-1) instead of the weighted sum "
        "(grad_weights * weights).sum(-1): the p p^T part of the Jacobian loses its p"),
        sb_row_term_without_p),
    Entry("softmax_backward", "wrong", "sign_flipped", (
        "returns weights * (row term - grad_weights), the negative of the gradient"),
        sb_sign_flipped),
    Entry("softmax_backward", "wrong", "row_term_over_axis0", (
        "sums the row term over dim 0 (down the columns) instead of the last axis, the "
        "softmax's own axis"),
        sb_sum_over_axis0),
    Entry("softmax_backward", "wrong", "returns_float32", (
        "computes in float32 and returns that, without casting back to weights' dtype "
        "(float32 for float16, bfloat16 and float64 inputs)"),
        sb_returns_float32),
    Entry("softmax_backward", "wrong", "renormalises_weights", (
        "divides the weights by their row sum first \"to be safe\", which turns a fully "
        "masked row of zeros into 0/0 = NaN instead of a gradient of zeros"),
        sb_renormalised_first),
    Entry("softmax_backward", "right", "explicit_jacobian_float64", None,
          sb_explicit_jacobian_f64),
    Entry("softmax_backward", "right", "einsum_addcmul", None, sb_einsum_addcmul),

    Entry("attention_backward", "wrong", "grad_k_missing_scale", (
        "grad_q is multiplied by 1/sqrt(d) but grad_k = grad_s^T q is not: the chain rule "
        "through s = q k^T / sqrt(d) scales both"),
        ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal_mask_top_left", (
        "the causal mask hides keys j > i (top-left) instead of j > i + N_k - N_q "
        "(bottom-right), wrong whenever N_q != N_k"),
        ab_causal_top_left),
    Entry("attention_backward", "wrong", "softmax_nan_on_empty_rows", (
        "uses torch.softmax on the masked scores, so a query row with no visible key "
        "(causal, N_q > N_k) is all -inf and gives NaN instead of zero gradients"),
        ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "grad_q_uses_v", (
        "grad_q is computed as grad_s @ v instead of grad_s @ k: the value matrix is reused "
        "where the keys belong"),
        ab_grad_q_uses_v),
    Entry("attention_backward", "wrong", "dot_T_on_batched_tensors", (
        "transposes with .T, which on a batched (..., N, d) tensor reverses every axis "
        "(or raises) instead of swapping the last two; only 2-D inputs work"),
        ab_dot_T_on_batched),
    Entry("attention_backward", "wrong", "returns_float32", (
        "computes in float32 and returns the gradients without casting back to the inputs' "
        "dtype"),
        ab_returns_float32),
    Entry("attention_backward", "right", "delta_from_out_float64", None, ab_delta_from_out_f64),
    Entry("attention_backward", "right", "einsum_prescaled_q", None, ab_einsum_prescaled),

    Entry("attention_backward_flops", "wrong", "recompute_whole_forward", (
        "recompute adds the whole forward, 4 N^2 d, instead of only the scores q k^T, "
        "2 N^2 d"),
        abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "multiply_add_one_flop", (
        "counts each N x N x d product as N^2 d FLOPs: a multiply-add is 2 FLOPs, not 1"),
        abf_multiply_add_one_flop),
    Entry("attention_backward_flops", "wrong", "forgets_grad_p", (
        "counts three backward products (grad_v, grad_q, grad_k) and forgets "
        "grad_p = grad_out v^T: 6 N^2 d instead of 8 N^2 d"),
        abf_forgets_grad_p),
    Entry("attention_backward_flops", "wrong", "float_ratio", (
        "multiplies the forward's 4 N^2 d by 2.5 (or 2), so with recompute=True the result "
        "is a float, not the plain int the contract asks for"),
        abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "conditional_precedence", (
        "writes 8 N^2 d + 2 N^2 d if recompute else 0: the conditional expression binds "
        "last, so recompute=False returns 0 instead of 8 N^2 d"),
        abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "halved_for_causal", (
        "halves the count for a causal mask, but the contract counts the dense backward "
        "(no causal saving)"),
        abf_causal_half),
    Entry("attention_backward_flops", "right", "sum_over_product_shapes", None,
          abf_sum_of_products),
    Entry("attention_backward_flops", "right", "closed_form_int_bool", None, abf_closed_form),

    Entry("flash_attention_backward", "wrong", "delta_from_block", (
        "the row term delta is rowsum(grad_p * p) over the current block's keys only, "
        "instead of rowsum(grad_out * out) over the whole row"),
        fb_delta_per_block),
    Entry("flash_attention_backward", "wrong", "lse_minus_inf_not_guarded", (
        "recomputes p = exp(s - lse) with no guard for lse = -inf, so a row with no visible "
        "key (causal, N_q > N_k) gives exp(-inf - (-inf)) = NaN"),
        fb_lse_not_guarded),
    Entry("flash_attention_backward", "wrong", "grad_k_missing_scale", (
        "grad_k is built from the unscaled q (grad_s^T q) and never multiplied by 1/sqrt(d), "
        "while grad_q is"),
        fb_grad_k_unscaled),
    Entry("flash_attention_backward", "wrong", "causal_mask_top_left", (
        "the causal mask compares key positions with the bare query index (top-left) instead "
        "of i + N_k - N_q (bottom-right), wrong whenever N_q != N_k"),
        fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten", (
        "grad_q = grad_s @ k_blk is assigned in every block instead of accumulated (+=), so "
        "only the last key block's contribution survives"),
        fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "drops_ragged_last_block", (
        "range(0, N_k - block_size + 1, block_size) visits only full blocks, so the shorter "
        "last block of keys is skipped (its grad_k, grad_v stay zero)"),
        fb_drops_ragged_block),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fb_query_and_key_tiles_f64),
    Entry("flash_attention_backward", "right", "key_blocks_einsum_split", None,
          fb_key_blocks_einsum),
]
