"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================== merge_attention_states: wrong
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    ea, eb = torch.exp(la), torch.exp(lb)  # slip: no max subtracted
    tot = ea + eb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe).unsqueeze(-1) * out_a.to(ct) + (eb / safe).unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stack_wrong_dim(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    both = torch.stack([lse_a.to(ct), lse_b.to(ct)])  # (2, ..., N_q)
    lse = torch.logsumexp(both, dim=-1)  # slip: reduces N_q, not the A/B axis
    finite = torch.isfinite(lse)
    ref = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.exp(lse_a.to(ct) - ref)
    wb = torch.exp(lse_b.to(ct) - ref)
    out = wa[..., None] * out_a.to(ct) + wb[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_nan_both_empty(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(a, b)
    wa = torch.exp(a - m)  # slip: -inf - (-inf) = NaN where both sets are empty
    wb = torch.exp(b - m)
    s = wa + wb
    lse = m + torch.log(s)
    out = (wa / s)[..., None] * out_a.to(compute) + (wb / s)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(a - top), torch.exp(b - top)
    lse = top + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(compute) + wb[..., None] * out_b.to(compute)  # slip: / (wa+wb) missing
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(a - top), torch.exp(b - top)
    total = wa + wb
    lse = top + torch.log(total)
    total = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / total)[..., None] * out_a.to(compute) + (wb / total)[..., None] * out_b.to(compute)
    return out, lse  # slip: not cast back to the inputs' dtypes


def merge_swapped_weights(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(a - top), torch.exp(b - top)
    total = wa + wb
    lse = top + torch.log(total)
    total = torch.where(total == 0, torch.ones_like(total), total)
    # slip: A's weight multiplies B's output and vice versa
    out = (wb / total)[..., None] * out_a.to(compute) + (wa / total)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================== merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    empty = torch.isneginf(lse)
    ref = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(la), torch.exp(la - ref))
    wb = torch.where(empty, torch.zeros_like(lb), torch.exp(lb - ref))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_softmax_pair(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    pair = torch.stack((lse_a.to(compute), lse_b.to(compute)), dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(pair, dim=-1)
    w = torch.nan_to_num(torch.softmax(pair, dim=-1), nan=0.0)  # (..., N_q, 2)
    outs = torch.stack((out_a.to(compute), out_b.to(compute)), dim=-2)  # (..., N_q, 2, d_v)
    out = (w.unsqueeze(-2) @ outs).squeeze(-2)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_no_rescale(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, v.shape[-1]), dtype=ct)
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
        acc = acc + p @ v[:, :, s0:s1].to(ct)  # slip: old acc not rescaled by alpha
        m = m_new
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, v.shape[-1]), dtype=ct)
    qpos = torch.arange(nq)[:, None]  # slip: no + (N_k - N_q): mask aligned top-left
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
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def online_no_scale(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct)  # slip: scores not divided by sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, v.shape[-1]), dtype=ct)
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
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, v.shape[-1]), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for j in range(nk // block_size):  # slip: the last, shorter block is never visited
        s0, s1 = j * block_size, (j + 1) * block_size
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
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def online_nan_empty_rows(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, v.shape[-1]), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        p = torch.exp(sc - m_new)  # slip: a row with max -inf gives -inf - (-inf) = NaN
        alpha = torch.exp(m - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def online_sum_no_keepdim(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, v.shape[-1]), dtype=ct)
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
        l = l * alpha + p.sum(-1)  # slip: keepdim dropped, (..., N_q) broadcasts against (..., N_q, 1)
        acc = acc * alpha + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_merge_normalised_f64(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and a log-sum-exp per row, merging each key block into it."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    qq = q.double() / math.sqrt(d)
    out = torch.zeros(B, H, nq, v.shape[-1], dtype=torch.float64)
    lse = torch.full((B, H, nq), -math.inf, dtype=torch.float64)
    rows = torch.arange(nq).unsqueeze(1) + nk - nq
    start = 0
    while start < nk:
        stop = min(nk, start + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", qq, k[:, :, start:stop].double())
        if causal:
            s = s.masked_fill(torch.arange(start, stop).unsqueeze(0) > rows, -math.inf)
        blse = torch.logsumexp(s, dim=-1)  # (B, H, nq), -inf where the block is all masked
        bref = torch.where(torch.isneginf(blse), torch.zeros_like(blse), blse)
        bout = torch.einsum("bhqk,bhkd->bhqd", torch.exp(s - bref[..., None]),
                            v[:, :, start:stop].double())
        new = torch.logaddexp(lse, blse)
        nref = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
        w_old = torch.where(torch.isneginf(new), torch.zeros_like(new), torch.exp(lse - nref))
        w_blk = torch.where(torch.isneginf(new), torch.zeros_like(new), torch.exp(blse - nref))
        out = w_old[..., None] * out + w_blk[..., None] * bout
        lse = new
        start = stop
    return out.to(q.dtype)


def online_per_head_loops(q, k, v, block_size=64, causal=False):
    """Python loops over batch and heads; 2-D running max / sum per head."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    result = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d)
    for b in range(B):
        for h in range(H):
            qh = q[b, h].float() if q.dtype != torch.float64 else q[b, h]
            ct = qh.dtype
            run_max = torch.full((nq,), -float("inf"), dtype=ct)
            run_sum = torch.zeros(nq, dtype=ct)
            num = torch.zeros(nq, v.shape[-1], dtype=ct)
            for lo in range(0, nk, block_size):
                hi = min(lo + block_size, nk)
                s = (qh @ k[b, h, lo:hi].to(ct).T) * scale
                if causal:
                    keep = torch.arange(lo, hi)[None, :] <= torch.arange(nq)[:, None] + (nk - nq)
                    s = torch.where(keep, s, torch.tensor(-float("inf"), dtype=ct))
                mx = torch.maximum(run_max, s.max(dim=1).values)
                safe = torch.nan_to_num(mx, neginf=0.0)
                e = torch.exp(s - safe[:, None])
                c = torch.exp(run_max - safe)
                run_sum = run_sum * c + e.sum(1)
                num = num * c[:, None] + e @ v[b, h, lo:hi].to(ct)
                run_max = mx
            den = torch.where(run_sum > 0, run_sum, torch.ones_like(run_sum))
            result[b, h] = (num / den[:, None]).to(q.dtype)
    return result


M = "merge_attention_states"
O = "online_softmax_attention"
ENTRIES = [
    Entry(M, "wrong", "exp_without_shift", "The weights are exp(lse_a) and exp(lse_b) with no "
          "maximum subtracted, so log-sum-exps near 1e4 overflow to inf and the merge gives NaN.",
          merge_no_shift),
    Entry(M, "wrong", "logsumexp_over_query_axis", "The two lse are stacked on a new first axis "
          "but logsumexp reduces dim=-1, the query axis, instead of the A/B axis, so lse has the "
          "wrong shape and the weights built from it fail to broadcast (the code raises).", merge_stack_wrong_dim),
    Entry(M, "wrong", "nan_when_both_empty", "The shift is the raw maximum of the two lse, so a "
          "row where both sets are empty computes exp(-inf - (-inf)) = NaN instead of a zero row "
          "and -inf.", merge_nan_both_empty),
    Entry(M, "wrong", "weights_not_normalised", "The outputs are weighted by exp(lse - max) but "
          "never divided by their sum, so the merged row is not a convex combination of out_a "
          "and out_b.", merge_unnormalised),
    Entry(M, "wrong", "result_left_in_float32", "The merge is computed in float32 but the result "
          "is never cast back, so half-precision inputs come back as float32 instead of their own "
          "dtype.", merge_keeps_float32),
    Entry(M, "wrong", "weights_swapped", "A's weight exp(lse_a - lse) multiplies out_b and B's "
          "multiplies out_a: the two weights are paired with the wrong outputs.",
          merge_swapped_weights),
    Entry(M, "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry(M, "right", "softmax_over_the_pair", None, merge_softmax_pair),
    Entry(O, "wrong", "accumulator_not_rescaled", "When a block raises the running maximum the "
          "running sum is rescaled by exp(old_max - new_max) but the output accumulator is not, "
          "so earlier blocks keep too much weight.", online_no_rescale),
    Entry(O, "wrong", "causal_mask_top_left", "The causal mask compares key j with query i "
          "without the N_k - N_q offset, so when N_q != N_k it is aligned top-left instead of "
          "bottom-right.", online_causal_top_left),
    Entry(O, "wrong", "no_sqrt_d_scale", "The scores q k^T are never divided by sqrt(d).",
          online_no_scale),
    Entry(O, "wrong", "ragged_last_block_dropped", "The loop runs over N_k // block_size full "
          "blocks only, so the keys of a shorter last block are never attended to.",
          online_drops_ragged_block),
    Entry(O, "wrong", "nan_for_rows_without_keys", "exp(scores - running_max) is taken without "
          "guarding a running max of -inf, so a row whose keys are all masked so far gets NaN "
          "(-inf - -inf) instead of zeros.", online_nan_empty_rows),
    Entry(O, "wrong", "row_sum_without_keepdim", "The block's row sum is taken without "
          "keepdim=True, so the (..., N_q) sum is broadcast against the (..., N_q, 1) running sum "
          "and the update raises a size-mismatch error.", online_sum_no_keepdim),
    Entry(O, "right", "merge_normalised_blocks_float64", None, online_merge_normalised_f64),
    Entry(O, "right", "loops_over_batch_and_heads", None, online_per_head_loops),
]
