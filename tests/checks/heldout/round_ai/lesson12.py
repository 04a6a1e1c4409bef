"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------- softmax_backward
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_distributes_wrong(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(-1, keepdim=True)
    return (p * g - row).to(weights.dtype)


def sb_row_without_weights(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = g.sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return p * (g - (p * g).sum(-1, keepdim=True))


def sb_torch_diag(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    jac = torch.diag(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # diag(p) - p p^T
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_right_jacobian_einsum(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag_embed(p) - torch.einsum("...i,...j->...ij", p, p)
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_right_expanded(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    dot = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * dot).to(weights.dtype)


# ----------------------------------------------------------------- attention_backward
def ab_top_left_causal(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = d ** -0.5
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) * scale
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~keep, -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    p = e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K * scale
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~keep, -math.inf)
    top = s.max(dim=-1, keepdim=True).values
    top = top.masked_fill(torch.isneginf(top), 0.0)
    ex = (s - top).exp()
    tot = ex.sum(-1, keepdim=True)
    p = ex / tot.masked_fill(tot == 0, 1.0)
    dv = torch.matmul(p.transpose(-2, -1), G)
    dp = torch.matmul(G, V.transpose(-2, -1))
    ds = p * (dp - (dp * p).sum(-2, keepdim=True))
    dq = torch.matmul(ds, K) / math.sqrt(d)
    dk = torch.matmul(ds.transpose(-2, -1), Q) / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~keep, -math.inf)
    p = torch.softmax(s, dim=-1)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_skips_softmax_jacobian(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~keep, -math.inf)
    row_max = s.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
    w = torch.exp(s - row_max)
    den = w.sum(-1, keepdim=True)
    p = torch.where(den > 0, w / den, torch.zeros_like(w))
    dv = p.transpose(-2, -1) @ G
    ds = p * (G @ V.transpose(-2, -1))  # through the softmax
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-2, -1) @ Q / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_returns_compute_dtype(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~keep, -math.inf)
    mx = s.amax(dim=-1, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    e = torch.exp(s - mx)
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ K / math.sqrt(d), ds.transpose(-2, -1) @ Q / math.sqrt(d), dv


def ab_right_einsum64(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = torch.where(j <= i + (n_k - n_q), s, torch.tensor(-math.inf, dtype=s.dtype))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.where(torch.isfinite(lse), torch.exp(s - lse), torch.zeros_like(s))
    gv = torch.einsum("...ij,...ie->...je", p, G)
    gp = torch.einsum("...ie,...je->...ij", G, V)
    gs = p * (gp - torch.einsum("...ij,...ij->...i", gp, p)[..., None])
    gq = torch.einsum("...ij,...jd->...id", gs, K) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", gs, Q) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_right_delta_from_out(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    Ks = K / math.sqrt(d)  # fold the scale into the keys
    s = Q @ Ks.transpose(-2, -1)
    if causal:
        hidden = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
        s = s.masked_fill(hidden, -math.inf)
    top = s.max(dim=-1, keepdim=True).values.nan_to_num(neginf=0.0)
    e = (s - top).exp()
    tot = e.sum(-1, keepdim=True)
    p = e / tot.clamp_min(1e-300)
    out = p @ V
    delta = (G * out).sum(-1, keepdim=True)  # equals rowsum(grad_p * p)
    gs = p * (G @ V.transpose(-2, -1) - delta)
    return ((gs @ Ks).to(q.dtype), (gs.transpose(-2, -1) @ Q / math.sqrt(d)).to(k.dtype),
            (p.transpose(-2, -1) @ G).to(v.dtype))


# ----------------------------------------------------------------- attention_backward_flops
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len * seq_len * head_dim
    if recompute:
        backward += 4 * seq_len * seq_len * head_dim  # run the forward again
    return backward


def abf_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_float_multiplier(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def abf_n_d_squared(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim * head_dim
    count = 5 if recompute else 4
    return count * per_product


def abf_three_products(seq_len, head_dim, recompute=True):
    per = 2 * seq_len * seq_len * head_dim
    total = 3 * per  # grad_v, grad_q, grad_k
    if recompute:
        total += per
    return total


def abf_right_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d), (n, d, n), (n, n, d), (n, n, d)]  # (m, k, cols) of each product
    if recompute:
        shapes.append((n, d, n))
    return sum(2 * m * kk * c for m, kk, c in shapes)


def abf_right_bool_arith(seq_len, head_dim, recompute=True):
    return 2 * seq_len * seq_len * head_dim * (4 + int(bool(recompute)))


# ----------------------------------------------------------------- flash_attention_backward
def fab_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
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
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_nan_empty_rows(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
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
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_block_local_key_index(q, k, v, out, lse, grad_out, block_size=64, causal=False):
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
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(b - a)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
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
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
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
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp2(s - L)  # as FlashAttention's kernels do
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_returns_float32(q, k, v, out, lse, grad_out, block_size=64, causal=False):
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
    return dq / math.sqrt(d), dk, dv


def fab_right_two_d_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.float64
    sc = 1.0 / math.sqrt(d)
    Q, K, V, O, G = (t.to(f) for t in (q, k, v, out, grad_out))
    lse64 = lse.to(f)
    dQ = torch.zeros(B, H, n_q, d, dtype=f)
    dK = torch.zeros(B, H, n_k, d, dtype=f)
    dV = torch.zeros(B, H, n_k, d, dtype=f)
    D = (G * O).sum(-1)  # (B, H, N_q)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qi, gi = Q[:, :, i0:i1], G[:, :, i0:i1]
        li, di = lse64[:, :, i0:i1, None], D[:, :, i0:i1, None]
        dead = torch.isneginf(li)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            kj, vj = K[:, :, j0:j1], V[:, :, j0:j1]
            s = (qi @ kj.transpose(-1, -2)) * sc
            ok = ~dead
            if causal:
                vis = (torch.arange(j0, j1)[None, :]
                       <= torch.arange(i0, i1)[:, None] + (n_k - n_q))
                ok = ok & vis
            p = torch.where(ok, torch.exp(s - torch.where(dead, 0.0, li)), 0.0)
            dV[:, :, j0:j1] += p.transpose(-1, -2) @ gi
            ds = p * (gi @ vj.transpose(-1, -2) - di)
            dQ[:, :, i0:i1] += (ds @ kj) * sc
            dK[:, :, j0:j1] += (ds.transpose(-1, -2) @ qi) * sc
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_right_einsum_keys(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.float64
    k_scaled = k.to(ct) / math.sqrt(d)  # scale on the keys instead of the queries
    Q, G = q.to(ct), grad_out.to(ct)
    delta = torch.einsum("bhid,bhid->bhi", G, out.to(ct))
    row_lse = lse.to(ct)
    finite = torch.isfinite(row_lse)
    row_lse = torch.where(finite, row_lse, torch.zeros_like(row_lse))
    grads_q = torch.zeros(Q.shape, dtype=ct)
    grads_k, grads_v = [], []
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb = k_scaled[:, :, lo:hi]
        vb = v[:, :, lo:hi].to(ct)
        s = torch.einsum("bhid,bhjd->bhij", Q, kb)
        keep = finite[..., None].expand(s.shape)
        if causal:
            seen = (torch.arange(lo, hi)[None, :] - torch.arange(n_q)[:, None]) <= n_k - n_q
            keep = keep & seen
        p = torch.where(keep, torch.exp(s - row_lse[..., None]), torch.zeros_like(s))
        grads_v.append(torch.einsum("bhij,bhie->bhje", p, G))
        dp = torch.einsum("bhie,bhje->bhij", G, vb)
        ds = p * (dp - delta[..., None])
        grads_q += torch.einsum("bhij,bhjd->bhid", ds, kb)
        grads_k.append(torch.einsum("bhij,bhid->bhjd", ds, Q) / math.sqrt(d))
    return (grads_q.to(q.dtype), torch.cat(grads_k, dim=2).to(k.dtype),
            torch.cat(grads_v, dim=2).to(v.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so the (...,) sums broadcast along the last "
          "axis instead of down their rows (a shape error, or mixed-up rows when they are "
          "square)", sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_first_axis",
          "sums grad_weights * weights over dim=0 instead of the last axis, so the row term "
          "mixes different rows", sb_sum_first_axis),
    Entry("softmax_backward", "wrong", "weights_not_distributed",
          "writes weights * grad_weights - row instead of weights * (grad_weights - row): the "
          "row term is not multiplied by the weights", sb_distributes_wrong),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "takes the row term as grad_weights.sum(-1) and forgets to weight it by the softmax "
          "output: rowsum(grad_weights * weights) belongs there", sb_row_without_weights),
    Entry("softmax_backward", "wrong", "returns_float32",
          "returns the float32 compute result without casting back to weights' dtype "
          "(float16 / bfloat16 inputs)", sb_returns_float32),
    Entry("softmax_backward", "wrong", "torch_diag_on_batches",
          "builds diag(p) with torch.diag, which only makes a diagonal matrix from a 1-D "
          "vector: on 2-D input it extracts the diagonal instead (torch.diag_embed is meant), "
          "so batched rows raise or come out wrong", sb_torch_diag),
    Entry("softmax_backward", "right", "explicit_jacobian_einsum", None,
          sb_right_jacobian_einsum),
    Entry("softmax_backward", "right", "expanded_float64", None, sb_right_expanded),

    Entry("attention_backward", "wrong", "causal_top_left",
          "masks with tril() aligned top-left instead of bottom-right (offset N_k - N_q), so "
          "the causal gradients are wrong whenever N_q != N_k", ab_top_left_causal),
    Entry("attention_backward", "wrong", "grad_k_missing_scale",
          "forgets the 1/sqrt(d) of the scores in grad_k = grad_s^T q (it is applied to grad_q "
          "only)", ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "sums grad_p * p over dim=-2 (the queries) instead of dim=-1 (the keys) in the "
          "softmax backward", ab_row_term_wrong_axis),
    Entry("attention_backward", "wrong", "softmax_nan_rows",
          "uses torch.softmax on the masked scores, which gives NaN for a query with no "
          "visible key, so those rows poison the gradients instead of contributing nothing",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "skips_row_term",
          "takes grad_s = p * grad_p, leaving out the row term -rowsum(grad_p * p) of the "
          "softmax Jacobian", ab_skips_softmax_jacobian),
    Entry("attention_backward", "wrong", "returns_compute_dtype",
          "returns the gradients in the float32 compute dtype instead of casting back to the "
          "inputs' dtype", ab_returns_compute_dtype),
    Entry("attention_backward", "right", "einsum_logsumexp_float64", None, ab_right_einsum64),
    Entry("attention_backward", "right", "delta_from_output", None, ab_right_delta_from_out),

    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "adds the whole forward (4 N^2 d) for the recomputation, but only the scores q k^T "
          "(2 N^2 d) are recomputed", abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "multiply_add_one_flop",
          "counts a multiply-add as one FLOP (N^2 d per product instead of 2 N^2 d)",
          abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "multiplies the forward's FLOPs by 2.5 or 2, which returns a float instead of a "
          "plain int", abf_float_multiplier),
    Entry("attention_backward_flops", "wrong", "conditional_precedence",
          "writes a + b if recompute else 0, which Python reads as (a + b) if recompute else "
          "0: without recompute it returns 0 instead of 8 N^2 d",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "n_d_squared",
          "sizes each product as 2 N d^2 instead of 2 N^2 d (the N x N x d shape misread)",
          abf_n_d_squared),
    Entry("attention_backward_flops", "wrong", "forgets_grad_p_product",
          "counts three backward products (grad_v, grad_q, grad_k) and forgets "
          "grad_p = grad_out v^T", abf_three_products),
    Entry("attention_backward_flops", "right", "sum_over_product_shapes", None,
          abf_right_product_list),
    Entry("attention_backward_flops", "right", "bool_as_int", None, abf_right_bool_arith),

    Entry("flash_attention_backward", "wrong", "row_term_per_block",
          "computes the row term as rowsum(grad_p * p) of the current key block only instead "
          "of delta = rowsum(grad_out * out) over all keys, so it is wrong as soon as there is "
          "more than one block", fab_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no_guard_empty_rows",
          "uses lse as it is, so for a row with no visible key exp(-inf - (-inf)) gives NaN "
          "instead of a zero probability", fab_nan_empty_rows),
    Entry("flash_attention_backward", "wrong", "causal_key_index_block_local",
          "numbers the keys of each block from 0 (arange(b - a)) instead of from the block's "
          "start, so the causal mask is wrong in every block after the first",
          fab_block_local_key_index),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in each block instead of accumulating with +=, so "
          "only the last key block's contribution survives", fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "exp2_with_natural_lse",
          "recomputes the probabilities with exp2(s - lse) although lse and s are in natural "
          "log units (exp belongs there)", fab_exp2),
    Entry("flash_attention_backward", "wrong", "returns_float32",
          "returns the gradients in the float32 compute dtype instead of the inputs' dtype",
          fab_returns_float32),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fab_right_two_d_tiles),
    Entry("flash_attention_backward", "right", "einsum_scaled_keys", None,
          fab_right_einsum_keys),
]
