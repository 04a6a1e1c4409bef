"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================== merge_attention_states
def merge_nan_both_empty(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(f), lse_b.to(f)
    m = torch.maximum(la, lb)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    tot = wa + wb
    lse = m + torch.log(tot)
    tot = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / tot)[..., None] * out_a.to(f) + (wb / tot)[..., None] * out_b.to(f)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    a = lse_a.to(work)
    b = lse_b.to(work)
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    ea, eb = torch.exp(a - top), torch.exp(b - top)
    s = ea + eb
    lse = top + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    out = (ea / s) * out_a.to(work) + (eb / s) * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(dt))
    eb = torch.exp(lse_b.to(dt))
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe).unsqueeze(-1) * out_a.to(dt) + (eb / safe).unsqueeze(-1) * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_forgets_cast_back(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    hi = torch.maximum(la, lb)
    hi = hi.masked_fill(torch.isinf(hi), 0.0)
    wa, wb = torch.exp(la - hi), torch.exp(lb - hi)
    z = wa + wb
    lse = hi + torch.log(z)
    z = z.masked_fill(z == 0, 1.0)
    out = (wa / z)[..., None] * out_a.to(c) + (wb / z)[..., None] * out_b.to(c)
    return out, lse


def merge_out_a_twice(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    wa, wb = torch.exp(la - mx), torch.exp(lb - mx)
    tot = wa + wb
    lse = mx + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    oa = out_a.to(c)
    ob = out_b.to(c)
    out = (wa / tot)[..., None] * oa + (wb / tot)[..., None] * oa
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    wa, wb = torch.exp(la - mx), torch.exp(lb - mx)
    lse = mx + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)
    empty = torch.isneginf(lse)
    ref = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(a), torch.exp(a - ref))
    wb = torch.where(empty, torch.zeros_like(b), torch.exp(b - ref))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a, lse_b]).to(torch.float64)  # (2, ..., N_q)
    outs = torch.stack([out_a, out_b]).to(torch.float64)  # (2, ..., N_q, d_v)
    total = torch.logsumexp(lses, dim=0)
    share = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)
    merged = torch.einsum("s...,s...d->...d", share, outs)
    return merged.to(out_a.dtype), total.to(lse_a.dtype)


# ============================================================== online_softmax_attention
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - shift)
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    run_max = torch.full((B, H, nq, 1), float("-inf"), dtype=ct)
    run_sum = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    rows = torch.arange(nq)[:, None]
    for lo in range(0, nk, block_size):
        hi = min(lo + block_size, nk)
        s = qs @ k[:, :, lo:hi].to(ct).transpose(-1, -2)
        if causal:
            cols = torch.arange(lo, hi)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        new = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        e = torch.exp(s - safe)
        r = torch.exp(run_max - safe)
        run_sum = run_sum * r + e.sum(dim=-1, keepdim=True)
        acc = acc * r + e @ v[:, :, lo:hi].to(ct)
        run_max = new
    den = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (acc / den).to(q.dtype)


