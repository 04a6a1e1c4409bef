"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================================ merge_attention_states
# ---------------------------------------------------------------------------- wrong
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    ea = torch.exp(la)
    eb = torch.exp(lb)
    tot = ea + eb
    lse = torch.log(tot)
    out = (ea[..., None] * out_a.to(ct) + eb[..., None] * out_b.to(ct)) / tot[..., None]
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_inf_guard(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(a, b)
    wa = torch.exp(a - m)
    wb = torch.exp(b - m)
    s = wa + wb
    lse = m + torch.log(s)
    s_safe = torch.where(s == 0, torch.ones_like(s), s)
    out = (wa / s_safe).unsqueeze(-1) * out_a.to(compute) \
        + (wb / s_safe).unsqueeze(-1) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(dt)
    lb = lse_b.to(dt)
    new_lse = torch.maximum(la, lb)
    ref = torch.where(torch.isinf(new_lse), torch.zeros_like(new_lse), new_lse)
    alpha = torch.exp(la - ref)
    beta = torch.exp(lb - ref)
    norm = alpha + beta
    norm = torch.where(norm == 0, torch.ones_like(norm), norm)
    merged = (alpha / norm)[..., None] * out_a.to(dt) + (beta / norm)[..., None] * out_b.to(dt)
    return merged.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(f), lse_b.to(f)
    top = torch.maximum(la, lb)
    top = top.masked_fill(torch.isinf(top), 0.0)
    wa = torch.exp(la - top)
    wb = torch.exp(lb - top)
    lse = top + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(f) + wb[..., None] * out_b.to(f)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    big = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(big), torch.zeros_like(big), big)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    total = wa + wb
    lse = shift + torch.log(total)
    total = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / total) * out_a.to(compute) + (wb / total) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    lse_a, lse_b = lse_a.to(work), lse_b.to(work)
    hi = torch.maximum(lse_a, lse_b)
    hi = torch.where(torch.isinf(hi), 0.0, hi)
    w_a = torch.exp(lse_a - hi)
    w_b = torch.exp(lse_b - hi)
    z = w_a + w_b
    lse = hi + torch.log(z)
    z = torch.where(z == 0, 1.0, z)
    out = (w_a / z)[..., None] * out_a.to(work) + (w_b / z)[..., None] * out_b.to(work)
    return out, lse


# ---------------------------------------------------------------------------- right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la = lse_a.double()
    lb = lse_b.double()
    lse = torch.logaddexp(la, lb)  # -inf when both are -inf
    empty = torch.isneginf(lse)
    denom = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(la), torch.exp(la - denom))
    wb = torch.where(empty, torch.zeros_like(lb), torch.exp(lb - denom))
    out = torch.einsum("...q,...qd->...qd", wa, out_a.double()) \
        + torch.einsum("...q,...qd->...qd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    both = torch.stack([lse_a.to(ct), lse_b.to(ct)], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(both, dim=-1)
    mix = torch.nan_to_num(torch.softmax(both, dim=-1), nan=0.0)  # (..., N_q, 2)
    outs = torch.stack([out_a.to(ct), out_b.to(ct)], dim=-2)  # (..., N_q, 2, d_v)
    out = (mix.unsqueeze(-1) * outs).sum(dim=-2)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================================ online_softmax_attention
# ---------------------------------------------------------------------------- wrong
def online_causal_top_left(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    rows = torch.arange(nq)[:, None]
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb = k[:, :, s0:s1].to(ct)
        vb = v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-1, -2)
        if causal:
            cols = torch.arange(s0, s1)[None, :]
            sc = sc.masked_fill(cols > rows, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(sc - sh)
        alpha = torch.exp(m - sh)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m = m_new
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def online_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(cdt) * d ** -0.5
    run_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=cdt)
    run_sum = torch.zeros((batch, heads, n_q, 1), dtype=cdt)
    acc = torch.zeros((batch, heads, n_q, d), dtype=cdt)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = torch.matmul(qf, k[:, :, start:stop].to(cdt).transpose(-2, -1))
        if causal:
            kpos = torch.arange(start, stop)[None, :]
            s = s.masked_fill(kpos > qpos, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), 0.0, new_max)
        e = torch.exp(s - safe)
        corr = torch.exp(run_max - safe)
        run_sum = run_sum * corr + e.sum(dim=-1, keepdim=True)
        acc = acc + e @ v[:, :, start:stop].to(cdt)
        run_max = new_max
    out = acc / torch.where(run_sum == 0, 1.0, run_sum)
    return out.to(q.dtype)


