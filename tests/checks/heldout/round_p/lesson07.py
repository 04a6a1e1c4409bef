"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry

INF = float("inf")


# ============================================================ merge_attention_states: wrong
def merge_no_max_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(ct))
    eb = torch.exp(lse_b.to(ct))
    tot = ea + eb
    lse = torch.log(tot)
    den = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / den)[..., None] * out_a.to(ct) + (eb / den)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_weight_wrong_axis(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    tot = wa + wb
    lse = m + torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe).unsqueeze(-2) * out_a.to(ct) + (wb / safe).unsqueeze(-2) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa = torch.exp(la - top)
    wb = torch.exp(lb - top)
    lse = top + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(ct) + wb[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    big = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(big), torch.zeros_like(big), big)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    tot = wa + wb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe)[..., None] * out_a.to(ct) + (wb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), big.to(lse_a.dtype)


def merge_float32_result(out_a, lse_a, out_b, lse_b):
    oa, ob = out_a.float(), out_b.float()
    la, lb = lse_a.float(), lse_b.float()
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    tot = wa + wb
    lse = top + torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe)[..., None] * oa + (wb / safe)[..., None] * ob
    return out, lse


def merge_unguarded_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    tot = wa + wb
    lse = top + torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe)[..., None] * out_a.to(ct) + (wb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    dead = torch.isneginf(lse)
    ref = torch.where(dead, torch.zeros_like(lse), lse)
    share_a = torch.where(dead, torch.zeros_like(lse), torch.exp(la - ref))
    share_b = torch.where(dead, torch.zeros_like(lse), torch.exp(lb - ref))
    out = torch.einsum("...q,...qd->...qd", share_a, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", share_b, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid_gate(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    both_empty = torch.isneginf(la) & torch.isneginf(lb)
    gap = torch.where(both_empty, torch.zeros_like(la), la - lb)
    gate = torch.sigmoid(gap)  # share of set A; 1 if B is empty, 0 if A is
    hi = torch.maximum(la, lb)
    lse = hi + torch.log1p(torch.exp(-gap.abs()))
    lse = torch.where(both_empty, torch.full_like(lse, -INF), lse)
    oa, ob = out_a.to(ct), out_b.to(ct)
    out = ob + gate.unsqueeze(-1) * (oa - ob)
    out = torch.where(both_empty.unsqueeze(-1), torch.zeros_like(out), out)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_max_overwritten_first(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -INF, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -INF)
        m = torch.maximum(m, sc.amax(-1, keepdim=True))
        ref = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(sc - ref)
        alpha = torch.exp(m - ref)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, s0:s1].to(ct)
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    row_max = torch.full((B, H, nq, 1), -INF, dtype=ct)
    row_sum = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    query_pos = torch.arange(nq)[:, None]
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        scores = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -INF)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - shift)
        scale = torch.exp(row_max - shift)
        row_sum = row_sum * scale + w.sum(dim=-1, keepdim=True)
        acc = acc * scale + w @ v[:, :, start:stop].to(ct)
        row_max = new_max
    out = acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
    return out.to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    mx = torch.full((b, h, n_q, 1), -INF, dtype=ct)
    sm = torch.zeros((b, h, n_q, 1), dtype=ct)
    acc = torch.zeros((b, h, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    n_blocks = max(1, n_k // block_size)
    for j in range(n_blocks):
        lo, hi = j * block_size, min((j + 1) * block_size, n_k)
        sc = qs @ k[:, :, lo:hi].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -INF)
        new = torch.maximum(mx, sc.amax(-1, keepdim=True))
        ref = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        e = torch.exp(sc - ref)
        r = torch.exp(mx - ref)
        sm = sm * r + e.sum(-1, keepdim=True)
        acc = acc * r + e @ v[:, :, lo:hi].to(ct)
        mx = new
    return (acc / torch.where(sm == 0, torch.ones_like(sm), sm)).to(q.dtype)


def online_scale_by_nq(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(q.shape[2])
    row_max = torch.full((B, H, nq, 1), -INF, dtype=ct)
    row_sum = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        scores = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -INF)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - shift)
        resc = torch.exp(row_max - shift)
        row_sum = row_sum * resc + w.sum(dim=-1, keepdim=True)
        acc = acc * resc + w @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)).to(q.dtype)


def online_unguarded_final_divide(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    row_max = torch.full((B, H, nq, 1), -INF, dtype=ct)
    row_sum = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        scores = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -INF)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - shift)
        resc = torch.exp(row_max - shift)
        row_sum = row_sum * resc + w.sum(dim=-1, keepdim=True)
        acc = acc * resc + w @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def online_keeps_float32(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    row_max = torch.full((B, H, nq, 1), -INF, dtype=ct)
    row_sum = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        scores = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -INF)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - shift)
        resc = torch.exp(row_max - shift)
        row_sum = row_sum * resc + w.sum(dim=-1, keepdim=True)
        acc = acc * resc + w @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)


