"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry


# ==================================================================== softmax_backward: wrong
def _ct(t):
    return torch.promote_types(t.dtype, torch.float32)


def sb_no_keepdim(weights, grad_weights):
    ct = _ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)  # slip: keepdim dropped, (..., ) broadcast against (..., n)
    return (p * (g - row)).to(weights.dtype)


def sb_sum_over_dim0(weights, grad_weights):
    ct = _ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)  # slip: sums over the first axis, not the row
    return (p * (g - row)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    ct = _ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    return (p * (1 - p) * g).to(weights.dtype)  # slip: only the Jacobian's diagonal


def sb_sign_flipped(weights, grad_weights):
    ct = _ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(-1, keepdim=True)
    return (p * (row - g)).to(weights.dtype)  # slip: (row - g) instead of (g - row)


def sb_float32_result(weights, grad_weights):
    ct = _ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(-1, keepdim=True)
    return p * (g - row)  # slip: not cast back to weights' dtype


def sb_precedence(weights, grad_weights):
    ct = _ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    # slip: p * g - row instead of p * (g - row)
    return (p * g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


# ==================================================================== softmax_backward: right
def sb_einsum_f64(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    row = torch.einsum("...i,...i->...", p, g).unsqueeze(-1)
    return (p * g - p * row).to(weights.dtype)


def sb_matmul_rows(weights, grad_weights):
    ct = _ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    dot = p.unsqueeze(-2) @ g.unsqueeze(-1)  # (..., 1, 1)
    return torch.addcmul(torch.zeros_like(p), p, g - dot.squeeze(-1)).to(weights.dtype)


# ================================================================== attention_backward: wrong
def _probs(s):
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


def _ab(q, k, v, grad_out, causal, *, top_left=False, scale_k=True, row_term="p",
        transpose_v=True, guard=True):
    ct = _ct(q)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    nq, d = q.shape[-2:]
    nk = k.shape[-2]
    sc = 1 / math.sqrt(d)
    s = Q @ K.transpose(-1, -2) * sc
    if causal:
        diag = 0 if top_left else nk - nq
        keep = torch.ones(nq, nk, dtype=torch.bool).tril(diag)
        s = s.masked_fill(~keep, -math.inf)
    p = _probs(s) if guard else torch.softmax(s, -1)
    gv = (p.transpose(-1, -2) if transpose_v else p) @ G
    gp = G @ V.transpose(-1, -2)
    if row_term == "p":
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    else:
        gs = p * (gp - gp.sum(-1, keepdim=True))
    gq = gs @ K * sc
    gk = gs.transpose(-1, -2) @ Q * (sc if scale_k else 1.0)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_mask_top_left(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, top_left=True)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, scale_k=False)


def ab_row_term_without_p(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, row_term="plain")


def ab_grad_v_no_transpose(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, transpose_v=False)


def ab_nan_empty_rows(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, guard=False)


def ab_uses_autograd(q, k, v, grad_out, causal=False):
    ct = _ct(q)
    Q, K, V = (t.detach().to(ct).requires_grad_(True) for t in (q, k, v))
    d = q.shape[-1]
    nq, nk = q.shape[-2], k.shape[-2]
    s = Q @ K.transpose(-1, -2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq), -math.inf)
    out = _probs(s) @ V
    gq, gk, gv = torch.autograd.grad(out, (Q, K, V), grad_out.to(ct))  # slip: autograd
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


# ================================================================== attention_backward: right
def ab_einsum_f64(q, k, v, grad_out, causal=False):
    Q, K, V, G = (t.double() for t in (q, k, v, grad_out))
    d = q.shape[-1]
    nq, nk = q.shape[-2], k.shape[-2]
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(d)
    if causal:
        jj = torch.arange(nk)[None, :]
        ii = torch.arange(nq)[:, None]
        s = torch.where(jj <= ii + (nk - nq), s, torch.tensor(-math.inf, dtype=s.dtype))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    dv = torch.einsum("...qk,...qe->...ke", p, G)
    dp = torch.einsum("...qe,...ke->...qk", G, V)
    row = torch.einsum("...qk,...qk->...q", dp, p)[..., None]
    ds = p * (dp - row) / math.sqrt(d)
    dq = torch.einsum("...qk,...kd->...qd", ds, K)
    dk = torch.einsum("...qk,...qd->...kd", ds, Q)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_delta_from_output(q, k, v, grad_out, causal=False):
    """Row term from delta = rowsum(grad_out * out), the FlashAttention-2 identity."""
    ct = _ct(q)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    d = q.shape[-1]
    nq, nk = q.shape[-2], k.shape[-2]
    s = (Q / math.sqrt(d)) @ K.transpose(-1, -2)
    if causal:
        s = s + torch.zeros(nq, nk, dtype=ct).masked_fill(
            torch.ones(nq, nk, dtype=torch.bool).triu(nk - nq + 1), -math.inf)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    lse = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse)
    p = torch.exp(s - lse)
    out = p @ V
    delta = (G * out).sum(-1, keepdim=True)
    dp = G @ V.transpose(-1, -2)
    ds = p * (dp - delta)
    dq = ds @ K / math.sqrt(d)
    dk = ds.transpose(-1, -2) @ Q / math.sqrt(d)
    dv = p.transpose(-1, -2) @ G
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ attention_backward_flops: wrong
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    base = 8 * seq_len * seq_len * head_dim
    if recompute:
        base += 4 * seq_len * seq_len * head_dim  # slip: recomputes p @ v too
    return base


