"""Held-out learners' answers, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states -- wrong
def merge_raw_exp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(dt))
    eb = torch.exp(lse_b.to(dt))
    tot = ea + eb
    lse = torch.log(tot)
    denom = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / denom)[..., None] * out_a.to(dt) + (eb / denom)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(work), lse_b.to(work)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    lse = m + torch.log(wa + wb)
    out = wa.unsqueeze(-1) * out_a.to(work) + wb.unsqueeze(-1) * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(a, b)
    w_a = torch.exp(a - top)
    w_b = torch.exp(b - top)
    s = w_a + w_b
    merged_lse = top + torch.log(s)
    out = (w_a / s)[..., None] * out_a.to(ct) + (w_b / s)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), merged_lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    big = torch.maximum(a, b)
    shift = torch.where(torch.isinf(big), torch.zeros_like(big), big)
    pa, pb = torch.exp(a - shift), torch.exp(b - shift)
    total = pa + pb
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (pa / safe)[..., None] * out_a.to(ct) + (pb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), big.to(lse_a.dtype)


def merge_returns_float32(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(f)
    lb = lse_b.to(f)
    hi = torch.maximum(la, lb)
    hi = hi.masked_fill(torch.isinf(hi), 0.0)
    wa = torch.exp(la - hi)
    wb = torch.exp(lb - hi)
    tot = wa + wb
    new_lse = hi + torch.log(tot)
    tot = tot.masked_fill(tot == 0, 1.0)
    out = (wa / tot)[..., None] * out_a.to(f) + (wb / tot)[..., None] * out_b.to(f)
    return out, new_lse


def merge_swapped_weights(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    alpha = torch.exp(la - mx)
    beta = torch.exp(lb - mx)
    z = alpha + beta
    lse = mx + torch.log(z)
    z = torch.where(z == 0, 1.0, z)
    out = (beta / z)[..., None] * out_a.to(ct) + (alpha / z)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states -- right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)  # -inf when both are -inf
    both_empty = torch.isneginf(lse)
    ref = torch.where(both_empty, torch.zeros_like(lse), lse)
    wa = torch.where(both_empty, torch.zeros_like(a), torch.exp(a - ref))
    wb = torch.where(both_empty, torch.zeros_like(b), torch.exp(b - ref))
    out = torch.einsum("...n,...nd->...nd", wa, out_a.double()) + \
        torch.einsum("...n,...nd->...nd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    a_empty, b_empty = torch.isneginf(a), torch.isneginf(b)
    diff = torch.where(a_empty | b_empty, torch.zeros_like(a), a - b)
    frac_a = torch.sigmoid(diff)
    frac_a = torch.where(a_empty, torch.zeros_like(frac_a), frac_a)
    frac_a = torch.where(b_empty & ~a_empty, torch.ones_like(frac_a), frac_a)
    frac_b = torch.where(a_empty & b_empty, torch.zeros_like(frac_a), 1.0 - frac_a)
    # log(e^a + e^b) = max + log1p(e^-(|a-b|))
    top = torch.maximum(a, b)
    lse = top + torch.log1p(torch.exp(-diff.abs()))
    lse = torch.where(a_empty, b, torch.where(b_empty, a, lse))
    out = frac_a.unsqueeze(-1) * out_a.to(ct) + frac_b.unsqueeze(-1) * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ online_softmax_attention -- wrong
def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    for s in range(0, n_k, block_size):
        e = min(s + block_size, n_k)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-1, -2)
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
    batch, heads, n_q, d = q.shape
    n_k = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    run_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((batch, heads, n_q, 1), dtype=dt)
    acc = torch.zeros((batch, heads, n_q, v.shape[-1]), dtype=dt)
    rows = torch.arange(n_q).unsqueeze(1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        scores = (q.to(dt) @ k[..., lo:hi, :].to(dt).transpose(-2, -1)) * scale
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, scores.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - safe)
        corr = torch.exp(run_max - safe)
        run_sum = run_sum * corr + w.sum(dim=-1, keepdim=True)
        acc = acc * corr + w @ v[..., lo:hi, :].to(dt)
        run_max = new_max
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (acc / run_sum).to(q.dtype)


def online_diagonal_masked(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(f) * D ** -0.5
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=f)
    sm = torch.zeros((B, H, Nq, 1), dtype=f)
    o = torch.zeros((B, H, Nq, D), dtype=f)
    qi = torch.arange(Nq).view(-1, 1) + (Nk - Nq)
    for j0 in range(0, Nk, block_size):
        j1 = min(j0 + block_size, Nk)
        s = torch.matmul(q_, k[:, :, j0:j1].to(f).transpose(2, 3))
        if causal:
            kj = torch.arange(j0, j1).view(1, -1)
            s = s.masked_fill(kj >= qi, -math.inf)
        mnew = torch.maximum(mx, s.max(dim=-1, keepdim=True).values)
        base = torch.where(torch.isinf(mnew), torch.zeros_like(mnew), mnew)
        p = torch.exp(s - base)
        alpha = torch.exp(mx - base)
        sm = alpha * sm + p.sum(-1, keepdim=True)
        o = alpha * o + torch.matmul(p, v[:, :, j0:j1].to(f))
        mx = mnew
    return (o / torch.where(sm == 0, torch.ones_like(sm), sm)).to(q.dtype)


def online_nan_on_empty_rows(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(work) / math.sqrt(d)
    row_max = torch.full((b, h, nq, 1), -math.inf, dtype=work)
    row_sum = torch.zeros((b, h, nq, 1), dtype=work)
    acc = torch.zeros((b, h, nq, d), dtype=work)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for start in range(0, nk, block_size):
        stop = min(start + block_size, nk)
        s = qq @ k[:, :, start:stop].to(work).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        w = torch.exp(s - new_max)
        r = torch.exp(row_max - new_max)
        row_sum = row_sum * r + w.sum(dim=-1, keepdim=True)
        acc = acc * r + w @ v[:, :, start:stop].to(work)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def online_returns_compute_dtype(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    comp = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(comp) * (1.0 / math.sqrt(d))
    row_max = torch.full((B, H, n_q, 1), -math.inf, dtype=comp)
    row_sum = torch.zeros((B, H, n_q, 1), dtype=comp)
    acc = torch.zeros((B, H, n_q, d), dtype=comp)
    offset = n_k - n_q
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb = k[:, :, start:stop].to(comp)
        vb = v[:, :, start:stop].to(comp)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            allowed = torch.arange(start, stop)[None, :] <= torch.arange(n_q)[:, None] + offset
            sc = sc.masked_fill(~allowed, -math.inf)
        nm = torch.maximum(row_max, sc.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        w = torch.exp(sc - sh)
        resc = torch.exp(row_max - sh)
        row_sum = row_sum * resc + w.sum(dim=-1, keepdim=True)
        acc = acc * resc + w @ vb
        row_max = nm
    return acc / torch.where(row_sum == 0, 1.0, row_sum)


def online_drops_ragged_tail(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    comp = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(comp) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=comp)
    l = torch.zeros((B, H, n_q, 1), dtype=comp)
    acc = torch.zeros((B, H, n_q, d), dtype=comp)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    n_blocks = n_k // block_size
    for blk in range(n_blocks):
        start, stop = blk * block_size, (blk + 1) * block_size
        sc = qs @ k[:, :, start:stop].to(comp).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        w = torch.exp(sc - sh)
        f = torch.exp(m - sh)
        l = l * f + w.sum(dim=-1, keepdim=True)
        acc = acc * f + w @ v[:, :, start:stop].to(comp)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


# ============================================================ online_softmax_attention -- right
def online_running_lse_merge(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and a running log-sum-exp, merging block by block in float64."""
    nq, d = q.shape[2], q.shape[3]
    nk = k.shape[2]
    qd = q.double() / math.sqrt(d)
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full(q.shape[:3], -math.inf, dtype=torch.float64)
    for a in range(0, nk, block_size):
        z = min(a + block_size, nk)
        s = torch.einsum("bhqd,bhkd->bhqk", qd, k[:, :, a:z].double())
        if causal:
            ok = torch.ones(nq, z - a, dtype=torch.bool).tril(nk - nq - a)
            s = s.masked_fill(~ok, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf for a row with no key here
        base = torch.where(torch.isinf(blk_lse), torch.zeros_like(blk_lse), blk_lse)
        p = torch.exp(s - base[..., None])
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, a:z].double())
        new = torch.logaddexp(lse, blk_lse)
        ref = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        w_old = torch.exp(lse - ref)[..., None]
        w_blk = torch.exp(blk_lse - ref)[..., None]
        out = w_old * out + w_blk * blk_out
        lse = new
    return out.to(q.dtype)


