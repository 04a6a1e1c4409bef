"""Lesson 07 (flash): held-out learners' answers for merge_attention_states and
online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_direct_exp(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(work))
    eb = torch.exp(lse_b.to(work))
    total = ea + eb
    denom = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / denom).unsqueeze(-1) * out_a.to(work) + (eb / denom).unsqueeze(-1) * out_b.to(work)
    lse = torch.log(total)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    s = wa + wb
    out = (wa / s)[..., None] * out_a.to(ct) + (wb / s)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), (m + torch.log(s)).to(lse_a.dtype)


def merge_lse_keepdim(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(ct).unsqueeze(-1)  # (..., N_q, 1) so it broadcasts against out
    lb = lse_b.to(ct).unsqueeze(-1)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    tot = wa + wb
    lse = top + torch.log(tot)
    tot = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = wa / tot * out_a.to(ct) + wb / tot * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_forgets_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    hi = torch.maximum(a, b)
    hi = torch.where(torch.isinf(hi), 0.0, hi)
    ea, eb = torch.exp(a - hi), torch.exp(b - hi)
    z = ea + eb
    new_lse = torch.log(z)
    z = torch.where(z == 0, 1.0, z)
    merged = (ea / z)[..., None] * out_a.to(ct) + (eb / z)[..., None] * out_b.to(ct)
    return merged.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_swapped_weights(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    mx = torch.maximum(a, b)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    w_a, w_b = torch.exp(a - mx), torch.exp(b - mx)
    tot = w_a + w_b
    lse = mx + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    out = (w_b / tot)[..., None] * out_a.to(ct) + (w_a / tot)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_float32_result(out_a, lse_a, out_b, lse_b):
    oa, ob = out_a.float(), out_b.float()
    la, lb = lse_a.float(), lse_b.float()
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), 0.0, m)
    pa, pb = torch.exp(la - m), torch.exp(lb - m)
    tot = pa + pb
    lse = m + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    out = (pa / tot)[..., None] * oa + (pb / tot)[..., None] * ob
    return out, lse


# ============================================================ merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)
    both_empty = torch.isneginf(lse)
    safe = torch.where(both_empty, torch.zeros_like(lse), lse)
    fa = torch.where(both_empty, torch.zeros_like(a), torch.exp(a - safe))
    fb = torch.where(both_empty, torch.zeros_like(b), torch.exp(b - safe))
    out = torch.einsum("...q,...qd->...qd", fa, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", fb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    calc = torch.promote_types(out_a.dtype, torch.float32)
    lses = torch.stack([lse_a.to(calc), lse_b.to(calc)])  # (2, ..., N_q)
    outs = torch.stack([out_a.to(calc), out_b.to(calc)])  # (2, ..., N_q, d_v)
    share = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)  # both -inf -> NaN -> 0
    combined = (share.unsqueeze(-1) * outs).sum(dim=0)
    lse = torch.logsumexp(lses, dim=0)
    return combined.to(out_a.dtype), lse.to(lse_a.dtype)


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


def online_topleft_causal(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * d ** -0.5
    run_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=ct)
    run_sum = torch.zeros((batch, heads, n_q, 1), dtype=ct)
    acc = torch.zeros((batch, heads, n_q, d), dtype=ct)
    rows = torch.arange(n_q)[:, None]
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = qs @ k[:, :, lo:hi].to(ct).transpose(-1, -2)
        if causal:
            cols = torch.arange(lo, hi)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        e = torch.exp(s - shift)
        factor = torch.exp(run_max - shift)
        run_sum = run_sum * factor + e.sum(dim=-1, keepdim=True)
        acc = acc * factor + e @ v[:, :, lo:hi].to(ct)
        run_max = new_max
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


def online_nan_empty_rows(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1 / math.sqrt(d)
    mx = torch.full((b, h, n_q, 1), -math.inf, dtype=ct)
    den = torch.zeros((b, h, n_q, 1), dtype=ct)
    num = torch.zeros((b, h, n_q, d), dtype=ct)
    last_visible = torch.arange(n_q)[:, None] + n_k - n_q
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = (q.to(ct) @ k[:, :, start:stop].to(ct).transpose(-2, -1)) * scale
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None] > last_visible, -math.inf)
        new = torch.maximum(mx, s.amax(-1, keepdim=True))
        p = torch.exp(s - new)
        corr = torch.exp(mx - new)
        den = den * corr + p.sum(-1, keepdim=True)
        num = num * corr + p @ v[:, :, start:stop].to(ct)
        mx = new
    return (num / torch.where(den == 0, 1.0, den)).to(q.dtype)


def online_drops_tail_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    q32 = q.to(ct) / math.sqrt(D)
    m = torch.full((B, H, Nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, Nq, 1), dtype=ct)
    o = torch.zeros((B, H, Nq, D), dtype=ct)
    qi = torch.arange(Nq)[:, None] + (Nk - Nq)
    n_blocks = max(1, Nk // block_size)
    for j in range(n_blocks):
        lo, hi = j * block_size, min((j + 1) * block_size, Nk)
        s = q32 @ k[:, :, lo:hi].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qi, -math.inf)
        m2 = torch.maximum(m, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m2), 0.0, m2)
        p = torch.exp(s - sh)
        r = torch.exp(m - sh)
        l = l * r + p.sum(-1, keepdim=True)
        o = o * r + p @ v[:, :, lo:hi].to(ct)
        m = m2
    return (o / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_keeps_float32(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(work) / math.sqrt(d)
    best = torch.full((B, H, n_q, 1), -math.inf, dtype=work)
    total = torch.zeros((B, H, n_q, 1), dtype=work)
    acc = torch.zeros((B, H, n_q, d), dtype=work)
    limit = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qq @ k[:, :, start:stop].to(work).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > limit, -math.inf)
        nb = torch.maximum(best, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nb), 0.0, nb)
        w = torch.exp(s - sh)
        f = torch.exp(best - sh)
        total = total * f + w.sum(-1, keepdim=True)
        acc = acc * f + w @ v[:, :, start:stop].to(work)
        best = nb
    return acc / torch.where(total == 0, 1.0, total)


def online_sum_no_keepdim(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    mx = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    sm = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for a in range(0, n_k, block_size):
        z = min(a + block_size, n_k)
        s = qs @ k[:, :, a:z].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, z)[None, :] > qpos, -math.inf)
        nm = torch.maximum(mx, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        p = torch.exp(s - sh)
        rs = torch.exp(mx - sh)
        sm = sm * rs + p.sum(-1)
        acc = acc * rs + p @ v[:, :, a:z].to(ct)
        mx = nm
    return (acc / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Keeps (out, lse) per row and merges each key block's own normalised result into it."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    lse = torch.full((B, H, n_q), -math.inf, dtype=torch.float64)
    first_key_hidden = torch.arange(n_q)[:, None] + (n_k - n_q)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = q64 @ k[:, :, lo:hi].double().transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > first_key_hidden, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf for a row with nothing visible here
        blk_safe = torch.where(torch.isinf(blk_lse), 0.0, blk_lse)
        blk_out = torch.exp(s - blk_safe[..., None]) @ v[:, :, lo:hi].double()
        new_lse = torch.logaddexp(lse, blk_lse)
        ok = ~torch.isneginf(new_lse)
        ref = torch.where(ok, new_lse, 0.0)
        keep = torch.where(ok, torch.exp(lse - ref), 0.0)[..., None]
        take = torch.where(ok, torch.exp(blk_safe - ref) * (~torch.isneginf(blk_lse)), 0.0)
        out = keep * out + take[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_einsum_split(q, k, v, block_size=64, causal=False):
    n_q, d = q.shape[2], q.shape[3]
    n_k = k.shape[2]
    dt = torch.float64
    qq = q.to(dt)
    m = torch.full(q.shape[:3], -math.inf, dtype=dt)
    l = torch.zeros(q.shape[:3], dtype=dt)
    acc = torch.zeros(q.shape, dtype=dt)
    start = 0
    for kb, vb in zip(torch.split(k, block_size, dim=2), torch.split(v, block_size, dim=2)):
        width = kb.shape[2]
        s = torch.einsum("bhqd,bhkd->bhqk", qq, kb.to(dt)) / math.sqrt(d)
        if causal:
            allowed = torch.ones(n_q, width, dtype=torch.bool).tril(n_k - n_q - start)
            s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=dt))
        m_blk = s.max(dim=-1).values
        m_new = torch.maximum(m, m_blk)
        ref = torch.nan_to_num(m_new, neginf=0.0)
        p = torch.exp(s - ref[..., None])
        alpha = torch.exp(m - ref)
        l = alpha * l + p.sum(-1)
        acc = alpha[..., None] * acc + torch.einsum("bhqk,bhkd->bhqd", p, vb.to(dt))
        m = m_new
        start += width
    l = torch.where(l > 0, l, torch.ones_like(l))
    return (acc / l[..., None]).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_of_raw_lse",
          "the weights are exp(lse_a) and exp(lse_b) taken directly, with no max subtracted, so "
          "an lse around 1e4 overflows to inf and the result is NaN/inf", merge_direct_exp),
    Entry("merge_attention_states", "wrong", "no_guard_both_empty",
          "the shift is the raw max of the two lse, so a row where both sets are empty computes "
          "exp(-inf - (-inf)) = NaN instead of a zero row and lse -inf", merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "lse_keeps_trailing_axis",
          "the lse are unsqueezed to (..., N_q, 1) for broadcasting and the merged lse is "
          "returned with that extra axis instead of shape (..., N_q)", merge_lse_keepdim),
    Entry("merge_attention_states", "wrong", "lse_without_shift",
          "the merged lse is log(w_a + w_b) of the shifted weights: the max that was "
          "subtracted is never added back", merge_forgets_shift),
    Entry("merge_attention_states", "wrong", "weights_swapped",
          "out_a is multiplied by B's weight and out_b by A's weight (the two weight "
          "variables are swapped)", merge_swapped_weights),
    Entry("merge_attention_states", "wrong", "returns_float32",
          "everything is cast to float32 with .float() and never cast back, so float64 and "
          "half-precision inputs get float32 results", merge_float32_result),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked_softmax", None, merge_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "when a block raises the running max, the running sum is rescaled by "
          "exp(old_max - new_max) but the output accumulator is not", online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "the causal mask compares key index with the raw query index (top-left aligned), "
          "forgetting the N_k - N_q offset of the bottom-right convention",
          online_topleft_causal),
    Entry("online_softmax_attention", "wrong", "nan_on_empty_rows",
          "scores are shifted by the running max without a guard, so a row that has seen only "
          "masked keys computes exp(-inf - (-inf)) = NaN instead of a zero row",
          online_nan_empty_rows),
    Entry("online_softmax_attention", "wrong", "drops_ragged_tail",
          "the loop runs N_k // block_size blocks, so when block_size does not divide N_k the "
          "last partial block of keys is never visited", online_drops_tail_block),
    Entry("online_softmax_attention", "wrong", "returns_compute_dtype",
          "the result stays in the float32 accumulator dtype instead of being cast back to "
          "q's dtype", online_keeps_float32),
    Entry("online_softmax_attention", "wrong", "block_sum_without_keepdim",
          "the block's row sum is taken without keepdim, so (B, H, N_q) is broadcast against "
          "the (B, H, N_q, 1) running sum into an (N_q, N_q) normaliser and the final "
          "division raises a size-mismatch RuntimeError",
          online_sum_no_keepdim),
    Entry("online_softmax_attention", "right", "merge_block_states", None,
          online_merge_block_states),
    Entry("online_softmax_attention", "right", "einsum_split_float64", None, online_einsum_split),
]
