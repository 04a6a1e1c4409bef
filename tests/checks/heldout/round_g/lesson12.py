"""Lesson 12 (attention backward, torch; no autograd)."""

import math

import torch

from entry import Entry


def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


# ----------------------------------------------------------------------------- softmax_backward
def sb_no_keepdim(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    row = (g * p).sum(dim=-1)
    return (p * (g - row)).to(weights.dtype)


def sb_forgets_outer_p(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (g - (g * p).sum(-1, keepdim=True)).to(weights.dtype)


def sb_wrong_dim(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).sum(dim=0, keepdim=True))).to(weights.dtype)


def sb_diagonal_only(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (1 - p) * g).to(weights.dtype)


def sb_global_sum(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * (g - (g * p).sum())).to(weights.dtype)


def sb_sign(weights, grad_weights):
    c = _c(weights)
    p, g = weights.to(c), grad_weights.to(c)
    return (p * ((g * p).sum(-1, keepdim=True) - g)).to(weights.dtype)


def sb_jacobian(weights, grad_weights):
    p = weights.double()
    J = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return (J @ grad_weights.double().unsqueeze(-1)).squeeze(-1).to(weights.dtype)


def sb_einsum(weights, grad_weights):
    p, g = weights.double(), grad_weights.double()
    dot = torch.einsum("...i,...i->...", p, g)
    return torch.addcmul(-p * dot.unsqueeze(-1), p, g).to(weights.dtype)


# ----------------------------------------------------------------------------- attention_backward
def _probs(q, k, causal, top_left=False, guard=True):
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(0 if top_left else n_k - n_q)
        s = s.masked_fill(~allowed, -math.inf)
    if not guard:
        return torch.softmax(s, dim=-1)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


