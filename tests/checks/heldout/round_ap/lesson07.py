"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================== merge_attention_states: wrong
def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    ea, eb = torch.exp(la), torch.exp(lb)
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * out_a.to(compute) + (eb / safe)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    tot = wa + wb
    lse = m + torch.log(tot)
    tot = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / tot) * out_a.to(compute) + (wb / tot) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    top = torch.maximum(lse_a.to(ct), lse_b.to(ct))
    w_a = torch.exp(lse_a.to(ct) - top)
    w_b = torch.exp(lse_b.to(ct) - top)
    total = w_a + w_b
    lse = top + torch.log(total)
    out = (w_a / total).unsqueeze(-1) * out_a.to(ct) + (w_b / total).unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    lse_a32, lse_b32 = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(lse_a32, lse_b32)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(lse_a32 - shift)
    w_b = torch.exp(lse_b32 - shift)
    lse = shift + torch.log(w_a + w_b)
    out = w_a[..., None] * out_a.to(compute) + w_b[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_out_a_twice(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(dt), lse_b.to(dt)
    big = torch.maximum(a, b)
    big = big.masked_fill(torch.isneginf(big), 0.0)
    pa = torch.exp(a - big)
    pb = torch.exp(b - big)
    z = pa + pb
    new_lse = big + torch.log(z)
    z = z.masked_fill(z == 0, 1.0)
    merged = (pa / z)[..., None] * out_a.to(dt) + (pb / z)[..., None] * out_a.to(dt)
    return merged.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_no_cast_back(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa = torch.exp(la - shift)
    wb = torch.exp(lb - shift)
    total = wa + wb
    lse = shift + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    out = (wa / total)[..., None] * out_a.to(compute) + (wb / total)[..., None] * out_b.to(compute)
    return out, lse


# ============================================================== merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la = lse_a.double()
    lb = lse_b.double()
    lse = torch.logaddexp(la, lb)  # -inf where both are -inf
    finite = torch.isfinite(lse)
    ref = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.where(finite, torch.exp(la - ref), torch.zeros_like(lse))
    wb = torch.where(finite, torch.exp(lb - ref), torch.zeros_like(lse))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a.double(), lse_b.double()], dim=0)  # (2, ..., N_q)
    outs = torch.stack([out_a.double(), out_b.double()], dim=0)  # (2, ..., N_q, d_v)
    lse = torch.logsumexp(lses, dim=0)
    weights = torch.softmax(lses, dim=0)
    weights = torch.nan_to_num(weights, nan=0.0)  # both sets empty: 0/0
    out = torch.einsum("s...q,s...qd->...qd", weights, outs)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention: wrong
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((b, h, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((b, h, nq, 1), dtype=ct)
    acc = torch.zeros((b, h, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for s in range(0, nk, block_size):
        e = min(s + block_size, nk)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - shift)
        l = l * torch.exp(m - shift) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s:e].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(compute) * d ** -0.5
    row_max = torch.full((B, H, n_q, 1), float("-inf"), dtype=compute)
    row_sum = torch.zeros((B, H, n_q, 1), dtype=compute)
    acc = torch.zeros((B, H, n_q, d), dtype=compute)
    rows = torch.arange(n_q)[:, None]
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q_ @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            cols = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + w.sum(dim=-1, keepdim=True)
        acc = acc * r + w @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(f) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=f)
    den = torch.zeros((B, H, Nq, 1), dtype=f)
    num = torch.zeros((B, H, Nq, D), dtype=f)
    offset = Nk - Nq
    for j0 in range(0, Nk, block_size):
        j1 = min(j0 + block_size, Nk)
        kb, vb = k[:, :, j0:j1].to(f), v[:, :, j0:j1].to(f)
        s = qq @ kb.transpose(-2, -1)
        if causal:
            hide = torch.arange(j0, j1)[None, :] > torch.arange(Nq)[:, None] + offset
            s = s.masked_fill(hide, -math.inf)
        mx_new = torch.maximum(mx, s.amax(dim=-1, keepdim=True))
        e = torch.exp(s - mx_new)
        alpha = torch.exp(mx - mx_new)
        den = den * alpha + e.sum(dim=-1, keepdim=True)
        num = num * alpha + e @ vb
        mx = mx_new
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(compute) / math.sqrt(d)
    row_max = torch.full((B, H, n_q, 1), -math.inf, dtype=compute)
    row_sum = torch.zeros((B, H, n_q, 1), dtype=compute)
    acc = torch.zeros((B, H, n_q, d), dtype=compute)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    n_blocks = max(1, n_k // block_size)
    for i in range(n_blocks):
        start, stop = i * block_size, min((i + 1) * block_size, n_k)
        scores = qs @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + w.sum(dim=-1, keepdim=True)
        acc = acc * rescale + w @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_amax_no_keepdim(q, k, v, block_size=64, causal=False):
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
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_acc_uses_keys(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(dt) * (1.0 / math.sqrt(d))
    run_max = torch.full((B, H, Nq, 1), -math.inf, dtype=dt)
    run_sum = torch.zeros((B, H, Nq, 1), dtype=dt)
    acc = torch.zeros((B, H, Nq, d), dtype=dt)
    qpos = torch.arange(Nq).unsqueeze(1) + (Nk - Nq)
    for lo in range(0, Nk, block_size):
        hi = min(lo + block_size, Nk)
        kb = k[:, :, lo:hi].to(dt)
        vb = v[:, :, lo:hi].to(dt)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi).unsqueeze(0) > qpos, -math.inf)
        new = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new), 0.0, new)
        p = torch.exp(s - shift)
        c = torch.exp(run_max - shift)
        run_sum = run_sum * c + p.sum(dim=-1, keepdim=True)
        acc = acc * c + p @ kb
        run_max = new
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Each key block gives a normalised (out, lse); merge them with logaddexp, in float64."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    qd = q.double() / math.sqrt(d)
    out = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    lse = torch.full((B, H, n_q), -math.inf, dtype=torch.float64)
    first_visible = n_k - n_q  # query i sees keys j <= i + first_visible
    start = 0
    while start < n_k:
        stop = min(start + block_size, n_k)
        s = qd @ k[:, :, start:stop].double().transpose(-2, -1)
        if causal:
            j = torch.arange(start, stop).view(1, -1)
            i = torch.arange(n_q).view(-1, 1)
            s = torch.where(j <= i + first_visible, s, torch.tensor(-math.inf, dtype=s.dtype))
        blk_lse = torch.logsumexp(s, dim=-1)  # (B, H, n_q), -inf for empty rows
        blk_p = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0)
        blk_out = blk_p @ v[:, :, start:stop].double()
        new_lse = torch.logaddexp(lse, blk_lse)
        ok = torch.isfinite(new_lse)
        base = torch.where(ok, new_lse, torch.zeros_like(new_lse))
        w_old = torch.where(ok, torch.exp(lse - base), torch.zeros_like(base))
        w_blk = torch.where(ok, torch.exp(blk_lse - base), torch.zeros_like(base))
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
        start = stop
    return out.to(q.dtype)


