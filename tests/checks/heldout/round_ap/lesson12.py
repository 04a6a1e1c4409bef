"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ==================================================================== softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (p * g).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_row_term_without_weights(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    return (p * (g - g.sum(dim=-1, keepdim=True))).to(weights.dtype)


def sb_torch_diag_jacobian(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    jac = torch.diag(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # diag(p) - p p^T
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_no_cast_back(weights, grad_weights):
    compute = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(compute)
    g = grad_weights.to(compute)
    inner = torch.sum(g * p, dim=-1, keepdim=True)
    return p * (g - inner)


def sb_sum_over_dim0(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    w, gw = weights.to(ct), grad_weights.to(ct)
    dot = (w * gw).sum(0, keepdim=True)
    return (w * (gw - dot)).to(weights.dtype)


def sb_roles_swapped(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1, keepdim=True)
    return (g * (p - row)).to(weights.dtype)


# ==================================================================== softmax_backward: right
def sb_einsum_f64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    row = torch.einsum("...n,...n->...", p, g)
    return (p * g - p * row.unsqueeze(-1)).to(weights.dtype)


def sb_explicit_jacobian(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]  # (..., n, n), symmetric
    return torch.matmul(jac, g[..., None])[..., 0].to(weights.dtype)


# ================================================================== attention_backward: wrong
def ab_causal_top_left(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    sc = 1.0 / math.sqrt(d)
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), -math.inf)
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    dv = p.transpose(-2, -1) @ g_
    dp = g_ @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ k_ * sc
    dk = ds.transpose(-2, -1) @ q_ * sc
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    nq, d = q.shape[-2], q.shape[-1]
    nk = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = (t.to(f) for t in (q, k, v, grad_out))
    S = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if causal:
        S = S.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    P = torch.nan_to_num(torch.softmax(S, dim=-1), nan=0.0)
    dV = P.transpose(-2, -1) @ G
    dP = G @ V.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    dQ = dS @ K / math.sqrt(d)
    dK = dS.transpose(-2, -1) @ Q
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def ab_grad_v_untransposed(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = d ** -0.5
    qc, kc, vc, gc = q.to(compute), k.to(compute), v.to(compute), grad_out.to(compute)
    scores = torch.matmul(qc, kc.transpose(-2, -1)) * scale
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~allowed, -math.inf)
    m = scores.max(dim=-1, keepdim=True).values
    m = m.masked_fill(torch.isinf(m), 0.0)
    ex = (scores - m).exp()
    tot = ex.sum(dim=-1, keepdim=True)
    p = ex / tot.masked_fill(tot == 0, 1.0)
    grad_v = torch.matmul(p, gc)
    grad_p = torch.matmul(gc, vc.transpose(-2, -1))
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))
    grad_q = torch.matmul(grad_s, kc) * scale
    grad_k = torch.matmul(grad_s.transpose(-2, -1), qc) * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = torch.softmax(s, dim=-1)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_no_row_term(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(ct) for t in (q, k, v, grad_out))
    scale = 1 / math.sqrt(d)
    s = torch.einsum("...qd,...kd->...qk", q_, k_) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    row_max = torch.nan_to_num(s.amax(dim=-1, keepdim=True), neginf=0.0)
    w = torch.exp(s - row_max)
    z = w.sum(dim=-1, keepdim=True)
    p = w / torch.where(z > 0, z, torch.ones_like(z))
    grad_v = torch.einsum("...qk,...qe->...ke", p, g_)
    grad_p = torch.einsum("...qe,...ke->...qk", g_, v_)
    grad_s = p * grad_p  # d softmax / d s taken as p, like exp
    grad_q = torch.einsum("...qk,...kd->...qd", grad_s, k_) * scale
    grad_k = torch.einsum("...qk,...qd->...kd", grad_s, q_) * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_q_from_v(q, k, v, grad_out, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.to(compute) for t in (q, k, v, grad_out))
    scores = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        scores = scores.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q),
                                    -math.inf)
    any_key = torch.isfinite(scores).any(dim=-1, keepdim=True)  # rows with a visible key
    safe = torch.where(any_key, scores, torch.zeros_like(scores))
    p = torch.where(any_key, torch.softmax(safe, dim=-1), torch.zeros_like(scores))
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))
    grad_q = grad_s @ v_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ================================================================== attention_backward: right
