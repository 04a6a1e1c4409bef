"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_axis0(weights, grad_weights):
    compute = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(compute)
    g = grad_weights.to(compute)
    dot = (p * g).sum(dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_unweighted_row_sum(weights, grad_weights):
    c = torch.promote_types(weights.dtype, torch.float32)
    w, gw = weights.to(c), grad_weights.to(c)
    return (w * (gw - gw.sum(-1, keepdim=True))).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    f = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(f), grad_weights.to(f)
    inner = torch.sum(p * g, dim=-1, keepdim=True)
    return (p * (inner - g)).to(weights.dtype)


def sb_no_cast_back(weights, grad_weights):
    compute = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(compute), grad_weights.to(compute)
    return p * (g - (g * p).sum(dim=-1, keepdim=True))


def sb_lesson03_jacobian(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    jac = torch.diag(p) - torch.outer(p, p)  # lesson 03: diag(p) - p p^T
    return (jac @ grad_weights.to(ct)).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_einsum_float64(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    dot = torch.einsum("...n,...n->...", p, g).unsqueeze(-1)
    return (p * g - p * dot).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    n = weights.shape[-1]
    P = weights.reshape(-1, n).double()
    G = grad_weights.reshape(-1, n).double()
    out = torch.empty_like(P)
    for r in range(P.shape[0]):
        s = float(P[r] @ G[r])
        out[r] = P[r] * (G[r] - s)
    return out.reshape(weights.shape).to(weights.dtype)


# ============================================================ attention_backward: wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = m.masked_fill(torch.isinf(m), 0.0)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / z.masked_fill(z == 0, 1.0)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_v_no_transpose(q, k, v, grad_out, causal=False):
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    scale = d ** -0.5
    Q, K, V, G = q.to(compute), k.to(compute), v.to(compute), grad_out.to(compute)
    S = (Q @ K.transpose(-1, -2)) * scale
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        S = S.masked_fill(~keep, float("-inf"))
    top = S.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    E = torch.exp(S - top)
    tot = E.sum(dim=-1, keepdim=True)
    P = E / torch.where(tot == 0, torch.ones_like(tot), tot)
    dV = P @ G
    dP = G @ V.transpose(-1, -2)
    dS = P * (dP - (dP * P).sum(dim=-1, keepdim=True))
    dQ = dS @ K * scale
    dK = dS.transpose(-1, -2) @ Q * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    c = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    a, b_, vv, go = q.to(c), k.to(c), v.to(c), grad_out.to(c)
    scores = a @ b_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        mask = torch.tril(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool))
        scores = scores.masked_fill(~mask, -math.inf)
    mx = scores.amax(dim=-1, keepdim=True)
    mx = torch.where(torch.isneginf(mx), torch.zeros_like(mx), mx)
    w = torch.exp(scores - mx)
    tot = w.sum(-1, keepdim=True)
    p = w / torch.where(tot == 0, torch.ones_like(tot), tot)
    grad_v = p.transpose(-2, -1) @ go
    grad_p = go @ vv.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ b_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ a / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qc, kc, vc, gc = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = torch.matmul(qc, kc.transpose(-2, -1)) / math.sqrt(d)
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    grad_v = torch.matmul(p.transpose(-2, -1), gc)
    grad_p = torch.matmul(gc, vc.transpose(-2, -1))
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = torch.matmul(grad_s, kc) / math.sqrt(d)
    grad_k = torch.matmul(grad_s.transpose(-2, -1), qc) / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_row_term_over_queries(q, k, v, grad_out, causal=False):
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    inv = 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.to(compute) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) * inv
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / tot.masked_fill(tot == 0, 1.0)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-2, keepdim=True))
    return ((grad_s @ k_ * inv).to(q.dtype), (grad_s.transpose(-2, -1) @ q_ * inv).to(k.dtype),
            grad_v.to(v.dtype))


def ab_no_softmax_row_term(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2:]
    nk = k.shape[-2]
    Q, K, V, dO = (t.to(ct) for t in (q, k, v, grad_out))
    S = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        S = S.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    M = S.amax(-1, keepdim=True)
    M = torch.where(torch.isinf(M), torch.zeros_like(M), M)
    E = (S - M).exp()
    Z = E.sum(-1, keepdim=True)
    P = E / torch.where(Z == 0, torch.ones_like(Z), Z)
    dV = torch.einsum("...qk,...qd->...kd", P, dO)
    dP = torch.einsum("...qd,...kd->...qk", dO, V)
    dS = P * dP  # softmax backward
    dQ = torch.einsum("...qk,...kd->...qd", dS, K) / math.sqrt(d)
    dK = torch.einsum("...qk,...qd->...kd", dS, Q) / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


