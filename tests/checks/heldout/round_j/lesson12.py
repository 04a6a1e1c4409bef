"""Lesson 12 (torch): softmax_backward, attention_backward, attention_backward_flops,
flash_attention_backward; round j entries (no autograd anywhere)."""

import math
from fractions import Fraction

import torch

from entry import Entry

# -------------------------------------------------------------------------- softmax_backward


def _up(t):
    return t.to(torch.promote_types(t.dtype, torch.float32))


def sb_sum_without_keepdim(weights, grad_weights):
    p, g = _up(weights), _up(grad_weights)
    return (p * (g - (g * p).sum(-1))).to(weights.dtype)


def sb_sigmoid_diagonal(weights, grad_weights):
    p, g = _up(weights), _up(grad_weights)
    return (p * (1 - p) * g).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    p, g = _up(weights), _up(grad_weights)
    return (p * ((g * p).sum(-1, keepdim=True) - g)).to(weights.dtype)


def sb_unweighted_row_sum(weights, grad_weights):
    p, g = _up(weights), _up(grad_weights)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_row_term_over_first_axis(weights, grad_weights):
    p, g = _up(weights), _up(grad_weights)
    return (p * (g - (g * p).sum(0, keepdim=True))).to(weights.dtype)


def sb_mean_row_term(weights, grad_weights):
    p, g = _up(weights), _up(grad_weights)
    return (p * (g - (g * p).mean(-1, keepdim=True))).to(weights.dtype)


def sb_full_jacobian(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_einsum_float64(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    dot = torch.einsum("...i,...i->...", p, g)
    return torch.einsum("...i,...i->...i", p, g - dot[..., None]).to(weights.dtype)


# ------------------------------------------------------------------------ attention_backward


def _visible(n_q, n_k, top_left=False):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(0 if top_left else n_k - n_q)


def _rows_softmax(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


def _ab(q, k, v, grad_out, causal, *, grad_k_T=True, scale_k=True, row_dim=-1,
        keep_f32=False, top_left=False, plain_softmax=False):
    c = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    sc = 1.0 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2], top_left), -math.inf)
    p = torch.softmax(s, -1) if plain_softmax else _rows_softmax(s)
    grad_v = p.transpose(-2, -1) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(row_dim, keepdim=True))
    grad_q = grad_s @ k_ * sc
    grad_k = (grad_s.transpose(-2, -1) if grad_k_T else grad_s) @ q_
    if scale_k:
        grad_k = grad_k * sc
    if keep_f32:
        return grad_q, grad_k, grad_v
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_k_not_transposed(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, grad_k_T=False)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, scale_k=False)


def ab_row_term_over_queries(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, row_dim=-2)


def ab_returns_float32(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, keep_f32=True)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, top_left=True)


def ab_torch_softmax_nan_rows(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, plain_softmax=True)


def ab_delta_identity_float64(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    d = q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        vis = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = torch.where(vis, s, torch.tensor(-math.inf, dtype=torch.float64))
    lse = torch.logsumexp(s, -1, keepdim=True)
    p = torch.nan_to_num(torch.exp(s - lse), nan=0.0)
    out = p @ v_
    delta = (g_ * out).sum(-1, keepdim=True)  # = rowsum(grad_p * p)
    grad_s = p * (g_ @ v_.transpose(-2, -1) - delta)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, k_) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, q_) / math.sqrt(d)
    grad_v = torch.einsum("...ij,...ie->...je", p, g_)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_per_row_jacobian(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_visible(n_q, n_k), -math.inf)
    p = _rows_softmax(s)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., N_q, N_k, N_k)
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = torch.einsum("...ij,...ijk->...ik", grad_p, jac)
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    grad_v = p.transpose(-2, -1) @ g_
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ------------------------------------------------------------------ attention_backward_flops


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    base = 8 * seq_len * seq_len * head_dim
    return base + (2 * seq_len * seq_len * head_dim if not recompute else 0)


def abf_three_products(seq_len, head_dim, recompute=True):
    products = 3 + (1 if recompute else 0)
    return products * 2 * seq_len * seq_len * head_dim


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def abf_macs(seq_len, head_dim, recompute=True):
    return (5 if recompute else 4) * seq_len * seq_len * head_dim


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + (4 * n * n * d if recompute else 0)


