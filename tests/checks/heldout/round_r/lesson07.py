"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_no_shift(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(compute))
    eb = torch.exp(lse_b.to(compute))
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * out_a.to(compute) + (eb / safe)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_keepdim(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(dt).unsqueeze(-1)  # (..., N_q, 1), handy for the outputs
    lb = lse_b.to(dt).unsqueeze(-1)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    tot = wa + wb
    lse = m + torch.log(tot)
    tot = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa * out_a.to(dt) + wb * out_b.to(dt)) / tot
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unguarded_shift(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(a, b)
    w_a = torch.exp(a - top)
    w_b = torch.exp(b - top)
    total = w_a + w_b
    lse = top + torch.log(total)
    out = (w_a / total)[..., None] * out_a.to(compute) + (w_b / total)[..., None] * out_b.to(
        compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_not_renormalised(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(a, b)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a, w_b = torch.exp(a - shift), torch.exp(b - shift)
    lse = shift + torch.log(w_a + w_b)
    out = w_a[..., None] * out_a.to(compute) + w_b[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_float32_result(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(work), lse_b.to(work)
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    pa, pb = torch.exp(la - hi), torch.exp(lb - hi)
    s = pa + pb
    new_lse = hi + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    new_out = (pa / s).unsqueeze(-1) * out_a.to(work) + (pb / s).unsqueeze(-1) * out_b.to(work)
    return new_out, new_lse


def merge_lse_without_shift(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(a, b)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a, w_b = torch.exp(a - shift), torch.exp(b - shift)
    total = w_a + w_b
    lse = torch.log(total)
    safe = torch.where(total == 0, 1.0, total)
    out = (w_a / safe)[..., None] * out_a.to(compute) + (w_b / safe)[..., None] * out_b.to(
        compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)  # -inf when both are -inf
    both_empty = torch.isneginf(lse)
    ref = torch.where(both_empty, torch.zeros_like(lse), lse)
    frac_a = torch.where(both_empty, torch.zeros_like(lse), torch.exp(la - ref))
    frac_b = torch.where(both_empty, torch.zeros_like(lse), torch.exp(lb - ref))
    out = torch.einsum("...q,...qd->...qd", frac_a, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", frac_b, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_softmax_over_sets(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    stacked = torch.stack([lse_a.to(dt), lse_b.to(dt)], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(stacked, dim=-1)
    weights = torch.nan_to_num(torch.softmax(stacked, dim=-1), nan=0.0)  # (..., N_q, 2)
    outs = torch.stack([out_a.to(dt), out_b.to(dt)], dim=-2)  # (..., N_q, 2, d_v)
    out = (weights.unsqueeze(-2) @ outs).squeeze(-2)  # (..., N_q, d_v)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((b, h, n_q, 1), dtype=ct)
    acc = torch.zeros((b, h, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
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


def osa_causal_top_left(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(compute) * d ** -0.5
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    rows = torch.arange(n_q)[:, None]
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q_s @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            cols = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(cols > rows, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + w.sum(dim=-1, keepdim=True)
        acc = acc * r + w @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def osa_floor_block_count(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(ct) / math.sqrt(d)
    mx = torch.full((B, H, Nq, 1), float("-inf"), dtype=ct)
    den = torch.zeros((B, H, Nq, 1), dtype=ct)
    num = torch.zeros((B, H, Nq, d), dtype=ct)
    qpos = torch.arange(Nq)[:, None] + Nk - Nq
    n_blocks = Nk // block_size
    for j in range(n_blocks):
        lo, hi = j * block_size, (j + 1) * block_size
        s = qq @ k[:, :, lo:hi].to(ct).transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, float("-inf"))
        mnew = torch.maximum(mx, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(mnew), torch.zeros_like(mnew), mnew)
        e = torch.exp(s - sh)
        c = torch.exp(mx - sh)
        den = den * c + e.sum(-1, keepdim=True)
        num = num * c + e @ v[:, :, lo:hi].to(ct)
        mx = mnew
    return (num / torch.where(den == 0, torch.ones_like(den), den)).to(q.dtype)


def osa_no_empty_row_guard(q, k, v, block_size=64, causal=False):
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
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > query_pos,
                                        -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        weights = torch.exp(scores - new_max)
        rescale = torch.exp(row_max - new_max)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def osa_softmax_per_block(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(f) / math.sqrt(d)
    out = torch.zeros((b, h, n_q, d), dtype=f)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qf @ k[:, :, start:stop].to(f).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
        out = out + p @ v[:, :, start:stop].to(f)
    return out.to(q.dtype)


def osa_concat_scores(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    blocks = []
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        blocks.append(s)
    scores = torch.cat(blocks, dim=-1)  # (B, H, N_q, N_k)
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(scores - top)
    tot = e.sum(-1, keepdim=True)
    out = (e @ v.to(ct)) / torch.where(tot == 0, 1.0, tot)
    return out.to(q.dtype)


# ============================================================ online_softmax_attention: right
def osa_flat_batch_f64(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    Q = q.reshape(B * H, n_q, d).double() / math.sqrt(d)
    K = k.reshape(B * H, n_k, d).double()
    V = v.reshape(B * H, n_k, d).double()
    run_max = torch.full((B * H, n_q, 1), -math.inf, dtype=torch.float64)
    run_sum = torch.zeros((B * H, n_q, 1), dtype=torch.float64)
    acc = torch.zeros((B * H, n_q, d), dtype=torch.float64)
    last_visible = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)  # query i sees j <= this
    j0 = 0
    while j0 < n_k:
        j1 = min(n_k, j0 + block_size)
        s = torch.bmm(Q, K[:, j0:j1].transpose(1, 2))
        if causal:
            keys = torch.arange(j0, j1).unsqueeze(0)
            s = torch.where(keys <= last_visible, s, torch.tensor(-math.inf, dtype=s.dtype))
        blk_max = s.max(dim=2, keepdim=True).values
        new_max = torch.maximum(run_max, blk_max)
        finite = torch.isfinite(new_max)
        base = torch.where(finite, new_max, torch.zeros_like(new_max))
        p = torch.exp(s - base)
        alpha = torch.exp(run_max - base)
        run_sum = alpha * run_sum + p.sum(dim=2, keepdim=True)
        acc = alpha * acc + torch.bmm(p, V[:, j0:j1])
        run_max = new_max
        j0 = j1
    out = torch.where(run_sum > 0, acc / run_sum.clamp_min(1e-300), torch.zeros_like(acc))
    return out.reshape(B, H, n_q, d).to(q.dtype)


def osa_lse_merging(q, k, v, block_size=64, causal=False):
    """Each block gives a normalised partial output and its log-sum-exp; merge them as they come."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qd = q.to(dt)
    out = torch.zeros(q.shape, dtype=dt)
    lse = torch.full(q.shape[:-1], -math.inf, dtype=dt)
    offset = n_k - n_q
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = torch.einsum("bhqd,bhkd->bhqk", qd, k[..., lo:hi, :].to(dt)) / math.sqrt(d)
        if causal:
            ok = torch.arange(lo, hi)[None, :] <= torch.arange(n_q)[:, None] + offset
            s = s.masked_fill(~ok, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf where the block has no visible key
        ref = torch.where(torch.isneginf(blk_lse), torch.zeros_like(blk_lse), blk_lse)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", torch.exp(s - ref[..., None]),
                               v[..., lo:hi, :].to(dt))
        new_lse = torch.logaddexp(lse, blk_lse)
        safe = torch.where(torch.isneginf(new_lse), torch.zeros_like(new_lse), new_lse)
        out = torch.exp(lse - safe)[..., None] * out + torch.exp(blk_lse - safe)[..., None] * \
            blk_out
        lse = new_lse
    return out.to(q.dtype)


E = Entry
ENTRIES = [
    E("merge_attention_states", "wrong", "exp_without_max_shift",
      "exponentiates the log-sum-exps directly, exp(lse_a) + exp(lse_b), without subtracting "
      "their maximum first, so log-sum-exps of about 1e4 overflow to inf and the result is "
      "NaN/inf", merge_no_shift),
    E("merge_attention_states", "wrong", "lse_keeps_trailing_axis",
      "unsqueezes the log-sum-exps early for the broadcasting and returns the merged lse with "
      "that trailing axis, shape (..., N_q, 1) instead of (..., N_q)", merge_lse_keepdim),
    E("merge_attention_states", "wrong", "max_subtracted_on_empty_rows",
      "subtracts the maximum without guarding rows where both sets are empty: "
      "-inf - (-inf) is NaN, so those rows give NaN instead of a zero row and -inf",
      merge_unguarded_shift),
    E("merge_attention_states", "wrong", "weights_not_divided_by_total",
      "weighs out_a and out_b by exp(lse - max) but never divides by their sum, so the merged "
      "output is not a convex combination of the two normalised outputs",
      merge_not_renormalised),
    E("merge_attention_states", "wrong", "float32_working_copy_returned",
      "returns the float32 working tensors: for float16/bfloat16 inputs out and lse come back "
      "in float32 instead of the inputs' dtypes", merge_float32_result),
    E("merge_attention_states", "wrong", "shift_not_added_back_to_lse",
      "returns log(w_a + w_b) as the merged lse but forgets to add back the maximum it "
      "subtracted, so lse is off by max(lse_a, lse_b)", merge_lse_without_shift),
    E("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    E("merge_attention_states", "right", "softmax_over_the_two_sets", None,
      merge_softmax_over_sets),

    E("online_softmax_attention", "wrong", "accumulator_not_rescaled",
      "rescales the running sum when the maximum grows but not the accumulator acc, so "
      "earlier blocks' contributions keep their stale scale", osa_no_acc_rescale),
    E("online_softmax_attention", "wrong", "causal_mask_top_left",
      "aligns the causal mask top-left (key j > query i is masked) instead of bottom-right "
      "(j > i + N_k - N_q), so with N_q != N_k the queries see the wrong keys",
      osa_causal_top_left),
    E("online_softmax_attention", "wrong", "ragged_last_block_skipped",
      "counts the blocks with N_k // block_size, so the ragged last block of keys is never "
      "visited (and with block_size > N_k no key at all)", osa_floor_block_count),
    E("online_softmax_attention", "wrong", "no_guard_for_rows_without_keys",
      "subtracts the running maximum even while it is still -inf: exp(-inf - (-inf)) is NaN, "
      "so a query with no visible key gets NaN instead of a zero row", osa_no_empty_row_guard),
    E("online_softmax_attention", "wrong", "softmax_per_block_summed",
      "normalises each block with its own softmax and adds the block outputs, as if every "
      "block were the whole row: the blocks are never weighed against each other",
      osa_softmax_per_block),
    E("online_softmax_attention", "wrong", "block_scores_concatenated",
      "computes the scores block by block but glues them back together with torch.cat and "
      "takes one softmax, so the full (B, H, N_q, N_k) score matrix is built after all",
      osa_concat_scores),
    E("online_softmax_attention", "right", "flattened_batch_float64_bmm", None,
      osa_flat_batch_f64),
    E("online_softmax_attention", "right", "merge_block_lse_states", None, osa_lse_merging),
]
