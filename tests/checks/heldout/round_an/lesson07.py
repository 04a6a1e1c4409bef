"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_naive_logsumexp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    ea = torch.exp(la)
    eb = torch.exp(lb)
    tot = ea + eb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(dt) + (eb / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(a, b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(a - m), torch.exp(b - m)
    s = wa + wb
    lse = m + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    out = (wa / s) * out_a.to(compute) + (wb / s) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unguarded_max(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    big = torch.maximum(la, lb)
    wa = torch.exp(la - big)
    wb = torch.exp(lb - big)
    total = wa + wb
    lse = big + torch.log(total)
    out = (wa / total).unsqueeze(-1) * out_a.to(c) + (wb / total).unsqueeze(-1) * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_shift_not_added_back(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    lse_a_, lse_b_ = lse_a.to(work), lse_b.to(work)
    top = torch.maximum(lse_a_, lse_b_)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    w_a = torch.exp(lse_a_ - top)
    w_b = torch.exp(lse_b_ - top)
    total = w_a + w_b
    lse = torch.log(total)
    denom = torch.where(total == 0, torch.ones_like(total), total)
    out = (w_a / denom)[..., None] * out_a.to(work) + (w_b / denom)[..., None] * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_cast_back(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(f)
    lb = lse_b.to(f)
    hi = torch.maximum(la, lb)
    hi = hi.masked_fill(torch.isinf(hi), 0.0)
    pa = torch.exp(la - hi)
    pb = torch.exp(lb - hi)
    z = pa + pb
    lse = hi + torch.log(z)
    z = z.masked_fill(z == 0, 1.0)
    out = (pa / z)[..., None] * out_a.to(f) + (pb / z)[..., None] * out_b.to(f)
    return out, lse


def merge_out_a_twice(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    lse_a32, lse_b32 = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(lse_a32, lse_b32)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(lse_a32 - shift)
    w_b = torch.exp(lse_b32 - shift)
    total = w_a + w_b
    lse = shift + torch.log(total)
    safe = torch.where(total == 0, 1.0, total)
    out = (w_a / safe)[..., None] * out_a.to(compute) + (w_b / safe)[..., None] * out_a.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logaddexp_float64(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)
    empty = torch.isneginf(lse)
    lse_safe = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(a), torch.exp(a - lse_safe))
    wb = torch.where(empty, torch.zeros_like(b), torch.exp(b - lse_safe))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    lses = torch.stack([lse_a.to(ct), lse_b.to(ct)], dim=-1)  # (..., N_q, 2)
    outs = torch.stack([out_a.to(ct), out_b.to(ct)], dim=-2)  # (..., N_q, 2, d_v)
    merged_lse = torch.logsumexp(lses, dim=-1)
    mix = torch.nan_to_num(torch.softmax(lses, dim=-1), nan=0.0)  # all -inf rows: NaN -> 0
    merged = torch.einsum("...s,...sd->...d", mix, outs)
    return merged.to(out_a.dtype), merged_lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_acc_not_rescaled(q, k, v, block_size=64, causal=False):
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
        kb = k[:, :, s0:s1].to(ct)
        vb = v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - m_safe)
        corr = torch.exp(m - m_safe)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    out = acc / torch.where(l == 0, 1.0, l)
    return out.to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    compute = torch.promote_types(q.dtype, torch.float32)
    b, h, n_q, d = q.shape
    n_k = k.shape[-2]
    q_ = q.to(compute) * d ** -0.5
    row_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=compute)
    row_sum = torch.zeros((b, h, n_q, 1), dtype=compute)
    acc = torch.zeros((b, h, n_q, d), dtype=compute)
    rows = torch.arange(n_q).unsqueeze(1)
    for start in range(0, n_k, block_size):
        stop = min(n_k, start + block_size)
        scores = q_ @ k[:, :, start:stop].to(compute).transpose(-1, -2)
        if causal:
            cols = torch.arange(start, stop).unsqueeze(0)
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + w.sum(dim=-1, keepdim=True)
        acc = acc * r + w @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) * (1.0 / math.sqrt(D))
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=dt)
    sm = torch.zeros((B, H, Nq, 1), dtype=dt)
    ac = torch.zeros((B, H, Nq, D), dtype=dt)
    qpos = torch.arange(Nq)[:, None] + Nk - Nq
    for j in range(0, Nk - block_size + 1, block_size):
        kb = k[:, :, j:j + block_size].to(dt)
        vb = v[:, :, j:j + block_size].to(dt)
        s = qq @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j, j + block_size)[None, :] > qpos, -math.inf)
        nm = torch.maximum(mx, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        e = torch.exp(s - sh)
        f = torch.exp(mx - sh)
        sm = sm * f + e.sum(-1, keepdim=True)
        ac = ac * f + e @ vb
        mx = nm
    return (ac / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_unguarded_final_division(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) / math.sqrt(d)
    running_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    running_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q_scaled @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(running_max - shift)
        running_sum = running_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        running_max = new_max
    return (acc / running_sum).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qw = q.to(work) / math.sqrt(d)
    row_max = torch.full((B, H, n_q, 1), -math.inf, dtype=work)
    denom = torch.zeros((B, H, n_q, 1), dtype=work)
    numer = torch.zeros((B, H, n_q, d), dtype=work)
    qpos = torch.arange(n_q).view(-1, 1) + (n_k - n_q)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = torch.matmul(qw, k[:, :, lo:hi].to(work).transpose(2, 3))
        if causal:
            s = s.masked_fill(torch.arange(lo, hi).view(1, -1) > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        e = torch.exp(s - base)
        scale = torch.exp(row_max - base)
        denom = denom * scale + e.sum(-1, keepdim=True)
        numer = numer * scale + torch.matmul(e, v[:, :, lo:hi].to(work))
        row_max = new_max
    return numer / torch.where(denom == 0, torch.ones_like(denom), denom)


def online_sum_over_queries(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(compute) * (1.0 / math.sqrt(d))
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=compute)
    l = torch.zeros((b, h, n_q, 1), dtype=compute)
    o = torch.zeros((b, h, n_q, d), dtype=compute)
    pos_q = torch.arange(n_q)[:, None] + (n_k - n_q)
    for st in range(0, n_k, block_size):
        en = min(st + block_size, n_k)
        s = qs @ k[:, :, st:en].to(compute).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(st, en)[None, :] > pos_q, -math.inf)
        m2 = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(m2), 0.0, m2)
        p = torch.exp(s - sh)
        a = torch.exp(m - sh)
        l = l * a + p.sum(dim=-2, keepdim=True)
        o = o * a + p @ v[:, :, st:en].to(compute)
        m = m2
    return (o / torch.where(l == 0, 1.0, l)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Each block is normalised on its own (out, lse) and merged into the running state."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    qd = q.double() / math.sqrt(d)
    run_out = torch.zeros((B, H, nq, d), dtype=torch.float64)
    run_lse = torch.full((B, H, nq), -math.inf, dtype=torch.float64)
    offset = nk - nq
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        s = torch.einsum("bhqd,bhkd->bhqk", qd, k[:, :, start:stop].double())
        if causal:
            keys = torch.arange(start, stop)
            qs = torch.arange(nq) + offset
            visible = keys[None, :] <= qs[:, None]
            s = torch.where(visible, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)
        p = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, start:stop].double())
        new_lse = torch.logaddexp(run_lse, blk_lse)
        ok = torch.isfinite(new_lse)
        ref = torch.where(ok, new_lse, torch.zeros_like(new_lse))
        wa = torch.where(ok, torch.exp(run_lse - ref), torch.zeros_like(ref))
        wb = torch.where(ok, torch.exp(blk_lse - ref), torch.zeros_like(ref))
        run_out = wa[..., None] * run_out + wb[..., None] * blk_out
        run_lse = new_lse
    return run_out.to(q.dtype)


