"""Round m catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import numpy as np
import torch

from entry import Entry


# ===================================================================== softmax_backward: wrong
def sb_returns_compute_dtype(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return p * (g - (g * p).sum(dim=-1, keepdim=True))


def sb_sum_without_dim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = torch.sum(g * p)  # <g, p>
    return (p * (g - row)).to(weights.dtype)


def sb_softmax_reapplied(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = torch.softmax(weights.to(ct), dim=-1)
    g = grad_weights.to(ct)
    return (p * (g - (p * g).sum(-1, keepdim=True))).to(weights.dtype)


def sb_renormalised_rows(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    p = p / p.sum(dim=-1, keepdim=True)  # make sure each row is a distribution
    g = grad_weights.to(ct)
    return (p * (g - (g * p).sum(dim=-1, keepdim=True))).to(weights.dtype)


def sb_missing_parentheses(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1, keepdim=True)
    return (p * g - row).to(weights.dtype)


def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


# ===================================================================== softmax_backward: right
def sb_explicit_jacobian(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n), symmetric
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_numpy_einsum(weights, grad_weights):
    p = weights.detach().cpu().to(torch.float64).numpy()
    g = grad_weights.detach().cpu().to(torch.float64).numpy()
    inner = np.einsum("...i,...i->...", p, g)[..., None]
    return torch.from_numpy(p * g - p * inner).to(weights.dtype)


# =================================================================== attention_backward: wrong
def _rows_softmax(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


def ab_topleft_mask(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    s = qf @ kf.transpose(-2, -1) * scale
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril()
        s = s.masked_fill(~allowed, -math.inf)
    p = _rows_softmax(s)
    dv = p.transpose(-2, -1) @ gf
    dp = gf @ vf.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return (ds @ kf * scale).to(q.dtype), (ds.transpose(-2, -1) @ qf * scale).to(k.dtype), \
        dv.to(v.dtype)


def ab_double_scaled_grad_k(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = d ** -0.5
    q_s = q.to(ct) * scale  # scale the queries once, up front
    k_, v_, g_ = k.to(ct), v.to(ct), grad_out.to(ct)
    scores = q_s @ k_.transpose(-2, -1)
    if causal:
        scores = scores.masked_fill(
            torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q).logical_not(), -math.inf)
    p = _rows_softmax(scores)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_s * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = torch.einsum("...qd,...kd->...qk", q_, k_) / math.sqrt(d)
    if causal:
        future = torch.arange(n_k)[None, :] > torch.arange(n_q)[:, None] + (n_k - n_q)
        s = s.masked_fill(future, float("-inf"))
    p = torch.softmax(s, dim=-1)
    grad_v = torch.einsum("...qk,...qe->...ke", p, g_)
    grad_p = torch.einsum("...qe,...ke->...qk", g_, v_)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = torch.einsum("...qk,...kd->...qd", grad_s, k_) / math.sqrt(d)
    grad_k = torch.einsum("...qk,...qd->...kd", grad_s, q_) / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    sc = 1 / math.sqrt(d)
    s = q_ @ k_.transpose(-1, -2) * sc
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = _rows_softmax(s)
    gv = p.transpose(-1, -2) @ g_
    gp = g_ @ v_.transpose(-1, -2)
    gs = p * (gp - (gp * p).sum(dim=-2, keepdim=True))
    return (gs @ k_ * sc).to(q.dtype), (gs.transpose(-1, -2) @ q_ * sc).to(k.dtype), gv.to(v.dtype)


def ab_mask_after_softmax(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    p = torch.softmax(q_ @ k_.transpose(-2, -1) * scale, dim=-1)
    if causal:
        visible = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        p = p * visible  # no weight on hidden keys
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))
    return (grad_s @ k_ * scale).to(q.dtype), (grad_s.transpose(-2, -1) @ q_ * scale).to(
        k.dtype), grad_v.to(v.dtype)


def ab_scale_precedence(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = 1 / d ** 1 / 2
    s = (q_ @ k_.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1), -math.inf)
    p = _rows_softmax(s)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ k_) * scale).to(q.dtype), ((grad_s.transpose(-2, -1) @ q_) * scale).to(
        k.dtype), grad_v.to(v.dtype)


# =================================================================== attention_backward: right
def ab_einsum_delta_float64(q, k, v, grad_out, causal=False):
    f = torch.float64
    q_, k_, v_, g_ = (t.to(f) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        ok = torch.arange(n_k)[None, :] - torch.arange(n_q)[:, None] <= n_k - n_q
        s = torch.where(ok, s, torch.tensor(-math.inf, dtype=f))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse))
    p = torch.where(torch.isinf(lse), torch.zeros_like(p), p)
    out = torch.einsum("...ij,...je->...ie", p, v_)
    delta = (g_ * out).sum(-1, keepdim=True)  # = rowsum(grad_p * p)
    grad_p = torch.einsum("...ie,...je->...ij", g_, v_)
    grad_s = p * (grad_p - delta)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, k_) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, q_) / math.sqrt(d)
    grad_v = torch.einsum("...ij,...ie->...je", p, g_)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_numpy_loop(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Q = q.detach().cpu().double().reshape(-1, n_q, d).numpy()
    K = k.detach().cpu().double().reshape(-1, n_k, d).numpy()
    V = v.detach().cpu().double().reshape(-1, n_k, d_v).numpy()
    G = grad_out.detach().cpu().double().reshape(-1, n_q, d_v).numpy()
    gq, gk, gv = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for b in range(Q.shape[0]):
        for i in range(n_q):
            last = i + n_k - n_q if causal else n_k - 1
            if last < 0:
                continue  # no visible key: out row is 0, no gradient
            keys = slice(0, last + 1)
            s = K[b, keys] @ Q[b, i] / math.sqrt(d)
            p = np.exp(s - s.max())
            p /= p.sum()
            gv[b, keys] += np.outer(p, G[b, i])
            gp = V[b, keys] @ G[b, i]
            gs = p * (gp - p @ gp)
            gq[b, i] = gs @ K[b, keys] / math.sqrt(d)
            gk[b, keys] += np.outer(gs, Q[b, i]) / math.sqrt(d)
    return (torch.from_numpy(gq).reshape(*lead, n_q, d).to(q.dtype),
            torch.from_numpy(gk).reshape(*lead, n_k, d).to(k.dtype),
            torch.from_numpy(gv).reshape(*lead, n_k, d_v).to(v.dtype))


# ============================================================= attention_backward_flops: wrong
def abf_macs(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len ** 2 * head_dim
    if recompute:
        backward += 4 * seq_len ** 2 * head_dim  # redo the forward
    return backward


def abf_inverted_flag(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len * seq_len * head_dim
    if not recompute:
        flops += 2 * seq_len * seq_len * head_dim
    return flops


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 8 * n2d + 2 * n2d if recompute else 0


def abf_squares_head_dim(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim ** 2
    return per_product * (5 if recompute else 4)


# ============================================================= attention_backward_flops: right
def abf_product_shapes(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    products = [(n, n, d),  # grad_v = p^T grad_out: (N_k x N_q) @ (N_q x d)
                (n, d, n),  # grad_p = grad_out v^T
                (n, n, d),  # grad_q = grad_s k
                (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        products.append((n, d, n))  # s = q k^T
    return sum(2 * m * kk * nn for m, kk, nn in products)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return seq_len * seq_len * head_dim * (10 if recompute else 8)


# ============================================================= flash_attention_backward: wrong
def fb_lse_inf_nan(q, k, v, out, lse, grad_out, block_size=64, causal=False):
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
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_strict_mask(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    q_s = q.to(compute) * scale
    g = grad_out.to(compute)
    delta = (g * out.to(compute)).sum(dim=-1, keepdim=True)
    lse_ = lse.to(compute).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    q_pos = torch.arange(n_q)[:, None] + n_k - n_q
    grad_q = torch.zeros_like(q_s)
    grad_k = torch.empty(k.shape, dtype=compute)
    grad_v = torch.empty(v.shape, dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_b, v_b = k[..., start:stop, :].to(compute), v[..., start:stop, :].to(compute)
        s = q_s @ k_b.transpose(-2, -1)
        if causal:
            k_pos = torch.arange(start, stop)[None, :]
            s = s.masked_fill(k_pos >= q_pos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g
        grad_s = p * (g @ v_b.transpose(-2, -1) - delta)
        grad_q += grad_s @ k_b
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_s
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    sc = d ** -0.5
    q_s = q.to(ct) * sc
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    lse_ = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
    q_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q_s)
    gk_blocks, gv_blocks = [], []
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb = k[:, :, lo:hi].to(ct)
        vb = v[:, :, lo:hi].to(ct)
        s = q_s @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > q_pos, -math.inf)
        p = torch.exp(s - lse_)
        gv_blocks.append(p.transpose(-2, -1) @ g)
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q = gs @ kb
        gk_blocks.append(gs.transpose(-2, -1) @ q_s)
    grad_k = torch.cat(gk_blocks, dim=2)
    grad_v = torch.cat(gv_blocks, dim=2)
    return (grad_q * sc).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_delta_no_keepdim(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1)  # one number per query row
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
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_recomputes_out(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def block_p(lo, hi):
        s = qs @ k[..., lo:hi, :].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        return torch.exp(s - lse_)

    # first pass: rebuild the forward output to get delta = rowsum(grad_out * out)
    o = torch.zeros(q.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        o += block_p(lo, hi) @ v[..., lo:hi, :].to(ct)
    delta = (g * o).sum(-1, keepdim=True)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        p = block_p(lo, hi)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qs
    return (dq * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_unscaled_scores(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    qf = q.to(ct)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qf)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb, vb = k[..., lo:hi, :].to(ct), v[..., lo:hi, :].to(ct)
        s = qf @ kb.transpose(-2, -1)  # scale applied to the gradients below
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., lo:hi, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., lo:hi, :] = ds.transpose(-2, -1) @ qf
    return (dq * scale).to(q.dtype), (dk * scale).to(k.dtype), dv.to(v.dtype)


# ============================================================= flash_attention_backward: right
def fb_two_level_tiles_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over query blocks and key blocks (as a GPU kernel would), in float64."""
    f = torch.float64
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    r = 1.0 / math.sqrt(d)
    Q, K, V, O, G = (t.to(f) for t in (q, k, v, out, grad_out))
    L = torch.where(torch.isneginf(lse.to(f)), torch.tensor(math.inf, dtype=f), lse.to(f))
    D = (G * O).sum(-1)  # (B, H, N_q)
    dQ = torch.zeros(Q.shape, dtype=f)
    dK = torch.zeros(K.shape, dtype=f)
    dV = torch.zeros(V.shape, dtype=f)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kj, Vj = K[..., j0:j1, :], V[..., j0:j1, :]
        for i0 in range(0, n_q, block_size):
            i1 = min(i0 + block_size, n_q)
            S = torch.einsum("bhid,bhjd->bhij", Q[..., i0:i1, :], Kj) * r
            if causal:
                hide = torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None] + (n_k - n_q)
                S = S.masked_fill(hide, -math.inf)
            P = torch.exp(S - L[..., i0:i1, None])
            Gi = G[..., i0:i1, :]
            dV[..., j0:j1, :] += torch.einsum("bhij,bhie->bhje", P, Gi)
            dP = torch.einsum("bhie,bhje->bhij", Gi, Vj)
            dS = P * (dP - D[..., i0:i1, None])
            dQ[..., i0:i1, :] += torch.einsum("bhij,bhjd->bhid", dS, Kj) * r
            dK[..., j0:j1, :] += torch.einsum("bhij,bhid->bhjd", dS, Q[..., i0:i1, :]) * r
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_per_head_loop(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """One (batch, head) at a time with 2-D matrices; the scale is folded into k once."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.float64
    gq = torch.zeros((B, H, n_q, d), dtype=f)
    gk = torch.zeros((B, H, n_k, d), dtype=f)
    gv = torch.zeros((B, H, n_k, v.shape[-1]), dtype=f)
    inv = 1.0 / math.sqrt(d)
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    for b in range(B):
        for h in range(H):
            Q = q[b, h].to(f)
            G = grad_out[b, h].to(f)
            delta = torch.einsum("ie,ie->i", G, out[b, h].to(f))[:, None]
            lrow = lse[b, h].to(f)
            lrow = torch.where(torch.isinf(lrow), torch.full_like(lrow, math.inf), lrow)[:, None]
            for s0 in range(0, n_k, block_size):
                s1 = min(s0 + block_size, n_k)
                Ks = k[b, h, s0:s1].to(f) * inv  # scaled keys
                Vs = v[b, h, s0:s1].to(f)
                S = Q @ Ks.T
                if causal:
                    S = torch.where(torch.arange(s0, s1)[None, :] <= rows, S,
                                    torch.tensor(-math.inf, dtype=f))
                P = torch.exp(S - lrow)
                gv[b, h, s0:s1] = P.T @ G
                dS = P * (G @ Vs.T - delta)
                gq[b, h] += dS @ Ks  # carries one factor 1/sqrt(d) through Ks
                gk[b, h, s0:s1] = (dS.T @ Q) * inv
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


ENTRIES = [
    # softmax_backward
    Entry("softmax_backward", "wrong", "returns_compute_dtype",
          "It upcasts to float32 for the arithmetic but never casts back, so float16/bfloat16 "
          "inputs give a float32 gradient instead of weights' dtype.",
          sb_returns_compute_dtype),
    Entry("softmax_backward", "wrong", "sum_without_dim",
          "torch.sum(g * p) with no dim sums over every element of the tensor, so with more than "
          "one row each row's term is the total over all rows instead of its own <g, p>.",
          sb_sum_without_dim),
    Entry("softmax_backward", "wrong", "softmax_reapplied",
          "It applies softmax to weights again, treating the given probabilities as scores, so "
          "the formula uses softmax(p) instead of p.",
          sb_softmax_reapplied),
    Entry("softmax_backward", "wrong", "renormalised_rows",
          "It renormalises each row by its sum before using it, which divides 0 by 0 on a fully "
          "masked row and returns NaN there instead of zeros.",
          sb_renormalised_rows),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "It computes p * g - row instead of p * (g - row): the row term is subtracted without "
          "being multiplied by p.",
          sb_missing_parentheses),
    Entry("softmax_backward", "wrong", "row_term_no_keepdim",
          "The row term is summed without keepdim, so its shape (..., ) lines up with the last "
          "axis: a shape error when the row count differs from n, and each column gets another "
          "row's term when they are equal.",
          sb_no_keepdim),
    Entry("softmax_backward", "right", "explicit_jacobian_float64", None, sb_explicit_jacobian),
    Entry("softmax_backward", "right", "numpy_einsum", None, sb_numpy_einsum),
    # attention_backward
    Entry("attention_backward", "wrong", "top_left_causal_mask",
          "The causal mask is tril() aligned top-left, not bottom-right (tril(N_k - N_q)), so "
          "with N_q != N_k queries see the wrong keys.",
          ab_topleft_mask),
    Entry("attention_backward", "wrong", "double_scaled_grad_k",
          "It reuses the pre-scaled queries q / sqrt(d) in grad_k and multiplies by 1/sqrt(d) "
          "again, so grad_k carries the scale twice.",
          ab_double_scaled_grad_k),
    Entry("attention_backward", "wrong", "softmax_nan_rows",
          "It uses torch.softmax on the masked scores, which gives NaN for a query row whose keys "
          "are all masked (causal, N_q > N_k), instead of zero weights and zero gradients.",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "row_term_over_queries",
          "The softmax row term rowsum(grad_p * p) is summed over dim -2 (the queries) instead of "
          "-1 (the keys).",
          ab_row_term_wrong_axis),
    Entry("attention_backward", "wrong", "mask_after_softmax",
          "With causal=True it takes the softmax over all keys and then zeroes the hidden "
          "weights, so the visible weights no longer sum to 1 (the mask must go on the scores "
          "before the softmax).",
          ab_mask_after_softmax),
    Entry("attention_backward", "wrong", "scale_precedence",
          "1 / d ** 1 / 2 parses as (1 / d) / 2, so the scores and gradients are scaled by "
          "1/(2d) instead of 1/sqrt(d).",
          ab_scale_precedence),
    Entry("attention_backward", "right", "einsum_delta_float64", None, ab_einsum_delta_float64),
    Entry("attention_backward", "right", "numpy_per_row_loop", None, ab_numpy_loop),
    # attention_backward_flops
    Entry("attention_backward_flops", "wrong", "multiply_adds_not_flops",
          "It counts N^2 d per product (one multiply-add as one FLOP) instead of 2 N^2 d, halving "
          "the total.",
          abf_macs),
    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "With recompute it adds the whole forward, 4 N^2 d (q k^T and p v), but only the scores "
          "q k^T are recomputed: 2 N^2 d.",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "inverted_recompute_flag",
          "The condition is inverted (if not recompute), so the recomputation's 2 N^2 d is added "
          "exactly when it is not done.",
          abf_inverted_flag),
    Entry("attention_backward_flops", "wrong", "float_from_ratio",
          "It multiplies the forward by 2.5 or 2, which makes a float instead of the plain int the "
          "exercise asks for.",
          abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "The conditional expression binds loosest, so `8 n + 2 n if recompute else 0` returns "
          "0 when recompute is False instead of 8 N^2 d.",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "squares_head_dim",
          "Each product is counted as 2 N d^2 (the projection-style count) instead of 2 N^2 d: "
          "the square is on the wrong dimension.",
          abf_squares_head_dim),
    Entry("attention_backward_flops", "right", "sum_over_product_shapes", None,
          abf_product_shapes),
    Entry("attention_backward_flops", "right", "closed_form_int", None, abf_closed_form),
    # flash_attention_backward
    Entry("flash_attention_backward", "wrong", "lse_inf_nan",
          "It computes exp(s - lse) without guarding rows whose lse is -inf, so a query with no "
          "visible key gives exp(-inf - (-inf)) = NaN instead of zero probabilities.",
          fb_lse_inf_nan),
    Entry("flash_attention_backward", "wrong", "strict_causal_mask",
          "The causal mask hides keys with key_pos >= query_pos, so each query's own (diagonal) "
          "key is masked out and the recomputed probabilities no longer match the forward's lse.",
          fb_strict_mask),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "grad_q is assigned (=) in every key block instead of accumulated (+=), so only the "
          "last block's contribution survives.",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "delta_no_keepdim",
          "delta is summed without keepdim, so its (B, H, N) shape lines up with the key-block "
          "axis of grad_p: a shape error when N differs from the block width, and the wrong "
          "query's delta per column when they are equal.",
          fb_delta_no_keepdim),
    Entry("flash_attention_backward", "wrong", "recomputes_out_for_delta",
          "It ignores the given out and rebuilds it in a first pass over the key blocks (scores "
          "and p @ v again) just to form delta, so its matrix products cost about 14 N^2 d per "
          "head instead of one recomputation's 10 N^2 d.",
          fb_recomputes_out),
    Entry("flash_attention_backward", "wrong", "unscaled_scores_vs_lse",
          "It recomputes the scores without the 1/sqrt(d) (applying it to the gradients instead), "
          "but lse is the log-sum-exp of the scaled scores, so exp(s - lse) are not the forward's "
          "probabilities.",
          fb_unscaled_scores),
    Entry("flash_attention_backward", "right", "two_level_tiles_float64", None,
          fb_two_level_tiles_float64),
    Entry("flash_attention_backward", "right", "per_head_loop_scaled_keys", None,
          fb_per_head_loop),
]
