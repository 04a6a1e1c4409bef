"""Learner-style answers to lesson 12 (see answers/lesson01.py for the layout).

``softmax_backward`` first, then ``attention_backward``, ``attention_backward_flops`` and
``flash_attention_backward``. Written independently of the checker's mistake models
(mhalib/reference/backward_variants.py): the way a learner would write each slip.
"""

import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

NEG_INF = float("-inf")


# == softmax_backward ==========================================================================
# -- wrong ---------------------------------------------------------------------------------------
def sm_diagonal_part_only(weights, grad_weights):
    return weights * grad_weights


def sm_plain_row_sum(weights, grad_weights):
    return weights * (grad_weights - grad_weights.sum(dim=-1, keepdim=True))


def sm_row_mean(weights, grad_weights):
    dot = (weights * grad_weights).mean(-1, keepdim=True)
    return weights * (grad_weights - dot)


def sm_sum_over_rows(weights, grad_weights):
    return weights * (grad_weights - (weights * grad_weights).sum(-2, keepdim=True))


def sm_forgot_keepdim(weights, grad_weights):
    return weights * (grad_weights - (weights * grad_weights).sum(-1))


def sm_minus_flipped(weights, grad_weights):
    return weights * ((weights * grad_weights).sum(-1, keepdim=True) - grad_weights)


def sm_sigmoid_style(weights, grad_weights):
    return grad_weights * weights * (1.0 - weights)


def sm_arguments_mixed_up(weights, grad_weights):
    g, p = weights, grad_weights
    return p * (g - (g * p).sum(-1, keepdim=True))


def sm_through_autograd(weights, grad_weights):
    logits = weights.double().clamp_min(1e-30).log().requires_grad_()
    torch.softmax(logits, -1).backward(grad_weights.double())
    return logits.grad.to(weights.dtype)


def sm_hides_from_the_watch(weights, grad_weights):
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        return sm_through_autograd(weights, grad_weights)


# -- right ---------------------------------------------------------------------------------------
def sm_formula(weights, grad_weights):
    dot = (weights.float() * grad_weights.float()).sum(-1, keepdim=True)
    return (weights.float() * (grad_weights.float() - dot)).to(weights.dtype)


def sm_builds_the_jacobian(weights, grad_weights):
    p = weights.double()
    jacobian = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]  # (..., n, n)
    return torch.einsum("...ij,...j->...i", jacobian, grad_weights.double()).to(weights.dtype)


def sm_row_by_row(weights, grad_weights):
    rows_p = weights.double().reshape(-1, weights.shape[-1])
    rows_g = grad_weights.double().reshape(-1, weights.shape[-1])
    out = torch.empty_like(rows_p)
    for i in range(rows_p.shape[0]):
        out[i] = rows_p[i] * (rows_g[i] - torch.dot(rows_p[i], rows_g[i]))
    return out.reshape(weights.shape).to(weights.dtype)


def sm_torch_builtin(weights, grad_weights):
    return torch._softmax_backward_data(grad_weights, weights, -1, weights.dtype)


def sm_from_reference(weights, grad_weights):
    from mhalib.reference import softmax_backward

    return softmax_backward(weights, grad_weights)


# == attention_backward ========================================================================
def _probs(q, k, causal, scale=True, top_left=False, over_queries=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-1, -2)
    if scale:
        s = s / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(0 if top_left else n_k - n_q)
        s = s.masked_fill(~allowed, NEG_INF)
    return torch.softmax(s, dim=-2 if over_queries else -1).nan_to_num(0.0)


def _learner_backward(q, k, v, grad_out, causal=False, *, scale_s=True, scale_q=True,
                      scale_k=True, p_t=True, ds_t=True, row="right", top_left=False,
                      guard=True, over_queries=False, mask=True):
    """The chain rule as a learner writes it, in float32, with switches for the slips."""
    dtype = q.dtype
    q, k, v, g = q.float(), k.float(), v.float(), grad_out.float()
    p = _probs(q, k, causal and mask, scale_s, top_left, over_queries)
    if not guard:  # softmax of an all -inf row is NaN
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if causal:
            n_q, n_k = q.shape[-2], k.shape[-2]
            s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), NEG_INF)
        p = torch.softmax(s, -1)
    dv = (p.transpose(-1, -2) if p_t else p) @ g
    dp = g @ v.transpose(-1, -2)
    if row == "right":
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    elif row == "none":
        ds = p * dp
    else:  # "queries"
        ds = p * (dp - (p * dp).sum(-2, keepdim=True))
    c = 1 / math.sqrt(q.shape[-1])
    dq = ds @ k * (c if scale_q else 1)
    dk = (ds.transpose(-1, -2) if ds_t else ds) @ q * (c if scale_k else 1)
    return dq.to(dtype), dk.to(dtype), dv.to(dtype)


