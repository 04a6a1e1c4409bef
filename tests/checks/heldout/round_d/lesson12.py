"""Round d, lesson 12 (torch): softmax_backward, attention_backward, attention_backward_flops,
flash_attention_backward."""

import math

import torch

from entry import Entry


def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


# ----------------------------------------------------------------------------- softmax_backward
def sb_forgets_p_factor(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_sum_over_everything(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).sum())).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (g * p * (1 - p)).to(weights.dtype)


def sb_uses_autograd(weights, grad_weights):
    s = torch.log(weights.detach().double()).requires_grad_(True)
    p = torch.softmax(s, dim=-1)
    (grad,) = torch.autograd.grad(p, s, grad_weights.double())
    return torch.nan_to_num(grad).to(weights.dtype)


def sb_no_cast_back(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_sign_flipped(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * ((g * p).sum(-1, keepdim=True) - g)).to(weights.dtype)


def sb_float64_addcmul(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    row = torch.einsum("...n,...n->...", g, p)[..., None]
    return torch.addcmul(-p * row, p, g).to(weights.dtype)


def sb_matvec_rows(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    row = (p.unsqueeze(-2) @ g.unsqueeze(-1)).squeeze(-1)  # (..., 1)
    return (p * g - p * row).to(weights.dtype)


# ----------------------------------------------------------------------------- attention_backward
def _visible(n_q, n_k, device, top_left=False):
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(0 if top_left else n_k - n_q)


def _safe_softmax(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return e / torch.where(tot == 0, torch.ones_like(tot), tot)


def _ab(q, k, v, grad_out, causal, *, k_scale=True, p_not_transposed=False, top_left=False,
        guard=True, row_term=True, scale_fn=None):
    c = _c(q)
    d = q.shape[-1]
    scale = scale_fn(d) if scale_fn else 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~_visible(s.shape[-2], s.shape[-1], q.device, top_left), -math.inf)
    p = _safe_softmax(s) if guard else torch.softmax(s, -1)
    grad_v = (p @ g_) if p_not_transposed else (p.transpose(-2, -1) @ g_)
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True)) if row_term else p * grad_p
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.transpose(-2, -1) @ q_ * (scale if k_scale else 1.0)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, k_scale=False)


def ab_grad_v_not_transposed(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, p_not_transposed=True)


def ab_causal_top_left(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, top_left=True)


def ab_nan_rows(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, guard=False)


def ab_forgets_row_term(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, row_term=False)


def ab_scale_one_over_d(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, scale_fn=lambda d: 1.0 / d)


def ab_einsum_float64_delta(q, k, v, grad_out, causal=False):
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool, device=q.device)
                          .triu(n_k - n_q + 1), -math.inf)
    lse = torch.logsumexp(s, -1, keepdim=True)
    p = torch.where(torch.isneginf(lse), torch.zeros_like(s),
                    torch.exp(s - torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)))
    out = torch.einsum("...ij,...jd->...id", p, v_)
    delta = (g_ * out).sum(-1, keepdim=True)  # rowsum(grad_out * out) = rowsum(grad_p * p)
    grad_p = torch.einsum("...id,...jd->...ij", g_, v_)
    grad_s = p * (grad_p - delta)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, k_) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, q_) / math.sqrt(d)
    grad_v = torch.einsum("...ij,...id->...jd", p, g_)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_query_row_loop(q, k, v, grad_out, causal=False):
    c = _c(q)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    grad_q = torch.zeros_like(q_)
    grad_k = torch.zeros_like(k_)
    grad_v = torch.zeros_like(v_)
    scale = 1.0 / math.sqrt(d)
    for i in range(n_q):
        last = n_k if not causal else i + n_k - n_q + 1  # keys 0 .. last - 1 visible
        if last <= 0:
            continue
        kk, vv = k_[..., :last, :], v_[..., :last, :]
        s = (kk @ q_[..., i, :, None])[..., 0] * scale  # (..., last)
        p = torch.softmax(s, -1)
        gp = (vv @ g_[..., i, :, None])[..., 0]  # (..., last)
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))
        grad_q[..., i, :] = (gs[..., None, :] @ kk)[..., 0, :] * scale
        grad_k[..., :last, :] += gs[..., :, None] * q_[..., i, None, :] * scale
        grad_v[..., :last, :] += p[..., :, None] * g_[..., i, None, :]
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ----------------------------------------------------------------------------- backward flops
def abf_one_per_mac(seq_len, head_dim, recompute=True):
    return (4 + (1 if recompute else 0)) * seq_len * seq_len * head_dim


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + (4 * seq_len ** 2 * head_dim if recompute else 0)


def abf_ignores_recompute(seq_len, head_dim, recompute=True):
    return 10 * seq_len * seq_len * head_dim


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def abf_three_products(seq_len, head_dim, recompute=True):
    return 6 * seq_len ** 2 * head_dim + (2 * seq_len ** 2 * head_dim if recompute else 0)


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    return 8 * seq_len ** 2 * head_dim + (0 if recompute else 2 * seq_len ** 2 * head_dim)


