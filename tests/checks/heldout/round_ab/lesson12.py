"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================================ softmax_backward
def sb_sum_over_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (p * g).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (g * p).sum(-1)
    return (p * (g - dot)).to(weights.dtype)


def sb_row_term_unweighted(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_returns_compute_dtype(weights, grad_weights):
    p = weights.float()
    g = grad_weights.float()
    return p * (g - (g * p).sum(dim=-1, keepdim=True))


def sb_subtraction_reversed(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = torch.sum(g * p, dim=-1, keepdim=True)
    return (p * (row - g)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (1 - p) * g).to(weights.dtype)  # d p_i / d s_i = p_i (1 - p_i)


def sb_explicit_jacobian(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_einsum(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    inner = torch.einsum("...i,...i->...", p, g)
    return (p * g - p * inner[..., None]).to(weights.dtype)


# ============================================================================ attention_backward
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2:]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qc, kc, vc, gc = (t.to(ct) for t in (q, k, v, grad_out))
    s = qc @ kc.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, 1.0, tot)
    gv = p.transpose(-2, -1) @ gc
    gp = gc @ vc.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ kc / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ qc
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_top_left_causal(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = d ** -0.5
    s = (q_ @ k_.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n_q, n_k, dtype=torch.bool), 1), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    w = torch.exp(s - top)
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
    grad_v = w.transpose(-2, -1) @ g_
    grad_w = g_ @ v_.transpose(-2, -1)
    grad_s = w * (grad_w - (grad_w * w).sum(-1, keepdim=True))
    return ((grad_s @ k_ * scale).to(q.dtype), (grad_s.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            grad_v.to(v.dtype))


def ab_grad_k_no_transpose(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    S = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        S = S.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    M = S.amax(-1, keepdim=True)
    M = torch.where(torch.isinf(M), 0.0, M)
    E = torch.exp(S - M)
    Z = E.sum(-1, keepdim=True)
    P = E / torch.where(Z == 0, 1.0, Z)
    dV = P.transpose(-2, -1) @ G
    dP = G @ V.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS @ Q / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = qf @ kf.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)
    dv = p.transpose(-2, -1) @ gf
    dp = gf @ vf.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ kf / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ qf / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_returns_float32(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qf, kf, vf, gf = q.float(), k.float(), v.float(), grad_out.float()
    s = qf @ kf.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    e = torch.exp(s - mx)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.transpose(-2, -1) @ gf
    dp = gf @ vf.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ kf / math.sqrt(d), ds.transpose(-2, -1) @ qf / math.sqrt(d), dv


def ab_softmax_over_queries(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qc, kc, vc, gc = (t.to(ct) for t in (q, k, v, grad_out))
    scores = qc @ kc.transpose(-2, -1) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q),
                                    -math.inf)
    p = torch.nan_to_num(torch.softmax(scores, dim=-2), nan=0.0)
    gv = p.transpose(-2, -1) @ gc
    gp = gc @ vc.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ kc / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ qc / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_einsum_float64(q, k, v, grad_out, causal=False):
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    Q, K, V, dO = (t.double() for t in (q, k, v, grad_out))
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = torch.where(j - i <= n_k - n_q, s, torch.full_like(s, -math.inf))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.nan_to_num(torch.exp(s - lse), nan=0.0)  # rows with no key: 0
    dV = torch.einsum("...ij,...ie->...je", p, dO)
    dP = torch.einsum("...ie,...je->...ij", dO, V)
    dS = p * (dP - torch.einsum("...ij,...ij->...i", dP, p)[..., None])
    dQ = torch.einsum("...ij,...jd->...id", dS, K) / math.sqrt(d)
    dK = torch.einsum("...ij,...id->...jd", dS, Q) / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_row_jacobians(q, k, v, grad_out, causal=False):
    """Flatten the leading axes and apply each query row's softmax Jacobian explicitly."""
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Q = q.double().reshape(-1, n_q, d)
    K = k.double().reshape(-1, n_k, d)
    V = v.double().reshape(-1, n_k, d_v)
    G = grad_out.double().reshape(-1, n_q, d_v)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for b in range(Q.shape[0]):
        for i in range(n_q):
            last = n_k - n_q + i if causal else n_k - 1  # last visible key
            if last < 0:
                continue
            kk, vv = K[b, :last + 1], V[b, :last + 1]
            s = kk @ Q[b, i] / math.sqrt(d)
            p = torch.softmax(s, dim=0)
            dV[b, :last + 1] += torch.outer(p, G[b, i])
            dp = vv @ G[b, i]
            jac = torch.diag(p) - torch.outer(p, p)
            ds = jac @ dp
            dQ[b, i] = ds @ kk / math.sqrt(d)
            dK[b, :last + 1] += torch.outer(ds, Q[b, i]) / math.sqrt(d)
    return (dQ.reshape(*lead, n_q, d).to(q.dtype), dK.reshape(*lead, n_k, d).to(k.dtype),
            dV.reshape(*lead, n_k, d_v).to(v.dtype))


# ============================================================================ attention_backward_flops
def abf_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ** 2 * head_dim
    if not recompute:
        flops += 2 * seq_len ** 2 * head_dim  # recompute the scores
    return flops


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def abf_three_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    grad_v = 2 * n * n * d
    grad_q = 2 * n * n * d
    grad_k = 2 * n * n * d
    total = grad_v + grad_q + grad_k
    if recompute:
        total += 2 * n * n * d
    return total


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + 2 * seq_len ** 2 * head_dim if recompute else 0


def abf_xor(seq_len, head_dim, recompute=True):
    n2 = seq_len ^ 2
    return (8 + (2 if recompute else 0)) * n2 * head_dim


def abf_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, d, n),  # grad_v = p^T grad_out   (N x N) @ (N x d)
              (n, d, n),  # grad_p = grad_out v^T   (N x d) @ (d x N)
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_bool_arithmetic(seq_len, head_dim, recompute=True):
    return (4 + int(bool(recompute))) * 2 * seq_len * seq_len * head_dim


# ============================================================================ flash_attention_backward
def fab_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
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
        delta = (dp * p).sum(-1, keepdim=True)  # row term of this block
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_no_inf_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    row_lse = lse.to(ct).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp(s - row_lse)
        gv[..., lo:hi, :] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        gq += ds @ kb
        gk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_mask_hides_diagonal(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    go = grad_out.to(ct)
    delta = (go * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[:, :, st:en].to(ct), v[:, :, st:en].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] >= qpos, -math.inf)
        p = torch.exp(s - L)
        grad_v[:, :, st:en] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb
        grad_k[:, :, st:en] = ds.transpose(-2, -1) @ qs
    return ((grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype))


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(ct), v[..., start:stop, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q = ds @ kb
        grad_k[..., start:stop, :] = ds.transpose(-2, -1) @ qs
    grad_q = grad_q / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_delta_second_pass(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def probs(a, b):
        s = qs @ k[..., a:b, :].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        return torch.exp(s - L)

    # first pass: the row term rowsum(grad_p * p), block by block
    delta = torch.zeros(q.shape[:-1] + (1,), dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        dp = g @ v[..., a:b, :].to(ct).transpose(-2, -1)
        delta += (dp * probs(a, b)).sum(-1, keepdim=True)
    # second pass: the gradients
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        p = probs(a, b)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qc = q.to(ct)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qc)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qc @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qc
    scale = 1.0 / math.sqrt(d)
    return (dq * scale).to(q.dtype), (dk * scale).to(k.dtype), dv.to(v.dtype)


def fab_two_d_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """FlashAttention-2 tiling over query blocks and key blocks, float64 inside."""
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    Q = q.double() / math.sqrt(d)
    K, V, dO = k.double(), v.double(), grad_out.double()
    Di = (dO * out.double()).sum(-1)  # (B, H, N_q)
    L = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).double()
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kj, Vj = K[:, :, j0:j1], V[:, :, j0:j1]
        for i0 in range(0, n_q, block_size):
            i1 = min(i0 + block_size, n_q)
            S = Q[:, :, i0:i1] @ Kj.transpose(-1, -2)
            if causal:
                ii = torch.arange(i0, i1)[:, None] + (n_k - n_q)
                jj = torch.arange(j0, j1)[None, :]
                S = torch.where(jj <= ii, S, torch.full_like(S, -math.inf))
            P = torch.exp(S - L[:, :, i0:i1, None])
            dV[:, :, j0:j1] += P.transpose(-1, -2) @ dO[:, :, i0:i1]
            dP = dO[:, :, i0:i1] @ Vj.transpose(-1, -2)
            dS = P * (dP - Di[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += dS @ Kj
            dK[:, :, j0:j1] += dS.transpose(-1, -2) @ Q[:, :, i0:i1]
    return (dQ / math.sqrt(d)).to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, gf = q.to(ct), grad_out.to(ct)
    delta = torch.einsum("bhid,bhid->bhi", gf, out.to(ct))
    finite = torch.isfinite(lse)
    lse_safe = torch.where(finite, lse.to(ct), torch.zeros((), dtype=ct))
    grads_k, grads_v = [], []
    grad_q = torch.zeros_like(qf)
    c = 1.0 / math.sqrt(d)
    for j0 in range(0, n_k, block_size):
        kb = k[:, :, j0:j0 + block_size].to(ct)
        vb = v[:, :, j0:j0 + block_size].to(ct)
        s = torch.einsum("bhid,bhjd->bhij", qf, kb) * c
        p = torch.exp(s - lse_safe[..., None])
        keep = finite[..., None]
        if causal:
            i = torch.arange(n_q)[:, None] + (n_k - n_q)
            j = torch.arange(j0, j0 + kb.shape[2])[None, :]
            keep = keep & (j <= i)
        p = torch.where(keep, p, torch.zeros((), dtype=ct))
        grads_v.append(torch.einsum("bhij,bhid->bhjd", p, gf))
        dp = torch.einsum("bhid,bhjd->bhij", gf, vb)
        ds = p * (dp - delta[..., None])
        grad_q = grad_q + torch.einsum("bhij,bhjd->bhid", ds, kb) * c
        grads_k.append(torch.einsum("bhij,bhid->bhjd", ds, qf) * c)
    return (grad_q.to(q.dtype), torch.cat(grads_k, dim=2).to(k.dtype),
            torch.cat(grads_v, dim=2).to(v.dtype))


S = "softmax_backward"
A = "attention_backward"
FL = "attention_backward_flops"
FB = "flash_attention_backward"
ENTRIES = [
    Entry(S, "wrong", "row_sum_over_first_axis",
          "sums grad_weights * weights over dim=0 instead of the last axis, so the row term "
          "mixes different rows", sb_sum_over_first_axis),
    Entry(S, "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so (..., ) broadcasts against the last "
          "axis (..., n): the wrong row's term is subtracted, or a shape error",
          sb_no_keepdim),
    Entry(S, "wrong", "row_term_not_weighted",
          "subtracts grad_weights.sum(-1) instead of (grad_weights * weights).sum(-1): the "
          "row term forgets to weight by the probabilities", sb_row_term_unweighted),
    Entry(S, "wrong", "returns_float32",
          "computes with .float() and never casts back, so float16, bfloat16 and float64 "
          "inputs come back as float32", sb_returns_compute_dtype),
    Entry(S, "wrong", "subtraction_reversed",
          "computes weights * (row term - grad_weights), the sign of the whole gradient "
          "flipped", sb_subtraction_reversed),
    Entry(S, "wrong", "diagonal_jacobian_only",
          "uses only the diagonal of the softmax Jacobian, p (1 - p) g, dropping the "
          "off-diagonal -p_i p_j terms", sb_diagonal_only),
    Entry(S, "right", "explicit_jacobian_float64", None, sb_explicit_jacobian),
    Entry(S, "right", "einsum_inner_product", None, sb_einsum),
    Entry(A, "wrong", "grad_k_unscaled",
          "applies the 1/sqrt(d) scale to grad_q but forgets it in grad_k",
          ab_grad_k_unscaled),
    Entry(A, "wrong", "causal_top_left",
          "builds the causal mask with triu(ones, 1), aligned top-left, instead of lesson "
          "04's bottom-right alignment, so it is wrong when N_q != N_k", ab_top_left_causal),
    Entry(A, "wrong", "grad_k_without_transpose",
          "computes grad_k as grad_s @ q instead of grad_s^T @ q (a shape error when N_q != "
          "N_k, wrong values when they are equal)", ab_grad_k_no_transpose),
    Entry(A, "wrong", "softmax_nan_on_empty_rows",
          "uses torch.softmax on rows that may be all -inf, so a query with no visible key "
          "gets NaN weights and NaN gradients instead of zeros", ab_softmax_nan_rows),
    Entry(A, "wrong", "returns_float32",
          "computes in float32 with .float() and returns that instead of the inputs' dtype",
          ab_returns_float32),
    Entry(A, "wrong", "softmax_over_queries",
          "takes the forward softmax over dim=-2 (the queries) instead of the keys",
          ab_softmax_over_queries),
    Entry(A, "right", "einsum_logsumexp_float64", None, ab_einsum_float64),
    Entry(A, "right", "per_row_jacobian_loops", None, ab_row_jacobians),
    Entry(FL, "wrong", "multiply_add_as_one_flop",
          "counts each multiply-add as one FLOP instead of two, so the count is half",
          abf_mac_as_one),
    Entry(FL, "wrong", "recompute_flag_inverted",
          "adds the recomputation of the scores when recompute is False instead of when it "
          "is True", abf_recompute_inverted),
    Entry(FL, "wrong", "float_ratio",
          "multiplies the forward count by 2.5, which returns a float (not a plain int) when "
          "recompute=True", abf_ratio_float),
    Entry(FL, "wrong", "forgets_grad_p_product",
          "counts three backward products (grad_v, grad_q, grad_k) and forgets grad_p = "
          "grad_out v^T", abf_three_products),
    Entry(FL, "wrong", "conditional_expression_precedence",
          "writes a + b if recompute else 0: the conditional expression takes the whole sum, "
          "so recompute=False returns 0 instead of 8 N^2 d", abf_conditional_precedence),
    Entry(FL, "wrong", "xor_for_power",
          "writes seq_len ^ 2, which is bitwise XOR in Python, instead of seq_len ** 2",
          abf_xor),
    Entry(FL, "right", "product_shape_list", None, abf_product_list),
    Entry(FL, "right", "bool_arithmetic", None, abf_bool_arithmetic),
    Entry(FB, "wrong", "row_term_from_block",
          "computes the row term rowsum(grad_p * p) from the current key block only; it is "
          "a sum over the whole row (delta = rowsum(grad_out * out))", fab_block_local_delta),
    Entry(FB, "wrong", "no_guard_for_empty_rows",
          "recomputes p = exp(s - lse) without replacing lse = -inf, so a row with no "
          "visible key gives exp(-inf + inf) = NaN", fab_no_inf_guard),
    Entry(FB, "wrong", "causal_mask_hides_diagonal",
          "masks keys with key_pos >= query_pos instead of >, so each query loses the key "
          "at its own position", fab_mask_hides_diagonal),
    Entry(FB, "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_block in the loop instead of adding, so only the last "
          "key block's contribution is kept", fab_grad_q_overwritten),
    Entry(FB, "wrong", "row_term_by_second_pass",
          "computes the row term with a first pass over all key blocks (recomputing p and "
          "grad_p) instead of delta = rowsum(grad_out * out): correct values, but more "
          "matrix-product FLOPs than one recomputation", fab_delta_second_pass),
    Entry(FB, "wrong", "recompute_without_scale",
          "recomputes the scores as q k^T without the 1/sqrt(d) scale, so exp(s - lse) are "
          "not the forward's probabilities", fab_unscaled_recompute),
    Entry(FB, "right", "two_d_tiles_float64", None, fab_two_d_tiles),
    Entry(FB, "right", "einsum_key_blocks", None, fab_einsum_key_blocks),
]