def abf_mac_as_one(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim  # slip: one multiply-add counted as 1 FLOP


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    n2d = seq_len ** 2 * head_dim
    return 8 * n2d + (0 if recompute else 2 * n2d)  # slip: the extra product on the wrong branch


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return forward * (2.5 if recompute else 2)  # slip: a float when recompute=True


def abf_conditional_precedence(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    # slip: the conditional expression swallows the whole sum: 0 when recompute=False
    return 8 * n * n * d + 2 * n * n * d if recompute else 0


def abf_head_dim_squared(seq_len, head_dim, recompute=True):
    k = 10 if recompute else 8
    return k * seq_len * head_dim * head_dim  # slip: N d^2 instead of N^2 d


# ============================================================ attention_backward_flops: right
def abf_sum_of_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d), (n, d, n), (n, n, d), (n, n, d)]  # grad_v, grad_p, grad_q, grad_k
    if recompute:
        shapes.append((n, d, n))  # the scores q k^T again
    return sum(2 * m * kk * c for m, kk, c in shapes)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return int(seq_len) * int(seq_len) * int(head_dim) * (10 if recompute is True else 8)


# ============================================================ flash_attention_backward: wrong
def _fab(q, k, v, out, lse, grad_out, block_size, causal, *, local_delta=False, guard=True,
         accumulate=True, scaled_recompute=True, top_left=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = _ct(q)
    sc = 1.0 / math.sqrt(d)
    Q = q.to(ct)
    Qs = Q * sc if scaled_recompute else Q
    G = grad_out.to(ct)
    delta = (G * out.to(ct)).sum(-1, keepdim=True)
    L = lse.to(ct)[..., None]
    if guard:
        L = torch.where(torch.isneginf(L), torch.full_like(L, math.inf), L)
    qpos = torch.arange(nq)[:, None] + (0 if top_left else nk - nq)
    dq = torch.zeros(B, H, nq, d, dtype=ct)
    dk = torch.zeros(B, H, nk, d, dtype=ct)
    dv = torch.zeros(B, H, nk, d, dtype=ct)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        Kb, Vb = k[:, :, a:z].to(ct), v[:, :, a:z].to(ct)
        s = Qs @ Kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        p = torch.exp(s - L)
        dv[:, :, a:z] = p.transpose(-1, -2) @ G
        dp = G @ Vb.transpose(-1, -2)
        row = (dp * p).sum(-1, keepdim=True) if local_delta else delta
        ds = p * (dp - row)
        if accumulate:
            dq += ds @ Kb
        else:
            dq = ds @ Kb
        dk[:, :, a:z] = ds.transpose(-1, -2) @ Q * sc
    dq = dq * sc
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def fab_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, local_delta=True)


def fab_nan_rows_without_keys(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, guard=False)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, accumulate=False)


def fab_recompute_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, scaled_recompute=False)


def fab_mask_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fab(q, k, v, out, lse, grad_out, block_size, causal, top_left=True)


