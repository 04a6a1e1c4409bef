"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------- merge_attention_states
def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    ea, eb = torch.exp(la), torch.exp(lb)
    tot = ea + eb
    lse = torch.log(tot)
    denom = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / denom)[..., None] * out_a.to(ct) + (eb / denom)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_nan_both_empty(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    s = wa + wb
    lse = m + torch.log(s)
    out = (wa / s).unsqueeze(-1) * out_a.to(ct) + (wb / s).unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_forgets_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    total = wa + wb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / safe)[..., None] * out_a.to(ct) + (wb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    total = wa + wb
    lse = top + torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / safe) * out_a.to(ct) + (wb / safe) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_reuses_weight_a(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(work), lse_b.to(work)
    hi = torch.maximum(a, b)
    hi = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    alpha = torch.exp(a - hi)
    beta = torch.exp(b - hi)
    z = alpha + beta
    lse = hi + torch.log(z)
    z = torch.where(z == 0, torch.ones_like(z), z)
    fa = (alpha / z)[..., None]
    fb = (beta / z)[..., None]
    out = fa * out_a.to(work) + fa * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_returns_compute_dtype(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    total = wa + wb
    lse = top + torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / safe)[..., None] * out_a.to(ct) + (wb / safe)[..., None] * out_b.to(ct)
    return out, lse


def merge_right_logaddexp(out_a, lse_a, out_b, lse_b):
    la = lse_a.double()
    lb = lse_b.double()
    lse = torch.logaddexp(la, lb)
    finite = torch.isfinite(lse)
    ref = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.where(finite, torch.exp(la - ref), torch.zeros_like(la))
    wb = torch.where(finite, torch.exp(lb - ref), torch.zeros_like(lb))
    merged = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return merged.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_right_stacked_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a, lse_b]).to(torch.float64)  # (2, ..., N_q)
    outs = torch.stack([out_a, out_b]).to(torch.float64)  # (2, ..., N_q, d_v)
    total_lse = torch.logsumexp(lses, dim=0)
    share = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)
    merged = (share[..., None] * outs).sum(dim=0)
    return merged.to(out_a.dtype), total_lse.to(lse_a.dtype)


