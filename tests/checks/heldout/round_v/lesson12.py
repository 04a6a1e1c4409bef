"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ============================================================== softmax_backward
def sb_row_without_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_row_over_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_row_without_weights(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    return p * (g - (p * g).sum(-1, keepdim=True))


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(-1, keepdim=True)
    return (p * g - row).to(weights.dtype)


def sb_renormalises(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    p = p / p.sum(-1, keepdim=True)  # make sure the rows sum to one
    g = grad_weights.to(ct)
    return (p * (g - (g * p).sum(-1, keepdim=True))).to(weights.dtype)


def sb_einsum_float64(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    dot = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * dot).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    n = weights.shape[-1]
    P = weights.reshape(-1, n).double()
    G = grad_weights.reshape(-1, n).double()
    out = torch.empty_like(P)
    for r in range(P.shape[0]):
        c = torch.dot(P[r], G[r])
        out[r] = P[r] * (G[r] - c)
    return out.reshape(weights.shape).to(weights.dtype)


# ============================================================== attention_backward
def ab_grad_k_no_transpose(q, k, v, grad_out, causal=False):
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
    dk = ds @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_no_chain_scale(q, k, v, grad_out, causal=False):
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
    dq = ds @ K
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_top_left_causal(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ K / math.sqrt(d)).to(q.dtype), (ds.transpose(-2, -1) @ Q / math.sqrt(d)).to(k.dtype),
            dv.to(v.dtype))


def ab_torch_softmax_nan(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.softmax(s, dim=-1)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_dot_T_on_batches(q, k, v, grad_out, causal=False):
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
    dv = p.mT @ G
    dp = G @ V.mT
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.T @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_returns_float64(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
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
    return ds @ K / math.sqrt(d), ds.transpose(-2, -1) @ Q / math.sqrt(d), dv


def ab_einsum_delta_from_out(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, dO = (t.to(torch.float64) for t in (q, k, v, grad_out))
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        keep = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = s.masked_fill(~keep, -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = torch.einsum("...qk,...kv->...qv", p, V)
    delta = (dO * out).sum(-1, keepdim=True)  # rowsum(dP * P) = rowsum(dO * O)
    dP = torch.einsum("...qv,...kv->...qk", dO, V)
    dS = p * (dP - delta)
    dQ = torch.einsum("...qk,...kd->...qd", dS, K) / math.sqrt(d)
    dK = torch.einsum("...qk,...qd->...kd", dS, Q) / math.sqrt(d)
    dV = torch.einsum("...qk,...qv->...kv", p, dO)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_query_row_loop(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2], q.shape[-1]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Q = q.reshape(-1, n_q, d).double()
    K = k.reshape(-1, n_k, d).double()
    V = v.reshape(-1, n_k, d_v).double()
    G = grad_out.reshape(-1, n_q, d_v).double()
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    c = 1.0 / math.sqrt(d)
    for b in range(Q.shape[0]):
        for i in range(n_q):
            last = i + n_k - n_q if causal else n_k - 1  # last visible key
            if last < 0:
                continue
            kk, vv = K[b, : last + 1], V[b, : last + 1]
            s = kk @ Q[b, i] * c
            w = torch.exp(s - s.max())
            w = w / w.sum()
            dV[b, : last + 1] += torch.outer(w, G[b, i])
            gp = vv @ G[b, i]
            gs = w * (gp - torch.dot(w, gp))
            dQ[b, i] = gs @ kk * c
            dK[b, : last + 1] += torch.outer(gs, Q[b, i]) * c
    return (dQ.reshape(q.shape).to(q.dtype), dK.reshape(k.shape).to(k.dtype),
            dV.reshape(v.shape).to(v.dtype))


# ============================================================== attention_backward_flops
def flops_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 4 * 2 * seq_len * seq_len * head_dim
    if recompute:
        backward += 4 * seq_len * seq_len * head_dim  # q k^T and p v again
    return backward


def flops_one_per_multiply_add(seq_len, head_dim, recompute=True):
    per_product = seq_len * seq_len * head_dim
    return (5 if recompute else 4) * per_product


def flops_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    factor = 2.5 if recompute else 2
    return factor * forward


def flops_condition_inverted(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    total = 8 * n * n * d
    if not recompute:
        total += 2 * n * n * d
    return total


def flops_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def flops_d_squared(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * 2 * seq_len * head_dim * head_dim


def flops_list_of_products(seq_len, head_dim, recompute=True):
    n, d = int(seq_len), int(head_dim)
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * p for m, kk, p in shapes)


def flops_from_forward(seq_len, head_dim, recompute=True):
    fwd = 2 * (2 * seq_len * seq_len * head_dim)
    extra = fwd // 2 if recompute else 0
    return 2 * fwd + extra


# ============================================================== flash_attention_backward
def fab_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_nan_for_empty_rows(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
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


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_scores_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q = q.to(ct)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(Q)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = Q @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ Q
    scale = 1.0 / math.sqrt(d)
    return (dq * scale).to(q.dtype), (dk * scale).to(k.dtype), dv.to(v.dtype)


def fab_delta_wrong_axis(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-2, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
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


def fab_top_left_causal(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(nq)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_two_level_tiles_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    dO, O = grad_out.double(), out.double()
    lse64 = lse.double()
    lse64 = torch.where(torch.isneginf(lse64), torch.full_like(lse64, math.inf), lse64)
    D = (dO * O).sum(dim=-1)  # (B, H, N_q)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qi, doi = Q[..., i0:i1, :], dO[..., i0:i1, :]
        li, Di = lse64[..., i0:i1, None], D[..., i0:i1, None]
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            kj, vj = K[..., j0:j1, :], V[..., j0:j1, :]
            s = torch.matmul(qi, kj.transpose(-1, -2)) * sc
            if causal:
                vis = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None] + (n_k - n_q)
                s = torch.where(vis, s, torch.full_like(s, -math.inf))
            p = torch.exp(s - li)
            dV[..., j0:j1, :] += torch.matmul(p.transpose(-1, -2), doi)
            ds = p * (torch.matmul(doi, vj.transpose(-1, -2)) - Di)
            dQ[..., i0:i1, :] += torch.matmul(ds, kj) * sc
            dK[..., j0:j1, :] += torch.matmul(ds.transpose(-1, -2), qi) * sc
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    row_term = torch.einsum("bhqd,bhqd->bhq", g_, out.to(f)).unsqueeze(-1)
    dead = torch.isneginf(lse).unsqueeze(-1)
    lse_ = torch.where(dead, torch.zeros_like(lse, dtype=f).unsqueeze(-1), lse.to(f).unsqueeze(-1))
    parts_k, parts_v = [], []
    dq = torch.zeros(B, H, n_q, d, dtype=f)
    for j in range(0, n_k, block_size):
        jj = min(j + block_size, n_k)
        kb, vb = k_[:, :, j:jj], v_[:, :, j:jj]
        s = torch.einsum("bhqd,bhkd->bhqk", q_, kb) / math.sqrt(d)
        p = torch.exp(s - lse_)
        p = p.masked_fill(dead, 0.0)
        if causal:
            hidden = torch.arange(j, jj).view(1, -1) > torch.arange(n_q).view(-1, 1) + (n_k - n_q)
            p = p.masked_fill(hidden, 0.0)
        parts_v.append(torch.einsum("bhqk,bhqd->bhkd", p, g_))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", g_, vb) - row_term)
        dq = dq + torch.einsum("bhqk,bhkd->bhqd", ds, kb)
        parts_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, q_))
    dk = torch.cat(parts_k, dim=2) / math.sqrt(d)
    dv = torch.cat(parts_v, dim=2)
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so the (..., ) row sums broadcast against "
          "the last axis instead of their own rows (wrong values on square inputs, a shape "
          "error otherwise)",
          sb_row_without_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_first_axis",
          "sums grad_weights * weights over dim=0 instead of the last axis",
          sb_row_over_first_axis),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "the row term is sum(grad_weights) instead of sum(grad_weights * weights): the "
          "p p^T part of the Jacobian loses its p",
          sb_row_without_weights),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes in float32 but does not cast back, so float16/bfloat16 weights get a "
          "float32 gradient",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "writes p * g - row instead of p * (g - row): the row term is not multiplied by p",
          sb_precedence),
    Entry("softmax_backward", "wrong", "renormalises_weights",
          "re-normalises the weights by their row sum first, which divides by zero on a fully "
          "masked row and gives NaN instead of zeros",
          sb_renormalises),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "row_loop_dot", None, sb_row_loop),

    Entry("attention_backward", "wrong", "grad_k_without_transpose",
          "computes grad_k as grad_s @ q instead of grad_s^T @ q (a shape error when "
          "N_q != N_k, wrong values when they are equal)",
          ab_grad_k_no_transpose),
    Entry("attention_backward", "wrong", "no_scale_in_chain_rule",
          "forgets the 1/sqrt(d) of s = q k^T / sqrt(d) when going back to grad_q and grad_k",
          ab_no_chain_scale),
    Entry("attention_backward", "wrong", "causal_top_left",
          "the causal mask is tril() with no offset (top-left) instead of tril(N_k - N_q) "
          "(bottom-right), wrong whenever N_q != N_k",
          ab_top_left_causal),
    Entry("attention_backward", "wrong", "nan_on_rows_without_keys",
          "uses torch.softmax on rows that may be all -inf: a causal query with no visible key "
          "gets NaN weights, and NaN gradients instead of zeros",
          ab_torch_softmax_nan),
    Entry("attention_backward", "wrong", "dot_T_on_batched_tensor",
          "uses .T for grad_k's transpose, which reverses every axis of a batched tensor "
          "instead of the last two (right only for 2-D inputs; raises or mixes axes otherwise)",
          ab_dot_T_on_batches),
    Entry("attention_backward", "wrong", "returns_float64",
          "computes in float64 and returns the float64 gradients without casting them back to "
          "the inputs' dtype",
          ab_returns_float64),
    Entry("attention_backward", "right", "einsum_delta_from_out", None, ab_einsum_delta_from_out),
    Entry("attention_backward", "right", "query_row_loop", None, ab_query_row_loop),

    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "adds 4 N^2 d for recompute (both forward products) instead of 2 N^2 d: only the "
          "scores q k^T are recomputed",
          flops_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "multiply_add_is_one_flop",
          "counts one FLOP per multiply-add instead of 2, halving every product",
          flops_one_per_multiply_add),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "multiplies the forward count by 2.5 (or 2), which returns a float instead of a "
          "plain int",
          flops_float_ratio),
    Entry("attention_backward_flops", "wrong", "recompute_condition_inverted",
          "adds the recomputation when recompute is False (`if not recompute`) instead of "
          "when it is True",
          flops_condition_inverted),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "writes 8nnd + 2nnd if recompute else 0, which Python reads as "
          "(8nnd + 2nnd) if recompute else 0: without recompute it returns 0",
          flops_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "head_dim_squared",
          "each product is counted as 2 N d^2 instead of 2 N^2 d (seq_len and head_dim mixed up)",
          flops_d_squared),
    Entry("attention_backward_flops", "right", "list_of_product_shapes", None,
          flops_list_of_products),
    Entry("attention_backward_flops", "right", "from_forward_count", None, flops_from_forward),

    Entry("flash_attention_backward", "wrong", "block_local_row_term",
          "takes the row term as rowsum(grad_p * p) of the current key block only instead of "
          "delta = rowsum(grad_out * out) over all keys",
          fab_block_local_delta),
    Entry("flash_attention_backward", "wrong", "nan_for_rows_without_keys",
          "does not guard lse = -inf: for a row with no visible key exp(-inf - (-inf)) is NaN, "
          "so the gradients get NaN instead of zeros",
          fab_nan_for_empty_rows),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "writes grad_q = grad_s @ k_blk in each block instead of accumulating with +=, so only "
          "the last key block's contribution is kept",
          fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "recomputed_scores_unscaled",
          "recomputes the scores as q k^T without the 1/sqrt(d) before exp(s - lse), but lse is "
          "the log-sum-exp of the scaled scores",
          fab_scores_unscaled),
    Entry("flash_attention_backward", "wrong", "delta_over_queries",
          "sums grad_out * out over dim=-2 (the queries) instead of dim=-1 for delta (a "
          "broadcasting error unless the key block is as wide as d, wrong values when it is)",
          fab_delta_wrong_axis),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "the causal test compares key j with query i directly (j > i) instead of "
          "j > i + N_k - N_q, wrong whenever N_q != N_k",
          fab_top_left_causal),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fab_two_level_tiles_float64),
    Entry("flash_attention_backward", "right", "einsum_key_blocks_cat", None,
          fab_einsum_key_blocks),
]
