"""Held-out learners' answers, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================================ merge_attention_states
def merge_no_max_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    ea, eb = torch.exp(la), torch.exp(lb)
    tot = ea + eb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(ct) + (eb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(work), lse_b.to(work)
    m = torch.maximum(a, b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(a - m)
    wb = torch.exp(b - m)
    s = wa + wb
    lse = m + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    merged = (wa / s) * out_a.to(work) + (wb / s) * out_b.to(work)
    return merged.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    lse_a_, lse_b_ = lse_a.to(dt), lse_b.to(dt)
    big = torch.maximum(lse_a_, lse_b_)
    big = torch.where(torch.isinf(big), 0.0, big)
    w_a = torch.exp(lse_a_ - big)
    w_b = torch.exp(lse_b_ - big)
    lse = big + torch.log(w_a + w_b)
    out = w_a[..., None] * out_a.to(dt) + w_b[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_nan_on_empty(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    x, y = lse_a.to(dt), lse_b.to(dt)
    top = torch.maximum(x, y)
    ex = torch.exp(x - top)
    ey = torch.exp(y - top)
    tot = ex + ey
    lse = top + torch.log(tot)
    out = (ex / tot).unsqueeze(-1) * out_a.to(dt) + (ey / tot).unsqueeze(-1) * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_left_in_float32(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(dt)
    lb = lse_b.to(dt)
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    pa, pb = torch.exp(la - mx), torch.exp(lb - mx)
    z = pa + pb
    new_lse = mx + torch.log(z)
    z = torch.where(z == 0, torch.ones_like(z), z)
    new_out = (pa / z)[..., None] * out_a.to(dt) + (pb / z)[..., None] * out_b.to(dt)
    return new_out.to(out_a.dtype), new_lse


def merge_weights_swapped(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), 0.0, hi)
    alpha = torch.exp(la - hi)
    beta = torch.exp(lb - hi)
    norm = alpha + beta
    lse = hi + torch.log(norm)
    norm = torch.where(norm == 0, 1.0, norm)
    out = (beta / norm)[..., None] * out_a.to(dt) + (alpha / norm)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_right_logaddexp(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)  # -inf when both are -inf
    empty = torch.isneginf(lse)
    ref = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(a), torch.exp(a - ref))
    wb = torch.where(empty, torch.zeros_like(b), torch.exp(b - ref))
    out = torch.einsum("...q,...qd->...qd", wa, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_right_sigmoid(out_a, lse_a, out_b, lse_b):
    # weight of A = e^a / (e^a + e^b) = sigmoid(a - b); lse = max + log1p(exp(-|a - b|))
    a = lse_a.to(torch.float64)
    b = lse_b.to(torch.float64)
    both_empty = torch.isneginf(a) & torch.isneginf(b)
    a0 = torch.where(both_empty, torch.zeros_like(a), a)
    b0 = torch.where(both_empty, torch.zeros_like(b), b)
    gap = a0 - b0
    w_a = torch.sigmoid(gap)
    w_b = torch.sigmoid(-gap)
    lse = torch.maximum(a0, b0) + torch.log1p(torch.exp(-gap.abs()))
    lse = torch.where(both_empty, torch.full_like(lse, -math.inf), lse)
    w_a = torch.where(both_empty, torch.zeros_like(w_a), w_a)
    w_b = torch.where(both_empty, torch.zeros_like(w_b), w_b)
    out = w_a.unsqueeze(-1) * out_a.to(torch.float64) + w_b.unsqueeze(-1) * out_b.to(torch.float64)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================================ online_softmax_attention
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, Nq, 1), dtype=ct)
    acc = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for j0 in range(0, Nk, block_size):
        j1 = min(j0 + block_size, Nk)
        s = qs @ k[:, :, j0:j1].to(ct).transpose(-2, -1)
        if causal:
            kpos = torch.arange(j0, j1)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - m_safe)
        l = l * torch.exp(m - m_safe) + p.sum(dim=-1, keepdim=True)
        acc = acc + p @ v[:, :, j0:j1].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    dtype = torch.promote_types(q.dtype, torch.float32)
    q32 = q.to(dtype) * d ** -0.5
    run_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=dtype)
    run_sum = torch.zeros((batch, heads, n_q, 1), dtype=dtype)
    acc = torch.zeros((batch, heads, n_q, d), dtype=dtype)
    rows = torch.arange(n_q).unsqueeze(1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb = k[:, :, lo:hi].to(dtype)
        vb = v[:, :, lo:hi].to(dtype)
        sc = q32 @ kb.transpose(-1, -2)
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            sc = sc.masked_fill(cols > rows, float("-inf"))
        new = torch.maximum(run_max, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        e = torch.exp(sc - sh)
        corr = torch.exp(run_max - sh)
        run_sum = run_sum * corr + e.sum(-1, keepdim=True)
        acc = acc * corr + e @ vb
        run_max = new
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (acc / run_sum).to(q.dtype)


def online_amax_no_keepdim(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(f) / math.sqrt(d)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=f)
    den = torch.zeros((B, H, Nq, 1), dtype=f)
    num = torch.zeros((B, H, Nq, d), dtype=f)
    qi = torch.arange(Nq)[:, None] + Nk - Nq
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qq @ k[:, :, s0:s1].to(f).transpose(-2, -1)
        if causal:
            kj = torch.arange(s0, s1)[None, :]
            sc = sc.masked_fill(kj > qi, -math.inf)
        blk_max = sc.amax(dim=-1)
        new = torch.maximum(mx, blk_max)
        shift = torch.where(torch.isinf(new), 0.0, new)
        w = torch.exp(sc - shift)
        r = torch.exp(mx - shift)
        den = den * r + w.sum(dim=-1, keepdim=True)
        num = num * r + w @ v[:, :, s0:s1].to(f)
        mx = new
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def online_nan_empty_rows(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[-2]
    acc_t = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(acc_t) * (1.0 / math.sqrt(d))
    row_max = torch.full((b, h, nq, 1), -math.inf, dtype=acc_t)
    row_sum = torch.zeros((b, h, nq, 1), dtype=acc_t)
    acc = torch.zeros((b, h, nq, d), dtype=acc_t)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        s = qs @ k[:, :, start:stop].to(acc_t).transpose(-2, -1)
        if causal:
            kpos = torch.arange(start, stop)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - new_max)
        scale = torch.exp(row_max - new_max)
        row_sum = row_sum * scale + p.sum(dim=-1, keepdim=True)
        acc = acc * scale + p @ v[:, :, start:stop].to(acc_t)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(D)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, Nq, 1), dtype=ct)
    o = torch.zeros((B, H, Nq, D), dtype=ct)
    offset = Nk - Nq
    n_blocks = max(Nk // block_size, 1)
    for blk in range(n_blocks):
        a = blk * block_size
        z = min(a + block_size, Nk)
        s = qs @ k[:, :, a:z].to(ct).transpose(-2, -1)
        if causal:
            visible = torch.arange(a, z)[None, :] <= torch.arange(Nq)[:, None] + offset
            s = s.masked_fill(~visible, -math.inf)
        m2 = torch.maximum(m, s.amax(-1, keepdim=True))
        m2s = torch.where(torch.isinf(m2), 0.0, m2)
        p = torch.exp(s - m2s)
        c = torch.exp(m - m2s)
        l = c * l + p.sum(-1, keepdim=True)
        o = c * o + p @ v[:, :, a:z].to(ct)
        m = m2
    return (o / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_no_scale(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qc = q.to(ct)
    best = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    total = torch.zeros((B, H, Nq, 1), dtype=ct)
    acc = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for start in range(0, Nk, block_size):
        stop = min(start + block_size, Nk)
        scores = qc @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        nb = torch.maximum(best, scores.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(nb), 0.0, nb)
        w = torch.exp(scores - sh)
        rs = torch.exp(best - sh)
        total = total * rs + w.sum(dim=-1, keepdim=True)
        acc = acc * rs + w @ v[:, :, start:stop].to(ct)
        best = nb
    return (acc / torch.where(total == 0, 1.0, total)).to(q.dtype)


def online_right_running_lse(q, k, v, block_size=64, causal=False):
    """Keeps the output normalised at every step, with a running log-sum-exp (float64)."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    lse = torch.full((B, H, Nq), -math.inf, dtype=torch.float64)
    out = torch.zeros((B, H, Nq, d), dtype=torch.float64)
    last_visible = torch.arange(Nq) + (Nk - Nq)  # (Nq,)
    start = 0
    while start < Nk:
        stop = min(start + block_size, Nk)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, start:stop].double())
        if causal:
            ok = torch.arange(start, stop)[None, :] <= last_visible[:, None]
            s = torch.where(ok, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)  # (B, H, Nq), -inf when nothing visible
        new_lse = torch.logaddexp(lse, blk_lse)
        ref = torch.where(torch.isneginf(new_lse), torch.zeros_like(new_lse), new_lse)
        keep_old = torch.exp(lse - ref)
        p = torch.exp(s - ref[..., None])
        out = out * keep_old[..., None] + torch.einsum("bhqk,bhkd->bhqd", p,
                                                       v[:, :, start:stop].double())
        lse = new_lse
        start = stop
    return out.to(q.dtype)


