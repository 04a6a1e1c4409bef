"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math
from fractions import Fraction

import torch

from entry import Entry


# ============================================================ softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_over_first_axis(weights, grad_weights):
    compute = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(compute)
    g = grad_weights.to(compute)
    dot = torch.sum(p * g, dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    compute = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(compute)
    # d p_i / d s_i = p_i (1 - p_i)
    return (p * (1 - p) * grad_weights.to(compute)).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    w, gw = weights.to(ct), grad_weights.to(ct)
    return w * (gw - (gw * w).sum(-1, keepdim=True))


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    out = p * g - (g * p).sum(dim=-1, keepdim=True)
    return out.to(weights.dtype)


def sb_weights_squared(weights, grad_weights):
    compute = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(compute), grad_weights.to(compute)
    row = (p * p).sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_einsum_f64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    row = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    n = weights.shape[-1]
    P = weights.double().reshape(-1, n)
    G = grad_weights.double().reshape(-1, n)
    rows = []
    for p_row, g_row in zip(P, G):
        c = torch.dot(p_row, g_row)
        rows.append(p_row * (g_row - c))
    out = torch.stack(rows) if rows else torch.zeros_like(P)
    return out.reshape(weights.shape).to(weights.dtype)


# ============================================================ attention_backward: wrong
def ab_grad_v_untransposed(q, k, v, grad_out, causal=False):
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
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p @ G
    gp = G @ V.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ K / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ Q / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = d ** -0.5
    qc, kc, vc, gc = (t.to(compute) for t in (q, k, v, grad_out))
    scores = qc @ kc.transpose(-2, -1) * scale
    if causal:
        future = torch.triu(torch.ones(n_q, n_k, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    w = torch.exp(scores - top)
    w = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-300)
    grad_v = w.transpose(-2, -1) @ gc
    grad_w = gc @ vc.transpose(-2, -1)
    grad_s = w * (grad_w - (grad_w * w).sum(dim=-1, keepdim=True))
    return ((grad_s @ kc * scale).to(q.dtype), (grad_s.transpose(-2, -1) @ qc * scale).to(k.dtype),
            grad_v.to(v.dtype))


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(compute) for t in (q, k, v, grad_out))
    scores = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~keep, -math.inf)
    p = torch.softmax(scores, dim=-1)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_k_from_k(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, dO = q.to(dt), k.to(dt), v.to(dt), grad_out.to(dt)
    inv = 1.0 / math.sqrt(d)
    S = torch.einsum("...qd,...kd->...qk", Q, K) * inv
    if causal:
        S = S.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    mx = S.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    E = torch.exp(S - mx)
    Z = E.sum(-1, keepdim=True)
    P = E / torch.where(Z == 0, torch.ones_like(Z), Z)
    dV = torch.einsum("...qk,...qe->...ke", P, dO)
    dP = torch.einsum("...qe,...ke->...qk", dO, V)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = torch.einsum("...qk,...kd->...qd", dS, K) * inv
    dK = torch.einsum("...qk,...kd->...qd", dS.transpose(-2, -1), K) * inv
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(compute) for t in (q, k, v, grad_out))
    scores = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q),
                                    -math.inf)
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), 0.0, row_max)
    p = torch.exp(scores - row_max)
    total = p.sum(dim=-1, keepdim=True)
    p = p / torch.where(total == 0, 1.0, total)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_softmax_as_elementwise(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, go = (t.to(ct) for t in (q, k, v, grad_out))
    sc = qq @ kk.transpose(-2, -1) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    hi = sc.amax(-1, keepdim=True)
    hi = torch.where(torch.isinf(hi), 0.0, hi)
    ex = torch.exp(sc - hi)
    den = ex.sum(-1, keepdim=True)
    p = ex / torch.where(den == 0, 1.0, den)
    gv = p.transpose(-2, -1) @ go
    gp = go @ vv.transpose(-2, -1)
    gs = p * gp  # chain rule through exp
    gq = gs @ kk / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ qq / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ attention_backward: right
def ab_delta_from_out(q, k, v, grad_out, causal=False):
    """Row term from delta = rowsum(grad_out * out), einsum everywhere, float64."""
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(nq)[:, None]
        j = torch.arange(nk)[None, :]
        s = torch.where(j <= i + (nk - nq), s, torch.full_like(s, -math.inf))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = torch.einsum("...ij,...je->...ie", p, V)
    delta = (G * out).sum(-1, keepdim=True)
    dp = torch.einsum("...ie,...je->...ij", G, V)
    ds = p * (dp - delta)
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    dv = torch.einsum("...ij,...ie->...je", p, G)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_query_row_loop(q, k, v, grad_out, causal=False):
    """One query row at a time: its softmax, its Jacobian-vector product, outer products."""
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    dq = torch.zeros_like(Q)
    dk = torch.zeros_like(K)
    dv = torch.zeros_like(V)
    c = 1.0 / math.sqrt(d)
    for i in range(nq):
        last = i + nk - nq if causal else nk - 1  # keys 0..last are visible
        if last < 0:
            continue
        kv = slice(0, last + 1)
        s = (K[..., kv, :] @ Q[..., i, :, None])[..., 0] * c  # (..., n)
        p = torch.softmax(s, dim=-1)
        g = G[..., i, :]  # (..., d_v)
        dv[..., kv, :] += p[..., :, None] * g[..., None, :]
        dp = (V[..., kv, :] @ g[..., :, None])[..., 0]
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq[..., i, :] = (ds[..., None] * K[..., kv, :]).sum(-2) * c
        dk[..., kv, :] += ds[..., :, None] * Q[..., i, None, :] * c
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def flops_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len * seq_len * head_dim
    if recompute:
        backward += 4 * seq_len * seq_len * head_dim  # run the forward again
    return backward


def flops_macs_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def flops_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    ratio = 2.5 if recompute else 2.0
    return ratio * forward


def flops_ignores_flag(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    four_products = 4 * 2 * n * n * d
    scores_again = 2 * n * n * d
    return four_products + scores_again


def flops_conditional_precedence(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 8 * n2d + 2 * n2d if recompute else 0


def flops_three_products(seq_len, head_dim, recompute=True):
    # grad_v, grad_q, grad_k: one (N, N, d) product each
    total = 3 * 2 * seq_len * seq_len * head_dim
    if recompute:
        total += 2 * seq_len * seq_len * head_dim
    return total


# ============================================================ attention_backward_flops: right
def flops_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def flops_fraction_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    ratio = Fraction(5, 2) if recompute else Fraction(2)
    return int(ratio * forward)


# ============================================================ flash_attention_backward: wrong
def fb_unguarded_lse(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
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


def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(compute) * (1.0 / math.sqrt(d))
    g_ = grad_out.to(compute)
    lse_ = lse.to(compute).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q_s)
    grad_k = torch.empty(k.shape, dtype=compute)
    grad_v = torch.empty(v.shape, dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk = k[..., start:stop, :].to(compute)
        v_blk = v[..., start:stop, :].to(compute)
        scores = q_s @ k_blk.transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > query_pos,
                                        -math.inf)
        p = torch.exp(scores - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g_
        grad_p = g_ @ v_blk.transpose(-2, -1)
        row = (grad_p * p).sum(dim=-1, keepdim=True)  # the softmax row term
        grad_s = p * (grad_p - row)
        grad_q += grad_s @ k_blk
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_s
    return ((grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype))


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    Q = q.to(ct) * sc
    dO = grad_out.to(ct)
    Di = (dO * out.to(ct)).sum(-1, keepdim=True)
    Li = torch.where(torch.isneginf(lse), math.inf, lse.to(ct)).unsqueeze(-1)
    rows = torch.arange(Nq).unsqueeze(1)
    dQ = torch.zeros(B, H, Nq, d, dtype=ct)
    dK = torch.zeros(B, H, Nk, d, dtype=ct)
    dV = torch.zeros(B, H, Nk, d, dtype=ct)
    for j0 in range(0, Nk, block_size):
        j1 = min(j0 + block_size, Nk)
        Kj, Vj = k[:, :, j0:j1].to(ct), v[:, :, j0:j1].to(ct)
        S = Q @ Kj.transpose(-2, -1)
        if causal:
            S = S.masked_fill(torch.arange(j0, j1).unsqueeze(0) > rows, -math.inf)
        P = torch.exp(S - Li)
        dV[:, :, j0:j1] = P.transpose(-2, -1) @ dO
        dS = P * (dO @ Vj.transpose(-2, -1) - Di)
        dQ = dQ + dS @ Kj
        dK[:, :, j0:j1] = dS.transpose(-2, -1) @ Q
    return (dQ * sc).to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) / math.sqrt(d)
    g_ = grad_out.to(compute)
    delta = (g_ * out.to(compute)).sum(dim=-1, keepdim=True)
    lse_ = lse.to(compute).masked_fill(torch.isneginf(lse), math.inf)[..., None]
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
        grad_s = p * (g_ @ v_blk.transpose(-2, -1) - delta)
        grad_q = grad_s @ k_blk
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_scaled
    grad_q = grad_q / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_floor_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = d ** -0.5
    qh = q.to(ct) * scale
    go = grad_out.to(ct)
    dlt = torch.einsum("bhqd,bhqd->bhq", go, out.to(ct)).unsqueeze(-1)
    ls = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).to(ct)[..., None]
    qi = torch.arange(n_q).view(-1, 1) + n_k - n_q
    gq = torch.zeros_like(qh)
    gk = torch.zeros(k.shape, dtype=ct)
    gv = torch.zeros(v.shape, dtype=ct)
    for blk in range(max(1, n_k // block_size)):
        lo, hi = blk * block_size, min((blk + 1) * block_size, n_k)
        kb = k[..., lo:hi, :].to(ct)
        vb = v[..., lo:hi, :].to(ct)
        s = qh @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi).view(1, -1) > qi, -math.inf)
        p = torch.exp(s - ls)
        gv[..., lo:hi, :] = p.transpose(-2, -1) @ go
        gs = p * (go @ vb.transpose(-2, -1) - dlt)
        gq = gq + gs @ kb
        gk[..., lo:hi, :] = gs.transpose(-2, -1) @ qh
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_two_pass_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(compute) / math.sqrt(d)
    g_ = grad_out.to(compute)
    lse_ = lse.to(compute).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def probs(start, stop):
        s = q_s @ k[..., start:stop, :].to(compute).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > query_pos, -math.inf)
        return torch.exp(s - lse_)

    # first pass: the row term rowsum(grad_p * p), block by block
    delta = torch.zeros(q.shape[:-1] + (1,), dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        grad_p = g_ @ v[..., start:stop, :].to(compute).transpose(-2, -1)
        delta += (grad_p * probs(start, stop)).sum(-1, keepdim=True)
    grad_q = torch.zeros_like(q_s)
    grad_k = torch.empty(k.shape, dtype=compute)
    grad_v = torch.empty(v.shape, dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk = k[..., start:stop, :].to(compute)
        v_blk = v[..., start:stop, :].to(compute)
        p = probs(start, stop)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g_
        grad_s = p * (g_ @ v_blk.transpose(-2, -1) - delta)
        grad_q += grad_s @ k_blk
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_s
    return (grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_two_d_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries and keys (FlashAttention-2's backward loop nest), float64."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    c = 1.0 / math.sqrt(d)
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    D = (G * out.double()).sum(-1)  # (B, H, Nq)
    L = lse.double()
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for j0 in range(0, Nk, block_size):
        j1 = min(Nk, j0 + block_size)
        kj, vj = K[:, :, j0:j1], V[:, :, j0:j1]
        for i0 in range(0, Nq, block_size):
            i1 = min(Nq, i0 + block_size)
            s = (Q[:, :, i0:i1] @ kj.transpose(-2, -1)) * c
            lse_i = L[:, :, i0:i1, None]
            p = torch.where(torch.isfinite(lse_i), torch.exp(s - lse_i), torch.zeros_like(s))
            if causal:
                qpos = torch.arange(i0, i1)[:, None] + (Nk - Nq)
                kpos = torch.arange(j0, j1)[None, :]
                p = p.masked_fill(kpos > qpos, 0.0)
            dV[:, :, j0:j1] += p.transpose(-2, -1) @ G[:, :, i0:i1]
            ds = p * (G[:, :, i0:i1] @ vj.transpose(-2, -1) - D[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += (ds @ kj) * c
            dK[:, :, j0:j1] += (ds.transpose(-2, -1) @ Q[:, :, i0:i1]) * c
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_einsum_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    Q = q.double()
    G = grad_out.double()
    delta = torch.einsum("bhnd,bhnd->bhn", G, out.double())
    empty = torch.isneginf(lse)
    L = torch.where(empty, torch.zeros_like(lse), lse).double()
    dq = torch.zeros(B, H, Nq, d, dtype=torch.float64)
    dks, dvs = [], []
    for lo in range(0, Nk, block_size):
        hi = min(Nk, lo + block_size)
        kb, vb = k[:, :, lo:hi].double(), v[:, :, lo:hi].double()
        s = torch.einsum("bhqd,bhkd->bhqk", Q, kb) * scale
        p = torch.exp(s - L[..., None])
        keep = ~empty[..., None]
        if causal:
            keep = keep & (torch.arange(lo, hi)[None, :] <= torch.arange(Nq)[:, None] + Nk - Nq)
        p = torch.where(keep, p, torch.zeros_like(p))
        dvs.append(torch.einsum("bhqk,bhqd->bhkd", p, G))
        dp = torch.einsum("bhqd,bhkd->bhqk", G, vb)
        ds = p * (dp - delta[..., None])
        dq += torch.einsum("bhqk,bhkd->bhqd", ds, kb) * scale
        dks.append(torch.einsum("bhqk,bhqd->bhkd", ds, Q) * scale)
    return dq.to(q.dtype), torch.cat(dks, 2).to(k.dtype), torch.cat(dvs, 2).to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row-term-without-keepdim",
          "sums the row term without keepdim=True, so the (..., ) vector broadcasts against "
          "the last axis instead of lining up with its row (raises on non-square shapes, "
          "wrong values on square ones)", sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row-term-over-first-axis",
          "sums p * g over dim=0 instead of the last axis, mixing rows (only a single "
          "(n,) row comes out right)", sb_sum_over_first_axis),
    Entry("softmax_backward", "wrong", "jacobian-diagonal-only",
          "uses only the diagonal of the Jacobian, p * (1 - p) * g, dropping the "
          "-p_i p_j terms that couple the entries of a row", sb_diagonal_only),
    Entry("softmax_backward", "wrong", "returns-float32",
          "computes in float32 but returns that dtype instead of casting back to weights' "
          "dtype (float16/bfloat16 inputs come back as float32)", sb_returns_float32),
    Entry("softmax_backward", "wrong", "missing-parentheses",
          "writes p * g - rowsum(g * p) instead of p * (g - rowsum(g * p)): the row term is "
          "not multiplied by p", sb_precedence),
    Entry("softmax_backward", "wrong", "row-term-p-dot-p",
          "computes the row term as rowsum(p * p) instead of rowsum(grad_weights * p): the "
          "weights are reused where the upstream gradient belongs", sb_weights_squared),
    Entry("softmax_backward", "right", "einsum-float64", None, sb_einsum_f64),
    Entry("softmax_backward", "right", "row-loop-dot", None, sb_row_loop),

    Entry("attention_backward", "wrong", "grad-v-untransposed",
          "computes grad_v = p @ grad_out instead of p^T @ grad_out: the product raises when "
          "N_q != N_k and gives wrong values when N_q == N_k", ab_grad_v_untransposed),
    Entry("attention_backward", "wrong", "causal-top-left",
          "builds the causal mask as triu(1) over (N_q, N_k), aligned top-left, instead of "
          "lesson 04's bottom-right alignment (keys j <= i + N_k - N_q)", ab_causal_top_left),
    Entry("attention_backward", "wrong", "softmax-nan-rows",
          "uses torch.softmax on masked scores without guarding rows with no visible key, "
          "so those rows become NaN and spread NaN into grad_k and grad_v",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "grad-k-uses-k",
          "computes grad_k = grad_s^T @ k instead of grad_s^T @ q (k reused where q belongs): "
          "raises when N_q != N_k, wrong values when they are equal",
          ab_grad_k_from_k),
    Entry("attention_backward", "wrong", "grad-k-unscaled",
          "applies the 1/sqrt(d) of the scores to grad_q but forgets it in grad_k",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "softmax-treated-elementwise",
          "passes the gradient through the softmax as if it were elementwise, grad_s = "
          "p * grad_p, dropping the row term rowsum(grad_p * p)", ab_softmax_as_elementwise),
    Entry("attention_backward", "right", "delta-from-out-einsum", None, ab_delta_from_out),
    Entry("attention_backward", "right", "query-row-loop", None, ab_query_row_loop),

    Entry("attention_backward_flops", "wrong", "recompute-whole-forward",
          "charges the recomputation as the whole forward, 4 N^2 d, though only the scores "
          "q k^T (2 N^2 d) are recomputed", flops_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "multiply-add-as-one",
          "counts one multiply-add as 1 FLOP instead of 2, so every product is N^2 d "
          "instead of 2 N^2 d (half the count)", flops_macs_as_one),
    Entry("attention_backward_flops", "wrong", "float-from-ratio",
          "returns 2.5 x (or 2 x) the forward's 4 N^2 d as a float, where the contract fixes "
          "a plain int", flops_ratio_float),
    Entry("attention_backward_flops", "wrong", "ignores-recompute-flag",
          "always adds the 2 N^2 d of the recomputed scores, even when recompute=False",
          flops_ignores_flag),
    Entry("attention_backward_flops", "wrong", "conditional-precedence",
          "writes 8 n2d + 2 n2d if recompute else 0: the conditional expression binds "
          "loosest, so recompute=False returns 0 instead of 8 N^2 d",
          flops_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "three-products",
          "counts three backward products (grad_v, grad_q, grad_k) and forgets "
          "grad_p = grad_out v^T, so the base is 6 N^2 d instead of 8 N^2 d",
          flops_three_products),
    Entry("attention_backward_flops", "right", "product-shape-list", None, flops_product_list),
    Entry("attention_backward_flops", "right", "fraction-ratio", None, flops_fraction_ratio),

    Entry("flash_attention_backward", "wrong", "unguarded-lse",
          "recomputes p = exp(s - lse) without handling lse = -inf, so a row with no visible "
          "key gives exp(-inf - (-inf)) = NaN", fb_unguarded_lse),
    Entry("flash_attention_backward", "wrong", "block-local-row-term",
          "computes the softmax row term per key block, rowsum(grad_p * p) over that block "
          "only, instead of delta = rowsum(grad_out * out) over all keys: right only with a "
          "single block", fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "causal-top-left",
          "masks key j for query i when j > i, aligned top-left, instead of "
          "j > i + N_k - N_q (bottom-right), wrong whenever N_q != N_k", fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "grad-q-overwritten",
          "assigns grad_q = grad_s @ k_blk in each block instead of accumulating (+=), so "
          "only the last key block's contribution survives", fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "floor-block-count",
          "loops over N_k // block_size blocks, so the keys of a ragged last block get no "
          "gradient (grad_k, grad_v zero there) and give none to grad_q", fb_floor_blocks),
    Entry("flash_attention_backward", "wrong", "two-pass-row-term",
          "gets the row term from a first pass over all key blocks (rowsum(grad_p * p)) "
          "instead of delta = rowsum(grad_out * out): the gradients are right but it spends "
          "two extra products per block, beyond one recomputation (14 instead of 10 N^2 d)",
          fb_two_pass_delta),
    Entry("flash_attention_backward", "right", "query-and-key-tiles", None, fb_two_d_tiles),
    Entry("flash_attention_backward", "right", "einsum-key-blocks", None, fb_einsum_blocks),
]