def abf_n_d_swapped(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * d * d + (2 * n * d * d if recompute else 0)


def abf_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d), (n, d, n), (n, n, d), (n, n, d)]  # grad_v, grad_p, grad_q, grad_k
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in shapes)


def abf_fraction_of_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    ratio = Fraction(5, 2) if recompute else Fraction(2)
    return int(ratio * forward)


# ------------------------------------------------------------------ flash_attention_backward


def _fab(q, k, v, out, lse, grad_out, block_size, causal, *, delta_full=False, scale=True,
         delta_from_grad=False, strict=False, precedence=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(c) * (sc if scale else 1.0)
    g_ = grad_out.to(c)
    if delta_full:
        s_full = qs @ k.to(c).transpose(-2, -1)
        if causal:
            kp = torch.arange(n_k)[None, :]
            qp = torch.arange(n_q)[:, None] + (n_k - n_q)
            s_full = s_full.masked_fill(kp > qp, -math.inf)
        lse_full = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
        p_full = torch.exp(s_full - lse_full)
        delta = ((g_ @ v.to(c).transpose(-2, -1)) * p_full).sum(-1, keepdim=True)
    elif delta_from_grad:
        delta = g_.sum(-1, keepdim=True)
    else:
        delta = (g_ * out.to(c)).sum(-1, keepdim=True)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros(q.shape, dtype=c)
    grad_k = torch.zeros(k.shape, dtype=c)
    grad_v = torch.zeros(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(c), v[..., start:stop, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(start, stop)[None, :]
            blocked = kpos >= qpos if strict else kpos > qpos
            s = s.masked_fill(blocked, -math.inf)
        p = torch.exp(s - lse_)
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g_
        dp = g_ @ vb.transpose(-2, -1)
        ds = p * dp - delta if precedence else p * (dp - delta)
        grad_q += ds @ kb
        grad_k[..., start:stop, :] = ds.transpose(-2, -1) @ (q.to(c) * sc)
    grad_q = grad_q * sc
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_delta_from_full_matrix(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, delta_full=True)


def fab_recompute_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, scale=False)


def fab_delta_without_out(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, delta_from_grad=True)


def fab_causal_diagonal_masked(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, strict=True)


def fab_missing_parentheses(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, precedence=True)


def fab_query_blocks_overwrite(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Blocks over keys (outer) and queries (inner); grad_k/grad_v assigned, not summed."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    sc = 1.0 / math.sqrt(d)
    qs, g_ = q.to(c) * sc, grad_out.to(c)
    delta = (g_ * out.to(c)).sum(-1, keepdim=True)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    grad_q = torch.zeros(q.shape, dtype=c)
    grad_k = torch.zeros(k.shape, dtype=c)
    grad_v = torch.zeros(v.shape, dtype=c)
    for ks in range(0, n_k, block_size):
        ke = min(ks + block_size, n_k)
        kb, vb = k[..., ks:ke, :].to(c), v[..., ks:ke, :].to(c)
        for qs0 in range(0, n_q, block_size):
            qe = min(qs0 + block_size, n_q)
            s = qs[..., qs0:qe, :] @ kb.transpose(-2, -1)
            if causal:
                vis = torch.arange(ks, ke)[None, :] <= (torch.arange(qs0, qe)[:, None]
                                                        + n_k - n_q)
                s = s.masked_fill(~vis, -math.inf)
            p = torch.exp(s - lse_[..., qs0:qe, :])
            gq = g_[..., qs0:qe, :]
            grad_v[..., ks:ke, :] = p.transpose(-2, -1) @ gq
            ds = p * (gq @ vb.transpose(-2, -1) - delta[..., qs0:qe, :])
            grad_q[..., qs0:qe, :] += ds @ kb
            grad_k[..., ks:ke, :] = ds.transpose(-2, -1) @ qs[..., qs0:qe, :]
    return (grad_q * sc).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_two_dim_tiles_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """FlashAttention-2 style: outer loop over key tiles, inner loop over query tiles."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f = torch.float64
    qd, kd, vd, gd = q.to(f), k.to(f), v.to(f), grad_out.to(f)
    delta = torch.einsum("bhnd,bhnd->bhn", gd, out.to(f))
    lse_d = torch.where(torch.isneginf(lse.to(f)), torch.full_like(lse.to(f), math.inf),
                        lse.to(f))
    grad_q = torch.zeros_like(qd)
    grad_k = torch.zeros_like(kd)
    grad_v = torch.zeros_like(vd)
    inv = d ** -0.5
    for ks in range(0, n_k, block_size):
        ke = min(ks + block_size, n_k)
        kb, vb = kd[:, :, ks:ke], vd[:, :, ks:ke]
        for q0 in range(0, n_q, block_size):
            q1 = min(q0 + block_size, n_q)
            s = (qd[:, :, q0:q1] @ kb.transpose(-2, -1)) * inv
            if causal:
                rows = torch.arange(q0, q1)[:, None] + (n_k - n_q)
                s = s.masked_fill(torch.arange(ks, ke)[None, :] > rows, -math.inf)
            p = torch.exp(s - lse_d[:, :, q0:q1, None])
            gq = gd[:, :, q0:q1]
            grad_v[:, :, ks:ke] += p.transpose(-2, -1) @ gq
            ds = p * (gq @ vb.transpose(-2, -1) - delta[:, :, q0:q1, None])
            grad_q[:, :, q0:q1] += (ds @ kb) * inv
            grad_k[:, :, ks:ke] += (ds.transpose(-2, -1) @ qd[:, :, q0:q1]) * inv
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_query_outer_loop(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Outer loop over query blocks (grad_q finished per block), keys inner."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.promote_types(q.dtype, torch.float32)
    qc, kc, vc, gc = (t.to(c) for t in (q, k, v, grad_out))
    scale = 1.0 / math.sqrt(d)
    grad_q = torch.empty(q.shape, dtype=c)
    grad_k = torch.zeros(k.shape, dtype=c)
    grad_v = torch.zeros(v.shape, dtype=c)
    for q0 in range(0, n_q, block_size):
        q1 = min(q0 + block_size, n_q)
        qb, gb = qc[..., q0:q1, :], gc[..., q0:q1, :]
        lse_b = lse[..., q0:q1].to(c)
        lse_b = torch.where(torch.isneginf(lse_b), torch.full_like(lse_b, math.inf), lse_b)
        delta_b = (gb * out[..., q0:q1, :].to(c)).sum(-1, keepdim=True)
        acc = torch.zeros(qb.shape, dtype=c)
        for k0 in range(0, n_k, block_size):
            k1 = min(k0 + block_size, n_k)
            s = (qb @ kc[..., k0:k1, :].transpose(-2, -1)) * scale
            if causal:
                allowed = torch.arange(k0, k1)[None, :] <= \
                    torch.arange(q0, q1)[:, None] + (n_k - n_q)
                s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=c))
            p = torch.exp(s - lse_b[..., None])
            grad_v[..., k0:k1, :] += p.transpose(-2, -1) @ gb
            ds = p * (gb @ vc[..., k0:k1, :].transpose(-2, -1) - delta_b)
            acc += ds @ kc[..., k0:k1, :]
            grad_k[..., k0:k1, :] += (ds.transpose(-2, -1) @ qb) * scale
        grad_q[..., q0:q1, :] = acc * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_sum_without_keepdim",
          "Sums grad_weights * weights over the last axis without keepdim, so the (...,) row "
          "term broadcasts against the wrong axis (or fails).", sb_sum_without_keepdim),
    Entry("softmax_backward", "wrong", "sigmoid_style_diagonal",
          "Uses the elementwise p (1 - p) * grad, the diagonal of the Jacobian only, dropping "
          "the -p_i p_j cross terms.", sb_sigmoid_diagonal),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "Computes p * (rowsum(g p) - g), the negative of the gradient.", sb_sign_flipped),
    Entry("softmax_backward", "wrong", "row_term_not_weighted",
          "Subtracts the plain row sum of grad_weights instead of the row sum of "
          "grad_weights * weights.", sb_unweighted_row_sum),
    Entry("softmax_backward", "wrong", "row_term_over_first_axis",
          "Takes the row term's sum over dim 0 instead of the last axis, mixing different "
          "rows.", sb_row_term_over_first_axis),
    Entry("softmax_backward", "wrong", "row_term_mean",
          "Uses the mean of grad_weights * weights over the row instead of its sum.",
          sb_mean_row_term),
    Entry("softmax_backward", "right", "full_jacobian_matvec", None, sb_full_jacobian),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),

    Entry("attention_backward", "wrong", "grad_k_missing_transpose",
          "Computes grad_k as grad_s @ q instead of grad_s^T @ q, which fails with a shape "
          "error when N_q != N_k and gives wrong values when they are equal.",
          ab_grad_k_not_transposed),
    Entry("attention_backward", "wrong", "grad_k_missing_scale",
          "Multiplies grad_q by 1/sqrt(d) but forgets the same factor on grad_k.",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "softmax_row_term_over_queries",
          "Sums grad_p * p over the query axis (-2) instead of the key axis in the softmax "
          "backward.", ab_row_term_over_queries),
    Entry("attention_backward", "wrong", "returns_float32",
          "Computes in float32 and returns the gradients in float32 for half-precision "
          "inputs instead of the inputs' dtype.", ab_returns_float32),
    Entry("attention_backward", "wrong", "causal_mask_top_left",
          "Builds the causal mask with tril(0), aligned top-left, instead of bottom-right "
          "when N_q != N_k.", ab_causal_top_left),
    Entry("attention_backward", "wrong", "nan_rows_from_torch_softmax",
          "Uses torch.softmax on the masked scores, which gives NaN for a query row with no "
          "visible key, and the NaN spreads into all three gradients.",
          ab_torch_softmax_nan_rows),
    Entry("attention_backward", "right", "delta_identity_float64", None,
          ab_delta_identity_float64),
    Entry("attention_backward", "right", "per_row_jacobian_einsum", None, ab_per_row_jacobian),

    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "Adds the 2 N^2 d recomputation when recompute is False and leaves it out when it "
          "is True.", abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "three_backward_products",
          "Counts three backward products (forgetting grad_p = grad_out v^T), 6 N^2 d "
          "instead of 8 N^2 d.", abf_three_products),
    Entry("attention_backward_flops", "wrong", "ratio_times_forward_float",
          "Multiplies the forward's 4 N^2 d by 2.5 or 2, which returns a float instead of a "
          "plain int.", abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "multiply_adds_counted_once",
          "Counts one multiply-add as 1 FLOP, returning half the FLOPs.", abf_macs),
    Entry("attention_backward_flops", "wrong", "recompute_counts_whole_forward",
          "Adds the whole forward (4 N^2 d) for recompute instead of only the scores "
          "product q k^T (2 N^2 d).", abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "n_and_d_swapped",
          "Writes the terms as N d^2 instead of N^2 d, squaring the head dimension instead "
          "of the sequence length.", abf_n_d_swapped),
    Entry("attention_backward_flops", "right", "list_of_products", None, abf_product_list),
    Entry("attention_backward_flops", "right", "fraction_of_forward", None,
          abf_fraction_of_forward),

    Entry("flash_attention_backward", "wrong", "delta_from_full_probability_matrix",
          "Computes delta as rowsum(grad_p * p) from a full recomputed N x N probability "
          "matrix instead of rowsum(grad_out * out): the right values, but it builds the "
          "N x N tensor and spends an extra pass of products.", fab_delta_from_full_matrix),
    Entry("flash_attention_backward", "wrong", "recomputed_scores_unscaled",
          "Recomputes each block's probabilities as exp(q k^T - lse) without the 1/sqrt(d) "
          "scale, so they no longer match the forward's lse.", fab_recompute_unscaled),
    Entry("flash_attention_backward", "wrong", "delta_without_out",
          "Takes delta as the row sum of grad_out alone instead of rowsum(grad_out * out).",
          fab_delta_without_out),
    Entry("flash_attention_backward", "wrong", "causal_mask_excludes_diagonal",
          "Masks keys with key_pos >= query_pos instead of key_pos > query_pos, so each "
          "query's own key gets no gradient.", fab_causal_diagonal_masked),
    Entry("flash_attention_backward", "wrong", "grad_s_missing_parentheses",
          "Writes grad_s = p * dp - delta instead of p * (dp - delta), so delta is subtracted "
          "without being multiplied by p.", fab_missing_parentheses),
    Entry("flash_attention_backward", "wrong", "grad_kv_overwritten_across_query_blocks",
          "Also blocks over queries but assigns grad_k and grad_v of a key block for each "
          "query block instead of adding, so only the last query block's contribution "
          "survives.", fab_query_blocks_overwrite),
    Entry("flash_attention_backward", "right", "two_dim_tiles_float64", None,
          fab_two_dim_tiles_float64),
    Entry("flash_attention_backward", "right", "query_outer_loop", None, fab_query_outer_loop),
]