def online_no_empty_row_guard(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) / math.sqrt(d)
    mx = q.new_full((b, h, nq, 1), -math.inf, dtype=dt)
    den = q.new_zeros((b, h, nq, 1), dtype=dt)
    num = q.new_zeros((b, h, nq, d), dtype=dt)
    qi = torch.arange(nq).unsqueeze(1) + nk - nq
    for j in range(0, nk, block_size):
        kk = k[..., j:j + block_size, :].to(dt)
        vv = v[..., j:j + block_size, :].to(dt)
        sc = qq @ kk.transpose(-2, -1)
        if causal:
            kj = torch.arange(j, j + kk.shape[-2]).unsqueeze(0)
            sc = sc.masked_fill(kj > qi, -math.inf)
        mnew = torch.maximum(mx, sc.amax(dim=-1, keepdim=True))
        p = torch.exp(sc - mnew)
        r = torch.exp(mx - mnew)
        den = den * r + p.sum(dim=-1, keepdim=True)
        num = num * r + p @ vv
        mx = mnew
    return (num / den).to(q.dtype)


def online_no_scale(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ctype = torch.promote_types(q.dtype, torch.float32)
    qc = q.to(ctype)
    m_i = torch.full((B, H, Nq, 1), -math.inf, dtype=ctype)
    l_i = torch.zeros((B, H, Nq, 1), dtype=ctype)
    o_i = torch.zeros((B, H, Nq, D), dtype=ctype)
    q_idx = torch.arange(Nq)[:, None] + (Nk - Nq)
    for lo in range(0, Nk, block_size):
        hi = min(lo + block_size, Nk)
        s_ij = torch.einsum("bhqd,bhkd->bhqk", qc, k[:, :, lo:hi].to(ctype))
        if causal:
            s_ij = s_ij.masked_fill(torch.arange(lo, hi)[None, :] > q_idx, -math.inf)
        m_new = torch.maximum(m_i, s_ij.amax(-1, keepdim=True))
        m_safe = m_new.masked_fill(torch.isinf(m_new), 0.0)
        p_ij = torch.exp(s_ij - m_safe)
        scale_old = torch.exp(m_i - m_safe)
        l_i = scale_old * l_i + p_ij.sum(-1, keepdim=True)
        o_i = scale_old * o_i + torch.einsum("bhqk,bhkd->bhqd", p_ij, v[:, :, lo:hi].to(ctype))
        m_i = m_new
    return (o_i / l_i.masked_fill(l_i == 0, 1.0)).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(compute) / math.sqrt(d)
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    q_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    n_blocks = max(n_k // block_size, 1)
    for blk in range(n_blocks):
        start, stop = blk * block_size, min((blk + 1) * block_size, n_k)
        scores = q_s @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            k_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(k_pos > q_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        resc = torch.exp(row_max - shift)
        row_sum = row_sum * resc + w.sum(dim=-1, keepdim=True)
        acc = acc * resc + w @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_returns_compute_dtype(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    acc_t = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(acc_t) * (1.0 / math.sqrt(d))
    mx = torch.full((B, H, n_q, 1), -math.inf, dtype=acc_t)
    sm = torch.zeros((B, H, n_q, 1), dtype=acc_t)
    acc = torch.zeros((B, H, n_q, d), dtype=acc_t)
    qp = torch.arange(n_q)[:, None] + (n_k - n_q)
    start = 0
    while start < n_k:
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(acc_t).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qp, -math.inf)
        nm = torch.maximum(mx, s.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        p = torch.exp(s - sh)
        c = torch.exp(mx - sh)
        sm = sm * c + p.sum(dim=-1, keepdim=True)
        acc = acc * c + p @ v[:, :, start:stop].to(acc_t)
        mx = nm
        start = stop
    return acc / torch.where(sm == 0, 1.0, sm)


# ---------------------------------------------------------------------------- right
def online_running_lse_f64(q, k, v, block_size=64, causal=False):
    """Keeps a running log-sum-exp and a normalised accumulator instead of max and sum."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    qd = q.double() / math.sqrt(d)
    lse = torch.full((B, H, nq, 1), -math.inf, dtype=torch.float64)
    out = torch.zeros((B, H, nq, d), dtype=torch.float64)
    offset = nk - nq
    for s in range(0, nk, block_size):
        e = min(s + block_size, nk)
        scores = torch.einsum("bhqd,bhkd->bhqk", qd, k[:, :, s:e].double())
        if causal:
            keep = torch.arange(s, e)[None, :] <= torch.arange(nq)[:, None] + offset
            scores = torch.where(keep, scores, torch.full_like(scores, -math.inf))
        blk_lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        new_lse = torch.logaddexp(lse, blk_lse)
        dead = torch.isneginf(new_lse)
        ref = torch.where(dead, torch.zeros_like(new_lse), new_lse)
        keep_old = torch.where(dead, torch.zeros_like(lse), torch.exp(lse - ref))
        probs = torch.exp(scores - ref)
        out = out * keep_old + torch.einsum("bhqk,bhkd->bhqd", probs, v[:, :, s:e].double())
        lse = new_lse
    return out.to(q.dtype)


def online_f32_clamped(q, k, v, block_size=64, causal=False):
    nb, nh, n_q, dim = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(f) * (dim ** -0.5)
    best = torch.full((nb, nh, n_q, 1), -float("inf"), dtype=f)
    mass = torch.zeros((nb, nh, n_q, 1), dtype=f)
    acc = torch.zeros((nb, nh, n_q, dim), dtype=f)
    for kb, vb, first in zip(k.split(block_size, dim=2), v.split(block_size, dim=2),
                             range(0, n_k, block_size)):
        sc = torch.matmul(qs, kb.to(f).transpose(2, 3))
        if causal:
            last_seen = torch.arange(n_q).unsqueeze(-1) + (n_k - n_q)
            visible = torch.arange(first, first + kb.shape[2]).unsqueeze(0) <= last_seen
            sc = torch.where(visible, sc, -float("inf"))
        top = torch.max(best, sc.max(dim=-1, keepdim=True).values)
        anchor = torch.nan_to_num(top, neginf=0.0)
        ex = torch.exp(sc - anchor)
        fade = torch.exp(best - anchor)
        mass = fade * mass + ex.sum(dim=-1, keepdim=True)
        acc = fade * acc + torch.matmul(ex, vb.to(f))
        best = top
    res = acc / mass.clamp_min(torch.finfo(f).tiny)
    return res.to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_without_shift",
          "exponentiates the raw log-sum-exps without subtracting the larger one first, so an "
          "lse of 1e4 overflows to inf (and two empty sets give 0/0): the result is NaN",
          merge_no_shift),
    Entry("merge_attention_states", "wrong", "shift_by_neg_inf",
          "subtracts the larger log-sum-exp without replacing -inf by 0, so on a row where both "
          "sets are empty exp(-inf - (-inf)) is NaN instead of a zero row and -inf",
          merge_no_inf_guard),
    Entry("merge_attention_states", "wrong", "lse_is_max",
          "returns max(lse_a, lse_b) as the merged log-sum-exp, forgetting to add "
          "log(w_a + w_b): the new lse is too small whenever both sets have keys",
          merge_lse_is_max),
    Entry("merge_attention_states", "wrong", "outputs_not_renormalised",
          "mixes the outputs with exp(lse_set - max) and never divides by w_a + w_b, as if "
          "out_a and out_b were unnormalised sums: the merged rows are too large",
          merge_unnormalised),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "multiplies the per-row weights (..., N_q) straight into the outputs (..., N_q, d_v) "
          "with no trailing axis, so they line up with d_v instead of the rows and the "
          "multiplication raises a shape error",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "returns_compute_dtype",
          "returns out and lse in the float32 compute dtype instead of casting back, so "
          "float16 / bfloat16 inputs get float32 results",
          merge_keeps_float32),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked_softmax", None, merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "the causal mask compares key positions with the raw query index (top-left) instead "
          "of i + N_k - N_q, so with N_q != N_k queries see the wrong keys",
          online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum by exp(old_max - new_max) when a block raises the maximum "
          "but forgets to rescale the accumulator acc, so earlier blocks keep too much weight",
          online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "no_minus_inf_guard",
          "subtracts the running maximum without guarding -inf, so a query that sees no key "
          "(causal, N_q > N_k) gets exp(-inf + inf) = NaN instead of a zero row",
          online_no_empty_row_guard),
    Entry("online_softmax_attention", "wrong", "no_scale",
          "forgets the 1/sqrt(d) scale on the scores", online_no_scale),
    Entry("online_softmax_attention", "wrong", "ragged_block_dropped",
          "loops over n_k // block_size blocks, so the last, shorter block of keys is never "
          "visited when N_k is not a multiple of block_size",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "returns acc / row_sum in the float32 compute dtype instead of q's dtype, so float16 "
          "and bfloat16 inputs get a float32 result",
          online_returns_compute_dtype),
    Entry("online_softmax_attention", "right", "running_lse_float64", None,
          online_running_lse_f64),
    Entry("online_softmax_attention", "right", "split_blocks_clamped", None, online_f32_clamped),
]