def fab_full_probability_matrix(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = _ct(q)
    sc = 1.0 / math.sqrt(d)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))
    L = lse.to(ct)[..., None]
    L = torch.where(torch.isneginf(L), torch.full_like(L, math.inf), L)
    s = (Q * sc) @ K.transpose(-1, -2)  # slip: all N_q x N_k scores at once, not block by block
    if causal:
        s = s.masked_fill(torch.arange(nk)[None, :] > torch.arange(nq)[:, None] + nk - nq,
                          -math.inf)
    p = torch.exp(s - L)
    delta = (G * out.to(ct)).sum(-1, keepdim=True)
    ds = p * (G @ V.transpose(-1, -2) - delta)
    dq = ds @ K * sc
    dk = ds.transpose(-1, -2) @ Q * sc
    dv = p.transpose(-1, -2) @ G
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ============================================================ flash_attention_backward: right
def fab_two_d_tiles_f64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Tiles over queries and keys; every tile does its five products once."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    Q, K, V, O, G = (t.double() for t in (q, k, v, out, grad_out))
    L = lse.double()
    L = torch.where(torch.isneginf(L), torch.full_like(L, math.inf), L)
    delta = (G * O).sum(-1)  # (B, H, nq)
    scale = d ** -0.5
    dQ = torch.zeros_like(Q)
    dK = torch.zeros_like(K)
    dV = torch.zeros_like(V)
    for j0 in range(0, nk, block_size):
        j1 = min(nk, j0 + block_size)
        for i0 in range(0, nq, block_size):
            i1 = min(nq, i0 + block_size)
            s = torch.matmul(Q[:, :, i0:i1], K[:, :, j0:j1].transpose(2, 3)) * scale
            if causal:
                rows = torch.arange(i0, i1)[:, None] + (nk - nq)
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > rows, -math.inf)
            p = torch.exp(s - L[:, :, i0:i1, None])
            dV[:, :, j0:j1] += torch.matmul(p.transpose(2, 3), G[:, :, i0:i1])
            dp = torch.matmul(G[:, :, i0:i1], V[:, :, j0:j1].transpose(2, 3))
            ds = p * (dp - delta[:, :, i0:i1, None]) * scale
            dQ[:, :, i0:i1] += torch.matmul(ds, K[:, :, j0:j1])
            dK[:, :, j0:j1] += torch.matmul(ds.transpose(2, 3), Q[:, :, i0:i1])
    return dQ.to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fab_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = _ct(q)
    q_, g_ = q.to(ct), grad_out.to(ct)
    delta = torch.einsum("bhqd,bhqd->bhq", g_, out.to(ct))
    lse_ = lse.to(ct)
    finite = ~torch.isneginf(lse_)
    grads_k, grads_v = [], []
    grad_q = torch.zeros_like(q_)
    start = 0
    while start < nk:
        stop = min(nk, start + block_size)
        kb, vb = k[:, :, start:stop].to(ct), v[:, :, start:stop].to(ct)
        s = torch.einsum("bhqd,bhkd->bhqk", q_, kb) / math.sqrt(d)
        allowed = finite[..., None].expand(B, H, nq, stop - start)
        if causal:
            vis = torch.arange(start, stop)[None, :] <= torch.arange(nq)[:, None] + nk - nq
            allowed = allowed & vis
        p = torch.where(allowed, torch.exp(s - lse_[..., None]), torch.zeros((), dtype=ct))
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, g_))
        dp = torch.einsum("bhqd,bhkd->bhqk", g_, vb)
        ds = p * (dp - delta[..., None]) / math.sqrt(d)
        grad_q = grad_q + torch.einsum("bhqk,bhkd->bhqd", ds, kb)
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, q_))
        start = stop
    return grad_q.to(q.dtype), torch.cat(grads_k, 2).to(k.dtype), torch.cat(grads_v, 2).to(v.dtype)


