"""Lesson 12 (backward, torch): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward. No torch.autograd anywhere."""

import math

import torch

from entry import Entry


# ------------------------------------------------------------------ softmax_backward: wrong
def sb_no_keepdim(weights, grad_weights):
    p, g = weights.float(), grad_weights.float()
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    p, g = weights.float(), grad_weights.float()
    return (p * (1 - p) * g).to(weights.dtype)


def sb_unweighted_row_sum(weights, grad_weights):
    p, g = weights.float(), grad_weights.float()
    return (p * (g - g.sum(-1, keepdim=True))).to(weights.dtype)


def sb_row_mean(weights, grad_weights):
    p, g = weights.float(), grad_weights.float()
    return (p * (g - (g * p).mean(-1, keepdim=True))).to(weights.dtype)


def sb_sign_flipped(weights, grad_weights):
    p, g = weights.float(), grad_weights.float()
    return (p * ((g * p).sum(-1, keepdim=True) - g)).to(weights.dtype)


def sb_softmax_again(weights, grad_weights):
    p = torch.softmax(weights.float(), dim=-1)
    g = grad_weights.float()
    return (p * (g - (g * p).sum(-1, keepdim=True))).to(weights.dtype)


# ------------------------------------------------------------------ softmax_backward: right
def sb_jacobian_matmul(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return (jac @ g.unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_expanded(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    pg = p * g
    return (pg - p * pg.sum(dim=-1, keepdim=True)).to(weights.dtype)


# ------------------------------------------------------------------ attention_backward helpers
def _mask(n_q, n_k):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def _probs(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


# ------------------------------------------------------------------ attention_backward: wrong
def ab_top_left(q, k, v, grad_out, causal=False):
    c = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(c), k.to(c), v.to(c), grad_out.to(c)
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        n_q, n_k = s.shape[-2:]
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), -math.inf)
    p = _probs(s)
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_ * scale).to(q.dtype), (gs.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            (p.transpose(-2, -1) @ g_).to(v.dtype))


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    c = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(c), k.to(c), v.to(c), grad_out.to(c)
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_mask(*s.shape[-2:]), -math.inf)
    p = _probs(s)
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    grad_q = gs @ k_ * scale
    grad_k = gs.transpose(-2, -1) @ q_
    grad_v = p.transpose(-2, -1) @ g_
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_v_no_transpose(q, k, v, grad_out, causal=False):
    c = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(c), k.to(c), v.to(c), grad_out.to(c)
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_mask(*s.shape[-2:]), -math.inf)
    p = _probs(s)
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    grad_v = p @ g_
    return ((gs @ k_ * scale).to(q.dtype), (gs.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            grad_v.to(v.dtype))


def ab_unweighted_row(q, k, v, grad_out, causal=False):
    c = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(c), k.to(c), v.to(c), grad_out.to(c)
    scale = 1 / math.sqrt(q.shape[-1])
    s = torch.matmul(q_, k_.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(~_mask(*s.shape[-2:]), -math.inf)
    p = _probs(s)
    gp = torch.matmul(g_, v_.transpose(-2, -1))
    gs = p * (gp - gp.sum(-1, keepdim=True))
    return ((gs @ k_ * scale).to(q.dtype), (gs.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            (p.transpose(-2, -1) @ g_).to(v.dtype))


def ab_nan_empty_rows(q, k, v, grad_out, causal=False):
    c = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = q.to(c), k.to(c), v.to(c), grad_out.to(c)
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_mask(*s.shape[-2:]), -math.inf)
    p = torch.softmax(s, dim=-1)
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return ((gs @ k_ * scale).to(q.dtype), (gs.transpose(-2, -1) @ q_ * scale).to(k.dtype),
            (p.transpose(-2, -1) @ g_).to(v.dtype))


def ab_float32_returned(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = q.float(), k.float(), v.float(), grad_out.float()
    scale = 1 / math.sqrt(q.shape[-1])
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_mask(*s.shape[-2:]), -math.inf)
    p = _probs(s)
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return gs @ k_ * scale, gs.transpose(-2, -1) @ q_ * scale, p.transpose(-2, -1) @ g_


# ------------------------------------------------------------------ attention_backward: right
def ab_row_jacobians(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    d = q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_mask(*s.shape[-2:]), float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    grad_v = torch.einsum("...ij,...ie->...je", p, g_)
    grad_p = torch.einsum("...ie,...je->...ij", g_, v_)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., N_q, N_k, N_k)
    grad_s = (jac @ grad_p.unsqueeze(-1)).squeeze(-1)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, k_) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, q_) / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_delta_trick(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = (t.to(torch.float64) for t in (q, k, v, grad_out))
    scale = q.shape[-1] ** -0.5
    s = (q_ * scale) @ k_.transpose(-1, -2)
    if causal:
        n_q, n_k = s.shape[-2], s.shape[-1]
        future = torch.arange(n_k)[None, :] > torch.arange(n_q)[:, None] + (n_k - n_q)
        s = s.masked_fill(future, float("-inf"))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse.masked_fill(torch.isneginf(lse), float("inf")))
    out = p @ v_
    delta = (g_ * out).sum(-1, keepdim=True)
    grad_s = p * (g_ @ v_.transpose(-1, -2) - delta)
    return ((grad_s @ k_ * scale).to(q.dtype), (grad_s.transpose(-1, -2) @ q_ * scale).to(k.dtype),
            (p.transpose(-1, -2) @ g_).to(v.dtype))