def online_normalised_each_step(q, k, v, block_size=64, causal=False):
    """FlashAttention-1 style: the output stays normalised after every block."""
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    o = torch.zeros(B, H, Nq, D, dtype=ct)
    m = torch.full((B, H, Nq, 1), -float("inf"), dtype=ct)
    l = torch.zeros(B, H, Nq, 1, dtype=ct)
    qpos = torch.arange(Nq).reshape(Nq, 1) + Nk - Nq
    blocks = [(i, min(i + block_size, Nk)) for i in range(0, Nk, block_size)]
    for i, j in blocks:
        s = torch.matmul(q.to(ct), k[:, :, i:j].to(ct).transpose(-1, -2)) / math.sqrt(D)
        if causal:
            s = torch.where(torch.arange(i, j).reshape(1, -1) <= qpos, s,
                            torch.tensor(-float("inf"), dtype=ct))
        m_blk = s.amax(-1, keepdim=True)
        m_new = torch.maximum(m, m_blk)
        ref = torch.where(m_new == -float("inf"), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - ref)
        l_old_scaled = torch.exp(m - ref) * l
        l_new = l_old_scaled + p.sum(-1, keepdim=True)
        denom = torch.where(l_new == 0, torch.ones_like(l_new), l_new)
        o = (l_old_scaled * o + torch.matmul(p, v[:, :, i:j].to(ct))) / denom
        m, l = m_new, l_new
    return o.to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "raw_exp_overflow",
          "exponentiates lse_a and lse_b directly instead of subtracting the larger one first, "
          "so log-sum-exps around 1e4 overflow to inf and the merge gives NaN/inf",
          merge_raw_exp),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "weights each output by exp(lse - max) but never divides by their sum, so the merged "
          "output is not a convex combination (it is too large wherever both sets contribute)",
          merge_unnormalised),
    Entry("merge_attention_states", "wrong", "no_guard_both_empty",
          "subtracts the larger lse without replacing -inf by 0, so a row where both sets are "
          "empty computes exp(-inf - (-inf)) and returns NaN instead of zeros",
          merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "lse_is_max",
          "returns the larger of the two log-sum-exps as the merged lse, forgetting to add "
          "log(w_a + w_b): the output is right but lse is too small",
          merge_lse_is_max),
    Entry("merge_attention_states", "wrong", "returns_float32",
          "computes in float32 for half-precision inputs but never casts back, so out and lse "
          "come back float32 instead of the inputs' dtypes",
          merge_returns_float32),
    Entry("merge_attention_states", "wrong", "weights_swapped",
          "multiplies out_a by B's weight and out_b by A's weight (the two weights are swapped)",
          merge_swapped_weights),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "sigmoid_weights", None, merge_sigmoid),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum by exp(old_max - new_max) when the maximum grows but not the "
          "accumulator, so earlier blocks keep their stale scale in acc",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "aligns the causal mask top-left (key j visible when j <= i) instead of bottom-right "
          "(j <= i + N_k - N_q), so it is wrong whenever N_q != N_k",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "causal_masks_diagonal",
          "masks keys with `>=` where `>` belongs, so each query also loses its own (diagonal) "
          "key and the first query sees nothing",
          online_diagonal_masked),
    Entry("online_softmax_attention", "wrong", "nan_on_empty_rows",
          "subtracts a running max that is still -inf for a row with no visible key, so "
          "exp(-inf - (-inf)) gives NaN instead of a zero row (and divides by a zero sum)",
          online_nan_on_empty_rows),
    Entry("online_softmax_attention", "wrong", "returns_compute_dtype",
          "accumulates in float32 for half-precision inputs and returns that float32 tensor "
          "instead of casting back to q's dtype",
          online_returns_compute_dtype),
    Entry("online_softmax_attention", "wrong", "ragged_tail_dropped",
          "loops over n_k // block_size whole blocks only, so the keys of a shorter last block "
          "are never visited",
          online_drops_ragged_tail),
    Entry("online_softmax_attention", "right", "running_lse_merge_f64", None,
          online_running_lse_merge),
    Entry("online_softmax_attention", "right", "normalised_every_block", None,
          online_normalised_each_step),
]
