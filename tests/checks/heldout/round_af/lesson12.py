"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ================================================================== softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (p * g).sum(dim=-1)
    return (p * (g - dot)).to(weights.dtype)


def sb_sum_axis_zero(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    inner = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - inner)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    return (p * (1 - p) * g).to(weights.dtype)  # d softmax_i / d s_i = p_i (1 - p_i)


def sb_float32_result(weights, grad_weights):
    w = weights.float()
    gw = grad_weights.float()
    row = torch.sum(gw * w, dim=-1, keepdim=True)
    return w * (gw - row)


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(-1, keepdim=True)
    return (p * g - row).to(weights.dtype)


def sb_unweighted_row(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = g.sum(-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


# ================================================================== softmax_backward: right
def sb_expanded_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    pg = p * g
    return (pg - p * pg.sum(-1, keepdim=True)).to(weights.dtype)


def sb_einsum_row(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return torch.addcmul(-p * row, p, g).to(weights.dtype)


# ================================================================ attention_backward: wrong
def ab_top_left_mask(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.tril(torch.ones(n_q, n_k, dtype=torch.bool))
        s = s.masked_fill(~keep, -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_sign_flipped(q, k, v, grad_out, causal=False):
    compute = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(compute) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    scale = d ** -0.5
    scores = q_ @ k_.transpose(-1, -2) * scale
    if causal:
        visible = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~visible, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = top.masked_fill(torch.isinf(top), 0.0)
    ex = torch.exp(scores - top)
    den = ex.sum(-1, keepdim=True)
    p = ex / den.masked_fill(den == 0, 1.0)
    grad_v = p.transpose(-1, -2) @ g_
    grad_p = g_ @ v_.transpose(-1, -2)
    grad_s = p * ((grad_p * p).sum(-1, keepdim=True) - grad_p)
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-1, -2) @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = torch.matmul(qf, kf.transpose(-2, -1)) / math.sqrt(d)
    if causal:
        mask = torch.ones(nq, nk, dtype=torch.bool).tril(diagonal=nk - nq)
        sc = sc.masked_fill(~mask, -math.inf)
    p = torch.softmax(sc, dim=-1)
    dv = torch.matmul(p.transpose(-2, -1), gf)
    dp = torch.matmul(gf, vf.transpose(-2, -1))
    ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
    dq = torch.matmul(ds, kf) / math.sqrt(d)
    dk = torch.matmul(ds.transpose(-2, -1), qf) / math.sqrt(d)
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def ab_always_float32(q, k, v, grad_out, causal=False):
    qf, kf, vf, gf = q.float(), k.float(), v.float(), grad_out.float()
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = qf @ kf.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    e = torch.exp(s - mx)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    gv = p.transpose(-2, -1) @ gf
    gp = gf @ vf.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return gs @ kf / math.sqrt(d), gs.transpose(-2, -1) @ qf / math.sqrt(d), gv


def ab_forward_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, dO = (t.to(ct) for t in (q, k, v, grad_out))
    nq, d = Q.shape[-2], Q.shape[-1]
    nk = K.shape[-2]
    scale = 1.0 / math.sqrt(d)
    S = Q @ K.transpose(-2, -1)
    if causal:
        S = S.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    M = S.amax(-1, keepdim=True)
    M = torch.where(torch.isinf(M), 0.0, M)
    P = torch.exp(S - M)
    L = P.sum(-1, keepdim=True)
    P = P / torch.where(L == 0, 1.0, L)
    dV = P.transpose(-2, -1) @ dO
    dP = dO @ V.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K * scale
    dK = dS.transpose(-2, -1) @ Q * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_softmax_over_queries(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    a, b, c, g = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    nq, nk, d = a.shape[-2], b.shape[-2], a.shape[-1]
    s = torch.einsum("...qd,...kd->...qk", a, b) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-2), nan=0.0)
    gv = torch.einsum("...qk,...qe->...ke", p, g)
    gp = torch.einsum("...qe,...ke->...qk", g, c)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = torch.einsum("...qk,...kd->...qd", gs, b) / math.sqrt(d)
    gk = torch.einsum("...qk,...qd->...kd", gs, a) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ================================================================ attention_backward: right
def ab_delta_from_out_f64(q, k, v, grad_out, causal=False):
    """Row term from rowsum(grad_out * out) (FlashAttention's delta), float64 einsum."""
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    n_q, n_k, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = torch.where(j <= i + (n_k - n_q), s, torch.tensor(-math.inf, dtype=s.dtype))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.where(torch.isneginf(lse), torch.zeros_like(s), torch.exp(s - lse))
    out = torch.einsum("...ij,...je->...ie", p, V)
    delta = (G * out).sum(-1, keepdim=True)
    dp = torch.einsum("...ie,...je->...ij", G, V)
    ds = p * (dp - delta)
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    dv = torch.einsum("...ij,...ie->...je", p, G)
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def ab_bmm_flattened(q, k, v, grad_out, causal=False):
    """Leading axes flattened into one batch axis, torch.bmm, triu mask, nan_to_num guard."""
    ct = torch.promote_types(q.dtype, torch.float32)
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    Q = q.to(ct).reshape(-1, n_q, d)
    K = k.to(ct).reshape(-1, n_k, d)
    V = v.to(ct).reshape(-1, n_k, d_v)
    G = grad_out.to(ct).reshape(-1, n_q, d_v)
    S = torch.bmm(Q, K.transpose(1, 2)) * (1.0 / math.sqrt(d))
    if causal:
        hidden = torch.triu(torch.ones(n_q, n_k, dtype=torch.bool), diagonal=n_k - n_q + 1)
        S = S.masked_fill(hidden, -math.inf)
    P = torch.nan_to_num(torch.softmax(S, dim=2), nan=0.0)
    dV = torch.bmm(P.transpose(1, 2), G)
    dP = torch.bmm(G, V.transpose(1, 2))
    row = (dP * P).sum(2, keepdim=True)
    dS = P * dP - P * row
    dQ = torch.bmm(dS, K) / math.sqrt(d)
    dK = torch.bmm(dS.transpose(1, 2), Q) / math.sqrt(d)
    return (dQ.reshape(*lead, n_q, d).to(q.dtype), dK.reshape(*lead, n_k, d).to(q.dtype),
            dV.reshape(*lead, n_k, d_v).to(q.dtype))


# ========================================================== attention_backward_flops: wrong
def abf_recompute_full_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    backward = 4 * 2 * n * n * d
    if recompute:
        backward += 4 * n * n * d  # the forward again
    return backward


def abf_mac_one_flop(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_condition_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len * seq_len * head_dim
    if not recompute:
        flops += 2 * seq_len * seq_len * head_dim
    return flops


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 8 * n2d + 2 * n2d if recompute else 0


def abf_squares_d(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim ** 2
    return (5 if recompute else 4) * per_product


# ========================================================== attention_backward_flops: right
def abf_sum_of_products(seq_len, head_dim, recompute=True):
    names = ["grad_v", "grad_p", "grad_q", "grad_k"] + (["scores"] if recompute else [])
    return sum(2 * seq_len * seq_len * head_dim for _ in names)


def abf_from_forward(seq_len, head_dim, recompute=True):
    fwd = 2 * (2 * seq_len * seq_len * head_dim)
    return 2 * fwd + (fwd // 2 if recompute else 0)


# ========================================================== flash_attention_backward: wrong
def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
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
        delta = (dp * p).sum(-1, keepdim=True)
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


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


def fb_top_left_causal(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(D)
    Q = q.to(dt) * sc
    dO = grad_out.to(dt)
    Di = (dO * out.to(dt)).sum(-1, keepdim=True)
    M = torch.where(torch.isneginf(lse), math.inf, lse.to(dt)).unsqueeze(-1)
    rows = torch.arange(Nq).unsqueeze(1)
    dQ = torch.zeros(B, H, Nq, D, dtype=dt)
    dK = torch.zeros(B, H, Nk, D, dtype=dt)
    dV = torch.zeros(B, H, Nk, D, dtype=dt)
    for j in range(0, Nk, block_size):
        je = min(j + block_size, Nk)
        Kj, Vj = k[:, :, j:je].to(dt), v[:, :, j:je].to(dt)
        S = Q @ Kj.transpose(2, 3)
        if causal:
            S = S.masked_fill(torch.arange(j, je).unsqueeze(0) > rows, -math.inf)
        P = torch.exp(S - M)
        dV[:, :, j:je] = P.transpose(2, 3) @ dO
        dS = P * (dO @ Vj.transpose(2, 3) - Di)
        dQ += dS @ Kj
        dK[:, :, j:je] = dS.transpose(2, 3) @ Q
    return (dQ * sc).to(q.dtype), dK.to(q.dtype), dV.to(q.dtype)


def fb_grad_k_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1 / math.sqrt(d)
    qf = q.to(ct)
    gf = grad_out.to(ct)
    delta = torch.sum(gf * out.to(ct), dim=-1, keepdim=True)
    lse_c = lse.to(ct).clone()
    lse_c[torch.isneginf(lse_c)] = math.inf
    lse_c = lse_c.unsqueeze(-1)
    last_key = torch.arange(n_q).view(-1, 1) + n_k - n_q
    gq = torch.zeros(qf.shape, dtype=ct)
    gk = torch.zeros(k.shape, dtype=ct)
    gv = torch.zeros(v.shape, dtype=ct)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb = k[..., s0:s1, :].to(ct)
        vb = v[..., s0:s1, :].to(ct)
        logits = (qf @ kb.transpose(-1, -2)) * scale
        if causal:
            logits = logits.masked_fill(torch.arange(s0, s1).view(1, -1) > last_key, -math.inf)
        p = torch.exp(logits - lse_c)
        gv[..., s0:s1, :] = p.transpose(-1, -2) @ gf
        ds = p * (gf @ vb.transpose(-1, -2) - delta)
        gq += ds @ kb * scale
        gk[..., s0:s1, :] = ds.transpose(-1, -2) @ qf
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_concat_grad_s(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    ds_blocks = []
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[..., st:en, :].to(ct), v[..., st:en, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., st:en, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_k[..., st:en, :] = ds.transpose(-2, -1) @ qs
        ds_blocks.append(ds)
    grad_s = torch.cat(ds_blocks, dim=-1)  # (B, H, N_q, N_k)
    grad_q = grad_s @ k.to(ct) / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_float32_result(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(f) * d ** -0.5
    do = grad_out.to(f)
    dlt = (do * out.to(f)).sum(-1, keepdim=True)
    ls = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).to(f)[..., None]
    allowed_up_to = torch.arange(n_q)[:, None] + n_k - n_q
    gq = torch.zeros(B, H, n_q, d, dtype=f)
    gk = torch.zeros(B, H, n_k, d, dtype=f)
    gv = torch.zeros(B, H, n_k, d, dtype=f)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kk, vv = k[:, :, lo:hi].to(f), v[:, :, lo:hi].to(f)
        s = q_ @ kk.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None] > allowed_up_to, -math.inf)
        p = (s - ls).exp()
        gv[:, :, lo:hi] = p.transpose(-2, -1) @ do
        ds = p * (do @ vv.transpose(-2, -1) - dlt)
        gq += ds @ kk
        gk[:, :, lo:hi] = ds.transpose(-2, -1) @ q_
    return gq * d ** -0.5, gk, gv


# ========================================================== flash_attention_backward: right
def fb_two_level_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over query blocks and key blocks, float64, five products per tile."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    Q, K, V, O, dO = (t.double() for t in (q, k, v, out, grad_out))
    L = lse.double()
    dQ = torch.zeros(B, H, n_q, d, dtype=torch.float64)
    dK = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    dV = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        Qi, dOi = Q[:, :, i0:i1], dO[:, :, i0:i1]
        Li = L[:, :, i0:i1, None]
        Di = (dOi * O[:, :, i0:i1]).sum(-1, keepdim=True)
        empty = torch.isneginf(Li)
        rows = torch.arange(i0, i1)[:, None] + (n_k - n_q)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            Kj, Vj = K[:, :, j0:j1], V[:, :, j0:j1]
            S = (Qi @ Kj.transpose(-2, -1)) * scale
            if causal:
                S = torch.where(torch.arange(j0, j1)[None, :] <= rows, S,
                                torch.tensor(-math.inf, dtype=torch.float64))
            P = torch.where(empty, torch.zeros_like(S), torch.exp(S - Li))
            dV[:, :, j0:j1] += P.transpose(-2, -1) @ dOi
            dS = P * (dOi @ Vj.transpose(-2, -1) - Di)
            dQ[:, :, i0:i1] += (dS @ Kj) * scale
            dK[:, :, j0:j1] += (dS.transpose(-2, -1) @ Qi) * scale
    return dQ.to(q.dtype), dK.to(q.dtype), dV.to(q.dtype)


def fb_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Key blocks with einsum; the row term delta from out; lists of per-block grads."""
    work = torch.promote_types(q.dtype, torch.float32)
    hd = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    qw, gw = q.to(work), grad_out.to(work)
    delta = torch.einsum("bhid,bhid->bhi", gw, out.to(work))
    finite = torch.isfinite(lse)
    lse_w = torch.where(finite, lse.to(work), torch.zeros((), dtype=work))
    grad_q = torch.zeros_like(qw)
    gk_parts, gv_parts = [], []
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(work)
        vb = v[:, :, start:start + block_size].to(work)
        s = torch.einsum("bhid,bhjd->bhij", qw, kb) / math.sqrt(hd)
        if causal:
            j = torch.arange(start, start + kb.shape[2])
            i = torch.arange(n_q) + (n_k - n_q)
            s = s.masked_fill(j[None, :] > i[:, None], -math.inf)
        p = torch.exp(s - lse_w[..., None]) * finite[..., None]
        gv_parts.append(torch.einsum("bhij,bhid->bhjd", p, gw))
        ds = p * (torch.einsum("bhid,bhjd->bhij", gw, vb) - delta[..., None])
        grad_q = grad_q + torch.einsum("bhij,bhjd->bhid", ds, kb)
        gk_parts.append(torch.einsum("bhij,bhid->bhjd", ds, qw))
    grad_k = torch.cat(gk_parts, dim=2) / math.sqrt(hd)
    grad_v = torch.cat(gv_parts, dim=2)
    return ((grad_q / math.sqrt(hd)).to(q.dtype), grad_k.to(q.dtype), grad_v.to(q.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_no_keepdim",
          "the row term (p * g).sum(-1) drops its axis, so it broadcasts along the last axis "
          "instead of down each row: it raises on non-square inputs and silently subtracts "
          "the wrong row's sum on square ones",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_sum_over_axis_0",
          "the row term sums over dim=0 (across rows) instead of the last axis",
          sb_sum_axis_zero),
    Entry("softmax_backward", "wrong", "jacobian_diagonal_only",
          "it keeps only the diagonal of the Jacobian, p (1 - p) g, and drops the "
          "off-diagonal -p_i p_j terms",
          sb_diagonal_only),
    Entry("softmax_backward", "wrong", "float32_result",
          "it computes with .float() and returns float32, not weights' dtype (float64, "
          "float16 and bfloat16 inputs come back float32)",
          sb_float32_result),
    Entry("softmax_backward", "wrong", "precedence_p_times_g_minus_row",
          "`p * g - row` multiplies p into g only; the row term needs the parentheses "
          "p * (g - row)",
          sb_precedence),
    Entry("softmax_backward", "wrong", "row_term_unweighted",
          "the row term sums grad_weights alone instead of grad_weights * weights",
          sb_unweighted_row),
    Entry("softmax_backward", "right", "expanded_float64", None, sb_expanded_float64),
    Entry("softmax_backward", "right", "einsum_addcmul", None, sb_einsum_row),

    Entry("attention_backward", "wrong", "causal_top_left",
          "the causal mask is torch.tril(ones(N_q, N_k)) aligned top-left, not bottom-right "
          "(diagonal N_k - N_q), so causal gradients with N_q != N_k use the wrong keys",
          ab_top_left_mask),
    Entry("attention_backward", "wrong", "grad_s_sign_flipped",
          "grad_s is p * (rowsum - grad_p) instead of p * (grad_p - rowsum), so grad_q and "
          "grad_k have the wrong sign",
          ab_sign_flipped),
    Entry("attention_backward", "wrong", "nan_on_rows_without_keys",
          "torch.softmax on a row that is all -inf gives NaN; a query with no visible key "
          "(causal, N_q > N_k) must contribute zeros, and the NaN spreads into grad_k and grad_v",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "always_float32",
          "everything is cast with .float() and never cast back, so float64 inputs get "
          "float32 gradients instead of the inputs' dtype",
          ab_always_float32),
    Entry("attention_backward", "wrong", "forward_without_scale",
          "the recomputed forward takes softmax(q k^T) without the 1/sqrt(d) scale (only the "
          "gradients are scaled), so p is too peaked",
          ab_forward_unscaled),
    Entry("attention_backward", "wrong", "softmax_over_queries",
          "the forward softmax runs over dim=-2 (the queries) instead of the keys",
          ab_softmax_over_queries),
    Entry("attention_backward", "right", "delta_from_out_float64", None, ab_delta_from_out_f64),
    Entry("attention_backward", "right", "bmm_flattened", None, ab_bmm_flattened),

    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "with recompute it adds the whole forward, 4 N^2 d, but FlashAttention only "
          "recomputes the scores q k^T, 2 N^2 d (the weighted sum is not redone)",
          abf_recompute_full_forward),
    Entry("attention_backward_flops", "wrong", "mac_as_one_flop",
          "it counts N^2 d per product, one FLOP per multiply-add, instead of 2 N^2 d",
          abf_mac_one_flop),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "it returns the forward's 4 N^2 d times 2.5 or 2, a float, where the contract asks "
          "for a plain int",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "recompute_condition_inverted",
          "the test is `if not recompute`, so the 2 N^2 d recomputation is added exactly when "
          "it should not be",
          abf_condition_inverted),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "`8 * n2d + 2 * n2d if recompute else 0` returns 0 when recompute is False: the "
          "conditional expression binds looser than +, so it needs parentheses",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "squares_head_dim",
          "each product is counted as 2 N d^2 instead of 2 N^2 d: the square is on the wrong "
          "variable",
          abf_squares_d),
    Entry("attention_backward_flops", "right", "sum_over_named_products", None,
          abf_sum_of_products),
    Entry("attention_backward_flops", "right", "from_forward_count", None, abf_from_forward),

    Entry("flash_attention_backward", "wrong", "block_local_delta",
          "the row term is rowsum(grad_p * p) over the current key block only; it must be "
          "summed over the whole row, which is what delta = rowsum(grad_out * out) gives",
          fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no_lse_guard",
          "exp(s - lse) is computed without replacing lse = -inf, so a row with no visible "
          "key gives exp(-inf + inf) = NaN instead of zeros",
          fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "the causal mask compares key positions with the query index alone (top-left), "
          "without the N_k - N_q offset",
          fb_top_left_causal),
    Entry("flash_attention_backward", "wrong", "grad_k_unscaled",
          "grad_k is grad_s^T @ q with the raw q, missing the 1/sqrt(d) factor that grad_q "
          "gets",
          fb_grad_k_unscaled),
    Entry("flash_attention_backward", "wrong", "concatenates_grad_s",
          "it keeps every block's grad_s and concatenates them to compute grad_q in one "
          "product at the end, which builds the full (B, H, N_q, N_k) tensor the exercise "
          "forbids (the values are right)",
          fb_concat_grad_s),
    Entry("flash_attention_backward", "wrong", "float32_result",
          "the gradients stay in the float32 compute dtype: half-precision inputs get float32 "
          "results instead of q's dtype",
          fb_float32_result),
    Entry("flash_attention_backward", "right", "two_level_tiles_float64", None,
          fb_two_level_tiles_f64),
    Entry("flash_attention_backward", "right", "einsum_key_blocks", None, fb_einsum_key_blocks),
]
