"""Held-out catalogue, lesson 12 (backward): softmax_backward, attention_backward,
attention_backward_flops, flash_attention_backward."""

import math

import torch

from entry import Entry

EX_SB = "softmax_backward"
EX_AB = "attention_backward"
EX_FLOPS = "attention_backward_flops"
EX_FB = "flash_attention_backward"


# ============================================================================ softmax_backward
def sb_right_jacobian_einsum(weights, grad_weights):
    # builds the Jacobian diag(p) - p p^T per row (float64) and applies it with einsum
    p = weights.to(torch.float64)
    g = grad_weights.to(torch.float64)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return torch.einsum("...ij,...j->...i", jac, g).to(weights.dtype)


def sb_right_vecdot(weights, grad_weights):
    # p * g - p * <p, g>, the row dot product from torch.linalg.vecdot, float64
    p = weights.double()
    g = grad_weights.double()
    dot = torch.linalg.vecdot(p, g, dim=-1).unsqueeze(-1)
    return (p * g - p * dot).to(weights.dtype)


def _sb_ct(weights):
    return torch.promote_types(weights.dtype, torch.float32)


def sb_wrong_sum_axis_zero(weights, grad_weights):
    ct = _sb_ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=0, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_wrong_no_keepdim(weights, grad_weights):
    ct = _sb_ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_wrong_row_term_without_p(weights, grad_weights):
    ct = _sb_ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = g.sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def sb_wrong_sign(weights, grad_weights):
    ct = _sb_ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    row = (g * p).sum(dim=-1, keepdim=True)
    return (p * (row - g)).to(weights.dtype)


def sb_wrong_float32_result(weights, grad_weights):
    ct = _sb_ct(weights)
    p, g = weights.to(ct), grad_weights.to(ct)
    return p * (g - (g * p).sum(dim=-1, keepdim=True))


def sb_wrong_uses_autograd(weights, grad_weights):
    ct = _sb_ct(weights)
    scores = torch.log(weights.detach().to(ct)).requires_grad_(True)
    with torch.enable_grad():
        out = torch.softmax(scores, dim=-1)
        (grad,) = torch.autograd.grad(out, scores, grad_weights.to(ct))
    return grad.to(weights.dtype)


# ============================================================================ attention_backward
def _visible(n_q, n_k, device):
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(n_k - n_q)


def ab_right_delta_einsum(q, k, v, grad_out, causal=False):
    # float64 einsum; the row term from delta = rowsum(grad_out * out) instead of grad_p * p
    f = torch.float64
    Q, K, V, G = (t.to(f) for t in (q, k, v, grad_out))
    d = q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~_visible(q.shape[-2], k.shape[-2], q.device), -math.inf)
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    out = torch.einsum("...ij,...jd->...id", p, V)
    delta = (G * out).sum(dim=-1, keepdim=True)
    dp = torch.einsum("...id,...jd->...ij", G, V)
    ds = p * (dp - delta)
    dq = torch.einsum("...ij,...jd->...id", ds, K) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", ds, Q) / math.sqrt(d)
    dv = torch.einsum("...ij,...id->...jd", p, G)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def ab_right_flat_loop(q, k, v, grad_out, causal=False):
    # flatten the leading axes and do each (N_q, N_k) problem with 2-D torch.mm in float64
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    Q = q.reshape(-1, n_q, d).double()
    K = k.reshape(-1, n_k, d).double()
    V = v.reshape(-1, n_k, d_v).double()
    G = grad_out.reshape(-1, n_q, d_v).double()
    dq, dk, dv = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    scale = 1.0 / math.sqrt(d)
    allowed = _visible(n_q, n_k, q.device) if causal else None
    for i in range(Q.shape[0]):
        s = torch.mm(Q[i], K[i].t()) * scale
        if allowed is not None:
            s = s.masked_fill(~allowed, -math.inf)
        p = torch.nan_to_num(torch.softmax(s, dim=1), nan=0.0)
        dv[i] = torch.mm(p.t(), G[i])
        gp = torch.mm(G[i], V[i].t())
        gs = p * (gp - (gp * p).sum(dim=1, keepdim=True))
        dq[i] = torch.mm(gs, K[i]) * scale
        dk[i] = torch.mm(gs.t(), Q[i]) * scale
    return (dq.reshape(q.shape).to(q.dtype), dk.reshape(k.shape).to(k.dtype),
            dv.reshape(v.shape).to(v.dtype))