# ------------------------------------------------------------------ attention_backward_flops
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + (4 * n * n * d if recompute else 0)


def abf_mac_one(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return (4 + (1 if recompute else 0)) * n * n * d


def abf_recompute_ignored(seq_len, head_dim, recompute=True):
    return 10 * seq_len * seq_len * head_dim


def abf_three_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    products = 3 + (1 if recompute else 0)
    return products * 2 * n * n * d


def abf_ratio_float(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    ratio = 2.5 if recompute else 2
    return ratio * forward


def abf_recompute_d_squared(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    total = 8 * n * n * d
    if recompute:
        total += 2 * n * d * d
    return total


def abf_product_list(seq_len, head_dim, recompute=True):
    def mm(m, k, n):
        return 2 * m * k * n

    n, d = seq_len, head_dim
    products = [mm(n, n, d),  # grad_v = p^T grad_out
                mm(n, d, n),  # grad_p = grad_out v^T
                mm(n, n, d),  # grad_q = grad_s k
                mm(n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        products.append(mm(n, d, n))  # s = q k^T again
    return sum(products)


def abf_closed_form(seq_len, head_dim, recompute=True):
    return (8 + 2 * recompute) * seq_len ** 2 * head_dim


# ------------------------------------------------------------------ flash_attention_backward
def _flash(q, k, v, out, lse, grad_out, block_size, causal, variant):
    """One block loop; `variant` selects a single slip (or none)."""
    c = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1 / math.sqrt(d)
    qs = q.to(c) * scale
    g_ = grad_out.to(c)
    delta = (g_ * out.to(c)).sum(-1, keepdim=True)
    lse_ = lse.to(c).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(qs)
    grad_k = torch.empty(k.shape, dtype=c)
    grad_v = torch.empty(v.shape, dtype=c)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[..., s0:s1, :].to(c), v[..., s0:s1, :].to(c)
        if variant == "unscaled":
            s = q.to(c) @ kb.transpose(-2, -1)
        else:
            s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(s0, s1)[None, :]
            blocked = kpos >= qpos if variant == "strict" else kpos > qpos
            s = s.masked_fill(blocked, -math.inf)
        if variant == "exp2":
            p = torch.exp2(s - lse_)
        else:
            p = torch.exp(s - lse_)
        grad_v[..., s0:s1, :] = p.transpose(-2, -1) @ g_
        gp = g_ @ vb.transpose(-2, -1)
        if variant == "local_delta":
            gs = p * (gp - (gp * p).sum(-1, keepdim=True))
        else:
            gs = p * (gp - delta)
        if variant == "overwrite":
            grad_q = gs @ kb
        else:
            grad_q = grad_q + gs @ kb
        if variant == "grad_k_unscaled_q":
            grad_k[..., s0:s1, :] = gs.transpose(-2, -1) @ q.to(c)
        else:
            grad_k[..., s0:s1, :] = gs.transpose(-2, -1) @ qs
    grad_q = grad_q * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def fab_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, "local_delta")


def fab_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, "unscaled")


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, "overwrite")


def fab_grad_k_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, "grad_k_unscaled_q")


def fab_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, "exp2")


