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


def sb_sum_dim0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_missing_leading_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_autograd(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    scores = torch.log(weights.to(ct)).detach().requires_grad_(True)
    p = torch.softmax(scores, dim=-1)
    (grad,) = torch.autograd.grad(p, scores, grad_weights.to(ct))
    return torch.nan_to_num(grad, nan=0.0).to(weights.dtype)


def sb_float32_result(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    return p * (g - (p * g).sum(-1, keepdim=True))


def sb_matmul_row_term(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = g @ p.transpose(-2, -1) if p.dim() > 1 else g @ p
    return (p * (g - row)).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_einsum_f64(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    row = torch.einsum("...n,...n->...", g, p).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_row_loop(weights, grad_weights):
    n = weights.shape[-1]
    P = weights.reshape(-1, n).double()
    G = grad_weights.reshape(-1, n).double()
    out = torch.empty_like(P)
    for r in range(P.shape[0]):
        dot = torch.dot(P[r], G[r])
        out[r] = P[r] * (G[r] - dot)
    return out.reshape(weights.shape).to(weights.dtype)


# ============================================================ attention_backward: wrong
def _softmax_safe(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    d = q.shape[-1]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), -math.inf)
    p = _softmax_safe(s)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_) / math.sqrt(d)).to(q.dtype), ((gs.transpose(-2, -1) @ q_) / math.sqrt(d)
                                                    ).to(k.dtype), gv.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = d ** -0.5
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = _softmax_safe(s)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_p_with_k(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = _softmax_safe(s)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ k_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_torch_softmax_nan(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = torch.softmax(s, dim=-1)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_float64_returned(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q_, k_, v_, g_ = q.double(), k.double(), v.double(), grad_out.double()
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = _softmax_safe(s)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return grad_s @ k_ / math.sqrt(d), grad_s.transpose(-2, -1) @ q_ / math.sqrt(d), grad_v


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = _softmax_safe(s)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-2, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ attention_backward: right
def ab_einsum_delta_from_out(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        hidden = torch.arange(n_k)[None, :] > torch.arange(n_q)[:, None] + (n_k - n_q)
        s = s.masked_fill(hidden, -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isinf(lse), torch.full_like(lse, math.inf), lse))
    out = torch.einsum("...ij,...jd->...id", p, V)
    delta = (G * out).sum(-1, keepdim=True)  # = rowsum(grad_p * p)
    grad_p = torch.einsum("...id,...jd->...ij", G, V)
    grad_s = p * (grad_p - delta)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, K) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, Q) / math.sqrt(d)
    grad_v = torch.einsum("...ij,...id->...jd", p, G)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_prescaled_q_where_mask(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    c = 1.0 / math.sqrt(d)
    qs = q.to(ct) * c  # fold the scale into q once
    k_, v_, g_ = k.to(ct), v.to(ct), grad_out.to(ct)
    s = torch.matmul(qs, k_.transpose(-1, -2))
    if causal:
        allowed = torch.tril(torch.ones(n_q, n_k, dtype=torch.bool), diagonal=n_k - n_q)
        s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=ct))
    m = torch.where(torch.isneginf(s.amax(-1, keepdim=True)), 0.0, s.amax(-1, keepdim=True))
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    grad_p = torch.matmul(g_, v_.transpose(-1, -2))
    grad_s = p * grad_p - p * (p * grad_p).sum(-1, keepdim=True)
    grad_q = torch.matmul(grad_s, k_) * c
    grad_k = torch.matmul(grad_s.transpose(-1, -2), qs)  # qs already carries the scale
    grad_v = torch.matmul(p.transpose(-1, -2), g_)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def abf_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    products = 3 + (1 if recompute else 0)  # grad_v, grad_q, grad_k (+ scores)
    return products * per_product


def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ** 2 * head_dim
    if not recompute:
        flops += 2 * seq_len ** 2 * head_dim
    return flops


def abf_mac_one_flop(seq_len, head_dim, recompute=True):
    n_products = 5 if recompute else 4
    return n_products * seq_len * seq_len * head_dim


def abf_ratio_of_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    ratio = 2.5 if recompute else 2
    return ratio * forward


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def abf_n_d_swapped(seq_len, head_dim, recompute=True):
    base = 2 * seq_len * head_dim * head_dim
    return (5 if recompute else 4) * base


# ============================================================ attention_backward_flops: right
def abf_product_shapes(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out: (N x N) @ (N x d)
              (n, d, n),  # grad_p = grad_out v^T: (N x d) @ (d x N)
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * cols for m, kk, cols in shapes)


def abf_from_forward(seq_len, head_dim, recompute=True):
    forward = 2 * (2 * seq_len * seq_len * head_dim)
    return forward * (5 if recompute else 4) // 2


# ============================================================ flash_attention_backward: wrong
def _prep(q, lse, grad_out, out):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    return ct, d, qs, g, delta, lse_


def fab_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, _, lse_ = _prep(q, lse, grad_out, out)
    n_q, n_k = q.shape[-2], k.shape[-2]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))  # the row term of this block only
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, delta, lse_ = _prep(q, lse, grad_out, out)
    n_q, n_k = q.shape[-2], k.shape[-2]
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
        p = torch.exp(s - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g
        grad_s = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q = grad_s @ kb
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ qs
    return (grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_exp2_natural_lse(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, delta, lse_ = _prep(q, lse, grad_out, out)
    n_q, n_k = q.shape[-2], k.shape[-2]
    log2e = 1.0 / math.log(2.0)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp2(s * log2e - lse_)  # base-2 form of the kernels
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_recompute_out_for_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def probs(a, b):
        s = qs @ k[..., a:b, :].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        return torch.exp(s - lse_)

    o = torch.zeros_like(qs)  # first pass: rebuild out from the blocks
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        o += probs(a, b) @ v[..., a:b, :].to(ct)
    delta = (g * o).sum(-1, keepdim=True)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        p = probs(a, b)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ v[..., a:b, :].to(ct).transpose(-2, -1) - delta)
        gq += gs @ k[..., a:b, :].to(ct)
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_block_local_key_index(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, delta, lse_ = _prep(q, lse, grad_out, out)
    n_q, n_k = q.shape[-2], k.shape[-2]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(b - a)[None, :]  # positions inside the block
            s = s.masked_fill(kpos > qpos, -math.inf)
        p = torch.exp(s - lse_)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fab_tiled_2d_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over query blocks and key blocks, FlashAttention-2 style, in float64."""
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    Q = q.double() / math.sqrt(d)
    K, V, G = k.double(), v.double(), grad_out.double()
    D = (G * out.double()).sum(-1, keepdim=True)  # (B, H, N_q, 1)
    L = lse.double()[..., None]
    L = torch.where(torch.isneginf(L), torch.full_like(L, math.inf), L)
    gq, gk, gv = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        rows = torch.arange(i0, i1)[:, None] + (n_k - n_q)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            s = Q[..., i0:i1, :] @ K[..., j0:j1, :].transpose(-2, -1)
            if causal:
                s = torch.where(torch.arange(j0, j1)[None, :] <= rows, s,
                                torch.tensor(-math.inf, dtype=torch.float64))
            p = torch.exp(s - L[..., i0:i1, :])
            gv[..., j0:j1, :] += p.transpose(-2, -1) @ G[..., i0:i1, :]
            ds = p * (G[..., i0:i1, :] @ V[..., j0:j1, :].transpose(-2, -1) - D[..., i0:i1, :])
            gq[..., i0:i1, :] += ds @ K[..., j0:j1, :]
            gk[..., j0:j1, :] += ds.transpose(-2, -1) @ Q[..., i0:i1, :]
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_einsum_scaled_keys(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    c = d ** -0.5
    Q, G = q.to(ct), grad_out.to(ct)
    delta = torch.sum(G * out.to(ct), dim=-1)  # (B, H, N_q)
    empty = torch.isneginf(lse)
    L = torch.where(empty, torch.zeros_like(lse), lse).to(ct)
    grads_k, grads_v = [], []
    grad_q = torch.zeros_like(Q)
    last_key = torch.arange(n_q) + (n_k - n_q)  # query i sees keys <= last_key[i]
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kc = k[..., j0:j1, :].to(ct) * c  # scale folded into the keys
        Vb = v[..., j0:j1, :].to(ct)
        s = torch.einsum("bhid,bhjd->bhij", Q, Kc)
        keep = ~empty[..., None]
        if causal:
            keep = keep & (torch.arange(j0, j1)[None, :] <= last_key[:, None])
        p = torch.where(keep, torch.exp(s - L[..., None]), torch.zeros_like(s))
        grads_v.append(torch.einsum("bhij,bhid->bhjd", p, G))
        ds = p * (torch.einsum("bhid,bhjd->bhij", G, Vb) - delta[..., None])
        grad_q += torch.einsum("bhij,bhjd->bhid", ds, Kc)
        grads_k.append(torch.einsum("bhij,bhid->bhjd", ds, Q) * c)
    grad_k = torch.cat(grads_k, dim=2)
    grad_v = torch.cat(grads_v, dim=2)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


E = Entry
ENTRIES = [
    E("softmax_backward", "wrong", "row_term_without_keepdim",
      "sums the row term without keepdim=True, so (..., n) - (...,) broadcasts the row sums "
      "along the last axis (a shape error, or the wrong rows mixed when the shapes happen to "
      "match)", sb_no_keepdim),
    E("softmax_backward", "wrong", "row_term_summed_over_dim0",
      "sums grad_weights * weights over dim 0 instead of over the last axis (the softmax "
      "axis)", sb_sum_dim0),
    E("softmax_backward", "wrong", "leading_weights_factor_missing",
      "returns grad_weights - rowsum(grad_weights * weights) and forgets the leading "
      "weights * (the diag(p) of the Jacobian), so masked entries get a gradient",
      sb_missing_leading_p),
    E("softmax_backward", "wrong", "autograd_through_log_weights",
      "recovers the scores as log(weights) and calls torch.autograd.grad, which this lesson "
      "forbids: the gradient must be computed explicitly (the call raises under the check)",
      sb_autograd),
    E("softmax_backward", "wrong", "float32_result",
      "computes in float32 but returns the float32 tensor, so float16/bfloat16 inputs get a "
      "float32 result instead of weights' dtype", sb_float32_result),
    E("softmax_backward", "wrong", "matmul_for_row_term",
      "uses grad_weights @ weights^T for the row term, a matrix product that pairs every row "
      "with every other row, where an elementwise product summed along each row is meant "
      "(a shape error when the number of rows differs from n, wrong values otherwise)",
      sb_matmul_row_term),
    E("softmax_backward", "right", "einsum_row_dot_float64", None, sb_einsum_f64),
    E("softmax_backward", "right", "loop_over_rows_dot", None, sb_row_loop),

    E("attention_backward", "wrong", "causal_mask_top_left",
      "builds the causal mask with tril() (offset 0, top-left) instead of tril(N_k - N_q), so "
      "with N_q != N_k the queries see the wrong keys", ab_causal_top_left),
    E("attention_backward", "wrong", "grad_k_missing_scale",
      "multiplies grad_q by 1/sqrt(d) but forgets the same factor on grad_k = grad_s^T q",
      ab_grad_k_unscaled),
    E("attention_backward", "wrong", "grad_p_uses_k",
      "computes grad_p = grad_out @ k^T instead of grad_out @ v^T (the wrong tensor reused; a "
      "shape error where d_v != d)", ab_grad_p_with_k),
    E("attention_backward", "wrong", "softmax_nan_on_rows_without_keys",
      "uses torch.softmax on the masked scores, which gives NaN for a query with no visible "
      "key (causal, N_q > N_k) instead of a zero row", ab_torch_softmax_nan),
    E("attention_backward", "wrong", "float64_returned",
      "computes everything in float64 and forgets to cast back, so float32/float16/bfloat16 "
      "inputs get float64 gradients instead of the inputs' dtype", ab_float64_returned),
    E("attention_backward", "wrong", "row_term_over_queries",
      "sums grad_p * p over dim -2 (the queries) instead of dim -1 (the keys) for the softmax "
      "row term", ab_row_term_wrong_axis),
    E("attention_backward", "right", "einsum_delta_from_out_float64", None,
      ab_einsum_delta_from_out),
    E("attention_backward", "right", "scale_folded_into_q", None, ab_prescaled_q_where_mask),

    E("attention_backward_flops", "wrong", "grad_p_product_forgotten",
      "counts three N^2 d products (grad_v, grad_q, grad_k) and forgets grad_p = grad_out v^T, "
      "so 6 N^2 d (8 with recompute) instead of 8 (10)", abf_three_products),
    E("attention_backward_flops", "wrong", "recompute_condition_inverted",
      "adds the recomputation's 2 N^2 d when recompute is False instead of when it is True",
      abf_recompute_inverted),
    E("attention_backward_flops", "wrong", "multiply_add_as_one_flop",
      "counts N^2 d per product (one FLOP per multiply-add) instead of 2 N^2 d",
      abf_mac_one_flop),
    E("attention_backward_flops", "wrong", "float_ratio_of_forward",
      "multiplies the forward's 4 N^2 d by 2.5, which returns a float where the contract wants "
      "a plain int", abf_ratio_of_forward),
    E("attention_backward_flops", "wrong", "conditional_expression_precedence",
      "writes 8 N^2 d + 2 N^2 d if recompute else 0: the conditional expression binds last, "
      "so recompute=False returns 0 instead of 8 N^2 d", abf_conditional_precedence),
    E("attention_backward_flops", "wrong", "n_and_d_swapped",
      "squares the head dimension instead of the sequence length: N d^2 per product instead "
      "of N^2 d", abf_n_d_swapped),
    E("attention_backward_flops", "right", "sum_over_product_shapes", None, abf_product_shapes),
    E("attention_backward_flops", "right", "ratio_of_forward_in_ints", None, abf_from_forward),

    E("flash_attention_backward", "wrong", "row_term_per_block",
      "takes the softmax row term from each block's own rowsum(grad_p * p), a partial sum over "
      "that block's keys, instead of delta = rowsum(grad_out * out) over the whole row",
      fab_block_local_delta),
    E("flash_attention_backward", "wrong", "no_guard_for_lse_minus_inf",
      "computes exp(s - lse) without guarding rows whose lse is -inf: exp(-inf - (-inf)) is "
      "NaN, so a query with no visible key spreads NaN into the gradients",
      fab_no_lse_guard),
    E("flash_attention_backward", "wrong", "grad_q_overwritten_per_block",
      "assigns grad_q = grad_s @ k_block in every block instead of accumulating (+=), so only "
      "the last key block's contribution survives", fab_grad_q_overwritten),
    E("flash_attention_backward", "wrong", "exp2_with_natural_lse",
      "recomputes p as exp2(s * log2(e) - lse), the base-2 form of the kernels, but lse is a "
      "natural log and was not converted, so the probabilities are wrong",
      fab_exp2_natural_lse),
    E("flash_attention_backward", "wrong", "out_recomputed_for_delta",
      "ignores the given out and recomputes it block by block in a first pass to get delta: "
      "right values, but two extra products per block, beyond one recomputation's 10 N^2 d",
      fab_recompute_out_for_delta),
    E("flash_attention_backward", "wrong", "causal_mask_block_local_keys",
      "builds the causal mask with the block-local key indices arange(stop - start) instead "
      "of the global arange(start, stop), so every block is masked as if it were the first",
      fab_block_local_key_index),
    E("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
      fab_tiled_2d_f64),
    E("flash_attention_backward", "right", "einsum_scale_in_keys_concat", None,
      fab_einsum_scaled_keys),
]