def ab_einsum_delta_f64(q, k, v, grad_out, causal=False):
    """float64 einsums; the row term from delta = rowsum(grad_out * out)."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    Q, K, V, G = q.double(), k.double(), v.double(), grad_out.double()
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = torch.where(j - i <= n_k - n_q, s, torch.full_like(s, -math.inf))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = torch.einsum("...ij,...je->...ie", p, V)
    delta = (G * out).sum(dim=-1)
    dp = torch.einsum("...ie,...je->...ij", G, V)
    ds = p * (dp - delta[..., None])
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    dv = torch.einsum("...ij,...ie->...je", p, G)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_loop_over_heads_jacobian(q, k, v, grad_out, causal=False):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2], q.shape[-1]
    n_k, d_v = k.shape[-2], v.shape[-1]
    Qs = q.double().reshape(-1, n_q, d)
    Ks = k.double().reshape(-1, n_k, d)
    Vs = v.double().reshape(-1, n_k, d_v)
    Gs = grad_out.double().reshape(-1, n_q, d_v)
    dQ, dK, dV = torch.zeros_like(Qs), torch.zeros_like(Ks), torch.zeros_like(Vs)
    for m in range(Qs.shape[0]):
        s = Qs[m] @ Ks[m].T / math.sqrt(d)
        p = torch.zeros_like(s)
        for i in range(n_q):
            last = n_k - n_q + i if causal else n_k - 1  # last visible key
            if last < 0:
                continue
            p[i, :last + 1] = torch.softmax(s[i, :last + 1], dim=0)
        dV[m] = p.T @ Gs[m]
        dp = Gs[m] @ Vs[m].T
        jac = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (n_q, n_k, n_k)
        ds = (jac @ dp[:, :, None])[:, :, 0]
        dQ[m] = ds @ Ks[m] / math.sqrt(d)
        dK[m] = ds.T @ Qs[m] / math.sqrt(d)
    return (dQ.reshape(*lead, n_q, d).to(q.dtype), dK.reshape(*lead, n_k, d).to(k.dtype),
            dV.reshape(*lead, n_k, d_v).to(v.dtype))


# ============================================================ attention_backward_flops: wrong
def abf_adds_forward(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    backward = 8 * n2d + (2 * n2d if recompute else 0)
    forward = 4 * n2d
    return backward + forward


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ** 2 * head_dim
    if recompute:
        flops += 4 * seq_len ** 2 * head_dim  # run the forward again
    return flops


def abf_one_flop_per_mac(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_float_factor(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim * (1.25 if recompute else 1)


def abf_recompute_inverted(seq_len, head_dim, recompute=True):
    total = 4 * 2 * seq_len * seq_len * head_dim
    if not recompute:
        total += 2 * seq_len * seq_len * head_dim
    return total


def abf_n_d_squared(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * head_dim * head_dim
    return per_product * (5 if recompute else 4)


# ============================================================ attention_backward_flops: right
def abf_product_shapes(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, d, n),  # grad_v = p^T grad_out: (N x N) @ (N x d)
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return 2 * seq_len * seq_len * head_dim * (4 + int(bool(recompute)))


# ============================================================ flash_attention_backward: wrong
def fb_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
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
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq += ds @ kb
        dk[..., a:z, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_no_lse_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    q_s = q.to(compute) * scale
    g_ = grad_out.to(compute)
    delta = (g_ * out.to(compute)).sum(dim=-1, keepdim=True)
    lse_ = lse.to(compute).unsqueeze(-1)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q_s)
    grad_k = torch.zeros(k.shape, dtype=compute)
    grad_v = torch.zeros(v.shape, dtype=compute)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk = k[..., start:stop, :].to(compute)
        v_blk = v[..., start:stop, :].to(compute)
        s = q_s @ k_blk.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > query_pos, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g_
        ds = p * (g_ @ v_blk.transpose(-2, -1) - delta)
        grad_q += ds @ k_blk
        grad_k[..., start:stop, :] = ds.transpose(-2, -1) @ q_s
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = torch.where(torch.isneginf(lse), math.inf, lse.to(ct)).unsqueeze(-1)
    rows = torch.arange(n_q)[:, None]
    dq = torch.zeros(B, H, n_q, d, dtype=ct)
    dk = torch.zeros(B, H, n_k, d, dtype=ct)
    dv = torch.zeros(B, H, n_k, d, dtype=ct)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        kb, vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > rows, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[:, :, a:z] = ds.transpose(-2, -1) @ qs
    return (dq * d ** -0.5).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) / math.sqrt(d)
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
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        p = torch.exp(scores - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g_
        grad_p = g_ @ v_blk.transpose(-2, -1)
        grad_s = p * (grad_p - delta)
        grad_q = grad_s @ k_blk
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_scaled
    grad_q = grad_q / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fb_recompute_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    Q, G = q.to(f), grad_out.to(f)
    D = (G * out.to(f)).sum(-1, keepdim=True)
    Lse = lse.to(f).masked_fill(torch.isneginf(lse), math.inf).unsqueeze(-1)
    qi = torch.arange(n_q).unsqueeze(1) + n_k - n_q
    dQ = torch.zeros_like(Q)
    dK = torch.empty(k.shape, dtype=f)
    dV = torch.empty(v.shape, dtype=f)
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        Kj, Vj = k[..., j0:j1, :].to(f), v[..., j0:j1, :].to(f)
        S = Q @ Kj.transpose(-2, -1)
        if causal:
            S = S.masked_fill(torch.arange(j0, j1).unsqueeze(0) > qi, -math.inf)
        P = torch.exp(S - Lse)
        dV[..., j0:j1, :] = P.transpose(-2, -1) @ G
        dS = P * (G @ Vj.transpose(-2, -1) - D)
        dQ += dS @ Kj / math.sqrt(d)
        dK[..., j0:j1, :] = dS.transpose(-2, -1) @ Q / math.sqrt(d)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(dim=-1, keepdim=True)
    L = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        kb = k[..., a:z, :].to(ct)
        vb = v[..., a:z, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp2(s - L)  # the kernels' fast exponent
        dv[..., a:z, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:z, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fb_tiled_both_axes_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over key blocks (outer) and query blocks (inner), float64 throughout."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    G, O = grad_out.double(), out.double()
    L = lse.double()
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for kb in range(0, n_k, block_size):
        ke = min(kb + block_size, n_k)
        Kj, Vj = K[:, :, kb:ke], V[:, :, kb:ke]
        for qb in range(0, n_q, block_size):
            qe = min(qb + block_size, n_q)
            Qi, Gi = Q[:, :, qb:qe], G[:, :, qb:qe]
            Li = L[:, :, qb:qe, None]
            Di = (Gi * O[:, :, qb:qe]).sum(-1, keepdim=True)
            S = (Qi * scale) @ Kj.transpose(-2, -1)
            keep = torch.ones(qe - qb, ke - kb, dtype=torch.bool)
            if causal:
                keep = (torch.arange(kb, ke)[None, :]
                        <= torch.arange(qb, qe)[:, None] + (n_k - n_q))
            keep = keep & torch.isfinite(Li)  # rows with no key contribute nothing
            P = torch.where(keep, torch.exp(S - torch.nan_to_num(Li, neginf=0.0)),
                            torch.zeros_like(S))
            dV[:, :, kb:ke] += P.transpose(-2, -1) @ Gi
            dS = P * (Gi @ Vj.transpose(-2, -1) - Di)
            dQ[:, :, qb:qe] += dS @ Kj * scale
            dK[:, :, kb:ke] += dS.transpose(-2, -1) @ Qi * scale
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qh = q.to(ct) * (1.0 / math.sqrt(d))
    gh = grad_out.to(ct)
    delta = torch.einsum("bhqd,bhqd->bhq", gh, out.to(ct))
    empty = torch.isneginf(lse)
    lse_safe = torch.where(empty, torch.zeros_like(lse), lse).to(ct)
    grads_k, grads_v = [], []
    dq = torch.zeros_like(qh)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        kj = k[:, :, a:z].to(ct)
        vj = v[:, :, a:z].to(ct)
        s = torch.einsum("bhqd,bhkd->bhqk", qh, kj)
        p = torch.exp(s - lse_safe[..., None])
        dead = empty[..., None]
        if causal:
            future = (torch.arange(a, z)[None, :] - torch.arange(n_q)[:, None]) > n_k - n_q
            dead = dead | future
        p = p.masked_fill(dead, 0.0)
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, gh))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", gh, vj) - delta[..., None])
        dq = dq + torch.einsum("bhqk,bhkd->bhqd", ds, kj)
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, qh))
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), torch.cat(grads_k, 2).to(k.dtype), torch.cat(grads_v, 2).to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row-term-no-keepdim",
          "sums the row term without keepdim, so the (..., ) sums broadcast along the last "
          "axis instead of lining up with their rows (shape error, or silently mixed rows "
          "for square inputs)",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row-term-without-weights",
          "subtracts the plain row sum of grad_weights instead of the weighted sum "
          "(grad_weights * weights).sum(-1)",
          sb_row_term_without_weights),
    Entry("softmax_backward", "wrong", "torch-diag-on-batch",
          "builds the Jacobian with torch.diag(p), which on a batch of rows extracts a "
          "diagonal (or fails above 2-D) instead of making one diagonal matrix per row "
          "(torch.diag_embed): shape errors, or wrong values for square inputs",
          sb_torch_diag_jacobian),
    Entry("softmax_backward", "wrong", "no-cast-back",
          "computes in float32 and returns float32 for float16 / bfloat16 inputs instead of "
          "weights' dtype",
          sb_no_cast_back),
    Entry("softmax_backward", "wrong", "row-term-over-dim0",
          "sums the row term over dim 0 (down the columns) instead of over the last axis",
          sb_sum_over_dim0),
    Entry("softmax_backward", "wrong", "weights-and-grads-swapped",
          "swaps the roles of weights and grad_weights: grad_weights * (weights - row term) "
          "instead of weights * (grad_weights - row term)",
          sb_roles_swapped),
    Entry("softmax_backward", "right", "einsum-float64", None, sb_einsum_f64),
    Entry("softmax_backward", "right", "explicit-jacobian-diag-embed", None,
          sb_explicit_jacobian),

    Entry("attention_backward", "wrong", "causal-top-left",
          "builds the causal mask with tril() and no offset (top-left), wrong whenever "
          "N_q != N_k: bottom-right alignment needs tril(N_k - N_q)",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "grad-k-unscaled",
          "forgets the 1/sqrt(d) factor in grad_k (it is applied to grad_q only)",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "grad-v-not-transposed",
          "computes grad_v = p @ grad_out instead of p^T @ grad_out (shape error when "
          "N_q != N_k, wrong values when square)",
          ab_grad_v_untransposed),
    Entry("attention_backward", "wrong", "softmax-nan-rows",
          "uses torch.softmax on rows that are all -inf (causal, N_q > N_k), which gives NaN "
          "instead of zero weights, so those rows poison the gradients",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "no-softmax-row-term",
          "treats the softmax like an elementwise exp: grad_s = p * grad_p, leaving out the "
          "row term - rowsum(grad_p * p)",
          ab_no_row_term),
    Entry("attention_backward", "wrong", "grad-q-from-v",
          "copy-paste slip: grad_q = grad_s @ v instead of grad_s @ k (wrong shape when "
          "d_v != d, wrong values otherwise)",
          ab_grad_q_from_v),
    Entry("attention_backward", "right", "einsum-delta-float64", None, ab_einsum_delta_f64),
    Entry("attention_backward", "right", "per-matrix-jacobian-loop", None,
          ab_loop_over_heads_jacobian),

    Entry("attention_backward_flops", "wrong", "adds-forward",
          "adds the forward's 4 N^2 d to the backward count: the question asks for the "
          "backward alone",
          abf_adds_forward),
    Entry("attention_backward_flops", "wrong", "recomputes-whole-forward",
          "counts the recomputation as a whole forward (4 N^2 d, scores and p v) instead of "
          "the scores q k^T alone (2 N^2 d)",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "one-flop-per-mac",
          "counts one FLOP per multiply-add instead of two: N^2 d per product",
          abf_one_flop_per_mac),
    Entry("attention_backward_flops", "wrong", "float-factor",
          "multiplies by 1.25 for the recomputation, so the result is a float instead of a "
          "plain int",
          abf_float_factor),
    Entry("attention_backward_flops", "wrong", "recompute-inverted",
          "adds the recomputation when recompute is False (if not recompute) instead of when "
          "it is True",
          abf_recompute_inverted),
    Entry("attention_backward_flops", "wrong", "n-d-squared",
          "counts each product as 2 N d^2 instead of 2 N^2 d (sequence length and head size "
          "swapped)",
          abf_n_d_squared),
    Entry("attention_backward_flops", "right", "product-shapes", None, abf_product_shapes),
    Entry("attention_backward_flops", "right", "closed-form", None, abf_closed_form),

    Entry("flash_attention_backward", "wrong", "block-local-delta",
          "computes the row term from the current key block alone, rowsum(grad_p * p) over "
          "the block, instead of delta = rowsum(grad_out * out) over all keys",
          fb_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no-lse-guard",
          "recomputes p = exp(s - lse) without guarding rows whose lse is -inf, so a query "
          "with no visible key gets exp(-inf - -inf) = NaN",
          fb_no_lse_guard),
    Entry("flash_attention_backward", "wrong", "causal-top-left",
          "masks key j > i (top-left) instead of j > i + N_k - N_q, wrong whenever "
          "N_q != N_k",
          fb_causal_top_left),
    Entry("flash_attention_backward", "wrong", "grad-q-overwritten",
          "assigns grad_q = grad_s @ k_blk in every block instead of adding to it, so only "
          "the last key block's contribution survives",
          fb_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "recompute-unscaled",
          "recomputes the block scores as q @ k^T without 1/sqrt(d), while lse is of the "
          "scaled scores, so the recomputed p are wrong",
          fb_recompute_unscaled),
    Entry("flash_attention_backward", "wrong", "exp2-with-natural-lse",
          "recomputes p with torch.exp2 (as the CUDA kernels do) although lse is a natural "
          "log and the scores are not scaled by log2(e)",
          fb_exp2),
    Entry("flash_attention_backward", "right", "tiled-both-axes-f64", None,
          fb_tiled_both_axes_f64),
    Entry("flash_attention_backward", "right", "einsum-key-blocks", None, fb_einsum_key_blocks),
]
