"""Held-out learners' answers, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================================ softmax_backward

def smb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def smb_row_term_dim0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def smb_row_term_without_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = g.sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def smb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (p * g).sum(-1, keepdim=True)
    return (p * (dot - g)).to(weights.dtype)


def smb_returns_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1, keepdim=True)
    return p * (g - row)


def smb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1, keepdim=True)
    return (p * g - row).to(weights.dtype)


def smb_row_loops(weights, grad_weights):
    n = weights.shape[-1]
    P = weights.reshape(-1, n).double()
    G = grad_weights.reshape(-1, n).double()
    out = torch.zeros_like(P)
    for r in range(P.shape[0]):
        dot = math.fsum(float(P[r, j]) * float(G[r, j]) for j in range(n))
        for j in range(n):
            out[r, j] = P[r, j] * (G[r, j] - dot)
    return out.reshape(weights.shape).to(weights.dtype)


def smb_einsum_distributed(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    pg = torch.einsum("...n,...n->...", p, g)  # p . g per row
    return (p * g - p * pg.unsqueeze(-1)).to(weights.dtype)


# ============================================================================ attention_backward

def ab_top_left_mask(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    nq, d = q.shape[-2:]
    nk = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = Q @ K.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return (ds @ K * sc).to(q.dtype), (ds.transpose(-2, -1) @ Q * sc).to(k.dtype), dv.to(v.dtype)


def ab_grad_k_scaled_twice(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = d ** -0.5
    q_s = q.to(ct) * scale  # fold the scale into q
    kk, vv, go = k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_s @ kk.transpose(-2, -1)
    if causal:
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~vis, -math.inf)
    top = s.amax(dim=-1, keepdim=True)
    top = top.masked_fill(torch.isinf(top), 0.0)
    e = (s - top).exp()
    z = e.sum(dim=-1, keepdim=True)
    p = e / z.masked_fill(z == 0, 1.0)
    grad_v = p.transpose(-2, -1) @ go
    grad_p = go @ vv.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))
    grad_q = grad_s @ kk * scale
    grad_k = grad_s.transpose(-2, -1) @ q_s * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_v_not_transposed(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    a = 1.0 / math.sqrt(d)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = torch.matmul(Q, K.transpose(-1, -2)) * a
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    w = torch.exp(s - mx)
    den = w.sum(-1, keepdim=True)
    p = w / torch.where(den == 0, 1.0, den)
    grad_v = p @ G
    grad_p = G @ V.transpose(-1, -2)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ K * a).to(q.dtype), (grad_s.transpose(-1, -2) @ Q * a).to(k.dtype),
            grad_v.to(v.dtype))


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    scale = 1 / math.sqrt(d)
    qc, kc, vc, gc = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qc @ kc.transpose(-2, -1) * scale
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-2, -1) @ gc
    gp = gc @ vc.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return (gs @ kc * scale).to(q.dtype), (gs.transpose(-2, -1) @ qc * scale).to(k.dtype), \
        gv.to(v.dtype)


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    grad_v = p.transpose(-2, -1) @ G
    grad_p = G @ V.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-2, keepdim=True))
    return ((grad_s @ K * sc).to(q.dtype), (grad_s.transpose(-2, -1) @ Q * sc).to(k.dtype),
            grad_v.to(v.dtype))


def ab_returns_compute_dtype(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    grad_v = p.transpose(-2, -1) @ G
    grad_p = G @ V.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return grad_s @ K * sc, grad_s.transpose(-2, -1) @ Q * sc, grad_v


def ab_row_loops_float64(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Q = q.reshape(-1, n_q, d).double()
    K = k.reshape(-1, n_k, d).double()
    V = v.reshape(-1, n_k, d_v).double()
    G = grad_out.reshape(-1, n_q, d_v).double()
    gq, gk, gv = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    r = 1.0 / math.sqrt(d)
    for b in range(Q.shape[0]):
        for i in range(n_q):
            last = n_k - 1 if not causal else i + n_k - n_q  # last visible key
            if last < 0:
                continue  # no key: out = 0, no gradient
            keys = K[b, :last + 1]
            s = keys @ Q[b, i] * r  # (m,)
            p = torch.exp(s - s.max())
            p = p / p.sum()
            gp = V[b, :last + 1] @ G[b, i]  # (m,)
            gs = p * (gp - torch.dot(gp, p))
            gv[b, :last + 1] += p[:, None] * G[b, i][None, :]
            gq[b, i] = gs @ keys * r
            gk[b, :last + 1] += gs[:, None] * Q[b, i][None, :] * r
    return (gq.reshape(*lead, n_q, d).to(q.dtype), gk.reshape(*lead, n_k, d).to(k.dtype),
            gv.reshape(*lead, n_k, d_v).to(v.dtype))


def ab_einsum_logsumexp(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        j = torch.arange(n_k)[None, :]
        i = torch.arange(n_q)[:, None]
        s = torch.where(j - i <= n_k - n_q, s, torch.full_like(s, -math.inf))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse)))
    p = torch.where(torch.isfinite(lse), p, torch.zeros_like(p))
    dv = torch.einsum("...qk,...qe->...ke", p, G)
    dp = torch.einsum("...qe,...ke->...qk", G, V)
    out = torch.einsum("...qk,...ke->...qe", p, V)
    delta = (G * out).sum(-1, keepdim=True)  # equals rowsum(dp * p)
    ds = p * (dp - delta)
    dq = torch.einsum("...qk,...kd->...qd", ds, K) / math.sqrt(d)
    dk = torch.einsum("...qk,...qd->...kd", ds, Q) / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================================ attention_backward_flops

def abf_no_factor_two(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_recomputes_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len ** 2 * head_dim
    if recompute:
        backward += 4 * seq_len ** 2 * head_dim  # run the forward again
    return backward


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    ratio = 2.5 if recompute else 2
    return ratio * forward


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    extra = 0 if recompute else 2 * n2d
    return 8 * n2d + extra


def abf_three_products(seq_len, head_dim, recompute=True):
    # grad_v, grad_q, grad_k, plus the recomputed scores
    count = 3 + (1 if recompute else 0)
    return count * 2 * seq_len * seq_len * head_dim


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + 2 * seq_len ** 2 * head_dim if recompute else 0


def abf_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    products = [("grad_v", n, n, d), ("grad_p", n, d, n), ("grad_q", n, n, d),
                ("grad_k", n, n, d)]
    if recompute:
        products.append(("scores", n, d, n))
    return sum(2 * m * kk * nn for _, m, kk, nn in products)


def abf_closed_form_bool(seq_len, head_dim, recompute=True):
    return (4 + int(bool(recompute))) * 2 * seq_len ** 2 * head_dim


# ============================================================================ flash_attention_backward

def fab_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
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
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))  # row term of this block
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_block_local_key_index(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(b - a)[None, :]  # key index inside the block
            s = s.masked_fill(kpos > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(dim=-1, keepdim=True)
    L = lse.to(ct).unsqueeze(-1)
    qpos = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.zeros(k.shape, dtype=ct)
    gv = torch.zeros(v.shape, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en).unsqueeze(0) > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[:, :, st:en] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[:, :, st:en] = ds.transpose(-2, -1) @ qs
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
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
        p = torch.exp2(s - L)  # as in the FlashAttention kernels
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
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
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_returns_float32(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
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
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return dq / math.sqrt(d), dk, dv


def fab_two_dim_tiles_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    r = 1.0 / math.sqrt(d)
    Q = q.double() * r
    K, V, G = k.double(), v.double(), grad_out.double()
    D = torch.einsum("bhqd,bhqd->bhq", G, out.double())  # delta, one per query row
    lse64 = lse.double()
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for k0 in range(0, n_k, block_size):
        k1 = min(n_k, k0 + block_size)
        for q0 in range(0, n_q, block_size):
            q1 = min(n_q, q0 + block_size)
            s = torch.einsum("bhqd,bhkd->bhqk", Q[:, :, q0:q1], K[:, :, k0:k1])
            L = lse64[:, :, q0:q1, None]
            keep = torch.isfinite(L).expand_as(s)
            if causal:
                qi = torch.arange(q0, q1)[:, None] + (n_k - n_q)
                kj = torch.arange(k0, k1)[None, :]
                keep = keep & (kj <= qi)
            p = torch.where(keep, torch.exp(s - torch.where(torch.isfinite(L), L, 0.0)),
                            torch.zeros_like(s))
            g_blk = G[:, :, q0:q1]
            dV[:, :, k0:k1] += torch.einsum("bhqk,bhqd->bhkd", p, g_blk)
            dp = torch.einsum("bhqd,bhkd->bhqk", g_blk, V[:, :, k0:k1])
            ds = p * (dp - D[:, :, q0:q1, None])
            dQ[:, :, q0:q1] += torch.einsum("bhqk,bhkd->bhqd", ds, K[:, :, k0:k1])
            dK[:, :, k0:k1] += torch.einsum("bhqk,bhqd->bhkd", ds, Q[:, :, q0:q1])
    return (dQ * r).to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_per_head_mm(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    gq = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    gk = torch.zeros((B, H, n_k, d), dtype=torch.float64)
    gv = torch.zeros((B, H, n_k, d), dtype=torch.float64)
    inv = 1.0 / math.sqrt(d)
    for b in range(B):
        for h in range(H):
            qh = q[b, h].double()
            gh = grad_out[b, h].double()
            delta = (gh * out[b, h].double()).sum(dim=1, keepdim=True)  # (N_q, 1)
            l = lse[b, h].double().unsqueeze(1)  # (N_q, 1)
            dead = torch.isneginf(l)
            for j0 in range(0, n_k, block_size):
                kb = k[b, h, j0:j0 + block_size].double()
                vb = v[b, h, j0:j0 + block_size].double()
                s = torch.mm(qh, kb.t()) * inv  # (N_q, b)
                if causal:
                    hide = (torch.arange(j0, j0 + kb.shape[0]).unsqueeze(0)
                            > torch.arange(n_q).unsqueeze(1) + (n_k - n_q))
                    s = s.masked_fill(hide, -math.inf)
                p = torch.exp(s - l.masked_fill(dead, 0.0)).masked_fill(dead, 0.0)
                gv[b, h, j0:j0 + kb.shape[0]] = torch.mm(p.t(), gh)
                ds = p * (torch.mm(gh, vb.t()) - delta)
                gq[b, h] += torch.mm(ds, kb) * inv
                gk[b, h, j0:j0 + kb.shape[0]] = torch.mm(ds.t(), qh) * inv
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so the (..., ) row sums broadcast against "
          "the last axis instead of their own rows (a shape error, or the wrong rows on square "
          "inputs)", smb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_dim0",
          "sums grad_weights * weights over dim 0 instead of the last axis, so the row term "
          "mixes different rows", smb_row_term_dim0),
    Entry("softmax_backward", "wrong", "row_term_forgets_weights",
          "uses grad_weights.sum(-1) as the row term, dropping the weights: it must be "
          "(grad_weights * weights).sum(-1)", smb_row_term_without_p),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "computes weights * (row term - grad_weights), the negative of the gradient",
          smb_sign_flipped),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes in float32 and returns that, not weights' dtype, for half-precision inputs",
          smb_returns_float32),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "writes weights * grad_weights - row, which subtracts the row term unweighted; "
          "weights must multiply (grad_weights - row)", smb_precedence),
    Entry("softmax_backward", "right", "row_loops_fsum", None, smb_row_loops),
    Entry("softmax_backward", "right", "einsum_distributed_float64", None,
          smb_einsum_distributed),

    Entry("attention_backward", "wrong", "causal_mask_top_left",
          "builds the causal mask with tril() aligned top-left instead of bottom-right "
          "(tril(N_k - N_q)), wrong whenever N_q != N_k", ab_top_left_mask),
    Entry("attention_backward", "wrong", "grad_k_scaled_twice",
          "folds 1/sqrt(d) into q for the scores, then multiplies grad_s^T @ q_scaled by "
          "1/sqrt(d) again, so grad_k carries the scale twice", ab_grad_k_scaled_twice),
    Entry("attention_backward", "wrong", "grad_v_without_transpose",
          "computes grad_v as p @ grad_out instead of p^T @ grad_out (a shape error when "
          "N_q != N_k, silently wrong when they are equal)", ab_grad_v_not_transposed),
    Entry("attention_backward", "wrong", "nan_on_rows_without_keys",
          "uses torch.softmax on the masked scores, which gives NaN on a query row with no "
          "visible key instead of zero weights and zero gradients", ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "sums grad_p * p over dim -2 (the queries) instead of dim -1 (the keys) for the "
          "softmax's row term", ab_row_term_wrong_axis),
    Entry("attention_backward", "wrong", "returns_compute_dtype",
          "returns the float32 gradients without casting back to the inputs' dtype",
          ab_returns_compute_dtype),
    Entry("attention_backward", "right", "per_query_row_loops_float64", None,
          ab_row_loops_float64),
    Entry("attention_backward", "right", "einsum_logsumexp_delta", None, ab_einsum_logsumexp),

    Entry("attention_backward_flops", "wrong", "one_flop_per_multiply_add",
          "counts N^2 d per product instead of 2 N^2 d: one multiply-add is 2 FLOPs",
          abf_no_factor_two),
    Entry("attention_backward_flops", "wrong", "recompute_counts_whole_forward",
          "adds the whole forward (4 N^2 d) for recompute=True, but only the scores q k^T "
          "are recomputed (2 N^2 d)", abf_recomputes_whole_forward),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "multiplies the forward count by 2.5, which makes the recompute=True result a float "
          "instead of a plain int", abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "adds the recomputation when recompute is False and leaves it out when it is True",
          abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "forgets_grad_p_product",
          "counts three backward products (grad_v, grad_q, grad_k) and forgets "
          "grad_p = grad_out v^T", abf_three_products),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "writes 8 N^2 d + 2 N^2 d if recompute else 0, which Python reads as "
          "(8 N^2 d + 2 N^2 d) if recompute else 0, so recompute=False returns 0",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "right", "list_of_products", None, abf_product_list),
    Entry("attention_backward_flops", "right", "closed_form_int_bool", None,
          abf_closed_form_bool),

    Entry("flash_attention_backward", "wrong", "row_term_from_block_only",
          "computes the row term as rowsum(grad_p * p) over the current key block instead of "
          "delta = rowsum(grad_out * out), so it is only right when there is one block",
          fab_block_local_delta),
    Entry("flash_attention_backward", "wrong", "causal_with_block_local_key_index",
          "masks with the key's index inside the block (0..b-1) instead of its absolute "
          "position start + j, so later blocks are masked as if they were the first",
          fab_block_local_key_index),
    Entry("flash_attention_backward", "wrong", "no_guard_for_lse_minus_inf",
          "computes exp(s - lse) directly, so a row with no visible key (s = lse = -inf) "
          "gives exp(-inf + inf) = NaN instead of zero probabilities", fab_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "exp2_with_natural_lse",
          "recomputes the probabilities with torch.exp2, as in FlashAttention's kernels, but "
          "lse is a natural-log log-sum-exp and the scores are not scaled by log2(e)",
          fab_exp2),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in each block instead of accumulating with +=, so "
          "only the last key block's contribution survives", fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "returns_compute_dtype",
          "returns the float32 gradients without casting them back to the inputs' dtype",
          fab_returns_float32),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_einsum_float64", None,
          fab_two_dim_tiles_float64),
    Entry("flash_attention_backward", "right", "per_head_mm_loops_float64", None,
          fab_per_head_mm),
]
