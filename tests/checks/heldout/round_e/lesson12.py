"""Lesson 12 (torch): softmax_backward, attention_backward, attention_backward_flops,
flash_attention_backward. No autograd anywhere."""

import math
from fractions import Fraction

import torch

from entry import Entry


def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


# ------------------------------------------------------------------ softmax_backward, wrong
def sb_no_keepdim(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    row = (g * p).sum(-1)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_dim0(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    row = (g * p).sum(0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_missing_outer_p(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_row_without_p(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * ((g * p).sum(-1, keepdim=True) - g)).to(weights.dtype)


def sb_row_times_p_twice(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * g - p * p * (g * p).sum(-1, keepdim=True)).to(weights.dtype)


# ------------------------------------------------------------------ softmax_backward, right
def sb_jacobian_einsum(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_expanded(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    pg = p * g
    return (pg - p * pg.sum(dim=-1, keepdim=True)).to(weights.dtype)


# ------------------------------------------------------------------ attention_backward helpers
def _softmax_rows(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


def _ab(q, k, v, grad_out, causal, *, no_scale=False, gk_from_k=False, p_not_t=False,
        top_left=False, no_guard=False, no_cast=False, row_axis=-1):
    c = _c(q)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        offset = 0 if top_left else n_k - n_q
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(offset), -math.inf)
    if no_guard:
        p = torch.softmax(s, -1)
    else:
        p = _softmax_rows(s)
    grad_v = (p if p_not_t else p.transpose(-2, -1)) @ g_
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=row_axis, keepdim=True))
    gs = 1.0 if no_scale else scale
    grad_q = grad_s @ k_ * gs
    grad_k = grad_s.transpose(-2, -1) @ (k_ if gk_from_k else q_) * gs
    if no_cast:
        return grad_q, grad_k, grad_v
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_no_scale(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, no_scale=True)


def ab_grad_k_from_k(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, gk_from_k=True)


def ab_p_not_transposed(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, p_not_t=True)


def ab_top_left(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, top_left=True)


def ab_nan_rows(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, no_guard=True)


def ab_no_cast_back(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, no_cast=True)


def ab_row_term_over_queries(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, row_axis=-2)


# ------------------------------------------------------------------ attention_backward, right
def ab_jacobian_float64(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    s = torch.einsum("...qd,...kd->...qk", q_, k_) / math.sqrt(d)
    if causal:
        vis = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = torch.where(vis, s, torch.tensor(-math.inf, dtype=torch.float64))
    p = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., q, k, k)
    grad_p = torch.einsum("...qe,...ke->...qk", g_, v_)
    grad_s = torch.einsum("...qj,...qjk->...qk", grad_p, jac)
    grad_q = torch.einsum("...qk,...kd->...qd", grad_s, k_) / math.sqrt(d)
    grad_k = torch.einsum("...qk,...qd->...kd", grad_s, q_) / math.sqrt(d)
    grad_v = torch.einsum("...qk,...qe->...ke", p, g_)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_delta_from_out(q, k, v, grad_out, causal=False):
    """Uses the FlashAttention identity rowsum(grad_p * p) = rowsum(grad_out * out)."""
    c = _c(q)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    qs = q_ / math.sqrt(d)
    s = qs @ k_.transpose(-2, -1)
    if causal:
        s = s.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1), -math.inf)
    lse = torch.logsumexp(s, -1, keepdim=True)
    p = torch.exp(s - lse.masked_fill(torch.isneginf(lse), math.inf))
    out = p @ v_
    delta = (g_ * out).sum(-1, keepdim=True)
    grad_s = p * (g_ @ v_.transpose(-2, -1) - delta)
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ qs
    grad_v = p.transpose(-2, -1) @ g_
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ------------------------------------------------------------------ attention_backward_flops
def abf_recompute_both(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + (4 * n * n * d if recompute else 0)


def abf_one_flop_per_mac(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 4 * n * n * d + (n * n * d if recompute else 0)


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + (2 * n * n * d if not recompute else 0)


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return (2.5 if recompute else 2) * forward


def abf_three_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 6 * n * n * d + (2 * n * n * d if recompute else 0)


def abf_grad_p_as_n_d_squared(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    grad_v, grad_p, grad_q, grad_k = 2 * n * n * d, 2 * n * d * d, 2 * n * n * d, 2 * n * n * d
    return grad_v + grad_p + grad_q + grad_k + (2 * n * n * d if recompute else 0)


def abf_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d), (n, d, n), (n, n, d), (n, n, d)]  # grad_v, grad_p, grad_q, grad_k
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * a * b * c for a, b, c in shapes)


def abf_ratio_fraction(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return int(forward * (Fraction(5, 2) if recompute else Fraction(2)))


# ------------------------------------------------------------------ flash_attention_backward
def _fab(q, k, v, out, lse, grad_out, block_size, causal, *, block_softmax=False,
         unscaled_recompute=False, no_final_scale=False, delta_axis=-1, local_pos=False,
         assign_grad_k=False, mask_only_grad_s=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q)
    scale = 1.0 / math.sqrt(d)
    qs = q.to(c) * scale
    g = grad_out.to(c)
    o = out.to(c)
    if delta_axis == -1:
        delta = (g * o).sum(-1, keepdim=True)
    else:
        delta = (g * o).sum(-2, keepdim=True)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros(b, h, n_q, d, dtype=c)
    grad_k = torch.zeros(b, h, n_k, d, dtype=c)
    grad_v = torch.zeros(b, h, n_k, d, dtype=c)
    q_step = block_size if assign_grad_k else n_q
    for ks in range(0, n_k, block_size):
        ke = min(ks + block_size, n_k)
        kb, vb = k[:, :, ks:ke].to(c), v[:, :, ks:ke].to(c)
        for qs0 in range(0, n_q, q_step):
            qe = min(qs0 + q_step, n_q)
            qb = q[:, :, qs0:qe].to(c) if unscaled_recompute else qs[:, :, qs0:qe]
            s = qb @ kb.transpose(-2, -1)
            mask = None
            if causal:
                kpos = torch.arange(ke - ks)[None, :] if local_pos else torch.arange(ks, ke)[None, :]
                mask = kpos > qpos[qs0:qe]
                if not mask_only_grad_s:
                    s = s.masked_fill(mask, -math.inf)
            if block_softmax:
                p = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
            else:
                p = torch.exp(s - lse_[:, :, qs0:qe])
            gb = g[:, :, qs0:qe]
            dv = p.transpose(-2, -1) @ gb
            grad_p = gb @ vb.transpose(-2, -1)
            grad_s = p * (grad_p - delta[:, :, qs0:qe] if delta_axis == -1 else grad_p - delta)
            if mask is not None and mask_only_grad_s:
                grad_s = grad_s.masked_fill(mask, 0.0)
            grad_q[:, :, qs0:qe] += grad_s @ kb
            dk = grad_s.transpose(-2, -1) @ qs[:, :, qs0:qe]
            if assign_grad_k:
                grad_k[:, :, ks:ke] = dk
                grad_v[:, :, ks:ke] += dv
            else:
                grad_k[:, :, ks:ke] += dk
                grad_v[:, :, ks:ke] += dv
    if not no_final_scale:
        grad_q = grad_q * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_block_softmax(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, block_softmax=True)


def fab_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, unscaled_recompute=True)


def fab_no_grad_q_scale(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, no_final_scale=True)


def fab_delta_over_queries(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, delta_axis=-2)


def fab_local_key_positions(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, local_pos=True)


def fab_grad_k_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, assign_grad_k=True)


def fab_mask_only_grad_s(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, mask_only_grad_s=True)


# ------------------------------------------------------------------ flash backward, right
def fab_query_outer_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Query blocks outside, key blocks inside; grad_k / grad_v accumulate; float64."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    sc = d ** -0.5
    q64, k64, v64 = q.double(), k.double(), v.double()
    g64, o64 = grad_out.double(), out.double()
    lse64 = lse.double()
    lse64 = torch.where(torch.isneginf(lse64), torch.full_like(lse64, math.inf), lse64)
    gq = torch.zeros_like(q64)
    gk = torch.zeros_like(k64)
    gv = torch.zeros_like(v64)
    for a in range(0, n_q, block_size):
        e = min(a + block_size, n_q)
        qb = q64[:, :, a:e] * sc
        gb = g64[:, :, a:e]
        delta = (gb * o64[:, :, a:e]).sum(-1, keepdim=True)
        for s0 in range(0, n_k, block_size):
            s1 = min(s0 + block_size, n_k)
            s = qb @ k64[:, :, s0:s1].transpose(-2, -1)
            if causal:
                qpos = torch.arange(a, e)[:, None] + (n_k - n_q)
                s = torch.where(torch.arange(s0, s1)[None, :] <= qpos, s,
                                torch.tensor(-math.inf, dtype=torch.float64))
            p = torch.exp(s - lse64[:, :, a:e, None])
            gv[:, :, s0:s1] += p.transpose(-2, -1) @ gb
            ds = p * (gb @ v64[:, :, s0:s1].transpose(-2, -1) - delta)
            gq[:, :, a:e] += ds @ k64[:, :, s0:s1]
            gk[:, :, s0:s1] += ds.transpose(-2, -1) @ qb
    return (gq * sc).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_key_blocks_einsum(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q)
    qs = q.to(c) / math.sqrt(d)
    g = grad_out.to(c)
    delta = torch.einsum("bhnd,bhnd->bhn", g, out.to(c)).unsqueeze(-1)
    lse_c = lse.to(c).unsqueeze(-1)
    lse_c = torch.where(torch.isinf(lse_c), torch.full_like(lse_c, float("inf")), lse_c)
    grads_q = torch.zeros_like(qs)
    gk_parts, gv_parts = [], []
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(c)
        vb = v[:, :, start:start + block_size].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(start, start + kb.shape[2])
            future = kpos[None, :] > (torch.arange(n_q) + n_k - n_q)[:, None]
            s = s.masked_fill(future, float("-inf"))
        p = (s - lse_c).exp()
        gv_parts.append(p.transpose(-2, -1) @ g)
        ds = p * (g @ vb.transpose(-2, -1) - delta)
        grads_q = grads_q + ds @ kb
        gk_parts.append(ds.transpose(-2, -1) @ qs)
    grad_q = grads_q / math.sqrt(d)
    return grad_q.to(q.dtype), torch.cat(gk_parts, 2).to(k.dtype), torch.cat(gv_parts, 2).to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row_sum_without_keepdim", "Sums (grad * p) over the last "
          "axis without keepdim=True, so the row term broadcasts against the wrong axis.",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "row_sum_over_axis0", "Takes the row term's sum over "
          "axis 0 instead of the last axis.", sb_sum_dim0),
    Entry("softmax_backward", "wrong", "missing_outer_p", "Forgets the outer factor p: returns "
          "grad - rowsum(grad * p) instead of p * (grad - rowsum(grad * p)).",
          sb_missing_outer_p),
    Entry("softmax_backward", "wrong", "row_term_without_p", "Uses rowsum(grad) instead of "
          "rowsum(grad * p) as the row term.", sb_row_without_p),
    Entry("softmax_backward", "wrong", "sign_flipped", "Computes p * (rowsum(grad * p) - grad), "
          "the negative of the gradient.", sb_sign_flipped),
    Entry("softmax_backward", "wrong", "row_term_times_p_squared", "Expands the product "
          "wrongly, multiplying the row term by p twice (p g - p^2 rowsum(g p)).",
          sb_row_times_p_twice),
    Entry("softmax_backward", "right", "jacobian_einsum_float64", None, sb_jacobian_einsum),
    Entry("softmax_backward", "right", "expanded_pg_form", None, sb_expanded),

    Entry("attention_backward", "wrong", "forgets_score_scale", "Forgets the 1/sqrt(d) factor "
          "in grad_q and grad_k (the chain rule through the scaled scores).", ab_no_scale),
    Entry("attention_backward", "wrong", "grad_k_uses_k", "Computes grad_k as grad_s^T k "
          "instead of grad_s^T q.", ab_grad_k_from_k),
    Entry("attention_backward", "wrong", "grad_v_p_not_transposed", "Computes grad_v as "
          "p @ grad_out instead of p^T @ grad_out.", ab_p_not_transposed),
    Entry("attention_backward", "wrong", "causal_top_left", "Builds the causal mask top-left "
          "aligned (tril with offset 0) instead of bottom-right when N_q != N_k.", ab_top_left),
    Entry("attention_backward", "wrong", "nan_for_rows_without_keys", "Uses torch.softmax on "
          "rows that are entirely -inf, so queries with no visible key give NaN gradients.",
          ab_nan_rows),
    Entry("attention_backward", "wrong", "forgets_cast_back", "Computes in float32 but returns "
          "the gradients in float32 instead of the inputs' dtype.", ab_no_cast_back),
    Entry("attention_backward", "wrong", "row_term_summed_over_queries", "Sums grad_p * p over "
          "the query axis (-2) instead of the key axis in the softmax backward's row term.",
          ab_row_term_over_queries),
    Entry("attention_backward", "right", "jacobian_einsum_float64", None, ab_jacobian_float64),
    Entry("attention_backward", "right", "delta_from_recomputed_out", None, ab_delta_from_out),

    Entry("attention_backward_flops", "wrong", "recomputes_both_products", "Adds 4 N^2 d for "
          "recomputation (both forward products) instead of 2 N^2 d for q k^T alone.",
          abf_recompute_both),
    Entry("attention_backward_flops", "wrong", "one_flop_per_multiply_add", "Counts a "
          "multiply-add as one FLOP, halving every term.", abf_one_flop_per_mac),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted", "Adds the "
          "recomputation when recompute is False instead of when it is True.",
          abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "float_ratio_of_forward", "Multiplies the "
          "forward's 4 N^2 d by 2.5, which returns a float instead of a plain int.",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "three_products", "Counts three backward "
          "products (6 N^2 d) instead of four, forgetting one of grad_v, grad_p, grad_q, "
          "grad_k.", abf_three_products),
    Entry("attention_backward_flops", "wrong", "grad_p_as_n_d_squared", "Counts grad_p = "
          "grad_out v^T as 2 N d^2 instead of 2 N^2 d.", abf_grad_p_as_n_d_squared),
    Entry("attention_backward_flops", "right", "sum_over_product_shapes", None,
          abf_product_list),
    Entry("attention_backward_flops", "right", "fraction_ratio_of_forward", None,
          abf_ratio_fraction),

    Entry("flash_attention_backward", "wrong", "renormalises_each_block", "Recomputes each "
          "block's probabilities with a softmax over the block instead of exp(s - lse), so "
          "every block is normalised on its own.", fab_block_softmax),
    Entry("flash_attention_backward", "wrong", "recompute_without_scale", "Recomputes the "
          "scores as q k^T without the 1/sqrt(d) scale before exp(s - lse).",
          fab_unscaled_recompute),
    Entry("flash_attention_backward", "wrong", "grad_q_not_scaled", "Forgets the final "
          "1/sqrt(d) factor on grad_q.", fab_no_grad_q_scale),
    Entry("flash_attention_backward", "wrong", "delta_summed_over_queries", "Sums "
          "grad_out * out over the query axis instead of the feature axis when forming delta.",
          fab_delta_over_queries),
    Entry("flash_attention_backward", "wrong", "causal_block_local_positions", "Builds each key "
          "block's causal mask from block-local indices 0..b-1 instead of the absolute key "
          "positions.", fab_local_key_positions),
    Entry("flash_attention_backward", "wrong", "grad_k_assigned_per_query_block", "Tiles the "
          "queries too but assigns grad_k of a key block for each query block instead of "
          "accumulating it, so only the last query block's contribution survives.",
          fab_grad_k_overwritten),
    Entry("flash_attention_backward", "wrong", "mask_applied_to_grad_s_only", "Applies the "
          "causal mask to grad_s but not to the recomputed scores, so masked keys keep "
          "probability exp(s - lse) in grad_v.", fab_mask_only_grad_s),
    Entry("flash_attention_backward", "right", "query_outer_key_inner_float64", None,
          fab_query_outer_float64),
    Entry("flash_attention_backward", "right", "key_blocks_concat_einsum_delta", None,
          fab_key_blocks_einsum),
]
