"""Round c, lesson 12: softmax_backward, attention_backward, attention_backward_flops,
flash_attention_backward (torch, no autograd)."""

import math

import torch

from entry import Entry


def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


# ------------------------------------------------------------------ softmax_backward
def sb_no_row_term(weights, grad_weights):
    c = _c(weights)
    return (weights.to(c) * grad_weights.to(c)).to(weights.dtype)


def sb_sum_whole_tensor(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).sum())).to(weights.dtype)


def sb_forgets_outer_p(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_autograd(weights, grad_weights):
    s = torch.log(weights.detach().double().clamp_min(1e-300)).requires_grad_(True)
    p = torch.softmax(s, dim=-1)
    (grad,) = torch.autograd.grad(p, s, grad_weights.double())
    return grad.to(weights.dtype)


def sb_float32_result(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return p * (g - (g * p).sum(-1, keepdim=True))


def sb_no_keepdim(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).sum(-1))).to(weights.dtype)


def sb_einsum_float64(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    row = torch.einsum("...n,...n->...", p, g)
    return (p * g - p * row[..., None]).to(weights.dtype)


def sb_jacobian_rows(weights, grad_weights):
    n = weights.shape[-1]
    p = weights.double().reshape(-1, n)
    g = grad_weights.double().reshape(-1, n)
    out = torch.empty_like(p)
    for r in range(p.shape[0]):
        jac = torch.diag(p[r]) - torch.outer(p[r], p[r])  # symmetric
        out[r] = jac @ g[r]
    return out.reshape(weights.shape).to(weights.dtype)


# ------------------------------------------------------------------ attention_backward
def _dense(q, k, v, grad_out, causal=False, *, scale_grads=True, grad_k_no_t=False,
           aligned=True, grad_v_no_t=False, guard=True, keep_dtype=True, row_term=True):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _c(q)
    sc = 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.to(c) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q if aligned else 0)
        s = s.masked_fill(~allowed, -math.inf)
    top = s.amax(-1, keepdim=True)
    if guard:
        top = top.masked_fill(torch.isneginf(top), 0.0)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / (tot.masked_fill(tot == 0, 1.0) if guard else tot)
    grad_v = (p @ g_) if grad_v_no_t else (p.transpose(-2, -1) @ g_)
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True)) if row_term else p * grad_p
    f = sc if scale_grads else 1.0
    grad_q = grad_s @ k_ * f
    grad_k = (grad_s @ q_ if grad_k_no_t else grad_s.transpose(-2, -1) @ q_) * f
    if keep_dtype:
        return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)
    return grad_q, grad_k, grad_v


def ab_forgets_scale(q, k, v, grad_out, causal=False):
    return _dense(q, k, v, grad_out, causal, scale_grads=False)


def ab_grad_k_no_transpose(q, k, v, grad_out, causal=False):
    return _dense(q, k, v, grad_out, causal, grad_k_no_t=True)


def ab_top_left_causal(q, k, v, grad_out, causal=False):
    return _dense(q, k, v, grad_out, causal, aligned=False)


def ab_grad_v_no_transpose(q, k, v, grad_out, causal=False):
    return _dense(q, k, v, grad_out, causal, grad_v_no_t=True)


def ab_nan_on_empty_rows(q, k, v, grad_out, causal=False):
    return _dense(q, k, v, grad_out, causal, guard=False)


def ab_float32_result(q, k, v, grad_out, causal=False):
    return _dense(q, k, v, grad_out, causal, keep_dtype=False)


def ab_no_row_term(q, k, v, grad_out, causal=False):
    return _dense(q, k, v, grad_out, causal, row_term=False)


