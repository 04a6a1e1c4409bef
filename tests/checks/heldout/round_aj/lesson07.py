"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    ea = torch.exp(lse_a.double())
    eb = torch.exp(lse_b.double())
    tot = ea + eb
    lse = torch.log(tot)
    den = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / den)[..., None] * out_a.double() + (eb / den)[..., None] * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_zero_guard(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    s = wa + wb
    merged = (wa / s).unsqueeze(-1) * out_a.to(compute) + (wb / s).unsqueeze(-1) * out_b.to(compute)
    return merged.to(out_a.dtype), (m + torch.log(s)).to(lse_a.dtype)


def merge_lse_forgets_max(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(a, b)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w1, w2 = torch.exp(a - shift), torch.exp(b - shift)
    total = w1 + w2
    lse = torch.log(total)
    safe = torch.where(total == 0, 1.0, total)
    out = (w1 / safe)[..., None] * out_a.to(ct) + (w2 / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    hi = torch.maximum(a, b)
    hi0 = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    wa = torch.exp(a - hi0)
    wb = torch.exp(b - hi0)
    lse = hi0 + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(ct) + wb[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_copy_paste_lse(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(ct)
    lb = lse_b.to(ct)
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    alpha = torch.exp(la - mx)
    beta = torch.exp(la - mx)
    tot = alpha + beta
    lse = mx + torch.log(torch.exp(la - mx) + torch.exp(lb - mx))
    tot = torch.where(tot == 0, 1.0, tot)
    out = (alpha / tot)[..., None] * out_a.to(ct) + (beta / tot)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    total = wa + wb
    safe = torch.where(total == 0, 1.0, total)
    out = (wa / safe)[..., None] * out_a.to(ct) + (wb / safe)[..., None] * out_b.to(ct)
    return out, shift + torch.log(total)


# ============================================================ merge_attention_states: right
def merge_logaddexp(out_a, lse_a, out_b, lse_b):
    a = lse_a.to(torch.float64)
    b = lse_b.to(torch.float64)
    lse = torch.logaddexp(a, b)
    empty = torch.isneginf(lse)
    ref = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(a), torch.exp(a - ref))
    wb = torch.where(empty, torch.zeros_like(b), torch.exp(b - ref))
    out = torch.einsum("...n,...nd->...nd", wa, out_a.to(torch.float64)) + torch.einsum(
        "...n,...nd->...nd", wb, out_b.to(torch.float64))
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a.double(), lse_b.double()], dim=0)  # (2, ..., N_q)
    outs = torch.stack([out_a.double(), out_b.double()], dim=0)  # (2, ..., N_q, d_v)
    joint = torch.logsumexp(lses, dim=0)
    weights = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)
    merged = (weights.unsqueeze(-1) * outs).sum(dim=0)
    return merged.to(out_a.dtype), joint.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
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
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) * d ** -0.5
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    acc = torch.zeros((b, h, n_q, d), dtype=dt)
    rows = torch.arange(n_q)[:, None]
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = qq @ k[:, :, lo:hi].to(dt).transpose(-2, -1)
        if causal:
            cols = torch.arange(lo, hi)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), 0.0, new_max)
        e = torch.exp(s - safe)
        corr = torch.exp(run_max - safe)
        run_sum = run_sum * corr + e.sum(dim=-1, keepdim=True)
        acc = acc * corr + e @ v[:, :, lo:hi].to(dt)
        run_max = new_max
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


