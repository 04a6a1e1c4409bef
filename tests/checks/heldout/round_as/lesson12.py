"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# =============================================================================================
# softmax_backward
# =============================================================================================

def sb_row_term_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_row_term_axis0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = torch.sum(p * g, dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_diagonal_jacobian_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    # d p_i / d s_i = p_i (1 - p_i)
    return (p * (1 - p) * g).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    p = weights.float()
    g = grad_weights.float()
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_missing_parentheses(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_renormalises_rows(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    p = p / p.sum(dim=-1, keepdim=True)  # make sure each row sums to 1
    g = grad_weights.to(ct)
    return (p * (g - (p * g).sum(dim=-1, keepdim=True))).to(weights.dtype)


def sb_right_einsum_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    row = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_right_flattened_rows(weights, grad_weights):
    shape = weights.shape
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct).reshape(-1, shape[-1])  # (rows, n)
    g = grad_weights.to(ct).reshape(-1, shape[-1])
    row = torch.bmm(p.unsqueeze(1), g.unsqueeze(2)).squeeze(-1)  # (rows, 1): p . g per row
    out = torch.addcmul(torch.zeros_like(p), p, g - row)
    return out.reshape(shape).to(weights.dtype)


# =============================================================================================
# attention_backward
# =============================================================================================

def ab_causal_top_left(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    s = Q @ K.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    gv = p.transpose(-2, -1) @ G
    gp = G @ V.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ K * sc
    gk = gs.transpose(-2, -1) @ Q * sc
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = qf @ kf.transpose(-2, -1) / math.sqrt(d)
    if causal:
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~vis, -math.inf)
    top = scores.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isinf(top), 0.0)
    w = torch.exp(scores - top)
    tot = w.sum(-1, keepdim=True)
    p = w / tot.masked_fill(tot == 0, 1.0)
    grad_v = p.transpose(-2, -1) @ gf
    grad_p = gf @ vf.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ kf / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ qf
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_dot_T(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = d ** -0.5
    s = torch.matmul(qf, kf.T) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    e = torch.exp(s - mx)
    den = e.sum(-1, keepdim=True)
    p = e / torch.where(den == 0, 1.0, den)
    grad_v = p.T @ gf
    grad_p = gf @ vf.T
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ kf * scale).to(q.dtype), (grad_s.T @ qf * scale).to(k.dtype),
            grad_v.to(v.dtype))


