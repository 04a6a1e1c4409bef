"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------------------- merge_attention_states
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    wa = torch.exp(lse_a.to(ct))
    wb = torch.exp(lse_b.to(ct))
    tot = wa + wb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe)[..., None] * out_a.to(ct) + (wb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    ea, eb = torch.exp(la - m), torch.exp(lb - m)
    s = ea + eb
    s_safe = torch.where(s == 0, torch.ones_like(s), s)
    out = (ea / s_safe) * out_a.to(compute) + (eb / s_safe) * out_b.to(compute)
    return out.to(out_a.dtype), (m + torch.log(s)).to(lse_a.dtype)


def merge_nan_both_empty(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(la, lb)
    wa = torch.exp(la - top)
    wb = torch.exp(lb - top)
    total = wa + wb
    lse = top + torch.log(total)
    out = (wa / total).unsqueeze(-1) * out_a.to(compute) + (wb / total).unsqueeze(-1) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_forgets_max(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(c), lse_b.to(c)
    mx = torch.maximum(a, b)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    w1 = torch.exp(a - mx)
    w2 = torch.exp(b - mx)
    z = w1 + w2
    new_lse = torch.log(z)
    z = torch.where(z == 0, 1.0, z)
    merged = (w1 / z)[..., None] * out_a.to(c) + (w2 / z)[..., None] * out_b.to(c)
    return merged.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_returns_float32(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(work)
    lb = lse_b.to(work)
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    pa, pb = torch.exp(la - hi), torch.exp(lb - hi)
    norm = pa + pb
    lse = hi + torch.log(norm)
    norm = torch.where(norm == 0, torch.ones_like(norm), norm)
    out = (pa / norm)[..., None] * out_a.to(work) + (pb / norm)[..., None] * out_b.to(work)
    return out, lse


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), 0.0, m)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    lse = m + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(ct) + wb[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la = lse_a.double()
    lb = lse_b.double()
    lse = torch.logaddexp(la, lb)
    empty = torch.isneginf(lse)
    ref = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(la), torch.exp(la - ref))
    wb = torch.where(empty, torch.zeros_like(lb), torch.exp(lb - ref))
    out = torch.einsum("...q,...qd->...qd", wa, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    # the share of set A is sigmoid(lse_a - lse_b); handle empty sets by hand
    dt = torch.float64
    a, b = lse_a.to(dt), lse_b.to(dt)
    both_empty = torch.isneginf(a) & torch.isneginf(b)
    diff = torch.where(both_empty, torch.zeros_like(a), a - b)
    share_a = torch.sigmoid(diff)
    share_a = torch.where(both_empty, torch.zeros_like(share_a), share_a)
    share_b = torch.where(both_empty, torch.zeros_like(share_a), 1.0 - share_a)
    big = torch.maximum(a, b)
    small = torch.minimum(a, b)
    gap = torch.where(torch.isneginf(small), torch.full_like(a, -math.inf), small - big)
    lse = torch.where(both_empty, big, big + torch.log1p(torch.exp(gap)))
    out = share_a.unsqueeze(-1) * out_a.to(dt) + share_b.unsqueeze(-1) * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ----------------------------------------------------------------------------- online_softmax_attention
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + nk - nq
    for s in range(0, nk, block_size):
        e = min(s + block_size, nk)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s:e].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_topleft_causal(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(compute) * d ** -0.5
    row_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    rows = torch.arange(n_q)[:, None]
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q_ @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            cols = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + w.sum(dim=-1, keepdim=True)
        acc = acc * r + w @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) / math.sqrt(d)
    mx = torch.full((b, h, n_q, 1), -math.inf, dtype=dt)
    den = torch.zeros((b, h, n_q, 1), dtype=dt)
    num = torch.zeros((b, h, n_q, d), dtype=dt)
    offset = n_k - n_q
    n_blocks = max(n_k // block_size, 1)
    for blk in range(n_blocks):
        lo, hi = blk * block_size, min((blk + 1) * block_size, n_k)
        s = qq @ k[:, :, lo:hi].to(dt).transpose(-2, -1)
        if causal:
            keep = torch.arange(lo, hi)[None, :] <= torch.arange(n_q)[:, None] + offset
            s = s.masked_fill(~keep, -math.inf)
        cur = torch.maximum(mx, s.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(cur), 0.0, cur)
        e = torch.exp(s - base)
        fix = torch.exp(mx - base)
        den = den * fix + e.sum(-1, keepdim=True)
        num = num * fix + e @ v[:, :, lo:hi].to(dt)
        mx = cur
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def online_nan_empty_rows(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(D)
    run_max = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    run_sum = torch.zeros((B, H, Nq, 1), dtype=ct)
    acc = torch.zeros((B, H, Nq, D), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for start in range(0, Nk, block_size):
        stop = min(start + block_size, Nk)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(run_max, s.amax(-1, keepdim=True))
        p = torch.exp(s - new_max)
        corr = torch.exp(run_max - new_max)
        run_sum = run_sum * corr + p.sum(-1, keepdim=True)
        acc = acc * corr + p @ v[:, :, start:stop].to(ct)
        run_max = new_max
    return (acc / run_sum).to(q.dtype)


def online_sum_no_keepdim(q, k, v, block_size=64, causal=False):
    bsz, nh, nq, hd = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(hd))
    m = torch.full((bsz, nh, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((bsz, nh, nq), dtype=ct)
    o = torch.zeros((bsz, nh, nq, hd), dtype=ct)
    qpos = torch.arange(nq)[:, None] + nk - nq
    for j in range(0, nk, block_size):
        kb = k[:, :, j:j + block_size].to(ct)
        vb = v[:, :, j:j + block_size].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[2])[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - sh)
        alpha = torch.exp(m - sh)
        l = l * alpha[..., 0] + p.sum(-1)
        o = o * alpha + p @ vb
        m = m_new
    l = torch.where(l == 0, 1.0, l)
    return (o / l).to(q.dtype)


def online_returns_compute_dtype(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    q32 = q.to(f) / math.sqrt(d)
    mx = torch.full((b, h, n_q, 1), -math.inf, dtype=f)
    sm = torch.zeros((b, h, n_q, 1), dtype=f)
    acc = torch.zeros((b, h, n_q, d), dtype=f)
    qp = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    for st in range(0, n_k, block_size):
        en = min(n_k, st + block_size)
        sc = q32 @ k[:, :, st:en].to(f).transpose(2, 3)
        if causal:
            sc = sc.masked_fill(torch.arange(st, en).unsqueeze(0) > qp, -math.inf)
        nm = torch.maximum(mx, sc.amax(3, keepdim=True))
        shift = torch.where(torch.isinf(nm), 0.0, nm)
        w = torch.exp(sc - shift)
        resc = torch.exp(mx - shift)
        sm = sm * resc + w.sum(3, keepdim=True)
        acc = acc * resc + w @ v[:, :, st:en].to(f)
        mx = nm
    return acc / torch.where(sm == 0, 1.0, sm)


def online_lse_merge_f64(q, k, v, block_size=64, causal=False):
    # keep the running state as (normalised output, log-sum-exp) and merge block by block
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    qd = q.double()
    out = torch.zeros((B, H, Nq, D), dtype=torch.float64)
    lse = torch.full((B, H, Nq), -math.inf, dtype=torch.float64)
    qi = torch.arange(Nq).view(-1, 1) + (Nk - Nq)
    for start in range(0, Nk, block_size):
        kb = k[:, :, start:start + block_size].double()
        vb = v[:, :, start:start + block_size].double()
        s = torch.einsum("bhqd,bhkd->bhqk", qd, kb) / math.sqrt(D)
        if causal:
            kj = torch.arange(start, start + kb.shape[2]).view(1, -1)
            s = s.masked_fill(kj > qi, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        ref = torch.where(torch.isneginf(blk_lse), torch.zeros_like(blk_lse), blk_lse)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", torch.exp(s - ref[..., None]), vb)
        new_lse = torch.logaddexp(lse, blk_lse)
        safe = torch.where(torch.isneginf(new_lse), torch.zeros_like(new_lse), new_lse)
        wa = torch.where(torch.isneginf(new_lse), torch.zeros_like(lse), torch.exp(lse - safe))
        wb = torch.where(torch.isneginf(new_lse), torch.zeros_like(lse), torch.exp(blk_lse - safe))
        out = wa[..., None] * out + wb[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_per_head_loops(q, k, v, block_size=64, causal=False):
    # one (batch, head) at a time, plain float64 running statistics
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    scale = 1.0 / math.sqrt(D)
    result = torch.empty(q.shape, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            qh = q[b, h].to(torch.float64)
            m = torch.full((Nq,), -math.inf, dtype=torch.float64)
            l = torch.zeros(Nq, dtype=torch.float64)
            acc = torch.zeros((Nq, D), dtype=torch.float64)
            for start in range(0, Nk, block_size):
                kb = k[b, h, start:start + block_size].to(torch.float64)
                vb = v[b, h, start:start + block_size].to(torch.float64)
                s = torch.mm(qh, kb.t()) * scale
                if causal:
                    lim = torch.arange(Nq) + (Nk - Nq)
                    cols = torch.arange(start, start + kb.shape[0])
                    s[cols[None, :] > lim[:, None]] = -math.inf
                bm = s.max(dim=1).values
                m_new = torch.maximum(m, bm)
                finite = torch.isfinite(m_new)
                sh = torch.where(finite, m_new, torch.zeros_like(m_new))
                p = torch.exp(s - sh[:, None])
                c = torch.exp(m - sh)
                l = l * c + p.sum(dim=1)
                acc = acc * c[:, None] + torch.mm(p, vb)
                m = m_new
            denom = torch.where(l > 0, l, torch.ones_like(l))
            result[b, h] = (acc / denom[:, None]).to(q.dtype)
    return result


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_without_shift",
          "exponentiates the raw log-sum-exps without subtracting the larger one first, so "
          "exp(1e4) overflows to inf and the merged rows become NaN", merge_no_shift),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "multiplies the per-row weights (..., N_q) into out (..., N_q, d_v) without a trailing "
          "axis, so they broadcast against d_v (a shape error, or the wrong axis when the sizes "
          "happen to match)", merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "no_guard_both_empty",
          "subtracts the larger log-sum-exp even when both are -inf, so exp(-inf - (-inf)) gives "
          "NaN on rows where both sets are empty instead of a zero row and -inf",
          merge_nan_both_empty),
    Entry("merge_attention_states", "wrong", "lse_without_max",
          "returns log(w_a + w_b) as the merged log-sum-exp but forgets to add back the maximum "
          "it subtracted", merge_lse_forgets_max),
    Entry("merge_attention_states", "wrong", "returns_compute_dtype",
          "computes in float32 but never casts back: half-precision inputs get float32 out and "
          "lse instead of their own dtypes", merge_returns_float32),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "uses exp(lse_set - max) as the weights without dividing by their sum, so the merged "
          "row is not a convex combination of out_a and out_b", merge_unnormalised),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "sigmoid_share", None, merge_sigmoid),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum when the maximum grows but not the accumulator, so values "
          "of earlier blocks keep weights relative to a stale maximum", online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "aligns the causal mask top-left (key j visible when j <= i) instead of bottom-right "
          "(j <= i + N_k - N_q), wrong whenever N_q != N_k", online_topleft_causal),
    Entry("online_softmax_attention", "wrong", "drops_ragged_block",
          "loops over N_k // block_size blocks, so the last, shorter block of keys is never "
          "visited when block_size does not divide N_k", online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "no_guard_masked_rows",
          "subtracts the running maximum even while it is still -inf, so a row with no visible "
          "key gets exp(-inf + inf) = NaN and 0/0 instead of zeros", online_nan_empty_rows),
    Entry("online_softmax_attention", "wrong", "row_sum_without_keepdim",
          "sums a block's weights with sum(-1) and no keepdim, so the running sum (B, H, N_q) "
          "broadcasts against the accumulator's last axis d in the final division (a shape "
          "error or a wrong row division)", online_sum_no_keepdim),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "accumulates in float32 but returns that dtype instead of casting back to q's dtype "
          "for half-precision inputs", online_returns_compute_dtype),
    Entry("online_softmax_attention", "right", "running_lse_merge_float64", None,
          online_lse_merge_f64),
    Entry("online_softmax_attention", "right", "loops_per_head", None, online_per_head_loops),
]