def online_right_loop_heads(q, k, v, block_size=64, causal=False):
    """Same online softmax, one (batch, head) pair at a time, in float32."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    result = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d)
    for bi in range(B):
        for hi in range(H):
            qq = q[bi, hi].float() * scale  # (Nq, d)
            mx = torch.full((Nq,), -math.inf)
            sm = torch.zeros(Nq)
            num = torch.zeros(Nq, d)
            for j in range(0, Nk, block_size):
                kk = k[bi, hi, j:j + block_size].float()
                vv = v[bi, hi, j:j + block_size].float()
                s = torch.mm(qq, kk.t())
                if causal:
                    allowed = (torch.arange(j, j + kk.shape[0])[None, :]
                               <= torch.arange(Nq)[:, None] + (Nk - Nq))
                    s = s.masked_fill(~allowed, -math.inf)
                cand = torch.maximum(mx, s.max(dim=1).values)
                base = torch.nan_to_num(cand, neginf=0.0)
                e = torch.exp(s - base[:, None])
                fac = torch.exp(mx - base)
                sm = sm * fac + e.sum(dim=1)
                num = num * fac[:, None] + torch.mm(e, vv)
                mx = cand
            den = torch.where(sm > 0, sm, torch.ones_like(sm))
            result[bi, hi] = (num / den[:, None]).to(q.dtype)
    return result


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_without_max_shift",
          "exponentiates the raw log-sum-exps (exp(lse_a) + exp(lse_b)) without subtracting the "
          "larger one first, so an lse of 1e4 overflows to inf and the merge gives inf/NaN",
          merge_no_max_shift),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "multiplies the per-row weights (..., N_q) straight into the outputs (..., N_q, d_v) "
          "without w[..., None], so they line up with d_v instead of N_q: a shape error (or "
          "mixed-up rows when N_q == d_v)",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "weights_not_divided_by_total",
          "mixes the outputs with exp(lse_set - max) as they are, never dividing by their sum "
          "exp(lse_a - max) + exp(lse_b - max): the merged rows are not a normalised average",
          merge_unnormalised),
    Entry("merge_attention_states", "wrong", "no_guard_when_both_empty",
          "subtracts the maximum even when it is -inf and divides by a zero total, so a row "
          "where both sets are empty gives NaN instead of zeros and -inf",
          merge_nan_on_empty),
    Entry("merge_attention_states", "wrong", "lse_returned_in_compute_dtype",
          "casts the output back but returns the merged lse in the float32 working dtype, not "
          "in lse_a's dtype (float16 / bfloat16 inputs get a float32 lse)",
          merge_lse_left_in_float32),
    Entry("merge_attention_states", "wrong", "weights_swapped",
          "swaps the weights: out_a is multiplied by B's share exp(lse_b - lse) and out_b by "
          "A's share",
          merge_weights_swapped),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_right_logaddexp),
    Entry("merge_attention_states", "right", "sigmoid_closed_form", None, merge_right_sigmoid),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum by exp(old_max - new_max) but adds the new block to the "
          "accumulator without rescaling it, so blocks seen before a larger maximum keep too "
          "much weight",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_mask_top_left",
          "aligns the causal mask top-left (key j visible when j <= i), forgetting the "
          "N_k - N_q offset of the bottom-right convention, so it is wrong whenever N_q != N_k",
          online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "block_max_without_keepdim",
          "takes the block maximum with amax(dim=-1) without keepdim, so it broadcasts against "
          "the (B, H, N_q, 1) running max into an (N_q, N_q) mess: a shape error",
          online_amax_no_keepdim),
    Entry("online_softmax_attention", "wrong", "no_guard_for_rows_without_keys",
          "subtracts the running max even while it is -inf and divides by a zero sum, so a "
          "query row with no visible key (causal, N_q > N_k) gives NaN instead of zeros",
          online_nan_empty_rows),
    Entry("online_softmax_attention", "wrong", "ragged_last_block_dropped",
          "loops over N_k // block_size blocks, so the shorter last block of keys is never "
          "visited when block_size does not divide N_k",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "no_sqrt_d_scale",
          "never scales the scores by 1/sqrt(d): the softmax is taken of raw q . k",
          online_no_scale),
    Entry("online_softmax_attention", "right", "running_lse_float64", None,
          online_right_running_lse),
    Entry("online_softmax_attention", "right", "loop_over_batch_and_heads", None,
          online_right_loop_heads),
]
