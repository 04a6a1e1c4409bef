"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward: wrong
def sb_sum_over_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (p * g).sum(dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    inner = (g * p).sum(-1)
    return (p * (g - inner)).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = torch.sum(g * p, dim=-1, keepdim=True)
    return (p * (row - g)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (1 - p) * g).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    p = weights.float() if weights.dtype != torch.float64 else weights
    g = grad_weights.to(p.dtype)
    return p * g - p * (p * g).sum(-1, keepdim=True)


def sb_row_sum_of_grad(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(dim=-1, keepdim=True))).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_einsum_f64(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    dot = torch.einsum("...i,...i->...", p, g)
    return (p * g - p * dot.unsqueeze(-1)).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    n = weights.shape[-1]
    p = weights.reshape(-1, n).double()
    g = grad_weights.reshape(-1, n).double()
    out = torch.empty_like(p)
    for r in range(p.shape[0]):
        pr, gr = p[r], g[r]
        out[r] = pr * (gr - torch.dot(pr, gr))
    return out.reshape(weights.shape).to(weights.dtype)


# ============================================================ attention_backward: wrong
def ab_grad_k_without_transpose(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    sc = 1 / math.sqrt(d)
    s = Q @ K.transpose(-1, -2) * sc
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    dv = p.transpose(-1, -2) @ G
    dp = G @ V.transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K * sc
    dk = ds @ Q * sc
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_no_chain_scale(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, gg = (t.to(ct) for t in (q, k, v, grad_out))
    scores = qq @ kk.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~keep, -math.inf)
    top = scores.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    w = torch.exp(scores - top)
    tot = w.sum(-1, keepdim=True)
    p = w / tot.masked_fill(tot == 0, 1.0)
    grad_v = p.transpose(-2, -1) @ gg
    grad_p = gg @ vv.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return (grad_s @ kk).to(q.dtype), (grad_s.transpose(-2, -1) @ qq).to(k.dtype), \
        grad_v.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = torch.einsum("...qd,...kd->...qk", q_, k_) / math.sqrt(d)
    if causal:
        hidden = torch.arange(n_k)[None, :] > torch.arange(n_q)[:, None]
        s = s.masked_fill(hidden, -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    gv = torch.einsum("...qk,...qe->...ke", p, g_)
    gp = torch.einsum("...qe,...ke->...qk", g_, v_)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = torch.einsum("...qk,...kd->...qd", gs, k_) / math.sqrt(d)
    gk = torch.einsum("...qk,...qd->...kd", gs, q_) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_nan_rows_without_keys(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_returns_float32(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = d ** -0.5
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return gs @ k_ * scale, gs.transpose(-2, -1) @ q_ * scale, gv


def ab_drops_row_term(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    gv = p.transpose(-2, -1) @ g_
    gs = p * (g_ @ v_.transpose(-2, -1))  # d softmax / d s taken elementwise
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ attention_backward: right
def ab_delta_identity_f64(q, k, v, grad_out, causal=False):
    """Row term from delta = rowsum(grad_out * out), the FlashAttention identity."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        ok = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = torch.where(ok, s, torch.tensor(-math.inf, dtype=torch.float64))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = torch.einsum("...ij,...je->...ie", p, V)
    delta = (G * out).sum(-1, keepdim=True)
    gp = torch.einsum("...ie,...je->...ij", G, V)
    gs = p * (gp - delta)
    gq = torch.einsum("...ij,...jd->...id", gs, K) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", gs, Q) / math.sqrt(d)
    gv = torch.einsum("...ij,...ie->...je", p, G)
    return gq.to(q.dtype), gk.to(q.dtype), gv.to(q.dtype)


def ab_per_query_rows(q, k, v, grad_out, causal=False):
    """One query row at a time, jacobian of the row's softmax applied as a vector."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    gq = torch.zeros_like(Q)
    gk = torch.zeros_like(K)
    gv = torch.zeros_like(V)
    c = 1.0 / math.sqrt(d)
    for i in range(n_q):
        last = i + n_k - n_q if causal else n_k - 1
        if last < 0:
            continue
        kk, vv = K[..., : last + 1, :], V[..., : last + 1, :]
        s = (kk @ Q[..., i, :].unsqueeze(-1)).squeeze(-1) * c  # (..., j)
        p = torch.softmax(s, dim=-1)
        g = G[..., i, :]
        gp = (vv @ g.unsqueeze(-1)).squeeze(-1)
        gs = p * (gp - (p * gp).sum(-1, keepdim=True))
        gq[..., i, :] = (gs.unsqueeze(-1) * kk).sum(-2) * c
        gk[..., : last + 1, :] += gs.unsqueeze(-1) * Q[..., i, None, :] * c
        gv[..., : last + 1, :] += p.unsqueeze(-1) * g.unsqueeze(-2)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def abf_recompute_full_forward(seq_len, head_dim, recompute=True):
    total = 8 * seq_len * seq_len * head_dim
    if recompute:
        total += 4 * seq_len * seq_len * head_dim
    return total


def abf_mac_one_flop(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    return 2 * seq_len * seq_len * head_dim * 4 + 2 * seq_len * seq_len * head_dim \
        if recompute else 0


def abf_d_squared(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim * head_dim
    return per_product * (5 if recompute else 4)


def abf_xor_square(seq_len, head_dim, recompute=True):
    n_sq = seq_len ^ 2
    flops = 8 * n_sq * head_dim
    if recompute:
        flops += 2 * n_sq * head_dim
    return flops


# ============================================================ attention_backward_flops: right
def abf_list_of_products(seq_len, head_dim, recompute=True):
    names = ["grad_v", "grad_p", "grad_q", "grad_k"] + (["scores"] if recompute else [])
    return sum(2 * seq_len * seq_len * head_dim for _ in names)


def abf_ratio_of_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
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
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-1, -2) @ g
        dp = g @ vb.transpose(-1, -2)
        delta = (dp * p).sum(-1, keepdim=True)  # row term of this block
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-1, -2) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, G = q.to(ct), grad_out.to(ct)
    delta = (G * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).to(ct)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(Q)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    c = 1.0 / math.sqrt(d)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = Q @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-1, -2) @ G
        ds = p * (G @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb * c
        dk[:, :, a:z] = ds.transpose(-1, -2) @ Q * c
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(n_q)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-1, -2) @ qs
    return (dq * d ** -0.5).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_nan_without_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-1, -2) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        dq = ds @ kb
        dk[:, :, a:z] = ds.transpose(-1, -2) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_full_scores_up_front(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    s_all = qs @ k.to(ct).transpose(-1, -2)  # scores once, sliced per block below
    if causal:
        s_all = s_all.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q),
                                  -math.inf)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        p = torch.exp(s_all[..., a:z] - L)
        dv[:, :, a:z] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-1, -2) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fab_query_and_key_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """2-D tiling: outer loop over key blocks, inner loop over query blocks, float64."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    c = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    G, O = grad_out.double(), out.double()
    lse64 = lse.double()
    D = (G * O).sum(-1)  # (B, H, n_q)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kj, Vj = K[:, :, j0:j1], V[:, :, j0:j1]
        for i0 in range(0, n_q, block_size):
            i1 = min(i0 + block_size, n_q)
            Qi, Gi = Q[:, :, i0:i1], G[:, :, i0:i1]
            Li = lse64[:, :, i0:i1, None]
            S = torch.einsum("bhid,bhjd->bhij", Qi, Kj) * c
            if causal:
                pos = torch.arange(i0, i1)[:, None] + (n_k - n_q)
                S = torch.where(torch.arange(j0, j1)[None, :] <= pos, S,
                                torch.tensor(-math.inf, dtype=torch.float64))
            P = torch.where(torch.isfinite(Li), torch.exp(S - torch.nan_to_num(Li, neginf=0.0)),
                            torch.zeros_like(S))
            dV[:, :, j0:j1] += torch.einsum("bhij,bhie->bhje", P, Gi)
            dP = torch.einsum("bhie,bhje->bhij", Gi, Vj)
            dS = P * (dP - D[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += torch.einsum("bhij,bhjd->bhid", dS, Kj) * c
            dK[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", dS, Qi) * c
    return dQ.to(q.dtype), dK.to(q.dtype), dV.to(q.dtype)


def fab_lists_of_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Key blocks via torch.split; grad_k / grad_v blocks collected and concatenated."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.float64
    scale = d ** -0.5
    qf = q.to(ct)
    go = grad_out.to(ct)
    row_term = torch.einsum("bhid,bhid->bhi", go, out.to(ct)).unsqueeze(-1)
    has_key = torch.isfinite(lse).unsqueeze(-1)
    lse_safe = torch.where(has_key, lse.to(ct).unsqueeze(-1), torch.zeros(1, dtype=ct))
    last_visible = torch.arange(n_q).unsqueeze(-1) + (n_k - n_q)
    gq = torch.zeros_like(qf)
    gk_parts, gv_parts = [], []
    first = 0
    for kb, vb in zip(torch.split(k.to(ct), block_size, dim=2),
                      torch.split(v.to(ct), block_size, dim=2)):
        width = kb.shape[2]
        s = (qf @ kb.transpose(2, 3)) * scale
        p = torch.exp(s - lse_safe) * has_key
        if causal:
            p = p * (torch.arange(first, first + width).unsqueeze(0) <= last_visible)
        gv_parts.append(p.transpose(2, 3) @ go)
        ds = p * (go @ vb.transpose(2, 3) - row_term)
        gq = gq + ds @ kb
        gk_parts.append((ds.transpose(2, 3) @ qf) * scale)
        first += width
    gk = torch.cat(gk_parts, dim=2) if gk_parts else torch.zeros_like(k, dtype=ct)
    gv = torch.cat(gv_parts, dim=2) if gv_parts else torch.zeros_like(v, dtype=ct)
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_sum_over_axis_0",
          "sums p * g over dim=0 instead of over the last axis, mixing the rows' row terms",
          sb_sum_over_first_axis),
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so the (...,) vector broadcasts against the "
          "last axis: it raises, or on a square input subtracts row i's term from column i",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "writes p * (rowsum(g * p) - g), the negative of the gradient",
          sb_sign_flipped),
    Entry("softmax_backward", "wrong", "jacobian_diagonal_only",
          "applies only the diagonal of the Jacobian, p * (1 - p) * g, dropping the "
          "off-diagonal -p_i p_j terms",
          sb_diagonal_only),
    Entry("softmax_backward", "wrong", "returns_float32",
          "upcasts half-precision inputs to float32 and returns float32 instead of weights' dtype",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "row_term_sums_grad_only",
          "the row term sums grad_weights alone instead of grad_weights * weights",
          sb_row_sum_of_grad),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_f64),
    Entry("softmax_backward", "right", "row_by_row_dot", None, sb_row_loop),
    Entry("attention_backward", "wrong", "grad_k_missing_transpose",
          "computes grad_k = grad_s @ q instead of grad_s^T @ q: it raises when N_q != N_k "
          "and is wrong on square inputs",
          ab_grad_k_without_transpose),
    Entry("attention_backward", "wrong", "no_scale_in_chain_rule",
          "forgets the 1/sqrt(d) factor of the chain rule in grad_q and grad_k (it is only "
          "used for the forward scores)",
          ab_no_chain_scale),
    Entry("attention_backward", "wrong", "causal_top_left",
          "masks key j > i (top-left) instead of j > i + N_k - N_q, wrong whenever N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "nan_rows_without_keys",
          "uses torch.softmax on rows that are all -inf, so a causal query with no key gets "
          "NaN probabilities and NaN gradients instead of zeros",
          ab_nan_rows_without_keys),
    Entry("attention_backward", "wrong", "returns_compute_dtype",
          "computes in float32 for half-precision inputs and returns float32 gradients "
          "instead of the inputs' dtype",
          ab_returns_float32),
    Entry("attention_backward", "wrong", "softmax_row_term_dropped",
          "back-propagates through the softmax elementwise, grad_s = p * grad_p, dropping "
          "the - p * rowsum(grad_p * p) term",
          ab_drops_row_term),
    Entry("attention_backward", "right", "delta_identity_einsum_f64", None,
          ab_delta_identity_f64),
    Entry("attention_backward", "right", "query_row_loop", None, ab_per_query_rows),
    Entry("attention_backward_flops", "wrong", "recompute_counts_whole_forward",
          "counts the recomputation as a whole forward (4 N^2 d) although only the scores "
          "q k^T (2 N^2 d) are recomputed",
          abf_recompute_full_forward),
    Entry("attention_backward_flops", "wrong", "multiply_add_one_flop",
          "counts one multiply-add as 1 FLOP, giving half the FLOPs",
          abf_mac_one_flop),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "multiplies the forward by 2.5, so it returns a float instead of a plain int",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "writes a + b if recompute else 0 without parentheses: the conditional expression "
          "takes the whole sum, so recompute=False returns 0",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "d_squared_not_n_squared",
          "writes each product as 2 N d^2 instead of 2 N^2 d, swapping a sequence length "
          "for a head dimension",
          abf_d_squared),
    Entry("attention_backward_flops", "wrong", "xor_for_power",
          "writes seq_len ^ 2, which is bitwise XOR in Python, instead of seq_len ** 2",
          abf_xor_square),
    Entry("attention_backward_flops", "right", "sum_over_named_products", None,
          abf_list_of_products),
    Entry("attention_backward_flops", "right", "ratio_of_forward_int", None,
          abf_ratio_of_forward),
    Entry("flash_attention_backward", "wrong", "block_local_row_term",
          "computes the row term per block as rowsum(grad_p * p) over that block's keys "
          "instead of delta = rowsum(grad_out * out) over the whole row",
          fab_block_local_delta),
    Entry("flash_attention_backward", "wrong", "recomputed_scores_unscaled",
          "recomputes the scores as q k^T without the 1/sqrt(d) scale before exp(s - lse), "
          "so the recomputed probabilities are wrong",
          fab_unscaled_recompute),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "masks key j > i instead of j > i + N_k - N_q: the causal mask is top-left aligned",
          fab_causal_top_left),
    Entry("flash_attention_backward", "wrong", "nan_for_minus_inf_lse",
          "subtracts lse = -inf on rows with no visible key: exp(-inf - (-inf)) is NaN "
          "instead of a zero probability",
          fab_nan_without_lse_guard),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_block in each block instead of accumulating with +=, "
          "so only the last key block's contribution survives",
          fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "full_score_matrix",
          "computes all scores q k^T up front and slices them per block, building the "
          "N x N tensor the blockwise backward must avoid",
          fab_full_scores_up_front),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fab_query_and_key_tiles_f64),
    Entry("flash_attention_backward", "right", "split_blocks_concat", None,
          fab_lists_of_blocks),
]
