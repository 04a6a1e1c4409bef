"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward. No torch.autograd anywhere."""

import math

import torch

from entry import Entry


# ==================================================================== softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (p * g).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_over_first_axis(weights, grad_weights):
    work = torch.promote_types(weights.dtype, torch.float32)
    w = weights.to(work)
    gw = grad_weights.to(work)
    dot = torch.sum(gw * w, dim=0, keepdim=True)
    return (w * (gw - dot)).to(weights.dtype)


def sb_missing_outer_weights(weights, grad_weights):
    c = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(c)
    g = grad_weights.to(c)
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    f = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(f), grad_weights.to(f)
    inner = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return p * (g - inner)


def sb_row_term_unweighted(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(dim=-1, keepdim=True))).to(weights.dtype)


def sb_mean_not_sum(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).mean(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


# ==================================================================== softmax_backward: right
def sb_einsum_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    row = torch.einsum("...n,...n->...", p, g)[..., None]
    return (p * g - p * row).to(weights.dtype)


def sb_expanded_product(weights, grad_weights):
    work = torch.promote_types(weights.dtype, torch.float32)
    pg = weights.to(work) * grad_weights.to(work)  # p_i g_i
    # p_i (g_i - sum_j p_j g_j) = p_i g_i - p_i * sum_j p_j g_j
    return torch.addcmul(pg, weights.to(work), pg.sum(-1, keepdim=True), value=-1.0).to(
        weights.dtype)


# ================================================================== attention_backward: wrong
def ab_causal_top_left(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    sc = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), -math.inf)
    top = sc.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(sc - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2:]
    nk = k.shape[-2]
    work = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(work), k.to(work), v.to(work), grad_out.to(work)
    scale = d ** -0.5
    S = Q @ K.transpose(-1, -2) * scale
    if causal:
        S = S.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), float("-inf"))
    m = S.amax(-1, keepdim=True)
    m = m.masked_fill(torch.isneginf(m), 0.0)
    P = torch.exp(S - m)
    Z = P.sum(-1, keepdim=True)
    P = P / Z.masked_fill(Z == 0, 1.0)
    dV = P.transpose(-1, -2) @ G
    dP = G @ V.transpose(-1, -2)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K * scale
    dK = dS.transpose(-1, -2) @ Q
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_p_not_transposed(q, k, v, grad_out, causal=False):
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    qc, kc, vc, gc = q.to(c), k.to(c), v.to(c), grad_out.to(c)
    s = torch.matmul(qc, kc.transpose(-2, -1)) / math.sqrt(d)
    if causal:
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~vis, -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    w = torch.exp(s - mx)
    den = w.sum(-1, keepdim=True)
    w = w / torch.where(den == 0, torch.ones_like(den), den)
    grad_v = w @ gc
    grad_w = gc @ vc.transpose(-2, -1)
    grad_s = w * (grad_w - (grad_w * w).sum(-1, keepdim=True))
    grad_q = grad_s @ kc / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ qc / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_no_empty_row_guard(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_ / math.sqrt(d)).to(q.dtype),
            (gs.transpose(-2, -1) @ q_ / math.sqrt(d)).to(k.dtype),
            gv.to(v.dtype))


def ab_returns_float32(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = (t.to(f) for t in (q, k, v, grad_out))
    scores = torch.einsum("...id,...jd->...ij", qf, kf) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~keep, -math.inf)
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(scores - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    grad_v = torch.einsum("...ij,...ie->...je", p, gf)
    grad_p = torch.einsum("...ie,...je->...ij", gf, vf)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, kf) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, qf) / math.sqrt(d)
    return grad_q, grad_k, grad_v