def _ab_template(q, k, v, grad_out, causal, *, grad_k_scaled=True, top_left=False,
                 grad_k_from_k=False, guard=True, use_T=False, row_dim=-1):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1.0 / math.sqrt(d)
    Q, K, V, G = (t.to(ct) for t in (q, k, v, grad_out))

    def tr(t):
        return t.T if use_T else t.transpose(-2, -1)

    s = Q @ tr(K) * scale
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device)
        allowed = allowed.tril() if top_left else allowed.tril(n_k - n_q)
        s = s.masked_fill(~allowed, -math.inf)
    if guard:
        m = s.amax(dim=-1, keepdim=True)
        m = m.masked_fill(torch.isneginf(m), 0.0)
        e = torch.exp(s - m)
        tot = e.sum(dim=-1, keepdim=True)
        p = e / tot.masked_fill(tot == 0, 1.0)
    else:
        p = torch.softmax(s, dim=-1)
    grad_v = tr(p) @ G
    grad_p = G @ tr(V)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=row_dim, keepdim=True))
    grad_q = grad_s @ K * scale
    grad_k = tr(grad_s) @ (K if grad_k_from_k else Q)
    if grad_k_scaled:
        grad_k = grad_k * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def ab_wrong_grad_k_unscaled(q, k, v, grad_out, causal=False):
    return _ab_template(q, k, v, grad_out, causal, grad_k_scaled=False)


def ab_wrong_causal_top_left(q, k, v, grad_out, causal=False):
    return _ab_template(q, k, v, grad_out, causal, top_left=True)


def ab_wrong_grad_k_from_k(q, k, v, grad_out, causal=False):
    return _ab_template(q, k, v, grad_out, causal, grad_k_from_k=True)


def ab_wrong_softmax_nan_rows(q, k, v, grad_out, causal=False):
    return _ab_template(q, k, v, grad_out, causal, guard=False)


def ab_wrong_dot_T_batched(q, k, v, grad_out, causal=False):
    return _ab_template(q, k, v, grad_out, causal, use_T=True)


def ab_wrong_row_term_axis(q, k, v, grad_out, causal=False):
    return _ab_template(q, k, v, grad_out, causal, row_dim=-2)


# ============================================================================ attention_backward_flops
def flops_right_bool_arithmetic(seq_len, head_dim, recompute=True):
    # (4 + recompute) products of 2 N^2 d; bool adds as 0 / 1
    return (4 + int(bool(recompute))) * 2 * seq_len * seq_len * head_dim


def flops_right_product_list(seq_len, head_dim, recompute=True):
    # list the products by their shapes (m, k, n), 2 m k n FLOPs each
    n, d = seq_len, head_dim
    products = [(n, n, d),  # grad_v = p^T grad_out
                (n, d, n),  # grad_p = grad_out v^T
                (n, n, d),  # grad_q = grad_s k
                (n, n, d)]  # grad_k = grad_s^T q
    if recompute:
        products.append((n, d, n))  # s = q k^T again
    return sum(2 * m * kk * nn for m, kk, nn in products)


def flops_wrong_flag_inverted(seq_len, head_dim, recompute=True):
    base = 8 * seq_len ** 2 * head_dim
    if not recompute:
        base += 2 * seq_len ** 2 * head_dim
    return base


def flops_wrong_one_flop_per_mac(seq_len, head_dim, recompute=True):
    per_product = seq_len * seq_len * head_dim
    return (5 if recompute else 4) * per_product


def flops_wrong_causal_half(seq_len, head_dim, recompute=True):
    pairs = seq_len * (seq_len + 1) // 2  # the causal triangle
    products = 5 if recompute else 4
    return products * 2 * pairs * head_dim


def flops_wrong_three_products(seq_len, head_dim, recompute=True):
    per_product = 2 * seq_len * seq_len * head_dim
    count = 3  # grad_v, grad_q, grad_k
    if recompute:
        count += 1
    return count * per_product


def flops_wrong_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def flops_wrong_conditional_precedence(seq_len, head_dim, recompute=True):
    return 8 * seq_len * seq_len * head_dim + 2 * seq_len * seq_len * head_dim if recompute else 0


# ============================================================================ flash_attention_backward
def _lse_for_exp(lse, ct):
    """-inf (a row with no key) becomes +inf so that exp(s - lse) = exp(-inf) = 0, not NaN."""
    l = lse.to(ct)
    return torch.where(torch.isneginf(l), torch.full_like(l, math.inf), l).unsqueeze(-1)


