"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================== merge_attention_states: wrong
def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(ct))
    eb = torch.exp(lse_b.to(ct))
    tot = ea + eb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(ct) + (eb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    lse = m + torch.log(wa + wb)
    out = wa.unsqueeze(-1) * out_a.to(dt) + wb.unsqueeze(-1) * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(a - top), torch.exp(b - top)
    total = wa + wb
    lse = top + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    out = (wa / total) * out_a.to(compute) + (wb / total) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_nan_both_empty(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    lse_a_, lse_b_ = lse_a.to(f), lse_b.to(f)
    biggest = torch.maximum(lse_a_, lse_b_)
    alpha = torch.exp(lse_a_ - biggest)
    beta = torch.exp(lse_b_ - biggest)
    s = alpha + beta
    new_lse = biggest + torch.log(s)
    merged = (alpha / s)[..., None] * out_a.to(f) + (beta / s)[..., None] * out_b.to(f)
    return merged.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_float32_result(out_a, lse_a, out_b, lse_b):
    oa, ob = out_a.float(), out_b.float()
    la, lb = lse_a.float(), lse_b.float()
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    ea, eb = torch.exp(la - mx), torch.exp(lb - mx)
    z = ea + eb
    lse = mx + torch.log(z)
    z = torch.where(z == 0, torch.ones_like(z), z)
    out = (ea / z)[..., None] * oa + (eb / z)[..., None] * ob
    return out, lse


def merge_lse_without_max(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    x, y = lse_a.to(work), lse_b.to(work)
    ref = torch.maximum(x, y)
    ref = torch.where(torch.isinf(ref), 0.0, ref)
    px, py = torch.exp(x - ref), torch.exp(y - ref)
    norm = px + py
    lse = torch.log(norm)
    norm = torch.where(norm == 0, 1.0, norm)
    out = (px / norm)[..., None] * out_a.to(work) + (py / norm)[..., None] * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================== merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la = lse_a.double()
    lb = lse_b.double()
    lse = torch.logaddexp(la, lb)
    wa = torch.nan_to_num(torch.exp(la - lse), nan=0.0)
    wb = torch.nan_to_num(torch.exp(lb - lse), nan=0.0)
    out = wa[..., None] * out_a.double() + wb[..., None] * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    lses = torch.stack([lse_a.to(ct), lse_b.to(ct)], dim=0)  # (2, ..., N_q)
    outs = torch.stack([out_a.to(ct), out_b.to(ct)], dim=0)  # (2, ..., N_q, d_v)
    total = torch.logsumexp(lses, dim=0)
    w = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)
    out = torch.einsum("s...q,s...qd->...qd", w, outs)
    return out.to(out_a.dtype), total.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, Nq, 1), dtype=ct)
    acc = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s in range(0, Nk, block_size):
        e = min(s + block_size, Nk)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s:e].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    q32 = q.to(dt) * d ** -0.5
    row_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=dt)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=dt)
    acc = torch.zeros((batch, heads, n_q, d), dtype=dt)
    rows = torch.arange(n_q).unsqueeze(1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        scores = q32 @ k[:, :, lo:hi].to(dt).transpose(-1, -2)
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + w.sum(dim=-1, keepdim=True)
        acc = acc * r + w @ v[:, :, lo:hi].to(dt)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_drops_ragged_tail(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[-2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(cdt) / math.sqrt(d)
    mx = torch.full((B, H, n_q, 1), -math.inf, dtype=cdt)
    den = torch.zeros((B, H, n_q, 1), dtype=cdt)
    num = torch.zeros((B, H, n_q, d), dtype=cdt)
    offs = torch.arange(n_q)[:, None] + n_k - n_q
    n_blocks = max(n_k // block_size, 1)
    for j in range(n_blocks):
        a = j * block_size
        b = min(a + block_size, n_k)
        kb, vb = k[:, :, a:b].to(cdt), v[:, :, a:b].to(cdt)
        s = qq @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > offs, -math.inf)
        nm = torch.maximum(mx, s.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(nm), torch.zeros_like(nm), nm)
        e = torch.exp(s - base)
        c = torch.exp(mx - base)
        den = den * c + e.sum(-1, keepdim=True)
        num = num * c + e @ vb
        mx = nm
    return (num / torch.where(den == 0, torch.ones_like(den), den)).to(q.dtype)


def online_scale_by_seq_len(q, k, v, block_size=64, causal=False):
    b_, h_, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[-2])
    qs = q.to(ct) * scale
    run_max = torch.full((b_, h_, nq, 1), -math.inf, dtype=ct)
    run_sum = torch.zeros((b_, h_, nq, 1), dtype=ct)
    acc = torch.zeros((b_, h_, nq, d), dtype=ct)
    qp = torch.arange(nq)[:, None] + (nk - nq)
    start = 0
    while start < nk:
        stop = min(start + block_size, nk)
        sc = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(start, stop)[None, :] > qp, -math.inf)
        nm = torch.maximum(run_max, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        p = torch.exp(sc - sh)
        fac = torch.exp(run_max - sh)
        run_sum = run_sum * fac + p.sum(-1, keepdim=True)
        acc = acc * fac + p @ v[:, :, start:stop].to(ct)
        run_max = nm
        start = stop
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, Nq, 1), dtype=ct)
    o = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s in range(0, Nk, block_size):
        e = min(s + block_size, Nk)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        p = torch.exp(sc - m_new)
        alpha = torch.exp(m - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        o = o * alpha + p @ v[:, :, s:e].to(ct)
        m = m_new
    return (o / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_returns_compute_dtype(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, Nq, 1), dtype=ct)
    o = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s in range(0, Nk, block_size):
        e = min(s + block_size, Nk)
        sc = torch.einsum("bhqd,bhkd->bhqk", qs, k[:, :, s:e].to(ct))
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        alpha = torch.exp(m - sh)
        l = l * alpha + p.sum(-1, keepdim=True)
        o = o * alpha + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, s:e].to(ct))
        m = m_new
    return o / torch.where(l == 0, 1.0, l)


