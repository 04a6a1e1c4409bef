"""Lesson 12 (backward): softmax_backward, attention_backward, attention_backward_flops,
flash_attention_backward, torch (no autograd)."""

import math

import torch

from entry import Entry


def _work(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


# ---------------------------------------------------------------- softmax_backward
def sb_no_keepdim(weights, grad_weights):
    w = _work(weights.dtype)
    p, g = weights.to(w), grad_weights.to(w)
    return (p * (g - (g * p).sum(-1))).to(weights.dtype)


def sb_sums_first_axis(weights, grad_weights):
    w = _work(weights.dtype)
    p, g = weights.to(w), grad_weights.to(w)
    return (p * (g - (g * p).sum(0, keepdim=True))).to(weights.dtype)


def sb_sign(weights, grad_weights):
    w = _work(weights.dtype)
    p, g = weights.to(w), grad_weights.to(w)
    return (p * ((g * p).sum(-1, keepdim=True) - g)).to(weights.dtype)


def sb_times_grad(weights, grad_weights):
    w = _work(weights.dtype)
    p, g = weights.to(w), grad_weights.to(w)
    return (g * (g - (g * p).sum(-1, keepdim=True))).to(weights.dtype)


def sb_sum_of_p(weights, grad_weights):
    w = _work(weights.dtype)
    p, g = weights.to(w), grad_weights.to(w)
    return (p * (g - p.sum(-1, keepdim=True))).to(weights.dtype)


def sb_mean(weights, grad_weights):
    w = _work(weights.dtype)
    p, g = weights.to(w), grad_weights.to(w)
    return (p * (g - (g * p).mean(-1, keepdim=True))).to(weights.dtype)


def sb_explicit_jacobian(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_expanded(weights, grad_weights):
    p = weights.double()
    g = grad_weights.double()
    dot = torch.einsum("...n,...n->...", p, g)
    return (p * g - p * dot[..., None]).to(weights.dtype)


# ---------------------------------------------------------------- attention_backward
def _visible(n_q, n_k, top_left=False):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(0 if top_left else n_k - n_q)


def _probs(s):
    top = s.amax(-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return e / tot.masked_fill(tot == 0, 1.0)


def _ab(q, k, v, grad_out, causal, *, no_q_scale=False, no_kT=False, top_left=False,
        keep_compute=False, row_axis=-1):
    w = _work(q.dtype)
    d = q.shape[-1]
    sc = 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.to(w) for t in (q, k, v, grad_out))
    s = q_ @ k_.transpose(-2, -1) * sc
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2], top_left), -math.inf)
    p = _probs(s)
    gv = p.transpose(-2, -1) @ g_
    gp = g_ @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(row_axis, keepdim=True))
    gq = gs @ k_ * (1.0 if no_q_scale else sc)
    gk = (gs @ q_ if no_kT else gs.transpose(-2, -1) @ q_) * sc
    if keep_compute:
        return gq, gk, gv
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_q_unscaled(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, no_q_scale=True)


def ab_grad_k_no_transpose(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, no_kT=True)


def ab_top_left_causal(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, top_left=True)


def ab_returns_compute_dtype(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, keep_compute=True)


def ab_row_term_wrong_axis(q, k, v, grad_out, causal=False):
    return _ab(q, k, v, grad_out, causal, row_axis=-2)


