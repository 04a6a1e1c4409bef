"""Lesson 12 (backward): held-out learners' answers for softmax_backward, attention_backward,
attention_backward_flops and flash_attention_backward. No torch.autograd anywhere."""

import math

import torch

from entry import Entry


# ============================================================ softmax_backward: wrong
def sb_sum_everything(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = (p * g).sum()
    return (p * (g - dot)).to(weights.dtype)


def sb_sum_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    inner = (g * p).sum(dim=-1)
    return (p * (g - inner)).to(weights.dtype)


def sb_row_term_without_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    p = weights.float()
    g = grad_weights.float()
    return p * (g - (p * g).sum(-1, keepdim=True))


def sb_torch_diag(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # diag(p) - p p^T
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_renormalises(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    p = p / p.sum(-1, keepdim=True)  # make sure the rows sum to one
    g = grad_weights.to(ct)
    return (p * (g - (p * g).sum(-1, keepdim=True))).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_explicit_jacobian_f64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - torch.einsum("...i,...j->...ij", p, p)
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_expanded_terms(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    pg = p * g
    return (pg - p * torch.einsum("...i->...", pg).unsqueeze(-1)).to(weights.dtype)


# ============================================================ attention_backward: wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    sc = 1 / math.sqrt(d)
    s = Q @ K.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    top = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isinf(top), 0.0, top))
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ K * sc
    dk = ds.transpose(-2, -1) @ Q
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(nq, nk, dtype=torch.bool)), -math.inf)
    top = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isinf(top), 0.0, top))
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ K / math.sqrt(d)).to(q.dtype), (ds.transpose(-2, -1) @ Q / math.sqrt(d)).to(k.dtype),
            dv.to(v.dtype))


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = d ** -0.5
    s = (Q @ K.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    top = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isinf(top), 0.0, top))
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.transpose(-2, -1) @ G
    dp = G @ V.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-2, keepdim=True))
    return (ds @ K * scale).to(q.dtype), (ds.transpose(-2, -1) @ Q * scale).to(k.dtype), dv.to(v.dtype)


def ab_grad_k_uses_k(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, gg = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = qq @ kk.transpose(-2, -1) * scale
    if causal:
        allowed = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
        s = s.masked_fill(~allowed, -math.inf)
    m = s.amax(-1, keepdim=True)
    m = m.masked_fill(torch.isneginf(m), 0.0)
    e = torch.exp(s - m)
    tot = e.sum(-1, keepdim=True)
    p = e / tot.masked_fill(tot == 0, 1.0)
    grad_v = p.transpose(-2, -1) @ gg
    grad_p = gg @ vv.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ kk * scale
    grad_k = grad_s.transpose(-2, -1) @ kk * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_nan_rows_without_keys(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, gg = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = qq @ kk.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    p = torch.softmax(s, dim=-1)
    grad_v = p.transpose(-2, -1) @ gg
    grad_p = gg @ vv.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ kk * scale).to(q.dtype), (grad_s.transpose(-2, -1) @ qq * scale).to(k.dtype),
            grad_v.to(v.dtype))


def ab_dot_T(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = Q @ K.T / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    top = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isinf(top), 0.0, top))
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, 1.0, z)
    dv = p.T @ G
    dp = G @ V.T
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ K / math.sqrt(d)).to(q.dtype), (ds.T @ Q / math.sqrt(d)).to(k.dtype),
            dv.to(v.dtype))