def ab_einsum_delta(q, k, v, grad_out, causal=False):
    f = torch.float64
    q_, k_, v_, g_ = (t.to(f) for t in (q, k, v, grad_out))
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        j = torch.arange(n_k)[None, :]
        i = torch.arange(n_q)[:, None]
        s = s.masked_fill(j > i + (n_k - n_q), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = torch.einsum("...ij,...jd->...id", p, v_)
    delta = (g_ * out).sum(-1, keepdim=True)  # equals rowsum(grad_p * p)
    grad_p = torch.einsum("...id,...jd->...ij", g_, v_)
    grad_s = p * (grad_p - delta)
    grad_q = torch.einsum("...ij,...jd->...id", grad_s, k_) / math.sqrt(d)
    grad_k = torch.einsum("...ij,...id->...jd", grad_s, q_) / math.sqrt(d)
    grad_v = torch.einsum("...ij,...id->...jd", p, g_)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_query_row_loop(q, k, v, grad_out, causal=False):
    f = torch.float64
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    lead = q.shape[:-2]
    qf = q.to(f).reshape(-1, n_q, d)
    kf = k.to(f).reshape(-1, n_k, d)
    vf = v.to(f).reshape(-1, n_k, d_v)
    gf = grad_out.to(f).reshape(-1, n_q, d_v)
    gq = torch.zeros_like(qf)
    gk = torch.zeros_like(kf)
    gv = torch.zeros_like(vf)
    sc = 1.0 / math.sqrt(d)
    for b in range(qf.shape[0]):
        for i in range(n_q):
            last = i + n_k - n_q if causal else n_k - 1
            if last < 0:
                continue  # no visible key: no gradient
            ks, vs = kf[b, :last + 1], vf[b, :last + 1]
            p = torch.softmax(ks @ qf[b, i] * sc, dim=0)  # (m,)
            gv[b, :last + 1] += p[:, None] * gf[b, i][None, :]
            gp = vs @ gf[b, i]
            gs = p * (gp - (gp * p).sum())
            gq[b, i] = gs @ ks * sc
            gk[b, :last + 1] += gs[:, None] * qf[b, i][None, :] * sc
    return (gq.reshape(lead + (n_q, d)).to(q.dtype), gk.reshape(lead + (n_k, d)).to(k.dtype),
            gv.reshape(lead + (n_k, d_v)).to(v.dtype))


# ------------------------------------------------------------------ attention_backward_flops
def abf_recompute_full_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + (4 * n * n * d if recompute else 0)


def abf_ignores_flag(seq_len, head_dim, recompute=True):
    return 10 * seq_len * seq_len * head_dim


def abf_mac_as_one(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 4 * n * n * d + (n * n * d if recompute else 0)


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2.0)


def abf_flag_inverted(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + (0 if recompute else 2 * n * n * d)


def abf_three_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 6 * n * n * d + (2 * n * n * d if recompute else 0)


def abf_product_list(seq_len, head_dim, recompute=True):
    products = ["grad_v", "grad_p", "grad_q", "grad_k"] + (["scores"] if recompute else [])
    return sum(2 * seq_len * seq_len * head_dim for _ in products)


def abf_from_forward(seq_len, head_dim, recompute=True):
    forward = 2 * (2 * seq_len * seq_len * head_dim)
    return 2 * forward + (forward // 2 if recompute else 0)


# ------------------------------------------------------------------ flash_attention_backward
def _flash(q, k, v, out, lse, grad_out, block_size=64, causal=False, *, local_delta=False,
           local_softmax=False, scale_k=True, guard=True, aligned=True, keep_dtype=True,
           accumulate_q=True, scale_scores=True):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _c(q)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(c) * sc
    g_ = grad_out.to(c)
    delta = (g_ * out.to(c)).sum(-1, keepdim=True)
    q_for_s = qs if scale_scores else q.to(c)
    lse_ = lse.to(c)
    if guard:
        lse_ = lse_.masked_fill(torch.isneginf(lse), math.inf)
    lse_ = lse_[..., None]
    qpos = torch.arange(n_q)[:, None] + ((n_k - n_q) if aligned else 0)
    gq = torch.zeros_like(qs)
    gk = torch.empty(k.shape, dtype=c)
    gv = torch.empty(v.shape, dtype=c)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(c), v[..., start:stop, :].to(c)
        s = q_for_s @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        if local_softmax:
            top = s.amax(-1, keepdim=True).masked_fill(
                torch.isneginf(s.amax(-1, keepdim=True)), 0.0)
            e = torch.exp(s - top)
            tot = e.sum(-1, keepdim=True)
            p = e / tot.masked_fill(tot == 0, 1.0)
        else:
            p = torch.exp(s - lse_)
        gv[..., start:stop, :] = p.transpose(-2, -1) @ g_
        gp = g_ @ vb.transpose(-2, -1)
        row = (gp * p).sum(-1, keepdim=True) if local_delta else delta
        gs = p * (gp - row)
        if accumulate_q:
            gq += gs @ kb
        else:
            gq = gs @ kb
        gk[..., start:stop, :] = gs.transpose(-2, -1) @ (qs if scale_k else q.to(c))
    gq = gq * sc
    if keep_dtype:
        return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)
    return gq, gk, gv


def fab_blockwise_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, local_delta=True)


def fab_block_local_softmax(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, local_softmax=True)


def fab_grad_k_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, scale_k=False)