def online_floor_blocks(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    den = torch.zeros((B, H, Nq, 1), dtype=ct)
    num = torch.zeros((B, H, Nq, D), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + Nk - Nq
    for blk in range(Nk // block_size):
        lo = blk * block_size
        hi = min(lo + block_size, Nk)
        sc = qs @ k[:, :, lo:hi].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        nm = torch.maximum(mx, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        p = torch.exp(sc - sh)
        r = torch.exp(mx - sh)
        den = den * r + p.sum(-1, keepdim=True)
        num = num * r + p @ v[:, :, lo:hi].to(ct)
        mx = nm
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def online_no_scale(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(ct)
    row_max = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        scores = qf @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + w.sum(dim=-1, keepdim=True)
        acc = acc * rescale + w @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_unguarded_shift(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    o = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for j in range(0, nk, block_size):
        kb = k[:, :, j:j + block_size].to(ct)
        vb = v[:, :, j:j + block_size].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[2])[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        alpha = torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        o = alpha * o + p @ vb
        m = m_new
    return (o / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
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
        sc = qs @ k[:, :, s0:s1].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        r = torch.exp(m - sh)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, s0:s1].to(ct)
        m = m_new
    return acc / torch.where(l == 0, 1.0, l)


# ============================================================ online_softmax_attention: right
def online_merge_lse_blocks(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and its log-sum-exp per row; merges each block's pair in."""
    n_q, d = q.shape[2], q.shape[3]
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    run_out = torch.zeros(q.shape, dtype=torch.float64)
    run_lse = torch.full(q.shape[:3], -math.inf, dtype=torch.float64)
    limit = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)  # last visible key per query
    start = 0
    while start < n_k:
        stop = min(n_k, start + block_size)
        scores = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, start:stop].double())
        if causal:
            hidden = torch.arange(start, stop).unsqueeze(0) > limit
            scores = scores.masked_fill(hidden, -math.inf)
        blk_lse = torch.logsumexp(scores, dim=-1)  # -inf where the block is all hidden
        ok = ~torch.isneginf(blk_lse)
        probs = torch.exp(scores - torch.where(ok, blk_lse, 0.0).unsqueeze(-1))
        blk_out = torch.einsum("bhqk,bhkd->bhqd", probs, v[:, :, start:stop].double())
        new_lse = torch.logaddexp(run_lse, blk_lse)
        live = ~torch.isneginf(new_lse)
        ref = torch.where(live, new_lse, 0.0)
        a = torch.where(live, torch.exp(run_lse - ref), 0.0)
        b = torch.where(live, torch.exp(blk_lse - ref), 0.0)
        run_out = a.unsqueeze(-1) * run_out + b.unsqueeze(-1) * blk_out
        run_lse = new_lse
        start = stop
    return run_out.to(q.dtype)


def online_per_key_block_loop(q, k, v, block_size=64, causal=False):
    """Float64 running max / sum, with the mask built from tril of ones per block."""
    B, H, nq, d = q.shape
    nk = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    hi = None
    total = torch.zeros(B, H, nq, 1, dtype=torch.float64)
    acc = torch.zeros(B, H, nq, d, dtype=torch.float64)
    blocks = [(s, min(s + block_size, nk)) for s in range(0, nk, block_size)]
    for s, e in blocks:
        kb = k[:, :, s:e].double()
        vb = v[:, :, s:e].double()
        sc = torch.matmul(q.double(), kb.transpose(2, 3)) * scale
        if causal:
            allowed = torch.ones(nq, e - s, dtype=torch.bool).tril(nk - nq - s)
            sc = torch.where(allowed, sc, torch.tensor(-math.inf, dtype=torch.float64))
        blk_max = sc.max(dim=3, keepdim=True).values
        new_hi = blk_max if hi is None else torch.maximum(hi, blk_max)
        base = torch.nan_to_num(new_hi, neginf=0.0)
        ex = torch.exp(sc - base)
        if hi is not None:
            fac = torch.exp(hi - base)
            total = total * fac
            acc = acc * fac
        total = total + ex.sum(dim=3, keepdim=True)
        acc = acc + torch.matmul(ex, vb)
        hi = new_hi
    total = torch.where(total > 0, total, torch.ones_like(total))
    return (acc / total).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_without_max_shift",
          "exponentiates the raw log-sum-exps (exp(lse_a) + exp(lse_b)) without subtracting "
          "the larger one first, so lse values around 1e4 overflow to inf and the merge gives "
          "NaN", merge_no_shift),
    Entry("merge_attention_states", "wrong", "no_guard_on_zero_total",
          "divides the weights by their total without guarding total == 0, so a row where "
          "both sets are empty gives 0/0 = NaN instead of a zero row", merge_no_zero_guard),
    Entry("merge_attention_states", "wrong", "lse_forgets_the_max",
          "returns log(w_a + w_b) as the merged log-sum-exp and forgets to add back the "
          "maximum it subtracted, so lse is off by max(lse_a, lse_b)", merge_lse_forgets_max),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "mixes the outputs with exp(lse_set - max) instead of exp(lse_set - lse): the "
          "weights are not divided by their total, so the merged row is no longer a "
          "normalised average", merge_unnormalised),
    Entry("merge_attention_states", "wrong", "w_b_from_lse_a",
          "copy-paste slip: the weight of set B is computed from lse_a (exp(lse_a - max)), so "
          "both sets get A's weight", merge_copy_paste_lse),
    Entry("merge_attention_states", "wrong", "returns_compute_dtype",
          "does the arithmetic in float32 but never casts back, so float16 / bfloat16 inputs "
          "get float32 results instead of the inputs' dtypes", merge_keeps_float32),
    Entry("merge_attention_states", "right", "logaddexp_einsum", None, merge_logaddexp),
    Entry("merge_attention_states", "right", "stacked_softmax_over_sets", None,
          merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum by exp(old_max - new_max) but not the accumulator, so "
          "blocks seen before the maximum rose keep too much weight", online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "compares key index with the raw query index (key > i), a top-left causal mask, "
          "instead of the bottom-right alignment key > i + N_k - N_q", online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "floor_block_count",
          "loops over N_k // block_size blocks, so the shorter last block of keys is never "
          "visited when N_k is not a multiple of block_size", online_floor_blocks),
    Entry("online_softmax_attention", "wrong", "no_sqrt_d_scale",
          "never divides the scores by sqrt(d)", online_no_scale),
    Entry("online_softmax_attention", "wrong", "unguarded_infinite_max",
          "subtracts the running max without replacing -inf by 0, so a query row with no "
          "visible key computes exp(-inf - (-inf)) = NaN instead of a zero row",
          online_unguarded_shift),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "accumulates in float32 but returns acc / row_sum without casting back to q's "
          "dtype, so half-precision inputs get a float32 result", online_returns_float32),
    Entry("online_softmax_attention", "right", "merge_block_lse_states", None,
          online_merge_lse_blocks),
    Entry("online_softmax_attention", "right", "float64_tril_blocks", None,
          online_per_key_block_loop),
]
