"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------------------- softmax_backward
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_row_term_wrong_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_missing_outer_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (p * g).sum(-1, keepdim=True)
    return (g - dot).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = torch.sum(p * g, dim=-1, keepdim=True)
    return (p * (row - g)).to(weights.dtype)


def sb_unweighted_row_sum(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_einsum_f64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    dot = torch.einsum("...n,...n->...", p, g)
    return (p * g - p * dot.unsqueeze(-1)).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    n = weights.shape[-1]
    p = weights.reshape(-1, n).double()
    g = grad_weights.reshape(-1, n).double()
    out = torch.empty_like(p)
    for r in range(p.shape[0]):
        out[r] = p[r] * g[r] - p[r] * torch.dot(p[r], g[r])
    return out.reshape(weights.shape).to(weights.dtype)


# ----------------------------------------------------------------------------- attention_backward
def _ab_mask(nq, nk):
    return torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2:]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(d)
    s = Q @ K.transpose(-2, -1) * sc
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
    dq = ds @ K * sc
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = d ** -0.5
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(n_q, n_k, dtype=torch.bool)), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / tot.masked_fill(tot == 0, 1.0)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_ * scale).to(q.dtype), (gs.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            gv.to(v.dtype))


def ab_torch_softmax_nan(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_ab_mask(n_q, n_k), -math.inf)
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_k_not_transposed(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = 1.0 / math.sqrt(d)
    s = (q_ @ k_.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(~_ab_mask(n_q, n_k), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    e = (s - mx).exp()
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_returns_float32(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_ab_mask(n_q, n_k), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    e = torch.exp(s - mx)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return grad_s @ k_ * scale, grad_s.transpose(-2, -1) @ q_ * scale, grad_v


def ab_scale_from_d_v(q, k, v, grad_out, causal=False):
    n_q = q.shape[-2]
    n_k, d = v.shape[-2], v.shape[-1]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_ab_mask(n_q, n_k), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    e = torch.exp(s - mx)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ k_ * scale).to(q.dtype), (grad_s.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            grad_v.to(v.dtype))


def ab_delta_from_out_f64(q, k, v, grad_out, causal=False):
    # row term from delta = rowsum(grad_out * out), everything in float64
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = torch.matmul(Q, K.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = torch.where(j <= i + (n_k - n_q), s, torch.tensor(-math.inf, dtype=torch.float64))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.where(torch.isneginf(lse), torch.zeros_like(s), torch.exp(s - lse))
    out = p @ V
    delta = (G * out).sum(-1, keepdim=True)
    dp = G @ V.transpose(-1, -2)
    ds = p * (dp - delta)
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-1, -2) @ Q / math.sqrt(d)
    dv = p.transpose(-1, -2) @ G
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_einsum(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(f) for t in (q, k, v, grad_out))
    r = 1.0 / math.sqrt(d)
    s = torch.einsum("...qd,...kd->...qk", Q, K) * r
    if causal:
        allowed = torch.arange(n_k)[None, :] - torch.arange(n_q)[:, None] <= n_k - n_q
        s = s.masked_fill(~allowed, float("-inf"))
    row_max = s.max(dim=-1, keepdim=True).values
    row_max = torch.nan_to_num(row_max, neginf=0.0)
    e = torch.exp(s - row_max)
    z = e.sum(-1, keepdim=True)
    p = e / z.clamp_min(torch.finfo(f).tiny) * (z > 0)
    dv = torch.einsum("...qk,...qe->...ke", p, G)
    dp = torch.einsum("...qe,...ke->...qk", G, V)
    ds = p * (dp - torch.einsum("...qk,...qk->...q", dp, p)[..., None])
    dq = torch.einsum("...qk,...kd->...qd", ds, K) * r
    dk = torch.einsum("...qk,...qd->...kd", ds, Q) * r
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ----------------------------------------------------------------------------- attention_backward_flops
def flops_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def flops_recompute_whole_forward(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    total = 8 * n2d
    if recompute:
        total += 4 * n2d
    return total


def flops_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def flops_recompute_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len * seq_len * head_dim
    if not recompute:
        flops += 2 * seq_len * seq_len * head_dim
    return flops


def flops_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def flops_n_d_squared(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim * head_dim
    return (5 if recompute else 4) * per_product


def flops_closed_form_bool(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len ** 2 * head_dim


def flops_product_table(seq_len, head_dim, recompute=True):
    shapes = {  # (m, k, n) of each product, one multiply-add = 2 FLOPs
        "grad_v = p^T grad_out": (seq_len, seq_len, head_dim),
        "grad_p = grad_out v^T": (seq_len, head_dim, seq_len),
        "grad_q = grad_s k": (seq_len, seq_len, head_dim),
        "grad_k = grad_s^T q": (seq_len, seq_len, head_dim),
    }
    if recompute:
        shapes["s = q k^T"] = (seq_len, head_dim, seq_len)
    total = 0
    for m, kk, n in shapes.values():
        total += 2 * m * kk * n
    return total


# ----------------------------------------------------------------------------- flash_attention_backward
def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + nk - nq
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
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(nq)[:, None] + nk - nq
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
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qsc = q.to(f) * (1.0 / math.sqrt(d))
    go = grad_out.to(f)
    delta = (go * out.to(f)).sum(-1, keepdim=True)
    lse_ = torch.where(torch.isneginf(lse), math.inf, lse.to(f)).unsqueeze(-1)
    qp = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros((b, h, n_q, d), dtype=f)
    gk = torch.empty((b, h, n_k, d), dtype=f)
    gv = torch.empty((b, h, n_k, d), dtype=f)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb = k[:, :, st:en].to(f)
        vb = v[:, :, st:en].to(f)
        s = qsc @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qp, -math.inf)
        p = torch.exp(s - lse_)
        gv[:, :, st:en] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq = gq + ds @ kb
        gk[:, :, st:en] = ds.transpose(-2, -1) @ qsc
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_delta_no_keepdim(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(D)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(Nq)[:, None] + Nk - Nq
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(D)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + nk - nq
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp2(s - L)
        dv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + nk - nq
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
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[:, :, s0:s1] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_two_d_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    # tiles over queries AND keys, float64, probabilities from lse
    B, H, nq, d = q.shape
    nk = k.shape[2]
    r = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    G, O = grad_out.double(), out.double()
    L = lse.double()
    dq = torch.zeros((B, H, nq, d), dtype=torch.float64)
    dk = torch.zeros((B, H, nk, d), dtype=torch.float64)
    dv = torch.zeros((B, H, nk, d), dtype=torch.float64)
    for i0 in range(0, nq, block_size):
        i1 = min(i0 + block_size, nq)
        qi, gi = Q[:, :, i0:i1], G[:, :, i0:i1]
        li = L[:, :, i0:i1, None]
        empty = torch.isneginf(li)
        li = torch.where(empty, torch.zeros_like(li), li)
        di = (gi * O[:, :, i0:i1]).sum(-1, keepdim=True)
        rows = torch.arange(i0, i1)[:, None] + (nk - nq)
        for j0 in range(0, nk, block_size):
            j1 = min(j0 + block_size, nk)
            kj, vj = K[:, :, j0:j1], V[:, :, j0:j1]
            s = torch.matmul(qi, kj.transpose(-1, -2)) * r
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > rows, -math.inf)
            p = torch.exp(s - li).masked_fill(empty, 0.0)
            dv[:, :, j0:j1] += torch.matmul(p.transpose(-1, -2), gi)
            ds = p * (torch.matmul(gi, vj.transpose(-1, -2)) - di)
            dq[:, :, i0:i1] += torch.matmul(ds, kj) * r
            dk[:, :, j0:j1] += torch.matmul(ds.transpose(-1, -2), qi) * r
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_key_blocks_einsum(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    r = d ** -0.5
    Q = q.to(f)
    G = grad_out.to(f)
    delta = torch.einsum("bhqe,bhqe->bhq", G, out.to(f))[..., None]
    lse_f = lse.to(f)[..., None]
    no_key = torch.isneginf(lse_f)
    lse_f = torch.where(no_key, torch.zeros_like(lse_f), lse_f)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(Q)
    dks, dvs = [], []
    for j0 in range(0, nk, block_size):
        kj = k[:, :, j0:j0 + block_size].to(f)
        vj = v[:, :, j0:j0 + block_size].to(f)
        s = torch.einsum("bhqe,bhke->bhqk", Q, kj) * r
        if causal:
            kpos = torch.arange(j0, j0 + kj.shape[2])[None, :]
            s = torch.where(kpos <= qpos, s, torch.full_like(s, -math.inf))
        p = torch.where(no_key, torch.zeros_like(s), torch.exp(s - lse_f))
        dvs.append(torch.einsum("bhqk,bhqe->bhke", p, G))
        ds = p * (torch.einsum("bhqe,bhke->bhqk", G, vj) - delta)
        dq += torch.einsum("bhqk,bhke->bhqe", ds, kj) * r
        dks.append(torch.einsum("bhqk,bhqe->bhke", ds, Q) * r)
    return dq.to(q.dtype), torch.cat(dks, 2).to(k.dtype), torch.cat(dvs, 2).to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term with sum(-1) and no keepdim, so (..., ) broadcasts against the last "
          "axis n instead of lining up with its row (a shape error, or wrong rows when the sizes "
          "match)", sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_dim_0",
          "sums grad_weights * weights over dim 0 (across rows) instead of the last axis, which "
          "is right only for a single row", sb_row_term_wrong_axis),
    Entry("softmax_backward", "wrong", "missing_outer_weights",
          "returns grad_weights - rowsum(grad_weights * weights) without multiplying by weights, "
          "so masked entries and fully masked rows get gradients", sb_missing_outer_p),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes in float32 but returns that dtype for half-precision weights instead of "
          "casting back to weights' dtype", sb_returns_float32),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "writes weights * (rowsum - grad_weights), the negative of the gradient",
          sb_sign_flipped),
    Entry("softmax_backward", "wrong", "row_term_unweighted",
          "subtracts the plain row sum of grad_weights instead of the weighted sum "
          "rowsum(grad_weights * weights)", sb_unweighted_row_sum),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_f64),
    Entry("softmax_backward", "right", "row_loop_dot", None, sb_row_loop),

    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "multiplies grad_q by 1/sqrt(d) but forgets the same factor in grad_k = grad_s^T q",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() and no offset (top-left), instead of bottom-right "
          "tril(N_k - N_q), wrong whenever N_q != N_k", ab_causal_top_left),
    Entry("attention_backward", "wrong", "torch_softmax_masked_rows",
          "uses torch.softmax on the masked scores, which gives NaN on a row with no visible key "
          "instead of a zero row", ab_torch_softmax_nan),
    Entry("attention_backward", "wrong", "grad_k_not_transposed",
          "computes grad_k as grad_s @ q instead of grad_s^T @ q (a shape error when N_q != N_k, "
          "wrong values when they match)", ab_grad_k_not_transposed),
    Entry("attention_backward", "wrong", "returns_float32",
          "computes in float32 but returns float32 gradients for half-precision inputs instead "
          "of the inputs' dtype", ab_returns_float32),
    Entry("attention_backward", "wrong", "scale_from_d_v",
          "takes d from v.shape[-1] (d_v) for the 1/sqrt(d) scale instead of q's last axis, "
          "wrong when d_v != d", ab_scale_from_d_v),
    Entry("attention_backward", "right", "delta_from_out_float64", None, ab_delta_from_out_f64),
    Entry("attention_backward", "right", "einsum", None, ab_einsum),

    Entry("attention_backward_flops", "wrong", "multiply_add_as_one",
          "counts one multiply-add as 1 FLOP (N^2 d per product) instead of 2",
          flops_mac_as_one),
    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "adds the whole forward, 4 N^2 d, for the recomputation instead of only the scores "
          "q k^T, 2 N^2 d", flops_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "float_from_ratio",
          "multiplies the forward's FLOPs by 2.5 or 2, which returns a float instead of a plain "
          "int", flops_ratio_float),
    Entry("attention_backward_flops", "wrong", "recompute_inverted",
          "adds the recomputation when recompute is False instead of when it is True",
          flops_recompute_inverted),
    Entry("attention_backward_flops", "wrong", "conditional_precedence",
          "writes 8 N^2 d + 2 N^2 d if recompute else 0, which Python reads as (8 N^2 d + 2 N^2 d) "
          "if recompute else 0, so recompute=False returns 0", flops_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "n_d_squared",
          "uses N d^2 per product instead of N^2 d: head_dim and seq_len swapped in one factor",
          flops_n_d_squared),
    Entry("attention_backward_flops", "right", "closed_form_bool_int", None,
          flops_closed_form_bool),
    Entry("attention_backward_flops", "right", "product_table", None, flops_product_table),

    Entry("flash_attention_backward", "wrong", "block_local_row_term",
          "computes the row term as rowsum(grad_p * p) over the current key block only, instead "
          "of delta = rowsum(grad_out * out) over all keys", fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no_guard_empty_rows",
          "computes exp(s - lse) without guarding lse = -inf, so a row with no visible key gets "
          "exp(-inf + inf) = NaN instead of zero gradients", fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "grad_q_unscaled",
          "scales q for the scores and grad_k but never multiplies the accumulated grad_q by "
          "1/sqrt(d)", fb_grad_q_unscaled),
    Entry("flash_attention_backward", "wrong", "delta_without_keepdim",
          "sums delta = rowsum(grad_out * out) without keepdim, so (B, H, N) broadcasts against "
          "the key axis of the (B, H, N, block) grad_p instead of its rows (a shape error or "
          "wrong rows)", fb_delta_no_keepdim),
    Entry("flash_attention_backward", "wrong", "exp2_with_natural_lse",
          "recomputes the probabilities with exp2(s - lse), base 2, though lse is a natural log",
          fb_exp2),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_block in each block instead of adding to it, so only the "
          "last key block's contribution survives", fb_grad_q_overwritten),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fb_two_d_tiles_f64),
    Entry("flash_attention_backward", "right", "key_blocks_einsum", None, fb_key_blocks_einsum),
]
