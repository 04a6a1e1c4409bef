"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math
from fractions import Fraction

import torch

from entry import Entry

NEG = float("-inf")


# ============================================================ softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_row_term_without_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = torch.sum(g * p, dim=-1, keepdim=True)
    return (p * (row - g)).to(weights.dtype)


def sb_sum_over_dim0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_returns_compute_dtype(weights, grad_weights):
    p = weights.to(torch.promote_types(weights.dtype, torch.float32))
    g = grad_weights.to(p.dtype)
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_softmax_reapplied(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = torch.softmax(weights.to(ct), dim=-1)
    g = grad_weights.to(ct)
    return (p * (g - (g * p).sum(-1, keepdim=True))).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_einsum_float64(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    dot = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)  # <p, g> per row
    return (p * g - p * dot).to(weights.dtype)


def sb_flattened_rows_loop(weights, grad_weights):
    shape = weights.shape
    n = shape[-1]
    p = weights.reshape(-1, n).double()
    g = grad_weights.reshape(-1, n).double()
    out = torch.empty_like(p)
    for r in range(p.shape[0]):
        pr, gr = p[r], g[r]
        out[r] = pr * gr - pr * torch.dot(pr, gr)
    return out.reshape(shape).to(weights.dtype)


# ============================================================ attention_backward: helpers
def _visible(n_q, n_k):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def _safe_softmax(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


# ============================================================ attention_backward: wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    d = q.shape[-1]
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), NEG)
    p = _safe_softmax(s)
    gv = p.transpose(-2, -1) @ G
    gp = G @ V.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ K / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ Q
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    scale = q.shape[-1] ** -0.5
    s = Q @ K.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(), NEG)
    p = _safe_softmax(s)
    gv = p.transpose(-2, -1) @ G
    gp = G @ V.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ K * scale).to(q.dtype), (gs.transpose(-2, -1) @ Q * scale).to(k.dtype),
            gv.to(v.dtype))


def ab_grad_k_uses_k(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = torch.matmul(Q, K.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), NEG)
    p = _safe_softmax(s)
    gv = p.transpose(-2, -1) @ G
    gp = G @ V.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ K * scale
    gk = gs.transpose(-2, -1) @ K * scale
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_plain_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = Q @ K.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), NEG)
    p = torch.softmax(s, dim=-1)
    gv = p.transpose(-2, -1) @ G
    gp = G @ V.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ K * scale).to(q.dtype), (gs.transpose(-2, -1) @ Q * scale).to(k.dtype),
            gv.to(v.dtype))


def ab_returns_float32(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = Q @ K.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), NEG)
    p = _safe_softmax(s)
    gv = p.transpose(-2, -1) @ G
    gp = G @ V.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return gs @ K * scale, gs.transpose(-2, -1) @ Q * scale, gv


def ab_row_term_over_queries(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = Q @ K.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), NEG)
    p = _safe_softmax(s)
    gv = p.transpose(-2, -1) @ G
    gp = G @ V.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-2, keepdim=True))
    return ((gs @ K * scale).to(q.dtype), (gs.transpose(-2, -1) @ Q * scale).to(k.dtype),
            gv.to(v.dtype))


# ============================================================ attention_backward: right
def ab_delta_from_out_float64(q, k, v, grad_out, causal=False):
    """Row term as FlashAttention computes it: delta = rowsum(grad_out * out)."""
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = torch.where(allowed, s, torch.full_like(s, NEG))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = p @ V
    delta = (G * out).sum(-1, keepdim=True)
    gs = p * (G @ V.transpose(-2, -1) - delta)
    gq = torch.einsum("...qk,...kd->...qd", gs, K) / math.sqrt(d)
    gk = torch.einsum("...qk,...qd->...kd", gs, Q) / math.sqrt(d)
    gv = torch.einsum("...qk,...qe->...ke", p, G)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_explicit_jacobian(q, k, v, grad_out, causal=False):
    """grad_s through the full softmax Jacobian diag(p) - p p^T of every row (float64)."""
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_visible(n_q, n_k), NEG)
    p = _safe_softmax(s)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., N_q, N_k, N_k)
    gp = G @ V.transpose(-2, -1)
    gs = (jac @ gp.unsqueeze(-1)).squeeze(-1)  # J symmetric
    gq = gs @ K / math.sqrt(d)
    gk = gs.transpose(-2, -1) @ Q / math.sqrt(d)
    gv = p.transpose(-2, -1) @ G
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def fl_mac_as_one(seq_len, head_dim, recompute=True):
    n_products = 5 if recompute else 4
    return n_products * seq_len * seq_len * head_dim


