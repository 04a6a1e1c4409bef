"""Round l, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math
from fractions import Fraction

import numpy as np
import torch

from entry import Entry

S = "softmax_backward"
A = "attention_backward"
N = "attention_backward_flops"
FB = "flash_attention_backward"


def _work(dtype):
    return torch.promote_types(dtype, torch.float32)


# ============================================================ softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    p = weights.to(_work(weights.dtype))
    g = grad_weights.to(p.dtype)
    dot = (p * g).sum(dim=-1)
    return (p * (g - dot)).to(weights.dtype)


def sb_sum_dim0(weights, grad_weights):
    p = weights.to(_work(weights.dtype))
    g = grad_weights.to(p.dtype)
    dot = (p * g).sum(0, keepdim=True)
    return (p * (g - dot)).to(weights.dtype)


def sb_log_softmax_formula(weights, grad_weights):
    p = weights.to(_work(weights.dtype))
    g = grad_weights.to(p.dtype)
    return (g - p * g.sum(-1, keepdim=True)).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    p = weights.to(_work(weights.dtype))
    g = grad_weights.to(p.dtype)
    row = torch.einsum("...n,...n->...", p, g).unsqueeze(-1)
    return (p * (row - g)).to(weights.dtype)


def sb_grad_times_jacobian(weights, grad_weights):
    p = weights.to(_work(weights.dtype))
    g = grad_weights.to(p.dtype)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return (g @ jac).to(weights.dtype)


def sb_renormalises(weights, grad_weights):
    p = weights.to(_work(weights.dtype))
    p = p / p.sum(-1, keepdim=True)
    g = grad_weights.to(p.dtype)
    return (p * (g - (p * g).sum(-1, keepdim=True))).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_explicit_jacobian_einsum(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag_embed(p) - torch.einsum("...i,...j->...ij", p, p)
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_numpy_float64(weights, grad_weights):
    p = weights.detach().cpu().to(torch.float64).numpy()
    g = grad_weights.detach().cpu().to(torch.float64).numpy()
    pg = p * g
    res = pg - p * np.add.reduce(pg, axis=-1, keepdims=True)
    return torch.from_numpy(np.ascontiguousarray(res)).to(weights.dtype)


# ============================================================ attention_backward helpers
def _visible(n_q, n_k):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def _safe_softmax(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


def _forward_bits(q, k, causal, work):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    s = q.to(work) @ k.to(work).transpose(-1, -2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_visible(n_q, n_k), -math.inf)
    return s


# ============================================================ attention_backward: wrong
def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    w = _work(q.dtype)
    d = q.shape[-1]
    p = _safe_softmax(_forward_bits(q, k, causal, w))
    g, vv = grad_out.to(w), v.to(w)
    dv = p.transpose(-1, -2) @ g
    dp = g @ vv.transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ k.to(w) / math.sqrt(d)
    dk = ds.transpose(-1, -2) @ q.to(w)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_grad_v_no_transpose(q, k, v, grad_out, causal=False):
    w = _work(q.dtype)
    scale = q.shape[-1] ** -0.5
    p = _safe_softmax(_forward_bits(q, k, causal, w))
    g = grad_out.to(w)
    dv = p @ g
    dp = g @ v.to(w).transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ k.to(w) * scale
    dk = ds.transpose(-1, -2) @ q.to(w) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    w = _work(q.dtype)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    scale = 1 / math.sqrt(d)
    s = q.to(w) @ k.to(w).transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n_q, n_k, dtype=torch.bool), 1), -math.inf)
    p = _safe_softmax(s)
    g = grad_out.to(w)
    dv = p.transpose(-1, -2) @ g
    dp = g @ v.to(w).transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ k.to(w) * scale).to(q.dtype), (ds.transpose(-1, -2) @ q.to(w) * scale).to(k.dtype),
            dv.to(v.dtype))


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    w = _work(q.dtype)
    scale = 1 / math.sqrt(q.shape[-1])
    p = _safe_softmax(_forward_bits(q, k, causal, w))
    g = grad_out.to(w)
    dv = p.transpose(-1, -2) @ g
    dp = g @ v.to(w).transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-2, keepdim=True))
    return ((ds @ k.to(w) * scale).to(q.dtype), (ds.transpose(-1, -2) @ q.to(w) * scale).to(k.dtype),
            dv.to(v.dtype))


def ab_torch_softmax_nan(q, k, v, grad_out, causal=False):
    w = _work(q.dtype)
    scale = 1 / math.sqrt(q.shape[-1])
    p = torch.softmax(_forward_bits(q, k, causal, w), dim=-1)
    g = grad_out.to(w)
    dv = p.transpose(-1, -2) @ g
    dp = g @ v.to(w).transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ k.to(w) * scale).to(q.dtype), (ds.transpose(-1, -2) @ q.to(w) * scale).to(k.dtype),
            dv.to(v.dtype))


def ab_returns_float32(q, k, v, grad_out, causal=False):
    q32, k32, v32, g32 = (t.float() for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(q.shape[-1])
    s = q32 @ k32.transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), -math.inf)
    p = _safe_softmax(s)
    dv = p.transpose(-1, -2) @ g32
    dp = g32 @ v32.transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ k32 * scale, ds.transpose(-1, -2) @ q32 * scale, dv


# ============================================================ attention_backward: right
def ab_einsum_float64(q, k, v, grad_out, causal=False):
    f = torch.float64
    qd, kd, vd, gd = (t.to(f) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    s = torch.einsum("...id,...jd->...ij", qd, kd) / math.sqrt(d)
    if causal:
        s = torch.where(_visible(n_q, n_k), s, torch.tensor(-math.inf, dtype=f))
    p = _safe_softmax(s)
    grad_v = torch.einsum("...ij,...ie->...je", p, gd)
    grad_p = torch.einsum("...ie,...je->...ij", gd, vd)
    jac_row = torch.einsum("...ij,...ij->...i", grad_p, p)[..., None]
    grad_s = p * (grad_p - jac_row) / math.sqrt(d)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, kd)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, qd)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_delta_from_out(q, k, v, grad_out, causal=False):
    f = torch.float64
    qd, kd, vd, gd = q.double(), k.double(), v.double(), grad_out.double()
    d = q.shape[-1]
    s = qd @ kd.transpose(-1, -2) / math.sqrt(d)
    if causal:
        allowed = _visible(q.shape[-2], k.shape[-2])
        s = s.masked_fill(~allowed, -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    lse = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse)
    p = torch.exp(s - lse)  # rows with no key: exp(-inf - inf) = 0
    out = p @ vd
    delta = (gd * out).sum(-1, keepdim=True)
    grad_s = p * (gd @ vd.transpose(-1, -2) - delta)
    return ((grad_s @ kd / math.sqrt(d)).to(q.dtype),
            (grad_s.transpose(-1, -2) @ qd / math.sqrt(d)).to(k.dtype),
            (p.transpose(-1, -2) @ gd).to(v.dtype))


# ============================================================ attention_backward_flops: wrong
def flops_recompute_whole_forward(seq_len, head_dim, recompute=True):
    backward = 4 * 2 * seq_len * seq_len * head_dim
    if recompute:
        backward += 4 * seq_len * seq_len * head_dim
    return backward


def flops_macs(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def flops_ratio_float(seq_len, head_dim, recompute=True):
    backward = 8 * seq_len ** 2 * head_dim
    return backward * 1.25 if recompute else backward


def flops_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n ** 2 * d + 2 * n ** 2 * d if recompute else 0


def flops_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    total = 3 * per_product  # grad_v, grad_q, grad_k
    if recompute:
        total += per_product
    return total


def flops_guard_not_none(seq_len, head_dim, recompute=True):
    total = 8 * seq_len * seq_len * head_dim
    if recompute is not None:
        total += 2 * seq_len * seq_len * head_dim
    return total


# ============================================================ attention_backward_flops: right
def flops_product_shapes(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * c for m, kk, c in shapes)


def flops_fraction_ratio(seq_len, head_dim, recompute=True):
    forward = Fraction(4 * seq_len * seq_len * head_dim)
    ratio = Fraction(5, 2) if recompute else Fraction(2)
    total = forward * ratio
    return int(total)


# ============================================================ flash_attention_backward helpers
def _lse_col(lse, work):
    col = lse.to(work)[..., None]
    return torch.where(torch.isneginf(col), torch.full_like(col, math.inf), col)


# ============================================================ flash_attention_backward: wrong
def fb_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    w = _work(q.dtype)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(w) / math.sqrt(d)
    g = grad_out.to(w)
    delta = (g * out.to(w)).sum(-1, keepdim=True)
    L = lse.to(w)[..., None]
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=w)
    dv = torch.zeros(v.shape, dtype=w)
    for j in range(0, n_k, block_size):
        kb, vb = k[..., j:j + block_size, :].to(w), v[..., j:j + block_size, :].to(w)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[-2])[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., j:j + block_size, :] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb
        dk[..., j:j + block_size, :] = ds.transpose(-1, -2) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    w = _work(q.dtype)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(w) / math.sqrt(d)
    g = grad_out.to(w)
    L = _lse_col(lse, w)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=w)
    dv = torch.zeros(v.shape, dtype=w)
    for j in range(0, n_k, block_size):
        kb, vb = k[..., j:j + block_size, :].to(w), v[..., j:j + block_size, :].to(w)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[-2])[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., j:j + block_size, :] = p.transpose(-1, -2) @ g
        dp = g @ vb.transpose(-1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq += ds @ kb
        dk[..., j:j + block_size, :] = ds.transpose(-1, -2) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    w = _work(q.dtype)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(w) / math.sqrt(d)
    g = grad_out.to(w)
    delta = (g * out.to(w)).sum(-1, keepdim=True)
    L = _lse_col(lse, w)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=w)
    dv = torch.zeros(v.shape, dtype=w)
    for j in range(0, n_k, block_size):
        kb, vb = k[..., j:j + block_size, :].to(w), v[..., j:j + block_size, :].to(w)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[-2])[None, :] > qpos, -math.inf)
        p = torch.exp2(s - L)
        dv[..., j:j + block_size, :] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb
        dk[..., j:j + block_size, :] = ds.transpose(-1, -2) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_k_scaled_twice(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    w = _work(q.dtype)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    qs = q.to(w) * scale
    g = grad_out.to(w)
    delta = (g * out.to(w)).sum(-1, keepdim=True)
    L = _lse_col(lse, w)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=w)
    dv = torch.zeros(v.shape, dtype=w)
    for j in range(0, n_k, block_size):
        kb, vb = k[..., j:j + block_size, :].to(w), v[..., j:j + block_size, :].to(w)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[-2])[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[..., j:j + block_size, :] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb
        dk[..., j:j + block_size, :] = ds.transpose(-1, -2) @ qs
    return (dq * scale).to(q.dtype), (dk * scale).to(k.dtype), dv.to(v.dtype)


def fb_delta_extra_pass(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    w = _work(q.dtype)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(w) / math.sqrt(d)
    g = grad_out.to(w)
    L = _lse_col(lse, w)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q

    def block(j):
        kb, vb = k[..., j:j + block_size, :].to(w), v[..., j:j + block_size, :].to(w)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[-2])[None, :] > qpos, -math.inf)
        return kb, vb, torch.exp(s - L)

    delta = torch.zeros(q.shape[:-1] + (1,), dtype=w)
    for j in range(0, n_k, block_size):
        _, vb, p = block(j)
        delta += ((g @ vb.transpose(-1, -2)) * p).sum(-1, keepdim=True)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=w)
    dv = torch.zeros(v.shape, dtype=w)
    for j in range(0, n_k, block_size):
        kb, vb, p = block(j)
        dv[..., j:j + block_size, :] = p.transpose(-1, -2) @ g
        ds = p * (g @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb
        dk[..., j:j + block_size, :] = ds.transpose(-1, -2) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_tiles_overwrite(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    w = _work(q.dtype)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q.to(w) / math.sqrt(d)
    g = grad_out.to(w)
    delta = (g * out.to(w)).sum(-1, keepdim=True)
    L = _lse_col(lse, w)
    dq = torch.zeros_like(qs)
    dk = torch.zeros(k.shape, dtype=w)
    dv = torch.zeros(v.shape, dtype=w)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        kb, vb = k[..., j0:j1, :].to(w), v[..., j0:j1, :].to(w)
        for i0 in range(0, n_q, block_size):
            i1 = min(i0 + block_size, n_q)
            s = qs[..., i0:i1, :] @ kb.transpose(-1, -2)
            if causal:
                qpos = torch.arange(i0, i1)[:, None] + n_k - n_q
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > qpos, -math.inf)
            p = torch.exp(s - L[..., i0:i1, :])
            gi = g[..., i0:i1, :]
            dv[..., j0:j1, :] = p.transpose(-1, -2) @ gi
            ds = p * (gi @ vb.transpose(-1, -2) - delta[..., i0:i1, :])
            dq[..., i0:i1, :] += ds @ kb
            dk[..., j0:j1, :] = ds.transpose(-1, -2) @ qs[..., i0:i1, :]
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_two_level_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    f = torch.float64
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    qd, kd, vd, gd = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    delta = (gd * out.to(f)).sum(-1, keepdim=True)
    L = _lse_col(lse, f)
    dq = torch.zeros(q.shape, dtype=f)
    dk = torch.zeros(k.shape, dtype=f)
    dv = torch.zeros(v.shape, dtype=f)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qi = qd[..., i0:i1, :]
        gi = gd[..., i0:i1, :]
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            s = (qi @ kd[..., j0:j1, :].transpose(-1, -2)) * scale
            if causal:
                seen = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None] + (n_k - n_q)
                s = torch.where(seen, s, torch.tensor(-math.inf, dtype=f))
            p = torch.exp(s - L[..., i0:i1, :])
            dv[..., j0:j1, :] += p.transpose(-1, -2) @ gi
            ds = p * (gi @ vd[..., j0:j1, :].transpose(-1, -2) - delta[..., i0:i1, :])
            dq[..., i0:i1, :] += ds @ kd[..., j0:j1, :]
            dk[..., j0:j1, :] += ds.transpose(-1, -2) @ qi
    return ((dq * scale).to(q.dtype), (dk * scale).to(k.dtype), dv.to(v.dtype))


def fb_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    f = torch.float64
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    r = 1.0 / math.sqrt(d)
    qd, gd = q.to(f), grad_out.to(f)
    delta = torch.einsum("bhqd,bhqd->bhq", gd, out.to(f)).unsqueeze(-1)
    lse_d = lse.to(f).unsqueeze(-1)
    empty = torch.isneginf(lse_d)
    dq = torch.zeros(q.shape, dtype=f)
    dks, dvs = [], []
    qpos = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(f)
        vb = v[:, :, start:start + block_size].to(f)
        s = torch.einsum("bhqd,bhkd->bhqk", qd, kb) * r
        if causal:
            kpos = torch.arange(start, start + kb.shape[2]).unsqueeze(0)
            s = s.masked_fill(kpos > qpos, -math.inf)
        p = torch.where(empty, torch.zeros_like(s), torch.exp(s - lse_d))
        dvs.append(torch.einsum("bhqk,bhqd->bhkd", p, gd))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", gd, vb) - delta)
        dq += torch.einsum("bhqk,bhkd->bhqd", ds, kb) * r
        dks.append(torch.einsum("bhqk,bhqd->bhkd", ds, qd) * r)
    return dq.to(q.dtype), torch.cat(dks, 2).to(k.dtype), torch.cat(dvs, 2).to(v.dtype)


ENTRIES = [
    Entry(S, "wrong", "row_term_without_keepdim",
          "Sums p * g over the last axis without keepdim=True, so the row term broadcasts "
          "against the wrong axis: it raises for non-square inputs and silently mixes rows "
          "for square ones.",
          sb_no_keepdim),
    Entry(S, "wrong", "row_term_over_axis0",
          "Takes the sum of p * g over dim 0 instead of the last axis, so the row term mixes "
          "different rows rather than summing within each softmax row.",
          sb_sum_dim0),
    Entry(S, "wrong", "log_softmax_backward_formula",
          "Uses the log-softmax backward g - p * sum(g) instead of the softmax backward "
          "p * (g - sum(p * g)).",
          sb_log_softmax_formula),
    Entry(S, "wrong", "sign_flipped",
          "Computes p * (sum(p * g) - g), the negative of the gradient: the two terms of the "
          "bracket are the wrong way round.",
          sb_sign_flipped),
    Entry(S, "wrong", "grad_matrix_times_batched_jacobian",
          "Multiplies the whole (..., n) gradient by the batched (..., n, n) Jacobian with @, "
          "which broadcasts every row of grad against every row's Jacobian (wrong shape) "
          "instead of a per-row matrix-vector product.",
          sb_grad_times_jacobian),
    Entry(S, "wrong", "renormalises_weights",
          "Renormalises the weights by their row sum first, which turns a fully masked row "
          "of zeros into 0/0 = NaN instead of a zero gradient.",
          sb_renormalises),
    Entry(S, "right", "explicit_jacobian_einsum_float64", None, sb_explicit_jacobian_einsum),
    Entry(S, "right", "numpy_float64", None, sb_numpy_float64),

    Entry(A, "wrong", "grad_k_missing_scale",
          "Applies the 1/sqrt(d) factor to grad_q but forgets it in grad_k = grad_s^T q.",
          ab_grad_k_unscaled),
    Entry(A, "wrong", "grad_v_without_transpose",
          "Computes grad_v as p @ grad_out instead of p^T @ grad_out, which raises a shape "
          "error when N_q != N_k and gives wrong values when they are equal.",
          ab_grad_v_no_transpose),
    Entry(A, "wrong", "causal_mask_top_left",
          "Masks with triu(ones(N_q, N_k), 1), a top-left aligned causal mask, instead of the "
          "bottom-right alignment j <= i + N_k - N_q.",
          ab_causal_top_left),
    Entry(A, "wrong", "row_term_over_queries",
          "Sums grad_p * p over dim -2 (the queries) instead of over the keys of each row in "
          "the softmax backward.",
          ab_row_term_wrong_axis),
    Entry(A, "wrong", "torch_softmax_on_empty_rows",
          "Uses torch.softmax on the masked scores, which returns NaN for a query row with "
          "no visible key, so the gradients fill with NaN instead of zeros.",
          ab_torch_softmax_nan),
    Entry(A, "wrong", "returns_float32",
          "Computes in float32 and returns the float32 gradients, so the result does not "
          "have the inputs' dtype (float64 and half precision alike).",
          ab_returns_float32),
    Entry(A, "right", "einsum_float64", None, ab_einsum_float64),
    Entry(A, "right", "delta_from_recomputed_out", None, ab_delta_from_out),

    Entry(N, "wrong", "recompute_whole_forward",
          "Adds the whole forward, 4 N^2 d, for the recomputation, although FlashAttention "
          "only recomputes the scores q k^T (2 N^2 d).",
          flops_recompute_whole_forward),
    Entry(N, "wrong", "multiply_add_as_one",
          "Counts one multiply-add as one FLOP, so every product is N^2 d instead of "
          "2 N^2 d and the total is halved.",
          flops_macs),
    Entry(N, "wrong", "float_ratio",
          "Multiplies the backward by the ratio 1.25 for recomputation, which returns a "
          "float instead of a plain int.",
          flops_ratio_float),
    Entry(N, "wrong", "conditional_expression_precedence",
          "Writes 8 N^2 d + 2 N^2 d if recompute else 0, where the conditional expression "
          "binds loosest, so recompute=False returns 0 instead of 8 N^2 d.",
          flops_conditional_precedence),
    Entry(N, "wrong", "forgets_grad_p_product",
          "Counts three products (grad_v, grad_q, grad_k) and forgets grad_p = grad_out v^T, "
          "so the backward comes out as 6 N^2 d instead of 8 N^2 d.",
          flops_three_products),
    Entry(N, "wrong", "recompute_tested_against_none",
          "Tests `recompute is not None`, which is also true for recompute=False, so the "
          "recomputation is always added.",
          flops_guard_not_none),
    Entry(N, "right", "sum_over_product_shapes", None, flops_product_shapes),
    Entry(N, "right", "fraction_ratio_of_forward", None, flops_fraction_ratio),

    Entry(FB, "wrong", "no_guard_for_empty_rows",
          "Computes exp(s - lse) without guarding rows whose lse is -inf, so a query with no "
          "visible key gives exp(-inf - (-inf)) = NaN instead of zero probabilities.",
          fb_no_lse_guard),
    Entry(FB, "wrong", "delta_from_current_block",
          "Computes the row term as rowsum(grad_p * p) over the current key block only "
          "instead of delta = rowsum(grad_out * out) over all keys.",
          fb_block_local_delta),
    Entry(FB, "wrong", "exp2_with_natural_lse",
          "Recomputes the probabilities with exp2 as base-2 kernels do, although lse here is "
          "a natural-log log-sum-exp.",
          fb_exp2),
    Entry(FB, "wrong", "grad_k_scaled_twice",
          "Builds grad_k from the already scaled q and then multiplies it by 1/sqrt(d) again, "
          "scaling grad_k twice.",
          fb_grad_k_scaled_twice),
    Entry(FB, "wrong", "delta_by_extra_pass",
          "Computes delta in a separate first pass over the key blocks, recomputing the "
          "scores and grad_p, which spends about 14 N^2 d in matrix products instead of "
          "staying within one recomputation (10 N^2 d).",
          fb_delta_extra_pass),
    Entry(FB, "wrong", "tiles_overwrite_grad_k_v",
          "Tiles over query blocks too but assigns grad_k and grad_v for each (query, key) "
          "tile instead of accumulating them, so only the last query block's contribution "
          "survives.",
          fb_tiles_overwrite),
    Entry(FB, "right", "two_level_tiles_float64", None, fb_two_level_tiles),
    Entry(FB, "right", "einsum_key_blocks_float64", None, fb_einsum_key_blocks),
]