def online_nan_on_empty_rows(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    mx = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    sm = torch.zeros((B, H, nq, 1), dtype=ct)
    o = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + nk - nq
    for a in range(0, nk, block_size):
        b = min(a + block_size, nk)
        s = qs @ k[:, :, a:b].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        mnew = torch.maximum(mx, s.amax(-1, keepdim=True))
        p = torch.exp(s - mnew)
        corr = torch.exp(mx - mnew)
        sm = sm * corr + p.sum(-1, keepdim=True)
        o = o * corr + p @ v[:, :, a:b].to(ct)
        mx = mnew
    return (o / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_full_block_positions(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    mx = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    sm = torch.zeros((B, H, nq, 1), dtype=ct)
    o = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for a in range(0, nk, block_size):
        kb = k[:, :, a:a + block_size].to(ct)
        vb = v[:, :, a:a + block_size].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(a, a + block_size)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        mnew = torch.maximum(mx, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(mnew), 0.0, mnew)
        p = torch.exp(s - shift)
        corr = torch.exp(mx - shift)
        sm = sm * corr + p.sum(-1, keepdim=True)
        o = o * corr + p @ vb
        mx = mnew
    return (o / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_scale_by_length(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(q.shape[-2])
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=ct)
    acc = torch.zeros((batch, heads, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(s - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + w.sum(-1, keepdim=True)
        acc = acc * r + w @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=ct)
    acc = torch.zeros((batch, heads, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(s - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + w.sum(-1, keepdim=True)
        acc = acc * r + w @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return acc / torch.where(row_sum == 0, 1.0, row_sum)


def online_merge_block_states(q, k, v, block_size=64, causal=False):
    # each key block gives its own (out, lse); fold them together in float64
    B, H, nq, d = q.shape
    nk = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((B, H, nq, d), dtype=torch.float64)
    lse = torch.full((B, H, nq), -math.inf, dtype=torch.float64)
    offset = nk - nq
    for lo in range(0, nk, block_size):
        hi = min(lo + block_size, nk)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, lo:hi].double())
        if causal:
            qi = torch.arange(nq).unsqueeze(1)
            kj = torch.arange(lo, hi).unsqueeze(0)
            s = torch.where(kj <= qi + offset, s, torch.tensor(-math.inf, dtype=s.dtype))
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf where the block is all masked
        blk_p = torch.nan_to_num(torch.exp(s - blk_lse.unsqueeze(-1)), nan=0.0)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", blk_p, v[:, :, lo:hi].double())
        new_lse = torch.logaddexp(lse, blk_lse)
        ok = torch.isfinite(new_lse)
        ref = torch.where(ok, new_lse, torch.zeros_like(new_lse))
        w_old = torch.where(ok, torch.exp(lse - ref), torch.zeros_like(lse))
        w_blk = torch.where(ok, torch.exp(blk_lse - ref), torch.zeros_like(lse))
        out = w_old.unsqueeze(-1) * out + w_blk.unsqueeze(-1) * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_lazy_float64(q, k, v, block_size=64, causal=False):
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    Q = q.to(torch.float64)
    m = None
    den = None
    num = None
    for j0 in range(0, n_k, block_size):
        j1 = min(n_k, j0 + block_size)
        S = torch.matmul(Q, k[..., j0:j1, :].to(torch.float64).transpose(-1, -2)) / d ** 0.5
        if causal:
            allowed = (torch.arange(j0, j1)[None, :] - torch.arange(n_q)[:, None]) <= (n_k - n_q)
            S = S.masked_fill(~allowed, -math.inf)
        blk = S.max(dim=-1, keepdim=True).values
        if m is None:
            m = blk
            mm = torch.where(torch.isinf(m), torch.zeros_like(m), m)
            P = torch.exp(S - mm)
            den = P.sum(-1, keepdim=True)
            num = torch.matmul(P, v[..., j0:j1, :].to(torch.float64))
            continue
        m2 = torch.maximum(m, blk)
        mm = torch.where(torch.isinf(m2), torch.zeros_like(m2), m2)
        P = torch.exp(S - mm)
        scale = torch.exp(m - mm)
        den = den * scale + P.sum(-1, keepdim=True)
        num = num * scale + torch.matmul(P, v[..., j0:j1, :].to(torch.float64))
        m = m2
    den = torch.where(den > 0, den, torch.ones_like(den))
    return (num / den).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "nan_when_both_empty",
          "the shift is the larger log-sum-exp even when both are -inf, so exp(-inf - (-inf)) "
          "gives NaN on a row where both sets are empty instead of zeros and -inf",
          merge_nan_both_empty),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "the per-row weights (..., N_q) are multiplied into the (..., N_q, d_v) outputs "
          "without `[..., None]`, so they line up with d_v instead of the rows (a broadcasting "
          "error here)",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "exp_without_max_shift",
          "exponentiates the raw log-sum-exps, exp(lse_a) + exp(lse_b), with no max subtracted: "
          "overflows to inf (and NaN) for lse of about 1e4",
          merge_naive_exp),
    Entry("merge_attention_states", "wrong", "returns_float32_working_copy",
          "computes in float32 but returns the working tensors without casting back, so "
          "half-precision inputs come back as float32 instead of the inputs' dtypes",
          merge_forgets_cast_back),
    Entry("merge_attention_states", "wrong", "out_a_used_twice",
          "the second term multiplies B's weight into out_a again instead of out_b",
          merge_out_a_twice),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "mixes the outputs with exp(lse_set - max) without dividing by their sum, so the "
          "merged output is not a weighted average (the lse is right)",
          merge_unnormalised),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stack_softmax_einsum", None, merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "when a block raises the running max, row_sum is rescaled by exp(old - new) but the "
          "accumulator acc is not",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "the causal mask compares key j with query i directly (j > i) instead of aligning "
          "bottom-right (j > i + N_k - N_q), wrong whenever N_q != N_k",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "no_guard_for_all_masked_rows",
          "no guard for a row whose running max is still -inf: exp(-inf - (-inf)) is NaN, so "
          "causal rows with no visible key give NaN instead of zeros",
          online_nan_on_empty_rows),
    Entry("online_softmax_attention", "wrong", "ragged_block_positions",
          "the key positions of the causal mask assume every block is full "
          "(arange(start, start + block_size)), so the shorter last block raises a shape error",
          online_full_block_positions),
    Entry("online_softmax_attention", "wrong", "scale_by_sequence_length",
          "scales the scores by 1/sqrt(q.shape[-2]), the number of queries, instead of "
          "1/sqrt(d) (the head width q.shape[-1])",
          online_scale_by_length),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "accumulates in float32 as asked but never casts the result back to q's dtype, so "
          "float16/bfloat16 queries get a float32 output",
          online_returns_float32),
    Entry("online_softmax_attention", "right", "merge_block_lse_float64", None,
          online_merge_block_states),
    Entry("online_softmax_attention", "right", "lazy_init_float64", None, online_lazy_float64),
]
