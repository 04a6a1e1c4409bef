"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================== merge_attention_states -- wrong
def merge_raw_exp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    lse = torch.logaddexp(la, lb)
    ea = torch.exp(la)
    eb = torch.exp(lb)
    tot = ea + eb
    tot = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / tot)[..., None] * out_a.to(dt) + (eb / tot)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_inf_guard(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(a, b)
    wa = torch.exp(a - m)
    wb = torch.exp(b - m)
    s = wa + wb
    lse = m + torch.log(s)
    out = (wa / s).unsqueeze(-1) * out_a.to(compute) + (wb / s).unsqueeze(-1) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    top = torch.maximum(lse_a.to(c), lse_b.to(c))
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    w_a = torch.exp(lse_a.to(c) - top)
    w_b = torch.exp(lse_b.to(c) - top)
    total = w_a + w_b
    lse = top + torch.log(total)
    total = torch.where(total == 0, torch.ones_like(total), total)
    out = (w_a / total) * out_a.to(c) + (w_b / total) * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(work)
    lb = lse_b.to(work)
    hi = torch.maximum(la, lb)
    hi = hi.masked_fill(torch.isinf(hi), 0.0)
    pa, pb = torch.exp(la - hi), torch.exp(lb - hi)
    z = pa + pb
    new_lse = hi + torch.log(z)
    z = z.masked_fill(z == 0, 1.0)
    merged = (pa / z)[..., None] * out_a.to(work) + (pb / z)[..., None] * out_b.to(work)
    return merged, new_lse


def merge_swapped_weights(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    lse_a32, lse_b32 = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(lse_a32, lse_b32)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(lse_a32 - shift)
    w_b = torch.exp(lse_b32 - shift)
    total = w_a + w_b
    lse = shift + torch.log(total)
    safe = torch.where(total == 0, 1.0, total)
    out = (w_b / safe)[..., None] * out_a.to(ct) + (w_a / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a32, b32 = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(a32, b32)
    shift = torch.where(torch.isinf(m), 0.0, m)
    ea, eb = torch.exp(a32 - shift), torch.exp(b32 - shift)
    norm = ea + eb
    norm = torch.where(norm == 0, 1.0, norm)
    out = (ea / norm)[..., None] * out_a.to(ct) + (eb / norm)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), m.to(lse_a.dtype)


# ============================================================== merge_attention_states -- right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la = lse_a.double()
    lb = lse_b.double()
    lse = torch.logaddexp(la, lb)  # -inf when both are -inf
    fa = torch.nan_to_num(torch.exp(la - lse), nan=0.0)
    fb = torch.nan_to_num(torch.exp(lb - lse), nan=0.0)
    out = fa.unsqueeze(-1) * out_a.double() + fb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a, lse_b], dim=-1).to(torch.float64)  # (..., N_q, 2)
    outs = torch.stack([out_a, out_b], dim=-2).to(torch.float64)  # (..., N_q, 2, d_v)
    lse = torch.logsumexp(lses, dim=-1)
    empty = torch.isneginf(lse)
    w = torch.softmax(lses, dim=-1)
    w = torch.where(empty[..., None], torch.zeros_like(w), w)
    out = (w[..., None] * outs).sum(dim=-2)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention -- wrong
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_block_local_positions(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) * (1.0 / math.sqrt(d))
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk = k[:, :, start:stop].to(compute)
        v_blk = v[:, :, start:stop].to(compute)
        scores = q_scaled @ k_blk.transpose(-2, -1)
        if causal:
            key_pos = torch.arange(stop - start)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v_blk
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    b_, h_, nq, dim = q.shape
    nk = k.size(2)
    f = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(f) * dim ** -0.5
    mx = torch.full((b_, h_, nq, 1), float("-inf"), dtype=f)
    den = torch.zeros((b_, h_, nq, 1), dtype=f)
    num = torch.zeros((b_, h_, nq, dim), dtype=f)
    rows = torch.arange(nq).unsqueeze(1)
    for lo in range(0, nk, block_size):
        hi = min(lo + block_size, nk)
        s = qq @ k[:, :, lo:hi].to(f).transpose(-1, -2)
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            s = s.masked_fill(cols > rows, float("-inf"))
        mx2 = torch.maximum(mx, s.max(dim=-1, keepdim=True).values)
        base = torch.where(torch.isfinite(mx2), mx2, torch.zeros_like(mx2))
        e = torch.exp(s - base)
        corr = torch.exp(mx - base)
        den = den * corr + e.sum(-1, keepdim=True)
        num = num * corr + e @ v[:, :, lo:hi].to(f)
        mx = mx2
    den = torch.where(den == 0, torch.ones_like(den), den)
    return (num / den).to(q.dtype)


