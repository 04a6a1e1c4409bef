"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward. No torch.autograd anywhere."""

import math

import torch

from entry import Entry


# ============================================================== softmax_backward
def sb_row_term_no_keepdim(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_over_first_axis(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_precedence(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p = weights.to(ct)
    g = grad_weights.to(ct)
    dot = torch.sum(p * g, dim=-1, keepdim=True)
    return (p * g - dot).to(weights.dtype)


def sb_row_term_without_p(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = g.sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_returns_float32(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return p * (g - (g * p).sum(dim=-1, keepdim=True))


def sb_diagonal_only(weights, grad_weights):
    ct = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (1.0 - p) * g).to(weights.dtype)


def sb_full_jacobian_float64(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n), symmetric
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_einsum_dot(weights, grad_weights):
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    dot = torch.einsum("...i,...i->...", p, g)
    return (p * g - p * dot[..., None]).to(weights.dtype)


# ============================================================== attention_backward
def _visible(n_q, n_k):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def _safe_softmax(s):
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(dim=-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g = (t.to(ct) for t in (q, k, v, grad_out))
    sc = 1.0 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), float("-inf"))
    p = _safe_softmax(s)
    dv = p.transpose(-2, -1) @ g
    dp = g @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ k_ * sc
    dk = ds.transpose(-2, -1) @ q_
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_grad_v_not_transposed(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g = (t.to(ct) for t in (q, k, v, grad_out))
    sc = 1.0 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), float("-inf"))
    p = _safe_softmax(s)
    dv = p @ g
    dp = g @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ k_ * sc
    dk = ds.transpose(-2, -1) @ q_ * sc
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    Q, K, V, G = q.to(ct), k.to(ct), v.to(ct), grad_out.to(ct)
    scale = q.shape[-1] ** -0.5
    S = Q @ K.transpose(-2, -1) * scale
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        S = S.masked_fill(~keep, float("-inf"))
    P = _safe_softmax(S)
    dV = P.transpose(-2, -1) @ G
    dP = G @ V.transpose(-2, -1)
    dS = P * (dP - (dP * P).sum(-1, keepdim=True))
    return ((dS @ K * scale).to(q.dtype), (dS.transpose(-2, -1) @ Q * scale).to(k.dtype),
            dV.to(v.dtype))


def ab_softmax_nan_rows(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g = (t.to(ct) for t in (q, k, v, grad_out))
    sc = 1.0 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), float("-inf"))
    p = torch.softmax(s, dim=-1)
    dv = p.transpose(-2, -1) @ g
    dp = g @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ k_ * sc).to(q.dtype), (ds.transpose(-2, -1) @ q_ * sc).to(k.dtype),
            dv.to(v.dtype))


def ab_no_row_term(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g = (t.to(ct) for t in (q, k, v, grad_out))
    sc = 1.0 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), float("-inf"))
    p = _safe_softmax(s)
    dv = p.transpose(-2, -1) @ g
    ds = p * (g @ v_.transpose(-2, -1))  # softmax treated like an elementwise exp
    return ((ds @ k_ * sc).to(q.dtype), (ds.transpose(-2, -1) @ q_ * sc).to(k.dtype),
            dv.to(v.dtype))


def ab_scale_from_value_width(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g = (t.to(ct) for t in (q, k, v, grad_out))
    sc = 1.0 / math.sqrt(v.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), float("-inf"))
    p = _safe_softmax(s)
    dv = p.transpose(-2, -1) @ g
    dp = g @ v_.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ((ds @ k_ * sc).to(q.dtype), (ds.transpose(-2, -1) @ q_ * sc).to(k.dtype),
            dv.to(v.dtype))


