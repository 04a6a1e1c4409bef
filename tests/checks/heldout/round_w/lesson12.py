"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------------------- softmax_backward
def sb_row_without_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_over_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = (p * g).sum(dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    inner = (g * p).sum(-1, keepdim=True)
    return (p * g - inner).to(weights.dtype)


def sb_float32_result(weights, grad_weights):
    work = torch.promote_types(weights.dtype, torch.float32)
    w = weights.to(work)
    gw = grad_weights.to(work)
    return w * (gw - (gw * w).sum(-1, keepdim=True))


def sb_row_term_without_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (g * p * (1 - p)).to(weights.dtype)


def sb_einsum_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    row = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_batched_dot(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    n = weights.shape[-1]
    p = weights.to(ct).reshape(-1, n)
    g = grad_weights.to(ct).reshape(-1, n)
    dots = torch.bmm(p.unsqueeze(1), g.unsqueeze(2)).reshape(-1, 1)  # (rows, 1)
    return (p * (g - dots)).reshape(weights.shape).to(weights.dtype)


# ----------------------------------------------------------------------------- attention_backward
def ab_causal_top_left(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    dv = p.transpose(-2, -1) @ g_
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ k_ / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ q_ / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = 1 / math.sqrt(d)
    scores = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~vis, -math.inf)
    m = scores.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w = torch.exp(scores - m)
    z = w.sum(-1, keepdim=True)
    p = w / torch.where(z == 0, torch.ones_like(z), z)
    grad_v = p.transpose(-1, -2) @ gf
    grad_p = gf @ vf.transpose(-1, -2)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ kf * scale
    grad_k = grad_s.transpose(-1, -2) @ qf
    return grad_q.to(q.dtype), grad_k.to(q.dtype), grad_v.to(q.dtype)


def ab_dot_T(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    S = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        S = S.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = S.amax(-1, keepdim=True)
    mx = mx.masked_fill(torch.isinf(mx), 0.0)
    E = (S - mx).exp()
    tot = E.sum(-1, keepdim=True)
    P = E / tot.masked_fill(tot == 0, 1.0)
    dV = P.T @ G
    dP = G @ V.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-2, -1) @ Q / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_scale_from_d_v(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = v.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    sc = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return (gs @ k_ * sc).to(q.dtype), (gs.transpose(-2, -1) @ q_ * sc).to(k.dtype), \
        gv.to(v.dtype)


def ab_no_row_term(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * gp
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_einsum_float64(q, k, v, grad_out, causal=False):
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    d = q.shape[-1]
    nq, nk = q.shape[-2], k.shape[-2]
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(nq).unsqueeze(1)
        j = torch.arange(nk).unsqueeze(0)
        s = torch.where(j - i <= nk - nq, s, torch.tensor(-math.inf, dtype=torch.float64))
    m = s.max(dim=-1, keepdim=True).values.nan_to_num(neginf=0.0)
    e = torch.exp(s - m)
    z = e.sum(dim=-1, keepdim=True)
    p = e / z.clamp_min(1e-300)
    dv = torch.einsum("...ij,...ic->...jc", p, G)
    dp = torch.einsum("...ic,...jc->...ij", G, V)
    row = torch.einsum("...ij,...ij->...i", dp, p).unsqueeze(-1)
    ds = p * (dp - row)
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_delta_from_out(q, k, v, grad_out, causal=False):
    work = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(work) for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    logits = torch.matmul(q_, k_.transpose(-2, -1)) * d ** -0.5
    if causal:
        hide = torch.triu(torch.ones(n_q, n_k, dtype=torch.bool), diagonal=n_k - n_q + 1)
        logits = logits.masked_fill(hide, -math.inf)
    p = torch.nan_to_num(torch.softmax(logits, dim=-1), nan=0.0)  # empty rows -> zeros
    out = p @ v_
    delta = (g_ * out).sum(-1, keepdim=True)  # equals rowsum(grad_p * p)
    grad_v = p.transpose(-2, -1) @ g_
    grad_s = p * (g_ @ v_.transpose(-2, -1) - delta)
    grad_q = torch.matmul(grad_s, k_) * d ** -0.5
    grad_k = torch.matmul(grad_s.transpose(-2, -1), q_) * d ** -0.5
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ----------------------------------------------------------------------------- attention_backward_flops
def abf_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len ** 2 * head_dim
    if recompute:
        backward += 4 * seq_len ** 2 * head_dim  # run the forward again
    return backward


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    total = 8 * n2d
    if not recompute:
        total += 2 * n2d
    return total


def abf_ratio_of_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return (2.5 if recompute else 2) * forward


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + 2 * seq_len ** 2 * head_dim if recompute else 0


def abf_square_wrong_factor(seq_len, head_dim, recompute=True):
    one_product = 2 * seq_len * head_dim * head_dim
    return (5 if recompute else 4) * one_product


def abf_sum_of_products(seq_len, head_dim, recompute=True):
    names = ["grad_v", "grad_p", "grad_q", "grad_k"] + (["scores"] if recompute else [])
    return sum(2 * seq_len * seq_len * head_dim for _ in names)


def abf_shifts(seq_len, head_dim, recompute=True):
    base = seq_len * seq_len * head_dim
    extra = (base << 1) if recompute else 0
    return (base << 3) + extra


# ----------------------------------------------------------------------------- flash_attention_backward
def fb_delta_per_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq += ds @ kb
        dk[..., s0:s1, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def fb_lse_not_guarded(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., s0:s1, :] = ds.transpose(-2, -1) @ qs
    return (dq * (1.0 / math.sqrt(d))).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_scores_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    work = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = d ** -0.5
    qw = q.to(work)
    g = grad_out.to(work)
    delta = (g * out.to(work)).sum(-1, keepdim=True)
    lse_ = torch.where(torch.isneginf(lse), math.inf, lse.to(work)).unsqueeze(-1)
    qpos = torch.arange(n_q).view(-1, 1) + n_k - n_q
    grad_q = torch.zeros(B, H, n_q, d, dtype=work)
    grad_k = torch.zeros(B, H, n_k, d, dtype=work)
    grad_v = torch.zeros(B, H, n_k, d, dtype=work)
    for a in range(0, n_k, block_size):
        b = min(n_k, a + block_size)
        kb = k[:, :, a:b].to(work)
        vb = v[:, :, a:b].to(work)
        s = qw @ kb.transpose(-1, -2)  # the recomputed scores
        if causal:
            s = s.masked_fill(torch.arange(a, b).view(1, -1) > qpos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[:, :, a:b] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        grad_q += ds @ kb
        grad_k[:, :, a:b] = ds.transpose(-1, -2) @ qw * scale
    return (grad_q * scale).to(q.dtype), grad_k.to(q.dtype), grad_v.to(q.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(n_q)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_tail_block_dropped(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
    for j in range(n_k // block_size):
        lo, hi = j * block_size, (j + 1) * block_size
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_tiled_2d_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Right: tiles over query blocks and key blocks, float64, NaN rows zeroed."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    sc = 1.0 / math.sqrt(d)
    Q, K, V, G, O = (t.double() for t in (q, k, v, grad_out, out))
    L = lse.double()
    dQ = torch.zeros(B, H, n_q, d, dtype=torch.float64)
    dK = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    dV = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    D = (G * O).sum(dim=-1)  # (B, H, N_q)
    for i0 in range(0, n_q, block_size):
        i1 = min(n_q, i0 + block_size)
        qi, gi = Q[:, :, i0:i1], G[:, :, i0:i1]
        li, di = L[:, :, i0:i1, None], D[:, :, i0:i1, None]
        for j0 in range(0, n_k, block_size):
            j1 = min(n_k, j0 + block_size)
            kj, vj = K[:, :, j0:j1], V[:, :, j0:j1]
            s = torch.matmul(qi, kj.transpose(2, 3)) * sc
            if causal:
                ok = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None] + n_k - n_q
                s = s.masked_fill(~ok, -math.inf)
            p = torch.nan_to_num(torch.exp(s - li), nan=0.0)  # -inf - -inf rows -> 0
            dV[:, :, j0:j1] += torch.matmul(p.transpose(2, 3), gi)
            ds = p * (torch.matmul(gi, vj.transpose(2, 3)) - di)
            dQ[:, :, i0:i1] += torch.matmul(ds, kj) * sc
            dK[:, :, j0:j1] += torch.matmul(ds.transpose(2, 3), qi) * sc
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Right: key blocks, einsum, probabilities zeroed where lse is -inf."""
    acc = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[2], q.shape[3]
    n_k = k.shape[2]
    qa = q.to(acc)
    ga = grad_out.to(acc)
    delta = torch.einsum("bhqd,bhqd->bhq", ga, out.to(acc)).unsqueeze(-1)
    lse_a = lse.to(acc).unsqueeze(-1)
    dead = torch.isneginf(lse_a)  # rows with no visible key
    lse_a = torch.where(dead, torch.zeros_like(lse_a), lse_a)
    grads_k, grads_v = [], []
    grad_q = torch.zeros_like(qa)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        kb = k[:, :, j0:j1].to(acc)
        vb = v[:, :, j0:j1].to(acc)
        logits = torch.einsum("bhqd,bhkd->bhqk", qa, kb) / math.sqrt(d)
        if causal:
            later = torch.arange(j0, j1)[None, :] > torch.arange(n_q)[:, None] + (n_k - n_q)
            logits = logits.masked_fill(later, -math.inf)
        p = torch.exp(logits - lse_a).masked_fill(dead, 0.0)
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, ga))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", ga, vb) - delta)
        grad_q = grad_q + torch.einsum("bhqk,bhkd->bhqd", ds, kb)
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, qa))
    scale = 1.0 / math.sqrt(d)
    grad_k = torch.cat(grads_k, dim=2) * scale
    grad_v = torch.cat(grads_v, dim=2)
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term with .sum(-1) without keepdim, so it no longer lines up with "
          "its row: the subtraction raises a shape error, or on square inputs subtracts row "
          "i's sum from column i", sb_row_without_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_first_axis",
          "sums grad_weights * weights over dim 0 (down the rows) instead of the last axis, so "
          "each entry gets a column's sum as its row term (only a single (n,) row comes out "
          "right)", sb_sum_over_first_axis),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "writes weights * grad_weights - row instead of weights * (grad_weights - row): the "
          "row term is not multiplied by the weights, so masked entries get a non-zero "
          "gradient", sb_precedence),
    Entry("softmax_backward", "wrong", "result_left_in_float32",
          "computes in float32 but returns that float32 tensor, not weights' dtype, for "
          "float16 / bfloat16 inputs", sb_float32_result),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "takes the row term as grad_weights.sum(-1) instead of (grad_weights * "
          "weights).sum(-1): the p p^T g part of the Jacobian loses its p",
          sb_row_term_without_p),
    Entry("softmax_backward", "wrong", "diagonal_jacobian_only",
          "uses only the diagonal of the Jacobian, grad * p * (1 - p), dropping the "
          "off-diagonal -p_i p_j terms that couple the entries of a row", sb_diagonal_only),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "batched_row_dots", None, sb_batched_dot),

    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() and no offset, aligned top-left instead of "
          "bottom-right (j <= i + N_k - N_q), so the gradients are wrong whenever N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "multiplies grad_q by 1/sqrt(d) but forgets the same factor on grad_k = "
          "grad_s^T q", ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "dot_T_on_batches",
          "transposes the weights with P.T, which reverses every axis of a batched "
          "(..., N_q, N_k) tensor instead of swapping the last two, so grad_v is wrong (or "
          "raises) as soon as there are leading axes", ab_dot_T),
    Entry("attention_backward", "wrong", "empty_rows_nan",
          "uses torch.softmax directly on the masked scores, so a causal query row with no "
          "visible key (N_q > N_k) gives NaN weights and NaN gradients instead of zeros",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "scale_from_d_v",
          "takes d from v.shape[-1] (d_v) instead of q.shape[-1], so the 1/sqrt(d) scale is "
          "wrong whenever d_v != d", ab_scale_from_d_v),
    Entry("attention_backward", "wrong", "softmax_row_term_missing",
          "takes grad_s = p * grad_p, forgetting the row term -rowsum(grad_p * p) of the "
          "softmax backward", ab_no_row_term),
    Entry("attention_backward", "right", "einsum_float64", None, ab_einsum_float64),
    Entry("attention_backward", "right", "delta_from_out", None, ab_delta_from_out),

    Entry("attention_backward_flops", "wrong", "multiply_add_as_one",
          "counts a multiply-add as 1 FLOP instead of 2, so every product is N^2 d and the "
          "total is half", abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "with recompute adds the whole forward (4 N^2 d, scores and weighted sum) instead of "
          "only the scores q k^T (2 N^2 d)", abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "adds the recomputation when recompute is False and leaves it out when True",
          abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "float_from_ratio",
          "multiplies the forward's 4 N^2 d by the ratio 2.5 (or 2), which returns a float "
          "instead of a plain int", abf_ratio_of_forward),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "writes a + b if recompute else 0 without parentheses: the conditional takes the "
          "whole sum, so recompute=False returns 0 instead of 8 N^2 d",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "n_d_squared",
          "counts each product as 2 N d^2 instead of 2 N^2 d, squaring head_dim instead of "
          "seq_len", abf_square_wrong_factor),
    Entry("attention_backward_flops", "right", "sum_over_products", None, abf_sum_of_products),
    Entry("attention_backward_flops", "right", "bit_shifts", None, abf_shifts),

    Entry("flash_attention_backward", "wrong", "row_term_per_block",
          "computes the row term inside each key block as rowsum(grad_p * p) over that block "
          "only, instead of delta = rowsum(grad_out * out) over all keys, so it is wrong as "
          "soon as there is more than one block", fb_delta_per_block),
    Entry("flash_attention_backward", "wrong", "lse_minus_inf_not_guarded",
          "recomputes p = exp(s - lse) without guarding rows whose lse is -inf, so a query "
          "with no visible key (causal, N_q > N_k) gives exp(-inf + inf) = NaN gradients",
          fb_lse_not_guarded),
    Entry("flash_attention_backward", "wrong", "recomputed_scores_unscaled",
          "recomputes the scores as q k^T without the 1/sqrt(d) that the forward's lse "
          "includes, so exp(s - lse) are not the forward's probabilities",
          fb_scores_unscaled),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "masks key j > i (top-left) instead of j > i + N_k - N_q (bottom-right), so causal "
          "gradients are wrong whenever N_q != N_k", fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "ragged_block_dropped",
          "loops over N_k // block_size full blocks only, so the keys of a shorter last block "
          "get zero grad_k and grad_v and never reach grad_q", fb_tail_block_dropped),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_block in every block instead of adding to it, so only "
          "the last key block's contribution survives", fb_grad_q_overwritten),
    Entry("flash_attention_backward", "right", "tiled_2d_float64", None, fb_tiled_2d_float64),
    Entry("flash_attention_backward", "right", "einsum_key_blocks", None, fb_einsum_key_blocks),
]