def ab_uses_autograd(q, k, v, grad_out, causal=False):
    w = _work(q.dtype)
    q_, k_, v_ = (t.detach().to(w).requires_grad_(True) for t in (q, k, v))
    s = q_ @ k_.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), -math.inf)
    out = _probs(s) @ v_
    gq, gk, gv = torch.autograd.grad(out, (q_, k_, v_), grad_out.to(w))
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_delta_identity_float64(q, k, v, grad_out, causal=False):
    """Row term from delta = rowsum(grad_out * out), the FlashAttention identity."""
    q_, k_, v_, g_ = (t.double() for t in (q, k, v, grad_out))
    d = q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
    p = torch.softmax(s, dim=-1).nan_to_num(nan=0.0)
    out = p @ v_
    delta = (g_ * out).sum(-1, keepdim=True)
    ds = p * (g_ @ v_.transpose(-2, -1) - delta)
    gq = torch.einsum("...ij,...jd->...id", ds, k_) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", ds, q_) / math.sqrt(d)
    gv = torch.einsum("...ij,...ie->...je", p, g_)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_jacobian_per_row(q, k, v, grad_out, causal=False):
    w = _work(q.dtype)
    q_, k_, v_, g_ = (t.to(w) for t in (q, k, v, grad_out))
    scale = q.shape[-1] ** -0.5
    qs = q_ * scale
    s = qs @ k_.transpose(-1, -2)
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2]), float("-inf"))
    p = _probs(s)
    gp = g_ @ v_.transpose(-1, -2)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., N_q, N_k, N_k)
    ds = (jac @ gp.unsqueeze(-1)).squeeze(-1)
    return ((ds @ k_) * scale).to(q.dtype), (ds.transpose(-1, -2) @ qs).to(k.dtype), \
        (p.transpose(-1, -2) @ g_).to(v.dtype)


# ---------------------------------------------------------------- attention_backward_flops
def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * n * d + (4 * n * n * d if recompute else 0)