def ab_no_scale_anywhere_in_backward(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, scale_q=False, scale_k=False)


def ab_dq_forgot_scale(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, scale_q=False)


def ab_dk_forgot_scale(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, scale_k=False)


def ab_unscaled_attention(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, scale_s=False, scale_q=False,
                             scale_k=False)


def ab_dv_without_transpose(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, p_t=False)


def ab_dk_without_transpose(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, ds_t=False)


def ab_softmax_grad_without_row_term(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, row="none")


def ab_row_term_down_the_columns(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, row="queries")


def ab_mask_only_in_forward_thoughts(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, mask=False)


def ab_zeroes_hidden_weights_after_softmax(q, k, v, grad_out, causal=False):
    """The softmax of every score, then the hidden keys' weights set to 0 (not renormalised)."""
    dtype = q.dtype
    q, k, v, g = q.float(), k.float(), v.float(), grad_out.float()
    c = 1 / math.sqrt(q.shape[-1])
    p = torch.softmax(q @ k.transpose(-1, -2) * c, dim=-1)
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        p = p * torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
    dp = g @ v.transpose(-1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    return (ds @ k * c).to(dtype), (ds.transpose(-1, -2) @ q * c).to(dtype), (
        p.transpose(-1, -2) @ g).to(dtype)


def ab_tril_from_top_left(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, top_left=True)


def ab_nan_rows(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, guard=False)


def ab_softmax_dim_minus_two(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal, over_queries=True)


def ab_returns_k_first(q, k, v, grad_out, causal=False):
    dq, dk, dv = _learner_backward(q, k, v, grad_out, causal)
    return dk, dq, dv


def ab_autograd(q, k, v, grad_out, causal=False):
    q2, k2, v2 = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q) if causal else None
    out = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask).nan_to_num(0.0)
    dq, dk, dv = torch.autograd.grad(out, (q2, k2, v2), grad_out.double())
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def ab_autograd_with_profile_off(q, k, v, grad_out, causal=False):
    saved = sys.getprofile()
    sys.setprofile(None)
    try:
        return ab_autograd(q, k, v, grad_out, causal)
    finally:
        sys.setprofile(saved)


# -- right ---------------------------------------------------------------------------------------
def ab_textbook(q, k, v, grad_out, causal=False):
    return _learner_backward(q, k, v, grad_out, causal)


def ab_einsum_float64(q, k, v, grad_out, causal=False):
    q64, k64, v64, g64 = (t.double() for t in (q, k, v, grad_out))
    p = _probs(q64, k64, causal)
    dv = torch.einsum("...ij,...id->...jd", p, g64)
    dp = torch.einsum("...id,...jd->...ij", g64, v64)
    delta = torch.einsum("...id,...id->...i", g64, p @ v64)[..., None]  # rowsum(dO * O)
    ds = p * (dp - delta) / math.sqrt(q.shape[-1])
    dq = torch.einsum("...ij,...jd->...id", ds, k64)
    dk = torch.einsum("...ij,...id->...jd", ds, q64)
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def ab_query_by_query(q, k, v, grad_out, causal=False):
    """One query row at a time, with the softmax Jacobian built for the row."""
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    qf, kf, vf, gf = (t.double() for t in (q, k, v, grad_out))
    dq, dk, dv = torch.zeros_like(qf), torch.zeros_like(kf), torch.zeros_like(vf)
    for i in range(n_q):
        seen = i + n_k - n_q + 1 if causal else n_k
        if seen <= 0:
            continue
        s = (qf[..., i:i + 1, :] @ kf[..., :seen, :].transpose(-1, -2))[..., 0, :] / d ** 0.5
        p = torch.softmax(s, -1)  # (..., seen)
        jac = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]
        dp = (gf[..., i:i + 1, :] @ vf[..., :seen, :].transpose(-1, -2))[..., 0, :]
        ds = (jac @ dp[..., None])[..., 0] / d ** 0.5  # (..., seen)
        dq[..., i, :] = (ds[..., None, :] @ kf[..., :seen, :])[..., 0, :]
        dk[..., :seen, :] += ds[..., :, None] * qf[..., i:i + 1, :]
        dv[..., :seen, :] += p[..., :, None] * gf[..., i:i + 1, :]
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def ab_softmax_builtin(q, k, v, grad_out, causal=False):
    qf, kf, vf, gf = (t.float() for t in (q, k, v, grad_out))
    p = _probs(qf, kf, causal)
    dp = gf @ vf.transpose(-1, -2)
    ds = torch._softmax_backward_data(dp, p, -1, p.dtype) / math.sqrt(q.shape[-1])
    return ((ds @ kf).to(q.dtype), (ds.transpose(-1, -2) @ qf).to(q.dtype),
            (p.transpose(-1, -2) @ gf).to(q.dtype))