def fab_diagonal_masked(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, "strict")


# ------------------------------------------------------------------ flash_attention_backward: right
def fab_query_outer_loop(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    scale = d ** -0.5
    q64, k64, v64 = q.double(), k.double(), v.double()
    g64, o64 = grad_out.double(), out.double()
    lse64 = lse.double()
    grad_q = torch.zeros(b, h, n_q, d, dtype=torch.float64)
    grad_k = torch.zeros(b, h, n_k, d, dtype=torch.float64)
    grad_v = torch.zeros(b, h, n_k, d, dtype=torch.float64)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qi, gi = q64[:, :, i0:i1] * scale, g64[:, :, i0:i1]
        di = (gi * o64[:, :, i0:i1]).sum(-1, keepdim=True)
        li = lse64[:, :, i0:i1].unsqueeze(-1)
        empty = torch.isneginf(li)
        qpos = torch.arange(i0, i1)[:, None] + (n_k - n_q)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            kj, vj = k64[:, :, j0:j1], v64[:, :, j0:j1]
            s = qi @ kj.transpose(-2, -1)
            p = torch.where(empty, torch.zeros_like(s), torch.exp(s - li))
            if causal:
                p = p.masked_fill(torch.arange(j0, j1)[None, :] > qpos, 0.0)
            grad_v[:, :, j0:j1] += p.transpose(-2, -1) @ gi
            ds = p * (gi @ vj.transpose(-2, -1) - di)
            grad_q[:, :, i0:i1] += ds @ kj
            grad_k[:, :, j0:j1] += ds.transpose(-2, -1) @ qi
    return ((grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype))


def fab_key_block_lists(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q32 = q.double()
    g32 = grad_out.double()
    delta = torch.einsum("bhnd,bhnd->bhn", g32, out.double()).unsqueeze(-1)
    safe_lse = torch.where(torch.isneginf(lse.double()), torch.full_like(lse.double(), math.inf),
                           lse.double()).unsqueeze(-1)
    grad_q = torch.zeros_like(q32)
    gk_blocks, gv_blocks = [], []
    for j0 in range(0, n_k, block_size):
        j1 = min(j0 + block_size, n_k)
        kj, vj = k[..., j0:j1, :].double(), v[..., j0:j1, :].double()
        s = (q32 @ kj.transpose(-1, -2)) / math.sqrt(d)
        if causal:
            visible = torch.arange(j0, j1)[None, :] <= torch.arange(n_q)[:, None] + n_k - n_q
            s = torch.where(visible, s, torch.tensor(float("-inf"), dtype=s.dtype))
        p = (s - safe_lse).exp()
        gv_blocks.append(p.transpose(-1, -2) @ g32)
        ds = p * (g32 @ vj.transpose(-1, -2) - delta) / math.sqrt(d)
        grad_q += ds @ kj
        gk_blocks.append(ds.transpose(-1, -2) @ q32)
    grad_k = torch.cat(gk_blocks, dim=-2) if gk_blocks else torch.zeros_like(k.double())
    grad_v = torch.cat(gv_blocks, dim=-2) if gv_blocks else torch.zeros_like(v.double())
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row-sum-keepdim-forgotten",
          "Forgets keepdim=True on the row sum, so it broadcasts along the wrong axis.",
          sb_no_keepdim),
    Entry("softmax_backward", "wrong", "diagonal-only",
          "Multiplies by the Jacobian's diagonal p (1 - p) only, forgetting the off-diagonal "
          "-p_i p_j terms.", sb_diagonal_only),
    Entry("softmax_backward", "wrong", "unweighted-row-sum",
          "Subtracts the plain row sum of grad_weights instead of its p-weighted sum.",
          sb_unweighted_row_sum),
    Entry("softmax_backward", "wrong", "row-mean",
          "Subtracts the row mean of grad_weights * weights instead of its sum.", sb_row_mean),
    Entry("softmax_backward", "wrong", "sign-flipped",
          "Computes weights * (rowsum - grad_weights), the negative of the gradient.",
          sb_sign_flipped),
    Entry("softmax_backward", "wrong", "softmax-reapplied",
          "Applies softmax to the given weights again, treating the probabilities as scores.",
          sb_softmax_again),
    Entry("softmax_backward", "right", "jacobian-matmul", None, sb_jacobian_matmul),
    Entry("softmax_backward", "right", "expanded-product", None, sb_expanded),

    Entry("attention_backward", "wrong", "top-left-causal",
          "Aligns the causal mask top-left with tril(), ignoring the N_k - N_q offset.",
          ab_top_left),
    Entry("attention_backward", "wrong", "grad_k-missing-scale",
          "Forgets the 1/sqrt(d) factor in grad_k (keeps it in grad_q).", ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "grad_v-without-transpose",
          "Computes grad_v as p @ grad_out instead of p^T @ grad_out.",
          ab_grad_v_no_transpose),
    Entry("attention_backward", "wrong", "unweighted-row-term",
          "Subtracts the plain row sum of grad_p (not weighted by p) in the softmax "
          "gradient.", ab_unweighted_row),
    Entry("attention_backward", "wrong", "nan-on-empty-rows",
          "Uses torch.softmax on rows with every key masked, giving NaN gradients instead of "
          "zeros.", ab_nan_empty_rows),
    Entry("attention_backward", "wrong", "float32-returned",
          "Computes in float32 and returns float32 instead of the inputs' dtype.",
          ab_float32_returned),
    Entry("attention_backward", "right", "per-row-jacobians", None, ab_row_jacobians),
    Entry("attention_backward", "right", "lse-delta-trick", None, ab_delta_trick),

    Entry("attention_backward_flops", "wrong", "recompute-whole-forward",
          "Adds the whole forward (4 N^2 d) for recomputation instead of only the scores "
          "product (2 N^2 d).", abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "mac-as-one-flop",
          "Counts a multiply-add as one FLOP, halving the count.", abf_mac_one),
    Entry("attention_backward_flops", "wrong", "recompute-flag-ignored",
          "Ignores recompute and always counts the recomputation (10 N^2 d).",
          abf_recompute_ignored),
    Entry("attention_backward_flops", "wrong", "three-products",
          "Counts three backward products, forgetting grad_p = grad_out v^T.",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "float-ratio",
          "Multiplies the forward by 2.5 as a float, returning a float instead of an int.",
          abf_ratio_float),
    Entry("attention_backward_flops", "wrong", "recompute-d-squared",
          "Writes the recomputation as 2 N d^2 instead of 2 N^2 d.", abf_recompute_d_squared),
    Entry("attention_backward_flops", "right", "product-list", None, abf_product_list),
    Entry("attention_backward_flops", "right", "closed-form-bool", None, abf_closed_form),

    Entry("flash_attention_backward", "wrong", "block-local-delta",
          "Computes the row term from the current block's p and grad_p only, instead of "
          "delta = rowsum(grad_out * out) over all keys.", fab_local_delta),
    Entry("flash_attention_backward", "wrong", "recompute-unscaled",
          "Recomputes the scores without the 1/sqrt(d) scale before subtracting lse.",
          fab_unscaled_recompute),
    Entry("flash_attention_backward", "wrong", "grad_q-overwritten",
          "Assigns grad_q for each key block instead of accumulating over the blocks.",
          fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "grad_k-from-unscaled-q",
          "Computes grad_k from the unscaled q, missing the 1/sqrt(d) factor.",
          fab_grad_k_unscaled),
    Entry("flash_attention_backward", "wrong", "exp2-recompute",
          "Recomputes p with exp2(s - lse) as if lse were a base-2 log-sum-exp.", fab_exp2),
    Entry("flash_attention_backward", "wrong", "diagonal-masked",
          "Masks keys with key_pos >= query_pos, so a query cannot see its own key.",
          fab_diagonal_masked),
    Entry("flash_attention_backward", "right", "query-outer-key-inner", None,
          fab_query_outer_loop),
    Entry("flash_attention_backward", "right", "key-block-lists", None, fab_key_block_lists),
]