# ============================================================ attention_backward: right
def ab_einsum_float64(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = torch.where(j <= i + (n_k - n_q), s, torch.tensor(-math.inf, dtype=torch.float64))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.nan_to_num(torch.exp(s - lse), nan=0.0)  # rows with no key: 0
    dv = torch.einsum("...ij,...id->...jd", p, G)
    dp = torch.einsum("...id,...jd->...ij", G, V)
    ds = p * (dp - torch.einsum("...ij,...ij->...i", dp, p)[..., None])
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_delta_from_out(q, k, v, grad_out, causal=False):
    """Row term from delta = rowsum(grad_out * out), as FlashAttention-2 does."""
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    kk, vv, go = k.to(ct), v.to(ct), grad_out.to(ct)
    s = qs @ kk.transpose(-2, -1)
    if causal:
        hidden = torch.arange(n_k)[None, :] - torch.arange(n_q)[:, None] > n_k - n_q
        s = s.masked_fill(hidden, -math.inf)
    row_max = s.max(dim=-1, keepdim=True).values
    row_max = torch.nan_to_num(row_max, neginf=0.0)
    e = torch.exp(s - row_max)
    z = e.sum(-1, keepdim=True)
    p = e / torch.clamp(z, min=torch.finfo(ct).tiny)
    out = p @ vv
    delta = (go * out).sum(-1, keepdim=True)
    grad_s = p * (go @ vv.transpose(-2, -1) - delta)
    grad_q = (grad_s @ kk) / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ qs
    grad_v = p.transpose(-2, -1) @ go
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def abf_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ** 2 * head_dim
    if recompute:
        flops += 4 * seq_len ** 2 * head_dim  # run the forward again
    return flops


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * 2.5 if recompute else forward * 2.0


def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    total = 8 * n * n * d
    if not recompute:
        total += 2 * n * n * d
    return total


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    N, d = seq_len, head_dim
    return 8 * N * N * d + 2 * N * N * d if recompute else 0


def abf_n_d_squared(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim * head_dim
    count = 4 + int(recompute)
    return count * per_product


# ============================================================ attention_backward_flops: right
def abf_sum_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * c for m, kk, c in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len ** 2 * head_dim


# ============================================================ flash_attention_backward: wrong
def fab_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        delta = (gp * p).sum(-1, keepdim=True)  # row term of this block
        gs = p * (gp - delta)
        gq += gs @ kb
        gk[..., s0:s1, :] = gs.transpose(-2, -1) @ qs
    gq = gq / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_lse_unguarded(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    q_s = q.to(compute) * scale
    go = grad_out.to(compute)
    delta = (go * out.to(compute)).sum(-1, keepdim=True)
    lse_ = lse.to(compute)[..., None]
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(q_s)
    dk = torch.empty(k.shape, dtype=compute)
    dv = torch.empty(v.shape, dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb = k[..., start:stop, :].to(compute)
        vb = v[..., start:stop, :].to(compute)
        s = q_s @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > rows, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ q_s
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    c = torch.promote_types(q.dtype, torch.float32)
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    Qs = q.to(c) * D ** -0.5
    dO = grad_out.to(c)
    Di = (dO * out.to(c)).sum(-1, keepdim=True)
    lse_safe = lse.to(c).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qp = torch.arange(Nq).unsqueeze(1) + Nk - Nq
    dQ = torch.zeros_like(Qs)
    dK = torch.empty((B, H, Nk, D), dtype=c)
    dV = torch.empty((B, H, Nk, D), dtype=c)
    for j0 in range(0, Nk, block_size):
        j1 = min(Nk, j0 + block_size)
        Kj, Vj = k[:, :, j0:j1].to(c), v[:, :, j0:j1].to(c)
        S = Qs @ Kj.transpose(2, 3)
        if causal:
            S = S.masked_fill(torch.arange(j0, j1).unsqueeze(0) > qp, -math.inf)
        P = torch.exp2(S - lse_safe)
        dV[:, :, j0:j1] = P.transpose(2, 3) @ dO
        dS = P * (dO @ Vj.transpose(2, 3) - Di)
        dQ += dS @ Kj
        dK[:, :, j0:j1] = dS.transpose(2, 3) @ Qs
    return (dQ * D ** -0.5).to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qsc = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(dim=-1, keepdim=True)
    l = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qsc)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb = k[..., start:stop, :].to(ct)
        vb = v[..., start:stop, :].to(ct)
        s = qsc @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - l)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g
        grad_s = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q = grad_s @ kb
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ qsc
    grad_q = grad_q / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(compute) / math.sqrt(d)
    go = grad_out.to(compute)
    delta = (go * out.to(compute)).sum(-1, keepdim=True)
    lse_ = lse.to(compute).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qi = torch.arange(n_q)[:, None]
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty(k.shape, dtype=compute)
    grad_v = torch.empty(v.shape, dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb = k[..., start:stop, :].to(compute)
        vb = v[..., start:stop, :].to(compute)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qi, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ go
        grad_s = p * (go @ vb.transpose(-2, -1) - delta)
        grad_q += grad_s @ kb
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ qs
    return (grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_returns_float32(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    f = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    qs = q.to(f) * d ** -0.5
    g = grad_out.to(f)
    delta = (g * out.to(f)).sum(-1, keepdim=True)
    lse_f = lse.to(f).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=f)
    dv = torch.empty(v.shape, dtype=f)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(f), v[..., a:b, :].to(f)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = (s - lse_f).exp()
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return dq * d ** -0.5, dk, dv


# ============================================================ flash_attention_backward: right
def fab_two_d_tiles_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries AND keys; delta per query tile from out."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    Q, K, V, O, G = (t.double() for t in (q, k, v, out, grad_out))
    L = lse.double()
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        Qi = Q[..., i0:i1, :] * sc
        Gi = G[..., i0:i1, :]
        Di = (Gi * O[..., i0:i1, :]).sum(-1, keepdim=True)
        Li = L[..., i0:i1, None]
        empty = torch.isneginf(Li)
        Li = torch.where(empty, torch.zeros_like(Li), Li)
        qpos = torch.arange(i0, i1)[:, None] + (n_k - n_q)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            S = Qi @ K[..., j0:j1, :].transpose(-2, -1)
            P = torch.exp(S - Li)
            if causal:
                P = torch.where(torch.arange(j0, j1)[None, :] > qpos, torch.zeros_like(P), P)
            P = torch.where(empty, torch.zeros_like(P), P)
            dV[..., j0:j1, :] += P.transpose(-2, -1) @ Gi
            dS = P * (Gi @ V[..., j0:j1, :].transpose(-2, -1) - Di)
            dQ[..., i0:i1, :] += dS @ K[..., j0:j1, :] * sc
            dK[..., j0:j1, :] += dS.transpose(-2, -1) @ Qi
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_einsum_reversed_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) * (d ** -0.5)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1)  # (B, H, N_q)
    lse_c = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).to(ct)
    offset = n_k - n_q
    grad_q = torch.zeros_like(qs)
    grad_k_parts, grad_v_parts = [], []
    for start in reversed(range(0, n_k, block_size)):
        stop = min(start + block_size, n_k)
        kb = k[..., start:stop, :].to(ct)
        vb = v[..., start:stop, :].to(ct)
        s = torch.einsum("bhid,bhjd->bhij", qs, kb)
        if causal:
            see = torch.arange(start, stop)[None, :] <= torch.arange(n_q)[:, None] + offset
            s = torch.where(see, s, torch.full_like(s, -math.inf))
        p = torch.exp(s - lse_c[..., None])
        grad_v_parts.insert(0, torch.einsum("bhij,bhid->bhjd", p, g))
        dp = torch.einsum("bhid,bhjd->bhij", g, vb)
        ds = p * (dp - delta[..., None])
        grad_q = grad_q + torch.einsum("bhij,bhjd->bhid", ds, kb)
        grad_k_parts.insert(0, torch.einsum("bhij,bhid->bhjd", ds, qs))
    grad_k = torch.cat(grad_k_parts, dim=-2)
    grad_v = torch.cat(grad_v_parts, dim=-2)
    return ((grad_q * d ** -0.5).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "no_keepdim",
          "sums the row term without keepdim=True, so the (..., ) sums broadcast against the "
          "last axis instead of their own rows (or the call raises)", sb_no_keepdim),
    Entry("softmax_backward", "wrong", "sum_axis0",
          "sums grad_weights * weights over dim=0 (across rows) instead of the last axis",
          sb_sum_axis0),
    Entry("softmax_backward", "wrong", "unweighted_row_sum",
          "subtracts the plain row sum of grad_weights instead of the weighted sum "
          "(grad_weights * weights).sum(-1)", sb_unweighted_row_sum),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "computes weights * (row term - grad_weights): the sign of the whole gradient is "
          "flipped", sb_sign_flipped),
    Entry("softmax_backward", "wrong", "no_cast_back",
          "computes in float32 but returns float32 for float16 / bfloat16 inputs instead of "
          "weights' dtype", sb_no_cast_back),
    Entry("softmax_backward", "wrong", "lesson03_jacobian",
          "reuses lesson 03's torch.diag(p) - torch.outer(p, p), which only works for one 1-D "
          "row: on (..., n) inputs torch.diag takes a diagonal and outer raises", sb_lesson03_jacobian),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "row_loop_float64", None, sb_row_loop),
    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "multiplies grad_q by 1/sqrt(d) but forgets the same factor in grad_k",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "grad_v_no_transpose",
          "computes grad_v = p @ grad_out instead of p^T @ grad_out (raises when N_q != N_k, "
          "wrong values when they are equal)", ab_grad_v_no_transpose),
    Entry("attention_backward", "wrong", "causal_top_left",
          "the causal mask is tril() with no N_k - N_q offset (top-left aligned), wrong when "
          "N_q != N_k", ab_causal_top_left),
    Entry("attention_backward", "wrong", "softmax_nan_rows",
          "uses torch.softmax on the masked scores, so a query row with no visible key gives NaN "
          "weights and NaN gradients instead of zeros", ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "sums grad_p * p over dim=-2 (the queries) instead of dim=-1 (the keys) for the "
          "softmax row term", ab_row_term_over_queries),
    Entry("attention_backward", "wrong", "no_softmax_row_term",
          "takes grad_s = p * grad_p, forgetting the - rowsum(grad_p * p) term of the softmax "
          "backward", ab_no_softmax_row_term),
    Entry("attention_backward", "right", "einsum_float64_logsumexp", None, ab_einsum_float64),
    Entry("attention_backward", "right", "delta_from_out", None, ab_delta_from_out),
    Entry("attention_backward_flops", "wrong", "mac_as_one",
          "counts a multiply-add as 1 FLOP: N^2 d per product instead of 2 N^2 d",
          abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "with recompute adds the whole forward (4 N^2 d, scores and weighted sum) instead of "
          "the scores q k^T alone (2 N^2 d)", abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "ratio_float",
          "returns 2.5 (or 2.0) times the forward's FLOPs, a float, where the contract wants a "
          "plain int", abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "recompute_inverted",
          "adds the recomputation when recompute is False and leaves it out when True: the "
          "condition is inverted", abf_recompute_inverted),
    Entry("attention_backward_flops", "wrong", "conditional_precedence",
          "writes 8 N^2 d + 2 N^2 d if recompute else 0: the conditional expression binds "
          "looser than +, so recompute=False returns 0", abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "n_d_squared",
          "counts each product as 2 N d^2 (like a projection) instead of 2 N^2 d",
          abf_n_d_squared),
    Entry("attention_backward_flops", "right", "sum_of_product_shapes", None,
          abf_sum_of_products),
    Entry("attention_backward_flops", "right", "closed_form", None, abf_closed_form),
    Entry("flash_attention_backward", "wrong", "local_delta",
          "computes the row term as rowsum(grad_p * p) of the current key block only, instead "
          "of delta = rowsum(grad_out * out) over all keys", fab_local_delta),
    Entry("flash_attention_backward", "wrong", "lse_unguarded",
          "uses lse as it is, so a row with no visible key (lse = -inf) gives "
          "exp(-inf - (-inf)) = NaN instead of zero gradients", fab_lse_unguarded),
    Entry("flash_attention_backward", "wrong", "exp2",
          "recomputes p with torch.exp2(s - lse), although lse is a natural log: exp belongs "
          "there (exp2 needs scores and lse scaled by log2 e)", fab_exp2),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in each block instead of accumulating with +=, so "
          "only the last key block contributes to grad_q", fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "the block mask compares key j with query i without the N_k - N_q offset (top-left "
          "aligned), wrong when N_q != N_k", fab_causal_top_left),
    Entry("flash_attention_backward", "wrong", "returns_float32",
          "computes in float32 and returns the gradients in float32, not in the inputs' dtype",
          fab_returns_float32),
    Entry("flash_attention_backward", "right", "two_d_tiles_float64", None,
          fab_two_d_tiles_float64),
    Entry("flash_attention_backward", "right", "einsum_reversed_blocks", None,
          fab_einsum_reversed_blocks),
]