def fl_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len ** 2 * head_dim
    if recompute:
        backward += 4 * seq_len ** 2 * head_dim  # q k^T and p v again
    return backward


def fl_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2.0)


def fl_flag_inverted(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    total = 4 * per_product
    if not recompute:
        total += per_product
    return total


def fl_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    products = ["grad_v", "grad_q", "grad_k"]
    if recompute:
        products.append("scores")
    return len(products) * per_product


def fl_conditional_precedence(seq_len, head_dim, recompute=True):
    products = 4 + 1 if recompute else 0
    return products * 2 * seq_len * seq_len * head_dim


# ============================================================ attention_backward_flops: right
def fl_named_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = {"grad_v": (n, n, d), "grad_p": (n, d, n), "grad_q": (n, n, d),
              "grad_k": (n, n, d)}  # (m, k, n) of each matrix product
    if recompute:
        shapes["scores"] = (n, d, n)
    return sum(2 * m * kk * nn for m, kk, nn in shapes.values())


def fl_fraction_of_forward(seq_len, head_dim, recompute=True):
    forward = 2 * (2 * seq_len * seq_len * head_dim)
    ratio = Fraction(5, 2) if recompute else Fraction(2)
    result = ratio * forward
    assert result.denominator == 1
    return int(result)


# ============================================================ flash_attention_backward: helpers
def _lse_col(lse, ct):
    return lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]