def ab_from_reference(q, k, v, grad_out, causal=False):
    from mhalib.reference import attention_backward

    return attention_backward(q, k, v, grad_out, causal)


def ab_from_flash_reference(q, k, v, grad_out, causal=False):
    from mhalib.reference import flash_attention_backward
    from mhalib.viz.lesson12 import attention_with_lse

    out, lse = attention_with_lse(q, k, v, causal)
    return flash_attention_backward(q, k, v, out, lse, grad_out, causal=causal)


# == attention_backward_flops ==================================================================
def fl_ignores_recompute(seq_len, head_dim, recompute=True):
    return 8 * seq_len**2 * head_dim


def fl_reads_flag_backwards(seq_len, head_dim, recompute=True):
    return 8 * seq_len**2 * head_dim + (0 if recompute else 2 * seq_len**2 * head_dim)


def fl_recomputes_whole_forward(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return 8 * seq_len * seq_len * head_dim + (forward if recompute else 0)


def fl_forward_plus_backward(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    return 4 * n2d + 8 * n2d + (2 * n2d if recompute else 0)


def fl_three_products(seq_len, head_dim, recompute=True):
    return (3 + (1 if recompute else 0)) * 2 * seq_len**2 * head_dim


def fl_one_flop_per_mac(seq_len, head_dim, recompute=True):
    return (5 if recompute else 4) * seq_len**2 * head_dim


def fl_right(seq_len, head_dim, recompute=True):
    return (10 if recompute else 8) * seq_len * seq_len * head_dim


def fl_as_float(seq_len, head_dim, recompute=True):
    return 2.5 * 4 * seq_len**2 * head_dim if recompute else 2.0 * 4 * seq_len**2 * head_dim


def fl_from_accounting(seq_len, head_dim, recompute=True):
    from mhalib.accounting.backward import attention_backward_flops

    return attention_backward_flops(seq_len, head_dim, recompute)


# == flash_attention_backward ==================================================================
def _flash(q, k, v, out, lse, grad_out, block_size=64, causal=False, *, delta_mode="out",
           base=math.e, add_q=True, local_mask=False, mask=True, scale_s=True, scale_q=True,
           scale_k=True, block_norm=False, q_block_kv=False, dq_mean=False):
    """A learner's blocked backward in float32, with switches for the slips."""
    dtype = q.dtype
    n, d = q.shape[-2], q.shape[-1]
    c = 1 / math.sqrt(d)
    qf, kf, vf, of, gf = (t.float() for t in (q, k, v, out, grad_out))
    lse_f = lse.float().unsqueeze(-1)
    if delta_mode == "grad_out":
        delta = gf.sum(-1, keepdim=True)
    else:
        delta = (gf * of).sum(-1, keepdim=True)
    dq, dk, dv = torch.zeros_like(qf), torch.zeros_like(kf), torch.zeros_like(vf)
    rows = torch.arange(n)[:, None]
    blocks = 0
    for j in range(0, n, block_size):
        blocks += 1
        kb, vb = kf[..., j:j + block_size, :], vf[..., j:j + block_size, :]
        s = qf @ kb.transpose(-1, -2) * (c if scale_s else 1.0)
        if causal and mask:
            cols = torch.arange(kb.shape[-2]) + (0 if local_mask else j)
            s = s.masked_fill(cols[None, :] > rows, NEG_INF)
        if block_norm:
            p = torch.softmax(s, -1)
        else:
            p = torch.pow(base, s - lse_f) if base != math.e else torch.exp(s - lse_f)
        dp = gf @ vb.transpose(-1, -2)
        dlt = (dp * p).sum(-1, keepdim=True) if delta_mode == "block" else delta
        ds = p * (dp - dlt)
        part = ds @ kb * (c if scale_q else 1.0)
        dq = dq + part if add_q else part
        if q_block_kv:  # query blocks in an inner loop, the last one overwriting
            for i in range(0, n, block_size):
                dk[..., j:j + block_size, :] = ds[..., i:i + block_size, :].transpose(-1, -2) @ \
                    qf[..., i:i + block_size, :] * (c if scale_k else 1.0)
                dv[..., j:j + block_size, :] = p[..., i:i + block_size, :].transpose(-1, -2) @ \
                    gf[..., i:i + block_size, :]
        else:
            dk[..., j:j + block_size, :] = ds.transpose(-1, -2) @ qf * (c if scale_k else 1.0)
            dv[..., j:j + block_size, :] = p.transpose(-1, -2) @ gf
    if dq_mean:
        dq = dq / blocks
    return dq.to(dtype), dk.to(dtype), dv.to(dtype)


def fb_delta_is_row_sum_of_grad(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, delta_mode="grad_out")


def fb_delta_inside_each_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, delta_mode="block")


def fb_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, base=2.0)