def ab_row_term_over_queries(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    p = torch.exp(s - m)
    t = p.sum(-1, keepdim=True)
    p = p / torch.where(t == 0, 1.0, t)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-2, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ================================================================== attention_backward: right
def ab_einsum_float64(q, k, v, grad_out, causal=False):
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        qi = torch.arange(n_q)[:, None]
        kj = torch.arange(n_k)[None, :]
        s = torch.where(kj <= qi + (n_k - n_q), s, torch.tensor(-math.inf, dtype=s.dtype))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)  # all -inf rows -> NaN -> 0
    dv = torch.einsum("...qk,...qe->...ke", p, G)
    dp = torch.einsum("...qe,...ke->...qk", G, V)
    ds = p * (dp - torch.einsum("...qk,...qk->...q", dp, p)[..., None])
    dq = torch.einsum("...qk,...kd->...qd", ds, K) / math.sqrt(d)
    dk = torch.einsum("...qk,...qd->...kd", ds, Q) / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_row_by_row(q, k, v, grad_out, causal=False):
    """One query row at a time: each row's vector-Jacobian product, accumulated into dk, dv."""
    lead = q.shape[:-2]
    n_q, d = q.shape[-2], q.shape[-1]
    n_k, d_v = k.shape[-2], v.shape[-1]
    work = torch.promote_types(q.dtype, torch.float32)
    Q = q.to(work).reshape(-1, n_q, d)
    K = k.to(work).reshape(-1, n_k, d)
    V = v.to(work).reshape(-1, n_k, d_v)
    G = grad_out.to(work).reshape(-1, n_q, d_v)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    scale = 1.0 / math.sqrt(d)
    for b in range(Q.shape[0]):
        for i in range(n_q):
            visible = n_k if not causal else max(0, min(n_k, i + n_k - n_q + 1))
            if visible == 0:
                continue
            k_i, v_i = K[b, :visible], V[b, :visible]
            s = (k_i @ Q[b, i]) * scale  # (visible,)
            p = torch.softmax(s, dim=0)
            dV[b, :visible] += torch.outer(p, G[b, i])
            dp = v_i @ G[b, i]  # (visible,)
            ds = p * (dp - torch.dot(p, dp))
            dQ[b, i] = (ds @ k_i) * scale
            dK[b, :visible] += torch.outer(ds, Q[b, i]) * scale
    return (dQ.reshape(*lead, n_q, d).to(q.dtype), dK.reshape(*lead, n_k, d).to(k.dtype),
            dV.reshape(*lead, n_k, d_v).to(v.dtype))


# ============================================================ attention_backward_flops: wrong
def flops_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def flops_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len ** 2 * head_dim
    if recompute:
        backward += 4 * seq_len ** 2 * head_dim  # run the forward again
    return backward


def flops_recompute_test_inverted(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    total = 4 * per_product
    if not recompute:
        total += per_product
    return total


def flops_three_products(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    # grad_v, grad_q, grad_k
    return 2 * n2d * 3 + (2 * n2d if recompute else 0)


def flops_conditional_precedence(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + 2 * seq_len ** 2 * head_dim if recompute else 0


def flops_math_pow(seq_len, head_dim, recompute=True):
    count = 10 if recompute else 8
    return count * math.pow(seq_len, 2) * head_dim


# ============================================================ attention_backward_flops: right
def flops_named_products(seq_len, head_dim, recompute=True):
    shapes = {  # (m, k, n) of each product, 2 m k n FLOPs
        "grad_v = p^T grad_out": (seq_len, seq_len, head_dim),
        "grad_p = grad_out v^T": (seq_len, head_dim, seq_len),
        "grad_q = grad_s k": (seq_len, seq_len, head_dim),
        "grad_k = grad_s^T q": (seq_len, seq_len, head_dim),
    }
    if recompute:
        shapes["s = q k^T"] = (seq_len, head_dim, seq_len)
    return sum(2 * m * kk * n for m, kk, n in shapes.values())


def flops_ratio_of_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    # backward = 2x forward, 2.5x with recompute: multiply by 5/2 exactly in integers
    return forward * 5 // 2 if recompute else forward * 2


# ============================================================ flash_attention_backward: wrong
def fab_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        delta = (dp * p).sum(-1, keepdim=True)  # row term from this block
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_no_neginf_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(work) * scale
    go = grad_out.to(work)
    delta = (go * out.to(work)).sum(-1, keepdim=True)
    lse_col = lse.to(work).unsqueeze(-1)
    last = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.zeros(k.shape, dtype=work)
    grad_v = torch.zeros(v.shape, dtype=work)
    for start in range(0, n_k, block_size):
        stop = min(n_k, start + block_size)
        kb = k[:, :, start:stop].to(work)
        vb = v[:, :, start:stop].to(work)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > last, -math.inf)
        p = torch.exp(s - lse_col)
        grad_v[:, :, start:stop] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb
        grad_k[:, :, start:stop] = ds.transpose(-2, -1) @ qs
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(c) * d ** -0.5
    g_ = grad_out.to(c)
    dlt = (g_ * out.to(c)).sum(-1, keepdim=True)
    lse_ = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).to(c)[..., None]
    qp = torch.arange(n_q).view(-1, 1) + n_k - n_q
    gq = torch.zeros_like(q_)
    gk = torch.empty(k.shape, dtype=c)
    gv = torch.empty(v.shape, dtype=c)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb = k[:, :, s0:s1].to(c)
        vb = v[:, :, s0:s1].to(c)
        sc = q_ @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1).view(1, -1) > qp, -math.inf)
        p = torch.exp(sc - lse_)
        gv[:, :, s0:s1] = p.transpose(-2, -1) @ g_
        gs = p * (g_ @ vb.transpose(-2, -1) - dlt)
        gq = gs @ kb
        gk[:, :, s0:s1] = gs.transpose(-2, -1) @ q_
    gq = gq * d ** -0.5
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, N_q, D = q.shape
    N_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(D)
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(N_q)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for j0 in range(0, N_k, block_size):
        j1 = min(j0 + block_size, N_k)
        kb, vb = k[:, :, j0:j1].to(ct), v[:, :, j0:j1].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > rows, -math.inf)
        p = torch.exp(s - lse_)
        dv[:, :, j0:j1] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, j0:j1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(D)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_returns_float32(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(f) / math.sqrt(d)
    g = grad_out.to(f)
    delta = (g * out.to(f)).sum(-1, keepdim=True)
    L = lse.to(f).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=f)
    dv = torch.empty(v.shape, dtype=f)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(f), v[:, :, a:z].to(f)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return dq / math.sqrt(d), dk, dv