# ============================================================ online_softmax_attention: right
def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Each key block gives a normalised (out, lse); fold them in with the merge rule."""
    nq, d = q.shape[2], q.shape[3]
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(ct)
    run_out = torch.zeros(q.shape, dtype=ct)
    run_lse = torch.full(q.shape[:3], -INF, dtype=ct)
    visible_upto = torch.arange(nq).unsqueeze(1) + (nk - nq)
    for lo in range(0, nk, block_size):
        kb = k[:, :, lo:lo + block_size].to(ct)
        vb = v[:, :, lo:lo + block_size].to(ct)
        s = torch.einsum("bhqd,bhkd->bhqk", qq, kb) / math.sqrt(d)
        if causal:
            keys = torch.arange(lo, lo + kb.shape[2]).unsqueeze(0)
            s = torch.where(keys <= visible_upto, s, torch.full_like(s, -INF))
        blk_lse = torch.logsumexp(s, dim=-1)
        ref = torch.where(torch.isneginf(blk_lse), torch.zeros_like(blk_lse), blk_lse)
        p = torch.exp(s - ref.unsqueeze(-1))
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, vb)
        new_lse = torch.logaddexp(run_lse, blk_lse)
        dead = torch.isneginf(new_lse)
        base = torch.where(dead, torch.zeros_like(new_lse), new_lse)
        wa = torch.where(dead, torch.zeros_like(base), torch.exp(run_lse - base))
        wb = torch.where(dead, torch.zeros_like(base), torch.exp(blk_lse - base))
        run_out = wa.unsqueeze(-1) * run_out + wb.unsqueeze(-1) * blk_out
        run_lse = new_lse
    return run_out.to(q.dtype)


def online_float64_nan_to_num(q, k, v, block_size=64, causal=False):
    """Running max / sum in float64, the NaNs of all-masked rows zeroed afterwards."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    inv = d ** -0.5
    m = torch.full(q.shape[:-1] + (1,), -INF, dtype=torch.float64)
    z = torch.zeros_like(m)
    o = torch.zeros(q.shape, dtype=torch.float64)
    start = 0
    while start < n_k:
        end = start + block_size if start + block_size < n_k else n_k
        s = torch.matmul(q64, k64[..., start:end, :].transpose(-1, -2)) * inv
        if causal:
            allowed = torch.ones(n_q, end - start, dtype=torch.bool).tril(n_k - n_q + -start)
            s = s.masked_fill(~allowed, -INF)
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        corr = torch.nan_to_num(torch.exp(m - m_new), nan=0.0)
        p = torch.nan_to_num(torch.exp(s - m_new), nan=0.0)
        z = corr * z + p.sum(dim=-1, keepdim=True)
        o = corr * o + torch.matmul(p, v64[..., start:end, :])
        m = m_new
        start = end
    o = torch.where(z > 0, o / z.clamp_min(1e-300), torch.zeros_like(o))
    return o.to(q.dtype)


E = "merge_attention_states"
O = "online_softmax_attention"
ENTRIES = [
    Entry(E, "wrong", "no_max_shift", "It exponentiates the log-sum-exps directly "
          "(exp(lse_a) + exp(lse_b)) without subtracting the larger one first, so lse of about "
          "1e4 overflows to inf and the outputs become NaN.", merge_no_max_shift),
    Entry(E, "wrong", "weight_axis_unsqueeze(-2)", "The per-row weights get their new axis in "
          "the wrong place (unsqueeze(-2), shape (..., 1, N_q)) instead of a trailing one, so "
          "they do not line up with the rows of out: the product raises a shape error (or "
          "mixes rows when N_q == d_v).", merge_weight_wrong_axis),
    Entry(E, "wrong", "unnormalised_mix", "It mixes the outputs with exp(lse_set - max) but "
          "never divides by their sum exp(lse_a - max) + exp(lse_b - max), so the merged out "
          "is not a weighted average of out_a and out_b.", merge_unnormalised),
    Entry(E, "wrong", "lse_is_max", "The returned lse is the larger of lse_a and lse_b, the "
          "shift, instead of log(e^lse_a + e^lse_b): the log of the summed weights is never "
          "added.", merge_lse_is_max),
    Entry(E, "wrong", "float32_result", "It computes in float32 and returns the float32 "
          "tensors as they are, not cast back to out_a's and lse_a's dtype (float64 and half "
          "inputs come back float32).", merge_float32_result),
    Entry(E, "wrong", "unguarded_shift", "The shift is the larger lse without the -inf guard: "
          "on a row where both sets are empty it computes exp(-inf - (-inf)) = NaN, so that row "
          "gives NaN instead of zeros and -inf.", merge_unguarded_shift),
    Entry(E, "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry(E, "right", "sigmoid_gate", None, merge_sigmoid_gate),
    Entry(O, "wrong", "max_updated_before_rescale", "row_max is overwritten with the new "
          "maximum before the rescale factor is taken, so the factor is exp(new - new) = 1 and "
          "row_sum and acc are never rescaled when a block raises the maximum.",
          online_max_overwritten_first),
    Entry(O, "wrong", "causal_top_left", "The causal mask compares key positions with the bare "
          "query index i (top-left aligned) instead of i + N_k - N_q, so with N_q != N_k the "
          "queries see the wrong keys.", online_causal_top_left),
    Entry(O, "wrong", "ragged_block_dropped", "It loops over n_k // block_size blocks, so the "
          "last, shorter block of keys is never visited when N_k is not a multiple of "
          "block_size.", online_drops_ragged_block),
    Entry(O, "wrong", "scale_by_sqrt_nq", "The scores are divided by sqrt(q.shape[2]) (the "
          "number of queries) instead of sqrt(d), the last axis.", online_scale_by_nq),
    Entry(O, "wrong", "unguarded_final_divide", "The final acc / row_sum has no guard for "
          "rows that saw no key (row_sum == 0): with a causal mask and N_q > N_k those rows "
          "come out 0/0 = NaN instead of zeros.", online_unguarded_final_divide),
    Entry(O, "wrong", "returns_float32", "It accumulates in float32 but returns that tensor "
          "without casting back to q's dtype, so float16 / bfloat16 inputs come back as "
          "float32.", online_keeps_float32),
    Entry(O, "right", "merge_block_states", None, online_merge_block_states),
    Entry(O, "right", "float64_nan_to_num", None, online_float64_nan_to_num),
]
