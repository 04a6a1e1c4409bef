"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ==================================================================== softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_over_batch_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = torch.sum(p * g, dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_unweighted_row_term(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    f = torch.promote_types(weights.dtype, torch.float32)
    w, gw = weights.to(f), grad_weights.to(f)
    inner = (w * gw).sum(-1, keepdim=True)
    return (w * (inner - gw)).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    p = weights.float()
    g = grad_weights.float()
    return p * (g - (p * g).sum(-1, keepdim=True))


def sb_distributed_wrongly(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * g - (p * g).sum(-1, keepdim=True)).to(weights.dtype)


# ==================================================================== softmax_backward: right
def sb_einsum_f64(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    row = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    n = weights.shape[-1]
    ct = torch.promote_types(weights.dtype, torch.float32)
    P = weights.reshape(-1, n).to(ct)
    G = grad_weights.reshape(-1, n).to(ct)
    out = torch.empty_like(P)
    for r in range(P.shape[0]):
        out[r] = P[r] * (G[r] - torch.dot(P[r], G[r]))
    return out.reshape(weights.shape).to(weights.dtype)


# ================================================================== attention_backward: wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = d ** -0.5
    qc, kc, vc, gc = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qc @ kc.transpose(-1, -2) * scale
    if causal:
        keep = torch.tril(torch.ones(nq, nk, dtype=torch.bool))
        s = s.masked_fill(~keep, float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    w = torch.exp(s - top)
    tot = w.sum(-1, keepdim=True)
    p = w / tot.masked_fill(tot == 0, 1.0)
    gv = p.transpose(-1, -2) @ gc
    gp = gc @ vc.transpose(-1, -2)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ kc * scale).to(q.dtype), (gs.transpose(-1, -2) @ qc * scale).to(k.dtype),
            gv.to(v.dtype))


