"""Held-out learners' answers, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================================ softmax_backward
def sb_row_without_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_row_over_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = torch.sum(p * g, dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_forgets_outer_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    w, gw = weights.to(ct), grad_weights.to(ct)
    return (gw - (gw * w).sum(-1, keepdim=True)).to(weights.dtype)


def sb_row_term_without_weights(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    inner = (p * g).sum(dim=-1, keepdim=True)
    return p * (g - inner)


def sb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    s = (g * p).sum(-1, keepdim=True)
    return (p * (s - g)).to(weights.dtype)


def sb_right_einsum_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    row = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_right_matvec(weights, grad_weights):
    p = weights.to(torch.promote_types(weights.dtype, torch.float32))
    g = grad_weights.to(p.dtype)
    row = (p.unsqueeze(-2) @ g.unsqueeze(-1)).squeeze(-1)  # (..., 1): p . g per row
    return torch.addcmul(-p * row, p, g).to(weights.dtype)


# ============================================================================ attention_backward
def ab_uses_autograd(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_ = q.detach().to(ct).requires_grad_(True)
    k_ = k.detach().to(ct).requires_grad_(True)
    v_ = v.detach().to(ct).requires_grad_(True)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    with torch.enable_grad():
        s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
        if causal:
            s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
        top = s.amax(-1, keepdim=True).detach()
        top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
        e = torch.exp(s - top)
        tot = e.sum(-1, keepdim=True)
        p = e / torch.where(tot == 0, torch.ones_like(tot), tot)
        out = p @ v_
        gq, gk, gv = torch.autograd.grad(out, (q_, k_, v_), grad_out.to(ct))
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_k_not_transposed(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    nq, nk, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
    sc = 1 / math.sqrt(d)
    S = Q @ K.transpose(-2, -1) * sc
    if causal:
        S = S.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    M = S.amax(-1, keepdim=True)
    M = torch.where(torch.isinf(M), torch.zeros_like(M), M)
    E = torch.exp(S - M)
    Z = E.sum(-1, keepdim=True)
    P = E / torch.where(Z == 0, torch.ones_like(Z), Z)
    dV = P.transpose(-2, -1) @ G
    dP = G @ V.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K * sc
    dK = dS @ Q * sc
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_scale_missing_in_grads(q, k, v, grad_out, causal=False):
    f = torch.promote_types(q.dtype, torch.float32)
    q32, k32, v32, g32 = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = q32 @ k32.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~vis, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = m.masked_fill(torch.isinf(m), 0.0)
    w = torch.exp(s - m)
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    g_v = w.transpose(-2, -1) @ g32
    g_w = g32 @ v32.transpose(-2, -1)
    g_s = w * (g_w - (g_w * w).sum(dim=-1, keepdim=True))
    g_q = g_s @ k32
    g_k = g_s.transpose(-2, -1) @ q32
    return g_q.to(q.dtype), g_k.to(k.dtype), g_v.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    d = q.shape[-1]
    scores = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, -math.inf)
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(scores - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.matmul(q_, k_.transpose(-2, -1)) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.softmax(s, dim=-1)
    gv = torch.matmul(p.transpose(-2, -1), g_)
    gp = torch.matmul(g_, v_.transpose(-2, -1))
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = torch.matmul(gs, k_) / math.sqrt(d)
    gk = torch.matmul(gs.transpose(-2, -1), q_) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_row_term_over_queries(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = d ** -0.5
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    p = torch.exp(s - mx)
    z = p.sum(-1, keepdim=True)
    p = p / torch.where(z == 0, 1.0, z)
    dv = p.transpose(-2, -1) @ g_
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(dim=-2, keepdim=True))
    dq = ds @ k_ * scale
    dk = ds.transpose(-2, -1) @ q_ * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_right_einsum_float64(q, k, v, grad_out, causal=False):
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    nq, nk, d = Q.shape[-2], K.shape[-2], Q.shape[-1]
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        ok = torch.arange(nk)[None, :] <= torch.arange(nq)[:, None] + (nk - nq)
        s = torch.where(ok, s, torch.tensor(-math.inf, dtype=torch.float64))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.where(torch.isneginf(lse), torch.zeros_like(s), torch.exp(s - lse))
    dV = torch.einsum("...qk,...qe->...ke", p, G)
    dP = torch.einsum("...qe,...ke->...qk", G, V)
    row = torch.einsum("...qk,...qk->...q", dP, p)[..., None]
    dS = p * (dP - row)
    dQ = torch.einsum("...qk,...kd->...qd", dS, K) / math.sqrt(d)
    dK = torch.einsum("...qk,...qd->...kd", dS, Q) / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_right_flattened_bmm(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    nq, d = q.shape[-2:]
    nk, dv_ = v.shape[-2:]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q = q.reshape(-1, nq, d).to(ct)
    K = k.reshape(-1, nk, d).to(ct)
    V = v.reshape(-1, nk, dv_).to(ct)
    G = grad_out.reshape(-1, nq, dv_).to(ct)
    s = torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(d)
    if causal:
        i = torch.arange(nq).unsqueeze(1)
        j = torch.arange(nk).unsqueeze(0)
        s = s.masked_fill(j - i > nk - nq, float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)  # no visible key: zeros
    gv = torch.bmm(p.transpose(1, 2), G)
    gp = torch.bmm(G, V.transpose(1, 2))
    gs = p * gp - p * (p * gp).sum(2, keepdim=True)
    gq = torch.bmm(gs, K) / math.sqrt(d)
    gk = torch.bmm(gs.transpose(1, 2), Q) / math.sqrt(d)
    return (gq.reshape(*lead, nq, d).to(q.dtype), gk.reshape(*lead, nk, d).to(k.dtype),
            gv.reshape(*lead, nk, dv_).to(v.dtype))


# ============================================================================ attention_backward_flops
def abf_multiply_adds(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ** 2 * head_dim
    if not recompute:
        flops += 2 * seq_len ** 2 * head_dim
    return flops


def abf_three_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    total = 2 * n * n * d * 3  # grad_v, grad_q, grad_k
    if recompute:
        total += 2 * n * n * d
    return total


def abf_ratio_as_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return 2.5 * forward if recompute else 2 * forward


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len * seq_len * head_dim
    forward = 4 * seq_len * seq_len * head_dim
    return backward + forward if recompute else backward


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 8 * n2d + 2 * n2d if recompute else 0


def abf_right_sum_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = {"grad_v": (n, n, d), "grad_p": (n, d, n), "grad_q": (n, n, d),
              "grad_k": (n, n, d)}
    if recompute:
        shapes["scores"] = (n, d, n)
    return sum(2 * m * kk * nn for m, kk, nn in shapes.values())


def abf_right_bool_arith(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len ** 2 * head_dim


# ============================================================================ flash_attention_backward
def fb_delta_per_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, Nk, block_size):
        z = min(a + block_size, Nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        delta = (dp * p).sum(-1, keepdim=True)
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_no_guard_for_empty_rows(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).unsqueeze(-1)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, Nk, block_size):
        z = min(a + block_size, Nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_k_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    q_f = q.to(f)
    go = grad_out.to(f)
    delta = (go * out.to(f)).sum(dim=-1, keepdim=True)
    lse_f = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).to(f)[..., None]
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q_f)
    grad_k = torch.zeros(k.shape, dtype=f)
    grad_v = torch.zeros(v.shape, dtype=f)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        kb = k[:, :, j0:j1].to(f)
        vb = v[:, :, j0:j1].to(f)
        s = (q_f @ kb.transpose(-2, -1)) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > rows, -math.inf)
        p = torch.exp(s - lse_f)
        grad_v[:, :, j0:j1] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb / math.sqrt(d)
        grad_k[:, :, j0:j1] = ds.transpose(-2, -1) @ q_f
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(Nq)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, Nk, block_size):
        z = min(a + block_size, Nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, Nk, block_size):
        z = min(a + block_size, Nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_recomputes_lse(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    # first pass: the log-sum-exp of every row, block by block
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    ssum = torch.zeros((B, H, Nq, 1), dtype=ct)
    for a in range(0, Nk, block_size):
        z = min(a + block_size, Nk)
        s = qs @ k[:, :, a:z].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        ssum = ssum * torch.exp(m - sh) + torch.exp(s - sh).sum(-1, keepdim=True)
        m = m_new
    L = torch.where(ssum > 0, torch.where(torch.isinf(m), 0.0, m) + torch.log(ssum),
                    torch.full_like(ssum, math.inf))
    # second pass: the gradients
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, Nk, block_size):
        z = min(a + block_size, Nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_right_two_level_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over key blocks and query blocks (FlashAttention-2's full tiling), float64."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    sc = 1.0 / math.sqrt(d)
    Q = q.double()
    K = k.double()
    V = v.double()
    G = grad_out.double()
    D = (G * out.double()).sum(-1)  # (B, H, Nq)
    L = lse.double()
    L = torch.where(torch.isneginf(L), torch.full_like(L, math.inf), L)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for j0 in range(0, Nk, block_size):
        j1 = min(j0 + block_size, Nk)
        Kj, Vj = K[:, :, j0:j1], V[:, :, j0:j1]
        for i0 in range(0, Nq, block_size):
            i1 = min(i0 + block_size, Nq)
            s = Q[:, :, i0:i1] @ Kj.transpose(-2, -1) * sc
            if causal:
                qi = torch.arange(i0, i1)[:, None] + (Nk - Nq)
                kj = torch.arange(j0, j1)[None, :]
                s = s.masked_fill(kj > qi, -math.inf)
            p = torch.exp(s - L[:, :, i0:i1, None])
            Gi = G[:, :, i0:i1]
            dV[:, :, j0:j1] += p.transpose(-2, -1) @ Gi
            ds = p * (Gi @ Vj.transpose(-2, -1) - D[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += ds @ Kj * sc
            dK[:, :, j0:j1] += ds.transpose(-2, -1) @ Q[:, :, i0:i1] * sc
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_right_einsum_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf, gf = q.to(f), grad_out.to(f)
    delta = torch.einsum("bhqd,bhqd->bhq", gf, out.to(f))
    lse_f = lse.to(f)
    no_key = torch.isneginf(lse_f)
    lse_safe = torch.where(no_key, torch.zeros_like(lse_f), lse_f)
    grads_k, grads_v = [], []
    grad_q = torch.zeros_like(qf)
    for lo in range(0, n_k, block_size):
        hi = min(n_k, lo + block_size)
        kb, vb = k[:, :, lo:hi].to(f), v[:, :, lo:hi].to(f)
        s = torch.einsum("bhqd,bhkd->bhqk", qf, kb) / math.sqrt(d)
        p = torch.exp(s - lse_safe[..., None])
        if causal:
            vis = torch.arange(lo, hi)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
            p = p * vis
        p = p.masked_fill(no_key[..., None], 0.0)
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, gf))
        dp = torch.einsum("bhqd,bhkd->bhqk", gf, vb)
        ds = p * (dp - delta[..., None]) / math.sqrt(d)
        grad_q = grad_q + torch.einsum("bhqk,bhkd->bhqd", ds, kb)
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, qf))
    grad_k = torch.cat(grads_k, dim=2)
    grad_v = torch.cat(grads_v, dim=2)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term with sum(dim=-1) but no keepdim, so the (...,) row sums broadcast "
          "against the last axis instead of their rows: a shape error, or the wrong rows "
          "subtracted for a square input",
          sb_row_without_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_first_axis",
          "sums grad_weights * weights over dim 0 instead of the last axis, so the row term "
          "mixes different rows (right only for a single (n,) row)",
          sb_row_over_first_axis),
    Entry("softmax_backward", "wrong", "outer_weights_factor_missing",
          "returns grad_weights - rowsum(grad_weights * weights) and forgets to multiply by "
          "weights: not the Jacobian diag(p) - p p^T applied to the gradient",
          sb_forgets_outer_p),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "takes the row term as rowsum(grad_weights), leaving out the weights inside the sum "
          "(it should be rowsum(grad_weights * weights))",
          sb_row_term_without_weights),
    Entry("softmax_backward", "wrong", "result_left_in_float32",
          "computes in float32 but never casts back: float16 / bfloat16 inputs get a float32 "
          "result instead of weights' dtype",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "writes weights * (row - grad_weights) instead of weights * (grad_weights - row): "
          "the gradient has the wrong sign",
          sb_sign_flipped),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_right_einsum_float64),
    Entry("softmax_backward", "right", "row_dot_by_matmul_addcmul", None, sb_right_matvec),

    Entry("attention_backward", "wrong", "differentiates_with_autograd",
          "gets the gradients from torch.autograd.grad, which lesson 12 forbids (the exercise "
          "is to write the chain rule out): under the checker it raises",
          ab_uses_autograd),
    Entry("attention_backward", "wrong", "grad_k_without_transpose",
          "computes grad_k = grad_s @ q instead of grad_s^T @ q: a shape error when N_q != N_k "
          "and wrong values when they are equal",
          ab_grad_k_not_transposed),
    Entry("attention_backward", "wrong", "scale_missing_in_grad_q_and_grad_k",
          "scales the scores by 1/sqrt(d) in the forward but leaves the factor out of grad_q "
          "and grad_k (the chain rule through s = q k^T / sqrt(d) brings it back)",
          ab_scale_missing_in_grads),
    Entry("attention_backward", "wrong", "causal_mask_top_left",
          "builds the causal mask with tril() and no N_k - N_q offset (top-left aligned), "
          "wrong whenever N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "softmax_nan_on_rows_without_keys",
          "uses torch.softmax on the masked scores, which gives NaN for a row with no visible "
          "key (causal, N_q > N_k), and the NaN spreads into every gradient",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "sums grad_p * p over dim=-2 (the queries) instead of dim=-1 (the keys of each "
          "row) in the softmax backward",
          ab_row_term_over_queries),
    Entry("attention_backward", "right", "einsum_logsumexp_float64", None,
          ab_right_einsum_float64),
    Entry("attention_backward", "right", "flattened_bmm_float32", None, ab_right_flattened_bmm),

    Entry("attention_backward_flops", "wrong", "multiply_adds_not_flops",
          "counts N^2 d per product (multiply-adds) instead of 2 N^2 d FLOPs: half the answer",
          abf_multiply_adds),
    Entry("attention_backward_flops", "wrong", "recompute_condition_inverted",
          "adds the recomputation's 2 N^2 d when recompute is False instead of when it is True",
          abf_recompute_inverted),
    Entry("attention_backward_flops", "wrong", "three_products_only",
          "counts three backward products (grad_v, grad_q, grad_k) and forgets grad_p = "
          "grad_out v^T: 6 N^2 d instead of 8 N^2 d",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "float_from_ratio",
          "returns 2.5 * forward FLOPs, a float, where the contract asks for a plain int",
          abf_ratio_as_float),
    Entry("attention_backward_flops", "wrong", "recompute_counts_whole_forward",
          "charges the whole forward (4 N^2 d, both products) for the recomputation, but "
          "FlashAttention only recomputes the scores q k^T (2 N^2 d)",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "writes 8 * n2d + 2 * n2d if recompute else 0, which Python reads as (8 n2d + 2 "
          "n2d) if recompute else 0: without recompute it returns 0",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "right", "sum_over_named_products", None,
          abf_right_sum_of_products),
    Entry("attention_backward_flops", "right", "bool_arithmetic", None, abf_right_bool_arith),

    Entry("flash_attention_backward", "wrong", "delta_from_block_only",
          "computes the row term as rowsum(grad_p * p) of the current key block only instead "
          "of delta = rowsum(grad_out * out) over all keys: wrong as soon as there are two "
          "blocks",
          fb_delta_per_block),
    Entry("flash_attention_backward", "wrong", "no_guard_for_lse_minus_inf",
          "uses exp(s - lse) as it is: for a row with no visible key lse is -inf and "
          "exp(-inf - (-inf)) is NaN, which spreads into the gradients",
          fb_no_guard_for_empty_rows),
    Entry("flash_attention_backward", "wrong", "grad_k_without_scale",
          "multiplies grad_s^T by the unscaled q for grad_k: the 1/sqrt(d) factor is applied "
          "to grad_q but missing from grad_k",
          fb_grad_k_unscaled),
    Entry("flash_attention_backward", "wrong", "causal_mask_top_left",
          "masks key j for query i when j > i, forgetting the N_k - N_q offset of the "
          "bottom-right causal mask",
          fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten_per_block",
          "assigns grad_q = grad_s @ k_blk in each key block instead of adding to it, so "
          "only the last block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "recomputes_lse_with_extra_pass",
          "ignores the forward's lse and recomputes it with a first pass over the key blocks: "
          "the values are right but that is a second q k^T product, more matrix work than "
          "one recomputation (12 instead of 10 N^2 d)",
          fb_recomputes_lse),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fb_right_two_level_tiles),
    Entry("flash_attention_backward", "right", "einsum_key_blocks_cat", None,
          fb_right_einsum_blocks),
]
