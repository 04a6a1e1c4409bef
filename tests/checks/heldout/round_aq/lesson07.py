"""Held-out learners' answers, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================================ merge_attention_states

def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(dt))
    eb = torch.exp(lse_b.to(dt))
    tot = ea + eb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(dt) + (eb / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    total = wa + wb
    lse = m + torch.log(total)
    total = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / total) * out_a.to(compute) + (wb / total) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(a, b)
    w_a = torch.exp(a - top)
    w_b = torch.exp(b - top)
    s = w_a + w_b
    lse = top + torch.log(s)
    out = (w_a / s).unsqueeze(-1) * out_a.to(ct) + (w_b / s).unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_without_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    big = torch.maximum(a, b)
    shift = torch.where(torch.isinf(big), 0.0, big)
    wa = torch.exp(a - shift)
    wb = torch.exp(b - shift)
    denom = wa + wb
    new_lse = torch.log(denom)
    denom = torch.where(denom == 0, 1.0, denom)
    merged = (wa / denom)[..., None] * out_a.to(ct) + (wb / denom)[..., None] * out_b.to(ct)
    return merged.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_unnormalised_weights(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    mx = torch.maximum(a, b)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    wa, wb = torch.exp(a - mx), torch.exp(b - mx)
    lse = mx + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(ct) + wb[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(work), lse_b.to(work)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), 0.0, top)
    pa, pb = torch.exp(la - top), torch.exp(lb - top)
    z = pa + pb
    lse = top + torch.log(z)
    z = torch.where(z == 0, 1.0, z)
    out = (pa / z)[..., None] * out_a.to(work) + (pb / z)[..., None] * out_b.to(work)
    return out, lse


def merge_logsumexp_stack(out_a, lse_a, out_b, lse_b):
    both = torch.stack([lse_a.double(), lse_b.double()], dim=0)  # (2, ..., N_q)
    lse = torch.logsumexp(both, dim=0)  # -inf where both are -inf
    finite = torch.isfinite(lse)
    safe_lse = torch.where(finite, lse, torch.zeros_like(lse))
    w = torch.exp(both - safe_lse)  # (2, ..., N_q)
    w = torch.where(finite, w, torch.zeros_like(w))
    outs = torch.stack([out_a.double(), out_b.double()], dim=0)
    out = torch.einsum("s...n,s...nd->...nd", w, outs)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    # weight of A = e^a / (e^a + e^b) = sigmoid(a - b); lse = max + log1p(exp(-|a - b|))
    a = lse_a.to(torch.float64)
    b = lse_b.to(torch.float64)
    rows_a, rows_b = out_a.to(torch.float64), out_b.to(torch.float64)
    a_empty, b_empty = torch.isneginf(a), torch.isneginf(b)
    diff = torch.where(a_empty | b_empty, torch.zeros_like(a), a - b)
    wa = torch.sigmoid(diff)
    wa = torch.where(a_empty, torch.zeros_like(wa), torch.where(b_empty, torch.ones_like(wa), wa))
    wb = torch.where(b_empty, torch.zeros_like(wa), 1.0 - wa)
    hi = torch.maximum(a, b)
    lse = torch.where(a_empty | b_empty, hi, hi + torch.log1p(torch.exp(-diff.abs())))
    out = wa.unsqueeze(-1) * rows_a + wb.unsqueeze(-1) * rows_b
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================================ online_softmax_attention

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
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        corr = torch.exp(m - sh)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    q32 = q.to(dt) * d ** -0.5
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    out = torch.zeros((b, h, n_q, d), dtype=dt)
    rows = torch.arange(n_q).unsqueeze(1)  # (N_q, 1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = q32 @ k[:, :, lo:hi].to(dt).transpose(-1, -2)
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        ref = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
        e = torch.exp(s - ref)
        scale = torch.exp(run_max - ref)
        run_sum = run_sum * scale + e.sum(dim=-1, keepdim=True)
        out = out * scale + e @ v[:, :, lo:hi].to(dt)
        run_max = new_max
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (out / run_sum).to(q.dtype)


def online_drops_last_block(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(compute) / math.sqrt(d)
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    query_pos = torch.arange(n_q)[:, None] + n_k - n_q
    n_blocks = max(1, n_k // block_size)
    for blk in range(n_blocks):
        start, stop = blk * block_size, min((blk + 1) * block_size, n_k)
        scores = qq @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        fix = torch.exp(row_max - shift)
        row_sum = row_sum * fix + w.sum(dim=-1, keepdim=True)
        acc = acc * fix + w @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_no_final_guard(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(f) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=f)
    den = torch.zeros((B, H, Nq, 1), dtype=f)
    num = torch.zeros((B, H, Nq, D), dtype=f)
    qp = torch.arange(Nq).view(-1, 1) + (Nk - Nq)
    for j in range(0, Nk, block_size):
        kb = k[:, :, j:j + block_size].to(f)
        vb = v[:, :, j:j + block_size].to(f)
        s = qf @ kb.transpose(-2, -1)
        if causal:
            kp = torch.arange(j, j + kb.shape[2]).view(1, -1)
            s = s.masked_fill(kp > qp, -math.inf)
        mnew = torch.maximum(mx, s.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(mnew), 0.0, mnew)
        e = torch.exp(s - base)
        r = torch.exp(mx - base)
        den = den * r + e.sum(-1, keepdim=True)
        num = num * r + e @ vb
        mx = mnew
    return (num / den).to(q.dtype)


def online_scale_uses_nk(q, k, v, block_size=64, causal=False):
    B, H, n_q, _ = q.shape
    n_k, d = k.shape[-2], k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros(q.shape, dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        corr = torch.exp(m - sh)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc * corr + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(dt) * (1.0 / math.sqrt(d))
    run_m = torch.full((b, h, nq, 1), -math.inf, dtype=dt)
    run_l = torch.zeros((b, h, nq, 1), dtype=dt)
    acc = torch.zeros((b, h, nq, d), dtype=dt)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for st in range(0, nk, block_size):
        en = min(st + block_size, nk)
        s = qs @ k[:, :, st:en].to(dt).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        new_m = torch.maximum(run_m, s.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(new_m), 0.0, new_m)
        p = torch.exp(s - sh)
        c = torch.exp(run_m - sh)
        run_l = run_l * c + p.sum(dim=-1, keepdim=True)
        acc = acc * c + p @ v[:, :, st:en].to(dt)
        run_m = new_m
    return acc / torch.where(run_l == 0, 1.0, run_l)


def online_merge_lse_states(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and a log-sum-exp per row, merging each block in (float64)."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    lse = torch.full((B, H, n_q), -math.inf, dtype=torch.float64)
    offset = n_k - n_q
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].double(), v[:, :, start:stop].double()
        s = torch.einsum("bhqd,bhkd->bhqk", q64, kb)
        if causal:
            allowed = (torch.arange(start, stop)[None, :]
                       <= torch.arange(n_q)[:, None] + offset)
            s = torch.where(allowed, s, torch.full_like(s, -math.inf))
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf on rows with no visible key here
        ok = torch.isfinite(blk_lse)
        p = torch.exp(s - torch.where(ok, blk_lse, torch.zeros_like(blk_lse))[..., None])
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, vb)
        new_lse = torch.logaddexp(lse, blk_lse)
        fin = torch.isfinite(new_lse)
        ref = torch.where(fin, new_lse, torch.zeros_like(new_lse))
        w_old = torch.where(fin, torch.exp(lse - ref), torch.zeros_like(ref))
        w_blk = torch.where(fin, torch.exp(blk_lse - ref), torch.zeros_like(ref))
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_per_head_loop(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    res = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    inv = 1.0 / math.sqrt(d)
    for bi in range(B):
        for hi in range(H):
            qh = q[bi, hi].double() * inv  # (N_q, d)
            m = torch.full((n_q,), -math.inf, dtype=torch.float64)
            l = torch.zeros(n_q, dtype=torch.float64)
            a = torch.zeros((n_q, d), dtype=torch.float64)
            for start in range(0, n_k, block_size):
                kb = k[bi, hi, start:start + block_size].double()
                vb = v[bi, hi, start:start + block_size].double()
                s = torch.mm(qh, kb.t())  # (N_q, b)
                if causal:
                    last_visible = torch.arange(n_q) + (n_k - n_q)  # (N_q,)
                    key_ids = torch.arange(start, start + kb.shape[0])
                    hidden = key_ids.unsqueeze(0) > last_visible.unsqueeze(1)
                    s = s.masked_fill(hidden, -math.inf)
                m2 = torch.maximum(m, s.max(dim=1).values)
                base = torch.nan_to_num(m2, neginf=0.0)
                e = torch.exp(s - base[:, None])
                shrink = torch.exp(m - base)
                l = l * shrink + e.sum(dim=1)
                a = a * shrink[:, None] + torch.mm(e, vb)
                m = m2
            l = torch.where(l > 0, l, torch.ones_like(l))
            res[bi, hi] = a / l[:, None]
    return res.to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_without_max_shift",
          "exponentiates each log-sum-exp directly, e^lse, without subtracting the larger one "
          "first, so lse of 1e4 overflows to inf and the merge returns NaN", merge_naive_exp),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "multiplies the per-row weights (..., N_q) straight into out (..., N_q, d_v) without "
          "`[..., None]`, so they line up with d_v instead of with the rows (a shape error, or "
          "the wrong broadcast)", merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "no_guard_for_both_empty",
          "subtracts the maximum even when it is -inf, so a row where both sets are empty "
          "computes exp(-inf - (-inf)) and returns NaN instead of zeros and -inf",
          merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "lse_forgets_the_shift",
          "returns log(w_a + w_b) as the merged log-sum-exp without adding back the maximum it "
          "subtracted, so lse is off by max(lse_a, lse_b)", merge_lse_without_shift),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "weights the two outputs by exp(lse_set - max) and never divides by their sum, so the "
          "merged output is not a convex combination of out_a and out_b",
          merge_unnormalised_weights),
    Entry("merge_attention_states", "wrong", "result_left_in_float32",
          "computes in float32 but forgets to cast back, so half-precision inputs get float32 "
          "results instead of out_a's and lse_a's dtypes", merge_keeps_float32),
    Entry("merge_attention_states", "right", "logsumexp_of_stack_einsum", None,
          merge_logsumexp_stack),
    Entry("merge_attention_states", "right", "sigmoid_of_difference_float64", None,
          merge_sigmoid),

    Entry("online_softmax_attention", "wrong", "accumulator_not_rescaled",
          "rescales the running sum by exp(m - m') but adds each block into the accumulator "
          "without rescaling the old accumulator, so earlier blocks keep their stale weights",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_mask_top_left",
          "aligns the causal mask top-left (key j visible when j <= i) instead of bottom-right "
          "(j <= i + N_k - N_q), which is wrong whenever N_q != N_k",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "ragged_last_block_dropped",
          "loops over n_k // block_size blocks, so the last, shorter block of keys is never "
          "visited when N_k is not a multiple of block_size", online_drops_last_block),
    Entry("online_softmax_attention", "wrong", "no_guard_on_final_division",
          "divides acc by row_sum with no guard, so a query that sees no key (row_sum = 0) gets "
          "0/0 = NaN instead of a row of zeros", online_no_final_guard),
    Entry("online_softmax_attention", "wrong", "scale_from_sequence_length",
          "takes d from k.shape[-2] (the number of keys) instead of k.shape[-1], so the scores "
          "are scaled by 1/sqrt(N_k) instead of 1/sqrt(d)", online_scale_uses_nk),
    Entry("online_softmax_attention", "wrong", "returns_compute_dtype",
          "accumulates in float32 but returns the float32 result instead of casting back to "
          "q's dtype, so half-precision inputs come back in the wrong dtype",
          online_returns_float32),
    Entry("online_softmax_attention", "right", "merge_block_lse_float64", None,
          online_merge_lse_states),
    Entry("online_softmax_attention", "right", "per_head_loops_mm", None, online_per_head_loop),
]