def ab_delta_from_out_einsum(q, k, v, grad_out, causal=False):
    """Row term from delta = rowsum(grad_out * out), everything in float64 with einsum."""
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        allowed = (torch.arange(nk)[None, :] - torch.arange(nq)[:, None]) <= nk - nq
        s = torch.where(allowed, s, torch.full_like(s, -math.inf))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)  # rows with no key -> 0
    out = torch.einsum("...ij,...je->...ie", p, V)
    delta = torch.einsum("...ie,...ie->...i", G, out)
    dp = torch.einsum("...ie,...je->...ij", G, V)
    ds = p * (dp - delta[..., None])
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    dv = torch.einsum("...ij,...ie->...je", p, G)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_row_jacobians(q, k, v, grad_out, causal=False):
    """Flattens the leading axes, applies each row's full softmax Jacobian explicitly."""
    ct = torch.promote_types(q.dtype, torch.float32)
    lead = q.shape[:-2]
    nq, d = q.shape[-2:]
    nk, dv_ = k.shape[-2], v.shape[-1]
    Q = q.to(ct).reshape(-1, nq, d)
    K = k.to(ct).reshape(-1, nk, d)
    V = v.to(ct).reshape(-1, nk, dv_)
    G = grad_out.to(ct).reshape(-1, nq, dv_)
    gq, gk, gv = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    scale = 1.0 / math.sqrt(d)
    for b in range(Q.shape[0]):
        s = torch.mm(Q[b], K[b].t()) * scale
        if causal:
            s = s.masked_fill(~_visible(nq, nk), float("-inf"))
        p = _safe_softmax(s)
        gv[b] = torch.mm(p.t(), G[b])
        dp = torch.mm(G[b], V[b].t())
        jac = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (nq, nk, nk)
        ds = torch.bmm(jac, dp[:, :, None])[:, :, 0]
        gq[b] = torch.mm(ds, K[b]) * scale
        gk[b] = torch.mm(ds.t(), Q[b]) * scale
    return (gq.reshape(lead + (nq, d)).to(q.dtype), gk.reshape(lead + (nk, d)).to(k.dtype),
            gv.reshape(lead + (nk, dv_)).to(v.dtype))


# ============================================================== attention_backward_flops
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    backward = 4 * 2 * n * n * d
    if recompute:
        backward += 4 * n * n * d  # redo the forward
    return backward


def abf_one_flop_per_mac(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    total = 4 * per_product
    if not recompute:
        total += per_product
    return total


def abf_float_ratio(seq_len, head_dim, recompute=True):
    base = 8 * seq_len ** 2 * head_dim
    return base * 1.25 if recompute else base


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 2 * n * n * d * 4 + 2 * n * n * d if recompute else 0


def abf_three_products(seq_len, head_dim, recompute=True):
    one = 2 * seq_len * seq_len * head_dim
    count = 3  # grad_v, grad_q, grad_k
    if recompute:
        count += 1
    return count * one


def abf_list_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d),  # grad_v = p^T grad_out
              (n, d, n),  # grad_p = grad_out v^T
              (n, n, d),  # grad_q = grad_s k
              (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * c for m, kk, c in shapes)


def abf_from_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    extra = forward // 2 if recompute else 0
    return int(2 * forward + extra)


# ============================================================== flash_attention_backward
def _fb_setup(q, k, out, lse, grad_out):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    g = grad_out.to(ct)
    lse_ = lse.to(ct).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    return ct, d, qs, g, lse_