# ============================================================ attention_backward: right
def ab_einsum_float64(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        qi = torch.arange(n_q)[:, None]
        kj = torch.arange(n_k)[None, :]
        s = torch.where(kj <= qi + (n_k - n_q), s, torch.tensor(-math.inf, dtype=torch.float64))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    grad_v = torch.einsum("...qk,...qe->...ke", p, G)
    grad_p = torch.einsum("...qe,...ke->...qk", G, V)
    jac_row = torch.einsum("...qk,...qk->...q", grad_p, p)
    grad_s = p * (grad_p - jac_row[..., None])
    grad_q = torch.einsum("...qk,...kd->...qd", grad_s, K) / math.sqrt(d)
    grad_k = torch.einsum("...qk,...qd->...kd", grad_s, Q) / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_delta_from_output(q, k, v, grad_out, causal=False):
    """Uses rowsum(grad_out * out) for the softmax row term, as FlashAttention does."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    kf, vf, gf = k.to(ct), v.to(ct), grad_out.to(ct)
    s = torch.matmul(qs, kf.transpose(-1, -2))
    if causal:
        hide = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
        s = s.masked_fill(hide, float("-inf"))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse.masked_fill(torch.isneginf(lse), 0.0))
    out = p @ vf
    delta = (gf * out).sum(-1, keepdim=True)
    grad_s = p * (gf @ vf.transpose(-1, -2) - delta)
    grad_q = grad_s @ kf / math.sqrt(d)
    grad_k = grad_s.transpose(-1, -2) @ qs
    grad_v = p.transpose(-1, -2) @ gf
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len * seq_len * head_dim
    if recompute:
        backward += 4 * seq_len * seq_len * head_dim  # run the forward again
    return backward


def abf_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n ** 2 * d + 2 * n ** 2 * d if recompute else 0


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return (2.5 if recompute else 2) * forward


def abf_caret_power(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ^ 2 * head_dim
    if recompute:
        flops += 2 * seq_len ^ 2 * head_dim
    return flops


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    extra = 0 if recompute else 2 * seq_len * seq_len * head_dim
    return 8 * seq_len * seq_len * head_dim + extra


# ============================================================ attention_backward_flops: right
def abf_list_of_products(seq_len, head_dim, recompute=True):
    shapes = [("grad_v", seq_len, seq_len, head_dim), ("grad_p", seq_len, head_dim, seq_len),
              ("grad_q", seq_len, seq_len, head_dim), ("grad_k", seq_len, seq_len, head_dim)]
    if recompute:
        shapes.append(("scores", seq_len, head_dim, seq_len))
    return sum(2 * m * kk * n for _name, m, kk, n in shapes)


def abf_ratio_of_forward(seq_len, head_dim, recompute=True):
    forward = 2 * (2 * seq_len * seq_len * head_dim)  # q k^T and p v
    half_steps = 5 if recompute else 4  # backward = half_steps / 2 forwards
    return forward * half_steps // 2


# ============================================================ flash_attention_backward: wrong
def fab_blockwise_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros(B, H, nq, d, dtype=ct)
    dk = torch.empty(B, H, nk, d, dtype=ct)
    dv = torch.empty(B, H, nk, d, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        delta = (dp * p).sum(-1, keepdim=True)  # row term of this block
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_no_neg_inf_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).unsqueeze(-1)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros(B, H, nq, d, dtype=ct)
    dk = torch.empty(B, H, nk, d, dtype=ct)
    dv = torch.empty(B, H, nk, d, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros(B, H, nq, d, dtype=ct)
    dk = torch.empty(B, H, nk, d, dtype=ct)
    dv = torch.empty(B, H, nk, d, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_lse_not_unsqueezed(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)  # (B, H, N)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros(B, H, nq, d, dtype=ct)
    dk = torch.empty(B, H, nk, d, dtype=ct)
    dv = torch.empty(B, H, nk, d, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    rows = torch.arange(nq)[:, None]
    dq = torch.zeros(B, H, nq, d, dtype=ct)
    dk = torch.empty(B, H, nk, d, dtype=ct)
    dv = torch.empty(B, H, nk, d, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_grad_k_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qf = q.to(ct)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros(B, H, nq, d, dtype=ct)
    dk = torch.empty(B, H, nk, d, dtype=ct)
    dv = torch.empty(B, H, nk, d, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = (qf @ kb.transpose(-2, -1)) * scale
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qf
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fab_two_d_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over query blocks and key blocks; each tile does its five products once."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f64 = torch.float64
    scale = 1.0 / math.sqrt(d)
    Q, K, V, G = q.to(f64), k.to(f64), v.to(f64), grad_out.to(f64)
    D = (G * out.to(f64)).sum(dim=-1)  # (B, H, N_q)
    L = lse.to(f64)
    empty = torch.isneginf(L)
    L = torch.where(empty, torch.zeros_like(L), L)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        q_t, g_t = Q[..., i0:i1, :], G[..., i0:i1, :]
        l_t, d_t, e_t = L[..., i0:i1, None], D[..., i0:i1, None], empty[..., i0:i1, None]
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            k_t, v_t = K[..., j0:j1, :], V[..., j0:j1, :]
            s = (q_t @ k_t.transpose(-1, -2)) * scale
            if causal:
                qi = torch.arange(i0, i1)[:, None] + (n_k - n_q)
                kj = torch.arange(j0, j1)[None, :]
                s = s.masked_fill(kj > qi, -math.inf)
            p = torch.exp(s - l_t).masked_fill(e_t, 0.0)
            dV[..., j0:j1, :] += p.transpose(-1, -2) @ g_t
            ds = p * (g_t @ v_t.transpose(-1, -2) - d_t)
            dQ[..., i0:i1, :] += (ds @ k_t) * scale
            dK[..., j0:j1, :] += (ds.transpose(-1, -2) @ q_t) * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(ct)
    gf = grad_out.to(ct)
    delta = torch.einsum("bhqd,bhqd->bhq", gf, out.to(ct))
    lse_c = lse.to(ct)
    no_key = torch.isneginf(lse_c)
    lse_c = torch.where(no_key, torch.zeros_like(lse_c), lse_c)
    inv = d ** -0.5
    grads_k, grads_v = [], []
    grad_q = torch.zeros_like(qf)
    start = 0
    for kb, vb in zip(k.split(block_size, dim=2), v.split(block_size, dim=2)):
        kb, vb = kb.to(ct), vb.to(ct)
        w = kb.shape[2]
        s = torch.einsum("bhqd,bhkd->bhqk", qf, kb) * inv
        if causal:
            vis = torch.ones(n_q, w, dtype=torch.bool).tril(n_k - n_q - start)
            s = s.masked_fill(~vis, -math.inf)
        p = torch.exp(s - lse_c[..., None])
        p = torch.where(no_key[..., None], torch.zeros_like(p), p)
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, gf))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", gf, vb) - delta[..., None])
        grad_q = grad_q + torch.einsum("bhqk,bhkd->bhqd", ds, kb) * inv
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, qf) * inv)
        start += w
    return grad_q.to(q.dtype), torch.cat(grads_k, 2).to(k.dtype), torch.cat(grads_v, 2).to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_sums_everything",
          "(p * g).sum() without dim sums over the whole tensor, so every row subtracts the "
          "same grand total instead of its own row sum", sb_sum_everything),
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "the row sum is taken without keepdim, so (..., ) is broadcast against (..., n) "
          "along the last axis: it raises for most shapes and subtracts the wrong rows' sums "
          "for square ones", sb_sum_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_missing_p",
          "the row term is rowsum(grad_weights) instead of rowsum(grad_weights * weights)",
          sb_row_term_without_p),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes with .float() and never casts back, so float64 and half-precision inputs "
          "get a float32 gradient", sb_returns_float32),
    Entry("softmax_backward", "wrong", "torch_diag_on_batch",
          "torch.diag(p) on a batch of rows extracts a diagonal instead of building diag(p) "
          "per row (that needs torch.diag_embed): wrong values or a shape error for any "
          "input with more than one row", sb_torch_diag),
    Entry("softmax_backward", "wrong", "renormalises_rows",
          "re-normalises the weights by their row sum first, which divides 0 by 0 on a fully "
          "masked row and returns NaN instead of zeros", sb_renormalises),
    Entry("softmax_backward", "right", "explicit_jacobian_float64", None, sb_explicit_jacobian_f64),
    Entry("softmax_backward", "right", "expanded_terms", None, sb_expanded_terms),

    Entry("attention_backward", "wrong", "grad_k_missing_scale",
          "grad_k = grad_s^T q without the 1/sqrt(d) factor (grad_q has it)",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "causal_top_left",
          "the causal mask is torch.tril(ones(N_q, N_k)) (top-left) instead of the "
          "bottom-right tril(N_k - N_q) of lesson 04", ab_causal_top_left),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "the softmax row term rowsum(grad_p * p) is summed over dim -2 (the queries) instead "
          "of over the keys", ab_row_term_wrong_axis),
    Entry("attention_backward", "wrong", "grad_k_from_k",
          "grad_k is grad_s^T @ k / sqrt(d): the keys are reused where the queries belong "
          "(a shape error when N_q != N_k, wrong values when they are equal)",
          ab_grad_k_uses_k),
    Entry("attention_backward", "wrong", "nan_rows_without_keys",
          "uses torch.softmax on rows that are all -inf (causal, N_q > N_k), which gives NaN, "
          "so those rows' gradients are NaN instead of zero", ab_nan_rows_without_keys),
    Entry("attention_backward", "wrong", "dot_T_reverses_all_axes",
          "uses .T to transpose, which on a batched tensor reverses all axes instead of "
          "swapping the last two, so every batched input raises a shape error",
          ab_dot_T),
    Entry("attention_backward", "right", "einsum_float64", None, ab_einsum_float64),
    Entry("attention_backward", "right", "delta_from_output", None, ab_delta_from_output),

    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "recomputation adds 4 N^2 d, the whole forward, but only the scores q k^T "
          "(2 N^2 d) are recomputed", abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "multiply_add_as_one",
          "counts one FLOP per multiply-add, half the contract's count",
          abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "a + b if recompute else 0 parses as (a + b) if recompute else 0, so "
          "recompute=False returns 0", abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "float_from_ratio",
          "multiplies the forward count by 2.5, which returns a float instead of a plain int",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "caret_as_power",
          "writes seq_len ^ 2, which is bitwise XOR in Python (and binds looser than *), "
          "not a square", abf_caret_power),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "adds the 2 N^2 d recomputation when recompute is False and leaves it out when it "
          "is True", abf_flag_inverted),
    Entry("attention_backward_flops", "right", "list_of_products", None, abf_list_of_products),
    Entry("attention_backward_flops", "right", "ratio_of_forward", None, abf_ratio_of_forward),

    Entry("flash_attention_backward", "wrong", "row_term_per_block",
          "computes the row term as rowsum(grad_p * p) inside each key block, a partial sum, "
          "instead of delta = rowsum(grad_out * out) over the whole row", fab_blockwise_delta),
    Entry("flash_attention_backward", "wrong", "no_guard_for_empty_rows",
          "lse is used as it is, so a row with no visible key computes exp(-inf - (-inf)) = "
          "NaN instead of zero probabilities", fab_no_neg_inf_guard),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "grad_q = grad_s @ k_blk overwrites grad_q in each block instead of adding up the "
          "contributions of all key blocks", fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "lse_not_unsqueezed",
          "subtracts lse (B, H, N) from the (B, H, N_q, block) scores without a trailing "
          "axis, so it is broadcast along the keys: a shape error, or wrong rows when the "
          "block is as wide as N", fab_lse_not_unsqueezed),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "the causal mask compares key index with the raw query index, forgetting the "
          "N_k - N_q offset of the bottom-right convention", fab_causal_top_left),
    Entry("flash_attention_backward", "wrong", "grad_k_missing_scale",
          "grad_k is grad_s^T @ q with the unscaled q, missing the 1/sqrt(d) factor",
          fab_grad_k_unscaled),
    Entry("flash_attention_backward", "right", "two_d_tiles_float64", None, fab_two_d_tiles_f64),
    Entry("flash_attention_backward", "right", "einsum_key_blocks", None, fab_einsum_key_blocks),
]