def ab_nan_empty_rows(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qc, kc, vc, gc = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qc @ kc.transpose(-1, -2) / math.sqrt(d)
    if causal:
        vis = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
        s = s.masked_fill(~vis, -math.inf)
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-1, -2) @ gc
    gp = gc @ vc.transpose(-1, -2)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ kc / math.sqrt(d)
    gk = gs.transpose(-1, -2) @ qc / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_dot_T(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = Q @ K.T / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    mx = s.max(dim=-1, keepdim=True).values
    ex = torch.exp(s - mx.nan_to_num(neginf=0.0))
    den = ex.sum(-1, keepdim=True)
    p = ex / den.clamp_min(1e-30)
    dV = p.T @ G
    dP = G @ V.T
    dS = p * (dP - (dP * p).sum(-1, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS.T @ Q / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_returns_float32(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    Q, K, V, G = q.float(), k.float(), v.float(), grad_out.float()
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    dv = torch.einsum("...ij,...id->...jd", p, G)
    dp = torch.einsum("...id,...jd->...ij", G, V)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    return dq, dk, dv


def ab_grad_q_uses_v(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    dV = p.transpose(-2, -1) @ G
    dP = G @ V.transpose(-2, -1)
    dS = p * (dP - (dP * p).sum(-1, keepdim=True))
    dQ = dS @ V / math.sqrt(d)
    dK = dS.transpose(-2, -1) @ Q / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


# ================================================================== attention_backward: right
def ab_einsum_float64(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(nq)[:, None]
        j = torch.arange(nk)[None, :]
        s = torch.where(j <= i + (nk - nq), s, torch.full_like(s, -math.inf))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    dp = torch.einsum("...qe,...ke->...qk", G, V)
    row = torch.einsum("...qk,...qk->...q", dp, p)[..., None]
    ds = p * (dp - row) / math.sqrt(d)
    return (torch.einsum("...qk,...kd->...qd", ds, K).to(q.dtype),
            torch.einsum("...qk,...qd->...kd", ds, Q).to(k.dtype),
            torch.einsum("...qk,...qe->...ke", p, G).to(v.dtype))


def ab_lse_delta_route(q, k, v, grad_out, causal=False):
    """p from the log-sum-exp, row term from delta = rowsum(grad_out * out)."""
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = Q @ K.transpose(-2, -1) * (1.0 / math.sqrt(d))
    if causal:
        hide = torch.ones(nq, nk, dtype=torch.bool).triu(nk - nq + 1)
        s = s.masked_fill(hide, -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse).nan_to_num(nan=0.0)
    out = p @ V
    delta = (G * out).sum(-1, keepdim=True)
    ds = p * (G @ V.transpose(-2, -1) - delta)
    gq = ds @ K / math.sqrt(d)
    gk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    gv = p.transpose(-2, -1) @ G
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def abf_mac_as_one(seq_len, head_dim, recompute=True):
    per_product = seq_len * seq_len * head_dim
    n_products = 5 if recompute else 4
    return n_products * per_product


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ** 2 * head_dim
    if recompute:
        flops += 4 * seq_len ** 2 * head_dim  # the forward again
    return flops


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    total = 8 * seq_len * seq_len * head_dim
    if not recompute:
        total += 2 * seq_len * seq_len * head_dim
    return total


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 if recompute else 0


def abf_three_products(seq_len, head_dim, recompute=True):
    prod = 2 * seq_len * seq_len * head_dim
    count = 3  # grad_v, grad_q, grad_k
    if recompute:
        count += 1
    return count * prod


# ============================================================ attention_backward_flops: right
def abf_product_shapes(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out: (N x N) @ (N x d)
              (n, d, n),  # grad_p = grad_out v^T: (N x d) @ (d x N)
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * c for m, kk, c in shapes)


def abf_closed_form_int(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len ** 2 * head_dim


# ============================================================ flash_attention_backward: wrong
def fb_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
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
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).to(ct)[..., None]
    last = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty((B, H, nk, d), dtype=ct)
    dv = torch.empty((B, H, nk, d), dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[:, :, a:b].to(ct), v[:, :, a:b].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > last, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:b] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[:, :, a:b] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(nq)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_drops_ragged_tail(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for j in range(max(1, nk // block_size)):
        a, b = j * block_size, min((j + 1) * block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_v_from_out(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    o = out.to(ct)
    delta = (g * o).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ o
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_two_d_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries and keys, float64, python loops over both."""
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    Q = q.double() / math.sqrt(d)
    K, V, G = k.double(), v.double(), grad_out.double()
    D = (G * out.double()).sum(-1)  # (B, H, N_q)
    M = lse.double().clone()
    M[torch.isneginf(M)] = math.inf
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for i0 in range(0, nq, block_size):
        i1 = min(i0 + block_size, nq)
        for j0 in range(0, nk, block_size):
            j1 = min(j0 + block_size, nk)
            s = Q[..., i0:i1, :] @ K[..., j0:j1, :].transpose(-1, -2)
            if causal:
                qi = torch.arange(i0, i1)[:, None] + (nk - nq)
                kj = torch.arange(j0, j1)[None, :]
                s = s.masked_fill(kj > qi, -math.inf)
            p = torch.exp(s - M[..., i0:i1, None])
            dV[..., j0:j1, :] += p.transpose(-1, -2) @ G[..., i0:i1, :]
            ds = p * (G[..., i0:i1, :] @ V[..., j0:j1, :].transpose(-1, -2)
                      - D[..., i0:i1, None])
            dQ[..., i0:i1, :] += ds @ K[..., j0:j1, :]
            dK[..., j0:j1, :] += ds.transpose(-1, -2) @ Q[..., i0:i1, :]
    dQ = dQ / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    inv = 1.0 / math.sqrt(d)
    Q, G = q.to(ct), grad_out.to(ct)
    delta = torch.einsum("bhid,bhid->bhi", G, out.to(ct))
    lse_c = torch.where(torch.isfinite(lse), lse, torch.full_like(lse, math.inf)).to(ct)
    grad_q = torch.zeros_like(Q)
    dk_parts, dv_parts = [], []
    for kb, vb, j0 in zip(torch.split(k, block_size, dim=2), torch.split(v, block_size, dim=2),
                          range(0, nk, block_size)):
        kb, vb = kb.to(ct), vb.to(ct)
        s = torch.einsum("bhid,bhjd->bhij", Q, kb) * inv
        if causal:
            allowed = (torch.arange(j0, j0 + kb.shape[2])[None, :]
                       <= torch.arange(nq)[:, None] + nk - nq)
            s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=ct))
        p = torch.exp(s - lse_c[..., None])
        dv_parts.append(torch.einsum("bhij,bhid->bhjd", p, G))
        dp = torch.einsum("bhid,bhjd->bhij", G, vb)
        ds = p * (dp - delta[..., None])
        grad_q = grad_q + torch.einsum("bhij,bhjd->bhid", ds, kb)
        dk_parts.append(torch.einsum("bhij,bhid->bhjd", ds, Q) * inv)
    return ((grad_q * inv).to(q.dtype), torch.cat(dk_parts, dim=2).to(k.dtype),
            torch.cat(dv_parts, dim=2).to(v.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so the (..., ) sums broadcast along the "
          "last axis instead of lining up with their rows (a shape error, or silently wrong "
          "for square inputs)",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "sum_over_first_axis",
          "sums grad_weights * weights over dim=0 instead of along the row (dim=-1)",
          sb_sum_over_batch_axis),
    Entry("softmax_backward", "wrong", "unweighted_row_term",
          "subtracts the plain row sum of grad_weights instead of the weighted sum "
          "(grad_weights * weights).sum(-1)",
          sb_unweighted_row_term),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "writes weights * (row_term - grad_weights), the negative of the gradient",
          sb_sign_flipped),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes with .float() and returns the float32 result without casting back to "
          "weights' dtype",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "row_term_not_weighted_by_p",
          "expands the product as p * g - row_term, so the row term is not multiplied by "
          "weights (p * (g - row_term) distributed wrongly)",
          sb_distributed_wrongly),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_f64),
    Entry("softmax_backward", "right", "row_loop_dot", None, sb_row_loop),

    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "applies the 1/sqrt(d) factor to grad_q but forgets it on grad_k",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() (diagonal 0, top-left aligned) instead of "
          "tril(N_k - N_q), so causal cases with N_q != N_k mask the wrong keys",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "nan_on_empty_rows",
          "uses torch.softmax on the masked scores, which returns NaN for a query row with "
          "no visible key, and the NaN spreads into the gradients instead of zeros",
          ab_nan_empty_rows),
    Entry("attention_backward", "wrong", "dot_T_on_batches",
          "transposes with .T, which reverses all axes of a batched (..., N, d) tensor "
          "instead of swapping the last two, so batched inputs raise a shape error",
          ab_dot_T),
    Entry("attention_backward", "wrong", "returns_float32",
          "computes in float32 with .float() and returns the gradients without casting back "
          "to the inputs' dtype",
          ab_returns_float32),
    Entry("attention_backward", "wrong", "grad_q_uses_v",
          "computes grad_q as grad_s @ v instead of grad_s @ k (so grad_q even has the wrong "
          "shape when d_v != d)",
          ab_grad_q_uses_v),
    Entry("attention_backward", "right", "einsum_float64", None, ab_einsum_float64),
    Entry("attention_backward", "right", "lse_delta_route", None, ab_lse_delta_route),

    Entry("attention_backward_flops", "wrong", "mac_as_one_flop",
          "counts a multiply-add as one FLOP, so every N^2 d product is counted once "
          "instead of twice",
          abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "charges the recomputation as the whole forward (4 N^2 d, scores and weighted sum) "
          "although only the scores q k^T are recomputed (2 N^2 d)",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "adds the recomputation when recompute is False and leaves it out when it is True",
          abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "multiplies the forward's count by 2.5, which returns a float instead of a plain "
          "int",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "conditional_precedence",
          "writes 8*n*n*d + 2 if recompute else 0: the conditional expression binds loosest, "
          "so it adds 2 instead of 2 N^2 d and returns 0 without recompute",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "grad_p_forgotten",
          "counts only three products (grad_v, grad_q, grad_k) and forgets "
          "grad_p = grad_out v^T",
          abf_three_products),
    Entry("attention_backward_flops", "right", "product_shapes_sum", None, abf_product_shapes),
    Entry("attention_backward_flops", "right", "closed_form_int", None, abf_closed_form_int),

    Entry("flash_attention_backward", "wrong", "row_term_per_block",
          "computes the row term as rowsum(grad_p * p) of the current key block only, "
          "instead of delta = rowsum(grad_out * out) over all keys",
          fb_local_delta),
    Entry("flash_attention_backward", "wrong", "no_lse_guard",
          "recomputes p = exp(s - lse) without handling lse = -inf, so a query with no "
          "visible key gives exp(-inf + inf) = NaN",
          fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in each block instead of accumulating with +=, so "
          "only the last key block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "compares key j with query i directly (top-left aligned), forgetting the "
          "N_k - N_q offset of the bottom-right causal mask",
          fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "drops_ragged_tail",
          "loops over N_k // block_size blocks, so the keys of a shorter last block get no "
          "gradient (grad_k, grad_v stay zero) and add nothing to grad_q",
          fb_drops_ragged_tail),
    Entry("flash_attention_backward", "wrong", "grad_v_from_out",
          "computes grad_v as p^T @ out instead of p^T @ grad_out",
          fb_grad_v_from_out),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fb_two_d_tiles_f64),
    Entry("flash_attention_backward", "right", "einsum_split_blocks", None,
          fb_einsum_key_blocks),
]