def abf_recompute_is_not_none(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    total = 8 * n * n * d
    if recompute is not None:
        total += 2 * n * n * d
    return total


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len ** 2 * head_dim
    return (2.5 if recompute else 2) * forward


def abf_mac_as_one(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 4 * n * n * d + (n * n * d if recompute else 0)


def abf_n_and_d_swapped(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    return 8 * n * d ** 2 + (2 * n * d ** 2 if recompute else 0)


def abf_three_products(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    products = ["grad_v", "grad_q", "grad_k"] + (["scores"] if recompute else [])
    return len(products) * 2 * n * n * d


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


def abf_bool_arithmetic(seq_len, head_dim, recompute=True):
    return 2 * seq_len * seq_len * head_dim * (4 + int(recompute))


# ---------------------------------------------------------------- flash_attention_backward
def _fb(q, k, v, out, lse, grad_out, block_size, causal, *, delta_keepdim=True,
        scale_scores=True, accumulate_q=True, scale_k=True, local_keys=False, full_p=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    w = _work(q.dtype)
    sc = 1.0 / math.sqrt(d)
    q_ = q.to(w)
    qs = q_ * sc if scale_scores else q_
    g_ = grad_out.to(w)
    delta = (g_ * out.to(w)).sum(-1, keepdim=delta_keepdim)
    lse_ = lse.to(w).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    gq = torch.zeros_like(q_)
    gk = torch.zeros(k.shape, dtype=w)
    gv = torch.zeros(v.shape, dtype=w)
    if full_p:
        s_full = qs @ k.to(w).transpose(-2, -1)
        if causal:
            s_full = s_full.masked_fill(~_visible(n_q, n_k), -math.inf)
        p_full = torch.exp(s_full - lse_)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[..., s0:s1, :].to(w), v[..., s0:s1, :].to(w)
        if full_p:
            p = p_full[..., s0:s1]
        else:
            s = qs @ kb.transpose(-2, -1)
            if causal:
                kpos = torch.arange(0, s1 - s0) if local_keys else torch.arange(s0, s1)
                s = s.masked_fill(kpos[None, :] > qpos, -math.inf)
            p = torch.exp(s - lse_)
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g_
        ds = p * (g_ @ vb.transpose(-2, -1) - delta)
        if accumulate_q:
            gq += ds @ kb
        else:
            gq = ds @ kb
        gk[..., s0:s1, :] = ds.transpose(-2, -1) @ (q_ * sc if scale_k else q_)
    gq = gq * sc
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_delta_no_keepdim(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, delta_keepdim=False)


def fb_recompute_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, scale_scores=False)


def fb_grad_q_overwritten(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, accumulate_q=False)


def fb_grad_k_unscaled(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, scale_k=False)


def fb_block_local_keys(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, local_keys=True)


def fb_full_probabilities(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb(q, k, v, out, lse, grad_out, block_size, causal, full_p=True)


def fb_query_and_key_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """FlashAttention-2 style: outer loop over key tiles, inner loop over query tiles, float64."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    scale = d ** -0.5
    q64, k64, v64 = q.double(), k.double(), v.double()
    o64, g64 = out.double(), grad_out.double()
    lse64 = lse.double()
    delta = (o64 * g64).sum(dim=-1)  # (B, H, N_q)
    gq = torch.zeros(B, H, n_q, d, dtype=torch.float64)
    gk = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    gv = torch.zeros(B, H, n_k, d, dtype=torch.float64)
    for k0 in range(0, n_k, block_size):
        k1 = min(n_k, k0 + block_size)
        kt, vt = k64[:, :, k0:k1], v64[:, :, k0:k1]
        for q0 in range(0, n_q, block_size):
            q1 = min(n_q, q0 + block_size)
            qt, gt = q64[:, :, q0:q1], g64[:, :, q0:q1]
            lt = lse64[:, :, q0:q1, None]
            s = (qt @ kt.transpose(-1, -2)) * scale
            keep = ~torch.isneginf(lt).expand_as(s)
            if causal:
                rows = torch.arange(q0, q1)[:, None] + (n_k - n_q)
                cols = torch.arange(k0, k1)[None, :]
                keep = keep & (cols <= rows)
            p = torch.where(keep, torch.exp(s - torch.where(torch.isneginf(lt), 0.0, lt)),
                            torch.zeros((), dtype=torch.float64))
            gv[:, :, k0:k1] += p.transpose(-1, -2) @ gt
            ds = p * (gt @ vt.transpose(-1, -2) - delta[:, :, q0:q1, None])
            gq[:, :, q0:q1] += (ds @ kt) * scale
            gk[:, :, k0:k1] += (ds.transpose(-1, -2) @ qt) * scale
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_einsum_key_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    w = _work(q.dtype)
    qw, gw = q.to(w), grad_out.to(w)
    delta = torch.einsum("bhqd,bhqd->bhq", gw, out.to(w)).unsqueeze(-1)
    empty = torch.isneginf(lse).unsqueeze(-1)
    lse_w = lse.to(w).unsqueeze(-1).masked_fill(empty, 0.0)
    grads_q = []
    grads_k, grads_v = [], []
    for s0 in range(0, n_k, block_size):
        kb = k[:, :, s0:s0 + block_size].to(w)
        vb = v[:, :, s0:s0 + block_size].to(w)
        s = torch.einsum("bhqd,bhkd->bhqk", qw, kb) / math.sqrt(d)
        dead = empty.expand_as(s)
        if causal:
            kpos = torch.arange(s0, s0 + kb.shape[2])
            dead = dead | (kpos[None, :] > (torch.arange(n_q)[:, None] + n_k - n_q))
        p = torch.exp(s - lse_w).masked_fill(dead, 0.0)
        ds = p * (torch.einsum("bhqd,bhkd->bhqk", gw, vb) - delta)
        grads_v.append(torch.einsum("bhqk,bhqd->bhkd", p, gw))
        grads_k.append(torch.einsum("bhqk,bhqd->bhkd", ds, qw) / math.sqrt(d))
        grads_q.append(torch.einsum("bhqk,bhkd->bhqd", ds, kb))
    gq = torch.stack(grads_q).sum(0) / math.sqrt(d)
    return gq.to(q.dtype), torch.cat(grads_k, 2).to(k.dtype), torch.cat(grads_v, 2).to(v.dtype)


E = "softmax_backward"
ENTRIES = [
    Entry(E, "wrong", "row_sum_without_keepdim", "The row sum drops keepdim, so (..., ) is "
          "broadcast against (..., n) along the wrong axis (or fails).", sb_no_keepdim),
    Entry(E, "wrong", "sums_first_axis", "The row term sums over axis 0 instead of the last "
          "axis.", sb_sums_first_axis),
    Entry(E, "wrong", "sign_flipped", "It computes p * (rowsum(g p) - g), the negative of the "
          "gradient.", sb_sign),
    Entry(E, "wrong", "multiplies_by_grad", "The outer factor is grad_weights instead of "
          "weights.", sb_times_grad),
    Entry(E, "wrong", "sums_p_not_g_times_p", "The row term is rowsum(p) (= 1) instead of "
          "rowsum(grad_weights * p).", sb_sum_of_p),
    Entry(E, "wrong", "row_mean", "The row term uses mean instead of sum of grad_weights * p.",
          sb_mean),
    Entry(E, "right", "explicit_jacobian_einsum", None, sb_explicit_jacobian),
    Entry(E, "right", "expanded_dot", None, sb_expanded),
]

E = "attention_backward"
ENTRIES += [
    Entry(E, "wrong", "grad_q_unscaled", "grad_q = grad_s k is not multiplied by 1/sqrt(d).",
          ab_grad_q_unscaled),
    Entry(E, "wrong", "grad_k_no_transpose", "grad_k is computed as grad_s @ q instead of "
          "grad_s^T @ q.", ab_grad_k_no_transpose),
    Entry(E, "wrong", "top_left_causal", "The causal mask is tril without the n_k - n_q "
          "offset (top-left) instead of bottom-right aligned.", ab_top_left_causal),
    Entry(E, "wrong", "returns_compute_dtype", "It returns the float32 working tensors without "
          "casting back to the inputs' dtype.", ab_returns_compute_dtype),
    Entry(E, "wrong", "row_term_over_queries", "The softmax row term sums grad_p * p over the "
          "query axis (-2) instead of the key axis (-1).", ab_row_term_wrong_axis),
    Entry(E, "wrong", "uses_autograd", "It gets the gradients from torch.autograd.grad, which "
          "the lesson forbids.", ab_uses_autograd),
    Entry(E, "right", "delta_identity_float64", None, ab_delta_identity_float64),
    Entry(E, "right", "per_row_jacobian", None, ab_jacobian_per_row),
]

E = "attention_backward_flops"
ENTRIES += [
    Entry(E, "wrong", "recomputes_whole_forward", "With recompute it adds the whole forward "
          "(4 N^2 d) instead of only the scores q k^T (2 N^2 d).", abf_recompute_whole_forward),
    Entry(E, "wrong", "recompute_is_not_none", "The guard tests recompute is not None, so "
          "recompute=False still adds the recomputation.", abf_recompute_is_not_none),
    Entry(E, "wrong", "float_ratio", "It multiplies the forward by 2.5 for recompute, so the "
          "count comes back as a float instead of a plain int.", abf_float_ratio),
    Entry(E, "wrong", "mac_as_one_flop", "Each multiply-add is counted as 1 FLOP instead of "
          "2.", abf_mac_as_one),
    Entry(E, "wrong", "n_and_d_swapped", "It writes N d^2 where N^2 d belongs.",
          abf_n_and_d_swapped),
    Entry(E, "wrong", "three_products", "It counts three backward products, forgetting "
          "grad_p = grad_out v^T.", abf_three_products),
    Entry(E, "right", "product_list", None, abf_product_list),
    Entry(E, "right", "bool_arithmetic", None, abf_bool_arithmetic),
]

E = "flash_attention_backward"
ENTRIES += [
    Entry(E, "wrong", "delta_without_keepdim", "delta is summed without keepdim, so its (B, H, "
          "N) shape broadcasts against the (B, H, N, b) block along the wrong axis (or fails).",
          fb_delta_no_keepdim),
    Entry(E, "wrong", "recompute_unscaled", "The recomputed scores q k^T are not divided by "
          "sqrt(d) before exp(s - lse).", fb_recompute_unscaled),
    Entry(E, "wrong", "grad_q_overwritten", "grad_q is assigned with = in each key block "
          "instead of accumulated with +=, so only the last block survives.",
          fb_grad_q_overwritten),
    Entry(E, "wrong", "grad_k_unscaled", "grad_k = grad_s^T q uses the unscaled q, forgetting "
          "the 1/sqrt(d).", fb_grad_k_unscaled),
    Entry(E, "wrong", "block_local_key_positions", "The causal mask compares query positions "
          "with block-local key indices (0..b-1) instead of absolute ones.",
          fb_block_local_keys),
    Entry(E, "wrong", "full_probability_matrix", "It recomputes the whole N x N probability "
          "matrix up front and slices it per block, which the exercise forbids.",
          fb_full_probabilities),
    Entry(E, "right", "key_then_query_tiles_float64", None, fb_query_and_key_tiles),
    Entry(E, "right", "einsum_key_blocks", None, fb_einsum_key_blocks),
]