def fb_right_two_level_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    # FlashAttention-2 style tiles: query blocks x key blocks, float64, five products per tile
    f = torch.float64
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    sc = 1.0 / math.sqrt(d)
    Qs = q.to(f) * sc
    G = grad_out.to(f)
    D = (G * out.to(f)).sum(-1, keepdim=True)  # (B, H, N_q, 1)
    L = _lse_for_exp(lse, f)
    dQ = torch.zeros(q.shape, dtype=f, device=q.device)
    dK = torch.zeros(k.shape, dtype=f, device=q.device)
    dV = torch.zeros(v.shape, dtype=f, device=q.device)
    for j0 in range(0, n_k, block_size):
        j1 = min(n_k, j0 + block_size)
        Kj, Vj = k[:, :, j0:j1].to(f), v[:, :, j0:j1].to(f)
        for i0 in range(0, n_q, block_size):
            i1 = min(n_q, i0 + block_size)
            S = Qs[:, :, i0:i1] @ Kj.transpose(-1, -2)
            if causal:
                qi = torch.arange(i0, i1, device=q.device)[:, None] + (n_k - n_q)
                kj = torch.arange(j0, j1, device=q.device)[None, :]
                S = S.masked_fill(kj > qi, -math.inf)
            P = torch.exp(S - L[:, :, i0:i1])
            Gi = G[:, :, i0:i1]
            dV[:, :, j0:j1] += P.transpose(-1, -2) @ Gi
            dS = P * (Gi @ Vj.transpose(-1, -2) - D[:, :, i0:i1])
            dQ[:, :, i0:i1] += dS @ Kj
            dK[:, :, j0:j1] += dS.transpose(-1, -2) @ Qs[:, :, i0:i1]
    return (dQ * sc).to(q.dtype), dK.to(k.dtype), dV.to(v.dtype)


