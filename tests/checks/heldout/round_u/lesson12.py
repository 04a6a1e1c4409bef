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


def sb_sum_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_float32_result(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    return p * (g - torch.sum(p * g, -1, keepdim=True))


def sb_unweighted_row_term(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_autograd_from_log(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    scores = torch.log(weights.to(ct)).detach().requires_grad_(True)  # softmax(log p) = p
    p = torch.softmax(scores, dim=-1)
    (grad,) = torch.autograd.grad(p, scores, grad_outputs=grad_weights.to(ct))
    return torch.nan_to_num(grad).to(weights.dtype)


# ============================================================ softmax_backward: right
def sb_einsum_f64(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    dot = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * dot).to(weights.dtype)


def sb_rowwise_loop(weights, grad_weights):
    n = weights.shape[-1]
    p = weights.to(torch.float64).reshape(-1, n)
    g = grad_weights.to(torch.float64).reshape(-1, n)
    out = torch.empty_like(p)
    for r in range(p.shape[0]):
        c = torch.dot(p[r], g[r])
        out[r] = p[r] * (g[r] - c)
    return out.reshape(weights.shape).to(weights.dtype)


# ============================================================ attention_backward: wrong
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


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    c = 1.0 / math.sqrt(d)
    qq, kk, vv, gg = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    scores = torch.matmul(qq, kk.transpose(-1, -2)) * c
    if causal:
        hide = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
        scores = scores.masked_fill(hide, -math.inf)
    top = scores.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
    w = torch.exp(scores - top)
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
    grad_v = w.transpose(-1, -2) @ gg
    grad_w = gg @ vv.transpose(-1, -2)
    grad_s = w * (grad_w - (grad_w * w).sum(-1, keepdim=True))
    grad_q = grad_s @ kk * c
    grad_k = grad_s.transpose(-1, -2) @ qq
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_top_left_mask(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs, ks, vs, gs = (t.to(ct) for t in (q, k, v, grad_out))
    scale = d ** -0.5
    s = qs @ ks.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(), float("-inf"))
    mx = s.amax(-1, keepdim=True)
    mx = mx.masked_fill(torch.isneginf(mx), 0.0)
    p = torch.exp(s - mx)
    tot = p.sum(-1, keepdim=True)
    p = p / tot.masked_fill(tot == 0, 1.0)
    gv = p.transpose(-2, -1) @ gs
    gp = gs @ vs.transpose(-2, -1)
    gsc = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gsc @ ks * scale).to(q.dtype), (gsc.transpose(-2, -1) @ qs * scale).to(k.dtype),
            gv.to(v.dtype))


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~allowed, -math.inf)
    p = torch.softmax(s, dim=-1)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ k_ * scale).to(q.dtype),
            (grad_s.transpose(-2, -1) @ q_ * scale).to(k.dtype), grad_v.to(v.dtype))


