"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# =============================================================================================
# merge_attention_states
# =============================================================================================

def merge_nan_when_both_empty(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(work), lse_b.to(work)
    m = torch.maximum(la, lb)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    tot = wa + wb
    lse = m + torch.log(tot)
    tot_safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / tot_safe).unsqueeze(-1) * out_a.to(work) + (wb / tot_safe).unsqueeze(-1) * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_forgets_cast_back(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    big = torch.maximum(a, b)
    big = torch.where(torch.isinf(big), torch.zeros_like(big), big)
    ea, eb = torch.exp(a - big), torch.exp(b - big)
    s = ea + eb
    denom = torch.where(s == 0, torch.ones_like(s), s)
    merged = (ea / denom)[..., None] * out_a.to(ct) + (eb / denom)[..., None] * out_b.to(ct)
    return merged, (big + torch.log(s)).to(ct)


def merge_lse_keeps_trailing_axis(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(dt)[..., None]  # (..., N_q, 1) so it lines up with the outputs
    lb = lse_b.to(dt)[..., None]
    hi = torch.maximum(la, lb)
    hi = hi.masked_fill(torch.isneginf(hi), 0.0)
    wa = torch.exp(la - hi)
    wb = torch.exp(lb - hi)
    total = wa + wb
    out = (wa * out_a.to(dt) + wb * out_b.to(dt)) / total.masked_fill(total == 0, 1.0)
    lse = hi + torch.log(total)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_exponentiates_raw_lse(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    sa = torch.exp(lse_a.to(dt))  # the sums of exp(score) of each set
    sb = torch.exp(lse_b.to(dt))
    total = sa + sb
    out = (sa[..., None] * out_a.to(dt) + sb[..., None] * out_b.to(dt)) / total[..., None]
    return out.to(out_a.dtype), torch.log(total).to(lse_a.dtype)


def merge_no_renormalise(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(la - top)
    w_b = torch.exp(lb - top)
    lse = top + torch.log(w_a + w_b)
    out = w_a[..., None] * out_a.to(dt) + w_b[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_swapped_weights(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(la - shift)
    w_b = torch.exp(lb - shift)
    total = w_a + w_b
    lse = shift + torch.log(total)
    safe = torch.where(total == 0, 1.0, total)
    out = (w_b / safe)[..., None] * out_a.to(dt) + (w_a / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_logaddexp_float64(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)  # -inf only where both are -inf
    finite = torch.isfinite(lse)
    ref = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.where(finite, torch.exp(a - ref), torch.zeros_like(a))
    wb = torch.where(finite, torch.exp(b - ref), torch.zeros_like(b))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_softmax_over_sets(out_a, lse_a, out_b, lse_b):
    stacked_lse = torch.stack([lse_a, lse_b], dim=-1).to(torch.float64)  # (..., N_q, 2)
    stacked_out = torch.stack([out_a, out_b], dim=-2).to(torch.float64)  # (..., N_q, 2, d_v)
    weights = torch.nan_to_num(torch.softmax(stacked_lse, dim=-1), nan=0.0)
    out = torch.einsum("...s,...sd->...d", weights, stacked_out)
    lse = torch.logsumexp(stacked_lse, dim=-1)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# =============================================================================================
# online_softmax_attention
# =============================================================================================

def online_no_acc_rescale(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    qpos = torch.arange(nq)[:, None] + (nk - nq)
    for j in range(0, nk, block_size):
        kb = k[:, :, j:j + block_size].to(ct)
        vb = v[:, :, j:j + block_size].to(ct)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(j, j + kb.shape[2])[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - m_safe)
        l = l * torch.exp(m - m_safe) + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(work) * d ** -0.5
    row_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=work)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=work)
    acc = torch.zeros((batch, heads, n_q, d), dtype=work)
    rows = torch.arange(n_q).view(-1, 1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        scores = q_s @ k[:, :, lo:hi].to(work).transpose(-2, -1)
        if causal:
            cols = torch.arange(lo, hi).view(1, -1)
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        e = torch.exp(scores - shift)
        fix = torch.exp(row_max - shift)
        row_sum = row_sum * fix + e.sum(dim=-1, keepdim=True)
        acc = acc * fix + e @ v[:, :, lo:hi].to(work)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_nan_on_empty_rows(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) / math.sqrt(D)
    run_max = torch.full((B, H, Nq, 1), -math.inf, dtype=dt)
    run_sum = torch.zeros((B, H, Nq, 1), dtype=dt)
    run_acc = torch.zeros((B, H, Nq, D), dtype=dt)
    q_at = torch.arange(Nq)[:, None] + Nk - Nq
    for s0 in range(0, Nk, block_size):
        s1 = min(s0 + block_size, Nk)
        sc = qq @ k[..., s0:s1, :].to(dt).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > q_at, -math.inf)
        mx = torch.maximum(run_max, sc.amax(-1, keepdim=True))
        ex = torch.exp(sc - mx)
        corr = torch.exp(run_max - mx)
        run_sum = run_sum * corr + ex.sum(-1, keepdim=True)
        run_acc = run_acc * corr + ex @ v[..., s0:s1, :].to(dt)
        run_max = mx
    return (run_acc / run_sum).to(q.dtype)


def online_scale_by_seq_len(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[-2])
    qf = q.to(f) * scale
    mx = torch.full((B, H, n_q, 1), -math.inf, dtype=f)
    sm = torch.zeros((B, H, n_q, 1), dtype=f)
    o = torch.zeros((B, H, n_q, d), dtype=f)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for a in range(0, n_k, block_size):
        b = min(a + block_size, n_k)
        s = qf @ k[:, :, a:b].to(f).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(a, b)[None, :] > qpos, -math.inf)
        nm = torch.maximum(mx, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        w = torch.exp(s - sh)
        r = torch.exp(mx - sh)
        sm = sm * r + w.sum(-1, keepdim=True)
        o = o * r + w @ v[:, :, a:b].to(f)
        mx = nm
    return (o / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    qc = q.to(compute) / math.sqrt(d)
    m_i = torch.full((B, H, n_q, 1), -math.inf, dtype=compute)
    l_i = torch.zeros_like(m_i)
    o_i = torch.zeros((B, H, n_q, d), dtype=compute)
    pos_q = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s_ij = qc @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            s_ij = s_ij.masked_fill(torch.arange(start, stop)[None, :] > pos_q, -math.inf)
        m_new = torch.maximum(m_i, s_ij.amax(-1, keepdim=True))
        m_use = torch.where(torch.isinf(m_new), 0.0, m_new)
        p_ij = torch.exp(s_ij - m_use)
        alpha = torch.exp(m_i - m_use)
        l_i = alpha * l_i + p_ij.sum(-1, keepdim=True)
        o_i = alpha * o_i + p_ij @ v[:, :, start:stop].to(compute)
        m_i = m_new
    return o_i / torch.where(l_i == 0, 1.0, l_i)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    run_max = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    run_sum = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    n_blocks = max(1, n_k // block_size)
    for blk in range(n_blocks):
        lo, hi = blk * block_size, min((blk + 1) * block_size, n_k)
        s = qs @ k[:, :, lo:hi].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(run_max, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(s - shift)
        resc = torch.exp(run_max - shift)
        run_sum = run_sum * resc + w.sum(-1, keepdim=True)
        acc = acc * resc + w @ v[:, :, lo:hi].to(ct)
        run_max = new_max
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Keeps a normalised (out, lse) pair and merges each block's own (out, lse) into it."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    lse = torch.full((B, H, n_q), -math.inf, dtype=torch.float64)
    offset = n_k - n_q
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, lo:hi].double())
        if causal:
            keep = torch.arange(lo, hi)[None, :] <= torch.arange(n_q)[:, None] + offset
            s = torch.where(keep, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf for rows that see no key of the block
        ref = torch.where(torch.isfinite(blk_lse), blk_lse, torch.zeros_like(blk_lse))
        blk_out = torch.exp(s - ref[..., None]) @ v[:, :, lo:hi].double()
        new_lse = torch.logaddexp(lse, blk_lse)
        ok = torch.isfinite(new_lse)
        base = torch.where(ok, new_lse, torch.zeros_like(new_lse))
        w_old = torch.where(ok, torch.exp(lse - base), torch.zeros_like(base))
        w_blk = torch.where(ok, torch.exp(ref - base), torch.zeros_like(base))
        out = out * w_old[..., None] + blk_out * w_blk[..., None]
        lse = new_lse
    return out.to(q.dtype)


def online_exp2_einsum(q, k, v, block_size=64, causal=False):
    """Base-2 exponentials as GPU kernels do: scores pre-multiplied by log2(e)."""
    b, h, n, d = q.shape
    m = k.shape[-2]
    ty = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(ty) * (math.log2(math.e) / math.sqrt(d))
    best = q.new_full((b, h, n), -math.inf, dtype=ty)
    denom = q.new_zeros((b, h, n), dtype=ty)
    numer = q.new_zeros((b, h, n, d), dtype=ty)
    last_visible = torch.arange(n) + (m - n)  # query i sees keys j <= last_visible[i]
    start = 0
    while start < m:
        end = min(m, start + block_size)
        s2 = torch.einsum("bhid,bhjd->bhij", qq, k[:, :, start:end].to(ty))
        if causal:
            hidden = torch.arange(start, end)[None, :] > last_visible[:, None]
            s2 = s2.masked_fill(hidden, -math.inf)
        cand = torch.maximum(best, s2.amax(dim=-1))
        ref = torch.nan_to_num(cand, neginf=0.0)
        e2 = torch.exp2(s2 - ref[..., None])
        factor = torch.exp2(best - ref)
        denom = denom * factor + e2.sum(dim=-1)
        numer = numer * factor[..., None] + torch.einsum("bhij,bhjd->bhid", e2, v[:, :, start:end].to(ty))
        best = cand
        start = end
    res = numer / denom.clamp_min(torch.finfo(ty).tiny)[..., None]
    return res.to(q.dtype)


ENTRIES = [
    # ---- merge_attention_states
    Entry("merge_attention_states", "wrong", "nan-both-empty",
          "The shift is the larger log-sum-exp even when it is -inf, so a row where both sets "
          "are empty computes exp(-inf - (-inf)) = NaN instead of a zero row and -inf.",
          merge_nan_when_both_empty),
    Entry("merge_attention_states", "wrong", "no-cast-back",
          "Both results are returned in the float32 working dtype: out is never cast back to "
          "out_a's dtype nor lse to lse_a's, so half-precision inputs come back as float32.",
          merge_forgets_cast_back),
    Entry("merge_attention_states", "wrong", "lse-trailing-axis",
          "The log-sum-exps get a trailing axis for the broadcast and keep it: the returned lse "
          "has shape (..., N_q, 1) instead of (..., N_q).",
          merge_lse_keeps_trailing_axis),
    Entry("merge_attention_states", "wrong", "unshifted-exp",
          "It exponentiates the raw log-sum-exps without subtracting their maximum, so lse of "
          "about 1e4 overflows to inf (NaN outputs) and two empty sets give 0/0 = NaN.",
          merge_exponentiates_raw_lse),
    Entry("merge_attention_states", "wrong", "no-renormalise",
          "The outputs are mixed with weights exp(lse_set - max) but never divided by their sum "
          "w_a + w_b, so a row where both sets have keys comes out too large.",
          merge_no_renormalise),
    Entry("merge_attention_states", "wrong", "weights-swapped",
          "The weights are swapped: out_a is multiplied by set B's share and out_b by set A's.",
          merge_swapped_weights),
    Entry("merge_attention_states", "right", "logaddexp-float64", None, merge_logaddexp_float64),
    Entry("merge_attention_states", "right", "softmax-over-two-sets", None,
          merge_softmax_over_sets),
    # ---- online_softmax_attention
    Entry("online_softmax_attention", "wrong", "acc-not-rescaled",
          "When a block raises the running maximum it rescales the running sum but not the "
          "accumulator: acc keeps old terms measured against the stale maximum.",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal-top-left",
          "The causal mask compares key positions with the raw query index (top-left aligned), "
          "leaving out the N_k - N_q offset of the bottom-right convention.",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "nan-empty-rows",
          "No guard for rows that have seen only masked keys: the shift is -inf, exp(-inf + inf) "
          "gives NaN, and the final acc / row_sum divides 0 by 0 for a row with no visible key.",
          online_nan_on_empty_rows),
    Entry("online_softmax_attention", "wrong", "scale-by-n-queries",
          "The scale reads the wrong axis: 1/sqrt(q.shape[-2]) (the number of queries) instead "
          "of 1/sqrt(d) with d = q.shape[-1].",
          online_scale_by_seq_len),
    Entry("online_softmax_attention", "wrong", "returns-compute-dtype",
          "The result stays in the float32 working dtype instead of being cast back to q's "
          "dtype, so float16 and bfloat16 inputs come back as float32.",
          online_returns_float32),
    Entry("online_softmax_attention", "wrong", "floor-drops-last-block",
          "The number of blocks is n_k // block_size, so a ragged last block of keys is never "
          "visited when block_size does not divide N_k.",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "right", "merge-block-lse", None, online_merge_block_states),
    Entry("online_softmax_attention", "right", "exp2-einsum", None, online_exp2_einsum),
]
