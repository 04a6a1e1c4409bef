"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================== merge_attention_states
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(ct))
    eb = torch.exp(lse_b.to(ct))
    tot = ea + eb
    den = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / den)[..., None] * out_a.to(ct) + (eb / den)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), torch.log(tot).to(lse_a.dtype)


def merge_lse_keeps_axis(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(ct)[..., None]  # (..., N_q, 1) so that it lines up with out
    lb = lse_b.to(ct)[..., None]
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    s = wa + wb
    lse = m + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    out = wa / s * out_a.to(ct) + wb / s * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    w_a = torch.exp(la - top)
    w_b = torch.exp(lb - top)
    total = w_a + w_b
    lse = top + torch.log(total)
    out = (w_a / total)[..., None] * out_a.to(ct) + (w_b / total)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_returns_float32(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    lse_a32, lse_b32 = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(lse_a32, lse_b32)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    w_a = torch.exp(lse_a32 - shift)
    w_b = torch.exp(lse_b32 - shift)
    total = w_a + w_b
    lse = shift + torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (w_a / safe)[..., None] * out_a.to(compute) + (w_b / safe)[..., None] * out_b.to(compute)
    return out, lse


def merge_not_renormalised(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    big = torch.maximum(a, b)
    big = torch.where(torch.isinf(big), torch.zeros_like(big), big)
    wa = torch.exp(a - big)
    wb = torch.exp(b - big)
    lse = big + torch.log(wa + wb)
    out = wa.unsqueeze(-1) * out_a.to(ct) + wb.unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_copy_paste_weight(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa = torch.exp(la - shift)
    wb = torch.exp(la - shift)
    total = torch.exp(la - shift) + torch.exp(lb - shift)
    lse = shift + torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / safe)[..., None] * out_a.to(ct) + (wb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)  # -inf where both are -inf
    finite = torch.isfinite(lse)
    safe_lse = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.where(finite, torch.exp(a - safe_lse), torch.zeros_like(a))
    wb = torch.where(finite, torch.exp(b - safe_lse), torch.zeros_like(b))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    lses = torch.stack([lse_a.to(ct), lse_b.to(ct)], dim=-1)  # (..., N_q, 2)
    outs = torch.stack([out_a.to(ct), out_b.to(ct)], dim=-2)  # (..., N_q, 2, d_v)
    merged_lse = torch.logsumexp(lses, dim=-1)
    w = torch.nan_to_num(torch.softmax(lses, dim=-1), nan=0.0)  # both empty -> 0
    out = torch.einsum("...s,...sd->...d", w, outs)
    return out.to(out_a.dtype), merged_lse.to(lse_a.dtype)


# ============================================================== online_softmax_attention
def online_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, Nq, 1), dtype=ct)
    acc = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) * (1.0 / math.sqrt(d))
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    query_pos = torch.arange(n_q)[:, None]  # query i is at position i
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q_scaled @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    out = acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
    return out.to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) / math.sqrt(d)
    mx = torch.full((b, h, nq, 1), float("-inf"), dtype=dt)
    sm = torch.zeros((b, h, nq, 1), dtype=dt)
    acc = torch.zeros((b, h, nq, d), dtype=dt)
    qpos = torch.arange(nq).unsqueeze(1) + nk - nq
    n_blocks = nk // block_size
    for j in range(n_blocks):
        lo, hi = j * block_size, (j + 1) * block_size
        s = qq @ k[:, :, lo:hi].to(dt).transpose(2, 3)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi).unsqueeze(0) > qpos, float("-inf"))
        new = torch.maximum(mx, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        e = torch.exp(s - sh)
        r = torch.exp(mx - sh)
        sm = sm * r + e.sum(-1, keepdim=True)
        acc = acc * r + e @ v[:, :, lo:hi].to(dt)
        mx = new
    return (acc / torch.where(sm == 0, torch.ones_like(sm), sm)).to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) / math.sqrt(d)
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
        weights = torch.exp(scores - new_max)
        rescale = torch.exp(row_max - new_max)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def online_returns_compute_dtype(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(f) * d ** -0.5
    run_max = torch.full((B, H, Nq, 1), -math.inf, dtype=f)
    run_sum = torch.zeros((B, H, Nq, 1), dtype=f)
    acc = torch.zeros((B, H, Nq, d), dtype=f)
    offset = Nk - Nq
    for start in range(0, Nk, block_size):
        kb = k[:, :, start:start + block_size].to(f)
        vb = v[:, :, start:start + block_size].to(f)
        s = torch.matmul(qs, kb.transpose(-2, -1))
        if causal:
            qi = torch.arange(Nq)[:, None]
            kj = torch.arange(start, start + kb.shape[2])[None, :]
            s = torch.where(kj <= qi + offset, s, torch.full_like(s, -math.inf))
        m = torch.maximum(run_max, s.amax(-1, keepdim=True))
        m0 = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(s - m0)
        alpha = torch.exp(run_max - m0)
        run_sum = alpha * run_sum + p.sum(-1, keepdim=True)
        acc = alpha * acc + torch.matmul(p, vb)
        run_max = m
    return acc / torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)


def online_scale_wrong_axis(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[2])
    q_scaled = q.to(compute) * scale
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q_scaled @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > query_pos,
                                        -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    out = acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
    return out.to(q.dtype)