def online_reverse_block_order(q, k, v, block_size=64, causal=False):
    """Keys visited from the last block to the first: exact attention ignores the order."""
    nb, nh, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) * (d ** -0.5)
    best = torch.full((nb, nh, n_q, 1), -math.inf, dtype=c)
    total = torch.zeros((nb, nh, n_q, 1), dtype=c)
    num = torch.zeros((nb, nh, n_q, d), dtype=c)
    starts = list(range(0, n_k, block_size))
    for start in reversed(starts):
        stop = min(start + block_size, n_k)
        s = torch.einsum("bhid,bhjd->bhij", qs, k[:, :, start:stop].to(c))
        if causal:
            hide = torch.arange(start, stop)[None, :] - torch.arange(n_q)[:, None] > n_k - n_q
            s = s.masked_fill(hide, -math.inf)
        top = torch.maximum(best, s.max(dim=-1, keepdim=True).values)
        ref = top.clone()
        ref[torch.isinf(ref)] = 0.0
        e = torch.exp(s - ref)
        old = torch.exp(best - ref)
        total = old * total + e.sum(-1, keepdim=True)
        num = old * num + torch.einsum("bhij,bhjd->bhid", e, v[:, :, start:stop].to(c))
        best = top
    total = torch.where(total > 0, total, torch.ones_like(total))
    return (num / total).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive_logsumexp",
          "exponentiates the raw log-sum-exps (log(exp(lse_a) + exp(lse_b))) without subtracting "
          "the larger one first, so lse of about 1e4 overflows to inf and the weights become "
          "inf/inf = NaN", merge_naive_logsumexp),
    Entry("merge_attention_states", "wrong", "no_trailing_axis",
          "multiplies the per-row weights (..., N_q) straight into out (..., N_q, d_v) without a "
          "trailing axis, so they broadcast against d_v and the call raises", merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "unguarded_max",
          "subtracts max(lse_a, lse_b) without replacing -inf by 0, so a row where both sets are "
          "empty gives exp(-inf - (-inf)) = NaN instead of a zero row and -inf", merge_unguarded_max),
    Entry("merge_attention_states", "wrong", "shift_not_added_back",
          "returns log(w_a + w_b) as the merged lse and forgets to add back the max it subtracted",
          merge_shift_not_added_back),
    Entry("merge_attention_states", "wrong", "no_cast_back",
          "computes in float32 but returns out and lse in float32, not in the inputs' dtypes "
          "(float16 / bfloat16 inputs come back as float32)", merge_no_cast_back),
    Entry("merge_attention_states", "wrong", "out_a_twice",
          "copy-paste slip: the second term multiplies w_b into out_a instead of out_b",
          merge_out_a_twice),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_float64),
    Entry("merge_attention_states", "right", "stacked_softmax_einsum", None, merge_stacked_softmax),
    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum when the max grows but adds each block into acc without "
          "multiplying the old acc by exp(old_max - new_max)", online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "the causal mask compares key j with query i itself (top-left aligned), forgetting the "
          "N_k - N_q offset, so it is wrong whenever N_q != N_k", online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "drops_ragged_block",
          "the block loop runs range(0, N_k - block_size + 1, block_size), so the shorter last "
          "block of keys is never visited when block_size does not divide N_k",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "unguarded_final_division",
          "divides acc by row_sum without guarding row_sum == 0, so a query with no visible key "
          "gives 0/0 = NaN instead of a zero row", online_unguarded_final_division),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "accumulates in float32 as asked but never casts back: half-precision inputs return "
          "float32 instead of q's dtype", online_returns_float32),
    Entry("online_softmax_attention", "wrong", "sum_over_queries",
          "sums each block's exponentials over dim=-2 (the queries) instead of dim=-1 (the keys) "
          "for the running sum, so row_sum gets the wrong shape: the division by it raises or "
          "broadcasts wrongly", online_sum_over_queries),
    Entry("online_softmax_attention", "right", "merge_block_states_float64", None,
          online_merge_block_states),
    Entry("online_softmax_attention", "right", "reverse_block_order_einsum", None,
          online_reverse_block_order),
]