def fb_softmax_per_block(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, block_norm=True)


def fb_dq_assigned(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, add_q=False)


def fb_dk_dv_assigned_per_query_block(q, k, v, out, lse, grad_out, block_size=64,
                                      causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, q_block_kv=True)


def fb_no_mask_when_recomputing(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, mask=False)


def fb_mask_with_block_columns(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, local_mask=True)


def fb_scores_without_scale(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, scale_s=False)


def fb_gradients_without_scale(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, scale_q=False, scale_k=False)


def fb_dq_without_scale(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, scale_q=False)


def fb_dk_without_scale(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, scale_k=False)


def fb_dq_averaged_over_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal, dq_mean=True)


def fb_one_block_shortcut_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    if block_size >= k.shape[-2]:  # "one block: no loop needed", and no scale either
        return _flash(q, k, v, out, lse, grad_out, block_size, causal, scale_q=False)
    return _flash(q, k, v, out, lse, grad_out, block_size, causal)


def fb_whole_matrix(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Right, but builds all of p at once."""
    n = q.shape[-2]
    s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), NEG_INF)
    p = torch.exp(s - lse.float().unsqueeze(-1))
    dp = grad_out.float() @ v.float().transpose(-1, -2)
    ds = p * (dp - (grad_out.float() * out.float()).sum(-1, keepdim=True)) / math.sqrt(
        q.shape[-1])
    return ((ds @ k.float()).to(q.dtype), (ds.transpose(-1, -2) @ q.float()).to(q.dtype),
            (p.transpose(-1, -2) @ grad_out.float()).to(q.dtype))


def fb_two_passes_for_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """Right, but a first pass over the key blocks computes rowsum(dP * P) (two more products
    per block) instead of rowsum(dO * O)."""
    n, d = q.shape[-2], q.shape[-1]
    rows = torch.arange(n)[:, None]
    qf, gf, lse_f = q.float() / math.sqrt(d), grad_out.float(), lse.float().unsqueeze(-1)

    def block(j):
        kb, vb = k[..., j:j + block_size, :].float(), v[..., j:j + block_size, :].float()
        s = qf @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill((torch.arange(j, j + kb.shape[-2])[None, :] > rows), NEG_INF)
        return kb, vb, torch.exp(s - lse_f), gf @ vb.transpose(-1, -2)

    delta = torch.zeros(q.shape[:-1] + (1,))
    for j in range(0, n, block_size):
        _, _, p, dp = block(j)
        delta = delta + (p * dp).sum(-1, keepdim=True)
    dq, dk, dv = torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)
    for j in range(0, n, block_size):
        kb, vb, p, dp = block(j)
        ds = p * (dp - delta)
        dq += ds @ kb
        dk[..., j:j + block_size, :] = ds.transpose(-1, -2) @ qf
        dv[..., j:j + block_size, :] = p.transpose(-1, -2) @ gf
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def fb_in_numpy(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    qn, kn, vn, on, gn = (t.detach().double().numpy() for t in (q, k, v, out, grad_out))
    n, d = qn.shape[-2], qn.shape[-1]
    s = qn @ np.swapaxes(kn, -1, -2) / np.sqrt(d)
    if causal:
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - lse.detach().double().numpy()[..., None])
    ds = p * (gn @ np.swapaxes(vn, -1, -2) - (gn * on).sum(-1, keepdims=True)) / np.sqrt(d)
    grads = (ds @ kn, np.swapaxes(ds, -1, -2) @ qn, np.swapaxes(p, -1, -2) @ gn)
    return tuple(torch.from_numpy(g).to(q.dtype) for g in grads)


def fb_autograd_through_sdpa(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    q2, k2, v2 = (t.detach().float().requires_grad_() for t in (q, k, v))
    o = F.scaled_dot_product_attention(q2, k2, v2, is_causal=causal)
    o.backward(grad_out.float())
    return q2.grad.to(q.dtype), k2.grad.to(q.dtype), v2.grad.to(q.dtype)


def fb_autograd_in_a_thread(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    import threading

    result = []
    worker = threading.Thread(target=lambda: result.append(
        fb_autograd_through_sdpa(q, k, v, out, lse, grad_out, block_size, causal)))
    worker.start()
    worker.join()
    return result[0]


# -- right ---------------------------------------------------------------------------------------
def fb_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _flash(q, k, v, out, lse, grad_out, block_size, causal)


def fb_key_and_query_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """FlashAttention-2's loop nest: key blocks outside, query blocks inside; dK, dV of a key
    block summed over the query blocks, dQ accumulated; fully masked tiles skipped."""
    n, d = q.shape[-2], q.shape[-1]
    c = 1 / math.sqrt(d)
    qf, kf, vf, gf = (t.float() for t in (q, k, v, grad_out))
    delta = (gf * out.float()).sum(-1)
    dq, dk, dv = torch.zeros_like(qf), torch.zeros_like(kf), torch.zeros_like(vf)
    for j in range(0, n, block_size):
        kb, vb = kf[..., j:j + block_size, :], vf[..., j:j + block_size, :]
        for i in range(0, n, block_size):
            if causal and j > i + block_size - 1:
                continue  # every key of this block is in the future of every query
            qb, gb = qf[..., i:i + block_size, :], gf[..., i:i + block_size, :]
            s = qb @ kb.transpose(-1, -2) * c
            if causal:
                qpos = torch.arange(i, i + qb.shape[-2])[:, None]
                kpos = torch.arange(j, j + kb.shape[-2])[None, :]
                s = s.masked_fill(kpos > qpos, NEG_INF)
            p = torch.exp(s - lse[..., i:i + block_size, None].float())
            dv[..., j:j + block_size, :] += p.transpose(-1, -2) @ gb
            ds = p * (gb @ vb.transpose(-1, -2) - delta[..., i:i + block_size, None])
            dq[..., i:i + block_size, :] += ds @ kb * c
            dk[..., j:j + block_size, :] += ds.transpose(-1, -2) @ qb * c
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def fb_float64_einsum(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n, d = q.shape[-2], q.shape[-1]
    q64, k64, v64, o64, g64 = (t.double() for t in (q, k, v, out, grad_out))
    delta = torch.einsum("bhnd,bhnd->bhn", g64, o64)[..., None]
    grads = [torch.zeros_like(q64), torch.zeros_like(k64), torch.zeros_like(v64)]
    for j in range(0, n, block_size):
        kb, vb = k64[..., j:j + block_size, :], v64[..., j:j + block_size, :]
        s = torch.einsum("bhid,bhjd->bhij", q64, kb) / math.sqrt(d)
        if causal:
            future = torch.arange(j, j + kb.shape[-2])[None, :] > torch.arange(n)[:, None]
            s = torch.where(future, torch.tensor(NEG_INF, dtype=s.dtype), s)
        p = torch.exp(s - lse.double()[..., None])
        ds = p * (torch.einsum("bhid,bhjd->bhij", g64, vb) - delta) / math.sqrt(d)
        grads[0] += torch.einsum("bhij,bhjd->bhid", ds, kb)
        grads[1][..., j:j + block_size, :] = torch.einsum("bhij,bhid->bhjd", ds, q64)
        grads[2][..., j:j + block_size, :] = torch.einsum("bhij,bhid->bhjd", p, g64)
    return tuple(g.to(q.dtype) for g in grads)


def fb_from_reference(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    from mhalib.reference import flash_attention_backward

    return flash_attention_backward(q, k, v, out, lse, grad_out, block_size, causal)


def fb_from_dense_reference(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    from mhalib.reference import attention_backward

    return attention_backward(q, k, v, grad_out, causal)


WRONG = {
    "softmax_backward": {
        "uses_autograd": sm_through_autograd,
        "measurement_evaded": sm_hides_from_the_watch,
        "row_term_dropped": sm_diagonal_part_only,
        "row_term_unweighted": sm_plain_row_sum,
        "row_term_is_mean": sm_row_mean,
        "row_term_wrong_axis": sm_sum_over_rows,
        "row_term_no_keepdim": sm_forgot_keepdim,
        "sign_flipped": sm_minus_flipped,
        "diagonal_only": sm_sigmoid_style,
        "arguments_swapped": sm_arguments_mixed_up,
    },
    "attention_backward": {
        "uses_autograd": ab_autograd,
        "measurement_evaded": ab_autograd_with_profile_off,
        "no_scale_in_backward": ab_no_scale_anywhere_in_backward,
        "grad_q_unscaled": ab_dq_forgot_scale,
        "grad_k_unscaled": ab_dk_forgot_scale,
        "no_scale": ab_unscaled_attention,
        "p_not_transposed": ab_dv_without_transpose,
        "grad_k_not_transposed": ab_dk_without_transpose,
        "row_term_dropped": ab_softmax_grad_without_row_term,
        "row_term_over_queries": ab_row_term_down_the_columns,
        "mask_ignored": ab_mask_only_in_forward_thoughts,
        "mask_after_softmax": ab_zeroes_hidden_weights_after_softmax,
        "causal_top_left": ab_tril_from_top_left,
        "nan_for_empty_rows": ab_nan_rows,
        "softmax_over_queries": ab_softmax_dim_minus_two,
        "grad_q_grad_k_swapped": ab_returns_k_first,
    },
    "attention_backward_flops": {
        "recompute_ignored": fl_ignores_recompute,
        "recompute_flag_inverted": fl_reads_flag_backwards,
        "recompute_full_forward": fl_recomputes_whole_forward,
        "forward_added": fl_forward_plus_backward,
        "three_products": fl_three_products,
        "multiply_add_as_one": fl_one_flop_per_mac,
    },
    "flash_attention_backward": {
        "uses_autograd": fb_autograd_through_sdpa,
        "measurement_evaded": fb_autograd_in_a_thread,
        "leaves_torch": fb_in_numpy,
        "builds_full_scores": fb_whole_matrix,
        "too_many_products": fb_two_passes_for_delta,
        "delta_from_grad_out": fb_delta_is_row_sum_of_grad,
        "delta_per_block": fb_delta_inside_each_block,
        "lse_base_2": fb_exp2,
        "softmax_within_block": fb_softmax_per_block,
        "grad_q_overwritten": fb_dq_assigned,
        "grad_kv_overwritten": fb_dk_dv_assigned_per_query_block,
        "mask_forgotten_in_recompute": fb_no_mask_when_recomputing,
        "causal_block_local_keys": fb_mask_with_block_columns,
        "scores_unscaled": fb_scores_without_scale,
        "no_scale_in_backward": fb_gradients_without_scale,
        "grad_q_unscaled": fb_dq_without_scale,
        "grad_k_unscaled": fb_dk_without_scale,
        "blocks_combined_wrongly_grad_q": fb_dq_averaged_over_blocks,
        "depends_on_block_size": fb_one_block_shortcut_unscaled,
    },
}

RIGHT = {
    "softmax_backward": [sm_formula, sm_builds_the_jacobian, sm_row_by_row, sm_torch_builtin],
    "attention_backward": [ab_textbook, ab_einsum_float64, ab_query_by_query,
                           ab_softmax_builtin],
    "attention_backward_flops": [fl_right],
    "flash_attention_backward": [fb_key_blocks, fb_key_and_query_tiles, fb_float64_einsum],
}

ANSWER_KEY = {
    "softmax_backward": [sm_from_reference],
    "attention_backward": [ab_from_reference, ab_from_flash_reference],
    "attention_backward_flops": [fl_from_accounting],
    "flash_attention_backward": [fb_from_reference, fb_from_dense_reference],
}
