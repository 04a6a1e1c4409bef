"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================================ merge_attention_states
def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(dt))
    eb = torch.exp(lse_b.to(dt))
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * out_a.to(dt) + (eb / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    s = wa + wb
    lse = m + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    out = (wa / s) * out_a.to(ct) + (wb / s) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_both_empty_nan(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(work), lse_b.to(work)
    top = torch.maximum(a, b)
    w_a = torch.exp(a - top)
    w_b = torch.exp(b - top)
    tot = w_a + w_b
    lse = top + torch.log(tot)
    out = (w_a / tot).unsqueeze(-1) * out_a.to(work) + (w_b / tot).unsqueeze(-1) * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), 0.0, hi)
    wa = torch.exp(la - hi)
    wb = torch.exp(lb - hi)
    lse = hi + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(dt) + wb[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_without_shift(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    ea, eb = torch.exp(la - mx), torch.exp(lb - mx)
    denom = ea + eb
    lse = torch.log(denom)
    denom = torch.where(denom == 0, 1.0, denom)
    out = (ea / denom)[..., None] * out_a.to(dt) + (eb / denom)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stays_float32(out_a, lse_a, out_b, lse_b):
    oa, ob = out_a.float(), out_b.float()
    la, lb = lse_a.float(), lse_b.float()
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), 0.0, m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    s = wa + wb
    lse = m + torch.log(s)
    s = torch.where(s == 0, 1.0, s)
    out = (wa / s)[..., None] * oa + (wb / s)[..., None] * ob
    return out, lse


def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    # exp(-inf - (-inf)) is NaN: those rows have no key at all, their weights are 0
    wa = torch.nan_to_num(torch.exp(la - lse), nan=0.0)
    wb = torch.nan_to_num(torch.exp(lb - lse), nan=0.0)
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    lses = torch.stack([lse_a.to(ct), lse_b.to(ct)], dim=-1)  # (..., N_q, 2)
    outs = torch.stack([out_a.to(ct), out_b.to(ct)], dim=-1)  # (..., N_q, d_v, 2)
    lse = torch.logsumexp(lses, dim=-1)
    w = torch.nan_to_num(torch.softmax(lses, dim=-1), nan=0.0)  # (..., N_q, 2)
    out = torch.einsum("...ds,...s->...d", outs, w)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================================ online_softmax_attention
def osa_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s in range(0, nk, block_size):
        e = min(s + block_size, nk)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - shift)
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s:e].to(ct)
        m = m_new
    out = acc / torch.where(l == 0, 1.0, l)
    return out.to(q.dtype)


def osa_top_left_causal(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    run_max = torch.full((B, H, nq, 1), float("-inf"), dtype=ct)
    run_sum = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    rows = torch.arange(nq)[:, None]
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-1, -2)
        if causal:
            cols = torch.arange(start, stop)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), 0.0, new_max)
        p = torch.exp(s - safe)
        r = torch.exp(run_max - safe)
        run_sum = run_sum * r + p.sum(dim=-1, keepdim=True)
        acc = acc * r + p @ v[:, :, start:stop].to(ct)
        run_max = new_max
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


