"""Held-out learners' answers, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward — wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_over_dim0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = torch.sum(p * g, dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_row_term_without_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    p = weights.float()
    g = grad_weights.float()
    inner = (p * g).sum(-1, keepdim=True)
    return p * (g - inner)


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_torch_diag_batched(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    jac = torch.diag(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # diag(p) - p p^T
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


# ============================================================ softmax_backward — right
def sb_einsum_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    row = torch.einsum("...i,...i->...", p, g)
    return (p * (g - row.unsqueeze(-1))).to(weights.dtype)


def sb_expanded_addcmul(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    pg = p * g
    # p*g - p * sum(p*g), written as pg + (-sum) * p
    return torch.addcmul(pg, -pg.sum(-1, keepdim=True), p).to(weights.dtype)


# ============================================================ attention_backward — wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    n_q, n_k, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
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
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = q.shape[-1] ** -0.5
    scores = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        nq, nk = scores.shape[-2:]
        keep = torch.tril(torch.ones(nq, nk, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    w = torch.exp(scores - top)
    tot = w.sum(-1, keepdim=True)
    p = w / tot.clamp_min(1e-30)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_) * scale).to(q.dtype), ((gs.transpose(-2, -1) @ q_) * scale).to(k.dtype), \
        gv.to(v.dtype)


def ab_row_term_without_p(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, dO = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    nq, nk, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
    S = torch.matmul(Q, K.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        allowed = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
        S = S.masked_fill(~allowed, -math.inf)
    mx = S.amax(-1, keepdim=True)
    mx = mx.masked_fill(torch.isneginf(mx), 0.0)
    E = torch.exp(S - mx)
    tot = E.sum(-1, keepdim=True)
    P = E / tot.masked_fill(tot == 0, 1.0)
    dV = P.transpose(-1, -2) @ dO
    dP = dO @ V.transpose(-1, -2)
    dS = P * (dP - dP.sum(-1, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-1, -2) @ Q / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_empty_rows_nan(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    d = q.shape[-1]
    s = qf @ kf.transpose(-2, -1) / math.sqrt(d)
    if causal:
        n_q, n_k = s.shape[-2], s.shape[-1]
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~vis, -math.inf)
    p = torch.softmax(s, dim=-1)
    grad_v = p.transpose(-2, -1) @ gf
    grad_p = gf @ vf.transpose(-2, -1)
    grad_s = p * (grad_p - (p * grad_p).sum(-1, keepdim=True))
    grad_q = grad_s @ kf / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ qf / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_k_uses_k(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    d = Q.shape[-1]
    n_q, n_k = Q.shape[-2], K.shape[-2]
    S = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        S = S.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    M = S.amax(-1, keepdim=True)
    M = torch.where(torch.isinf(M), torch.zeros_like(M), M)
    E = torch.exp(S - M)
    Z = E.sum(-1, keepdim=True)
    P = E / torch.where(Z == 0, torch.ones_like(Z), Z)
    dV = P.transpose(-2, -1) @ G
    dP = G @ V.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-2, -1) @ K / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_no_cast_back(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qc, kc, vc, gc = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    d = q.shape[-1]
    nq, nk = q.shape[-2], k.shape[-2]
    sc = qc @ kc.transpose(-2, -1) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    hi = sc.amax(-1, keepdim=True)
    hi = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    ex = torch.exp(sc - hi)
    den = ex.sum(-1, keepdim=True)
    p = ex / torch.where(den == 0, torch.ones_like(den), den)
    dv = p.transpose(-2, -1) @ gc
    dp = gc @ vc.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ kc / math.sqrt(d), ds.transpose(-2, -1) @ qc / math.sqrt(d), dv


# ============================================================ attention_backward — right
def ab_einsum_float64(q, k, v, grad_out, causal=False):
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q).unsqueeze(1)
        j = torch.arange(n_k).unsqueeze(0)
        s = torch.where(j - i <= n_k - n_q, s, torch.full_like(s, -math.inf))
    top = torch.where(torch.isinf(s.amax(-1, keepdim=True)), torch.zeros_like(s[..., :1]),
                      s.amax(-1, keepdim=True))
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = torch.where(z > 0, e / torch.where(z > 0, z, torch.ones_like(z)), torch.zeros_like(e))
    gv = torch.einsum("...ij,...ie->...je", p, G)
    gp = torch.einsum("...ie,...je->...ij", G, V)
    row = torch.einsum("...ij,...ij->...i", gp, p).unsqueeze(-1)
    gs = p * (gp - row)
    gq = torch.einsum("...ij,...jd->...id", gs, K) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", gs, Q) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_delta_from_out(q, k, v, grad_out, causal=False):
    """Dense version of the FlashAttention route: p from the log-sum-exp, row term from out."""
    f = torch.float64
    Q, K, V, dO = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    S = (Q / math.sqrt(d)) @ K.transpose(-2, -1)
    if causal:
        blocked = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
        S = S.masked_fill(blocked, -math.inf)
    lse = torch.logsumexp(S, dim=-1, keepdim=True)
    lse = lse.masked_fill(torch.isneginf(lse), math.inf)  # no key: exp(-inf - inf) = 0
    P = torch.exp(S - lse)
    out = P @ V
    delta = (dO * out).sum(-1, keepdim=True)
    dS = P * (dO @ V.transpose(-2, -1) - delta)
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-2, -1) @ Q / math.sqrt(d)
    dV = P.transpose(-2, -1) @ dO
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


# ============================================================ attention_backward_flops — wrong
def abf_mac_one_flop(seq_len, head_dim, recompute=True):
    per_product = seq_len * seq_len * head_dim
    n_products = 5 if recompute else 4
    return n_products * per_product


def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ** 2 * head_dim
    if not recompute:
        flops += 2 * seq_len ** 2 * head_dim
    return flops


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2.0)


def abf_three_products(seq_len, head_dim, recompute=True):
    # grad_v, grad_p, and the gradient of the scores (q and k in one)
    mm = 2 * seq_len * seq_len * head_dim
    total = 3 * mm
    if recompute:
        total += mm
    return total


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    backward = 8 * n * n * d
    forward = 4 * n * n * d
    return backward + forward if recompute else backward


def abf_xor_power(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return (10 if recompute else 8) * n ^ 2 * d


# ============================================================ attention_backward_flops — right
def abf_sum_of_products(seq_len, head_dim, recompute=True):
    products = ["grad_v = p^T dO", "grad_p = dO v^T", "grad_q = ds k", "grad_k = ds^T q"]
    if recompute:
        products.append("s = q k^T")
    return sum(2 * seq_len * head_dim * seq_len for _ in products)


def abf_from_forward(seq_len, head_dim, recompute=True):
    fwd = 4 * seq_len * seq_len * head_dim
    return fwd * 5 // 2 if recompute else fwd * 2


# ============================================================ flash_attention_backward — wrong
def fab_delta_per_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, N, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(N)[:, None] + (nk - N)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        delta = (dp * p).sum(-1, keepdim=True)  # the row term, from this block
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_per_block_softmax(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, N, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    qpos = torch.arange(N).unsqueeze(1) + (nk - N)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b).unsqueeze(0) > qpos, -math.inf)
        m = s.amax(-1, keepdim=True)
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        e = torch.exp(s - m)
        z = e.sum(-1, keepdim=True)
        p = e / torch.where(z == 0, torch.ones_like(z), z)  # this block's probabilities
        grad_v[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb
        grad_k[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (grad_q * d ** -0.5).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_delta_wrong_axis(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, N, d = q.shape
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(ct) / math.sqrt(d)
    do = grad_out.to(ct)
    delta = (do * out.to(ct)).sum(dim=-2, keepdim=True)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(N)[:, None] + (n_k - N)
    gq = torch.zeros_like(q_s)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb = k[..., start:stop, :].to(ct)
        vb = v[..., start:stop, :].to(ct)
        s = q_s @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        gv[..., start:stop, :] = p.transpose(-2, -1) @ do
        ds = p * (do @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[..., start:stop, :] = ds.transpose(-2, -1) @ q_s
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_grad_q_assigned(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, N, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(ct) / math.sqrt(d)
    go = grad_out.to(ct)
    D = (go * out.to(ct)).sum(-1, keepdim=True)
    ll = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(N)[:, None] + (n_k - N)
    dq = torch.zeros_like(qq)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        kj, vj = k[:, :, j0:j1].to(ct), v[:, :, j0:j1].to(ct)
        s = qq @ kj.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > qpos, -math.inf)
        p = torch.exp(s - ll)
        dv[:, :, j0:j1] = p.transpose(-1, -2) @ go
        ds = p * (go @ vj.transpose(-1, -2) - D)
        dq = ds @ kj
        dk[:, :, j0:j1] = ds.transpose(-1, -2) @ qq
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_grad_k_unscaled_q(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, N, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qf = q.to(ct)
    gf = grad_out.to(ct)
    delta = (gf * out.to(ct)).sum(-1, keepdim=True)
    lse_f = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(N)[:, None] + (n_k - N)
    gq = torch.zeros_like(qf)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = (qf @ kb.transpose(-2, -1)) * scale
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_f)
        gv[:, :, st:en] = p.transpose(-2, -1) @ gf
        ds = p * (gf @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[:, :, st:en] = ds.transpose(-2, -1) @ qf
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_causal_local_index(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, N, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_sc = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(N)[:, None] + (n_k - N)
    grad_q = torch.zeros_like(q_sc)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[:, :, lo:hi].to(ct), v[:, :, lo:hi].to(ct)
        s = q_sc @ kb.transpose(-2, -1)
        if causal:
            cols = torch.arange(hi - lo)[None, :]  # key index inside the block
            s = s.masked_fill(cols > rows, -math.inf)
        p = torch.exp(s - L)
        grad_v[:, :, lo:hi] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb
        grad_k[:, :, lo:hi] = ds.transpose(-2, -1) @ q_sc
    return (grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ flash_attention_backward — right
def fab_einsum_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    f = torch.float64
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    Q = q.to(f) * (1.0 / math.sqrt(d))
    dO = grad_out.to(f)
    Di = torch.einsum("bhid,bhid->bhi", dO, out.to(f)).unsqueeze(-1)
    Li = lse.to(f)
    Li = torch.where(torch.isneginf(Li), torch.full_like(Li, math.inf), Li).unsqueeze(-1)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros(k.shape, dtype=f)
    dV = torch.zeros(v.shape, dtype=f)
    i = torch.arange(n_q).view(-1, 1)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kj = k[:, :, j0:j1].to(f)
        Vj = v[:, :, j0:j1].to(f)
        S = torch.einsum("bhid,bhjd->bhij", Q, Kj)
        if causal:
            j = torch.arange(j0, j1).view(1, -1)
            S = torch.where(j <= i + (n_k - n_q), S, torch.full_like(S, -math.inf))
        P = torch.exp(S - Li)
        dV[:, :, j0:j1] = torch.einsum("bhij,bhid->bhjd", P, dO)
        dP = torch.einsum("bhid,bhjd->bhij", dO, Vj)
        dS = P * (dP - Di)
        dQ = dQ + torch.einsum("bhij,bhjd->bhid", dS, Kj)
        dK[:, :, j0:j1] = torch.einsum("bhij,bhid->bhjd", dS, Q)
    return (dQ / math.sqrt(d)).to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_two_level_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over keys (outer) and queries (inner), skipping tiles the causal mask hides."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    big = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.zeros(k.shape, dtype=ct)
    grad_v = torch.zeros(v.shape, dtype=ct)
    shift = n_k - n_q
    for k0 in range(0, n_k, block_size):
        k1 = min(k0 + block_size, n_k)
        kb, vb = k[:, :, k0:k1].to(ct), v[:, :, k0:k1].to(ct)
        for q0 in range(0, n_q, block_size):
            q1 = min(q0 + block_size, n_q)
            if causal and k0 > q1 - 1 + shift:
                continue  # every key of this tile is in the future of every query
            s = qs[:, :, q0:q1] @ kb.transpose(-2, -1)
            if causal:
                hidden = torch.arange(k0, k1)[None, :] > torch.arange(q0, q1)[:, None] + shift
                s = s.masked_fill(hidden, -math.inf)
            p = torch.exp(s - big[:, :, q0:q1])
            gt = g[:, :, q0:q1]
            grad_v[:, :, k0:k1] += p.transpose(-2, -1) @ gt
            ds = p * (gt @ vb.transpose(-2, -1) - delta[:, :, q0:q1])
            grad_q[:, :, q0:q1] += ds @ kb
            grad_k[:, :, k0:k1] += ds.transpose(-2, -1) @ qs[:, :, q0:q1]
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term with .sum(-1) but no keepdim=True, so the (...,) row sums broadcast "
          "along the last axis instead of down their own rows (a shape error, or wrong values "
          "when the shapes happen to line up)",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_dim0",
          "sums grad_weights * weights over dim=0 instead of the last axis, so the row term mixes "
          "different rows (right only for a single 1-D row)",
          sb_sum_over_dim0),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "subtracts the plain row sum of grad_weights instead of the weighted sum "
          "(grad_weights * weights).sum(-1)",
          sb_row_term_without_p),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes in float32 and returns float32 without casting back to weights' dtype",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "parentheses_dropped",
          "writes p * g - (g * p).sum(-1, keepdim=True): without the parentheses around "
          "(g - row) the row term is not multiplied by p",
          sb_precedence),
    Entry("softmax_backward", "wrong", "torch_diag_on_batch",
          "builds the Jacobian with torch.diag(p), which for a 2-D or larger tensor returns its "
          "diagonal instead of a diagonal matrix per row (right only for one 1-D row; otherwise "
          "a wrong shape or a broadcast error)",
          sb_torch_diag_batched),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "expanded_addcmul", None, sb_expanded_addcmul),

    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "applies 1/sqrt(d) to grad_q but forgets it on grad_k = grad_s^T q",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() at diagonal 0 (top-left), not tril(N_k - N_q): "
          "wrong whenever N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "row_term_without_p",
          "uses grad_p.sum(-1) as the softmax row term instead of (grad_p * p).sum(-1)",
          ab_row_term_without_p),
    Entry("attention_backward", "wrong", "empty_rows_nan",
          "uses torch.softmax on the masked scores, so a causal row with no visible key "
          "(N_q > N_k) becomes NaN instead of zeros and spreads NaN into grad_k and grad_v",
          ab_empty_rows_nan),
    Entry("attention_backward", "wrong", "grad_k_times_k",
          "computes grad_k = grad_s^T @ k instead of grad_s^T @ q (wrong shape, raising, when "
          "N_q != N_k)",
          ab_grad_k_uses_k),
    Entry("attention_backward", "wrong", "no_cast_back",
          "returns the gradients in the float32 compute dtype instead of the inputs' dtype "
          "(float16 / bfloat16 inputs)",
          ab_no_cast_back),
    Entry("attention_backward", "right", "einsum_float64", None, ab_einsum_float64),
    Entry("attention_backward", "right", "lse_and_delta_from_out", None, ab_delta_from_out),

    Entry("attention_backward_flops", "wrong", "multiply_add_one_flop",
          "counts a multiply-add as one FLOP: N^2 d per product instead of 2 N^2 d",
          abf_mac_one_flop),
    Entry("attention_backward_flops", "wrong", "recompute_inverted",
          "adds the 2 N^2 d recomputation when recompute is False instead of when it is True",
          abf_recompute_inverted),
    Entry("attention_backward_flops", "wrong", "float_from_ratio",
          "returns the forward's 4 N^2 d times 2.5 (or 2.0): the right number, but a float "
          "instead of a plain int",
          abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "three_products",
          "counts three products (grad_q and grad_k as one) instead of four: 6 N^2 d "
          "(8 N^2 d with recompute)",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "charges the recomputation as the whole forward (4 N^2 d, scores and p v) instead of "
          "the scores q k^T alone (2 N^2 d)",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "xor_for_power",
          "writes n ^ 2 for the square: ^ is bitwise XOR in Python (and binds after *), so the "
          "count is garbage instead of 10 N^2 d",
          abf_xor_power),
    Entry("attention_backward_flops", "right", "sum_over_products", None, abf_sum_of_products),
    Entry("attention_backward_flops", "right", "integer_ratio_of_forward", None,
          abf_from_forward),

    Entry("flash_attention_backward", "wrong", "delta_from_block",
          "computes the row term as (grad_p * p).sum(-1) inside each key block, a partial sum "
          "over that block only, instead of delta = (grad_out * out).sum(-1) over the whole row",
          fab_delta_per_block),
    Entry("flash_attention_backward", "wrong", "per_block_softmax",
          "recomputes p with a softmax normalised within each key block instead of "
          "exp(s - lse), so each block's probabilities sum to 1 on their own",
          fab_per_block_softmax),
    Entry("flash_attention_backward", "wrong", "delta_over_queries",
          "sums grad_out * out over dim=-2 (the queries) instead of the feature axis, so delta "
          "has shape (B, H, 1, d) and broadcasts wrongly (a shape error in most cases)",
          fab_delta_wrong_axis),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in every block instead of accumulating with +=, so "
          "only the last key block's contribution is kept",
          fab_grad_q_assigned),
    Entry("flash_attention_backward", "wrong", "grad_k_unscaled_q",
          "uses the unscaled q for grad_k = grad_s^T q, missing the 1/sqrt(d) of the chain rule "
          "(grad_q gets it, grad_k does not)",
          fab_grad_k_unscaled_q),
    Entry("flash_attention_backward", "wrong", "causal_block_local_keys",
          "builds the causal mask with key positions arange(block length) local to the block "
          "instead of their global positions start .. stop-1, so later blocks are masked as if "
          "they were the first",
          fab_causal_local_index),
    Entry("flash_attention_backward", "right", "einsum_float64", None, fab_einsum_float64),
    Entry("flash_attention_backward", "right", "two_level_tiles_causal_skip", None,
          fab_two_level_tiles),
]