def online_unguarded_division(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    m_run = torch.full((B, H, Nq, 1), -math.inf, dtype=dt)
    l_run = torch.zeros((B, H, Nq, 1), dtype=dt)
    o_run = torch.zeros((B, H, Nq, d), dtype=dt)
    offset = Nk - Nq
    for j0 in range(0, Nk, block_size):
        j1 = min(j0 + block_size, Nk)
        s = (q.to(dt) @ k[:, :, j0:j1].to(dt).transpose(-2, -1)) * scale
        if causal:
            allowed = torch.arange(j0, j1)[None, :] <= torch.arange(Nq)[:, None] + offset
            s = s.masked_fill(~allowed, -math.inf)
        m_new = torch.maximum(m_run, s.amax(-1, keepdim=True))
        m_safe = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe)
        alpha = torch.exp(m_run - m_safe)
        l_run = alpha * l_run + p.sum(-1, keepdim=True)
        o_run = alpha * o_run + p @ v[:, :, j0:j1].to(dt)
        m_run = m_new
    return (o_run / l_run).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) / math.sqrt(d)
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    n_blocks = max(n_k // block_size, 1)
    for blk in range(n_blocks):
        start = blk * block_size
        stop = min(start + block_size, n_k)
        k_blk = k[:, :, start:stop].to(compute)
        v_blk = v[:, :, start:stop].to(compute)
        scores = q_scaled @ k_blk.transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v_blk
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    B, H, N_q, D = q.shape
    N_k = k.shape[2]
    acc_t = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(acc_t) / math.sqrt(D)
    run_max = torch.full((B, H, N_q, 1), -math.inf, dtype=acc_t)
    run_sum = torch.zeros((B, H, N_q, 1), dtype=acc_t)
    run_out = torch.zeros((B, H, N_q, D), dtype=acc_t)
    last_visible = torch.arange(N_q).view(-1, 1) + (N_k - N_q)
    start = 0
    while start < N_k:
        stop = min(start + block_size, N_k)
        scores = qf @ k[:, :, start:stop].to(acc_t).transpose(2, 3)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop).view(1, -1) > last_visible,
                                        -math.inf)
        new_max = torch.maximum(run_max, scores.amax(-1, keepdim=True))
        ref = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        e = torch.exp(scores - ref)
        shrink = torch.exp(run_max - ref)
        run_sum = run_sum * shrink + e.sum(-1, keepdim=True)
        run_out = run_out * shrink + e @ v[:, :, start:stop].to(acc_t)
        run_max = new_max
        start = stop
    return run_out / torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)