S = "softmax_backward"
A = "attention_backward"
AF = "attention_backward_flops"
FB = "flash_attention_backward"
ENTRIES = [
    Entry(S, "wrong", "row_sum_without_keepdim", "The row sum (g * p).sum(-1) drops keepdim: "
          "the (...,) sum is broadcast against (..., n) along the wrong axis, which raises a "
          "size-mismatch error (or, where sizes happen to match, mixes rows).",
          sb_no_keepdim),
    Entry(S, "wrong", "sum_over_first_axis", "The row term sums g * p over dim=0 instead of "
          "over the last axis, mixing different rows.", sb_sum_over_dim0),
    Entry(S, "wrong", "jacobian_diagonal_only", "It multiplies g by p (1 - p), the Jacobian's "
          "diagonal only, dropping the off-diagonal -p_i p_j terms.", sb_diagonal_only),
    Entry(S, "wrong", "sign_flipped", "It returns p * (rowsum(g p) - g), the gradient with the "
          "opposite sign.", sb_sign_flipped),
    Entry(S, "wrong", "result_left_in_float32", "The result is computed in float32 for half "
          "inputs and never cast back to weights' dtype.", sb_float32_result),
    Entry(S, "wrong", "parentheses_missing", "p * g - rowsum(g p) lacks the parentheses of "
          "p * (g - rowsum(g p)): the row term is not multiplied by p.", sb_precedence),
    Entry(S, "right", "einsum_float64", None, sb_einsum_f64),
    Entry(S, "right", "batched_matmul_addcmul", None, sb_matmul_rows),
    Entry(A, "wrong", "causal_mask_top_left", "The causal mask is tril(0), aligned top-left, "
          "where the lesson's mask is bottom-right (tril(N_k - N_q)) when N_q != N_k.",
          ab_mask_top_left),
    Entry(A, "wrong", "grad_k_missing_scale", "grad_k = grad_s^T q is not multiplied by "
          "1/sqrt(d) (only grad_q is).", ab_grad_k_unscaled),
    Entry(A, "wrong", "row_term_without_p", "The softmax backward subtracts rowsum(grad_p) "
          "instead of rowsum(grad_p * p).", ab_row_term_without_p),
    Entry(A, "wrong", "grad_v_without_transpose", "grad_v is p @ grad_out instead of "
          "p^T @ grad_out: wrong shape (a matmul error) unless N_q == N_k, wrong values then.",
          ab_grad_v_no_transpose),
    Entry(A, "wrong", "nan_for_rows_without_keys", "torch.softmax on a causal row with no "
          "visible key (N_q > N_k) gives NaN, which spreads into the gradients, instead of a "
          "zero row.", ab_nan_empty_rows),
    Entry(A, "wrong", "differentiates_with_autograd", "It gets the gradients from "
          "torch.autograd.grad, which lesson 12 forbids (the checker disables it, so the call "
          "raises).", ab_uses_autograd),
    Entry(A, "right", "einsum_float64", None, ab_einsum_f64),
    Entry(A, "right", "delta_from_forward_output", None, ab_delta_from_output),
    Entry(AF, "wrong", "recompute_whole_forward", "With recompute it adds the whole forward's "
          "4 N^2 d, but only the scores q k^T (2 N^2 d) are recomputed.",
          abf_recompute_whole_forward),
    Entry(AF, "wrong", "multiply_add_as_one_flop", "A multiply-add is counted as 1 FLOP, so "
          "every count is half the right one.", abf_mac_as_one),
    Entry(AF, "wrong", "recompute_flag_inverted", "The 2 N^2 d recomputation is added when "
          "recompute is False instead of when it is True.", abf_flag_inverted),
    Entry(AF, "wrong", "float_from_ratio", "It returns the forward's 4 N^2 d times 2.5, a "
          "float, where the exercise wants a plain int.", abf_ratio_float),
    Entry(AF, "wrong", "conditional_swallows_sum", "`8 n n d + 2 n n d if recompute else 0` "
          "parses as (8 n n d + 2 n n d) if recompute else 0, so recompute=False returns 0.",
          abf_conditional_precedence),
    Entry(AF, "wrong", "head_dim_squared", "It counts N d^2 per product instead of N^2 d.",
          abf_head_dim_squared),
    Entry(AF, "right", "sum_over_product_shapes", None, abf_sum_of_products),
    Entry(AF, "right", "closed_form_factor", None, abf_closed_form),
    Entry(FB, "wrong", "block_local_delta", "The row term is rowsum(grad_p * p) over the "
          "current key block only, not delta = rowsum(grad_out * out) over the whole row.",
          fab_block_local_delta),
    Entry(FB, "wrong", "nan_for_rows_without_keys", "exp(s - lse) with lse = -inf on a row "
          "with no visible key gives exp(-inf + inf) = NaN instead of zero probabilities.",
          fab_nan_rows_without_keys),
    Entry(FB, "wrong", "grad_q_overwritten", "grad_q is assigned (=) in every key block "
          "instead of accumulated (+=), so only the last block's contribution is kept.",
          fab_grad_q_overwritten),
    Entry(FB, "wrong", "recompute_without_scale", "The scores recomputed for exp(s - lse) are "
          "q k^T without the 1/sqrt(d) of the forward, so the probabilities are wrong.",
          fab_recompute_unscaled),
    Entry(FB, "wrong", "causal_mask_top_left", "The causal mask compares key j with query i "
          "without the N_k - N_q offset: top-left instead of bottom-right when N_q != N_k.",
          fab_mask_top_left),
    Entry(FB, "wrong", "full_probability_matrix", "The values are right but p is recomputed "
          "for all keys at once, an N_q x N_k tensor, instead of block by block.",
          fab_full_probability_matrix),
    Entry(FB, "right", "query_and_key_tiles_float64", None, fab_two_d_tiles_f64),
    Entry(FB, "right", "einsum_key_blocks_masked_exp", None, fab_einsum_key_blocks),
]