def ab_grad_k_unscaled(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g = (t.to(c) for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(q.shape[-1])
    p = _probs(q_, k_, causal)
    gv = p.transpose(-2, -1) @ g
    gp = g @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ * sc
    gk = gs.transpose(-2, -1) @ q_
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_grad_v_untransposed(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g = (t.to(c) for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(q.shape[-1])
    p = _probs(q_, k_, causal)
    gv = p @ g
    gp = g @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return (gs @ k_ * sc).to(q.dtype), (gs.transpose(-2, -1) @ q_ * sc).to(k.dtype), gv.to(v.dtype)


def ab_top_left(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g = (t.to(c) for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(q.shape[-1])
    p = _probs(q_, k_, causal, top_left=True)
    gv = p.transpose(-2, -1) @ g
    gp = g @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return (gs @ k_ * sc).to(q.dtype), (gs.transpose(-2, -1) @ q_ * sc).to(k.dtype), gv.to(v.dtype)


def ab_nan_rows(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g = (t.to(c) for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(q.shape[-1])
    p = _probs(q_, k_, causal, guard=False)
    gv = p.transpose(-2, -1) @ g
    gp = g @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return (gs @ k_ * sc).to(q.dtype), (gs.transpose(-2, -1) @ q_ * sc).to(k.dtype), gv.to(v.dtype)


def ab_no_row_term(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g = (t.to(c) for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(q.shape[-1])
    p = _probs(q_, k_, causal)
    gv = p.transpose(-2, -1) @ g
    gs = p * (g @ v_.transpose(-2, -1))
    return (gs @ k_ * sc).to(q.dtype), (gs.transpose(-2, -1) @ q_ * sc).to(k.dtype), gv.to(v.dtype)


def ab_grad_k_uses_k(q, k, v, grad_out, causal=False):
    c = _c(q)
    q_, k_, v_, g = (t.to(c) for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(q.shape[-1])
    p = _probs(q_, k_, causal)
    gv = p.transpose(-2, -1) @ g
    gp = g @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq = gs @ k_ * sc
    gk = gs.transpose(-2, -1) @ k_ * sc
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_autograd(q, k, v, grad_out, causal=False):
    q_, k_, v_ = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    p = _probs(q_, k_, causal)
    out = p @ v_
    gq, gk, gv = torch.autograd.grad(out, (q_, k_, v_), grad_out.double())
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_float32_result(q, k, v, grad_out, causal=False):
    q_, k_, v_, g = (t.float() for t in (q, k, v, grad_out))
    sc = 1 / math.sqrt(q.shape[-1])
    p = _probs(q_, k_, causal)
    gv = p.transpose(-2, -1) @ g
    gp = g @ v_.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    return gs @ k_ * sc, gs.transpose(-2, -1) @ q_ * sc, gv


def ab_einsum64(q, k, v, grad_out, causal=False):
    q_, k_, v_, g = (t.double() for t in (q, k, v, grad_out))
    d = q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", q_, k_) / math.sqrt(d)
    if causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        i = torch.arange(n_q)[:, None]
        j = torch.arange(n_k)[None, :]
        s = s.masked_fill(j > i + (n_k - n_q), float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    gv = torch.einsum("...ij,...id->...jd", p, g)
    gp = torch.einsum("...id,...jd->...ij", g, v_)
    gs = p * (gp - torch.einsum("...ij,...ij->...i", gp, p)[..., None])
    gq = torch.einsum("...ij,...jd->...id", gs, k_) / math.sqrt(d)
    gk = torch.einsum("...ij,...id->...jd", gs, q_) / math.sqrt(d)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def ab_jacobian_rows(q, k, v, grad_out, causal=False):
    q_, k_, v_, g = (t.double() for t in (q, k, v, grad_out))
    d = q.shape[-1]
    scale = d ** -0.5
    p = _probs(q_, k_, causal)
    grad_v = p.mT @ g
    grad_p = g @ v_.mT
    J = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]  # (..., N_q, N_k, N_k)
    grad_s = (J @ grad_p[..., None])[..., 0]
    grad_q = grad_s @ k_ * scale
    grad_k = grad_s.mT @ (q_ * scale)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# ----------------------------------------------------------------------------- attention_backward_flops
def abf_ignores_recompute(seq_len, head_dim, recompute=True):
    return 10 * seq_len * seq_len * head_dim


def abf_recompute_whole_forward(seq_len, head_dim, recompute=True):
    base = 8 * seq_len ** 2 * head_dim
    return base + (4 * seq_len ** 2 * head_dim if recompute else 0)


def abf_macs(seq_len, head_dim, recompute=True):
    products = 5 if recompute else 4
    return products * seq_len * seq_len * head_dim


def abf_float_ratio(seq_len, head_dim, recompute=True):
    forward = 4 * seq_len * seq_len * head_dim
    return forward * (2.5 if recompute else 2)


def abf_inverted_flag(seq_len, head_dim, recompute=True):
    extra = 0 if recompute else 2 * seq_len * seq_len * head_dim
    return 8 * seq_len * seq_len * head_dim + extra


def abf_three_products(seq_len, head_dim, recompute=True):
    n2d = seq_len * seq_len * head_dim
    flops = 2 * n2d * 3  # grad_v, grad_q, grad_k
    if recompute:
        flops += 2 * n2d
    return flops


def abf_product_list(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    shapes = [(n, n, d), (n, d, n), (n, n, d), (n, n, d)]  # grad_v, grad_p, grad_q, grad_k
    if recompute:
        shapes.append((n, d, n))  # s = q k^T again
    return sum(2 * m * k * p for m, k, p in shapes)


def abf_forward_multiple(seq_len, head_dim, recompute=True):
    fwd = 4 * seq_len * seq_len * head_dim
    return 2 * fwd + (fwd // 2 if recompute else 0)


# ----------------------------------------------------------------------------- flash_attention_backward
def _fb_loop(q, k, v, out, lse, grad_out, block_size, causal, *, delta_mode="global",
             scale_p=True, guard=True, top_left=False, accumulate=True, lse_mode="lse"):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = _c(q)
    sc = 1 / math.sqrt(d)
    qc = q.to(c)
    qs = qc * sc
    g = grad_out.to(c)
    delta = (g * out.to(c)).sum(-1, keepdim=True)
    L = lse.to(c)[..., None]
    if guard:
        L = L.masked_fill(torch.isneginf(L), math.inf)
    qpos = torch.arange(n_q)[:, None] + (0 if top_left else n_k - n_q)
    gq = torch.zeros_like(qc)
    gk = torch.empty(k.shape, dtype=c)
    gv = torch.empty(v.shape, dtype=c)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[..., s0:s1, :].to(c), v[..., s0:s1, :].to(c)
        s = (qs if scale_p else qc) @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        if lse_mode == "lse":
            p = torch.exp(s - L)
        else:  # block softmax
            p = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
        gv[..., s0:s1, :] = p.transpose(-2, -1) @ g
        gp = g @ vb.transpose(-2, -1)
        dl = (gp * p).sum(-1, keepdim=True) if delta_mode == "block" else delta
        gs = p * (gp - dl)
        if accumulate:
            gq = gq + gs @ kb
        else:
            gq = gs @ kb
        gk[..., s0:s1, :] = gs.transpose(-2, -1) @ qs
    return (gq * sc).to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_block_delta(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_loop(q, k, v, out, lse, grad_out, block_size, causal, delta_mode="block")


def fab_unscaled_scores(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_loop(q, k, v, out, lse, grad_out, block_size, causal, scale_p=False)


def fab_nan_empty_rows(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_loop(q, k, v, out, lse, grad_out, block_size, causal, guard=False)


def fab_top_left(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_loop(q, k, v, out, lse, grad_out, block_size, causal, top_left=True)


def fab_overwrites_grad_q(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_loop(q, k, v, out, lse, grad_out, block_size, causal, accumulate=False)


def fab_block_softmax(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    return _fb_loop(q, k, v, out, lse, grad_out, block_size, causal, lse_mode="block")


def fab_two_level_tiles(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.float64
    scale = 1.0 / math.sqrt(d)
    q64, k64, v64 = q.to(f), k.to(f), v.to(f)
    g64, o64 = grad_out.to(f), out.to(f)
    lse64 = lse.to(f)
    gq = torch.zeros(B, H, n_q, d, dtype=f)
    gk = torch.zeros(B, H, n_k, d, dtype=f)
    gv = torch.zeros(B, H, n_k, d, dtype=f)
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qi = q64[:, :, i0:i1] * scale
        gi = g64[:, :, i0:i1]
        li = lse64[:, :, i0:i1, None]
        empty = torch.isneginf(li)
        li = torch.where(empty, torch.zeros_like(li), li)
        di = torch.einsum("bhid,bhid->bhi", gi, o64[:, :, i0:i1])[..., None]
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            s = torch.einsum("bhid,bhjd->bhij", qi, k64[:, :, j0:j1])
            if causal:
                visible = (torch.arange(j0, j1)[None, :]
                           <= torch.arange(i0, i1)[:, None] + (n_k - n_q))
                s = s.masked_fill(~visible, float("-inf"))
            p = torch.exp(s - li).masked_fill(empty, 0.0)
            gv[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", p, gi)
            dp = torch.einsum("bhid,bhjd->bhij", gi, v64[:, :, j0:j1])
            ds = p * (dp - di)
            gq[:, :, i0:i1] += torch.einsum("bhij,bhjd->bhid", ds, k64[:, :, j0:j1]) * scale
            gk[:, :, j0:j1] += torch.einsum("bhij,bhid->bhjd", ds, qi)
    return gq.to(q.dtype), gk.to(k.dtype), gv.to(v.dtype)


def fab_key_blocks_lists(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    c = torch.float64
    qs = q.to(c) / math.sqrt(d)
    g = grad_out.to(c)
    D = (g * out.to(c)).sum(-1, keepdim=True)
    L = lse.to(c).unsqueeze(-1)
    dead = torch.isneginf(L)
    L = torch.where(dead, torch.zeros_like(L), L)
    gq = torch.zeros_like(qs)
    gks, gvs = [], []
    shift = n_k - n_q
    for s0 in range(0, n_k, block_size):
        kb = k[..., s0:s0 + block_size, :].to(c)
        vb = v[..., s0:s0 + block_size, :].to(c)
        b = kb.shape[-2]
        s = qs @ kb.mT
        if causal:
            keep = torch.arange(s0, s0 + b)[None, :] - torch.arange(n_q)[:, None] <= shift
            s = torch.where(keep, s, torch.tensor(float("-inf"), dtype=c))
        p = torch.where(dead, torch.zeros_like(s), torch.exp(s - L))
        gvs.append(p.mT @ g)
        ds = p * (g @ vb.mT - D)
        gq = gq + ds @ kb
        gks.append(ds.mT @ qs)
    gq = gq / math.sqrt(d)
    return gq.to(q.dtype), torch.cat(gks, -2).to(k.dtype), torch.cat(gvs, -2).to(v.dtype)


ENTRIES = [
    Entry("softmax_backward", "wrong", "row-sum-no-keepdim", "Sums g * p over the last axis without keepdim, so the row term broadcasts against the wrong axis (or fails).", sb_no_keepdim),
    Entry("softmax_backward", "wrong", "forgets-outer-p", "Returns g - rowsum(g * p), forgetting to multiply by p.", sb_forgets_outer_p),
    Entry("softmax_backward", "wrong", "row-term-dim0", "Computes the row term rowsum(g * p) over dim 0 instead of the last dim.", sb_wrong_dim),
    Entry("softmax_backward", "wrong", "diagonal-only", "Uses only the Jacobian's diagonal, p (1 - p) g, dropping the -p p^T off-diagonal terms.", sb_diagonal_only),
    Entry("softmax_backward", "wrong", "global-sum", "Sums g * p over the whole tensor instead of per row.", sb_global_sum),
    Entry("softmax_backward", "wrong", "sign-flipped", "Writes p * (rowsum(g * p) - g), the negative of the gradient.", sb_sign),
    Entry("softmax_backward", "right", "explicit-jacobian", None, sb_jacobian),
    Entry("softmax_backward", "right", "einsum-addcmul", None, sb_einsum),
    Entry("attention_backward", "wrong", "grad-k-unscaled", "Forgets the 1/sqrt(d) factor in grad_k (grad_q has it).", ab_grad_k_unscaled),
    Entry("attention_backward", "wrong", "grad-v-no-transpose", "Computes grad_v = p @ grad_out instead of p^T @ grad_out.", ab_grad_v_untransposed),
    Entry("attention_backward", "wrong", "top-left-causal", "Builds the causal mask top-left (tril(0)) instead of bottom-right when N_q != N_k.", ab_top_left),
    Entry("attention_backward", "wrong", "nan-empty-rows", "Uses a plain softmax, so query rows with no visible key give NaN gradients instead of none.", ab_nan_rows),
    Entry("attention_backward", "wrong", "no-row-term", "Computes grad_s = p * grad_p, forgetting to subtract rowsum(grad_p * p).", ab_no_row_term),
    Entry("attention_backward", "wrong", "grad-k-uses-k", "Copy-paste slip: multiplies grad_s^T by k instead of q when forming grad_k.", ab_grad_k_uses_k),
    Entry("attention_backward", "wrong", "uses-autograd", "Differentiates with torch.autograd.grad instead of computing the gradients explicitly, which the exercise forbids.", ab_autograd),
    Entry("attention_backward", "wrong", "float32-result", "Computes in float32 and returns float32 gradients instead of the inputs' dtype.", ab_float32_result),
    Entry("attention_backward", "right", "einsum-float64", None, ab_einsum64),
    Entry("attention_backward", "right", "jacobian-rows", None, ab_jacobian_rows),
    Entry("attention_backward_flops", "wrong", "ignores-recompute", "Always counts the recomputation (10 N^2 d), ignoring recompute=False.", abf_ignores_recompute),
    Entry("attention_backward_flops", "wrong", "recompute-whole-forward", "Counts the recomputation as the whole forward (4 N^2 d) instead of only q k^T (2 N^2 d).", abf_recompute_whole_forward),
    Entry("attention_backward_flops", "wrong", "multiply-adds", "Counts multiply-adds (N^2 d per product) instead of FLOPs (2 N^2 d per product).", abf_macs),
    Entry("attention_backward_flops", "wrong", "float-ratio", "Multiplies the forward count by 2.5, returning a float instead of an int.", abf_float_ratio),
    Entry("attention_backward_flops", "wrong", "inverted-flag", "Adds the recomputation when recompute is False instead of when it is True.", abf_inverted_flag),
    Entry("attention_backward_flops", "wrong", "three-products", "Counts three backward products (forgets grad_p = grad_out v^T): 6 N^2 d instead of 8 N^2 d.", abf_three_products),
    Entry("attention_backward_flops", "right", "product-shapes", None, abf_product_list),
    Entry("attention_backward_flops", "right", "forward-multiple", None, abf_forward_multiple),
    Entry("flash_attention_backward", "wrong", "block-local-delta", "Computes the row term from each block alone (rowsum(grad_p * p) over the block) instead of delta = rowsum(grad_out * out) over all keys.", fab_block_delta),
    Entry("flash_attention_backward", "wrong", "unscaled-recompute", "Recomputes the block scores as q k^T without the 1/sqrt(d) scale before exp(s - lse).", fab_unscaled_scores),
    Entry("flash_attention_backward", "wrong", "nan-empty-rows", "Uses exp(s - lse) with lse = -inf on rows with no visible key, giving exp(-inf + inf) = NaN.", fab_nan_empty_rows),
    Entry("flash_attention_backward", "wrong", "top-left-causal", "Aligns the causal mask top-left (key j <= query i) instead of bottom-right.", fab_top_left),
    Entry("flash_attention_backward", "wrong", "grad-q-overwritten", "Overwrites grad_q with each block's contribution instead of accumulating over the key blocks.", fab_overwrites_grad_q),
    Entry("flash_attention_backward", "wrong", "block-softmax", "Recomputes each block's probabilities with a softmax over the block instead of exp(s - lse).", fab_block_softmax),
    Entry("flash_attention_backward", "right", "two-level-tiles", None, fab_two_level_tiles),
    Entry("flash_attention_backward", "right", "key-block-lists", None, fab_key_blocks_lists),
]
