"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    ea = torch.exp(la)
    eb = torch.exp(lb)
    total = ea + eb
    lse = torch.log(total)
    denom = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / denom)[..., None] * out_a.to(ct) + (eb / denom)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_weights_not_normalised(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(dt), lse_b.to(dt)
    m = torch.maximum(a, b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(a - m)
    wb = torch.exp(b - m)
    lse = m + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(dt) + wb[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    lse_a_, lse_b_ = lse_a.to(f), lse_b.to(f)
    top = torch.maximum(lse_a_, lse_b_)
    w_a = torch.exp(lse_a_ - top)
    w_b = torch.exp(lse_b_ - top)
    s = w_a + w_b
    lse = top + torch.log(s)
    out = (w_a / s).unsqueeze(-1) * out_a.to(f) + (w_b / s).unsqueeze(-1) * out_b.to(f)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_not_cast_back(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    x, y = lse_a.to(work), lse_b.to(work)
    hi = torch.maximum(x, y)
    hi = torch.where(torch.isneginf(hi), 0.0, hi)
    px, py = torch.exp(x - hi), torch.exp(y - hi)
    tot = px + py
    new_lse = hi + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    merged = (px / tot)[..., None] * out_a.to(work) + (py / tot)[..., None] * out_b.to(work)
    return merged, new_lse


def merge_out_a_twice(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    l1, l2 = lse_a.to(c), lse_b.to(c)
    mx = torch.maximum(l1, l2)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    e1, e2 = torch.exp(l1 - mx), torch.exp(l2 - mx)
    z = e1 + e2
    lse = mx + torch.log(z)
    z = torch.where(z == 0, 1.0, z)
    oa, ob = out_a.to(c), out_b.to(c)
    out = (e1 / z)[..., None] * oa + (e2 / z)[..., None] * oa
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_softmax_wrong_dim(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    both = torch.stack([lse_a.to(c), lse_b.to(c)], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(both, dim=-1)
    w = torch.softmax(both, dim=-2)
    w = torch.nan_to_num(w, nan=0.0)
    out = w[..., 0:1] * out_a.to(c) + w[..., 1:2] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    a = lse_a.to(torch.float64)
    b = lse_b.to(torch.float64)
    lse = torch.logaddexp(a, b)
    empty = torch.isneginf(lse)
    safe_lse = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(a), torch.exp(a - safe_lse))
    wb = torch.where(empty, torch.zeros_like(b), torch.exp(b - safe_lse))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    lses = torch.stack((lse_a, lse_b), dim=0).to(dt)  # (2, ..., N_q)
    outs = torch.stack((out_a, out_b), dim=0).to(dt)  # (2, ..., N_q, d_v)
    lse = torch.logsumexp(lses, dim=0)
    weights = torch.softmax(lses, dim=0)
    weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
    out = (weights.unsqueeze(-1) * outs).sum(dim=0)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for j in range(0, nk, block_size):
        kb = k[:, :, j:j + block_size].to(ct)
        vb = v[:, :, j:j + block_size].to(ct)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            kpos = torch.arange(j, j + kb.shape[2])[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - shift)
        corr = torch.exp(m - shift)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    out = acc / torch.where(l == 0, 1.0, l)
    return out.to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    q32 = q.to(dt) * (1.0 / math.sqrt(d))
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    acc = torch.zeros((b, h, n_q, d), dtype=dt)
    rows = torch.arange(n_q)[:, None]
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q32 @ k[:, :, start:stop].to(dt).transpose(-2, -1)
        if causal:
            cols = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, scores.amax(dim=-1, keepdim=True))
        ref = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - ref)
        scale = torch.exp(run_max - ref)
        run_sum = run_sum * scale + w.sum(dim=-1, keepdim=True)
        acc = acc * scale + w @ v[:, :, start:stop].to(dt)
        run_max = new_max
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


def online_no_scale(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(f)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=f)
    den = torch.zeros((B, H, Nq, 1), dtype=f)
    num = torch.zeros((B, H, Nq, D), dtype=f)
    qi = torch.arange(Nq).unsqueeze(1) + Nk - Nq
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = torch.matmul(qf, k[:, :, s0:s1].to(f).transpose(-2, -1))
        if causal:
            kj = torch.arange(s0, s1).unsqueeze(0)
            sc = sc.masked_fill(kj > qi, -math.inf)
        m2 = torch.maximum(mx, sc.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(m2), torch.zeros_like(m2), m2)
        e = torch.exp(sc - sh)
        r = torch.exp(mx - sh)
        den = den * r + e.sum(dim=-1, keepdim=True)
        num = num * r + torch.matmul(e, v[:, :, s0:s1].to(f))
        mx = m2
    return (num / torch.where(den == 0, torch.ones_like(den), den)).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(compute) / math.sqrt(d)
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    n_blocks = max(n_k // block_size, 1)
    for blk in range(n_blocks):
        start, stop = blk * block_size, min((blk + 1) * block_size, n_k)
        kb = k[:, :, start:stop].to(compute)
        vb = v[:, :, start:stop].to(compute)
        s = qq @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        p = torch.exp(s - shift)
        alpha = torch.exp(row_max - shift)
        row_sum = row_sum * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ vb
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    o = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        corr = torch.exp(m - m_new)
        l = corr * l + p.sum(-1, keepdim=True)
        o = corr * o + p @ v[:, :, start:stop].to(ct)
        m = m_new
    return (o / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_rescale_sign_flipped(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(dt) / math.sqrt(d)
    best = torch.full((B, H, n_q, 1), -math.inf, dtype=dt)
    norm = torch.zeros((B, H, n_q, 1), dtype=dt)
    acc = torch.zeros((B, H, n_q, d), dtype=dt)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(dt).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_best = torch.maximum(best, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_best), 0.0, new_best)
        old = torch.where(torch.isinf(best), 0.0, best)
        p = torch.exp(s - shift)
        fix = torch.where(torch.isinf(best), 0.0, torch.exp(shift - old))
        norm = norm * fix + p.sum(dim=-1, keepdim=True)
        acc = acc * fix + p @ v[:, :, start:stop].to(dt)
        best = new_best
    return (acc / torch.where(norm == 0, 1.0, norm)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Each key block gives its own (out, lse); merge them into the running pair."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    run_out = torch.zeros((b, h, n_q, d), dtype=torch.float64)
    run_lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, lo:hi].double())
        if causal:
            visible = (torch.arange(lo, hi)[None, :]
                       <= torch.arange(n_q)[:, None] + (n_k - n_q))
            s = torch.where(visible, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)
        safe = torch.where(torch.isneginf(blk_lse), torch.zeros_like(blk_lse), blk_lse)
        p = torch.exp(s - safe[..., None])
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, lo:hi].double())
        new_lse = torch.logaddexp(run_lse, blk_lse)
        safe_new = torch.where(torch.isneginf(new_lse), torch.zeros_like(new_lse), new_lse)
        w_run = torch.exp(run_lse - safe_new)
        w_blk = torch.exp(blk_lse - safe_new)
        run_out = w_run[..., None] * run_out + w_blk[..., None] * blk_out
        run_lse = new_lse
    return run_out.to(q.dtype)


def online_einsum_f64(q, k, v, block_size=64, causal=False):
    n_q, d = q.shape[2], q.shape[3]
    n_k = k.shape[2]
    qd = q.to(torch.float64)
    m_i = torch.full(q.shape[:3], -math.inf, dtype=torch.float64)
    l_i = torch.zeros(q.shape[:3], dtype=torch.float64)
    o_i = torch.zeros(q.shape, dtype=torch.float64)
    offset = n_k - n_q
    for first in range(0, n_k, block_size):
        kk = k[:, :, first:first + block_size].to(torch.float64)
        vv = v[:, :, first:first + block_size].to(torch.float64)
        sc = torch.einsum("bhid,bhjd->bhij", qd, kk) / math.sqrt(d)
        if causal:
            j = torch.arange(first, first + kk.shape[2])
            i = torch.arange(n_q)
            sc = sc.masked_fill(j[None, :] - i[:, None] > offset, -math.inf)
        m_blk = sc.max(dim=-1).values
        m_new = torch.maximum(m_i, m_blk)
        ref = torch.nan_to_num(m_new, neginf=0.0)
        p = torch.exp(sc - ref[..., None])
        alpha = torch.exp(m_i - ref)
        l_i = alpha * l_i + p.sum(dim=-1)
        o_i = alpha[..., None] * o_i + torch.einsum("bhij,bhjd->bhid", p, vv)
        m_i = m_new
    l_safe = torch.where(l_i > 0, l_i, torch.ones_like(l_i))
    return (o_i / l_safe[..., None]).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "no_max_shift",
          "exponentiates the log-sum-exps directly (exp(lse_a), exp(lse_b)) without subtracting "
          "the larger one first, so lse of about 1e4 overflows to inf and the result is NaN",
          merge_no_shift),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "mixes the outputs with exp(lse - max) instead of exp(lse - merged lse): the weights "
          "are never divided by their sum, so rows where both sets contribute come out too large",
          merge_weights_not_normalised),
    Entry("merge_attention_states", "wrong", "no_both_empty_guard",
          "subtracts the maximum log-sum-exp even when it is -inf, so a row where both sets are "
          "empty computes exp(-inf - (-inf)) = NaN instead of a zero row and -inf",
          merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "not_cast_back",
          "returns the float32 working tensors: out and lse are never cast back to the inputs' "
          "dtype, so float16 / bfloat16 inputs get float32 results",
          merge_not_cast_back),
    Entry("merge_attention_states", "wrong", "out_a_reused",
          "copy-paste slip: set B's weight multiplies out_a again instead of out_b, so B's "
          "output never enters the merge",
          merge_out_a_twice),
    Entry("merge_attention_states", "wrong", "softmax_over_queries",
          "stacks the two log-sum-exps on a last axis but takes the softmax over dim=-2, the "
          "query axis, so the weights of each row are normalised across queries, not across "
          "the two sets",
          merge_softmax_wrong_dim),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked_softmax", None, merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum by exp(old_max - new_max) but not the accumulator, so "
          "when a later block raises the maximum the earlier blocks' values keep too large "
          "a weight",
          online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "the causal mask compares key index with query index directly (key > query), "
          "aligned top-left instead of bottom-right, so with N_q != N_k queries see the wrong "
          "keys",
          online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "no_sqrt_d_scale",
          "the scores q k^T are never divided by sqrt(d)",
          online_no_scale),
    Entry("online_softmax_attention", "wrong", "floor_block_count",
          "loops over n_k // block_size blocks, so the ragged last block of keys (when "
          "block_size does not divide N_k) is never visited",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "no_minus_inf_guard",
          "subtracts the running max even while it is still -inf (a row whose keys so far are "
          "all masked), so exp(-inf - (-inf)) gives NaN that spreads through the row",
          online_no_inf_guard),
    Entry("online_softmax_attention", "wrong", "rescale_sign_flipped",
          "the correction factor is exp(new_max - old_max) instead of exp(old_max - new_max): "
          "when the max grows, the old sum and accumulator are enlarged instead of shrunk",
          online_rescale_sign_flipped),
    Entry("online_softmax_attention", "right", "merge_block_states_f64", None,
          online_merge_block_states),
    Entry("online_softmax_attention", "right", "einsum_running_max_f64", None,
          online_einsum_f64),
]
