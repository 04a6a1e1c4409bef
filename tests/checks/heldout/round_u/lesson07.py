"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_naive_logsumexp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    ea, eb = torch.exp(la), torch.exp(lb)
    tot = ea + eb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(dt) + (eb / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_returns_max(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(work), lse_b.to(work)
    m = torch.maximum(a, b)
    m0 = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(a - m0), torch.exp(b - m0)
    s = wa + wb
    s = torch.where(s == 0, torch.ones_like(s), s)
    merged = (wa / s).unsqueeze(-1) * out_a.to(work) + (wb / s).unsqueeze(-1) * out_b.to(work)
    return merged.to(out_a.dtype), m.to(lse_a.dtype)  # the union's lse is the larger one


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    top = torch.maximum(lse_a.to(ct), lse_b.to(ct))
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(lse_a.to(ct) - shift)
    w_b = torch.exp(lse_b.to(ct) - shift)
    total = w_a + w_b
    lse = shift + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    out = (w_a / total) * out_a.to(ct) + (w_b / total) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unguarded_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    w_a = torch.exp(la - top)
    w_b = torch.exp(lb - top)
    total = w_a + w_b
    lse = top + torch.log(total)
    out = (w_a / total)[..., None] * out_a.to(ct) + (w_b / total)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_float_no_cast_back(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.float(), lse_b.float()
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    wa, wb = torch.exp(la - hi), torch.exp(lb - hi)
    z = wa + wb
    lse = hi + torch.log(z)
    z = torch.where(z == 0, torch.ones_like(z), z)
    out = (wa / z)[..., None] * out_a.float() + (wb / z)[..., None] * out_b.float()
    return out, lse


def merge_out_a_twice(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    big = torch.maximum(lse_a.to(ct), lse_b.to(ct))
    big = torch.where(torch.isinf(big), 0.0, big)
    alpha = torch.exp(lse_a.to(ct) - big)
    beta = torch.exp(lse_b.to(ct) - big)
    norm = alpha + beta
    lse = big + torch.log(norm)
    norm = torch.where(norm == 0, 1.0, norm)
    out = (alpha / norm)[..., None] * out_a.to(ct) + (beta / norm)[..., None] * out_a.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    dead = torch.isneginf(lse)
    ref = torch.where(dead, torch.zeros_like(lse), lse)
    wa = torch.where(dead, torch.zeros_like(la), torch.exp(la - ref))
    wb = torch.where(dead, torch.zeros_like(lb), torch.exp(lb - ref))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    both = torch.stack([lse_a.double(), lse_b.double()], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(both, dim=-1)
    w = torch.nan_to_num(torch.softmax(both, dim=-1), nan=0.0)  # all -inf rows -> 0
    outs = torch.stack([out_a.double(), out_b.double()], dim=-1)  # (..., N_q, d_v, 2)
    out = torch.einsum("...dk,...k->...d", outs, w)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_block_relative_keys(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s0 in range(0, nk, block_size):
        kb = k[:, :, s0:s0 + block_size].to(ct)
        vb = v[:, :, s0:s0 + block_size].to(ct)
        sc = qs @ kb.transpose(-1, -2)
        if causal:
            kpos = torch.arange(kb.shape[2])[None, :]
            sc = sc.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        r = torch.exp(m - sh)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) * d ** -0.5
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    acc = torch.zeros((b, h, n_q, d), dtype=dt)
    rows = torch.arange(n_q).unsqueeze(1) + n_k - n_q
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = qq @ k[:, :, lo:hi].to(dt).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi).unsqueeze(0) > rows, float("-inf"))
        new = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        e = torch.exp(s - safe)
        corr = torch.exp(run_max - safe)
        run_sum = run_sum * corr + e.sum(dim=-1, keepdim=True)
        acc = acc + e @ v[:, :, lo:hi].to(dt)
        run_max = new
    den = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (acc / den).to(q.dtype)


def online_top_left_mask(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=f)
    den = torch.zeros((B, H, Nq, 1), dtype=f)
    num = torch.zeros((B, H, Nq, D), dtype=f)
    qi = torch.arange(Nq).view(-1, 1)
    for j0 in range(0, Nk, block_size):
        j1 = min(j0 + block_size, Nk)
        scores = (q.to(f) @ k[:, :, j0:j1].to(f).transpose(-2, -1)) * scale
        if causal:
            kj = torch.arange(j0, j1).view(1, -1)
            scores = scores.masked_fill(kj > qi, -math.inf)
        mx2 = torch.maximum(mx, scores.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(mx2), 0.0, mx2)
        w = torch.exp(scores - base)
        fac = torch.exp(mx - base)
        den = den * fac + w.sum(-1, keepdim=True)
        num = num * fac + w @ v[:, :, j0:j1].to(f)
        mx = mx2
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def online_unguarded_division(q, k, v, block_size=64, causal=False):
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
        scores = q_scaled @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def online_max_never_updated(q, k, v, block_size=64, causal=False):
    B, H, n, d = q.shape
    m_keys = k.shape[2]
    ty = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ty) / math.sqrt(d)
    best = torch.full((B, H, n, 1), -math.inf, dtype=ty)
    total = torch.zeros((B, H, n, 1), dtype=ty)
    acc = torch.zeros((B, H, n, d), dtype=ty)
    qp = torch.arange(n)[:, None] + (m_keys - n)
    for st in range(0, m_keys, block_size):
        en = min(st + block_size, m_keys)
        sc = torch.matmul(qs, k[:, :, st:en].to(ty).transpose(-2, -1))
        if causal:
            sc = sc.masked_fill(torch.arange(st, en)[None, :] > qp, -math.inf)
        cur = torch.maximum(best, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(cur), 0.0, cur)
        ex = torch.exp(sc - sh)
        shrink = torch.exp(best - sh)
        total = total * shrink + ex.sum(-1, keepdim=True)
        acc = acc * shrink + torch.matmul(ex, v[:, :, st:en].to(ty))
    return (acc / torch.where(total == 0, 1.0, total)).to(q.dtype)


def online_returns_compute_dtype(q, k, v, block_size=64, causal=False):
    bs, hs, nq, dh = q.shape
    nk = k.shape[2]
    wd = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf = q.to(wd), k.to(wd), v.to(wd)
    m = torch.full((bs, hs, nq, 1), -math.inf, dtype=wd)
    s_run = torch.zeros((bs, hs, nq, 1), dtype=wd)
    o_run = torch.zeros((bs, hs, nq, dh), dtype=wd)
    qpos = (torch.arange(nq) + nk - nq)[:, None]
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        s = torch.einsum("bhqd,bhkd->bhqk", qf, kf[:, :, a:z]) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        m2 = torch.maximum(m, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m2), 0.0, m2)
        p = torch.exp(s - sh)
        c = torch.exp(m - sh)
        s_run = s_run * c + p.sum(-1, keepdim=True)
        o_run = o_run * c + torch.einsum("bhqk,bhkd->bhqd", p, vf[:, :, a:z])
        m = m2
    return o_run / torch.where(s_run == 0, 1.0, s_run)


# ============================================================ online_softmax_attention: right
def online_merge_blocks_lse(q, k, v, block_size=64, causal=False):
    """Each block gives a normalised (out, lse); fold it into the running pair like a merge."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((B, H, nq, d), dtype=torch.float64)
    lse = torch.full((B, H, nq), -math.inf, dtype=torch.float64)
    qpos = torch.arange(nq).unsqueeze(-1) + (nk - nq)
    for start in range(0, nk, block_size):
        kb = k[:, :, start:start + block_size].double()
        vb = v[:, :, start:start + block_size].double()
        s = q64 @ kb.transpose(-1, -2)
        if causal:
            kpos = torch.arange(start, start + kb.shape[2]).unsqueeze(0)
            s = torch.where(kpos <= qpos, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)
        finite = torch.isfinite(blk_lse)
        p = torch.exp(s - torch.where(finite, blk_lse, torch.zeros_like(blk_lse))[..., None])
        blk_out = p @ vb
        new_lse = torch.logaddexp(lse, blk_lse)
        ok = torch.isfinite(new_lse)
        ref = torch.where(ok, new_lse, torch.zeros_like(new_lse))
        w_old = torch.where(ok, torch.exp(lse - ref), torch.zeros_like(ref))
        w_new = torch.where(ok, torch.exp(blk_lse - ref), torch.zeros_like(ref))
        out = w_old[..., None] * out + w_new[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_per_row_loop_f64(q, k, v, block_size=64, causal=False):
    """Keys in blocks, float64 running max/sum kept as (B, H, N_q) tensors, einsum products."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    qd = q.to(torch.float64)
    c = 1.0 / math.sqrt(d)
    run_m = torch.full((B, H, nq), float("-inf"), dtype=torch.float64)
    run_l = torch.zeros((B, H, nq), dtype=torch.float64)
    run_o = torch.zeros((B, H, nq, d), dtype=torch.float64)
    limit = torch.arange(nq, dtype=torch.float64) + (nk - nq)  # last visible key per query
    blocks = [(i, min(i + block_size, nk)) for i in range(0, nk, block_size)]
    for i, j in blocks:
        s = torch.einsum("bhqd,bhkd->bhqk", qd, k[:, :, i:j].to(torch.float64)) * c
        if causal:
            keys = torch.arange(i, j, dtype=torch.float64)
            hidden = keys[None, :] > limit[:, None]
            s = s.masked_fill(hidden, float("-inf"))
        m_new = torch.maximum(run_m, s.max(dim=-1).values)
        base = torch.nan_to_num(m_new, neginf=0.0)
        e = torch.exp(s - base[..., None])
        alpha = torch.exp(run_m - base)
        run_l = alpha * run_l + e.sum(-1)
        run_o = alpha[..., None] * run_o + torch.einsum("bhqk,bhkd->bhqd", e,
                                                        v[:, :, i:j].to(torch.float64))
        run_m = m_new
    safe = torch.where(run_l > 0, run_l, torch.ones_like(run_l))
    return (run_o / safe[..., None]).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive-logsumexp",
          "adds exp(lse_a) + exp(lse_b) without subtracting the larger log-sum-exp first, so "
          "lse of about 1e4 overflows to inf and the weights become NaN",
          merge_naive_logsumexp),
    Entry("merge_attention_states", "wrong", "lse-is-the-max",
          "merges the outputs correctly but returns the larger of the two log-sum-exps as the "
          "union's lse instead of log(e^lse_a + e^lse_b)",
          merge_returns_max),
    Entry("merge_attention_states", "wrong", "weights-without-trailing-axis",
          "multiplies the per-row weights (..., N_q) straight into out (..., N_q, d_v) with no "
          "trailing axis, so they broadcast against d_v instead of the rows (here a shape "
          "error is raised)",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "unguarded-shift",
          "subtracts the larger lse without replacing -inf by 0, so a row where both sets are "
          "empty computes exp(-inf - (-inf)) and returns NaN instead of zeros and -inf",
          merge_unguarded_shift),
    Entry("merge_attention_states", "wrong", "float32-result",
          "does the arithmetic with .float() and never casts back, so out and lse come back "
          "as float32 instead of the inputs' dtype (and float64 inputs lose precision)",
          merge_float_no_cast_back),
    Entry("merge_attention_states", "wrong", "out-a-twice",
          "copy-paste slip: the second term weights out_a again where out_b belongs, so set "
          "B's output never enters the merge",
          merge_out_a_twice),
    Entry("merge_attention_states", "right", "logaddexp-float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked-softmax-einsum", None,
          merge_stacked_softmax),
    Entry("online_softmax_attention", "wrong", "block-relative-key-positions",
          "the causal mask compares the query's position with the key's index inside the "
          "block (0..b-1) instead of its absolute position start + j, so later blocks are "
          "masked as if they were the first",
          online_block_relative_keys),
    Entry("online_softmax_attention", "wrong", "acc-not-rescaled",
          "rescales the running sum by exp(m - m') when the maximum grows but adds the new "
          "block to the accumulator without rescaling it, so old blocks keep a stale weight",
          online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "top-left-causal",
          "the causal mask compares key j with query i directly (top-left aligned) instead of "
          "with i + N_k - N_q, so with N_q != N_k the queries see the wrong keys",
          online_top_left_mask),
    Entry("online_softmax_attention", "wrong", "unguarded-final-division",
          "divides acc by row_sum without guarding rows that saw no key, so a causal query "
          "with no visible key returns 0/0 = NaN instead of zeros",
          online_unguarded_division),
    Entry("online_softmax_attention", "wrong", "running-max-not-stored",
          "never stores the new maximum back into the running max, so every block rescales "
          "the old totals by exp(-inf) = 0 and only the last block survives",
          online_max_never_updated),
    Entry("online_softmax_attention", "wrong", "returns-compute-dtype",
          "accumulates in float32 as asked but returns that float32 tensor instead of "
          "casting back to q's dtype (half-precision inputs come back as float32)",
          online_returns_compute_dtype),
    Entry("online_softmax_attention", "right", "merge-of-normalised-blocks", None,
          online_merge_blocks_lse),
    Entry("online_softmax_attention", "right", "float64-einsum-rank3-state", None,
          online_per_row_loop_f64),
]