def fab_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, lse_ = _fb_setup(q, k, out, lse, grad_out)
    nq, nk = q.shape[-2], k.shape[-2]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        dp = g @ vb.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))  # row term of this block only
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    dq = dq / math.sqrt(d)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_no_inf_guard(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    d = q.shape[-1]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    nq, nk = q.shape[-2], k.shape[-2]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
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


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, lse_ = _fb_setup(q, k, out, lse, grad_out)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    nq, nk = q.shape[-2], k.shape[-2]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq = ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, lse_ = _fb_setup(q, k, out, lse, grad_out)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    nq, nk = q.shape[-2], k.shape[-2]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp2(s - lse_)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, lse_ = _fb_setup(q, k, out, lse, grad_out)
    delta = (g * out.to(ct)).sum(-1, keepdim=True)
    nq, nk = q.shape[-2], k.shape[-2]
    qpos = torch.arange(nq)[:, None]
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_delta_no_keepdim(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct, d, qs, g, lse_ = _fb_setup(q, k, out, lse, grad_out)
    delta = (g * out.to(ct)).sum(-1)  # (B, H, N)
    nq, nk = q.shape[-2], k.shape[-2]
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    dq = torch.zeros_like(qs)
    dk = torch.empty(k.shape, dtype=ct)
    dv = torch.empty(v.shape, dtype=ct)
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        kb, vb = k[..., a:b, :].to(ct), v[..., a:b, :].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse_)
        dv[..., a:b, :] = p.transpose(-2, -1) @ g
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        dq += ds @ kb
        dk[..., a:b, :] = ds.transpose(-2, -1) @ qs
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_two_d_tiles_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles both queries and keys (FlashAttention-2's full tiling), float64."""
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    Q, K, V = q.double(), k.double(), v.double()
    G, O = grad_out.double(), out.double()
    L = lse.double()
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    D = (G * O).sum(dim=-1)  # (B, H, N_q)
    for i0 in range(0, nq, block_size):
        i1 = min(i0 + block_size, nq)
        Qi, Gi = Q[..., i0:i1, :] * scale, G[..., i0:i1, :]
        Li, Di = L[..., i0:i1, None], D[..., i0:i1, None]
        no_key = torch.isneginf(Li)
        Li = torch.where(no_key, torch.zeros_like(Li), Li)
        for j0 in range(0, nk, block_size):
            j1 = min(j0 + block_size, nk)
            Kj, Vj = K[..., j0:j1, :], V[..., j0:j1, :]
            S = torch.matmul(Qi, Kj.transpose(-1, -2))
            P = torch.exp(S - Li)
            keep = ~no_key
            if causal:
                rows = torch.arange(i0, i1)[:, None] + (nk - nq)
                cols = torch.arange(j0, j1)[None, :]
                keep = keep & (cols <= rows)
            P = torch.where(keep, P, torch.zeros_like(P))
            dV[..., j0:j1, :] += torch.matmul(P.transpose(-1, -2), Gi)
            dS = P * (torch.matmul(Gi, Vj.transpose(-1, -2)) - Di)
            dQ[..., i0:i1, :] += torch.matmul(dS, Kj) * scale
            dK[..., j0:j1, :] += torch.matmul(dS.transpose(-1, -2), Qi)
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_einsum_nan_to_num(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    qc = q.to(ct)
    gc = grad_out.to(ct)
    delta = torch.einsum("bhnd,bhnd->bhn", gc, out.to(ct)).unsqueeze(-1)
    lse_c = lse.to(ct).unsqueeze(-1)
    grads_k, grads_v = [], []
    grad_q = torch.zeros_like(qc)
    for start in range(0, nk, block_size):
        kb = k[:, :, start:start + block_size].to(ct)
        vb = v[:, :, start:start + block_size].to(ct)
        s = torch.einsum("bhqd,bhkd->bhqk", qc, kb) / math.sqrt(d)
        if causal:
            ok = torch.arange(start, start + kb.shape[2])[None, :] <= \
                torch.arange(nq)[:, None] + (nk - nq)
            s = torch.where(ok, s, torch.full_like(s, -math.inf))
        p = torch.nan_to_num(torch.exp(s - lse_c), nan=0.0)  # -inf - (-inf) -> 0
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, gc))
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", gc, vb) - delta)
        grad_q = grad_q + torch.einsum("bhqk,bhkd->bhqd", ds, kb) / math.sqrt(d)
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, qc) / math.sqrt(d))
    return (grad_q.to(q.dtype), torch.cat(grads_k, dim=2).to(k.dtype),
            torch.cat(grads_v, dim=2).to(v.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_term_without_keepdim",
          "sums the row term without keepdim=True, so the (...,) row sums broadcast against "
          "the last axis instead of their own rows (raising when the shapes do not line up)",
          sb_row_term_no_keepdim),
    Entry("softmax_backward", "wrong", "row_term_over_first_axis",
          "sums grad_weights * weights over dim 0 instead of the last axis, mixing different "
          "rows into the row term",
          sb_sum_over_first_axis),
    Entry("softmax_backward", "wrong", "missing_parentheses",
          "writes p * g - rowsum(g * p) instead of p * (g - rowsum(g * p)): the row term is "
          "not multiplied by p",
          sb_precedence),
    Entry("softmax_backward", "wrong", "row_term_without_weights",
          "uses the plain row sum of grad_weights as the row term instead of "
          "rowsum(grad_weights * weights)",
          sb_row_term_without_p),
    Entry("softmax_backward", "wrong", "returns_float32",
          "computes in float32 but forgets to cast the result back to weights' dtype, so "
          "half-precision inputs come back as float32",
          sb_returns_float32),
    Entry("softmax_backward", "wrong", "jacobian_diagonal_only",
          "keeps only the diagonal of the Jacobian, p * (1 - p) * g, and drops the "
          "off-diagonal -p_i p_j terms",
          sb_diagonal_only),
    Entry("softmax_backward", "right", "explicit_jacobian_float64", None,
          sb_full_jacobian_float64),
    Entry("softmax_backward", "right", "einsum_dot_expanded", None, sb_einsum_dot),
    Entry("attention_backward", "wrong", "grad_k_missing_scale",
          "multiplies grad_q by 1/sqrt(d) but forgets the same factor on grad_k = grad_s^T q",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "grad_v_not_transposed",
          "computes grad_v = p @ grad_out instead of p^T @ grad_out (raises when N_q != N_k, "
          "wrong values when they are equal)",
          ab_grad_v_not_transposed),
    Entry("attention_backward", "wrong", "causal_top_left",
          "builds the causal mask with tril() (top-left, j <= i) instead of bottom-right "
          "(j <= i + N_k - N_q), wrong whenever N_q != N_k",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "nan_on_rows_without_keys",
          "uses torch.softmax on the masked scores, which gives NaN for a query that sees no "
          "key, instead of a zero row with no gradient",
          ab_softmax_nan_rows),
    Entry("attention_backward", "wrong", "no_softmax_row_term",
          "takes grad_s = p * grad_p, treating the softmax like an elementwise exp, and leaves "
          "out the - rowsum(grad_p * p) term",
          ab_no_row_term),
    Entry("attention_backward", "wrong", "scale_from_value_width",
          "takes the scale as 1/sqrt(v.shape[-1]), the value width d_v, instead of "
          "1/sqrt(d) from q and k, which is wrong whenever d_v != d",
          ab_scale_from_value_width),
    Entry("attention_backward", "right", "delta_from_out_float64_einsum", None,
          ab_delta_from_out_einsum),
    Entry("attention_backward", "right", "per_row_jacobian_loop", None, ab_row_jacobians),
    Entry("attention_backward_flops", "wrong", "recompute_whole_forward",
          "adds the whole forward (4 N^2 d, both products) for recompute=True instead of the "
          "single recomputed product q k^T (2 N^2 d)",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "one_flop_per_multiply_add",
          "counts one FLOP per multiply-add instead of two, halving every product",
          abf_one_flop_per_mac),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "adds the extra product when recompute is False (if not recompute) instead of when "
          "it is True",
          abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "applies the 2.5x / 2x ratio as base * 1.25, which returns a float instead of a "
          "plain int when recompute=True",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "conditional_expression_precedence",
          "writes 8 N^2 d + 2 N^2 d if recompute else 0 without parentheses, so the "
          "conditional covers the whole sum and recompute=False returns 0",
          abf_conditional_precedence),
    Entry("attention_backward_flops", "wrong", "forgets_grad_p_product",
          "counts three backward products (grad_v, grad_q, grad_k) and forgets "
          "grad_p = grad_out v^T",
          abf_three_products),
    Entry("attention_backward_flops", "right", "sum_over_product_shapes", None,
          abf_list_of_products),
    Entry("attention_backward_flops", "right", "from_forward_count", None, abf_from_forward),
    Entry("flash_attention_backward", "wrong", "block_local_row_term",
          "computes the row term as rowsum(grad_p * p) over the current key block only, "
          "instead of delta = rowsum(grad_out * out) over all keys",
          fab_block_local_delta),
    Entry("flash_attention_backward", "wrong", "no_neg_inf_lse_guard",
          "uses lse as it is, so for a query with no visible key exp(-inf - (-inf)) gives NaN "
          "instead of zero probabilities",
          fab_no_inf_guard),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten",
          "assigns grad_q = grad_s @ k_blk in each block instead of accumulating with +=, so "
          "only the last key block's contribution survives",
          fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "exp2_with_natural_lse",
          "recomputes the probabilities with torch.exp2 although lse is a natural-log "
          "log-sum-exp (base-2 exponent where base e belongs)",
          fab_exp2),
    Entry("flash_attention_backward", "wrong", "causal_top_left",
          "places query i at position i (top-left causal mask) instead of i + N_k - N_q, "
          "wrong whenever N_q != N_k",
          fab_causal_top_left),
    Entry("flash_attention_backward", "wrong", "delta_without_keepdim",
          "sums delta = (grad_out * out).sum(-1) without keepdim, so it broadcasts along the "
          "key axis of the block instead of its rows (or raises when the sizes clash)",
          fab_delta_no_keepdim),
    Entry("flash_attention_backward", "right", "query_and_key_tiles_float64", None,
          fab_two_d_tiles_float64),
    Entry("flash_attention_backward", "right", "einsum_nan_to_num", None, fab_einsum_nan_to_num),
]