# ============================================================ online_softmax_attention -- right
def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Each key block gives its own (out, lse); merge them one after another, in float64."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full(q.shape[:-1], -math.inf, dtype=torch.float64)
    visible_upto = torch.arange(n_q) + (n_k - n_q)  # (N_q,)
    for first in range(0, n_k, block_size):
        last = min(first + block_size, n_k)
        s = torch.matmul(q64, k[..., first:last, :].double().transpose(-1, -2))
        if causal:
            ok = torch.arange(first, last)[None, :] <= visible_upto[:, None]
            s = torch.where(ok, s, torch.full_like(s, -math.inf))
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf for a row that sees nothing here
        p = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0)
        blk_out = torch.matmul(p, v[..., first:last, :].double())
        new_lse = torch.logaddexp(lse, blk_lse)
        f_old = torch.nan_to_num(torch.exp(lse - new_lse), nan=0.0)
        f_new = torch.nan_to_num(torch.exp(blk_lse - new_lse), nan=0.0)
        out = f_old[..., None] * out + f_new[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_einsum_f64(q, k, v, block_size=64, causal=False):
    nb, nh, nq, hd = q.shape
    nk = k.shape[2]
    qd, kd, vd = q.double(), k.double(), v.double()
    m = torch.full((nb, nh, nq), -math.inf, dtype=torch.float64)
    l = torch.zeros((nb, nh, nq), dtype=torch.float64)
    o = torch.zeros((nb, nh, nq, hd), dtype=torch.float64)
    blocks = [(i, min(i + block_size, nk)) for i in range(0, nk, block_size)]
    for i0, i1 in blocks:
        s = torch.einsum("bhqd,bhkd->bhqk", qd, kd[:, :, i0:i1]) / math.sqrt(hd)
        if causal:
            hidden = torch.arange(i0, i1)[None, :] - torch.arange(nq)[:, None] > nk - nq
            s = s.masked_fill(hidden, -math.inf)
        m2 = torch.maximum(m, s.amax(dim=-1))
        ref = torch.where(m2 == -math.inf, torch.zeros_like(m2), m2)
        e = torch.exp(s - ref[..., None])
        c = torch.exp(m - ref)
        l = l * c + e.sum(dim=-1)
        o = o * c[..., None] + torch.einsum("bhqk,bhkd->bhqd", e, vd[:, :, i0:i1])
        m = m2
    l = torch.where(l > 0, l, torch.ones_like(l))
    return (o / l[..., None]).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "raw-exp-overflow",
          "exponentiates the raw log-sum-exps without subtracting the larger one, so at lse "
          "~1e4 exp overflows to inf and the weights become inf/inf = NaN",
          merge_raw_exp),
    Entry("merge_attention_states", "wrong", "no-neg-inf-guard",
          "subtracts max(lse_a, lse_b) even when both are -inf, so a row where both sets are "
          "empty computes exp(-inf - (-inf)) = NaN instead of a zero row and -inf",
          merge_no_inf_guard),
    Entry("merge_attention_states", "wrong", "weights-without-trailing-axis",
          "multiplies the per-row weights (..., N_q) straight into out (..., N_q, d_v) "
          "without w[..., None], so they broadcast against d_v and the call raises a shape "
          "error",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "returns-float32",
          "never casts back: out and lse come back in the float32 working dtype instead of "
          "the inputs' float16 / bfloat16",
          merge_keeps_float32),
    Entry("merge_attention_states", "wrong", "swapped-weights",
          "multiplies out_a by B's weight and out_b by A's (w_b with out_a, w_a with out_b)",
          merge_swapped_weights),
    Entry("merge_attention_states", "wrong", "lse-is-max",
          "returns max(lse_a, lse_b) as the merged log-sum-exp, dropping the + log(w_a + w_b) "
          "term of the union",
          merge_lse_is_max),
    Entry("merge_attention_states", "right", "logaddexp-float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked-softmax", None, merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "acc-not-rescaled",
          "rescales the running sum by exp(m - m') but not the running output acc, so the "
          "old blocks keep weights relative to a stale maximum",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "block-local-key-positions",
          "the causal mask compares key indices inside the block (0..b-1) instead of the "
          "absolute positions start + j, so later blocks are masked as if they were the first",
          online_block_local_positions),
    Entry("online_softmax_attention", "wrong", "causal-top-left",
          "aligns the causal mask top-left (key j visible when j <= i) instead of "
          "bottom-right (j <= i + N_k - N_q), wrong whenever N_q != N_k",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "unguarded-final-division",
          "divides acc by row_sum without guarding row_sum == 0, so a query that sees no key "
          "gets 0/0 = NaN instead of a zero row",
          online_unguarded_division),
    Entry("online_softmax_attention", "wrong", "drops-ragged-block",
          "loops over n_k // block_size blocks, so the shorter last block of keys is never "
          "visited when block_size does not divide N_k",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "returns-float32",
          "returns the float32 accumulator without casting back to q's dtype (float16 / "
          "bfloat16 inputs get a float32 result)",
          online_returns_float32),
    Entry("online_softmax_attention", "right", "merge-block-states", None,
          online_merge_block_states),
    Entry("online_softmax_attention", "right", "einsum-float64", None, online_einsum_f64),
]
