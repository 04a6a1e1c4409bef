"""Held-out learners' answers, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ softmax_backward
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (g * p).sum(dim=-1)
    return (p * (g - dot)).to(weights.dtype)


def sb_sum_over_axis0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    p = weights.float() if weights.dtype in (torch.float16, torch.bfloat16) else weights
    g = grad_weights.to(p.dtype)
    inner = (p * g).sum(-1, keepdim=True)
    return (p * (inner - g)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    # d softmax_i / d s_i = p_i (1 - p_i)
    return (g * p * (1 - p)).to(weights.dtype)


def sb_returns_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_mean_for_sum(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).mean(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_explicit_jacobian(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    out = torch.einsum("...ij,...j->...i", jac, g)
    return out.to(weights.dtype)


def sb_numpy_rows(weights, grad_weights):
    p = weights.detach().cpu().to(torch.float64).numpy()
    g = grad_weights.detach().cpu().to(torch.float64).numpy()
    flat_p = p.reshape(-1, p.shape[-1])
    flat_g = g.reshape(-1, g.shape[-1])
    res = np.empty_like(flat_p)
    for r in range(flat_p.shape[0]):
        pr, gr = flat_p[r], flat_g[r]
        res[r] = pr * gr - pr * np.dot(pr, gr)
    return torch.from_numpy(res.reshape(p.shape)).to(weights.dtype)


# ============================================================ attention_backward
def ab_no_scale_in_grads(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
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
    dq = ds @ K
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    qd, kd, vd, gd = q.double(), k.double(), v.double(), grad_out.double()
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = qd @ kd.transpose(-1, -2) / math.sqrt(d)
    if causal:
        keep = torch.tril(torch.ones(n_q, n_k, dtype=torch.bool))
        sc = sc.masked_fill(~keep, float("-inf"))
    top = sc.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isinf(top), 0.0)
    w = torch.exp(sc - top)
    tot = w.sum(-1, keepdim=True)
    p = w / tot.masked_fill(tot == 0, 1.0)
    grad_v = p.transpose(-1, -2) @ gd
    grad_p = gd @ vd.transpose(-1, -2)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ kd / math.sqrt(d)
    grad_k = grad_s.transpose(-1, -2) @ qd / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_k_not_transposed(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, gg = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = d ** -0.5
    s = (qq @ kk.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    e = (s - mx).exp()
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    gv = p.transpose(-2, -1) @ gg
    gp = gg @ vv.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ kk * scale
    gk = gs @ qq * scale
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_plain_softmax(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.softmax(s, dim=-1)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_dot_T(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = Q @ K.mT / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.T @ G
    dp = G @ V.mT
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.mT @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_softmax_over_queries(q, k, v, grad_out, causal=False):
    qd, kd, vd, gd = (t.double() for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.einsum("...qd,...kd->...qk", qd, kd) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-2), nan=0.0)
    gv = torch.einsum("...qk,...qe->...ke", p, gd)
    gp = torch.einsum("...qe,...ke->...qk", gd, vd)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = torch.einsum("...qk,...kd->...qd", gs, kd) / math.sqrt(d)
    gk = torch.einsum("...qk,...qd->...kd", gs, qd) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_einsum_delta_from_out(q, k, v, grad_out, causal=False):
    qd, kd, vd, gd = (t.to(torch.float64) for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", qd, kd) / math.sqrt(d)
    if causal:
        allowed = torch.arange(nk)[None, :] <= torch.arange(nq)[:, None] + (nk - nq)
        s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.nan_to_num(torch.exp(s - lse), nan=0.0)  # rows with no key: 0
    out = torch.einsum("...ij,...je->...ie", p, vd)
    delta = (gd * out).sum(-1, keepdim=True)  # = rowsum(grad_p * p)
    gp = torch.einsum("...ie,...je->...ij", gd, vd)
    gs = p * (gp - delta)
    gq = torch.einsum("...ij,...jd->...id", gs, kd) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", gs, qd) / math.sqrt(d)
    gv = torch.einsum("...ij,...ie->...je", p, gd)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_row_by_row_jacobian(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    nq, d = q.shape[-2], q.shape[-1]
    nk, dv = k.shape[-2], v.shape[-1]
    Q = q.double().reshape(-1, nq, d)
    K = k.double().reshape(-1, nk, d)
    V = v.double().reshape(-1, nk, dv)
    G = grad_out.double().reshape(-1, nq, dv)
    gq, gk, gv = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for b in range(Q.shape[0]):
        for i in range(nq):
            last = i + nk - nq if causal else nk - 1
            if last < 0:
                continue  # no visible key: out = 0, no gradient
            kk, vv = K[b, :last + 1], V[b, :last + 1]
            s = kk @ Q[b, i] / math.sqrt(d)
            p = torch.softmax(s, dim=0)
            gv[b, :last + 1] += torch.outer(p, G[b, i])
            gp = vv @ G[b, i]
            jac = torch.diag(p) - torch.outer(p, p)
            gs = jac @ gp
            gq[b, i] = gs @ kk / math.sqrt(d)
            gk[b, :last + 1] += torch.outer(gs, Q[b, i]) / math.sqrt(d)
    return (gq.reshape(*lead, nq, d).to(q.dtype), gk.reshape(*lead, nk, d).to(k.dtype),
            gv.reshape(*lead, nk, dv).to(v.dtype))


# ============================================================ attention_backward_flops
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len * seq_len * head_dim
    if recompute:
        flops += 4 * seq_len * seq_len * head_dim  # run the forward again
    return flops


def abf_mac_as_one(seq_len, head_dim, recompute=True):
    per_product = seq_len * seq_len * head_dim
    products = 5 if recompute else 4
    return products * per_product


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_inverted_flag(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    total = 8 * n2d
    if not recompute:
        total += 2 * n2d
    return total


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + 2 * seq_len ** 2 * head_dim if recompute else 0


def abf_three_products(seq_len, head_dim, recompute=True):
    # grad_v, grad_p, grad_s -> grad_q/grad_k
    products = 3 + (1 if recompute else 0)
    return products * 2 * seq_len * seq_len * head_dim


def abf_sum_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return 2 * seq_len * seq_len * head_dim * (5 if recompute else 4)


# ============================================================ flash_attention_backward
def fb_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))  # softmax backward of the block
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qc = q.to(ct)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    dq = torch.zeros_like(qc)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qc @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qc / math.sqrt(d)
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(Nq)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > rows, -math.inf)
        p = torch.exp(sc - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_delta_wrong_axis(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-2, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_two_level_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    # tiles over queries and keys, float64, like FlashAttention-2's outer loop over key blocks
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    sc = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    O, G = out.double(), grad_out.double()
    L = lse.double()
    L = torch.where(torch.isinf(L) & (L < 0), torch.full_like(L, math.inf), L)
    D = torch.einsum("bhnd,bhnd->bhn", G, O)
    dQ = torch.zeros(B, H, Nq, d, dtype=torch.float64)
    dK = torch.zeros(B, H, Nk, d, dtype=torch.float64)
    dV = torch.zeros(B, H, Nk, d, dtype=torch.float64)
    for j0 in range(0, Nk, block_size):
        j1 = min(Nk, j0 + block_size)
        Kj, Vj = K[:, :, j0:j1], V[:, :, j0:j1]
        for i0 in range(0, Nq, block_size):
            i1 = min(Nq, i0 + block_size)
            Qi, Gi = Q[:, :, i0:i1], G[:, :, i0:i1]
            S = torch.matmul(Qi, Kj.transpose(-1, -2)) * sc
            if causal:
                hidden = torch.arange(j0, j1)[None, :] > (torch.arange(i0, i1)[:, None] + Nk - Nq)
                S = S.masked_fill(hidden, -math.inf)
            P = torch.exp(S - L[:, :, i0:i1, None])
            dV[:, :, j0:j1] += torch.matmul(P.transpose(-1, -2), Gi)
            dP = torch.matmul(Gi, Vj.transpose(-1, -2))
            dS = P * (dP - D[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += torch.matmul(dS, Kj) * sc
            dK[:, :, j0:j1] += torch.matmul(dS.transpose(-1, -2), Qi) * sc
    return dQ.to(q.dtype), dK.to(q.dtype), dV.to(q.dtype)


def fb_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    Q = q.to(torch.float64)
    G = grad_out.to(torch.float64)
    delta = (G * out.to(torch.float64)).sum(dim=-1)  # (B, H, Nq)
    lse_d = lse.to(torch.float64)
    dead = torch.isneginf(lse_d)  # rows with no visible key
    lse_d = torch.where(dead, torch.zeros_like(lse_d), lse_d)
    grads_q = torch.zeros_like(Q)
    gk_blocks, gv_blocks = [], []
    for j0 in range(0, Nk, block_size):
        Kb = k[:, :, j0:j0 + block_size].to(torch.float64)
        Vb = v[:, :, j0:j0 + block_size].to(torch.float64)
        nb = Kb.shape[2]
        S = torch.einsum("bhid,bhjd->bhij", Q, Kb) / math.sqrt(d)
        P = torch.exp(S - lse_d[..., None])
        keep = ~dead[..., None]
        if causal:
            keep = keep & (torch.arange(j0, j0 + nb)[None, :]
                           <= torch.arange(Nq)[:, None] + (Nk - Nq))
        P = torch.where(keep, P, torch.zeros_like(P))
        gv_blocks.append(torch.einsum("bhij,bhie->bhje", P, G))
        dP = torch.einsum("bhie,bhje->bhij", G, Vb)
        dS = P * (dP - delta[..., None]) / math.sqrt(d)
        grads_q += torch.einsum("bhij,bhjd->bhid", dS, Kb)
        gk_blocks.append(torch.einsum("bhij,bhid->bhjd", dS, Q))
    return (grads_q.to(q.dtype), torch.cat(gk_blocks, dim=2).to(q.dtype),
            torch.cat(gv_blocks, dim=2).to(q.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_sum_without_keepdim",
          "sums g * p over the last axis without keepdim=True, so the (..., ) row term "
          "broadcasts against the wrong axis (or raises) instead of one value per row",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_sum_over_axis_0",
          "takes the row term with sum(dim=0) (over rows) instead of dim=-1 (within each row)",
          sb_sum_over_axis0),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "writes p * (rowsum(g * p) - g): the subtraction is the wrong way round, giving the "
          "negated gradient",
          sb_sign_flipped),
    Entry("softmax_backward", "wrong", "diagonal_only",
          "uses only the diagonal p_i (1 - p_i) of the Jacobian and forgets the off-diagonal "
          "-p_i p_j terms",
          sb_diagonal_only),
    Entry("softmax_backward", "wrong", "returns_float64",
          "computes in float64 and never casts back: float32 / float16 / bfloat16 inputs come "
          "back as float64",
          sb_returns_float64),
    Entry("softmax_backward", "wrong", "mean_for_sum",
          "uses .mean(-1) for the row term rowsum(g * p): divides it by n",
          sb_mean_for_sum),
    Entry("softmax_backward", "right", "explicit_jacobian_einsum", None, sb_explicit_jacobian),
    Entry("softmax_backward", "right", "numpy_row_loop", None, sb_numpy_rows),
    Entry("attention_backward", "wrong", "no_scale_in_grad_q_k",
          "scales the scores by 1/sqrt(d) in the forward but forgets the factor in "
          "grad_q = grad_s k / sqrt(d) and grad_k = grad_s^T q / sqrt(d)",
          ab_no_scale_in_grads),
    Entry("attention_backward", "wrong", "causal_top_left",
          "causal mask tril() without the N_k - N_q offset: top-left instead of the course's "
          "bottom-right alignment, so N_q != N_k differs",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "grad_k_not_transposed",
          "grad_k = grad_s @ q instead of grad_s^T @ q (wrong values when N_q = N_k, a shape "
          "error otherwise)",
          ab_grad_k_not_transposed),
    Entry("attention_backward", "wrong", "softmax_nan_rows",
          "uses torch.softmax on the masked scores: a causal row with no visible key "
          "(N_q > N_k) becomes NaN instead of zeros",
          ab_plain_softmax),
    Entry("attention_backward", "wrong", "dot_T_on_batch",
          "writes p.T for grad_v: on a batched tensor .T reverses every axis instead of "
          "swapping the last two (.mT), so batched inputs raise a shape error",
          ab_dot_T),
    Entry("attention_backward", "wrong", "softmax_over_queries",
          "normalises the weights with softmax over dim=-2 (the queries) instead of dim=-1 "
          "(the keys)",
          ab_softmax_over_queries),
    Entry("attention_backward", "right", "einsum_delta_from_out", None,
          ab_einsum_delta_from_out),
    Entry("attention_backward", "right", "row_by_row_jacobian", None, ab_row_by_row_jacobian),
    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "adds the whole forward, 4 N^2 d, for recompute instead of only the score product "
          "q k^T, 2 N^2 d",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "mac_as_one_flop",
          "counts one multiply-add as 1 FLOP instead of 2 (N^2 d per product)",
          abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "multiplies the forward count by 2.5 or 2, so it returns a float instead of a "
          "plain int",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "flag_inverted",
          "adds the recomputation when recompute is False and leaves it out when True",
          abf_inverted_flag),
    Entry("attention_backward_flops", "wrong", "conditional_precedence",
          "operator precedence: `a + b if recompute else 0` makes the whole sum conditional, "
          "so recompute=False returns 0",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "three_products",
          "counts three products for the backward (grad_v, grad_p and one for grad_q/grad_k) "
          "instead of four",
          abf_three_products),
    Entry("attention_backward_flops", "right", "sum_of_product_shapes", None,
          abf_sum_of_products),
    Entry("attention_backward_flops", "right", "closed_form", None, abf_closed_form),
    Entry("flash_attention_backward", "wrong", "no_neg_inf_lse_guard",
          "recomputes p = exp(s - lse) without guarding lse = -inf: rows with no visible key "
          "give exp(-inf - (-inf)) = NaN",
          fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "block_local_delta",
          "takes the row term from the current block, rowsum(grad_p * p) over the block's keys, "
          "instead of delta = rowsum(grad_out * out) over all keys",
          fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "unscaled_recompute",
          "recomputes the scores as q k^T without the 1/sqrt(d) scale, so exp(s - lse) are "
          "not the forward's probabilities",
          fb_unscaled_recompute),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in the loop over key blocks instead of "
          "accumulating with +=, so only the last block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "causal mask compares key j with query i directly (top-left), forgetting the "
          "N_k - N_q offset of the bottom-right convention",
          fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "delta_over_queries",
          "sums grad_out * out over dim=-2 (the queries) instead of dim=-1 (the features) for "
          "delta (a shape error when block_size != d, wrong values otherwise)",
          fb_delta_wrong_axis),
    Entry("flash_attention_backward", "right", "query_and_key_tiles", None, fb_two_level_tiles),
    Entry("flash_attention_backward", "right", "einsum_key_blocks", None, fb_einsum_key_blocks),
]