def abf_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    products = [("grad_v", n, n, d), ("grad_p", n, d, n), ("grad_q", n, n, d),
                ("grad_k", n, n, d)]
    if recompute:
        products.append(("scores", n, d, n))
    return sum(2 * m * kk * nn for _, m, kk, nn in products)


def abf_integer_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * 2 + (forward // 2 if recompute else 0)


# ----------------------------------------------------------------------------- flash backward
def _fb(q, k, v, out, lse, grad_out, block_size, causal, *, block_delta=False,
        block_softmax=False, guard=True, k_scale=True, exp2=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q)
    qs = q.to(c) / math.sqrt(d)
    g = grad_out.to(c)
    delta = (g * out.to(c)).sum(-1, keepdim=True)
    l = lse.to(c)
    if guard:
        l = l.masked_fill(torch.isneginf(lse), math.inf)
    l = l[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gk = torch.zeros(k.shape, dtype=c)
    gv = torch.zeros(v.shape, dtype=c)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[:, :, s0:s1].to(c), v[:, :, s0:s1].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        if block_softmax:
            p = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
        elif exp2:
            p = torch.exp2(s - l)
        else:
            p = torch.exp(s - l)
        gv[:, :, s0:s1] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        dl = (gp * p).sum(-1, keepdim=True) if block_delta else delta
        gs = p * (gp - dl)
        gq += gs @ kb
        gk[:, :, s0:s1] = gs.transpose(-2, -1) @ (qs if k_scale else q.to(c))
    gq = gq / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_blockwise_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, block_delta=True)


def fb_renormalised_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, block_softmax=True)


def fb_nan_rows(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, guard=False)


def fb_grad_k_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, k_scale=False)


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, exp2=True)