# ============================================================ flash_attention_backward: wrong
def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = _lse_col(lse, ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, NEG)
        p = torch.exp(s - L)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    gq = gq / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_grad_k_unscaled_q(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(ct)
    scale = 1.0 / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = _lse_col(lse, ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(q_)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = (q_ @ kb.transpose(-2, -1)) * scale
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, NEG)
        p = torch.exp(s - L)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ q_
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_mask_hides_diagonal(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = _lse_col(lse, ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] >= qpos, NEG)
        p = torch.exp(s - L)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_returns_float32(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = _lse_col(lse, ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, NEG)
        p = torch.exp(s - L)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return gq / math.sqrt(d), gk, gv


def fb_lse_without_trailing_axis(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)  # (B, H, N)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, NEG)
        p = torch.exp(s - L)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_grad_q_assigned(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = _lse_col(lse, ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, NEG)
        p = torch.exp(s - L)
        gv[..., a:b, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq = gs @ kb
        gk[..., a:b, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_two_d_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries AND keys; grad_k / grad_v accumulate over query tiles."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = d ** -0.5
    Q, K, V = q.to(ct), k.to(ct), v.to(ct)
    G, O = grad_out.to(ct), out.to(ct)
    ell = lse.to(ct)
    gq = torch.zeros(q.shape, dtype=ct)
    gk = torch.zeros(k.shape, dtype=ct)
    gv = torch.zeros(v.shape, dtype=ct)
    for i0 in range(0, n_q, block_size):
        i1 = min(n_q, i0 + block_size)
        q_t, g_t = Q[..., i0:i1, :], G[..., i0:i1, :]
        D_t = (g_t * O[..., i0:i1, :]).sum(-1, keepdim=True)
        l_t = ell[..., i0:i1].unsqueeze(-1)
        dead = torch.isneginf(l_t)
        l_t = torch.where(dead, torch.zeros_like(l_t), l_t)
        rows = torch.arange(i0, i1).unsqueeze(1) + (n_k - n_q)
        for j0 in range(0, n_k, block_size):
            j1 = min(n_k, j0 + block_size)
            k_t, v_t = K[..., j0:j1, :], V[..., j0:j1, :]
            s = q_t @ k_t.transpose(-1, -2) * scale
            p = torch.exp(s - l_t)
            keep = ~dead
            if causal:
                keep = keep & (torch.arange(j0, j1).unsqueeze(0) <= rows)
            p = torch.where(keep, p, torch.zeros_like(p))
            gv[..., j0:j1, :] += p.transpose(-1, -2) @ g_t
            ds = p * (g_t @ v_t.transpose(-1, -2) - D_t)
            gq[..., i0:i1, :] += ds @ k_t * scale
            gk[..., j0:j1, :] += ds.transpose(-1, -2) @ q_t * scale
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_einsum_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, O, G = (t.double() for t in (q, k, v, out, grad_out))
    L = lse.double().unsqueeze(-1)
    no_key = torch.isneginf(L)
    Lsafe = torch.where(no_key, torch.zeros_like(L), L)
    delta = torch.einsum("bhqd,bhqd->bhq", G, O).unsqueeze(-1)
    parts_k, parts_v = [], []
    gq = torch.zeros_like(Q)
    inv = 1.0 / math.sqrt(d)
    start = 0
    while start < n_k:
        stop = min(start + block_size, n_k)
        kb, vb = K[:, :, start:stop], V[:, :, start:stop]
        s = torch.einsum("bhqd,bhkd->bhqk", Q, kb) * inv
        p = torch.exp(s - Lsafe).masked_fill(no_key, 0.0)
        if causal:
            hidden = torch.arange(start, stop)[None, :] > torch.arange(n_q)[:, None] + n_k - n_q
            p = p.masked_fill(hidden, 0.0)
        parts_v.append(torch.einsum("bhqk,bhqd->bhkd", p, G))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", G, vb) - delta)
        gq = gq + torch.einsum("bhqk,bhkd->bhqd", ds, kb) * inv
        parts_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, Q) * inv)
        start = stop
    gk = torch.cat(parts_k, dim=2)
    gv = torch.cat(parts_v, dim=2)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


S = "softmax_backward"
A = "attention_backward"
FL = "attention_backward_flops"
FB = "flash_attention_backward"
ENTRIES = [
    Entry(S, "wrong", "row_term_no_keepdim", "The row term (grad_weights * weights).sum(-1) "
          "loses its axis (no keepdim=True), so it broadcasts along the last axis instead of "
          "lining up with its row: a shape error, or wrong values on square inputs.",
          sb_no_keepdim),
    Entry(S, "wrong", "row_term_without_p", "The row term sums grad_weights alone instead of "
          "grad_weights * weights: the p p^T part of the Jacobian loses its p.",
          sb_row_term_without_p),
    Entry(S, "wrong", "sign_flipped", "It returns weights * (row - grad_weights), the negative "
          "of the gradient: the subtraction is the wrong way round.", sb_sign_flipped),
    Entry(S, "wrong", "row_term_over_dim0", "The row term is summed over dim=0 (the first "
          "axis) instead of the last axis, where each softmax row lies.", sb_sum_over_dim0),
    Entry(S, "wrong", "returns_compute_dtype", "It computes in float32 and returns that, not "
          "weights' dtype: float16 / bfloat16 inputs come back as float32.",
          sb_returns_compute_dtype),
    Entry(S, "wrong", "softmax_reapplied", "It applies softmax to weights again, as if they "
          "were scores, instead of using the given softmax output p directly.",
          sb_softmax_reapplied),
    Entry(S, "right", "einsum_float64", None, sb_einsum_float64),
    Entry(S, "right", "row_loop_dot", None, sb_flattened_rows_loop),
    Entry(A, "wrong", "grad_k_unscaled", "grad_k = grad_s^T q misses the 1/sqrt(d) factor "
          "that grad_q has: the scale of the scores belongs in both.", ab_grad_k_unscaled),
    Entry(A, "wrong", "causal_top_left", "The causal mask is tril() with no offset "
          "(top-left aligned), not bottom-right tril(N_k - N_q), so with N_q != N_k the wrong "
          "keys are hidden.", ab_causal_top_left),
    Entry(A, "wrong", "grad_k_uses_k", "grad_k multiplies grad_s^T by k instead of q (a "
          "variable reused from the grad_q line): a shape error when N_q != N_k, wrong values "
          "otherwise.", ab_grad_k_uses_k),
    Entry(A, "wrong", "plain_softmax_nan_rows", "torch.softmax over a row whose keys are all "
          "masked gives NaN: a query that sees no key (causal, N_q > N_k) spreads NaN into the "
          "gradients instead of contributing nothing.", ab_plain_softmax_nan_rows),
    Entry(A, "wrong", "returns_float32", "The gradients are returned in the float32 compute "
          "dtype, not cast back to the inputs' dtype (float16 / bfloat16).",
          ab_returns_float32),
    Entry(A, "wrong", "row_term_over_queries", "In the softmax backward the row term "
          "(grad_p * p) is summed over dim=-2 (the queries) instead of dim=-1 (the keys of "
          "each query's row).", ab_row_term_over_queries),
    Entry(A, "right", "delta_from_out_float64", None, ab_delta_from_out_float64),
    Entry(A, "right", "explicit_jacobian", None, ab_explicit_jacobian),
    Entry(FL, "wrong", "mac_as_one_flop", "Each product is counted as N^2 d FLOPs, one per "
          "multiply-add, instead of 2 N^2 d.", fl_mac_as_one),
    Entry(FL, "wrong", "recomputes_whole_forward", "With recompute it adds the whole forward, "
          "4 N^2 d (q k^T and p v), but only the scores q k^T are recomputed: 2 N^2 d.",
          fl_recompute_whole_forward),
    Entry(FL, "wrong", "ratio_as_float", "It multiplies the forward by 2.5 or 2.0, so the "
          "count comes back as a float instead of a plain int.", fl_ratio_float),
    Entry(FL, "wrong", "recompute_flag_inverted", "The condition is inverted (if not "
          "recompute): the extra q k^T product is added exactly when nothing is recomputed.",
          fl_flag_inverted),
    Entry(FL, "wrong", "grad_p_product_missing", "It counts three backward products (grad_v, "
          "grad_q, grad_k) and forgets grad_p = grad_out v^T.", fl_three_products),
    Entry(FL, "wrong", "conditional_precedence", "products = 4 + 1 if recompute else 0 parses "
          "as (4 + 1) if recompute else 0, so recompute=False gives 0 FLOPs: the conditional "
          "needs parentheses, 4 + (1 if recompute else 0).", fl_conditional_precedence),
    Entry(FL, "right", "named_product_shapes", None, fl_named_products),
    Entry(FL, "right", "fraction_of_forward", None, fl_fraction_of_forward),
    Entry(FB, "wrong", "block_local_delta", "The row term is recomputed inside each key block "
          "as rowsum(grad_p * p) over that block only, instead of delta = rowsum(grad_out * "
          "out) over the whole row: with more than one block the row term is incomplete.",
          fb_block_local_delta),
    Entry(FB, "wrong", "grad_k_with_unscaled_q", "grad_k is computed from the unscaled q: "
          "the 1/sqrt(d) applied to the scores and to grad_q is missing from grad_k.",
          fb_grad_k_unscaled_q),
    Entry(FB, "wrong", "mask_hides_diagonal", "The causal mask hides key_pos >= query_pos "
          "instead of key_pos > query_pos, so each query's own key (the diagonal) is masked "
          "out of the recomputed probabilities.", fb_mask_hides_diagonal),
    Entry(FB, "wrong", "returns_float32", "It returns the float32 accumulators as they are, "
          "not cast back to the inputs' dtype (float16 / bfloat16 come back as float32).",
          fb_returns_float32),
    Entry(FB, "wrong", "lse_without_trailing_axis", "lse (B, H, N) is subtracted from the "
          "(B, H, N, block) scores without a trailing axis, so it broadcasts along the keys: "
          "a shape error, or wrong probabilities when the block is as wide as N.",
          fb_lse_without_trailing_axis),
    Entry(FB, "wrong", "grad_q_assigned_not_accumulated", "grad_q is assigned (=) in each key "
          "block instead of accumulated (+=), so only the last block's contribution survives.",
          fb_grad_q_assigned),
    Entry(FB, "right", "two_d_tiles", None, fb_two_d_tiles),
    Entry(FB, "right", "einsum_float64_while", None, fb_einsum_float64),
]
