"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_over_dim0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (p * g).sum(dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_row_term_without_weights(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = g.sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_not_cast_back(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1, keepdim=True)
    return (p * g - row).to(weights.dtype)


def sb_renormalised(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    p = p / p.sum(dim=-1, keepdim=True)  # make sure the rows sum to 1
    g = grad_weights.to(ct)
    return (p * (g - (p * g).sum(dim=-1, keepdim=True))).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_jacobian_einsum_f64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_distributed_f64(weights, grad_weights):
    pg = weights.to(torch.float64) * grad_weights.to(torch.float64)
    return (pg - weights.to(torch.float64) * pg.sum(-1, keepdim=True)).to(weights.dtype)


# ============================================================ attention_backward: wrong
def ab_causal_top_left(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_ * sc).to(q.dtype), (gs.transpose(-2, -1) @ q_ * sc).to(k.dtype),
            gv.to(v.dtype))


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    f = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    nq, d = Q.shape[-2:]
    nk = K.shape[-2]
    scores = Q @ K.transpose(-1, -2) / math.sqrt(d)
    if causal:
        keep = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
        scores = scores.masked_fill(~keep, float("-inf"))
    top = scores.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isinf(top), 0.0)
    P = torch.exp(scores - top)
    tot = P.sum(-1, keepdim=True)
    P = P / tot.masked_fill(tot == 0, 1.0)
    dV = P.transpose(-1, -2) @ G
    dP = G @ V.transpose(-1, -2)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-1, -2) @ Q
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_mask_after_softmax(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    scale = d ** -0.5
    p = torch.softmax(q_ @ k_.transpose(-2, -1) * scale, dim=-1)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        p = p * keep  # zero the future keys
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ k_ * scale).to(q.dtype),
            (grad_s.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            grad_v.to(v.dtype))


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, gg = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    s = torch.matmul(qq, kk.transpose(-2, -1)) / math.sqrt(d)
    if causal:
        allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = s.masked_fill(~allowed, float("-inf"))
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    w = torch.exp(s - mx)
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    dv = torch.matmul(w.transpose(-2, -1), gg)
    dw = torch.matmul(gg, vv.transpose(-2, -1))
    ds = w * (dw - (dw * w).sum(dim=-2, keepdim=True))
    dq = torch.matmul(ds, kk) / math.sqrt(d)
    dk = torch.matmul(ds.transpose(-2, -1), qq) / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_torch_softmax_nan(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = torch.softmax(s, dim=-1)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (p * grad_p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_k_from_k(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    p = torch.exp(s - top)
    z = p.sum(-1, keepdim=True)
    p = p / z.masked_fill(z == 0, 1.0)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ k_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ attention_backward: right
def ab_delta_from_out_f64(q, k, v, grad_out, causal=False):
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    n_q, d = Q.shape[-2], Q.shape[-1]
    n_k = K.shape[-2]
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        ok = torch.arange(n_k)[None, :] - torch.arange(n_q)[:, None] <= n_k - n_q
        s = torch.where(ok, s, torch.tensor(-math.inf, dtype=torch.float64))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse))
    p = torch.where(torch.isneginf(lse), torch.zeros_like(p), p)
    out = torch.einsum("...ij,...jd->...id", p, V)
    delta = (G * out).sum(dim=-1, keepdim=True)  # = rowsum(grad_p * p)
    dp = torch.einsum("...id,...jd->...ij", G, V)
    ds = p * (dp - delta)
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    dv = torch.einsum("...ij,...id->...jd", p, G)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_row_jacobians(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2], q.shape[-1]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Q = q.double().reshape(-1, n_q, d)
    K = k.double().reshape(-1, n_k, d)
    V = v.double().reshape(-1, n_k, d_v)
    G = grad_out.double().reshape(-1, n_q, d_v)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for b in range(Q.shape[0]):
        for i in range(n_q):
            last = i + n_k - n_q if causal else n_k - 1  # last visible key
            if last < 0:
                continue
            ks, vs = K[b, :last + 1], V[b, :last + 1]
            s = ks @ Q[b, i] / math.sqrt(d)
            p = torch.softmax(s, dim=0)
            jac = torch.diag(p) - torch.outer(p, p)
            gp = vs @ G[b, i]
            gs = jac @ gp
            dQ[b, i] = gs @ ks / math.sqrt(d)
            dK[b, :last + 1] += torch.outer(gs, Q[b, i]) / math.sqrt(d)
            dV[b, :last + 1] += torch.outer(p, G[b, i])
    return (dQ.reshape(*lead, n_q, d).to(q.dtype), dK.reshape(*lead, n_k, d).to(k.dtype),
            dV.reshape(*lead, n_k, d_v).to(v.dtype))


# ============================================================ attention_backward_flops: wrong
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    flops = 8 * n * n * d
    if recompute:
        flops += 4 * n * n * d  # recompute the forward
    return flops


def abf_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    products = 3  # grad_v, grad_q, grad_k
    if recompute:
        products += 1
    return products * per_product


def abf_mac_one_flop(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_inverted_flag(seq_len, head_dim, recompute=True):
    base = 8 * seq_len * seq_len * head_dim
    if not recompute:
        base += 2 * seq_len * seq_len * head_dim
    return base


def abf_xor_power(seq_len, head_dim, recompute=True):
    extra = 2 if recompute else 0
    return (8 + extra) * seq_len ^ 2 * head_dim


# ============================================================ attention_backward_flops: right
def abf_sum_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_bool_arithmetic(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len * seq_len * head_dim


# ============================================================ flash_attention_backward: wrong
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
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        kb, vb = k[..., j0:j1, :].to(ct), v[..., j0:j1, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., j0:j1, :] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))  # row term of this block only
        dq += ds @ kb
        dk[..., j0:j1, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_no_inf_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[:, :, a:b].to(ct), v[:, :, a:b].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:b] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:b] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_scores_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qf, g = q.to(ct), grad_out.to(ct)
    delta = (g * out.to(ct)).sum(dim=-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse).to(ct).unsqueeze(-1)
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qf)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[..., st:en, :].to(ct), v[..., st:en, :].to(ct)
        s = qf @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[..., st:en, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb / math.sqrt(d)
        dk[..., st:en, :] = ds.transpose(-2, -1) @ qf / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_k_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    Q, G, O = q.to(ct), grad_out.to(ct), out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)
    delta = (G * O).sum(-1)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros(k.shape, dtype=ct)
    dV = torch.zeros(v.shape, dtype=ct)
    for k0 in range(0, n_k, block_size):
        k1 = min(k0 + block_size, n_k)
        Kb, Vb = k[..., k0:k1, :].to(ct), v[..., k0:k1, :].to(ct)
        for q0 in range(0, n_q, block_size):
            q1 = min(q0 + block_size, n_q)
            s = Q[..., q0:q1, :] @ Kb.transpose(-2, -1) * sc
            if causal:
                qi = torch.arange(q0, q1)[:, None] + (n_k - n_q)
                s = s.masked_fill(torch.arange(k0, k1)[None, :] > qi, -math.inf)
            p = torch.exp(s - L[..., q0:q1, None])
            dV[..., k0:k1, :] += p.transpose(-2, -1) @ G[..., q0:q1, :]
            ds = p * (G[..., q0:q1, :] @ Vb.transpose(-2, -1) - delta[..., q0:q1, None])
            dQ[..., q0:q1, :] += ds @ Kb * sc
            dK[..., k0:k1, :] = ds.transpose(-2, -1) @ Q[..., q0:q1, :] * sc
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_mask_excludes_diagonal(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(dim=-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(ct), v[..., start:stop, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] >= qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_two_pass_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def probs(start, stop):
        s = qs @ k[..., start:stop, :].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        return torch.exp(s - L)

    # first pass over the keys: the row term rowsum(grad_p * p)
    delta = torch.zeros(q.shape[:-1] + (1,), dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        p = probs(start, stop)
        dp = g @ v[..., start:stop, :].to(ct).transpose(-2, -1)
        delta += (dp * p).sum(-1, keepdim=True)
    # second pass: the gradients
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        p = probs(start, stop)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ v[..., start:stop, :].to(ct).transpose(-2, -1) - delta)
        dq += ds @ k[..., start:stop, :].to(ct)
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_two_level_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    r = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    G, O = grad_out.double(), out.double()
    L = lse.double()
    D = torch.einsum("bhid,bhid->bhi", G, O)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for q0 in range(0, n_q, block_size):
        q1 = min(q0 + block_size, n_q)
        Qi, Gi = Q[:, :, q0:q1], G[:, :, q0:q1]
        Li, Di = L[:, :, q0:q1, None], D[:, :, q0:q1, None]
        empty = torch.isneginf(Li)
        for k0 in range(0, n_k, block_size):
            k1 = min(k0 + block_size, n_k)
            Kj, Vj = K[:, :, k0:k1], V[:, :, k0:k1]
            s = torch.einsum("bhid,bhjd->bhij", Qi, Kj) * r
            if causal:
                hidden = (torch.arange(k0, k1)[None, :]
                          > torch.arange(q0, q1)[:, None] + (n_k - n_q))
                s = s.masked_fill(hidden, -math.inf)
            p = torch.where(empty, torch.zeros_like(s),
                            torch.exp(s - torch.where(empty, torch.zeros_like(Li), Li)))
            dV[:, :, k0:k1] += torch.einsum("bhij,bhid->bhjd", p, Gi)
            dp = torch.einsum("bhid,bhjd->bhij", Gi, Vj)
            ds = p * (dp - Di)
            dQ[:, :, q0:q1] += torch.einsum("bhij,bhjd->bhid", ds, Kj) * r
            dK[:, :, k0:k1] += torch.einsum("bhij,bhid->bhjd", ds, Qi) * r
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_skip_masked_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    shift = n_k - n_q
    qf, g = q.to(ct), grad_out.to(ct)
    row_term = torch.sum(g * out.to(ct), dim=-1, keepdim=True)
    finite = torch.isfinite(lse)[..., None]
    lse_f = torch.where(finite, lse.to(ct)[..., None], torch.zeros((), dtype=ct))
    grad_q = torch.zeros(q.shape, dtype=ct)
    grad_k = torch.zeros(k.shape, dtype=ct)
    grad_v = torch.zeros(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        if causal and start > (n_q - 1) + shift:
            continue  # no query sees any key of this block: its gradients stay zero
        kb, vb = k[..., start:stop, :].to(ct), v[..., start:stop, :].to(ct)
        s = torch.matmul(qf, kb.transpose(-2, -1)) / math.sqrt(d)
        p = torch.exp(s - lse_f) * finite
        if causal:
            seen = torch.arange(start, stop)[None, :] <= torch.arange(n_q)[:, None] + shift
            p = p * seen
        grad_v[..., start:stop, :] = torch.matmul(p.transpose(-2, -1), g)
        ds = p * (torch.matmul(g, vb.transpose(-2, -1)) - row_term)
        grad_q = grad_q + torch.matmul(ds, kb) / math.sqrt(d)
        grad_k[..., start:stop, :] = torch.matmul(ds.transpose(-2, -1), qf) / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_no_keepdim",
          "sums the row term without keepdim=True, so the (...,) sums broadcast against the "
          "last axis instead of their own rows (wrong values on square inputs, a RuntimeError "
          "on others)",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_dim0",
          "sums grad_weights * weights over dim=0 instead of the last axis, so the row term "
          "mixes different rows",
          sb_sum_over_dim0),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "the row term is grad_weights.sum(-1) instead of (grad_weights * weights).sum(-1): "
          "the weights are left out of the dot product",
          sb_row_term_without_weights),
    Entry("softmax_backward", "wrong", "not_cast_back",
          "returns the float32 working result without casting back to weights' dtype",
          sb_not_cast_back),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "writes weights * grad_weights - row: the row term is subtracted after the product "
          "instead of inside weights * (grad_weights - row)",
          sb_precedence),
    Entry("softmax_backward", "wrong", "renormalises_rows",
          "divides the weights by their row sum 'to be safe': a fully masked row of zeros "
          "becomes 0/0 = NaN instead of giving zeros",
          sb_renormalised),
    Entry("softmax_backward", "right", "jacobian_einsum_float64", None, sb_jacobian_einsum_f64),
    Entry("softmax_backward", "right", "distributed_float64", None, sb_distributed_f64),

    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() (diagonal 0), aligned top-left, instead of "
          "tril(N_k - N_q), so with N_q != N_k the wrong keys are visible",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "grad_k = grad_s^T q misses the 1/sqrt(d) factor that grad_q has",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "mask_after_softmax",
          "applies the causal mask after the softmax by zeroing the future weights, so the "
          "remaining weights are not renormalised (rows no longer sum to 1)",
          ab_mask_after_softmax),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "sums grad_p * p over dim=-2 (the queries) instead of dim=-1 (the keys) for the "
          "softmax's row term",
          ab_row_term_wrong_axis),
    Entry("attention_backward", "wrong", "softmax_nan_empty_rows",
          "uses torch.softmax on the masked scores: a query with no visible key (causal, "
          "N_q > N_k) gets NaN weights and NaN gradients instead of zeros",
          ab_torch_softmax_nan),
    Entry("attention_backward", "wrong", "grad_k_from_k",
          "grad_k multiplies grad_s^T by k instead of q (a wrong variable reused): wrong "
          "values when N_q == N_k, a RuntimeError from the shape clash when N_q != N_k",
          ab_grad_k_from_k),
    Entry("attention_backward", "right", "delta_from_out_float64", None, ab_delta_from_out_f64),
    Entry("attention_backward", "right", "row_jacobian_loops", None, ab_row_jacobians),

    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "with recompute=True adds the whole forward, 4 N^2 d, instead of only the scores "
          "q k^T, 2 N^2 d",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "three_products",
          "counts three products (grad_v, grad_q, grad_k) and forgets grad_p = grad_out v^T",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "mac_one_flop",
          "counts a multiply-add as 1 FLOP: every product is N^2 d instead of 2 N^2 d",
          abf_mac_one_flop),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "multiplies the forward's FLOPs by 2.5 or 2, which returns a float instead of a "
          "plain int",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "tests `if not recompute`: adds the recomputation exactly when it is not asked for",
          abf_inverted_flag),
    Entry("attention_backward_flops", "wrong", "xor_for_power",
          "writes seq_len ^ 2 for the square: in Python ^ is bitwise XOR (and binds more "
          "loosely than *), not a power",
          abf_xor_power),
    Entry("attention_backward_flops", "right", "sum_of_product_shapes", None,
          abf_sum_of_products),
    Entry("attention_backward_flops", "right", "bool_arithmetic", None, abf_bool_arithmetic),

    Entry("flash_attention_backward", "wrong", "block_local_row_term",
          "computes the softmax row term as rowsum(grad_p * p) inside each key block, so it "
          "only covers that block's keys, instead of delta = rowsum(grad_out * out) over the "
          "whole row",
          fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no_minus_inf_lse_guard",
          "uses lse as it is: for a row with no visible key exp(-inf - (-inf)) is NaN, and the "
          "NaN spreads into grad_q, grad_k and grad_v",
          fb_no_inf_guard),
    Entry("flash_attention_backward", "wrong", "recomputed_scores_unscaled",
          "recomputes the scores as q k^T without the 1/sqrt(d) scale before exp(s - lse), so "
          "the recomputed probabilities are wrong",
          fb_scores_unscaled),
    Entry("flash_attention_backward", "wrong", "grad_k_overwritten",
          "loops over query blocks inside each key block but assigns grad_k with = instead "
          "of +=, so only the last query block's contribution survives",
          fb_grad_k_overwritten),
    Entry("flash_attention_backward", "wrong", "mask_excludes_diagonal",
          "the causal mask uses key >= query position instead of key > query position, so it "
          "also hides the diagonal (each query's own key)",
          fb_mask_excludes_diagonal),
    Entry("flash_attention_backward", "wrong", "two_pass_row_term",
          "computes the row term in a first pass over the keys as rowsum(grad_p * p), "
          "recomputing scores and grad_p a second time: the values are right but the matrix "
          "products exceed one recomputation (about 14 N^2 d instead of 10 N^2 d)",
          fb_two_pass_delta),
    Entry("flash_attention_backward", "right", "two_level_tiles_float64", None,
          fb_two_level_tiles_f64),
    Entry("flash_attention_backward", "right", "skip_masked_blocks", None,
          fb_skip_masked_blocks),
]