def fb_dense_fallback(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _ab(q, k, v, grad_out, causal)


def fb_two_level_float64(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dev = q.device
    scale = 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    delta = (g_ * out.double()).sum(-1)  # (B, H, N_q)
    lse_ = lse.double()
    empty = torch.isneginf(lse_)
    lse_ = torch.where(empty, torch.zeros_like(lse_), lse_)
    gq = torch.zeros_like(q_)
    gk = torch.zeros_like(k_)
    gv = torch.zeros_like(v_)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qb, gb = q_[:, :, i0:i1], g_[:, :, i0:i1]
        lb, db, eb = lse_[:, :, i0:i1, None], delta[:, :, i0:i1, None], empty[:, :, i0:i1, None]
        qpos = torch.arange(i0, i1, device=dev)[:, None] + (n_k - n_q)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            kb, vb = k_[:, :, j0:j1], v_[:, :, j0:j1]
            s = torch.einsum("bhid,bhjd->bhij", qb, kb) * scale
            allowed = ~eb
            if causal:
                allowed = allowed & (torch.arange(j0, j1, device=dev)[None, :] <= qpos)
            p = torch.where(allowed, torch.exp(s - lb), torch.zeros_like(s))
            gv[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", p, gb)
            gp = torch.einsum("bhid,bhjd->bhij", gb, vb)
            gs = p * (gp - db)
            gq[:, :, i0:i1] += torch.einsum("bhij,bhjd->bhid", gs, kb) * scale
            gk[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", gs, qb) * scale
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_key_blocks_where(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q)
    dev = q.device
    q_ = q.to(c)
    g_ = grad_out.to(c)
    delta = torch.einsum("bhid,bhid->bhi", g_, out.to(c))[..., None]
    has_key = torch.isfinite(lse)[..., None]
    lse_ = torch.where(has_key[..., 0], lse.to(c), torch.zeros((), dtype=c, device=dev))[..., None]
    grad_q = torch.zeros_like(q_)
    grads_k, grads_v = [], []
    rows = torch.arange(n_q, device=dev)[:, None] + (n_k - n_q)
    for j0 in range(0, n_k, block_size):
        kb = k[:, :, j0:j0 + block_size].to(c)
        vb = v[:, :, j0:j0 + block_size].to(c)
        s = (q_ @ kb.transpose(-2, -1)) * d ** -0.5
        ok = has_key
        if causal:
            ok = ok & (torch.arange(j0, j0 + kb.shape[2], device=dev)[None, :] <= rows)
        p = torch.where(ok, torch.exp(torch.where(ok, s - lse_, torch.zeros_like(s))),
                        torch.zeros_like(s))
        grads_v.append(p.transpose(-2, -1) @ g_)
        ds = p * (g_ @ vb.transpose(-2, -1) - delta)
        grad_q = grad_q + ds @ kb
        grads_k.append(ds.transpose(-2, -1) @ q_)
    scale = d ** -0.5
    grad_k = torch.cat(grads_k, 2) * scale if grads_k else torch.zeros_like(k, dtype=c)
    grad_v = torch.cat(grads_v, 2) if grads_v else torch.zeros_like(v, dtype=c)
    return (grad_q * scale).to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "forgets_weights_factor",
          "Returns grad_weights - rowsum(grad_weights * weights), forgetting to multiply by the weights.",
          sb_forgets_p_factor),
    Entry("softmax_backward", "wrong", "row_sum_over_everything",
          "Sums grad_weights * weights over the whole tensor instead of over each row's last axis.",
          sb_sum_over_everything),
    Entry("softmax_backward", "wrong", "diagonal_jacobian_only",
          "Uses only the diagonal of the Jacobian, grad * p * (1 - p), dropping the off-diagonal -p_i p_j terms.",
          sb_diagonal_only),
    Entry("softmax_backward", "wrong", "uses_autograd",
          "Differentiates with torch.autograd.grad instead of writing the gradient explicitly, which the lesson forbids.",
          sb_uses_autograd),
    Entry("softmax_backward", "wrong", "no_cast_back",
          "Computes in float32 but returns float32 for half-precision inputs instead of the weights' dtype.",
          sb_no_cast_back),
    Entry("softmax_backward", "wrong", "sign_flipped",
          "Writes weights * (rowsum - grad_weights), the negative of the gradient.",
          sb_sign_flipped),
    Entry("softmax_backward", "right", "float64_einsum_addcmul", None, sb_float64_addcmul),
    Entry("softmax_backward", "right", "row_dot_by_matmul", None, sb_matvec_rows),

    Entry("attention_backward", "wrong", "grad_k_missing_scale",
          "Forgets the 1/sqrt(d) factor in grad_k (it is applied to grad_q only).",
          ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "grad_v_without_transpose",
          "Computes grad_v as p @ grad_out instead of p^T @ grad_out.",
          ab_grad_v_not_transposed),
    Entry("attention_backward", "wrong", "causal_top_left",
          "Aligns the causal mask top-left instead of bottom-right when N_q != N_k.",
          ab_causal_top_left),
    Entry("attention_backward", "wrong", "nan_on_rows_without_keys",
          "Uses torch.softmax on fully masked rows, so queries with no visible key give NaN gradients.",
          ab_nan_rows),
    Entry("attention_backward", "wrong", "forgets_softmax_row_term",
          "Takes grad_s = p * grad_p, forgetting to subtract the row sum of grad_p * p.",
          ab_forgets_row_term),
    Entry("attention_backward", "wrong", "scale_one_over_d",
          "Scales the scores and gradients by 1/d instead of 1/sqrt(d).",
          ab_scale_one_over_d),
    Entry("attention_backward", "right", "einsum_float64_delta_from_out", None,
          ab_einsum_float64_delta),
    Entry("attention_backward", "right", "query_row_loop", None, ab_query_row_loop),

    Entry("attention_backward_flops", "wrong", "one_flop_per_multiply_add",
          "Counts one multiply-add as 1 FLOP, giving 4 N^2 d (5 with recompute) instead of 8 (10).",
          abf_one_per_mac),
    Entry("attention_backward_flops", "wrong", "recomputes_whole_forward",
          "Adds the whole forward (4 N^2 d) for recompute instead of only the scores product (2 N^2 d).",
          abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "ignores_recompute",
          "Always counts the recomputation, ignoring recompute=False.",
          abf_ignores_recompute),
    Entry("attention_backward_flops", "wrong", "float_ratio",
          "Multiplies the forward count by 2.5, returning a float instead of a plain int.",
          abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "three_products",
          "Counts three products (forgets grad_p = grad_out v^T), giving 6 N^2 d instead of 8 N^2 d.",
          abf_three_products),
    Entry("attention_backward_flops", "wrong", "recompute_flag_inverted",
          "Adds the recomputation when recompute is False instead of when it is True.",
          abf_flag_inverted),
    Entry("attention_backward_flops", "right", "product_list", None, abf_product_list),
    Entry("attention_backward_flops", "right", "integer_ratio_of_forward", None, abf_integer_ratio),

    Entry("flash_attention_backward", "wrong", "blockwise_delta",
          "Computes delta as rowsum(grad_p * p) inside each key block instead of rowsum(grad_out * out) over the whole row.",
          fb_blockwise_delta),
    Entry("flash_attention_backward", "wrong", "renormalises_each_block",
          "Recomputes p with a softmax inside each key block instead of exp(s - lse), so each block sums to 1.",
          fb_renormalised_blocks),
    Entry("flash_attention_backward", "wrong", "nan_on_rows_without_keys",
          "Computes exp(s - lse) without guarding lse = -inf, so rows with no visible key give NaN.",
          fb_nan_rows),
    Entry("flash_attention_backward", "wrong", "grad_k_missing_scale",
          "Multiplies grad_s^T by the unscaled q for grad_k, forgetting its 1/sqrt(d).",
          fb_grad_k_unscaled),
    Entry("flash_attention_backward", "wrong", "exp2_with_natural_lse",
          "Recomputes the probabilities with exp2 (as in the CUDA kernels' base-2 trick) although lse is a natural log.",
          fb_exp2),
    Entry("flash_attention_backward", "wrong", "dense_fallback",
          "Falls back to the dense backward, building the full N x N probability matrix instead of working block by block.",
          fb_dense_fallback),
    Entry("flash_attention_backward", "right", "query_and_key_blocks_float64", None,
          fb_two_level_float64),
    Entry("flash_attention_backward", "right", "key_blocks_masked_where", None, fb_key_blocks_where),
]