def online_merge_states_per_block(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and a running log-sum-exp; merges each block's state."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    out = torch.zeros((B, H, Nq, d), dtype=ct)
    lse = torch.full((B, H, Nq), -math.inf, dtype=ct)
    rows = torch.arange(Nq).view(-1, 1) + (Nk - Nq)
    for lo in range(0, Nk, block_size):
        hi = min(lo + block_size, Nk)
        s = torch.einsum("bhqd,bhkd->bhqk", qs, k[:, :, lo:hi].to(ct))
        if causal:
            visible = torch.arange(lo, hi).view(1, -1) <= rows
            s = torch.where(visible, s, torch.full_like(s, -math.inf))
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf for a row that sees nothing here
        ok = torch.isfinite(blk_lse)
        p = torch.exp(s - torch.where(ok, blk_lse, torch.zeros_like(blk_lse))[..., None])
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, lo:hi].to(ct))
        new_lse = torch.logaddexp(lse, blk_lse)
        fin = torch.isfinite(new_lse)
        base = torch.where(fin, new_lse, torch.zeros_like(new_lse))
        w_old = torch.where(fin, torch.exp(lse - base), torch.zeros_like(base))
        w_blk = torch.where(fin, torch.exp(blk_lse - base), torch.zeros_like(base))
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_float64_loop(q, k, v, block_size=64, causal=False):
    """Everything in float64, masks with torch.where, explicit bookkeeping per block."""
    nq, d = q.shape[2], q.shape[3]
    nk = k.shape[2]
    q64, k64, v64 = q.double(), k.double(), v.double()
    scale = 1.0 / math.sqrt(d)
    running_max = q64.new_full(q.shape[:3] + (1,), -math.inf)
    running_sum = q64.new_zeros(q.shape[:3] + (1,))
    numerator = q64.new_zeros(q.shape)
    starts = list(range(0, nk, block_size))
    for start in starts:
        kb = k64[:, :, start:start + block_size]
        vb = v64[:, :, start:start + block_size]
        s = torch.matmul(q64, kb.transpose(2, 3)) * scale
        if causal:
            i = torch.arange(nq).unsqueeze(-1)
            j = torch.arange(start, start + kb.shape[2]).unsqueeze(0)
            s = torch.where(j - i <= nk - nq, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_max = s.max(dim=-1, keepdim=True).values
        new_max = torch.maximum(running_max, blk_max)
        ref = torch.nan_to_num(new_max, neginf=0.0)
        e = torch.exp(s - ref)
        c = torch.exp(running_max - ref)
        running_sum = c * running_sum + e.sum(dim=-1, keepdim=True)
        numerator = c * numerator + torch.matmul(e, vb)
        running_max = new_max
    denom = running_sum.clone()
    denom[denom == 0] = 1.0
    return (numerator / denom).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "no_max_shift",
          "exponentiates the raw log-sum-exps without subtracting the larger one first, so "
          "lse values around 1e4 overflow exp to inf and the merged output becomes NaN",
          merge_no_shift),
    Entry("merge_attention_states", "wrong", "lse_keeps_trailing_axis",
          "gives lse_a and lse_b the trailing axis at the start and never removes it, so the "
          "returned lse has shape (..., N_q, 1) instead of (..., N_q)",
          merge_lse_keeps_axis),
    Entry("merge_attention_states", "wrong", "no_both_empty_guard",
          "shifts by the larger lse without replacing -inf by 0, so a row where both sets are "
          "empty computes exp(-inf - (-inf)) = NaN instead of a zero row and -inf",
          merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "returns_compute_dtype",
          "does the arithmetic in float32 but forgets to cast out and lse back to the inputs' "
          "dtype, so float16 / bfloat16 inputs come back as float32",
          merge_returns_float32),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "multiplies each output by exp(lse_set - max) but never divides by their sum "
          "(exp(lse_set - lse)), so the merged output is not a convex combination",
          merge_not_renormalised),
    Entry("merge_attention_states", "wrong", "copy_paste_weight_b",
          "copy-pastes the line for w_a and computes w_b from lse_a instead of lse_b, so set "
          "B's output gets set A's weight",
          merge_copy_paste_weight),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked_softmax_einsum", None,
          merge_stacked_softmax),
    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum when the maximum grows but adds each block into acc "
          "without multiplying the old acc by exp(old_max - new_max)",
          online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "aligns the causal mask top-left (query i sees keys j <= i) instead of bottom-right "
          "(j <= i + N_k - N_q), which is wrong whenever N_q != N_k",
          online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "drops_ragged_last_block",
          "loops over N_k // block_size full blocks only, so the keys of a shorter last block "
          "are never visited",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "no_masked_row_guard",
          "subtracts the running max even when it is still -inf, so a query that sees no key "
          "gets exp(-inf + inf) = NaN (and 0/0) instead of a row of zeros",
          online_no_inf_guard),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "accumulates in float32 but returns acc / row_sum without casting back to q's dtype, "
          "so half-precision inputs come back as float32",
          online_returns_compute_dtype),
    Entry("online_softmax_attention", "wrong", "scale_uses_n_q",
          "scales the scores by 1/sqrt(q.shape[2]), the number of queries, instead of "
          "1/sqrt(d) = 1/sqrt(q.shape[-1])",
          online_scale_wrong_axis),
    Entry("online_softmax_attention", "right", "merge_states_per_block", None,
          online_merge_states_per_block),
    Entry("online_softmax_attention", "right", "float64_where_masks", None, online_float64_loop),
]
