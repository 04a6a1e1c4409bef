"""Held-out learners' answers, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward -- wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = (p * g).sum(dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    return (p * (1 - p) * grad_weights.to(ct)).to(weights.dtype)


def sb_row_term_without_p(weights, grad_weights):
    work = torch.promote_types(weights.dtype, torch.float32)
    w, gw = weights.to(work), grad_weights.to(work)
    return (w * (gw - gw.sum(-1, keepdim=True))).to(weights.dtype)


def sb_float_no_cast_back(weights, grad_weights):
    p = weights.float()
    g = grad_weights.float()
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_missing_parentheses(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


# ============================================================ softmax_backward -- right
def sb_einsum_f64(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    row = torch.einsum("...n,...n->...", p, g).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_batched_matmul(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    # p^T g per row as a (1 x n) @ (n x 1) product
    inner = (p.unsqueeze(-2) @ g.unsqueeze(-1)).squeeze(-1)  # (..., 1)
    return torch.addcmul(torch.zeros_like(p), p, g - inner).to(weights.dtype)


# ============================================================ attention_backward -- wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    sc = 1 / math.sqrt(d)
    s = Q @ K.transpose(-2, -1) * sc
    if causal:
        ok = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~ok, -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K * sc
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = (t.to(f) for t in (q, k, v, grad_out))
    scale = d ** -0.5
    scores = qf @ kf.mT * scale
    if causal:
        scores = scores.masked_fill(torch.ones(nq, nk, dtype=torch.bool).triu(1), float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = m.masked_fill(torch.isneginf(m), 0.0)
    w = torch.exp(scores - m)
    tot = w.sum(dim=-1, keepdim=True)
    w = w / tot.masked_fill(tot == 0, 1.0)
    g_v = w.mT @ gf
    g_w = gf @ vf.mT
    g_s = w * (g_w - (g_w * w).sum(dim=-1, keepdim=True))
    return ((g_s @ kf * scale).to(q.dtype), (g_s.mT @ qf * scale).to(k.dtype),
            g_v.to(v.dtype))


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = 1.0 / math.sqrt(d)
    s = torch.matmul(q_, k_.transpose(-1, -2)) * scale
    if causal:
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        s = s.masked_fill(~vis, -math.inf)
    p = torch.softmax(s, dim=-1)
    grad_v = torch.matmul(p.transpose(-1, -2), g_)
    grad_p = torch.matmul(g_, v_.transpose(-1, -2))
    grad_s = p * (grad_p - (p * grad_p).sum(dim=-1, keepdim=True))
    grad_q = torch.matmul(grad_s, k_) * scale
    grad_k = torch.matmul(grad_s.transpose(-1, -2), q_) * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_q_uses_v(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    row_max = s.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
    e = torch.exp(s - row_max)
    denom = e.sum(-1, keepdim=True)
    p = e / denom.clamp_min(torch.finfo(ct).tiny)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ v_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_no_cast_back(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = s.masked_fill(~allowed, -math.inf)
    mx = s.max(dim=-1, keepdim=True).values
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    ex = torch.exp(s - mx)
    sm = ex.sum(dim=-1, keepdim=True)
    p = torch.where(sm > 0, ex / sm, torch.zeros_like(ex))
    dV = p.transpose(-2, -1) @ G
    dP = G @ V.transpose(-2, -1)
    dS = p * (dP - (dP * p).sum(-1, keepdim=True)) / math.sqrt(d)
    return dS @ K, dS.transpose(-2, -1) @ Q, dV


def ab_dot_T(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.T * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / z.masked_fill(z == 0, 1.0)
    grad_v = p.T @ g_
    grad_p = g_ @ v_.T
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ k_ * scale).to(q.dtype), (grad_s.T @ q_ * scale).to(k.dtype),
            grad_v.to(v.dtype))


# ============================================================ attention_backward -- right
def ab_delta_from_out_f64(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.where(torch.isneginf(lse), torch.zeros_like(s), torch.exp(s - lse))
    out = torch.einsum("...qk,...kv->...qv", p, V)
    delta = (G * out).sum(-1, keepdim=True)  # = rowsum(grad_p * p)
    grad_p = torch.einsum("...qv,...kv->...qk", G, V)
    grad_s = p * (grad_p - delta)
    grad_q = torch.einsum("...qk,...kd->...qd", grad_s, K) / math.sqrt(d)
    grad_k = torch.einsum("...qk,...qd->...kd", grad_s, Q) / math.sqrt(d)
    grad_v = torch.einsum("...qk,...qv->...kv", p, G)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_row_loop(q, k, v, grad_out, causal=False):
    """One query row at a time, accumulating into grad_k and grad_v (float64)."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    gq = torch.zeros_like(Q)
    gk = torch.zeros_like(K)
    gv = torch.zeros_like(V)
    scale = 1.0 / math.sqrt(d)
    for i in range(n_q):
        last = i + n_k - n_q if causal else n_k - 1
        if last < 0:
            continue  # sees no key: no gradient
        kk, vv = K[..., : last + 1, :], V[..., : last + 1, :]
        s = (kk @ Q[..., i, :, None]).squeeze(-1) * scale  # (..., j)
        p = torch.softmax(s, dim=-1)
        g = G[..., i, :]  # (..., d_v)
        gp = (vv @ g[..., None]).squeeze(-1)  # (..., j)
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))
        gq[..., i, :] = (gs[..., None, :] @ kk).squeeze(-2) * scale
        gk[..., : last + 1, :] += gs[..., :, None] * Q[..., i, None, :] * scale
        gv[..., : last + 1, :] += p[..., :, None] * g[..., None, :]
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ attention_backward_flops -- wrong
def abf_ignores_recompute(seq_len, head_dim, recompute=True):
    return 10 * seq_len * seq_len * head_dim