def osa_drops_ragged_block(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(dt) / math.sqrt(d)
    mx = torch.full((batch, heads, n_q, 1), -math.inf, dtype=dt)
    den = torch.zeros((batch, heads, n_q, 1), dtype=dt)
    num = torch.zeros((batch, heads, n_q, d), dtype=dt)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    n_blocks = max(n_k // block_size, 1)
    for blk in range(n_blocks):
        lo = blk * block_size
        hi = min(lo + block_size, n_k)
        kb = k[:, :, lo:hi].to(dt)
        vb = v[:, :, lo:hi].to(dt)
        sc = qf @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        mnew = torch.maximum(mx, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(mnew), 0.0, mnew)
        w = torch.exp(sc - sh)
        fix = torch.exp(mx - sh)
        den = den * fix + w.sum(-1, keepdim=True)
        num = num * fix + w @ vb
        mx = mnew
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def osa_unguarded_division(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    row_max = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((B, H, Nq, 1), dtype=ct)
    acc = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for j in range(0, Nk, block_size):
        kb = k[:, :, j:j + block_size].to(ct)
        vb = v[:, :, j:j + block_size].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(j, j + kb.shape[2])[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        p = torch.exp(s - shift)
        scale = torch.exp(row_max - shift)
        row_sum = row_sum * scale + p.sum(-1, keepdim=True)
        acc = acc * scale + p @ vb
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def osa_amax_no_keepdim(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m_i = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    l_i = torch.zeros((B, H, Nq, 1), dtype=ct)
    o_i = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for start in range(0, Nk, block_size):
        stop = min(Nk, start + block_size)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m_i, s.amax(dim=-1))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - sh)
        c = torch.exp(m_i - sh)
        l_i = l_i * c + p.sum(dim=-1, keepdim=True)
        o_i = o_i * c + p @ v[:, :, start:stop].to(ct)
        m_i = m_new
    return (o_i / torch.where(l_i == 0, 1.0, l_i)).to(q.dtype)


def osa_returns_float32(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.float() / math.sqrt(d)
    kf, vf = k.float(), v.float()
    best = torch.full((b, h, n_q, 1), -math.inf)
    total = torch.zeros((b, h, n_q, 1))
    acc = torch.zeros((b, h, n_q, d))
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        sc = qs @ kf[:, :, s0:s1].transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        nb = torch.maximum(best, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nb), 0.0, nb)
        w = torch.exp(sc - sh)
        f = torch.exp(best - sh)
        total = total * f + w.sum(-1, keepdim=True)
        acc = acc * f + w @ vf[:, :, s0:s1]
        best = nb
    return acc / torch.where(total == 0, 1.0, total)


def osa_einsum_float64(q, k, v, block_size=64, causal=False):
    """Classic running max / running sum, in float64 with einsum."""
    n_q, d = q.shape[2], q.shape[3]
    n_k = k.shape[2]
    q64 = q.double()
    m = q64.new_full(q.shape[:3], -math.inf)  # (B, H, N_q)
    l = q64.new_zeros(q.shape[:3])
    acc = q64.new_zeros(q.shape)
    offset = n_k - n_q
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].double()
        vb = v[:, :, start:start + block_size].double()
        s = torch.einsum("bhqd,bhkd->bhqk", q64, kb) / math.sqrt(d)
        if causal:
            i = torch.arange(n_q).view(-1, 1)
            j = torch.arange(start, start + kb.shape[2]).view(1, -1)
            s = torch.where(j <= i + offset, s, torch.tensor(-math.inf, dtype=s.dtype))
        m_new = torch.maximum(m, s.max(dim=-1).values)
        base = torch.nan_to_num(m_new, neginf=0.0)
        p = torch.exp(s - base[..., None])
        corr = torch.exp(m - base)
        l = l * corr + p.sum(-1)
        acc = acc * corr[..., None] + torch.einsum("bhqk,bhkd->bhqd", p, vb)
        m = m_new
    l = torch.where(l > 0, l, torch.ones_like(l))
    return (acc / l[..., None]).to(q.dtype)


def osa_merge_lse_blocks(q, k, v, block_size=64, causal=False):
    """Each key block gives a normalised (out, lse); fold them in with a log-sum-exp merge."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    out = torch.zeros((B, H, n_q, d), dtype=ct)
    lse = torch.full((B, H, n_q), -math.inf, dtype=ct)
    last_visible = torch.arange(n_q) + (n_k - n_q)  # (N_q,)
    start = 0
    while start < n_k:
        stop = min(n_k, start + block_size)
        s = qs @ k[:, :, start:stop].to(ct).transpose(2, 3)
        if causal:
            hidden = torch.arange(start, stop).unsqueeze(0) > last_visible.unsqueeze(1)
            s = s.masked_fill(hidden, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf where the block shows nothing
        p = torch.nan_to_num(torch.exp(s - blk_lse.unsqueeze(-1)), nan=0.0)
        blk_out = p @ v[:, :, start:stop].to(ct)
        new_lse = torch.logaddexp(lse, blk_lse)
        wa = torch.nan_to_num(torch.exp(lse - new_lse), nan=0.0).unsqueeze(-1)
        wb = torch.nan_to_num(torch.exp(blk_lse - new_lse), nan=0.0).unsqueeze(-1)
        out = wa * out + wb * blk_out
        lse = new_lse
        start = stop
    return out.to(q.dtype)


E = "merge_attention_states"
O = "online_softmax_attention"
ENTRIES = [
    Entry(E, "wrong", "naive_exp_overflow",
          "exponentiates the raw log-sum-exps without subtracting the larger one first, so "
          "lse values near 1e4 overflow to inf and the output turns into NaN", merge_naive_exp),
    Entry(E, "wrong", "weights_without_trailing_axis",
          "multiplies the per-row weights (..., N_q) straight into out (..., N_q, d_v) "
          "without a trailing axis, so they line up with d_v instead of the rows (a "
          "broadcasting error when N_q != d_v)", merge_no_trailing_axis),
    Entry(E, "wrong", "both_empty_gives_nan",
          "subtracts the larger lse without replacing -inf by 0, so a row where both sets are "
          "empty computes -inf - (-inf) and returns NaN instead of zeros and -inf",
          merge_both_empty_nan),
    Entry(E, "wrong", "forgets_to_renormalise",
          "weights each output by exp(lse_set - max) but never divides by their sum, "
          "forgetting that out_a and out_b are already normalised", merge_unnormalised),
    Entry(E, "wrong", "lse_missing_shift",
          "returns log(w_a + w_b) as the merged log-sum-exp without adding back the maximum "
          "that was subtracted", merge_lse_without_shift),
    Entry(E, "wrong", "returns_float32",
          "computes with .float() and returns the float32 results without casting back to "
          "the inputs' dtypes (float16, bfloat16 and float64 inputs come back as float32)",
          merge_stays_float32),
    Entry(E, "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry(E, "right", "stacked_softmax_einsum", None, merge_stacked_softmax),
    Entry(O, "wrong", "acc_not_rescaled",
          "rescales the running sum when the maximum grows but adds the new block into the "
          "accumulator without multiplying the old accumulator by exp(old_max - new_max)",
          osa_acc_not_rescaled),
    Entry(O, "wrong", "causal_top_left",
          "aligns the causal mask top-left (key j > query i is hidden) instead of "
          "bottom-right (j > i + N_k - N_q), so it is wrong whenever N_q != N_k",
          osa_top_left_causal),
    Entry(O, "wrong", "drops_ragged_last_block",
          "loops over N_k // block_size blocks, so the keys of a shorter last block are "
          "never visited", osa_drops_ragged_block),
    Entry(O, "wrong", "unguarded_final_division",
          "divides acc by row_sum without guarding rows that saw no key, so a query with no "
          "visible key gives 0/0 = NaN instead of zeros", osa_unguarded_division),
    Entry(O, "wrong", "amax_without_keepdim",
          "takes the block maximum with amax(dim=-1) without keepdim=True, so it broadcasts "
          "against row_max (B, H, N_q, 1) on the wrong axes (a shape error, or a wrong "
          "shape)", osa_amax_no_keepdim),
    Entry(O, "wrong", "returns_float32",
          "computes in float32 with .float() and returns that, not q's dtype (float16, "
          "bfloat16 and float64 inputs come back as float32)", osa_returns_float32),
    Entry(O, "right", "einsum_float64", None, osa_einsum_float64),
    Entry(O, "right", "merge_block_lse", None, osa_merge_lse_blocks),
]
