"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward: wrong
def sb_row_term_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (p * g).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_row_term_wrong_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_row_term_without_p(weights, grad_weights):
    f = torch.promote_types(weights.dtype, torch.float32)
    w, gw = weights.to(f), grad_weights.to(f)
    return (w * (gw - gw.sum(-1, keepdim=True))).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    inner = (g * p).sum(-1, keepdim=True)
    return (p * (inner - g)).to(weights.dtype)


def sb_forgets_cast_back(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return p * (g - (g * p).sum(dim=-1, keepdim=True))


def sb_elementwise_sigmoid_rule(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (1 - p) * g).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_einsum_float64(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    row = torch.einsum("...n,...n->...", g, p).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    shape = weights.shape
    n = shape[-1]
    P = weights.reshape(-1, n).double()
    G = grad_weights.reshape(-1, n).double()
    out = torch.zeros_like(P)
    for r in range(P.shape[0]):
        p, g = P[r], G[r]
        out[r] = p * (g - torch.dot(p, g))
    return out.reshape(shape).to(weights.dtype)


# ============================================================ attention_backward: wrong
def ab_causal_top_left(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qf @ kf.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.transpose(-2, -1) @ gf
    dp = gf @ vf.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ kf / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ qf / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(dt) for t in (q, k, v, grad_out))
    scale = d ** -0.5
    S = Q @ K.transpose(-1, -2) * scale
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        S = S.masked_fill(~keep, float("-inf"))
    top = S.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    E = (S - top).exp()
    Z = E.sum(dim=-1, keepdim=True)
    P = E / Z.clamp_min(1e-30)
    dV = P.transpose(-1, -2) @ G
    dP = G @ V.transpose(-1, -2)
    dS = P * (dP - (dP * P).sum(dim=-1, keepdim=True))
    dQ = dS @ K * scale
    dK = dS.transpose(-1, -2) @ Q
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_nan_on_empty_rows(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(c), k.to(c), v.to(c), grad_out.to(c)
    scores = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        mask = torch.ones(nq, nk, dtype=torch.bool).tril(diagonal=nk - nq)
        scores = scores.masked_fill(~mask, -math.inf)
    p = torch.softmax(scores, dim=-1)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(dim=-1, keepdim=True))
    gq = gs @ k_ / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ q_ / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_row_sum_wrong_axis(q, k, v, grad_out, causal=False):
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, gg = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = torch.einsum("...id,...jd->...ij", qq, kk) / math.sqrt(d)
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~allowed, -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = mx.masked_fill(torch.isneginf(mx), 0.0)
    w = torch.exp(s - mx)
    tot = w.sum(-1, keepdim=True)
    p = w / tot.masked_fill(tot == 0, 1.0)
    gv = torch.einsum("...ij,...ie->...je", p, gg)
    gp = torch.einsum("...ie,...je->...ij", gg, vv)
    gs = p * (gp - (gp * p).sum(-2, keepdim=True))
    gq = torch.einsum("...ij,...jd->...id", gs, kk) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", gs, qq) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_k_uses_k(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1 / math.sqrt(d)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qf @ kf.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    z = p.sum(-1, keepdim=True)
    p = p / torch.where(z == 0, torch.ones_like(z), z)
    grad_v = p.transpose(-2, -1) @ gf
    grad_p = gf @ vf.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ kf * scale
    grad_k = grad_s.transpose(-2, -1) @ kf * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_no_row_term(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qf @ kf.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    den = e.sum(-1, keepdim=True)
    p = e / torch.where(den == 0, 1.0, den)
    grad_v = p.transpose(-2, -1) @ gf
    grad_p = gf @ vf.transpose(-2, -1)
    grad_s = p * grad_p
    grad_q = grad_s @ kf / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ qf / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ attention_backward: right
def ab_delta_from_out_float64(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    S = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        rel = torch.arange(n_k)[None, :] - torch.arange(n_q)[:, None]
        S = S.masked_fill(rel > n_k - n_q, -math.inf)
    lse = torch.logsumexp(S, dim=-1, keepdim=True)
    P = torch.exp(S - lse.nan_to_num(neginf=0.0))
    P = torch.where(torch.isneginf(lse), torch.zeros_like(P), P)
    out = P @ V
    delta = (G * out).sum(-1, keepdim=True)  # equals rowsum(grad_p * p)
    dV = torch.einsum("...qk,...qe->...ke", P, G)
    dS = P * (torch.einsum("...qe,...ke->...qk", G, V) - delta)
    dQ = torch.einsum("...qk,...kd->...qd", dS, K) / math.sqrt(d)
    dK = torch.einsum("...qk,...qd->...kd", dS, Q) / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_per_matrix_loop(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2], q.shape[-1]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Q = q.reshape(-1, n_q, d).double()
    K = k.reshape(-1, n_k, d).double()
    V = v.reshape(-1, n_k, d_v).double()
    G = grad_out.reshape(-1, n_q, d_v).double()
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for m in range(Q.shape[0]):
        s = Q[m] @ K[m].T / math.sqrt(d)
        p = torch.zeros_like(s)
        for i in range(n_q):
            last = i + n_k - n_q if causal else n_k - 1
            if last < 0:
                continue  # this query sees no key: zero row
            row = s[i, :last + 1]
            p[i, :last + 1] = torch.softmax(row, dim=0)
        dV[m] = p.T @ G[m]
        dp = G[m] @ V[m].T
        ds = p * (dp - (dp * p).sum(1, keepdim=True))
        dQ[m] = ds @ K[m] / math.sqrt(d)
        dK[m] = ds.T @ Q[m] / math.sqrt(d)
    return (dQ.reshape(q.shape).to(q.dtype), dK.reshape(k.shape).to(k.dtype),
            dV.reshape(v.shape).to(v.dtype))


# ============================================================ attention_backward_flops: wrong
def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len * seq_len * head_dim
    if not recompute:
        flops += 2 * seq_len * seq_len * head_dim
    return flops


def abf_multiply_add_as_one(seq_len, head_dim, recompute=True):
    per_product = seq_len * seq_len * head_dim
    products = 5 if recompute else 4
    return products * per_product


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return (2.5 if recompute else 2) * forward


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    products = 4 + 1 if recompute else 0
    return products * 2 * seq_len * seq_len * head_dim


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 4 * (2 * seq_len * seq_len * head_dim)
    if recompute:
        backward += 4 * seq_len * seq_len * head_dim  # the forward again
    return backward


def abf_three_products(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    total = 2 * n2d + 2 * n2d + 2 * n2d  # grad_v, grad_q, grad_k
    if recompute:
        total += 2 * n2d
    return total


# ============================================================ attention_backward_flops: right
def abf_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [("grad_v", n, n, d), ("grad_p", n, d, n), ("grad_q", n, n, d), ("grad_k", n, n, d)]
    if recompute:
        shapes.append(("scores", n, d, n))
    return sum(2 * m * kk * nn for _, m, kk, nn in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return (8 + 2 * int(bool(recompute))) * seq_len ** 2 * head_dim


# ============================================================ flash_attention_backward: wrong
def fb_delta_per_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
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
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[..., s0:s1, :].to(ct), v[..., s0:s1, :].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        p = torch.exp(sc - L)
        dv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        delta = (dp * p).sum(-1, keepdim=True)
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[..., s0:s1, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_lse_not_guarded(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(f) * scale
    go = grad_out.to(f)
    delta = (go * out.to(f)).sum(-1, keepdim=True)
    L = lse.to(f).unsqueeze(-1)
    last_key = torch.arange(n_q)[:, None] + n_k - n_q
    gq = torch.zeros(B, H, n_q, d, dtype=f)
    gk = torch.zeros(B, H, n_k, d, dtype=f)
    gv = torch.zeros(B, H, n_k, d, dtype=f)
    for a in range(0, n_k, block_size):
        b = min(n_k, a + block_size)
        kb = k[:, :, a:b].to(f)
        vb = v[:, :, a:b].to(f)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > last_key, -math.inf)
        p = torch.exp(s - L)
        gv[:, :, a:b] = p.transpose(-1, -2) @ go
        ds = p * (go @ vb.transpose(-1, -2) - delta)
        gq = gq + ds @ kb
        gk[:, :, a:b] = ds.transpose(-1, -2) @ qs
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_grad_q_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    q_sc = q.to(c) / math.sqrt(d)
    g = grad_out.to(c)
    delta = (g * out.to(c)).sum(dim=-1, keepdim=True)
    lse_ = torch.where(torch.isneginf(lse), math.inf, lse.to(c)).unsqueeze(-1)
    q_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q_sc)
    grad_k = torch.empty(k.shape, dtype=c)
    grad_v = torch.empty(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_b = k[..., start:stop, :].to(c)
        v_b = v[..., start:stop, :].to(c)
        s = q_sc @ k_b.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > q_pos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g
        grad_s = p * (g @ v_b.transpose(-2, -1) - delta)
        grad_q += grad_s @ k_b
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_sc
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_key_positions_block_local(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
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
            kpos = torch.arange(stop - start)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    Q = q.to(ct) * sc
    dO = grad_out.to(ct)
    D = (dO * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dQ = torch.zeros_like(Q)
    dK = torch.empty(B, H, n_k, d, dtype=ct)
    dV = torch.empty(B, H, n_k, d, dtype=ct)
    for j in range(0, n_k, block_size):
        je = min(j + block_size, n_k)
        Kj, Vj = k[:, :, j:je].to(ct), v[:, :, j:je].to(ct)
        S = Q @ Kj.transpose(-2, -1)
        if causal:
            S = S.masked_fill(torch.arange(j, je)[None, :] > qpos, -math.inf)
        P = torch.exp(S - L)
        dV[:, :, j:je] = P.transpose(-2, -1) @ dO
        dS = P * (dO @ Vj.transpose(-2, -1) - D)
        dQ = dS @ Kj
        dK[:, :, j:je] = dS.transpose(-2, -1) @ Q
    return (dQ * sc).to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_two_pass_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def block_p(start, stop):
        s = qs @ k[..., start:stop, :].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        return torch.exp(s - L)

    # first pass: the row term rowsum(grad_p * p), block by block
    delta = torch.zeros(q.shape[:-1] + (1,), dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        p = block_p(start, stop)
        dp = g @ v[..., start:stop, :].to(ct).transpose(-2, -1)
        delta += (dp * p).sum(-1, keepdim=True)
    # second pass: the gradients
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(ct), v[..., start:stop, :].to(ct)
        p = block_p(start, stop)
        dv[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_two_d_tiles_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries and keys, FlashAttention-2 style, in float64."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    G = grad_out.double()
    delta = (G * out.double()).sum(-1)  # (B, H, N_q)
    L = lse.double()
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        Li = L[..., i0:i1]
        empty = torch.isneginf(Li)
        Li = torch.where(empty, torch.zeros_like(Li), Li)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            S = torch.einsum("bhid,bhjd->bhij", Q[..., i0:i1, :], K[..., j0:j1, :]) * scale
            if causal:
                vis = (torch.arange(j0, j1)[None, :]
                       <= torch.arange(i0, i1)[:, None] + (n_k - n_q))
                S = S.masked_fill(~vis, -math.inf)
            P = torch.exp(S - Li[..., None])
            P = P.masked_fill(empty[..., None], 0.0)
            dV[..., j0:j1, :] += torch.einsum("bhij,bhid->bhjd", P, G[..., i0:i1, :])
            dP = torch.einsum("bhid,bhjd->bhij", G[..., i0:i1, :], V[..., j0:j1, :])
            dS = P * (dP - delta[..., i0:i1, None])
            dQ[..., i0:i1, :] += torch.einsum("bhij,bhjd->bhid", dS, K[..., j0:j1, :]) * scale
            dK[..., j0:j1, :] += torch.einsum("bhij,bhid->bhjd", dS, Q[..., i0:i1, :]) * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_per_head_loop(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float64)
    gq = torch.zeros(B, H, n_q, d, dtype=ct)
    gk = torch.zeros(B, H, n_k, d, dtype=ct)
    gv = torch.zeros(B, H, n_k, d, dtype=ct)
    rows = torch.arange(n_q)
    for b in range(B):
        for h in range(H):
            qh = q[b, h].to(ct) / math.sqrt(d)
            gh = grad_out[b, h].to(ct)
            dl = (gh * out[b, h].to(ct)).sum(1, keepdim=True)
            lh = lse[b, h].to(ct)
            lh = torch.where(torch.isinf(lh), torch.full_like(lh, math.inf), lh)[:, None]
            for start in range(0, n_k, block_size):
                stop = min(n_k, start + block_size)
                kb = k[b, h, start:stop].to(ct)
                vb = v[b, h, start:stop].to(ct)
                s = torch.mm(qh, kb.t())
                if causal:
                    cols = torch.arange(start, stop)
                    s = torch.where(cols[None, :] - rows[:, None] <= n_k - n_q, s,
                                    torch.tensor(-math.inf, dtype=ct))
                p = torch.exp(s - lh)
                gv[b, h, start:stop] = torch.mm(p.t(), gh)
                ds = p * (torch.mm(gh, vb.t()) - dl)
                gq[b, h] += torch.mm(ds, kb)
                gk[b, h, start:stop] = torch.mm(ds.t(), qh)
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim, so the (..., ) row sums broadcast along the last "
          "axis against the wrong rows (a shape error, a wrong shape for n = 1, or rows mixed "
          "up in a square input)",
          sb_row_term_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_dim0",
          "sums grad_weights * weights over dim 0 instead of the last axis, mixing the rows "
          "(right only for a single row of shape (n,))",
          sb_row_term_wrong_axis),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "subtracts the plain row sum of grad_weights instead of the weighted sum "
          "(grad_weights * weights).sum(-1)",
          sb_row_term_without_p),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "computes weights * (row - grad_weights), the negative of the gradient "
          "(p p^T - diag(p) instead of diag(p) - p p^T)",
          sb_sign_flipped),
    Entry("softmax_backward", "wrong", "forgets_cast_back",
          "returns the float32 compute result without casting back to weights' dtype, so "
          "float16 / bfloat16 inputs come back as float32",
          sb_forgets_cast_back),
    Entry("softmax_backward", "wrong", "elementwise_sigmoid_rule",
          "uses the element-wise rule p * (1 - p) * g, the sigmoid's derivative: it keeps only "
          "the Jacobian's diagonal and drops the coupling between the entries of a row",
          sb_elementwise_sigmoid_rule),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "row_loop_dot", None, sb_row_loop),

    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() (top-left, j <= i) instead of lesson 04's "
          "bottom-right alignment j <= i + N_k - N_q, wrong when N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "grad_k_unscaled",
          "multiplies grad_q by 1/sqrt(d) but forgets the same factor on grad_k = grad_s^T q",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "nan_on_rows_without_keys",
          "uses torch.softmax on the masked scores, so a query row with no visible key "
          "(causal, N_q > N_k) gives NaN weights and NaN gradients instead of zeros",
          ab_nan_on_empty_rows),
    Entry("attention_backward", "wrong", "row_sum_over_queries",
          "sums grad_p * p over dim -2 (the queries) instead of over the keys in the softmax "
          "backward's row term",
          ab_row_sum_wrong_axis),
    Entry("attention_backward", "wrong", "grad_k_uses_k",
          "computes grad_k = grad_s^T k instead of grad_s^T q (the variable from the grad_q "
          "line reused): a shape error when N_q != N_k, wrong values otherwise",
          ab_grad_k_uses_k),
    Entry("attention_backward", "wrong", "no_row_term",
          "takes grad_s = p * grad_p, dropping the - rowsum(grad_p * p) term of the softmax's "
          "Jacobian",
          ab_no_row_term),
    Entry("attention_backward", "right", "delta_from_out_float64", None,
          ab_delta_from_out_float64),
    Entry("attention_backward", "right", "per_matrix_row_loop", None, ab_per_matrix_loop),

    Entry("attention_backward_flops", "wrong", "recompute_inverted",
          "adds the 2 N^2 d of the recomputation when recompute is False instead of when it "
          "is True",
          abf_recompute_inverted),
    Entry("attention_backward_flops", "wrong", "multiply_add_as_one_flop",
          "counts N^2 d per product, one FLOP per multiply-add, instead of 2 N^2 d",
          abf_multiply_add_as_one),
    Entry("attention_backward_flops", "wrong", "ratio_gives_float",
          "multiplies the forward's 4 N^2 d by 2.5 (or 2), which returns a float instead of a "
          "plain int",
          abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "conditional_precedence",
          "writes products = 4 + 1 if recompute else 0: the conditional binds last, so "
          "recompute=False gives 0 FLOPs instead of 8 N^2 d",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "counts the recomputation as a whole forward (4 N^2 d, q k^T and p v) instead of the "
          "scores q k^T alone (2 N^2 d)",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "three_products",
          "counts three backward products (grad_v, grad_q, grad_k) and forgets "
          "grad_p = grad_out v^T",
          abf_three_products),
    Entry("attention_backward_flops", "right", "product_list", None, abf_product_list),
    Entry("attention_backward_flops", "right", "closed_form", None, abf_closed_form),

    Entry("flash_attention_backward", "wrong", "delta_per_block",
          "computes the row term as rowsum(grad_p * p) over the current key block only; it "
          "must be the whole row's sum, delta = rowsum(grad_out * out)",
          fb_delta_per_block),
    Entry("flash_attention_backward", "wrong", "lse_not_guarded",
          "uses lse as it is, so a row with no visible key computes exp(-inf - (-inf)) = NaN "
          "instead of probabilities 0",
          fb_lse_not_guarded),
    Entry("flash_attention_backward", "wrong", "grad_q_unscaled",
          "accumulates grad_q = sum grad_s @ k_blk but never multiplies it by 1/sqrt(d) at "
          "the end",
          fb_grad_q_unscaled),
    Entry("flash_attention_backward", "wrong", "key_positions_block_local",
          "builds the causal mask with key positions arange(stop - start), local to the block, "
          "instead of arange(start, stop), so every block after the first is masked as if it "
          "were the first",
          fb_key_positions_block_local),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns dQ = dS @ K_j in each key block instead of adding to it, so only the last "
          "block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "two_pass_delta",
          "computes the row term rowsum(grad_p * p) in a first pass over all key blocks, "
          "recomputing scores and grad_p twice (14 N^2 d FLOPs) instead of "
          "delta = rowsum(grad_out * out)",
          fb_two_pass_delta),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fb_two_d_tiles_float64),
    Entry("flash_attention_backward", "right", "per_head_loop_mm", None, fb_per_head_loop),
]