def abf_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    total = 3 * per_product  # grad_v, grad_q, grad_k
    if recompute:
        total += per_product
    return total


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def abf_n_d_squared(seq_len, head_dim, recompute=True):
    count = 4 + int(bool(recompute))
    return count * 2 * seq_len * head_dim * head_dim


# ============================================================ attention_backward_flops -- right
def abf_sum_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, d, n), (n, n, d), (n, n, d), (n, n, d)]  # grad_v, grad_p, grad_q, grad_k
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * c for m, kk, c in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return int(2 * seq_len * seq_len * head_dim * (5 if recompute else 4))


# ============================================================ flash_attention_backward -- wrong
def fb_delta_per_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).unsqueeze(-1)
    qpos = torch.arange(n_q).unsqueeze(1) + n_k - n_q
    grad_q = torch.zeros_like(qs)
    grad_k = torch.zeros(B, H, n_k, d, dtype=ct)
    grad_v = torch.zeros(B, H, n_k, d, dtype=ct)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1).unsqueeze(0) > qpos, -math.inf)
        p = torch.exp(sc - L)
        grad_v[:, :, s0:s1] = p.transpose(-2, -1) @ go
        gs = p * (go @ vb.transpose(-2, -1) - delta)
        grad_q += gs @ kb
        grad_k[:, :, s0:s1] = gs.transpose(-2, -1) @ qs
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(ct), v[..., start:stop, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q = ds @ kb
        grad_k[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    Qs = q.to(f) * sc
    G = grad_out.to(f)
    D = (G * out.to(f)).sum(dim=-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(f)).unsqueeze(-1)
    rows = torch.arange(n_q).view(-1, 1)
    dQ = torch.zeros_like(Qs)
    dK = torch.empty(k.shape, dtype=f)
    dV = torch.empty(v.shape, dtype=f)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kb, Vb = k[..., j0:j1, :].to(f), v[..., j0:j1, :].to(f)
        S = Qs @ Kb.transpose(-1, -2)
        if causal:
            S = S.masked_fill(torch.arange(j0, j1).view(1, -1) > rows, -math.inf)
        P = torch.exp(S - L)
        dV[..., j0:j1, :] = P.transpose(-1, -2) @ G
        dS = P * (G @ Vb.transpose(-1, -2) - D)
        dQ += dS @ Kb
        dK[..., j0:j1, :] = dS.transpose(-1, -2) @ Qs
    return (dQ * sc).to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_returns_float32(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[..., lo:hi, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return gq * (1.0 / math.sqrt(d)), gk, gv


def fb_second_pass_for_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    blocks = [(a, min(a + block_size, n_k)) for a in range(0, n_k, block_size)]

    def probs(a, b):
        s = qs @ k[..., a:b, :].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        return torch.exp(s - L)

    # first pass: the row term rowsum(grad_p * p), block by block
    delta = torch.zeros(q.shape[:-1] + (1,), dtype=ct)
    for a, b in blocks:
        dp = g @ v[..., a:b, :].to(ct).transpose(-2, -1)
        delta += (dp * probs(a, b)).sum(-1, keepdim=True)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for a, b in blocks:
        p = probs(a, b)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        grad_v[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb
        grad_k[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ flash_attention_backward -- right
def fb_two_d_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over query blocks and key blocks, in float64."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f = torch.float64
    scale = 1.0 / math.sqrt(d)
    Q, K, V, O, G = (t.to(f) for t in (q, k, v, out, grad_out))
    Lf = lse.to(f)
    gq = torch.zeros_like(Q)
    gk = torch.zeros_like(K)
    gv = torch.zeros_like(V)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        Qi, Gi = Q[..., i0:i1, :], G[..., i0:i1, :]
        Di = (Gi * O[..., i0:i1, :]).sum(-1, keepdim=True)
        Li = Lf[..., i0:i1, None]
        empty = torch.isneginf(Li)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            Kj, Vj = K[..., j0:j1, :], V[..., j0:j1, :]
            S = (Qi @ Kj.transpose(-2, -1)) * scale
            if causal:
                qi = torch.arange(i0, i1)[:, None] + (n_k - n_q)
                S = S.masked_fill(torch.arange(j0, j1)[None, :] > qi, -math.inf)
            P = torch.where(empty, torch.zeros_like(S), torch.exp(S - Li))
            gv[..., j0:j1, :] += P.transpose(-2, -1) @ Gi
            dS = P * (Gi @ Vj.transpose(-2, -1) - Di)
            gq[..., i0:i1, :] += (dS @ Kj) * scale
            gk[..., j0:j1, :] += (dS.transpose(-2, -1) @ Qi) * scale
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_einsum_scaled_keys(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    r = 1.0 / math.sqrt(d)
    qf, go = q.to(ct), grad_out.to(ct)
    delta = torch.einsum("bhqd,bhqd->bhq", go, out.to(ct))[..., None]
    lse_c = lse.to(ct)[..., None]
    no_key = torch.isneginf(lse_c)
    q_pos = torch.arange(n_q)[:, None] + n_k - n_q
    grads_k, grads_v = [], []
    grad_q = torch.zeros(B, H, n_q, d, dtype=ct)
    start = 0
    while start < n_k:
        stop = min(start + block_size, n_k)
        kr = k[:, :, start:stop].to(ct) * r  # scaled keys
        vb = v[:, :, start:stop].to(ct)
        s = torch.einsum("bhqd,bhkd->bhqk", qf, kr)
        if causal:
            hide = torch.arange(start, stop)[None, :] > q_pos
            s = s.masked_fill(hide, -math.inf)
        p = torch.where(no_key, torch.zeros_like(s), torch.exp(s - lse_c))
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, go))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", go, vb) - delta)
        grad_q = grad_q + torch.einsum("bhqk,bhkd->bhqd", ds, kr)
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, qf) * r)
        start = stop
    grad_k = torch.cat(grads_k, dim=2)
    grad_v = torch.cat(grads_v, dim=2)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so the (...,) sums broadcast along the last "
          "axis: a shape error for most inputs, and row i's term paired with column i when the "
          "input is square",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_first_axis",
          "sums (grad * weights) over dim=0 instead of the last axis, mixing rows together",
          sb_sum_first_axis),
    Entry("softmax_backward", "wrong", "diagonal_of_jacobian_only",
          "uses only the diagonal of the Jacobian, p (1 - p) * grad, dropping the off-diagonal "
          "-p_i p_j terms",
          sb_diagonal_only),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "takes the row term as grad_weights.sum(-1) instead of (grad_weights * weights).sum(-1)",
          sb_row_term_without_p),
    Entry("softmax_backward", "wrong", "float32_not_cast_back",
          "computes with .float() and returns float32, instead of at least float32 cast back "
          "to weights' dtype (float64 inputs lose their dtype, half inputs too)",
          sb_float_no_cast_back),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "writes weights * grad - row instead of weights * (grad - row): the row term is not "
          "multiplied by the weights",
          sb_missing_parentheses),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_f64),
    Entry("softmax_backward", "right", "row_dot_matmul_addcmul", None, sb_batched_matmul),

    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "forgets the 1/sqrt(d) factor in grad_k = grad_s^T q (it is there in grad_q)",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with triu(1), aligned top-left, instead of bottom-right "
          "(key j visible when j <= i + N_k - N_q): wrong whenever N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "softmax_nan_on_empty_rows",
          "uses torch.softmax on masked scores, which returns NaN for a query row with no "
          "visible key instead of zeros (and no gradient)",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "grad_q_uses_v",
          "computes grad_q = grad_s @ v instead of grad_s @ k (copy of the grad_p line), giving "
          "the wrong values and shape (..., N_q, d_v)",
          ab_grad_q_uses_v),
    Entry("attention_backward", "wrong", "no_cast_back",
          "computes in at least float32 but returns the float32 gradients without casting back "
          "to the inputs' dtype",
          ab_no_cast_back),
    Entry("attention_backward", "wrong", "dot_T_reverses_all_axes",
          "transposes with .T, which on a batched tensor reverses every axis instead of the last "
          "two: right for 2-D inputs, a shape error for batched ones",
          ab_dot_T),
    Entry("attention_backward", "right", "delta_from_out_einsum_f64", None,
          ab_delta_from_out_f64),
    Entry("attention_backward", "right", "query_row_loop_f64", None, ab_row_loop),

    Entry("attention_backward_flops", "wrong", "ignores_recompute",
          "always adds the recomputation (10 N^2 d) and ignores recompute=False",
          abf_ignores_recompute),
    Entry("attention_backward_flops", "wrong", "multiply_add_as_one",
          "counts one multiply-add as 1 FLOP instead of 2 (N^2 d per product)",
          abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "ratio_gives_float",
          "computes forward * 2.5 for recompute, which returns a float instead of a plain int",
          abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "three_products",
          "counts three products (grad_v, grad_q, grad_k) and forgets grad_p = grad_out v^T",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "conditional_precedence",
          "writes 8 N^2 d + 2 N^2 d if recompute else 0: the conditional expression binds "
          "loosest, so recompute=False returns 0 instead of 8 N^2 d",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "n_d_squared",
          "uses N d^2 per product (the projection shape) instead of N^2 d",
          abf_n_d_squared),
    Entry("attention_backward_flops", "right", "sum_over_product_shapes", None,
          abf_sum_of_products),
    Entry("attention_backward_flops", "right", "closed_form_int", None, abf_closed_form),

    Entry("flash_attention_backward", "wrong", "delta_within_block",
          "computes the row term as rowsum(grad_p * p) inside each key block, a partial sum, "
          "instead of delta = rowsum(grad_out * out) over the whole row",
          fb_delta_per_block),
    Entry("flash_attention_backward", "wrong", "no_guard_for_minus_inf_lse",
          "recomputes p = exp(s - lse) without guarding rows whose lse is -inf, so a query with "
          "no visible key gives exp(-inf + inf) = NaN",
          fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in each key block instead of accumulating with +=, "
          "so only the last block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "masks key j for query i when j > i (top-left), forgetting the N_k - N_q offset of "
          "the bottom-right alignment",
          fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "returns_float32",
          "accumulates in float32 and returns float32 gradients instead of casting back to the "
          "inputs' dtype",
          fb_returns_float32),
    Entry("flash_attention_backward", "wrong", "second_pass_for_row_term",
          "gets the row term with a first pass over the keys (rowsum(grad_p * p)) instead of "
          "rowsum(grad_out * out): values right, but two extra products per block, more work "
          "than one recomputation",
          fb_second_pass_for_delta),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_f64", None,
          fb_two_d_tiles_f64),
    Entry("flash_attention_backward", "right", "einsum_scaled_keys", None,
          fb_einsum_scaled_keys),
]
