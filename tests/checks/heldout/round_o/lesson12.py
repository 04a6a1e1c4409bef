"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward. No autograd anywhere."""

import math

import torch

from entry import Entry

EX_S = "softmax_backward"
EX_A = "attention_backward"
EX_F = "attention_backward_flops"
EX_B = "flash_attention_backward"


# ============================================================ softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_wrong_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_missing_outer_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (g - (p * g).sum(-1, keepdim=True)).to(weights.dtype)


def sb_mean_not_sum(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).mean(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = torch.sum(g * p, dim=-1, keepdim=True)
    return (p * (row - g)).to(weights.dtype)


def sb_float32_result(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return p * (g - (g * p).sum(-1, keepdim=True))


# ============================================================ softmax_backward: right
def sb_explicit_jacobian(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n), symmetric
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_vecdot_addcmul(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = torch.linalg.vecdot(p, g, dim=-1).unsqueeze(-1)
    return torch.addcmul(p * g, p, dot, value=-1.0).to(weights.dtype)


# ============================================================ attention_backward: helpers
def _rows_softmax(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


def _visible(n_q, n_k):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


# ============================================================ attention_backward: wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(d)
    s = Q @ K.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~_visible(n_q, n_k), -math.inf)
    p = _rows_softmax(s)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K * sc
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_grad_v_from_grad_s(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = d ** -0.5
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(~_visible(n_q, n_k), float("-inf"))
    p = _rows_softmax(s)
    grad_p = gf @ vf.transpose(-1, -2)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_v = grad_s.transpose(-1, -2) @ gf
    grad_q = grad_s @ kf * scale
    grad_k = grad_s.transpose(-1, -2) @ qf * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), -math.inf)
    p = _rows_softmax(s)
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_ * scale).to(q.dtype), (gs.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            (p.transpose(-2, -1) @ g_).to(v.dtype))


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(n_q, n_k), -math.inf)
    p = torch.softmax(s, dim=-1)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_row_term_over_queries(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(n_q, n_k), -math.inf)
    p = _rows_softmax(s)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-2, keepdim=True))
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_mask_after_softmax(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    p = torch.softmax(q_ @ k_.transpose(-2, -1) * scale, dim=-1)
    if causal:
        p = p * _visible(n_q, n_k)  # zero the future keys
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ k_ * scale).to(q.dtype),
            (grad_s.transpose(-2, -1) @ q_ * scale).to(k.dtype), grad_v.to(v.dtype))