def fab_nan_on_empty_rows(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, guard=False)


def fab_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, accumulate_q=False)


def fab_unscaled_recompute(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, scale_scores=False)


def fab_float32_result(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, keep_dtype=False)


def fab_dense_inside(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _dense(q, k, v, grad_out, causal)


def fab_two_level_tiling(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    f = torch.float64
    sc = 1.0 / math.sqrt(d)
    g_ = grad_out.to(f)
    delta = (g_ * out.to(f)).sum(-1, keepdim=True)
    lse_ = torch.where(torch.isneginf(lse), math.inf, lse.to(f))[..., None]
    gq = torch.zeros(q.shape, dtype=f)
    gk = torch.zeros(k.shape, dtype=f)
    gv = torch.zeros(v.shape, dtype=f)
    for ks in range(0, n_k, block_size):  # outer loop over key blocks, as FlashAttention-2
        ke = min(ks + block_size, n_k)
        kb, vb = k[..., ks:ke, :].to(f), v[..., ks:ke, :].to(f)
        for qs in range(0, n_q, block_size):  # inner loop over query blocks
            qe = min(qs + block_size, n_q)
            qb = q[..., qs:qe, :].to(f) * sc
            s = qb @ kb.transpose(-2, -1)
            if causal:
                qpos = torch.arange(qs, qe)[:, None] + (n_k - n_q)
                s = s.masked_fill(torch.arange(ks, ke)[None, :] > qpos, -math.inf)
            p = torch.exp(s - lse_[..., qs:qe, :])
            gb = g_[..., qs:qe, :]
            gv[..., ks:ke, :] += p.transpose(-2, -1) @ gb
            gs = p * (gb @ vb.transpose(-2, -1) - delta[..., qs:qe, :])
            gq[..., qs:qe, :] += gs @ kb * sc
            gk[..., ks:ke, :] += gs.transpose(-2, -1) @ qb
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_nan_to_num_lists(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _c(q)
    sc = 1.0 / math.sqrt(d)
    qs = q.to(c) * sc
    g_ = grad_out.to(c)
    delta = torch.einsum("bhnd,bhnd->bhn", g_, out.to(c))[..., None]
    lse_ = lse.to(c)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(qs)
    gks, gvs = [], []
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[..., start:stop, :].to(c), v[..., start:stop, :].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.nan_to_num(torch.exp(s - lse_), nan=0.0)  # -inf - (-inf) rows -> 0
        gvs.append(p.transpose(-2, -1) @ g_)
        gs = p * (g_ @ vb.transpose(-2, -1) - delta)
        gq = gq + gs @ kb
        gks.append(gs.transpose(-2, -1) @ qs)
    return ((gq * sc).to(q.dtype), torch.cat(gks, dim=-2).to(k.dtype),
            torch.cat(gvs, dim=-2).to(v.dtype))


ENTRIES = [
    Entry("softmax_backward", "wrong", "no_row_term", "Returns weights * grad_weights, forgetting the row term -p (p . g) of the softmax Jacobian.", sb_no_row_term),
    Entry("softmax_backward", "wrong", "sums_whole_tensor", "Sums grad_weights * weights over the whole tensor instead of over each row's last axis.", sb_sum_whole_tensor),
    Entry("softmax_backward", "wrong", "forgets_leading_p", "Returns grad_weights - rowsum(grad_weights * weights) without the leading multiplication by weights.", sb_forgets_outer_p),
    Entry("softmax_backward", "wrong", "uses_autograd", "Differentiates with torch.autograd instead of computing the gradient explicitly.", sb_autograd),
    Entry("softmax_backward", "wrong", "returns_float32", "Computes in float32 and returns that instead of casting back to the weights' dtype.", sb_float32_result),
    Entry("softmax_backward", "wrong", "sum_without_keepdim", "Sums the row term without keepdim=True, so it broadcasts against the wrong axis (or fails).", sb_no_keepdim),
    Entry("softmax_backward", "right", "einsum_float64", None, sb_einsum_float64),
    Entry("softmax_backward", "right", "jacobian_per_row", None, sb_jacobian_rows),
    Entry("attention_backward", "wrong", "forgets_scale", "Forgets the 1/sqrt(d) factor in grad_q and grad_k.", ab_forgets_scale),
    Entry("attention_backward", "wrong", "grad_k_no_transpose", "Computes grad_k as grad_s @ q instead of grad_s^T @ q.", ab_grad_k_no_transpose),
    Entry("attention_backward", "wrong", "top_left_causal", "Aligns the causal mask top-left instead of bottom-right as in lesson 04.", ab_top_left_causal),
    Entry("attention_backward", "wrong", "grad_v_no_transpose", "Computes grad_v as p @ grad_out instead of p^T @ grad_out.", ab_grad_v_no_transpose),
    Entry("attention_backward", "wrong", "nan_on_empty_rows", "Does not guard query rows with no visible key, so their softmax (and all gradients they touch) become NaN.", ab_nan_on_empty_rows),
    Entry("attention_backward", "wrong", "returns_float32", "Computes in float32 and returns the gradients without casting back to the inputs' dtype.", ab_float32_result),
    Entry("attention_backward", "wrong", "no_softmax_row_term", "Uses grad_s = p * grad_p, forgetting to subtract the row term rowsum(grad_p * p).", ab_no_row_term),
    Entry("attention_backward", "right", "einsum_delta", None, ab_einsum_delta),
    Entry("attention_backward", "right", "query_row_loop", None, ab_query_row_loop),
    Entry("attention_backward_flops", "wrong", "recompute_full_forward", "Counts the recomputation as a whole forward pass (4 N^2 d) instead of the one score product (2 N^2 d).", abf_recompute_full_forward),
    Entry("attention_backward_flops", "wrong", "ignores_recompute_flag", "Always adds the recomputation, ignoring recompute=False.", abf_ignores_flag),
    Entry("attention_backward_flops", "wrong", "mac_as_one_flop", "Counts a multiply-add as one FLOP instead of two.", abf_mac_as_one),
    Entry("attention_backward_flops", "wrong", "float_ratio", "Multiplies the forward count by 2.5 or 2.0, returning a float instead of a plain int.", abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "flag_inverted", "Adds the recomputation when recompute is False instead of when it is True.", abf_flag_inverted),
    Entry("attention_backward_flops", "wrong", "three_products", "Counts three backward products (6 N^2 d), forgetting the grad_p = grad_out v^T product.", abf_three_products),
    Entry("attention_backward_flops", "right", "product_list", None, abf_product_list),
    Entry("attention_backward_flops", "right", "from_forward", None, abf_from_forward),
    Entry("flash_attention_backward", "wrong", "blockwise_delta", "Computes the row term rowsum(grad_p * p) within each key block instead of once from delta = rowsum(grad_out * out).", fab_blockwise_delta),
    Entry("flash_attention_backward", "wrong", "block_local_softmax", "Normalises each block's probabilities with a softmax over the block instead of exp(s - lse) with the full row's log-sum-exp.", fab_block_local_softmax),
    Entry("flash_attention_backward", "wrong", "grad_k_unscaled", "Multiplies grad_s^T by the unscaled q for grad_k, forgetting the 1/sqrt(d) factor there.", fab_grad_k_unscaled),
    Entry("flash_attention_backward", "wrong", "nan_on_empty_rows", "Uses exp(s - lse) without guarding lse = -inf rows, so -inf - (-inf) gives NaN.", fab_nan_on_empty_rows),
    Entry("flash_attention_backward", "wrong", "grad_q_overwritten", "Assigns grad_q = grad_s @ k_block in each key block instead of accumulating over the blocks, so only the last block's contribution survives.", fab_grad_q_overwritten),
    Entry("flash_attention_backward", "wrong", "unscaled_recompute", "Recomputes the scores as q k^T without the 1/sqrt(d) scale, so exp(s - lse) no longer gives the forward's probabilities.", fab_unscaled_recompute),
    Entry("flash_attention_backward", "wrong", "returns_float32", "Accumulates in float32 and returns that instead of casting back to q's dtype.", fab_float32_result),
    Entry("flash_attention_backward", "wrong", "dense_backward", "Ignores out and lse and runs the dense backward, building the full N x N probability matrix.", fab_dense_inside),
    Entry("flash_attention_backward", "right", "two_level_tiling", None, fab_two_level_tiling),
    Entry("flash_attention_backward", "right", "nan_to_num_and_concat", None, fab_nan_to_num_lists),
]