def online_einsum_exp2(q, k, v, block_size=64, causal=False):
    """Running max in base 2 (as the CUDA kernels do), einsum products, float32 or better."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    log2e = 1.0 / math.log(2.0)
    q2 = q.to(ct) * (log2e / math.sqrt(d))  # scores in log2 units
    m = torch.full((B, H, n_q), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q), dtype=ct)
    o = torch.zeros((B, H, n_q, d), dtype=ct)
    for blk in range(math.ceil(n_k / block_size)):
        a, z = blk * block_size, min((blk + 1) * block_size, n_k)
        s = torch.einsum("bhqd,bhkd->bhqk", q2, k[:, :, a:z].to(ct))
        if causal:
            allowed = torch.arange(a, z)[None, :] - torch.arange(n_q)[:, None] <= n_k - n_q
            s = s.masked_fill(~allowed, -math.inf)
        m_new = torch.maximum(m, s.max(dim=-1).values)
        safe = m_new.masked_fill(torch.isneginf(m_new), 0.0)
        p = torch.exp2(s - safe[..., None])
        corr = torch.exp2(m - safe)
        l = corr * l + p.sum(dim=-1)
        o = corr[..., None] * o + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, a:z].to(ct))
        m = m_new
    l = l.masked_fill(l == 0, 1.0)
    return (o / l[..., None]).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive-exp-overflow",
          "exponentiates the raw log-sum-exps without subtracting their maximum first, so "
          "lse values of about 1e4 overflow to inf and the result turns into NaN/inf",
          merge_naive_exp),
    Entry("merge_attention_states", "wrong", "weights-without-trailing-axis",
          "multiplies the per-row weights (..., N_q) straight into the outputs (..., N_q, d_v) "
          "without a trailing axis, so they line up with d_v instead of N_q (shape error or "
          "rows mixed up)",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "no-both-empty-guard",
          "subtracts the maximum lse even where both sets are empty (-inf - -inf) and divides "
          "by a zero total there, so a row with no key in either set becomes NaN instead of "
          "zeros and -inf",
          merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "weights-not-normalised",
          "weights the two outputs by exp(lse - max) but never divides by their sum "
          "exp(lse_a - max) + exp(lse_b - max), so the merged output is not a weighted "
          "average of out_a and out_b",
          merge_unnormalised),
    Entry("merge_attention_states", "wrong", "out-a-used-twice",
          "copy-paste slip: the second term multiplies its weight into out_a again instead "
          "of out_b, so set B's output never reaches the result",
          merge_out_a_twice),
    Entry("merge_attention_states", "wrong", "no-cast-back",
          "does the arithmetic in float32 but returns out and lse in float32 too, not in the "
          "inputs' float16 / bfloat16 dtype",
          merge_no_cast_back),
    Entry("merge_attention_states", "right", "logaddexp-float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked-logsumexp-softmax", None,
          merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "acc-not-rescaled",
          "rescales the running sum when the maximum rises but not the accumulator acc, so "
          "blocks seen before a larger score keep weights relative to a stale maximum",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal-top-left",
          "the causal mask compares key j with query i directly (j > i) instead of "
          "j > i + N_k - N_q, so it is aligned top-left and wrong whenever N_q != N_k",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "no-inf-shift-guard",
          "shifts the scores by the running maximum even while it is still -inf, so a query "
          "with no visible key computes exp(-inf - -inf) = NaN instead of a zero row",
          online_no_inf_guard),
    Entry("online_softmax_attention", "wrong", "drops-ragged-block",
          "counts the blocks with N_k // block_size, so the shorter last block of keys is "
          "never visited when block_size does not divide N_k",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "amax-without-keepdim",
          "takes the block maximum with amax(dim=-1) without keepdim, so (B, H, N_q) is "
          "broadcast against the (B, H, N_q, 1) running max into an (N_q, N_q) grid: shape "
          "errors or scrambled rows",
          online_amax_no_keepdim),
    Entry("online_softmax_attention", "wrong", "acc-weights-keys",
          "accumulates the weighted sum of the key block (p @ k_blk) instead of the value "
          "block, so the output mixes keys, not values",
          online_acc_uses_keys),
    Entry("online_softmax_attention", "right", "merge-block-states-f64", None,
          online_merge_block_states),
    Entry("online_softmax_attention", "right", "einsum-exp2", None, online_einsum_exp2),
]