# ============================================================ online_softmax_attention: right
def online_merge_blocks_lse(q, k, v, block_size=64, causal=False):
    """Keeps a normalised (out, lse) pair and merges each key block into it, in float64."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full(q.shape[:-1], -math.inf, dtype=torch.float64)
    last_visible = torch.arange(n_q).view(-1, 1) + (n_k - n_q)
    for j0 in range(0, n_k, block_size):
        j1 = min(n_k, j0 + block_size)
        s = q64 @ k[..., j0:j1, :].double().transpose(-1, -2)
        if causal:
            hidden = torch.arange(j0, j1).view(1, -1) > last_visible
            s = s.masked_fill(hidden, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_out = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0) @ v[..., j0:j1, :].double()
        new_lse = torch.logaddexp(lse, blk_lse)
        w_old = torch.nan_to_num(torch.exp(lse - new_lse), nan=0.0)
        w_blk = torch.nan_to_num(torch.exp(blk_lse - new_lse), nan=0.0)
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_einsum_float64(q, k, v, block_size=64, causal=False):
    nb, nh, lq, dim = q.shape
    lk = k.shape[2]
    qd, kd, vd = q.double(), k.double(), v.double()
    best = torch.full((nb, nh, lq), -math.inf, dtype=torch.float64)
    denom = torch.zeros((nb, nh, lq), dtype=torch.float64)
    numer = torch.zeros((nb, nh, lq, dim), dtype=torch.float64)
    for blk in range(math.ceil(lk / block_size)):
        sl = slice(blk * block_size, min((blk + 1) * block_size, lk))
        s = torch.einsum("bhid,bhjd->bhij", qd, kd[:, :, sl]) / math.sqrt(dim)
        if causal:
            i = torch.arange(lq)[:, None]
            j = torch.arange(sl.start, sl.stop)[None, :]
            s = torch.where(j - i <= lk - lq, s, torch.tensor(-math.inf, dtype=torch.float64))
        cand = torch.maximum(best, s.max(dim=-1).values)
        ref = torch.where(cand == -math.inf, torch.zeros_like(cand), cand)
        e = torch.exp(s - ref[..., None])
        shrink = torch.exp(best - ref)
        denom = denom * shrink + e.sum(-1)
        numer = numer * shrink[..., None] + torch.einsum("bhij,bhjd->bhid", e, vd[:, :, sl])
        best = cand
    res = torch.zeros_like(numer)
    ok = denom > 0
    res[ok] = numer[ok] / denom[ok][..., None]
    return res.to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive_exp",
          "exponentiates the raw log-sum-exps without subtracting the larger one first, so "
          "lse values of about 1e4 overflow to inf and the merged output becomes NaN",
          merge_naive_exp),
    Entry("merge_attention_states", "wrong", "unnormalised_weights",
          "weights each output by exp(lse_set - max) but never divides by their sum, so the "
          "merged output is not a convex combination of out_a and out_b",
          merge_unnormalised),
    Entry("merge_attention_states", "wrong", "no_trailing_axis",
          "multiplies the per-row weights (..., N_q) straight into the (..., N_q, d_v) outputs "
          "without a trailing axis, so they line up with d_v instead of the rows (a shape "
          "error, or a silently wrong broadcast when the sizes happen to match)",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "nan_when_both_empty",
          "subtracts the larger lse without replacing -inf by 0, so a row where both sets are "
          "empty computes -inf - (-inf) and gives NaN instead of zeros and -inf",
          merge_nan_both_empty),
    Entry("merge_attention_states", "wrong", "float32_result",
          "converts everything with .float() and returns the float32 tensors without casting "
          "back, so float64 (and half) inputs get results in the wrong dtype",
          merge_float32_result),
    Entry("merge_attention_states", "wrong", "lse_missing_max",
          "returns log(w_a + w_b) as the merged log-sum-exp but forgets to add back the "
          "maximum that was subtracted before exponentiating",
          merge_lse_without_max),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked_softmax_einsum", None,
          merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum when the maximum grows but adds the new block to the "
          "accumulator without multiplying the old accumulator by exp(old_max - new_max)",
          online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "builds the causal mask with query i compared to key j directly (top-left aligned), "
          "forgetting the N_k - N_q offset, so causal cases with N_q != N_k are wrong",
          online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "drops_ragged_tail",
          "loops over n_k // block_size blocks, so when N_k is not a multiple of block_size "
          "the keys of the last, shorter block are never visited",
          online_drops_ragged_tail),
    Entry("online_softmax_attention", "wrong", "scale_by_seq_len",
          "scales the scores by 1/sqrt(q.shape[-2]), the number of queries, instead of "
          "1/sqrt(d), the head dimension",
          online_scale_by_seq_len),
    Entry("online_softmax_attention", "wrong", "no_inf_guard",
          "shifts by the running maximum without guarding the -inf case, so a query whose "
          "keys are all masked (so far or in total) computes -inf - (-inf) = NaN",
          online_no_inf_guard),
    Entry("online_softmax_attention", "wrong", "returns_compute_dtype",
          "accumulates in at least float32 but returns acc / row_sum without casting back, so "
          "half-precision inputs get a float32 result",
          online_returns_compute_dtype),
    Entry("online_softmax_attention", "right", "merge_blocks_lse", None,
          online_merge_blocks_lse),
    Entry("online_softmax_attention", "right", "einsum_float64", None, online_einsum_float64),
]