def ab_compute_dtype_result(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    den = e.sum(-1, keepdim=True)
    p = e / torch.where(den == 0, torch.ones_like(den), den)
    dv = torch.einsum("...qk,...qe->...ke", p, G)
    dp = torch.einsum("...qe,...ke->...qk", G, V)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = torch.einsum("...qk,...kd->...qd", ds, K) / math.sqrt(d)
    dk = torch.einsum("...qk,...qd->...kd", ds, Q) / math.sqrt(d)
    return dq, dk, dv


def ab_mask_after_softmax(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * scale
    p = torch.softmax(s, dim=-1)
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        p = p * keep  # zero the future weights
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return ((grad_s @ k_ * scale).to(q.dtype),
            (grad_s.transpose(-2, -1) @ q_ * scale).to(k.dtype), grad_v.to(v.dtype))


# ============================================================ attention_backward: right
def ab_einsum_f64(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = torch.where(j <= i + (n_k - n_q), s, torch.tensor(-math.inf, dtype=torch.float64))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    dV = torch.einsum("...ij,...ie->...je", p, G)
    dP = torch.einsum("...ie,...je->...ij", G, V)
    dS = p * (dP - torch.einsum("...ij,...ij->...i", dP, p)[..., None])
    dQ = torch.einsum("...ij,...jd->...id", dS, K) / math.sqrt(d)
    dK = torch.einsum("...ij,...id->...jd", dS, Q) / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_delta_from_output(q, k, v, grad_out, causal=False):
    """Row term from rowsum(grad_out * out), out = p v, as FlashAttention-2 does."""
    d = q.shape[-1]
    n_q, n_k = q.shape[-2], k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, gf = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    s = (qf / math.sqrt(d)) @ kf.transpose(-2, -1)
    if causal:
        s = s + torch.zeros(n_q, n_k, dtype=ct).masked_fill(
            torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1), -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse.masked_fill(torch.isneginf(lse), math.inf))
    out = p @ vf
    delta = (gf * out).sum(-1, keepdim=True)
    gs = p * (gf @ vf.transpose(-2, -1) - delta)
    return ((gs @ kf / math.sqrt(d)).to(q.dtype), (gs.transpose(-2, -1) @ qf / math.sqrt(d))
            .to(k.dtype), (p.transpose(-2, -1) @ gf).to(v.dtype))


# ============================================================ attention_backward_flops: wrong
def abf_full_forward_again(seq_len, head_dim, recompute=True):
    total = 8 * seq_len * seq_len * head_dim
    if recompute:
        total += 4 * seq_len * seq_len * head_dim  # redo the forward
    return total


def abf_madd_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    extra = 0 if recompute else 2 * n2d
    return 8 * n2d + extra


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + 2 * seq_len ** 2 * head_dim if recompute else 0


def abf_n_d_squared(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim * head_dim
    return per_product * (5 if recompute else 4)


# ============================================================ attention_backward_flops: right
def abf_named_products(seq_len, head_dim, recompute=True):
    n, d = int(seq_len), int(head_dim)
    products = {"grad_v": (n, n, d), "grad_p": (n, d, n), "grad_q": (n, n, d),
                "grad_k": (n, n, d)}
    if recompute:
        products["scores"] = (n, d, n)
    return sum(2 * a * b * c for a, b, c in products.values())


def abf_closed_form(seq_len, head_dim, recompute=True):
    return (10 if recompute else 8) * seq_len ** 2 * head_dim


# ============================================================ flash_attention_backward: wrong
def fb_blockwise_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(nq)[:, None] + nk - nq
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))  # row term from this block
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_lse_unguarded(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(ct) * scale
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[..., st:en, :].to(ct), v[..., st:en, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        gv[..., st:en, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., st:en, :] = gs.transpose(-2, -1) @ qs
    return (gq * scale).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, g = q.to(ct), grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct))[..., None]
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qf)
    grad_k = torch.empty(k.shape, dtype=ct)
    grad_v = torch.empty(v.shape, dtype=ct)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        s = qf @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        grad_v[:, :, s0:s1] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grad_q += ds @ kb
        grad_k[:, :, s0:s1] = ds.transpose(-2, -1) @ qf / math.sqrt(d)
    return (grad_q / math.sqrt(d)).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, N_q, D = q.shape
    N_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    sc = D ** -0.5
    qs, go = q.to(ct) * sc, grad_out.to(ct)
    delta = torch.sum(go * out.to(ct), dim=-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qp = torch.arange(N_q)[:, None] + (N_k - N_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for j in range(0, N_k, block_size):
        je = min(j + block_size, N_k)
        kb, vb = k[:, :, j:je].to(ct), v[:, :, j:je].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j, je)[None, :] > qp, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, j:je] = p.transpose(-2, -1) @ go
        ds = p * (go @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[:, :, j:je] = ds.transpose(-2, -1) @ qs
    return (dq * sc).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_diagonal_masked(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[..., st:en, :].to(ct), v[..., st:en, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] >= qpos, -math.inf)
        p = torch.exp(s - L)
        gv[..., st:en, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., st:en, :] = gs.transpose(-2, -1) @ qs
    return (gq / math.sqrt(d)).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=ct)
    gv = torch.empty(v.shape, dtype=ct)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        kb, vb = k[..., st:en, :].to(ct), v[..., st:en, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        p = torch.exp2(s - L)  # the fast exponent the FlashAttention kernels use
        gv[..., st:en, :] = p.transpose(-2, -1) @ g
        gs = p * (g @ vb.transpose(-2, -1) - delta)
        gq += gs @ kb
        gk[..., st:en, :] = gs.transpose(-2, -1) @ qs
    return (gq * (1.0 / math.sqrt(d))).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_two_level_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over query blocks and key blocks, float64, skipping fully hidden tiles."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    c = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    G, O = grad_out.double(), out.double()
    Lse = lse.double()
    dQ = torch.zeros((B, H, nq, d), dtype=torch.float64)
    dK = torch.zeros((B, H, nk, d), dtype=torch.float64)
    dV = torch.zeros((B, H, nk, d), dtype=torch.float64)
    for i0 in range(0, nq, block_size):
        i1 = min(i0 + block_size, nq)
        qi, gi = Q[:, :, i0:i1], G[:, :, i0:i1]
        di = (gi * O[:, :, i0:i1]).sum(-1, keepdim=True)
        li = Lse[:, :, i0:i1, None]
        li = torch.where(torch.isinf(li), torch.full_like(li, math.inf), li)
        last_visible = torch.arange(i0, i1)[:, None] + (nk - nq)
        for j0 in range(0, nk, block_size):
            j1 = min(j0 + block_size, nk)
            if causal and j0 > i1 - 1 + (nk - nq):
                continue  # the whole tile lies in the future
            s = (qi @ K[:, :, j0:j1].transpose(-1, -2)) * c
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > last_visible, -math.inf)
            p = torch.exp(s - li)
            dV[:, :, j0:j1] += p.transpose(-1, -2) @ gi
            ds = p * (gi @ V[:, :, j0:j1].transpose(-1, -2) - di)
            dQ[:, :, i0:i1] += ds @ K[:, :, j0:j1] * c
            dK[:, :, j0:j1] += ds.transpose(-1, -2) @ qi * c
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_einsum_lists(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf = q.to(ct), k.to(ct), v.to(ct)
    g = grad_out.to(ct)
    delta = torch.einsum("bhqd,bhqd->bhq", g, out.to(ct)).unsqueeze(-1)
    L = torch.nan_to_num(lse.to(ct), neginf=math.inf).unsqueeze(-1)
    qpos = (torch.arange(nq) + (nk - nq)).unsqueeze(1)
    grad_q = torch.zeros_like(qf)
    dks, dvs = [], []
    scale = d ** -0.5
    for a in range(0, nk, block_size):
        kb, vb = kf[:, :, a:a + block_size], vf[:, :, a:a + block_size]
        s = torch.einsum("bhqd,bhkd->bhqk", qf, kb) * scale
        if causal:
            kpos = torch.arange(a, a + kb.shape[2]).unsqueeze(0)
            s = s.masked_fill(kpos > qpos, -math.inf)
        p = torch.exp(s - L)
        dvs.append(torch.einsum("bhqk,bhqd->bhkd", p, g))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", g, vb) - delta)
        grad_q = grad_q + torch.einsum("bhqk,bhkd->bhqd", ds, kb) * scale
        dks.append(torch.einsum("bhqk,bhqd->bhkd", ds, qf) * scale)
    return (grad_q.to(q.dtype), torch.cat(dks, dim=2).to(k.dtype),
            torch.cat(dvs, dim=2).to(v.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "row-term-without-keepdim",
          "sums the row term without keepdim=True, so the (..., ) sums broadcast along the "
          "last axis instead of their own rows (a shape error, or wrong values on square "
          "inputs)",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row-term-over-axis-0",
          "sums grad_weights * weights over dim 0 instead of the last axis, so the row term "
          "mixes different rows",
          sb_sum_first_axis),
    Entry("softmax_backward", "wrong", "returns-compute-dtype",
          "computes in float32 as asked but returns that float32 tensor instead of casting "
          "back to weights' dtype",
          sb_float32_result),
    Entry("softmax_backward", "wrong", "unweighted-row-term",
          "subtracts the plain row sum of grad_weights instead of the weighted sum "
          "(grad_weights * weights).sum(-1)",
          sb_unweighted_row_term),
    Entry("softmax_backward", "wrong", "missing-parentheses",
          "writes weights * grad_weights - rowsum(...), so the row term is not multiplied by "
          "weights: weights * (grad_weights - rowsum) is meant",
          sb_precedence),
    Entry("softmax_backward", "wrong", "autograd-through-log",
          "recovers scores as log(weights) and asks torch.autograd.grad for the gradient, "
          "which the lesson forbids (the checked call raises)",
          sb_autograd_from_log),
    Entry("softmax_backward", "right", "einsum-float64", None, sb_einsum_f64),
    Entry("softmax_backward", "right", "row-loop-dot", None, sb_rowwise_loop),
    Entry("attention_backward", "wrong", "grad_k-no-transpose",
          "computes grad_k = grad_s @ q instead of grad_s^T @ q, so it has N_q rows instead "
          "of N_k (a shape error, or wrong values when N_q == N_k)",
          ab_grad_k_no_transpose),
    Entry("attention_backward", "wrong", "grad_k-unscaled",
          "forgets the 1/sqrt(d) of the scores in grad_k (grad_q has it), so grad_k is "
          "sqrt(d) times too large",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "top-left-causal",
          "builds the causal mask with tril() (top-left) instead of tril(N_k - N_q), so with "
          "N_q != N_k the queries see the wrong keys",
          ab_top_left_mask),
    Entry("attention_backward", "wrong", "softmax-nan-rows",
          "uses torch.softmax on the masked scores, which gives NaN for a query with no "
          "visible key instead of a zero row that contributes no gradient",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "returns-compute-dtype",
          "computes in float32/64 but returns the gradients in that compute dtype instead "
          "of the inputs' dtype",
          ab_compute_dtype_result),
    Entry("attention_backward", "wrong", "mask-after-softmax",
          "applies the causal mask to the probabilities after an unmasked softmax (zeroing "
          "the future weights) instead of to the scores, so the rows no longer sum to 1",
          ab_mask_after_softmax),
    Entry("attention_backward", "right", "einsum-float64", None, ab_einsum_f64),
    Entry("attention_backward", "right", "delta-from-output", None, ab_delta_from_output),
    Entry("attention_backward_flops", "wrong", "recompute-whole-forward",
          "adds 4 N^2 d for the recomputation (the whole forward, scores and weighted sum) "
          "where only the scores q k^T, 2 N^2 d, are recomputed",
          abf_full_forward_again),
    Entry("attention_backward_flops", "wrong", "multiply-add-as-one",
          "counts one multiply-add as 1 FLOP instead of 2, halving the count",
          abf_madd_as_one),
    Entry("attention_backward_flops", "wrong", "float-ratio",
          "multiplies the forward's FLOPs by 2.5 or 2, a float literal, so it returns a "
          "float where the lesson asks for a plain int",
          abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "flag-inverted",
          "adds the recomputation when recompute is False and leaves it out when it is True",
          abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "conditional-precedence",
          "writes 8 N^2 d + 2 N^2 d if recompute else 0: the conditional expression binds "
          "last, so recompute=False returns 0 instead of 8 N^2 d",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "n-d-squared",
          "counts each product as 2 N d^2 instead of 2 N^2 d, swapping the roles of the "
          "sequence length and the head dimension",
          abf_n_d_squared),
    Entry("attention_backward_flops", "right", "named-product-shapes", None,
          abf_named_products),
    Entry("attention_backward_flops", "right", "closed-form", None, abf_closed_form),
    Entry("flash_attention_backward", "wrong", "blockwise-row-term",
          "computes the row term as rowsum(grad_p * p) over the current key block only, "
          "which is a partial sum, instead of delta = rowsum(grad_out * out) over the whole "
          "row",
          fb_blockwise_delta),
    Entry("flash_attention_backward", "wrong", "lse-inf-unguarded",
          "computes exp(s - lse) without replacing lse = -inf, so a query with no visible "
          "key gives exp(-inf + inf) = NaN instead of zero probabilities",
          fb_lse_unguarded),
    Entry("flash_attention_backward", "wrong", "unscaled-recompute",
          "recomputes the scores as q k^T without the 1/sqrt(d) the forward used, so "
          "exp(s - lse) are not the forward's probabilities",
          fb_unscaled_recompute),
    Entry("flash_attention_backward", "wrong", "grad_q-overwritten",
          "assigns grad_q = ds @ k_blk in every block instead of accumulating with +=, so "
          "only the last key block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "diagonal-masked",
          "masks keys with key_pos >= query_pos, hiding the diagonal each query may see, "
          "where > belongs",
          fb_diagonal_masked),
    Entry("flash_attention_backward", "wrong", "exp2-with-natural-lse",
          "recomputes the probabilities with torch.exp2, as the FlashAttention kernels do, "
          "but the scores and lse are in natural log: exp(s - lse) is meant",
          fb_exp2),
    Entry("flash_attention_backward", "right", "query-and-key-tiles-float64", None,
          fb_two_level_tiles),
    Entry("flash_attention_backward", "right", "einsum-cat-blocks", None, fb_einsum_lists),
]