def fab_delta_second_pass(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)

    def block_probs(a, z):
        s = qs @ k[:, :, a:z].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        return torch.exp(s - L)

    # first pass: the row term sum_j dp_ij p_ij, accumulated over all key blocks
    delta = torch.zeros(B, H, nq, 1, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        p = block_probs(a, z)
        delta += (p * (g @ v[:, :, a:z].to(ct).transpose(-2, -1))).sum(-1, keepdim=True)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        p = block_probs(a, z)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fab_einsum_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    Q = q.double()
    G = grad_out.double()
    delta = torch.einsum("bhid,bhid->bhi", G, out.double())  # (B, H, N_q)
    lse64 = lse.double()
    empty = torch.isneginf(lse64)
    lse_safe = torch.where(empty, torch.zeros_like(lse64), lse64)
    scale = 1.0 / math.sqrt(d)
    dQ = torch.zeros(B, H, n_q, d, dtype=torch.float64)
    dK = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    dV = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    last_key = torch.arange(n_q) + (n_k - n_q)
    for j in range(0, n_k, block_size):
        Kb = k[:, :, j:j + block_size].double()
        Vb = v[:, :, j:j + block_size].double()
        width = Kb.shape[2]
        s = torch.einsum("bhid,bhjd->bhij", Q, Kb) * scale
        p = torch.exp(s - lse_safe[..., None])
        p = p.masked_fill(empty[..., None], 0.0)
        if causal:
            hidden = torch.arange(j, j + width)[None, :] > last_key[:, None]
            p = p.masked_fill(hidden, 0.0)
        dV[:, :, j:j + width] = torch.einsum("bhij,bhid->bhjd", p, G)
        dp = torch.einsum("bhid,bhjd->bhij", G, Vb)
        ds = p * (dp - delta[..., None])
        dQ += torch.einsum("bhij,bhjd->bhid", ds, Kb) * scale
        dK[:, :, j:j + width] = torch.einsum("bhij,bhid->bhjd", ds, Q) * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_query_key_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries too: dk, dv accumulate over query tiles, dq over key tiles."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    rs = 1.0 / math.sqrt(d)
    dq = torch.zeros(B, H, n_q, d, dtype=work)
    dk = torch.zeros(B, H, n_k, d, dtype=work)
    dv = torch.zeros(B, H, n_k, d, dtype=work)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qt = q[:, :, i0:i1].to(work)
        gt = grad_out[:, :, i0:i1].to(work)
        dt = (gt * out[:, :, i0:i1].to(work)).sum(-1, keepdim=True)
        lt = lse[:, :, i0:i1].to(work)[..., None]
        no_key = torch.isneginf(lt)
        lt = torch.where(no_key, torch.zeros_like(lt), lt)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            kt = k[:, :, j0:j1].to(work)
            vt = v[:, :, j0:j1].to(work)
            s = (qt @ kt.transpose(-2, -1)) * rs
            if causal:
                qi = torch.arange(i0, i1)[:, None] + (n_k - n_q)
                kj = torch.arange(j0, j1)[None, :]
                s = s.masked_fill(kj > qi, -math.inf)
            p = torch.exp(s - lt).masked_fill(no_key, 0.0)
            dv[:, :, j0:j1] += p.transpose(-2, -1) @ gt
            ds = p * (gt @ vt.transpose(-2, -1) - dt)
            dq[:, :, i0:i1] += (ds @ kt) * rs
            dk[:, :, j0:j1] += (ds.transpose(-2, -1) @ qt) * rs
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "Sums the row term without keepdim=True, so (..., ) broadcasts against (..., n) along "
          "the wrong axis: wrong values for square inputs, a shape error otherwise.",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_axis_0",
          "Sums grad_weights * weights over dim=0 instead of the last axis, so the row term "
          "mixes different rows.",
          sb_sum_over_first_axis),
    Entry("softmax_backward", "wrong", "missing_leading_weights_factor",
          "Returns grad_weights - rowsum(grad_weights * weights) without the leading factor "
          "weights * (...).",
          sb_missing_outer_weights),
    Entry("softmax_backward", "wrong", "returns_float32",
          "Computes in float32 but never casts back, so float16 / bfloat16 inputs get a "
          "float32 gradient instead of weights' dtype.",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "row_term_unweighted",
          "The row term sums grad_weights alone instead of grad_weights * weights.",
          sb_row_term_unweighted),
    Entry("softmax_backward", "wrong", "row_term_mean",
          "Takes .mean over the row for the row term instead of .sum, dividing it by n.",
          sb_mean_not_sum),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "addcmul_expanded", None, sb_expanded_product),
    Entry("attention_backward", "wrong", "causal_mask_top_left",
          "Builds the causal mask with tril() (top-left aligned) instead of tril(N_k - N_q), "
          "so with N_q != N_k queries see the wrong keys.",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "grad_k_missing_scale",
          "Multiplies grad_q by 1/sqrt(d) but forgets the same factor in "
          "grad_k = grad_s^T q.",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "grad_v_p_not_transposed",
          "Computes grad_v = p @ grad_out instead of p^T @ grad_out: wrong values when "
          "N_q == N_k, a shape error when they differ.",
          ab_p_not_transposed),
    Entry("attention_backward", "wrong", "fully_masked_rows_nan",
          "Uses torch.softmax on causal scores without guarding rows with no visible key, so "
          "those rows (causal, N_q > N_k) give NaN instead of zeros in every gradient.",
          ab_no_empty_row_guard),
    Entry("attention_backward", "wrong", "returns_float32",
          "Computes in float32 and returns the float32 gradients without casting back to the "
          "inputs' dtype.",
          ab_returns_float32),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "The softmax-backward row term sums grad_p * p over dim=-2 (the queries) instead of "
          "over the keys, dim=-1.",
          ab_row_term_over_queries),
    Entry("attention_backward", "right", "einsum_float64_nan_to_num", None, ab_einsum_float64),
    Entry("attention_backward", "right", "row_by_row_vjp", None, ab_row_by_row),
    Entry("attention_backward_flops", "wrong", "multiply_add_as_one_flop",
          "Counts each multiply-add as 1 FLOP (N^2 d per product) instead of 2.",
          flops_mac_as_one),
    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "Adds the whole forward's 4 N^2 d for the recomputation; only the scores q k^T "
          "(2 N^2 d) are recomputed.",
          flops_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "recompute_test_inverted",
          "The test is inverted (if not recompute), so the extra 2 N^2 d is added exactly "
          "when the scores are not recomputed.",
          flops_recompute_test_inverted),
    Entry("attention_backward_flops", "wrong", "forgets_grad_p_product",
          "Counts three products (grad_v, grad_q, grad_k) and forgets grad_p = grad_out v^T.",
          flops_three_products),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "Writes 8 N^2 d + 2 N^2 d if recompute else 0, and the conditional applies to the "
          "whole sum, so recompute=False returns 0.",
          flops_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "math_pow_float",
          "Uses math.pow(seq_len, 2), which returns a float, so the count is a float instead "
          "of a plain int.",
          flops_math_pow),
    Entry("attention_backward_flops", "right", "named_product_shapes", None,
          flops_named_products),
    Entry("attention_backward_flops", "right", "ratio_of_forward", None, flops_ratio_of_forward),
    Entry("flash_attention_backward", "wrong", "delta_from_block_only",
          "Computes the row term as rowsum(grad_p * p) over the current key block only, "
          "instead of delta = rowsum(grad_out * out) over the whole row.",
          fab_block_local_delta),
    Entry("flash_attention_backward", "wrong", "lse_neginf_unguarded",
          "Recomputes p = exp(s - lse) without guarding lse = -inf, so a query with no "
          "visible key computes exp(-inf + inf) = NaN.",
          fab_no_neginf_guard),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten_per_block",
          "Assigns grad_q = grad_s @ k_block in each block instead of adding to it, so only "
          "the last key block's contribution survives.",
          fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "causal_mask_top_left",
          "Masks keys j > i (top-left) instead of j > i + N_k - N_q (bottom-right), so with "
          "N_q != N_k the recomputed probabilities are wrong.",
          fab_causal_top_left),
    Entry("flash_attention_backward", "wrong", "returns_float32",
          "Returns the float32 gradients without casting back to the inputs' dtype.",
          fab_returns_float32),
    Entry("flash_attention_backward", "wrong", "delta_by_a_second_pass",
          "Gets the row term from a first pass over all key blocks (rowsum(grad_p * p), "
          "recomputing p and grad_p) instead of rowsum(grad_out * out): right values, but two "
          "extra products per block, beyond one recomputation's FLOPs.",
          fab_delta_second_pass),
    Entry("flash_attention_backward", "right", "key_blocks_einsum_float64", None,
          fab_einsum_float64),
    Entry("flash_attention_backward", "right", "query_and_key_tiles", None, fab_query_key_tiles),
]
