"""Lesson 12 (backward, torch): softmax_backward, attention_backward, attention_backward_flops,
flash_attention_backward."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


def _compute(dtype):
    return torch.promote_types(dtype, torch.float32)


# ============================================================================ softmax_backward
def sb_ref_like(weights, grad_weights):
    c = _compute(weights.dtype)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).sum(-1, keepdim=True))).to(weights.dtype)


def sb_w_normalised_row(weights, grad_weights):
    c = _compute(weights.dtype)
    p, g = weights.to(c), grad_weights.to(c)
    row = (g * p).sum(-1, keepdim=True) / p.sum(-1, keepdim=True)  # 0/0 on a masked row
    return (p * (g - row)).to(weights.dtype)


def sb_w_resoftmax(weights, grad_weights):
    c = _compute(weights.dtype)
    p = torch.softmax(weights.to(c), dim=-1)  # treats the weights as scores
    g = grad_weights.to(c)
    return (p * (g - (g * p).sum(-1, keepdim=True))).to(weights.dtype)


def sb_w_forgot_times_p(weights, grad_weights):
    c = _compute(weights.dtype)
    p, g = weights.to(c), grad_weights.to(c)
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_w_global_row(weights, grad_weights):
    c = _compute(weights.dtype)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).sum())).to(weights.dtype)  # one number for the whole tensor


def sb_w_compute_dtype(weights, grad_weights):
    c = _compute(weights.dtype)
    p, g = weights.to(torch.float32), grad_weights.to(torch.float32)
    return p * (g - (g * p).sum(-1, keepdim=True))  # left in float32


def sb_w_no_keepdim(weights, grad_weights):
    c = _compute(weights.dtype)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).sum(-1))).to(weights.dtype)


def sb_w_autograd(weights, grad_weights):
    c = _compute(weights.dtype)
    s = torch.log(weights.to(c)).detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(torch.softmax(s, dim=-1), s, grad_weights.to(c))
    return torch.nan_to_num(grad).to(weights.dtype)


def sb_w_row_term_squared_p(weights, grad_weights):
    c = _compute(weights.dtype)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p * p).sum(-1, keepdim=True))).to(weights.dtype)


def sb_r_einsum(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    row = torch.einsum("...n,...n->...", g, p).unsqueeze(-1)
    return torch.einsum("...n,...n->...n", p, g - row).to(weights.dtype)


def sb_r_rowloop(weights, grad_weights):
    n = weights.shape[-1]
    p = weights.reshape(-1, n).to(torch.float64)
    g = grad_weights.reshape(-1, n).to(torch.float64)
    rows = []
    for i in range(p.shape[0]):
        dot = torch.dot(p[i], g[i])
        rows.append(p[i] * g[i] - p[i] * dot)
    out = torch.stack(rows) if rows else torch.zeros_like(p)
    return out.reshape(weights.shape).to(weights.dtype)


def sb_r_matvec(weights, grad_weights):
    c = _compute(weights.dtype)
    p, g = weights.to(c), grad_weights.to(c)
    row = (g.unsqueeze(-2) @ p.unsqueeze(-1)).squeeze(-1)  # (..., 1)
    return torch.addcmul(torch.zeros_like(p), p, g - row).to(weights.dtype)


# ============================================================================ attention_backward
def _visible(n_q, n_k, device):
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(n_k - n_q)


def _probs(scores):
    p = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(p, nan=0.0)


def _ab(q, k, v, grad_out, causal, *, mask="right", scale_fn=None, fill=-math.inf,
        nan_to_num=True, mask_after=False, cast=True, transpose_p=True, double_scale=False,
        row_dim=-1):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _compute(q.dtype)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d if scale_fn is None else scale_fn(q, v))
    if double_scale:
        k_ = k_ * scale
        scores = q_ @ k_.transpose(-2, -1)
    else:
        scores = q_ @ k_.transpose(-2, -1) * scale
    sees = None
    if causal:
        if mask == "right":
            sees = _visible(n_q, n_k, q.device)
        elif mask == "left":
            sees = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril()
        elif mask == "strict":
            sees = _visible(n_q, n_k, q.device).tril(n_k - n_q - 1)
        if not mask_after:
            scores = scores.masked_fill(~sees, fill)
    p = torch.softmax(scores, dim=-1)
    if nan_to_num:
        p = torch.nan_to_num(p, nan=0.0)
    grad_v = (p.transpose(-2, -1) if transpose_p else p) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=row_dim, keepdim=True))
    if causal and mask_after:
        grad_s = grad_s.masked_fill(~sees, 0.0)
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * scale
    if cast:
        return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)
    return grad_q, grad_k, grad_v


def ab_w_top_left(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, mask="left")


def ab_w_strict(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, mask="strict")


def ab_w_big_negative(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, fill=-1e9)


def ab_w_nan_rows(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, nan_to_num=False)


def ab_w_dv_scale(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, scale_fn=lambda q_, v_: v_.shape[-1])


def ab_w_double_scale(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, double_scale=True)


def ab_w_mask_after(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, mask_after=True)


def ab_w_compute_dtype(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, cast=False)


def ab_w_p_not_transposed(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, transpose_p=False)


def ab_w_autograd(q, k, v, grad_out, causal=False):
    leaves = [t.detach().to(torch.float64).requires_grad_(True) for t in (q, k, v)]
    n_q, n_k = q.shape[-2], k.shape[-2]
    mask = _visible(n_q, n_k, q.device) if causal else None
    s = leaves[0] @ leaves[1].transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    out = torch.nan_to_num(torch.softmax(s, -1)) @ leaves[2]
    grads = torch.autograd.grad(out, leaves, grad_out.to(torch.float64))
    return tuple(g.to(q.dtype) for g in grads)


def ab_w_grad_k_unscaled(q, k, v, grad_out, causal=False):
    gq, gk, gv = _ab(q, k, v, grad_out, causal, cast=False)
    return gq.to(q.dtype), (gk * math.sqrt(q.shape[-1])).to(k.dtype), gv.to(v.dtype)


def ab_r_delta_from_out(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _compute(q.dtype)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_visible(n_q, n_k, q.device), -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    out = p @ v_
    delta = (g_ * out).sum(-1, keepdim=True)  # = rowsum(grad_p * p)
    grad_s = p * (g_ @ v_.transpose(-2, -1) - delta)
    return ((grad_s @ k_ / math.sqrt(d)).to(q.dtype),
            (grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)).to(k.dtype),
            (p.transpose(-2, -1) @ g_).to(v.dtype))


def ab_r_einsum64(q, k, v, grad_out, causal=False):
    d = q.shape[-1]
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = torch.where(j <= i + (n_k - n_q), s, torch.tensor(-math.inf, dtype=s.dtype))
    p = _probs(s)
    gv = torch.einsum("...ij,...ie->...je", p, g_)
    gp = torch.einsum("...ie,...je->...ij", g_, v_)
    gs = p * (gp - torch.einsum("...ij,...ij->...i", gp, p)[..., None])
    gq = torch.einsum("...ij,...jd->...id", gs, k_) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", gs, q_) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_r_per_slice_loop(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2], q.shape[-1]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Q = q.reshape(-1, n_q, d).float() if q.dtype != torch.float64 else q.reshape(-1, n_q, d)
    K = k.reshape(-1, n_k, d).to(Q.dtype)
    V = v.reshape(-1, n_k, d_v).to(Q.dtype)
    G = grad_out.reshape(-1, n_q, d_v).to(Q.dtype)
    gq, gk, gv = [], [], []
    for i in range(Q.shape[0]):
        s = Q[i] @ K[i].T / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.triu(torch.ones(n_q, n_k, dtype=torch.bool),
                                         diagonal=n_k - n_q + 1), float("-inf"))
        p = _probs(s)
        gp = G[i] @ V[i].T
        gs = p * gp - p * (p * gp).sum(1, keepdim=True)
        gq.append(gs @ K[i] / math.sqrt(d))
        gk.append(gs.T @ Q[i] / math.sqrt(d))
        gv.append(p.T @ G[i])
    return (torch.stack(gq).reshape(q.shape).to(q.dtype),
            torch.stack(gk).reshape(k.shape).to(k.dtype),
            torch.stack(gv).reshape(v.shape).to(v.dtype))


# ============================================================================ attention_backward_flops
def abf_w_ignores_recompute(seq_len, head_dim, recompute=True):
    return 8 * seq_len * seq_len * head_dim


def abf_w_recompute_whole_forward(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + (4 * seq_len ** 2 * head_dim if recompute else 0)


def abf_w_macs(seq_len, head_dim, recompute=True):
    return (5 if recompute else 4) * seq_len * seq_len * head_dim


def abf_w_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2.0)


def abf_w_grad_p_elementwise(seq_len, head_dim, recompute=True):
    products = 3 + (1 if recompute else 0)  # grad_p taken for an elementwise step
    return products * 2 * seq_len * seq_len * head_dim


def abf_w_n_d_squared(seq_len, head_dim, recompute=True):
    return (10 if recompute else 8) * seq_len * head_dim * head_dim


def abf_w_flag_inverted(seq_len, head_dim, recompute=True):
    return (8 if recompute else 10) * seq_len * seq_len * head_dim


def abf_w_causal_half(seq_len, head_dim, recompute=True):
    return (5 if recompute else 4) * seq_len * (seq_len + 1) * head_dim


def abf_w_plus_softmax(seq_len, head_dim, recompute=True):
    # adds the softmax gradient's N^2 elementwise work to the products
    return (10 if recompute else 8) * seq_len * seq_len * head_dim + 2 * seq_len * seq_len


def abf_r_sum_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d), (n, d, n), (n, n, d), (n, n, d)]  # grad_v, grad_p, grad_q, grad_k
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_r_ratio(seq_len, head_dim, recompute=True):
    forward = 2 * (2 * seq_len * seq_len * head_dim)
    return forward * 5 // 2 if recompute else forward * 2


# ============================================================================ flash_attention_backward
def _fb(q, k, v, out, lse, grad_out, block_size, causal, *, guard=True, delta_mode="out",
        lse_scaled=True, accumulate=True, key_pos_mode="absolute", offset=True,
        drop_tail=False, cast=True, full=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _compute(q.dtype)
    scale = 1.0 / math.sqrt(d)
    q_, g_ = q.to(c), grad_out.to(c)
    delta = (g_ * out.to(c)).sum(-1, keepdim=True)
    lse_ = lse.to(c)
    if guard:
        lse_ = lse_.masked_fill(torch.isneginf(lse), math.inf)
    lse_ = lse_[..., None]
    query_pos = torch.arange(n_q, device=q.device)[:, None] + ((n_k - n_q) if offset else 0)
    grad_q = torch.zeros_like(q_)
    grad_k = torch.zeros(k.shape, dtype=c, device=k.device)
    grad_v = torch.zeros(v.shape, dtype=c, device=v.device)
    step = n_k if full else block_size
    stop_at = (n_k // step) * step if drop_tail else n_k
    for start in range(0, stop_at, step):
        k_blk = k[..., start:start + step, :].to(c)
        v_blk = v[..., start:start + step, :].to(c)
        s = q_ @ k_blk.transpose(-2, -1)
        if lse_scaled:
            s = s * scale
        if causal:
            if key_pos_mode == "absolute":
                key_pos = torch.arange(start, start + k_blk.shape[-2], device=q.device)
            else:
                key_pos = torch.arange(k_blk.shape[-2], device=q.device)
            s = s.masked_fill(key_pos > query_pos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., start:start + step, :] = p.transpose(-2, -1) @ g_
        grad_p = g_ @ v_blk.transpose(-2, -1)
        dl = (grad_p * p).sum(-1, keepdim=True) if delta_mode == "block" else delta
        grad_s = p * (grad_p - dl)
        if accumulate:
            grad_q += grad_s @ k_blk * scale
        else:
            grad_q = grad_s @ k_blk * scale
        grad_k[..., start:start + step, :] = grad_s.transpose(-2, -1) @ q_ * scale
    if cast:
        return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)
    return grad_q, grad_k, grad_v


def fb_w_no_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, guard=False)


def fb_w_block_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, delta_mode="block")


def fb_w_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, lse_scaled=False)


def fb_w_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, accumulate=False)


def fb_w_local_key_pos(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, key_pos_mode="local")


def fb_w_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, offset=False)


def fb_w_drop_tail(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, drop_tail=True)


def fb_w_compute_dtype(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, cast=False)


def fb_w_one_big_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, full=True)


def fb_w_delta_second_pass(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """delta = rowsum(grad_p * p) gathered in a first pass over the key blocks."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _compute(q.dtype)
    scale = 1.0 / math.sqrt(d)
    q_, g_ = q.to(c), grad_out.to(c)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def block_p(start):
        k_blk = k[..., start:start + block_size, :].to(c)
        s = q_ @ k_blk.transpose(-2, -1) * scale
        if causal:
            s = s.masked_fill(torch.arange(start, start + k_blk.shape[-2]) > qpos, -math.inf)
        return k_blk, torch.exp(s - lse_)

    delta = torch.zeros(q.shape[:-1] + (1,), dtype=c)
    for start in range(0, n_k, block_size):
        _, p = block_p(start)
        v_blk = v[..., start:start + block_size, :].to(c)
        delta += ((g_ @ v_blk.transpose(-2, -1)) * p).sum(-1, keepdim=True)
    grad_q = torch.zeros_like(q_)
    grad_k = torch.zeros(k.shape, dtype=c)
    grad_v = torch.zeros(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        k_blk, p = block_p(start)
        v_blk = v[..., start:start + block_size, :].to(c)
        grad_v[..., start:start + block_size, :] = p.transpose(-2, -1) @ g_
        grad_s = p * (g_ @ v_blk.transpose(-2, -1) - delta)
        grad_q += grad_s @ k_blk * scale
        grad_k[..., start:start + block_size, :] = grad_s.transpose(-2, -1) @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_w_log2_lse(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Treats lse as log2 and converts: p = exp(s - lse * ln 2)."""
    return _fb(q, k, v, out, lse * math.log(2.0), grad_out, block_size, causal)


def fb_r_two_level_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _compute(q.dtype)
    scale = 1.0 / math.sqrt(d)
    q_, k_, v_, g_, o_ = (t.to(c) for t in (q, k, v, grad_out, out))
    lse_ = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse).to(c)
    delta = (g_ * o_).sum(-1)
    gq = torch.zeros_like(q_)
    gk = torch.zeros_like(k_)
    gv = torch.zeros_like(v_)
    for ks in range(0, n_k, block_size):
        ke = min(ks + block_size, n_k)
        for qs in range(0, n_q, block_size):
            qe = min(qs + block_size, n_q)
            s = q_[..., qs:qe, :] @ k_[..., ks:ke, :].transpose(-2, -1) * scale
            if causal:
                i = torch.arange(qs, qe)[:, None] + (n_k - n_q)
                j = torch.arange(ks, ke)[None, :]
                s = s.masked_fill(j > i, -math.inf)
            p = torch.exp(s - lse_[..., qs:qe, None])
            gv[..., ks:ke, :] += p.transpose(-2, -1) @ g_[..., qs:qe, :]
            gs = p * (g_[..., qs:qe, :] @ v_[..., ks:ke, :].transpose(-2, -1)
                      - delta[..., qs:qe, None])
            gq[..., qs:qe, :] += gs @ k_[..., ks:ke, :] * scale
            gk[..., ks:ke, :] += gs.transpose(-2, -1) @ q_[..., qs:qe, :] * scale
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_r_float64_einsum(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    q_, k_, v_, g_, o_ = (t.double() for t in (q, k, v, grad_out, out))
    q_ = q_ / math.sqrt(d)  # scale q once: s = q' k^T, grad_k = grad_s^T q'
    lse_ = lse.double()
    finite = torch.isfinite(lse_)[..., None]
    delta = torch.einsum("bhnd,bhnd->bhn", g_, o_)[..., None]
    gq = torch.zeros_like(q_)
    chunks_k, chunks_v = [], []
    for start in torch.arange(n_k).split(block_size):
        lo, hi = int(start[0]), int(start[-1]) + 1
        s = torch.einsum("bhnd,bhmd->bhnm", q_, k_[..., lo:hi, :])
        if causal:
            allowed = torch.arange(lo, hi)[None, :] <= torch.arange(n_q)[:, None] + n_k - n_q
            s = s.masked_fill(~allowed, -math.inf)
        p = torch.where(finite, torch.exp(s - torch.where(finite, lse_[..., None], 0.0)),
                        torch.zeros_like(s))
        chunks_v.append(torch.einsum("bhnm,bhnd->bhmd", p, g_))
        gs = p * (torch.einsum("bhnd,bhmd->bhnm", g_, v_[..., lo:hi, :]) - delta)
        gq = gq + torch.einsum("bhnm,bhmd->bhnd", gs, k_[..., lo:hi, :])
        chunks_k.append(torch.einsum("bhnm,bhnd->bhmd", gs, q_))
    gq = gq / math.sqrt(d)
    gk = torch.cat(chunks_k, dim=-2) if chunks_k else torch.zeros_like(k_)
    gv = torch.cat(chunks_v, dim=-2) if chunks_v else torch.zeros_like(v_)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_r_running_lists(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Same algorithm, written with torch.split and F.pad-free list bookkeeping."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _compute(q.dtype)
    scale = d ** -0.5
    qs, gs_ = q.to(c) * scale, grad_out.to(c)
    delta = torch.sum(gs_ * out.to(c), dim=-1, keepdim=True)
    neg = torch.isneginf(lse)[..., None]
    lse_c = lse.to(c)[..., None].masked_fill(neg, 0.0)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    gq = torch.zeros_like(qs)
    gk_parts, gv_parts = [], []
    offset = 0
    for k_blk, v_blk in zip(torch.split(k.to(c), block_size, dim=-2),
                            torch.split(v.to(c), block_size, dim=-2)):
        width = k_blk.shape[-2]
        s = torch.matmul(qs, k_blk.transpose(-1, -2))
        if causal:
            s = s.masked_fill(torch.arange(offset, offset + width)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_c).masked_fill(neg, 0.0)
        gv_parts.append(torch.matmul(p.transpose(-1, -2), gs_))
        g_s = p * (torch.matmul(gs_, v_blk.transpose(-1, -2)) - delta)
        gq.add_(torch.matmul(g_s, k_blk))
        gk_parts.append(torch.matmul(g_s.transpose(-1, -2), qs))
        offset += width
    return ((gq * scale).to(q.dtype), torch.cat(gk_parts, -2).to(k.dtype),
            torch.cat(gv_parts, -2).to(v.dtype))


E = Entry
ENTRIES = [
    # softmax_backward
    E("softmax_backward", "wrong", "row_term_renormalised",
      "Divides the row term by the row's total weight 'to be safe', which is 0/0 = NaN on a "
      "fully masked row.", sb_w_normalised_row),
    E("softmax_backward", "wrong", "softmax_of_weights",
      "Treats the given weights as scores and applies softmax to them again before using the "
      "formula.", sb_w_resoftmax),
    E("softmax_backward", "wrong", "forgot_outer_weights",
      "Returns grad_weights minus the row term without multiplying by the weights.",
      sb_w_forgot_times_p),
    E("softmax_backward", "wrong", "one_row_term_for_all",
      "Sums grad_weights * weights over the whole tensor, so every row shares one row term.",
      sb_w_global_row),
    E("softmax_backward", "wrong", "left_in_float32",
      "Upcasts to float32 for the arithmetic but forgets to cast the result back to the "
      "weights' dtype.", sb_w_compute_dtype),
    E("softmax_backward", "wrong", "row_term_no_keepdim",
      "Sums the row term without keepdim, so it no longer lines up with its row (wrong "
      "broadcast or a shape error).", sb_w_no_keepdim),
    E("softmax_backward", "wrong", "autograd_through_log",
      "Recovers scores as log(weights) and asks torch.autograd for the gradient instead of "
      "writing it out.", sb_w_autograd),
    E("softmax_backward", "wrong", "row_term_p_squared",
      "Weights the row term by p twice, rowsum(g * p * p), mixing the Jacobian's two p's into "
      "the sum.", sb_w_row_term_squared_p),
    E("softmax_backward", "right", "einsum_float64", None, sb_r_einsum),
    E("softmax_backward", "right", "python_row_loop", None, sb_r_rowloop),
    E("softmax_backward", "right", "matvec_addcmul", None, sb_r_matvec),
    # attention_backward
    E("attention_backward", "wrong", "causal_top_left",
      "Builds the causal mask with tril(0), aligned top-left, so it is wrong whenever "
      "N_q != N_k.", ab_w_top_left),
    E("attention_backward", "wrong", "causal_excludes_diagonal",
      "Uses a strictly causal mask, so each query may not attend to its own position.",
      ab_w_strict),
    E("attention_backward", "wrong", "mask_minus_1e9",
      "Masks with -1e9 instead of -inf, so a query that sees no key spreads its weight "
      "uniformly over masked keys and receives gradient.", ab_w_big_negative),
    E("attention_backward", "wrong", "nan_on_empty_rows",
      "Takes torch.softmax of rows that are all -inf without zeroing the NaNs they produce.",
      ab_w_nan_rows),
    E("attention_backward", "wrong", "scale_by_value_width",
      "Scales by 1/sqrt(d_v), the width of v, instead of 1/sqrt(d), the width of q and k.",
      ab_w_dv_scale),
    E("attention_backward", "wrong", "scale_applied_twice",
      "Folds 1/sqrt(d) into k for the forward and then multiplies the gradients by 1/sqrt(d) "
      "again.", ab_w_double_scale),
    E("attention_backward", "wrong", "mask_only_in_backward",
      "Computes p from unmasked scores and only zeroes grad_s at the masked positions "
      "afterwards.", ab_w_mask_after),
    E("attention_backward", "wrong", "left_in_float32",
      "Computes in float32/float64 but returns the gradients without casting back to the "
      "inputs' dtype.", ab_w_compute_dtype),
    E("attention_backward", "wrong", "grad_v_p_untransposed",
      "Writes grad_v = p @ grad_out without transposing p (only works when N_q == N_k).",
      ab_w_p_not_transposed),
    E("attention_backward", "wrong", "autograd_shortcut",
      "Recomputes the forward with requires_grad and calls torch.autograd.grad instead of "
      "writing the four products.", ab_w_autograd),
    E("attention_backward", "wrong", "grad_k_unscaled",
      "Forgets the 1/sqrt(d) in grad_k (keeps it in grad_q).", ab_w_grad_k_unscaled),
    E("attention_backward", "right", "delta_from_out", None, ab_r_delta_from_out),
    E("attention_backward", "right", "einsum_float64", None, ab_r_einsum64),
    E("attention_backward", "right", "loop_over_flattened_heads", None, ab_r_per_slice_loop),
    # attention_backward_flops
    E("attention_backward_flops", "wrong", "ignores_recompute",
      "Always returns 8 N^2 d, ignoring the recompute flag.", abf_w_ignores_recompute),
    E("attention_backward_flops", "wrong", "recomputes_whole_forward",
      "Adds the whole forward (4 N^2 d, q k^T and p v) for the recomputation instead of q k^T "
      "alone.", abf_w_recompute_whole_forward),
    E("attention_backward_flops", "wrong", "counts_macs",
      "Counts one multiply-add as one FLOP, giving half the answer.", abf_w_macs),
    E("attention_backward_flops", "wrong", "float_from_ratio",
      "Multiplies the forward's count by 2.5 or 2.0 and returns a float, not an int.",
      abf_w_float),
    E("attention_backward_flops", "wrong", "grad_p_not_a_product",
      "Treats grad_p = grad_out v^T as elementwise work and counts only three products.",
      abf_w_grad_p_elementwise),
    E("attention_backward_flops", "wrong", "n_d_squared",
      "Writes N d^2 instead of N^2 d, confusing the attention products with projections.",
      abf_w_n_d_squared),
    E("attention_backward_flops", "wrong", "recompute_inverted",
      "Adds the recomputation when recompute=False and leaves it out when True.",
      abf_w_flag_inverted),
    E("attention_backward_flops", "wrong", "causal_triangle",
      "Counts only the causal triangle N(N+1)/2 of score entries though the contract says "
      "dense.", abf_w_causal_half),
    E("attention_backward_flops", "wrong", "adds_softmax_elementwise",
      "Adds 2 N^2 for the softmax gradient's elementwise work although only matrix products "
      "count.", abf_w_plus_softmax),
    E("attention_backward_flops", "right", "sum_of_product_shapes", None, abf_r_sum_products),
    E("attention_backward_flops", "right", "forward_times_ratio_int", None, abf_r_ratio),
    # flash_attention_backward
    E("flash_attention_backward", "wrong", "no_inf_lse_guard",
      "Computes exp(s - lse) directly, which is NaN on a row whose lse is -inf.", fb_w_no_guard),
    E("flash_attention_backward", "wrong", "delta_per_block",
      "Takes the row term from the current block's rowsum(grad_p * p) instead of "
      "rowsum(grad_out * out) over all keys.", fb_w_block_delta),
    E("flash_attention_backward", "wrong", "recompute_without_scale",
      "Recomputes the scores as q k^T without 1/sqrt(d) before subtracting lse.",
      fb_w_unscaled_recompute),
    E("flash_attention_backward", "wrong", "grad_q_overwritten",
      "Assigns grad_q = grad_s @ k_blk in each block instead of adding up over the blocks.",
      fb_w_grad_q_overwritten),
    E("flash_attention_backward", "wrong", "block_local_key_positions",
      "Masks each block with key positions 0..block_size-1 instead of the keys' absolute "
      "positions.", fb_w_local_key_pos),
    E("flash_attention_backward", "wrong", "causal_top_left",
      "Forgets the N_k - N_q offset of the bottom-right causal mask.", fb_w_top_left),
    E("flash_attention_backward", "wrong", "drops_ragged_block",
      "Loops over n_k // block_size full blocks only, so the last, shorter block of keys gets "
      "no gradient.", fb_w_drop_tail),
    E("flash_attention_backward", "wrong", "left_in_float32",
      "Returns the gradients in the compute dtype instead of the inputs' dtype.",
      fb_w_compute_dtype),
    E("flash_attention_backward", "wrong", "ignores_block_size",
      "Processes all keys as one block, building the whole N_q x N_k score tensor.",
      fb_w_one_big_block),
    E("flash_attention_backward", "wrong", "delta_by_extra_pass",
      "Computes the row term with a first pass over the key blocks (rowsum(grad_p * p)), "
      "spending a second recomputation.", fb_w_delta_second_pass),
    E("flash_attention_backward", "wrong", "lse_as_log2",
      "Believes the forward's lse is in base 2 and multiplies it by ln 2 before "
      "exponentiating.", fb_w_log2_lse),
    E("flash_attention_backward", "right", "query_and_key_tiles", None, fb_r_two_level_tiles),
    E("flash_attention_backward", "right", "einsum_float64_split", None, fb_r_float64_einsum),
    E("flash_attention_backward", "right", "torch_split_prescaled_q", None, fb_r_running_lists),
]
