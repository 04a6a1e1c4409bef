"""Round m catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# =============================================================== merge_attention_states: wrong
def merge_no_max_shift(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    ea, eb = torch.exp(la), torch.exp(lb)  # e^lse of each set
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * out_a.to(compute) + (eb / safe)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unguarded_shift(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(la, lb)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    total = wa + wb
    lse = m + torch.log(total)
    out = (wa / total)[..., None] * out_a.to(compute) + (wb / total)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_forgets_max(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    total = wa + wb
    lse = torch.log(total)
    denom = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / denom).unsqueeze(-1) * out_a.to(compute) + (wb / denom).unsqueeze(-1) * out_b.to(
        compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    total = wa + wb
    lse = shift + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    out = (wa / total)[..., None] * out_a.to(compute) + (wb / total)[..., None] * out_b.to(compute)
    return out, lse


def merge_unnormalised_weights(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    lse = shift + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(compute) + wb[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_swapped_weights(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(a, b)
    m = torch.where(m == -math.inf, torch.zeros_like(m), m)
    w_a = torch.exp(a - m)
    w_b = torch.exp(b - m)
    s = w_a + w_b
    lse = m + torch.log(s)
    s = s.masked_fill(s == 0, 1.0)
    w_a, w_b = (w_a / s)[..., None], (w_b / s)[..., None]
    out = w_b * out_a.to(compute) + w_a * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# =============================================================== merge_attention_states: right
def merge_sigmoid_float64(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    both_empty = torch.isneginf(la) & torch.isneginf(lb)
    diff = torch.where(both_empty, torch.zeros_like(la), la - lb)
    w_a = torch.sigmoid(diff)  # e^a / (e^a + e^b)
    w_a = torch.where(both_empty, torch.zeros_like(w_a), w_a)
    w_b = torch.where(both_empty, torch.zeros_like(w_a), 1.0 - w_a)
    lse = torch.logaddexp(la, lb)
    out = w_a.unsqueeze(-1) * out_a.double() + w_b.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    stacked = torch.stack([lse_a.float() if lse_a.dtype != torch.float64 else lse_a,
                           lse_b.float() if lse_b.dtype != torch.float64 else lse_b], dim=-1)
    lse = torch.logsumexp(stacked, dim=-1)  # (..., N_q)
    shares = torch.nan_to_num(torch.softmax(stacked, dim=-1), nan=0.0)  # (..., N_q, 2)
    outs = torch.stack([out_a, out_b], dim=-2).to(shares.dtype)  # (..., N_q, 2, d_v)
    out = torch.einsum("...s,...sd->...d", shares, outs)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================= online_softmax_attention: wrong
def online_topleft_causal(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    rows = torch.arange(n_q)[:, None]
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            cols = torch.arange(s0, s1)[None, :]
            sc = sc.masked_fill(cols > rows, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        alpha = torch.exp(m - sh)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_block_local_positions(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(compute) * d ** -0.5
    row_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=compute)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    q_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    start = 0
    while start < n_k:
        stop = min(start + block_size, n_k)
        scores = q_s @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            k_pos = torch.arange(stop - start)[None, :]  # positions of this block's keys
            scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        scale = torch.exp(row_max - shift)
        row_sum = row_sum * scale + w.sum(dim=-1, keepdim=True)
        acc = acc * scale + w @ v[:, :, start:stop].to(compute)
        row_max = new_max
        start = stop
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(dt) / math.sqrt(d)
    mx = torch.full((b, h, n_q, 1), -math.inf, dtype=dt)
    sm = torch.zeros((b, h, n_q, 1), dtype=dt)
    acc = torch.zeros((b, h, n_q, d), dtype=dt)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    n_blocks = max(1, n_k // block_size)
    for i in range(n_blocks):
        lo, hi = i * block_size, min((i + 1) * block_size, n_k)
        s = qf @ k[:, :, lo:hi].to(dt).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        new = torch.maximum(mx, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(new), 0.0, new)
        e = torch.exp(s - safe)
        r = torch.exp(mx - safe)
        sm = sm * r + e.sum(-1, keepdim=True)
        acc = acc * r + e @ v[:, :, lo:hi].to(dt)
        mx = new
    return (acc / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_sum_not_rescaled(q, k, v, block_size=64, causal=False):
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
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_finite_mask_fill(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(f) * (1.0 / math.sqrt(D))
    run_max = torch.full((B, H, Nq, 1), -math.inf, dtype=f)
    run_sum = torch.zeros((B, H, Nq, 1), dtype=f)
    run_out = torch.zeros((B, H, Nq, D), dtype=f)
    qpos = (torch.arange(Nq) + (Nk - Nq)).unsqueeze(1)
    for j in range(0, Nk, block_size):
        kk = k[:, :, j:j + block_size].to(f)
        vv = v[:, :, j:j + block_size].to(f)
        s = qq @ kk.transpose(-1, -2)
        if causal:
            kpos = torch.arange(j, j + kk.shape[2]).unsqueeze(0)
            s = s.masked_fill(kpos > qpos, -1e4)
        m_new = torch.maximum(run_max, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        c = torch.exp(run_max - m_new)
        run_sum = c * run_sum + p.sum(-1, keepdim=True)
        run_out = c * run_out + p @ vv
        run_max = m_new
    return (run_out / run_sum.clamp_min(1e-30)).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((b, h, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((b, h, nq, 1), dtype=ct)
    o = torch.zeros((b, h, nq, d), dtype=ct)
    qp = torch.arange(nq)[:, None] + (nk - nq)
    for s0 in range(0, nk, block_size):
        s1 = min(nk, s0 + block_size)
        sc = torch.einsum("bhqd,bhkd->bhqk", qs, k[:, :, s0:s1].to(ct))
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qp, -math.inf)
        mn = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(mn), 0.0, mn)
        p = torch.exp(sc - sh)
        a = torch.exp(m - sh)
        l = a * l + p.sum(-1, keepdim=True)
        o = a * o + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, s0:s1].to(ct))
        m = mn
    return o / torch.where(l == 0, 1.0, l)


# ============================================================= online_softmax_attention: right
def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Attend to each block on its own (normalised output + log-sum-exp), merge as we go."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qd = q.double() / math.sqrt(d)
    out = torch.zeros((b, h, n_q, d), dtype=torch.float64)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    last_visible = torch.arange(n_q) + (n_k - n_q)  # (N_q,)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = torch.einsum("bhqd,bhkd->bhqk", qd, k[:, :, lo:hi].double())
        if causal:
            hidden = torch.arange(lo, hi)[None, :] > last_visible[:, None]
            s = s.masked_fill(hidden, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf where the block is all hidden
        p = torch.exp(s - torch.where(torch.isinf(blk_lse), 0.0, blk_lse)[..., None])
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, lo:hi].double())
        new_lse = torch.logaddexp(lse, blk_lse)
        ref = torch.where(torch.isinf(new_lse), 0.0, new_lse)
        w_old = torch.exp(lse - ref)[..., None]
        w_blk = torch.exp(blk_lse - ref)[..., None]
        out = w_old * out + w_blk * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_per_head_loop(q, k, v, block_size=64, causal=False):
    """One (batch, head) at a time, 2-D tensors, float64 running max / sum / output."""
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    result = torch.empty(q.shape, dtype=torch.float64)
    offset = Nk - Nq
    for bi in range(B):
        for hi in range(H):
            qm = q[bi, hi].double()
            mx = torch.full((Nq,), -math.inf, dtype=torch.float64)
            den = torch.zeros(Nq, dtype=torch.float64)
            num = torch.zeros((Nq, D), dtype=torch.float64)
            for j0 in range(0, Nk, block_size):
                j1 = min(j0 + block_size, Nk)
                s = (qm @ k[bi, hi, j0:j1].double().T) / math.sqrt(D)
                if causal:
                    allowed = torch.arange(j0, j1)[None, :] <= (torch.arange(Nq)[:, None] + offset)
                    s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
                m2 = torch.maximum(mx, s.max(dim=1).values)
                ref = torch.where(torch.isfinite(m2), m2, torch.zeros_like(m2))
                e = torch.exp(s - ref[:, None])
                corr = torch.exp(mx - ref)
                den = den * corr + e.sum(dim=1)
                num = num * corr[:, None] + e @ v[bi, hi, j0:j1].double()
                mx = m2
            den = torch.where(den > 0, den, torch.ones_like(den))
            result[bi, hi] = num / den[:, None]
    return result.to(q.dtype)


ENTRIES = [
    # merge_attention_states
    Entry("merge_attention_states", "wrong", "no_max_shift",
          "It exponentiates the log-sum-exps directly (e^lse_a, e^lse_b) without subtracting the "
          "larger one first, so for lse of magnitude 1e4 the exponentials overflow to inf (or "
          "underflow to 0) and the merged out and lse come out as NaN/inf.",
          merge_no_max_shift),
    Entry("merge_attention_states", "wrong", "unguarded_empty_rows",
          "It subtracts the larger log-sum-exp without replacing it by 0 when it is -inf, so on a "
          "row where both sets are empty it computes -inf - (-inf) = NaN and returns NaN instead of "
          "a zero row and lse -inf.",
          merge_unguarded_shift),
    Entry("merge_attention_states", "wrong", "lse_forgets_max",
          "The merged log-sum-exp is returned as log(w_a + w_b) without adding back the max that "
          "was subtracted before exponentiating, so lse is wrong by that max (the output is "
          "right).",
          merge_lse_forgets_max),
    Entry("merge_attention_states", "wrong", "keeps_float32",
          "It computes in float32 for half-precision inputs but never casts back, so out and lse "
          "come back as float32 instead of the inputs' float16/bfloat16 dtype.",
          merge_keeps_float32),
    Entry("merge_attention_states", "wrong", "unnormalised_weights",
          "It weights the outputs by exp(lse_a - m) and exp(lse_b - m) without dividing by their "
          "sum, so the larger set gets weight 1 and the two weights no longer add up to 1 "
          "whenever both sets have keys.",
          merge_unnormalised_weights),
    Entry("merge_attention_states", "wrong", "swapped_weights",
          "The weights are paired with the wrong outputs (w_b multiplies out_a and w_a multiplies "
          "out_b), so each set's output is weighted by the other set's share.",
          merge_swapped_weights),
    Entry("merge_attention_states", "right", "sigmoid_float64", None, merge_sigmoid_float64),
    Entry("merge_attention_states", "right", "stacked_softmax_einsum", None, merge_stacked_softmax),
    # online_softmax_attention
    Entry("online_softmax_attention", "wrong", "topleft_causal",
          "The causal mask compares key positions with the query index i instead of the absolute "
          "position i + N_k - N_q, so it is aligned top-left and is wrong whenever N_q != N_k.",
          online_topleft_causal),
    Entry("online_softmax_attention", "wrong", "block_local_key_positions",
          "For the causal mask it numbers each block's keys from 0 (arange(stop - start)) instead "
          "of by their absolute positions start..stop-1, so keys in later blocks are let through "
          "to queries that must not see them.",
          online_block_local_positions),
    Entry("online_softmax_attention", "wrong", "drops_ragged_block",
          "It loops over n_k // block_size blocks, so when N_k is not a multiple of block_size the "
          "last, shorter block of keys is never visited.",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "sum_not_rescaled",
          "When a block raises the running max it rescales the accumulator by exp(m - m') but adds "
          "the new block's sum to the old row_sum without rescaling it, so the final division is "
          "by the wrong normaliser.",
          online_sum_not_rescaled),
    Entry("online_softmax_attention", "wrong", "finite_mask_fill",
          "Hidden keys are filled with -1e4 instead of -inf, so a query that sees no key at all "
          "(causal, N_q > N_k) gets the uniform average of the values instead of a zero row.",
          online_finite_mask_fill),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "It accumulates in float32 but returns the accumulator without casting back, so "
          "float16/bfloat16 inputs give a float32 result instead of q's dtype.",
          online_returns_float32),
    Entry("online_softmax_attention", "right", "merge_block_states_float64", None,
          online_merge_block_states),
    Entry("online_softmax_attention", "right", "per_head_loop_float64", None, online_per_head_loop),
]