# ----------------------------------------------------------------- online_softmax_attention
def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
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
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def osa_top_left_causal(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    run_out = torch.zeros((b, h, n_q, d), dtype=dt)
    rows = torch.arange(n_q).unsqueeze(1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        scores = (q.to(dt) @ k[:, :, lo:hi].to(dt).transpose(-2, -1)) * scale
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, scores.amax(dim=-1, keepdim=True))
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        e = torch.exp(scores - safe_max)
        corr = torch.exp(run_max - safe_max)
        run_sum = run_sum * corr + e.sum(dim=-1, keepdim=True)
        run_out = run_out * corr + e @ v[:, :, lo:hi].to(dt)
        run_max = new_max
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (run_out / run_sum).to(q.dtype)


def osa_nan_on_empty_rows(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        p = torch.exp(sc - m_new)
        alpha = torch.exp(m - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return (acc / l).to(q.dtype)


def osa_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for blk in range(nk // block_size):
        s0, s1 = blk * block_size, (blk + 1) * block_size
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(sc - sh)
        alpha = torch.exp(m - sh)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def osa_stale_row_max(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    row_max = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        sc = qs @ k[:, :, start:stop].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, sc.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        p = torch.exp(sc - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        acc = acc * rescale + p @ v[:, :, start:stop].to(ct)
    out = acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
    return out.to(q.dtype)


def osa_keeps_float32(q, k, v, block_size=64, causal=False):
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
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(sc - sh)
        alpha = torch.exp(m - sh)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return acc / torch.where(l == 0, torch.ones_like(l), l)


def osa_right_einsum_float64(q, k, v, block_size=64, causal=False):
    nb, nh, n_q, dim = q.shape
    n_k = k.shape[2]
    q64, k64, v64 = q.double(), k.double(), v.double()
    best = torch.full((nb, nh, n_q), -math.inf, dtype=torch.float64)
    denom = torch.zeros((nb, nh, n_q), dtype=torch.float64)
    numer = torch.zeros((nb, nh, n_q, dim), dtype=torch.float64)
    offset = n_k - n_q
    start = 0
    while start < n_k:
        stop = min(n_k, start + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k64[:, :, start:stop]) / math.sqrt(dim)
        if causal:
            qi = torch.arange(n_q).view(-1, 1)
            kj = torch.arange(start, stop).view(1, -1)
            s = torch.where(kj <= qi + offset, s, torch.full_like(s, -math.inf))
        cand = torch.maximum(best, s.max(dim=-1).values)
        ref = torch.nan_to_num(cand, neginf=0.0)
        w = torch.exp(s - ref[..., None])
        keep = torch.exp(best - ref)
        denom = denom * keep + w.sum(-1)
        numer = numer * keep[..., None] + torch.einsum("bhqk,bhkd->bhqd", w, v64[:, :, start:stop])
        best = cand
        start = stop
    denom = torch.where(denom > 0, denom, torch.ones_like(denom))
    return (numer / denom[..., None]).to(q.dtype)


def osa_right_merge_states(q, k, v, block_size=64, causal=False):
    d = q.shape[-1]
    n_q, n_k = q.shape[2], k.shape[2]
    qf = q.to(torch.float64) * (1.0 / math.sqrt(d))
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full(q.shape[:-1], -math.inf, dtype=torch.float64)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        kb = k[:, :, lo:hi].to(torch.float64)
        vb = v[:, :, lo:hi].to(torch.float64)
        s = qf @ kb.transpose(-2, -1)
        if causal:
            ok = (torch.arange(lo, hi)[None, :] - torch.arange(n_q)[:, None]) <= (n_k - n_q)
            s = s.masked_fill(~ok, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_out = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0) @ vb
        new_lse = torch.logaddexp(lse, blk_lse)
        good = torch.isfinite(new_lse)
        base = torch.where(good, new_lse, torch.zeros_like(new_lse))
        w_old = torch.where(good, torch.exp(lse - base), torch.zeros_like(base))
        w_new = torch.where(good, torch.exp(blk_lse - base), torch.zeros_like(base))
        out = w_old[..., None] * out + w_new[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_of_raw_lse",
          "exponentiates the raw log-sum-exps without subtracting the larger one first, so "
          "exp(1e4) overflows to inf and the merged rows become NaN", merge_naive_exp),
    Entry("merge_attention_states", "wrong", "no_guard_both_empty",
          "subtracts the larger log-sum-exp without replacing -inf by 0, so a row where both "
          "sets are empty computes exp(-inf - (-inf)) = NaN instead of a zero row and -inf",
          merge_nan_both_empty),
    Entry("merge_attention_states", "wrong", "lse_forgets_shift",
          "returns log(w_a + w_b) as the merged log-sum-exp but forgets to add back the "
          "maximum it subtracted", merge_lse_forgets_shift),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "multiplies the (..., N_q) weights straight into the (..., N_q, d_v) outputs without "
          "a trailing axis, so they broadcast along d_v (a shape error, or wrong rows when "
          "N_q == d_v)", merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "weight_a_used_twice",
          "multiplies out_b by set A's weight too (fa where fb belongs), so B's output is "
          "weighted as if it were A's", merge_reuses_weight_a),
    Entry("merge_attention_states", "wrong", "returns_compute_dtype",
          "never casts back: out and lse come back in the float32 compute dtype for float16 / "
          "bfloat16 inputs instead of the inputs' dtypes", merge_returns_compute_dtype),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_right_logaddexp),
    Entry("merge_attention_states", "right", "stacked_softmax", None,
          merge_right_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "accumulator_not_rescaled",
          "rescales the running sum by exp(m - m') when the max grows but adds the new block "
          "to the accumulator without rescaling it, so earlier blocks keep too much weight",
          osa_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "masks key j > i (top-left) instead of j > i + N_k - N_q, so the causal mask is "
          "misaligned whenever N_q != N_k", osa_top_left_causal),
    Entry("online_softmax_attention", "wrong", "no_guard_empty_rows",
          "subtracts a running max that is still -inf for a row with no visible key and "
          "divides by a zero sum, so those rows become NaN instead of zeros",
          osa_nan_on_empty_rows),
    Entry("online_softmax_attention", "wrong", "drops_ragged_last_block",
          "loops over N_k // block_size full blocks only, so the keys of a shorter last block "
          "are never visited", osa_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "running_max_never_updated",
          "never stores the new maximum back into row_max, so every block rescales from -inf "
          "(factor 0) and only the last block survives", osa_stale_row_max),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "returns the float32 accumulator without casting back, so float16 / bfloat16 inputs "
          "get a float32 result instead of q's dtype", osa_keeps_float32),
    Entry("online_softmax_attention", "right", "einsum_float64_while", None,
          osa_right_einsum_float64),
    Entry("online_softmax_attention", "right", "merge_block_states", None,
          osa_right_merge_states),
]