def ab_row_term_over_queries(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, dO = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isinf(mx), 0.0, mx))
    z = e.sum(dim=-1, keepdim=True)
    P = e / torch.where(z == 0, 1.0, z)
    dV = torch.einsum("...qk,...qe->...ke", P, dO)
    dP = torch.einsum("...qe,...ke->...qk", dO, V)
    dS = P * (dP - (dP * P).sum(dim=-2, keepdim=True))
    dQ = torch.einsum("...qk,...kd->...qd", dS, K) / math.sqrt(d)
    dK = torch.einsum("...qk,...qd->...kd", dS, Q) / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_torch_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        scores = scores.masked_fill(~keep, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_k_from_k(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    inv = 1 / math.sqrt(d)
    s = (qf @ kf.mT) * inv
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(-1, keepdim=True)
    e = (s - torch.where(torch.isinf(mx), 0.0, mx)).exp()
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    gv = p.mT @ gf
    gp = gf @ vf.mT
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ kf * inv
    gk = gs.mT @ kf * inv
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_right_einsum_float64(q, k, v, grad_out, causal=False):
    Q, K, V, dO = q.double(), k.double(), v.double(), grad_out.double()
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    allowed = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        allowed = j <= i + (n_k - n_q)
    s = torch.where(allowed, s, torch.full_like(s, -math.inf))
    row_max = torch.where(allowed.any(-1, keepdim=True), s.amax(-1, keepdim=True),
                          torch.zeros_like(s[..., :1]))
    e = torch.where(allowed, torch.exp(s - row_max), torch.zeros_like(s))
    z = e.sum(-1, keepdim=True)
    P = e / z.clamp_min(1e-300)
    dV = torch.einsum("...ij,...ie->...je", P, dO)
    dP = torch.einsum("...ie,...je->...ij", dO, V)
    dS = P * (dP - torch.einsum("...ij,...ij->...i", dP, P)[..., None])
    dQ = torch.einsum("...ij,...jd->...id", dS, K) / math.sqrt(d)
    dK = torch.einsum("...ij,...id->...jd", dS, Q) / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_right_delta_from_out(q, k, v, grad_out, causal=False):
    """Row term from rowsum(grad_out * out), the FlashAttention identity, densely."""
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    s = torch.matmul(q_, k_.transpose(-1, -2)) * scale
    if causal:
        hidden = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
        s = s.masked_fill(hidden, -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.nan_to_num(torch.exp(s - lse), nan=0.0)
    out = torch.matmul(p, v_)
    delta = (g_ * out).sum(-1, keepdim=True)
    grad_s = p * (torch.matmul(g_, v_.transpose(-1, -2)) - delta)
    grad_q = torch.matmul(grad_s, k_) * scale
    grad_k = torch.matmul(grad_s.transpose(-1, -2), q_) * scale
    grad_v = torch.matmul(p.transpose(-1, -2), g_)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# =============================================================================================
# attention_backward_flops
# =============================================================================================

def bf_one_flop_per_mac(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def bf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len ** 2 * head_dim
    if recompute:
        backward += 4 * seq_len ** 2 * head_dim  # run the forward again
    return backward


def bf_flag_inverted(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    total = 4 * 2 * n * n * d
    if not recompute:
        total += 2 * n * n * d
    return total


def bf_float_factor(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def bf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def bf_causal_half(seq_len, head_dim, recompute=True):
    pairs = seq_len * (seq_len + 1) // 2  # only keys j <= i matter
    products = 4 + (1 if recompute else 0)
    return products * 2 * pairs * head_dim


def bf_right_product_table(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * c for m, kk, c in shapes)


def bf_right_closed_form(seq_len, head_dim, recompute=True):
    return 2 * seq_len ** 2 * head_dim * (4 + int(bool(recompute)))


# =============================================================================================
# flash_attention_backward
# =============================================================================================

def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=ct)
    dv = torch.zeros(v.shape, dtype=ct)
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
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_no_empty_row_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros((B, H, n_q, d), dtype=ct)
    dk = torch.zeros((B, H, n_k, d), dtype=ct)
    dv = torch.zeros((B, H, n_k, d), dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, st:en] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, st:en] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_unscaled_recomputation(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    qf = q.to(ct)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(dim=-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qf)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        s = qf @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qf * sc
    return (dq * sc).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_block_local_positions(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(ct), v[..., start:stop, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            cols = torch.arange(stop - start)[None, :]
            s = s.masked_fill(cols > rows, -math.inf)
        p = torch.exp(s - L)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
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


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
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
        p = torch.exp2(s - L)  # as in the FlashAttention kernels
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_right_tiled_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over query blocks and key blocks (both of block_size), in float64."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    c = 1.0 / math.sqrt(d)
    Q = q.double()
    K = k.double()
    V = v.double()
    dO = grad_out.double()
    D = (dO * out.double()).sum(-1)  # (B, H, N_q)
    lse64 = lse.double()
    dQ = torch.zeros(B, H, n_q, d, dtype=torch.float64)
    dK = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    dV = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qi, gi = Q[:, :, i0:i1], dO[:, :, i0:i1]
        li, Di = lse64[:, :, i0:i1, None], D[:, :, i0:i1, None]
        dead = torch.isneginf(li)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            kj, vj = K[:, :, j0:j1], V[:, :, j0:j1]
            s = torch.einsum("bhid,bhjd->bhij", qi, kj) * c
            ok = ~dead
            if causal:
                ok = ok & (torch.arange(j0, j1)[None, :] <=
                           torch.arange(i0, i1)[:, None] + (n_k - n_q))
            p = torch.where(ok, torch.exp(s - torch.where(dead, 0.0, li)), 0.0)
            dV[:, :, j0:j1] += torch.einsum("bhij,bhie->bhje", p, gi)
            dS = p * (torch.einsum("bhie,bhje->bhij", gi, vj) - Di)
            dQ[:, :, i0:i1] += torch.einsum("bhij,bhjd->bhid", dS, kj) * c
            dK[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", dS, qi) * c
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_right_key_blocks_list(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Key blocks; grad_k and grad_v collected in lists and concatenated at the end."""
    wd = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qf = q.to(wd)
    dO = grad_out.to(wd)
    Dl = torch.sum(dO * out.to(wd), dim=-1).unsqueeze(-1)
    has_key = torch.isfinite(lse).unsqueeze(-1)
    lse_ = torch.where(has_key, lse.to(wd).unsqueeze(-1), torch.zeros_like(Dl))
    last_visible = torch.arange(n_q).unsqueeze(1) + n_k - n_q
    acc_q = torch.zeros_like(qf)
    gk_parts, gv_parts = [], []
    for j0 in range(0, n_k, block_size):
        kj = k[..., j0:j0 + block_size, :].to(wd)
        vj = v[..., j0:j0 + block_size, :].to(wd)
        s = torch.matmul(qf, kj.transpose(-1, -2)) / math.sqrt(d)
        keep = has_key
        if causal:
            keep = keep & (torch.arange(j0, j0 + kj.shape[-2]).unsqueeze(0) <= last_visible)
        p = torch.exp(s - lse_) * keep
        gv_parts.append(torch.matmul(p.transpose(-1, -2), dO))
        ds = p * (torch.matmul(dO, vj.transpose(-1, -2)) - Dl)
        acc_q = acc_q + torch.matmul(ds, kj)
        gk_parts.append(torch.matmul(ds.transpose(-1, -2), qf) / math.sqrt(d))
    grad_q = acc_q / math.sqrt(d)
    grad_k = torch.cat(gk_parts, dim=-2)
    grad_v = torch.cat(gv_parts, dim=-2)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True: the (...,) sums broadcast against the last "
          "axis instead of their own rows (wrong values for square inputs, a broadcasting "
          "error otherwise)",
          sb_row_term_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_axis0",
          "sums grad_weights * weights over dim=0 (across the rows) instead of over the last "
          "axis, each row's own entries",
          sb_row_term_axis0),
    Entry("softmax_backward", "wrong", "diagonal_of_jacobian_only",
          "uses only the diagonal of the Jacobian, p_i (1 - p_i) g_i, and drops the "
          "off-diagonal -p_i p_j terms",
          sb_diagonal_jacobian_only),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes with .float() and never casts back: float64, float16 and bfloat16 inputs "
          "get a float32 result instead of weights' dtype",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "writes p * g - (g * p).sum(-1, keepdim=True): without parentheses the row term is "
          "not multiplied by p, the formula is p * (g - row)",
          sb_missing_parentheses),
    Entry("softmax_backward", "wrong", "renormalises_rows",
          "divides the weights by their row sum first 'to be safe': a fully masked row is 0/0 "
          "and gives NaN instead of zeros",
          sb_renormalises_rows),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_right_einsum_float64),
    Entry("softmax_backward", "right", "flattened_rows_bmm_addcmul", None,
          sb_right_flattened_rows),

    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() aligned top-left (key j <= i) instead of "
          "bottom-right (j <= i + N_k - N_q): wrong for causal inputs with N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "divides grad_q by sqrt(d) but forgets the same 1/sqrt(d) on grad_k",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "dot_T_on_batched",
          "transposes with .T, which reverses ALL axes of a batched tensor instead of the last "
          "two (.mT / transpose(-2, -1)): right for 2-D inputs, wrong shapes (an error) with "
          "batch and head axes",
          ab_dot_T),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "sums grad_p * p over dim=-2 (the queries) for the softmax row term instead of over "
          "dim=-1 (the keys of each row)",
          ab_row_term_over_queries),
    Entry("attention_backward", "wrong", "nan_for_rows_without_keys",
          "uses torch.softmax on the masked scores: a query that sees no key (causal, N_q > "
          "N_k) gets a NaN row, and the NaN spreads into all three gradients instead of zeros",
          ab_torch_softmax_nan_rows),
    Entry("attention_backward", "wrong", "grad_k_from_k",
          "reuses k where q belongs: grad_k = grad_s^T @ k / sqrt(d) instead of grad_s^T @ q "
          "/ sqrt(d) (wrong values when N_q == N_k, a shape error otherwise)",
          ab_grad_k_from_k),
    Entry("attention_backward", "right", "einsum_where_float64", None, ab_right_einsum_float64),
    Entry("attention_backward", "right", "delta_from_out", None, ab_right_delta_from_out),

    Entry("attention_backward_flops", "wrong", "one_flop_per_mac",
          "counts one FLOP per multiply-add: N^2 d per product instead of 2 N^2 d, half the "
          "answer",
          bf_one_flop_per_mac),
    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "adds the whole forward (4 N^2 d: scores and weighted sum) for recompute=True; "
          "FlashAttention recomputes only the scores q k^T, 2 N^2 d",
          bf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "adds the recomputation when recompute is False (if not recompute), so both cases "
          "are swapped",
          bf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "float_factor",
          "multiplies the forward's FLOPs by 2.5 or 2, so the result is a float, not the plain "
          "int the contract asks for",
          bf_float_factor),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "writes 8 N^2 d + 2 N^2 d if recompute else 0: the conditional covers the whole sum, "
          "so recompute=False returns 0 instead of 8 N^2 d",
          bf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "causal_half_counted",
          "counts only the N (N + 1) / 2 causal query-key pairs; the contract asks for the "
          "dense count, N^2 pairs",
          bf_causal_half),
    Entry("attention_backward_flops", "right", "table_of_products", None,
          bf_right_product_table),
    Entry("attention_backward_flops", "right", "closed_form_int_bool", None,
          bf_right_closed_form),

    Entry("flash_attention_backward", "wrong", "block_local_row_term",
          "computes the row term inside each key block as rowsum(grad_p * p) over that block's "
          "keys only; it must run over all keys, delta = rowsum(grad_out * out)",
          fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no_guard_for_empty_rows",
          "recomputes p = exp(s - lse) with lse = -inf for a query that sees no key: "
          "exp(-inf - (-inf)) is NaN, so those rows poison the gradients instead of giving "
          "zeros",
          fb_no_empty_row_guard),
    Entry("flash_attention_backward", "wrong", "unscaled_scores_in_recomputation",
          "recomputes the scores as q k^T without 1/sqrt(d): lse is the log-sum-exp of the "
          "SCALED scores, so exp(s - lse) are not the forward's probabilities",
          fb_unscaled_recomputation),
    Entry("flash_attention_backward", "wrong", "block_local_key_positions",
          "compares key positions inside the block (arange(stop - start)) with the query "
          "positions instead of the absolute positions start + j: the causal mask is wrong in "
          "every block after the first",
          fb_block_local_positions),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in every block instead of adding to it, so only the "
          "last key block's contribution to grad_q survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "exp2_with_natural_lse",
          "recomputes the probabilities with torch.exp2, as the FlashAttention kernels do, but "
          "the lse given here is a natural log (the kernels scale by log2(e) first): p is wrong",
          fb_exp2),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fb_right_tiled_float64),
    Entry("flash_attention_backward", "right", "key_blocks_with_lists", None,
          fb_right_key_blocks_list),
]