# ============================================================ attention_backward: right
def ab_delta_einsum_float64(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        s = torch.where(_visible(n_q, n_k), s, torch.tensor(-math.inf, dtype=torch.float64))
    p = _rows_softmax(s)
    out = torch.einsum("...ij,...je->...ie", p, V)
    delta = (G * out).sum(-1, keepdim=True)  # = rowsum(grad_p * p)
    dp = torch.einsum("...ie,...je->...ij", G, V)
    ds = p * (dp - delta)
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    dv = torch.einsum("...ij,...ie->...je", p, G)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_loop_jacobian(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Qs = q.double().reshape(-1, n_q, d)
    Ks = k.double().reshape(-1, n_k, d)
    Vs = v.double().reshape(-1, n_k, d_v)
    Gs = grad_out.double().reshape(-1, n_q, d_v)
    dQ, dK, dV = torch.zeros_like(Qs), torch.zeros_like(Ks), torch.zeros_like(Vs)
    for m in range(Qs.shape[0]):
        for i in range(n_q):
            last = min(n_k - 1, i + n_k - n_q) if causal else n_k - 1
            if last < 0:
                continue  # this query sees no key: no gradient
            keys = slice(0, last + 1)
            s = Ks[m, keys] @ Qs[m, i] / math.sqrt(d)
            p = torch.softmax(s, dim=0)
            dV[m, keys] += torch.outer(p, Gs[m, i])
            dp = Vs[m, keys] @ Gs[m, i]
            jac = torch.diag(p) - torch.outer(p, p)
            ds = jac @ dp
            dQ[m, i] = ds @ Ks[m, keys] / math.sqrt(d)
            dK[m, keys] += torch.outer(ds, Qs[m, i]) / math.sqrt(d)
    return (dQ.reshape(q.shape).to(q.dtype), dK.reshape(k.shape).to(k.dtype),
            dV.reshape(v.shape).to(v.dtype))


# ============================================================ attention_backward_flops: wrong
def flops_mac_is_one(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 4 * n2d + (n2d if recompute else 0)


def flops_recompute_whole_forward(seq_len, head_dim, recompute=True):
    product = 2 * seq_len ** 2 * head_dim
    total = 4 * product
    if recompute:
        total += 2 * product  # the forward again: q k^T and p v
    return total


def flops_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def flops_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def flops_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    count = 3  # grad_v, grad_q, grad_k
    if recompute:
        count += 1
    return count * per_product


def flops_causal_half(seq_len, head_dim, recompute=True):
    pairs = seq_len * (seq_len + 1) // 2  # each query only sees the keys up to itself
    products = 5 if recompute else 4
    return products * 2 * pairs * head_dim


# ============================================================ attention_backward_flops: right
def flops_from_forward(seq_len, head_dim, recompute=True):
    forward = 2 * (2 * seq_len * seq_len * head_dim)
    backward = 2 * forward
    if recompute:
        backward += forward // 2
    return backward


def flops_sum_products(seq_len, head_dim, recompute=True):
    names = ["grad_v", "grad_p", "grad_q", "grad_k"] + (["scores"] if recompute else [])
    return sum(2 * seq_len * head_dim * seq_len for _ in names)


# ============================================================ flash_attention_backward: wrong
def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
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
        z = min(a + block_size, n_k)
        kb, vb = k[..., a:z, :].to(ct), v[..., a:z, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., a:z, :] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))  # row term of this block
        dq += ds @ kb
        dk[..., a:z, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) * (1.0 / math.sqrt(d))
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
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > query_pos,
                                        -math.inf)
        p = torch.exp(scores - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g_
        grad_s = p * (g_ @ v_blk.transpose(-2, -1) - delta)
        grad_q += grad_s @ k_blk
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_scaled
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_no_empty_row_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(c) * sc
    go = grad_out.to(c)
    Di = (go * out.to(c)).sum(-1, keepdim=True)
    L = lse.to(c)[..., None]
    last_key = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=c)
    dv = torch.empty(v.shape, dtype=c)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(c), v[..., lo:hi, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > last_key, -math.inf)
        p = torch.exp(s - L)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - Di)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq * sc).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) / math.sqrt(d)
    go = grad_out.to(c)
    delta = (go * out.to(c)).sum(-1, keepdim=True)
    L = lse.to(c).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    rows = torch.arange(n_q)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=c)
    dv = torch.empty(v.shape, dtype=c)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(c), v[..., lo:hi, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_exp2_natural_lse(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) / math.sqrt(d)
    go = grad_out.to(c)
    delta = (go * out.to(c)).sum(-1, keepdim=True)
    L = lse.to(c).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=c)
    dv = torch.empty(v.shape, dtype=c)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(c), v[..., lo:hi, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp2(s - L)  # as in the FlashAttention kernels
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_two_pass_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) / math.sqrt(d)
    go = grad_out.to(c)
    L = lse.to(c).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def probs(lo, hi):
        s = qs @ k[..., lo:hi, :].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        return torch.exp(s - L)

    # first pass over the keys: the row term rowsum(grad_p * p)
    delta = torch.zeros(q.shape[:-1] + (1,), dtype=c)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        dp = go @ v[..., lo:hi, :].to(c).transpose(-2, -1)
        delta += (dp * probs(lo, hi)).sum(-1, keepdim=True)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=c)
    dv = torch.empty(v.shape, dtype=c)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(c), v[..., lo:hi, :].to(c)
        p = probs(lo, hi)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_tiled_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over key blocks (outer) and query blocks (inner), all in float64."""
    B, H, n_q, d = q.shape
    n_k = k.shape[-2]
    Q, K, V, G = (t.to(torch.float64) for t in (q, k, v, grad_out))
    Q = Q / math.sqrt(d)
    D = (G * out.to(torch.float64)).sum(-1)  # (B, H, N_q)
    L = lse.to(torch.float64)
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    shift = n_k - n_q
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        kb, vb = K[:, :, j0:j1], V[:, :, j0:j1]
        for i0 in range(0, n_q, block_size):
            i1 = min(i0 + block_size, n_q)
            s = torch.einsum("bhid,bhjd->bhij", Q[:, :, i0:i1], kb)
            ok = torch.isfinite(L[:, :, i0:i1])[..., None]
            if causal:
                ok = ok & (torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None] + shift)
            p = torch.where(ok, torch.exp(s - L[:, :, i0:i1, None]), torch.zeros_like(s))
            gi = G[:, :, i0:i1]
            dV[:, :, j0:j1] += torch.einsum("bhij,bhie->bhje", p, gi)
            dp = torch.einsum("bhie,bhje->bhij", gi, vb)
            ds = p * (dp - D[:, :, i0:i1, None])
            dQ[:, :, i0:i1] += torch.einsum("bhij,bhjd->bhid", ds, kb)
            dK[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", ds, Q[:, :, i0:i1])
    dQ = dQ / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_exp2_log2_lse(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Base-2 exponentials with both the scores and the lse converted by log2(e)."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    log2e = math.log2(math.e)
    q2 = q.to(ct) * (log2e / math.sqrt(d))  # scores in base-2 units
    go = grad_out.to(ct)
    row_term = torch.linalg.vecdot(go, out.to(ct)).unsqueeze(-1)
    lse2 = (lse.to(ct) * log2e).unsqueeze(-1)
    empty = torch.isneginf(lse).unsqueeze(-1)
    last = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros(q.shape, dtype=ct)
    parts_k, parts_v = [], []
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        t = q2 @ kb.transpose(-2, -1)
        if causal:
            t = t.masked_fill(torch.arange(lo, hi)[None, :] > last, -math.inf)
        p = torch.exp2(t - lse2).masked_fill(empty, 0.0)
        parts_v.append(p.transpose(-2, -1) @ go)
        ds = p * (go @ vb.transpose(-2, -1) - row_term)
        gq = gq + ds @ kb
        parts_k.append(ds.transpose(-2, -1) @ q2)
    gk = torch.cat(parts_k, dim=-2) / log2e  # q2 carried log2(e) / sqrt(d)
    gv = torch.cat(parts_v, dim=-2)
    gq = gq / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


ENTRIES = [
    Entry(EX_S, "wrong", "row_term_no_keepdim", "The row term is summed without "
          "keepdim=True, so it lines up with the last axis instead of with its row: silently "
          "wrong on square inputs, a shape error (RuntimeError) otherwise.", sb_no_keepdim),
    Entry(EX_S, "wrong", "row_term_axis_0", "The row term sum(grad_weights * weights) is "
          "taken over axis 0 (across rows) instead of over the last axis.", sb_wrong_axis),
    Entry(EX_S, "wrong", "missing_outer_weights", "It returns grad_weights - row term without "
          "the leading multiplication by weights (the diag(p) part of the Jacobian), so even a "
          "fully masked row gets a gradient.", sb_missing_outer_p),
    Entry(EX_S, "wrong", "row_term_mean", "The row term uses .mean over the last axis instead "
          "of .sum, dividing it by n.", sb_mean_not_sum),
    Entry(EX_S, "wrong", "sign_flipped", "The bracket is reversed: weights * (row term - "
          "grad_weights), the negative of the gradient.", sb_sign_flipped),
    Entry(EX_S, "wrong", "returns_float32", "The result is left in the float32 working dtype: "
          "float16/bfloat16 weights do not get their own dtype back.", sb_float32_result),
    Entry(EX_S, "right", "explicit_jacobian_float64", None, sb_explicit_jacobian),
    Entry(EX_S, "right", "vecdot_addcmul", None, sb_vecdot_addcmul),
    Entry(EX_A, "wrong", "grad_k_unscaled", "grad_k = grad_s^T q is not multiplied by "
          "1/sqrt(d), although the scores carry that factor (grad_q has it).",
          ab_grad_k_unscaled),
    Entry(EX_A, "wrong", "grad_v_from_grad_s", "grad_v is computed as grad_s^T grad_out, "
          "reusing the score gradient, instead of p^T grad_out.", ab_grad_v_from_grad_s),
    Entry(EX_A, "wrong", "causal_top_left", "The causal mask is tril() aligned top-left "
          "instead of bottom-right (j <= i + N_k - N_q), wrong whenever N_q != N_k.",
          ab_causal_top_left),
    Entry(EX_A, "wrong", "softmax_nan_empty_rows", "torch.softmax on a row whose keys are "
          "all masked gives NaN: a query with no visible key (causal, N_q > N_k) produces NaN "
          "gradients instead of none.", ab_softmax_nan_rows),
    Entry(EX_A, "wrong", "row_term_over_queries", "The softmax-backward row term "
          "sum(grad_p * p) is summed over dim=-2 (the queries) instead of over the keys.",
          ab_row_term_over_queries),
    Entry(EX_A, "wrong", "mask_after_softmax", "The causal mask zeroes p after an unmasked "
          "softmax instead of setting the scores to -inf before it, so the kept weights are "
          "not renormalised.", ab_mask_after_softmax),
    Entry(EX_A, "right", "delta_einsum_float64", None, ab_delta_einsum_float64),
    Entry(EX_A, "right", "per_query_jacobian_loop", None, ab_loop_jacobian),
    Entry(EX_F, "wrong", "multiply_add_one_flop", "A multiply-add is counted as 1 FLOP "
          "instead of 2, halving every product.", flops_mac_is_one),
    Entry(EX_F, "wrong", "recompute_whole_forward", "With recompute it adds the whole forward "
          "(q k^T and p v, 4 N^2 d) instead of only the scores q k^T (2 N^2 d).",
          flops_recompute_whole_forward),
    Entry(EX_F, "wrong", "float_ratio", "It returns 2.5 x the forward as a float (a float "
          "factor) instead of a plain int.", flops_ratio_float),
    Entry(EX_F, "wrong", "conditional_precedence", "Operator precedence: a + b if recompute "
          "else 0 makes the whole count 0 when recompute=False, instead of adding 0 only to "
          "the recompute term.", flops_precedence),
    Entry(EX_F, "wrong", "three_products", "Only three backward products are counted "
          "(grad_v, grad_q, grad_k): grad_p = grad_out v^T is forgotten.",
          flops_three_products),
    Entry(EX_F, "wrong", "causal_saving", "It counts only the N(N+1)/2 causal query-key pairs, "
          "but the exercise counts dense attention (no causal saving).", flops_causal_half),
    Entry(EX_F, "right", "from_forward_count", None, flops_from_forward),
    Entry(EX_F, "right", "sum_over_named_products", None, flops_sum_products),
    Entry(EX_B, "wrong", "row_term_per_block", "The row term is rowsum(grad_p * p) of the "
          "current key block only, instead of delta = rowsum(grad_out * out) over all keys.",
          fb_block_local_delta),
    Entry(EX_B, "wrong", "grad_q_not_rescaled", "grad_q accumulates grad_s @ k but is never "
          "multiplied by 1/sqrt(d) at the end (grad_k gets it through the scaled q).",
          fb_grad_q_unscaled),
    Entry(EX_B, "wrong", "no_empty_row_guard", "exp(s - lse) has no guard for rows with "
          "lse = -inf (no visible key): -inf - (-inf) is NaN, so those rows spread NaN "
          "instead of contributing nothing.", fb_no_empty_row_guard),
    Entry(EX_B, "wrong", "causal_top_left", "The causal mask compares key positions with "
          "query indices (top-left) instead of aligning bottom-right with the N_k - N_q "
          "offset.", fb_causal_top_left),
    Entry(EX_B, "wrong", "exp2_with_natural_lse", "The probabilities are recomputed with "
          "exp2(s - lse), but s and lse are in natural-log units: the base-2 version needs "
          "both multiplied by log2(e).", fb_exp2_natural_lse),
    Entry(EX_B, "wrong", "two_passes_for_row_term", "The row term is computed in a first "
          "pass over the keys (recomputing p and grad_p), so the products cost 14 N^2 d "
          "instead of one recomputation's 10 N^2 d; delta = rowsum(grad_out * out) needs no "
          "pass (values right, work wrong).", fb_two_pass_delta),
    Entry(EX_B, "right", "query_and_key_tiles_float64", None, fb_tiled_float64),
    Entry(EX_B, "right", "exp2_log2_units", None, fb_exp2_log2_lse),
]
