"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# =============================================================================================
# softmax_backward
# =============================================================================================

def sb_row_term_whole_tensor(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum()  # the p . g term
    return (p * (g - row)).to(weights.dtype)


def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = (g * p).sum(dim=-1)
    return (p * (g - dot)).to(weights.dtype)


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    w, gw = weights.to(ct), grad_weights.to(ct)
    inner = torch.sum(gw * w, dim=-1, keepdim=True)
    return (w * gw - inner).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    work = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(work)
    g = grad_weights.to(work)
    return p * (g - (p * g).sum(-1, keepdim=True))


def sb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    mean_g = (p * g).sum(-1, keepdim=True)
    return (p * (mean_g - g)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (1 - p) * g).to(weights.dtype)  # d p_i / d s_i = p_i (1 - p_i)


def sb_einsum_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    row = torch.einsum("...n,...n->...", p, g).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    n = weights.shape[-1]
    p = weights.reshape(-1, n).double()
    g = grad_weights.reshape(-1, n).double()
    out = torch.empty_like(p)
    for r in range(p.shape[0]):
        c = torch.dot(p[r], g[r])
        out[r] = p[r] * (g[r] - c)
    return out.reshape(weights.shape).to(weights.dtype)


# =============================================================================================
# attention_backward
# =============================================================================================

def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
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
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    scale = d ** -0.5
    scores = (q_ @ k_.transpose(-2, -1)) * scale
    if causal:
        keep = torch.tril(torch.ones(n_q, n_k, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    w = (scores - top).exp()
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    grad_v = w.transpose(-2, -1) @ g_
    grad_w = g_ @ v_.transpose(-2, -1)
    grad_s = w * (grad_w - (grad_w * w).sum(-1, keepdim=True))
    return ((grad_s @ k_ * scale).to(q.dtype), (grad_s.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            grad_v.to(v.dtype))


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qc, kc, vc, gc = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qc @ kc.transpose(-2, -1) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = s.masked_fill(j > i + (n_k - n_q), -math.inf)
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-2, -1) @ gc
    gp = gc @ vc.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ kc / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ qc / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    sc = Q @ K.transpose(-1, -2) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    mx = sc.amax(-1, keepdim=True)
    mx = mx.masked_fill(torch.isneginf(mx), 0.0)
    ex = torch.exp(sc - mx)
    tot = ex.sum(-1, keepdim=True)
    P = ex / tot.masked_fill(tot == 0, 1.0)
    dV = P.transpose(-1, -2) @ G
    dP = G @ V.transpose(-1, -2)
    dS = P * (dP - (dP * P).sum(-2, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-1, -2) @ Q / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_dot_T_on_batches(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = q_ @ k_.T / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    grad_v = p.T @ g_
    grad_p = g_ @ v_.T
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.T @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_no_row_term(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, gg = (t.to(ct) for t in (q, k, v, grad_out))
    s = torch.einsum("...qd,...kd->...qk", qq, kk) / math.sqrt(d)
    if causal:
        vis = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~vis, -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = (s - m).exp()
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    gv = torch.einsum("...qk,...qe->...ke", p, gg)
    gp = torch.einsum("...qe,...ke->...qk", gg, vv)
    gs = p * gp  # chain rule through the softmax
    gq = torch.einsum("...qk,...kd->...qd", gs, kk) / math.sqrt(d)
    gk = torch.einsum("...qk,...qd->...kd", gs, qq) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_delta_from_out_float64(q, k, v, grad_out, causal=False):
    """Row term from delta = rowsum(grad_out * out), the FlashAttention-2 identity."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        hidden = torch.arange(n_k)[None, :] - torch.arange(n_q)[:, None] > n_k - n_q
        s = s.masked_fill(hidden, -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse.masked_fill(torch.isneginf(lse), math.inf))  # empty rows -> 0
    out = p @ V
    delta = (G * out).sum(-1, keepdim=True)
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - delta)
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    dv = torch.einsum("...ij,...ie->...je", p, G)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_jacobian_matrix(q, k, v, grad_out, causal=False):
    """Applies the full softmax Jacobian diag(p) - p p^T row by row (fine at these sizes)."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float64)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) * (1.0 / math.sqrt(d))
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = torch.where(allowed, s, torch.full_like(s, -math.inf))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    dp = G @ V.transpose(-2, -1)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., N_q, N_k, N_k)
    ds = (jac @ dp.unsqueeze(-1)).squeeze(-1)
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    dv = p.transpose(-2, -1) @ G
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# =============================================================================================
# attention_backward_flops
# =============================================================================================

def abf_multiply_add_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim  # one N x N x d product each


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len ** 2 * head_dim
    if recompute:
        backward += 4 * seq_len ** 2 * head_dim  # run the forward again
    return backward


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len * seq_len * head_dim
    if not recompute:
        flops += 2 * seq_len * seq_len * head_dim
    return flops


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def abf_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    total = 3 * per_product  # grad_v, grad_q, grad_k
    if recompute:
        total += per_product
    return total


def abf_closed_form(seq_len, head_dim, recompute=True):
    return (10 if recompute else 8) * seq_len ** 2 * head_dim


def abf_list_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [("grad_v = p^T grad_out", n, n, d), ("grad_p = grad_out v^T", n, d, n),
              ("grad_q = grad_s k", n, n, d), ("grad_k = grad_s^T q", n, n, d)]
    if recompute:
        shapes.append(("s = q k^T", n, d, n))
    return sum(2 * m * kk * c for _name, m, kk, c in shapes)


# =============================================================================================
# flash_attention_backward
# =============================================================================================

def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
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
        delta = (dp * p).sum(-1, keepdim=True)  # the row term
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_nan_on_empty_rows(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qf = q.to(f) * scale
    go = grad_out.to(f)
    delta = (go * out.to(f)).sum(-1, keepdim=True)
    lse_f = lse.to(f).unsqueeze(-1)
    rows = torch.arange(n_q)[:, None] + n_k - n_q
    gq = torch.zeros_like(qf)
    gk = torch.zeros(B, H, n_k, d, dtype=f)
    gv = torch.zeros(B, H, n_k, d, dtype=f)
    for s0 in range(0, n_k, block_size):
        s1 = min(n_k, s0 + block_size)
        kb = k[:, :, s0:s1].to(f)
        vb = v[:, :, s0:s1].to(f)
        sc = qf @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > rows, -math.inf)
        p = torch.exp(sc - lse_f)
        gv[:, :, s0:s1] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[:, :, s0:s1] = ds.transpose(-2, -1) @ qf
    return (gq * scale).to(q.dtype), gk.to(q.dtype), gv.to(q.dtype)


def fb_grad_q_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(ct) * (1.0 / math.sqrt(d))
    g_ = grad_out.to(ct)
    delta = (g_ * out.to(ct)).sum(-1, keepdim=True)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q_s)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        k_b = k[..., lo:hi, :].to(ct)
        v_b = v[..., lo:hi, :].to(ct)
        s = q_s @ k_b.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., lo:hi, :] = p.transpose(-2, -1) @ g_
        grad_s = p * (g_ @ v_b.transpose(-2, -1) - delta)
        grad_q += grad_s @ k_b
        grad_k[..., lo:hi, :] = grad_s.transpose(-2, -1) @ q_s
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(dim=-1, keepdim=True)
    lse_c = torch.where(torch.isneginf(lse), math.inf, lse.to(ct)).unsqueeze(-1)
    qpos = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb = k[..., start:stop, :].to(ct)
        vb = v[..., start:stop, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop).unsqueeze(0) > qpos, -math.inf)
        p = torch.exp(s - lse_c)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(ct) * sc
    g = grad_out.to(ct)
    D = (g * out.to(ct)).sum(-1, keepdim=True)
    ls = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    row = torch.arange(n_q)[:, None]
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        kb, vb = k[..., j0:j1, :].to(ct), v[..., j0:j1, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > row, -math.inf)
        p = torch.exp(s - ls)
        gv[..., j0:j1, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - D)
        gq += ds @ kb
        gk[..., j0:j1, :] = ds.transpose(-2, -1) @ qs
    return (gq * sc).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_recomputes_out_for_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    # first pass over the keys: rebuild out = sum_j p_j v_j to get delta
    o = torch.zeros(q.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        s = qs @ k[..., a:b, :].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        o += torch.exp(s - L) @ v[..., a:b, :].to(ct)
    delta = (g * o).sum(-1, keepdim=True)

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
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_two_level_tiles_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Key blocks outside, query blocks inside, as in FlashAttention-2's backward kernel."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    dO, O = grad_out.double(), out.double()
    lse64 = lse.double()
    Di = (dO * O).sum(-1)  # (B, H, N_q)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kj, Vj = K[:, :, j0:j1], V[:, :, j0:j1]
        for i0 in range(0, n_q, block_size):
            i1 = min(i0 + block_size, n_q)
            S = (Q[:, :, i0:i1] @ Kj.transpose(-2, -1)) * scale
            if causal:
                qi = torch.arange(i0, i1)[:, None] + (n_k - n_q)
                S = S.masked_fill(torch.arange(j0, j1)[None, :] > qi, -math.inf)
            Li = lse64[:, :, i0:i1, None]
            P = torch.where(torch.isneginf(Li), torch.zeros_like(S), torch.exp(S - Li))
            dOi = dO[:, :, i0:i1]
            dV[:, :, j0:j1] += P.transpose(-2, -1) @ dOi
            dP = dOi @ Vj.transpose(-2, -1)
            dS = P * (dP - Di[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += dS @ Kj * scale
            dK[:, :, j0:j1] += dS.transpose(-2, -1) @ Q[:, :, i0:i1] * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_scaled_keys_einsum(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Scale folded into the key blocks; products written with einsum."""
    b, h, n, d = q.shape
    m = k.shape[2]
    ty = torch.promote_types(q.dtype, torch.float32)
    c = d ** -0.5
    qf, gf = q.to(ty), grad_out.to(ty)
    row_term = torch.sum(gf * out.to(ty), dim=-1)  # (b, h, n)
    safe_lse = torch.nan_to_num(lse.to(ty), neginf=math.inf)  # no key: exp(-inf - inf) = 0
    last_key = torch.arange(n) + (m - n)
    pieces_k, pieces_v = [], []
    gq = torch.zeros_like(qf)
    for j0 in range(0, m, block_size):
        j1 = min(m, j0 + block_size)
        kj = k[:, :, j0:j1].to(ty) * c
        vj = v[:, :, j0:j1].to(ty)
        s = torch.einsum("bhid,bhjd->bhij", qf, kj)
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > last_key[:, None], -math.inf)
        p = torch.exp(s - safe_lse[..., None])
        pieces_v.append(torch.einsum("bhij,bhid->bhjd", p, gf))
        dp = torch.einsum("bhid,bhjd->bhij", gf, vj)
        ds = p * (dp - row_term[..., None])
        gq = gq + torch.einsum("bhij,bhjd->bhid", ds, kj)
        pieces_k.append(torch.einsum("bhij,bhid->bhjd", ds, qf) * c)
    return gq.to(q.dtype), torch.cat(pieces_k, 2).to(q.dtype), torch.cat(pieces_v, 2).to(q.dtype)


ENTRIES = [
    # ---- softmax_backward
    Entry("softmax_backward", "wrong", "row-term-whole-tensor",
          "The row term is summed over the whole tensor ((g * p).sum() with no dim) instead of "
          "along the last axis for each row.",
          sb_row_term_whole_tensor),
    Entry("softmax_backward", "wrong", "no-keepdim",
          "The row term is summed along the last axis without keepdim=True, so its shape (...,) "
          "broadcasts against the feature axis: a shape error for most inputs, and on square "
          "inputs each row silently subtracts another row's term.",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "precedence",
          "Missing parentheses: weights * grad - row_term multiplies only grad by the weights; "
          "the row term must be inside, weights * (grad - row_term).",
          sb_precedence),
    Entry("softmax_backward", "wrong", "returns-float32",
          "The result is left in the float32 working dtype instead of being cast back to "
          "weights' dtype, so float16 / bfloat16 inputs come back as float32.",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "sign-flipped",
          "The sign is reversed: weights * (row_term - grad) instead of weights * (grad - "
          "row_term).",
          sb_sign_flipped),
    Entry("softmax_backward", "wrong", "jacobian-diagonal-only",
          "It keeps only the diagonal of the Jacobian, p_i (1 - p_i) g_i, and drops the "
          "off-diagonal -p_i p_j terms that couple the entries of a row.",
          sb_diagonal_only),
    Entry("softmax_backward", "right", "einsum-float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "row-loop-dot", None, sb_row_loop),
    # ---- attention_backward
    Entry("attention_backward", "wrong", "grad-k-unscaled",
          "grad_k = grad_s^T q misses the 1/sqrt(d) factor that grad_q has: the scale of "
          "the scores applies to both.",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal-top-left",
          "The causal mask is tril() with no offset (top-left aligned) instead of the "
          "bottom-right tril(N_k - N_q) of lesson 04, so N_q != N_k gives the wrong mask.",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "softmax-nan-rows",
          "torch.softmax on a row that is all -inf gives NaN: with causal and N_q > N_k the "
          "rows with no visible key spread NaN into every gradient instead of contributing "
          "nothing.",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "row-term-over-queries",
          "The row term rowsum(grad_p * p) is summed over dim=-2 (the queries) instead of over "
          "the keys (dim=-1).",
          ab_row_term_wrong_axis),
    Entry("attention_backward", "wrong", "dot-T-on-batches",
          "It transposes with .T, which reverses every axis of a batched tensor, instead of "
          "transpose(-2, -1); only 2-D inputs work, batched ones give wrong shapes or errors.",
          ab_dot_T_on_batches),
    Entry("attention_backward", "wrong", "no-softmax-row-term",
          "The softmax is treated like an elementwise function: grad_s = p * grad_p, without "
          "subtracting the row term rowsum(grad_p * p).",
          ab_no_row_term),
    Entry("attention_backward", "right", "delta-from-out-float64", None,
          ab_delta_from_out_float64),
    Entry("attention_backward", "right", "explicit-jacobian", None, ab_jacobian_matrix),
    # ---- attention_backward_flops
    Entry("attention_backward_flops", "wrong", "multiply-add-one-flop",
          "Each product is counted as N^2 d, one FLOP per multiply-add, instead of 2 N^2 d.",
          abf_multiply_add_one),
    Entry("attention_backward_flops", "wrong", "recompute-whole-forward",
          "recompute=True adds the whole forward, 4 N^2 d, although only the scores q k^T "
          "(2 N^2 d) are recomputed.",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "flag-inverted",
          "The recompute test is inverted: the 2 N^2 d of the recomputation is added when "
          "recompute is False.",
          abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "float-ratio",
          "It multiplies the forward's 4 N^2 d by 2.5 or 2.0, so the result is a float instead "
          "of a plain int.",
          abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "conditional-precedence",
          "Python's conditional expression binds last: 8 N^2 d + 2 N^2 d if recompute else 0 "
          "returns 0 when recompute is False instead of 8 N^2 d.",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "three-products",
          "Only three backward products are counted (grad_v, grad_q, grad_k); the product "
          "grad_p = grad_out v^T is forgotten.",
          abf_three_products),
    Entry("attention_backward_flops", "right", "closed-form", None, abf_closed_form),
    Entry("attention_backward_flops", "right", "list-of-products", None, abf_list_of_products),
    # ---- flash_attention_backward
    Entry("flash_attention_backward", "wrong", "block-local-delta",
          "delta is computed per block as rowsum(grad_p * p) over the current block's keys "
          "only, instead of rowsum(grad_out * out) over the whole row, so with several blocks "
          "each block subtracts a partial row term.",
          fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "nan-on-empty-rows",
          "No guard for lse = -inf: for a row with no visible key exp(-inf - (-inf)) is NaN, "
          "which spreads into the gradients instead of a zero row.",
          fb_nan_on_empty_rows),
    Entry("flash_attention_backward", "wrong", "grad-q-unscaled",
          "grad_q is accumulated from grad_s @ k_blk but never multiplied by 1/sqrt(d) at the "
          "end.",
          fb_grad_q_unscaled),
    Entry("flash_attention_backward", "wrong", "grad-q-overwritten",
          "grad_q is assigned (dq = ds @ k_blk) in every block instead of accumulated (+=), so "
          "only the last key block's contribution survives.",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "causal-top-left",
          "The causal mask compares key positions with the raw query index, dropping the "
          "N_k - N_q offset of the bottom-right convention.",
          fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "recomputes-out",
          "It ignores the forward's out and rebuilds it in an extra pass over the key blocks to "
          "get delta: the gradients are right but the products cost about 14 N^2 d instead of "
          "one recomputation, 10 N^2 d.",
          fb_recomputes_out_for_delta),
    Entry("flash_attention_backward", "right", "two-level-tiles-float64", None,
          fb_two_level_tiles_float64),
    Entry("flash_attention_backward", "right", "scaled-keys-einsum", None, fb_scaled_keys_einsum),
]