def fb_right_query_blocks(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    # blocks of queries against all keys ((block_size x N) per head); grad_k and grad_v
    # are summed over the query blocks, grad_q of a block is finished at once
    ct = torch.promote_types(q.dtype, torch.float32)
    n, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    inv = d ** -0.5
    K, V = k.to(ct), v.to(ct)
    gq = torch.empty(q.shape, dtype=ct, device=q.device)
    gk = torch.zeros(k.shape, dtype=ct, device=q.device)
    gv = torch.zeros(v.shape, dtype=ct, device=q.device)
    key_idx = torch.arange(n_k, device=q.device)
    for a in range(0, n, block_size):
        b = min(n, a + block_size)
        qb = q[..., a:b, :].to(ct)
        gb = grad_out[..., a:b, :].to(ct)
        delta = (gb * out[..., a:b, :].to(ct)).sum(dim=-1, keepdim=True)
        lse_b = lse[..., a:b].to(ct).unsqueeze(-1)
        s = (qb @ K.transpose(-2, -1)) * inv
        if causal:
            hide = key_idx[None, :] > (torch.arange(a, b, device=q.device)[:, None] + n_k - n)
            s = s.masked_fill(hide, -math.inf)
        p = torch.exp(s - lse_b)
        p = torch.nan_to_num(p, nan=0.0)  # rows with no key: exp(-inf + inf)
        gv += p.transpose(-2, -1) @ gb
        ds = p * (gb @ V.transpose(-2, -1) - delta)
        gq[..., a:b, :] = (ds @ K) * inv
        gk += (ds.transpose(-2, -1) @ qb) * inv
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def _fb_template(q, k, v, out, lse, grad_out, block_size, causal, *, block_delta=False,
                 guard=True, exp2=False, top_left=False, second_pass=False, inclusive=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qs = q.to(ct) / math.sqrt(d)
    g = grad_out.to(ct)
    if guard:
        L = _lse_for_exp(lse, ct)
    else:
        L = lse.to(ct).unsqueeze(-1)
    offset = 0 if top_left else n_k - n_q
    qpos = torch.arange(n_q, device=q.device)[:, None] + offset

    def block_bounds():
        for start in range(0, n_k, block_size):
            stop = min(start + block_size - 1, n_k) if inclusive else min(start + block_size, n_k)
            yield start, stop

    def probs(start, stop):
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            kpos = torch.arange(start, stop, device=q.device)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        return torch.exp2(s - L) if exp2 else torch.exp(s - L)

    if second_pass:
        delta = torch.zeros(q.shape[:-1] + (1,), dtype=ct, device=q.device)
        for start, stop in block_bounds():
            p = probs(start, stop)
            gp = g @ v[:, :, start:stop].to(ct).transpose(-2, -1)
            delta += (gp * p).sum(dim=-1, keepdim=True)
    else:
        delta = (g * out.to(ct)).sum(dim=-1, keepdim=True)
    gq = torch.zeros(q.shape, dtype=ct, device=q.device)
    gk = torch.zeros(k.shape, dtype=ct, device=q.device)
    gv = torch.zeros(v.shape, dtype=ct, device=q.device)
    for start, stop in block_bounds():
        kb = k[:, :, start:stop].to(ct)
        vb = v[:, :, start:stop].to(ct)
        p = probs(start, stop)
        gv[:, :, start:stop] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        row = (gp * p).sum(dim=-1, keepdim=True) if block_delta else delta
        gs = p * (gp - row)
        gq += gs @ kb
        gk[:, :, start:stop] = gs.transpose(-2, -1) @ qs
    gq = gq / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fb_wrong_block_local_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_template(q, k, v, out, lse, grad_out, block_size, causal, block_delta=True)


def fb_wrong_lse_inf_unguarded(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_template(q, k, v, out, lse, grad_out, block_size, causal, guard=False)


def fb_wrong_exp2(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_template(q, k, v, out, lse, grad_out, block_size, causal, exp2=True)


def fb_wrong_causal_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_template(q, k, v, out, lse, grad_out, block_size, causal, top_left=True)


def fb_wrong_second_pass_for_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_template(q, k, v, out, lse, grad_out, block_size, causal, second_pass=True)


def fb_wrong_inclusive_block_end(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_template(q, k, v, out, lse, grad_out, block_size, causal, inclusive=True)


ENTRIES = [
    Entry(EX_SB, "right", "jacobian_einsum_float64", None, sb_right_jacobian_einsum),
    Entry(EX_SB, "right", "linalg_vecdot", None, sb_right_vecdot),
    Entry(EX_SB, "wrong", "row_term_summed_over_axis0",
          "Sums grad_weights * weights over dim=0 instead of the last axis, so the 'row term' "
          "mixes different rows (right only for a single row of shape (n,)).",
          sb_wrong_sum_axis_zero),
    Entry(EX_SB, "wrong", "row_term_without_keepdim",
          "Sums the row term without keepdim=True: the (...,) result broadcasts against the last "
          "axis instead of its row (a shape error, or wrong values when the shapes happen to fit).",
          sb_wrong_no_keepdim),
    Entry(EX_SB, "wrong", "row_term_without_weights",
          "Takes the row term as grad_weights.sum(-1) instead of (grad_weights * weights).sum(-1): "
          "the p p^T part of the Jacobian is missing its p.",
          sb_wrong_row_term_without_p),
    Entry(EX_SB, "wrong", "sign_flipped",
          "Computes weights * (row term - grad_weights), the negative of the gradient.",
          sb_wrong_sign),
    Entry(EX_SB, "wrong", "returns_float32",
          "Computes in float32 and returns the float32 result: float16 / bfloat16 weights do not "
          "get their dtype back.",
          sb_wrong_float32_result),
    Entry(EX_SB, "wrong", "uses_autograd",
          "Gets the gradient from torch.autograd.grad through torch.softmax instead of computing "
          "it explicitly; the lesson forbids autograd, so the answer is rejected (it raises under "
          "the check).",
          sb_wrong_uses_autograd),
    Entry(EX_AB, "right", "delta_rowsum_einsum_float64", None, ab_right_delta_einsum),
    Entry(EX_AB, "right", "flattened_loop_torch_mm", None, ab_right_flat_loop),
    Entry(EX_AB, "wrong", "grad_k_missing_scale",
          "Multiplies grad_q by 1/sqrt(d) but forgets it on grad_k = grad_s^T q.",
          ab_wrong_grad_k_unscaled),
    Entry(EX_AB, "wrong", "causal_top_left",
          "Builds the causal mask with tril() (top-left) instead of tril(N_k - N_q) "
          "(bottom-right): wrong whenever N_q != N_k.",
          ab_wrong_causal_top_left),
    Entry(EX_AB, "wrong", "grad_k_uses_k",
          "Computes grad_k as grad_s^T k instead of grad_s^T q (the wrong tensor reused): a "
          "shape error when N_q != N_k, wrong values otherwise.",
          ab_wrong_grad_k_from_k),
    Entry(EX_AB, "wrong", "softmax_nan_on_empty_rows",
          "Uses torch.softmax on the masked scores without a guard: a query row with no visible "
          "key (causal, N_q > N_k) becomes NaN and spreads into the gradients.",
          ab_wrong_softmax_nan_rows),
    Entry(EX_AB, "wrong", "dot_T_on_batched_tensors",
          "Transposes with .T, which on a batched (..., N, d) tensor reverses all axes instead "
          "of swapping the last two: right for 2-D inputs only (a shape error on batched ones).",
          ab_wrong_dot_T_batched),
    Entry(EX_AB, "wrong", "row_term_over_queries",
          "Sums grad_p * p over dim=-2 (the queries) instead of dim=-1 (the keys) for the "
          "softmax-backward row term.",
          ab_wrong_row_term_axis),
    Entry(EX_FLOPS, "right", "bool_as_int", None, flops_right_bool_arithmetic),
    Entry(EX_FLOPS, "right", "listed_product_shapes", None, flops_right_product_list),
    Entry(EX_FLOPS, "wrong", "recompute_flag_inverted",
          "Adds the 2 N^2 d recomputation when recompute is False instead of when it is True.",
          flops_wrong_flag_inverted),
    Entry(EX_FLOPS, "wrong", "one_flop_per_multiply_add",
          "Counts N^2 d per product (one FLOP per multiply-add) instead of 2 N^2 d.",
          flops_wrong_one_flop_per_mac),
    Entry(EX_FLOPS, "wrong", "causal_triangle_only",
          "Counts only the N(N+1)/2 query-key pairs of a causal mask; the contract counts the "
          "dense N^2 (no causal saving).",
          flops_wrong_causal_half),
    Entry(EX_FLOPS, "wrong", "grad_p_product_forgotten",
          "Counts three backward products (grad_v, grad_q, grad_k) and forgets "
          "grad_p = grad_out v^T: 6 N^2 d instead of 8 N^2 d.",
          flops_wrong_three_products),
    Entry(EX_FLOPS, "wrong", "float_from_ratio",
          "Computes forward * 2.5, which returns a float instead of the plain int the contract "
          "requires.",
          flops_wrong_float_ratio),
    Entry(EX_FLOPS, "wrong", "conditional_expression_precedence",
          "Writes 8 N^2 d + 2 N^2 d if recompute else 0: the conditional expression takes the "
          "whole sum, so recompute=False returns 0 instead of 8 N^2 d.",
          flops_wrong_conditional_precedence),
    Entry(EX_FB, "right", "query_and_key_tiles_float64", None, fb_right_two_level_blocks),
    Entry(EX_FB, "right", "query_blocks_all_keys", None, fb_right_query_blocks),
    Entry(EX_FB, "wrong", "delta_from_current_block",
          "Takes the softmax row term from the current key block only, (grad_p * p).sum(-1) "
          "over the block, instead of delta = rowsum(grad_out * out) over all keys: right only "
          "when one block holds every key.",
          fb_wrong_block_local_delta),
    Entry(EX_FB, "wrong", "lse_minus_inf_unguarded",
          "Uses exp(s - lse) as is: for a row with no visible key both are -inf and "
          "exp(-inf - (-inf)) is NaN instead of 0.",
          fb_wrong_lse_inf_unguarded),
    Entry(EX_FB, "wrong", "exp2_with_natural_lse",
          "Recomputes the probabilities with torch.exp2 (the base-2 trick of FlashAttention's "
          "kernels) while lse and the scores are in natural-log units.",
          fb_wrong_exp2),
    Entry(EX_FB, "wrong", "causal_top_left",
          "Masks keys j > i (top-left) instead of j > i + N_k - N_q (bottom-right): wrong "
          "whenever N_q != N_k.",
          fb_wrong_causal_top_left),
    Entry(EX_FB, "wrong", "second_pass_for_row_term",
          "Computes the row term in a first pass over the key blocks (recomputing p and grad_p) "
          "instead of delta = rowsum(grad_out * out): the values are right but the products "
          "exceed one recomputation, 10 N^2 d per head.",
          fb_wrong_second_pass_for_delta),
    Entry(EX_FB, "wrong", "block_end_inclusive",
          "Ends each key block at start + block_size - 1, as if the slice end were inclusive: "
          "the last key of every block is skipped (its grad_k, grad_v stay zero).",
          fb_wrong_inclusive_block_end),
]
