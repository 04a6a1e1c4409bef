"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(ct))
    eb = torch.exp(lse_b.to(ct))
    tot = ea + eb
    lse = torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(ct) + (eb / safe)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unsafe_divide(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    total = wa + wb
    lse = m + torch.log(total)
    out = (wa / total)[..., None] * out_a.to(ct) + (wb / total)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_renormalise(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(a - top)
    w_b = torch.exp(b - top)
    lse = top + torch.log(w_a + w_b)
    out = w_a.unsqueeze(-1) * out_a.to(compute) + w_b.unsqueeze(-1) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    lse_a32, lse_b32 = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(lse_a32, lse_b32)
    shift = torch.where(torch.isinf(top), 0.0, top)
    w_a = torch.exp(lse_a32 - shift)
    w_b = torch.exp(lse_b32 - shift)
    total = w_a + w_b
    lse = shift + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    out = (w_a / total)[..., None] * out_a.to(compute) + (w_b / total)[..., None] * out_b.to(compute)
    return out, lse


def merge_copy_paste_lse(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(dt)
    lb = lse_a.to(dt)
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), 0.0, hi)
    ea, eb = torch.exp(la - hi), torch.exp(lb - hi)
    s = ea + eb
    lse = hi + torch.log(s)
    s = torch.where(s == 0, 1.0, s)
    out = (ea / s)[..., None] * out_a.to(dt) + (eb / s)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_log1p(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    x, y = lse_a.to(compute), lse_b.to(compute)
    big = torch.maximum(x, y)
    big = torch.where(big == -math.inf, torch.zeros_like(big), big)
    px, py = torch.exp(x - big), torch.exp(y - big)
    z = px + py
    lse = big + torch.log1p(z)  # stable log
    z = torch.where(z == 0, torch.ones_like(z), z)
    out = (px / z)[..., None] * out_a.to(compute) + (py / z)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================ merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la = lse_a.double()
    lb = lse_b.double()
    lse = torch.logaddexp(la, lb)
    both_empty = torch.isneginf(lse)
    ref = torch.where(both_empty, torch.zeros_like(lse), lse)
    wa = torch.where(both_empty, torch.zeros_like(la), torch.exp(la - ref))
    wb = torch.where(both_empty, torch.zeros_like(lb), torch.exp(lb - ref))
    out = torch.einsum("...q,...qd->...qd", wa, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stack_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a.double(), lse_b.double()], dim=0)  # (2, ..., N_q)
    outs = torch.stack([out_a.double(), out_b.double()], dim=0)  # (2, ..., N_q, d_v)
    lse = torch.logsumexp(lses, dim=0)
    weights = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)
    merged = (weights.unsqueeze(-1) * outs).sum(dim=0)
    return merged.to(out_a.dtype), lse.to(lse_a.dtype)


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
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        corr = torch.exp(m - sh)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(compute) * d ** -0.5
    run_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=compute)
    run_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute)
    rows = torch.arange(n_q).unsqueeze(1)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q_s @ k[:, :, start:stop].to(compute).transpose(-2, -1)
        if causal:
            cols = torch.arange(start, stop).unsqueeze(0)
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        scale = torch.exp(run_max - shift)
        run_sum = run_sum * scale + w.sum(dim=-1, keepdim=True)
        acc = acc * scale + w @ v[:, :, start:stop].to(compute)
        run_max = new_max
    out = acc / torch.where(run_sum == 0, 1.0, run_sum)
    return out.to(q.dtype)


def online_floor_block_count(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(compute) / math.sqrt(d)
    mx = torch.full((b, h, n_q, 1), -math.inf, dtype=compute)
    sm = torch.zeros((b, h, n_q, 1), dtype=compute)
    acc = torch.zeros((b, h, n_q, d), dtype=compute)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    n_blocks = n_k // block_size
    for blk in range(n_blocks):
        lo, hi = blk * block_size, (blk + 1) * block_size
        s = qq @ k[:, :, lo:hi].to(compute).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        nm = torch.maximum(mx, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(nm), 0.0, nm)
        e = torch.exp(s - shift)
        r = torch.exp(mx - shift)
        sm = sm * r + e.sum(-1, keepdim=True)
        acc = acc * r + e @ v[:, :, lo:hi].to(compute)
        mx = nm
    return (acc / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_unguarded_shift(q, k, v, block_size=64, causal=False):
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
        weights = torch.exp(scores - new_max)
        rescale = torch.exp(row_max - new_max)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(compute)
        row_max = new_max
    out = acc / torch.where(row_sum == 0, 1.0, row_sum)
    return out.to(q.dtype)


def online_full_scores(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    pieces = []
    for lo in range(0, Nk, block_size):
        hi = min(lo + block_size, Nk)
        pieces.append(qs @ k[:, :, lo:hi].to(ct).transpose(-2, -1))
    scores = torch.cat(pieces, dim=-1)  # all blocks side by side
    if causal:
        allowed = torch.ones(Nq, Nk, dtype=torch.bool).tril(Nk - Nq)
        scores = scores.masked_fill(~allowed, -math.inf)
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(scores - top)
    tot = e.sum(-1, keepdim=True)
    out = (e @ v.to(ct)) / torch.where(tot == 0, 1.0, tot)
    return out.to(q.dtype)


def online_accumulates_keys(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qh = q.to(ct) / math.sqrt(d)
    m_i = torch.full((batch, heads, n_q, 1), -math.inf, dtype=ct)
    l_i = torch.zeros((batch, heads, n_q, 1), dtype=ct)
    o_i = torch.zeros((batch, heads, n_q, d), dtype=ct)
    qpos = torch.arange(n_q).view(-1, 1) + (n_k - n_q)
    for j in range(0, n_k, block_size):
        k_j = k[:, :, j:j + block_size].to(ct)
        s_ij = qh @ k_j.transpose(-2, -1)
        if causal:
            kpos = torch.arange(j, j + k_j.shape[2]).view(1, -1)
            s_ij = s_ij.masked_fill(kpos > qpos, -math.inf)
        m_new = torch.maximum(m_i, s_ij.amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p_ij = torch.exp(s_ij - m_safe)
        alpha = torch.exp(m_i - m_safe)
        l_i = alpha * l_i + p_ij.sum(dim=-1, keepdim=True)
        o_i = alpha * o_i + p_ij @ k_j
        m_i = m_new
    return (o_i / torch.where(l_i == 0, 1.0, l_i)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_logspace_merge(q, k, v, block_size=64, causal=False):
    """Keep (out, lse) of the keys seen so far and merge each block's own (out, lse) into it."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((b, h, n_q, d), dtype=torch.float64)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    offset = n_k - n_q
    for lo in range(0, n_k, block_size):
        hi = min(n_k, lo + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, lo:hi].double())
        if causal:
            see = (torch.arange(lo, hi)[None, :] <= torch.arange(n_q)[:, None] + offset)
            s = torch.where(see, s, torch.full_like(s, -math.inf))
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_p = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0)
        blk_out = torch.einsum("bhqk,bhkd->bhqd", blk_p, v[:, :, lo:hi].double())
        new_lse = torch.logaddexp(lse, blk_lse)
        ref = torch.where(torch.isneginf(new_lse), torch.zeros_like(new_lse), new_lse)
        w_old = torch.exp(lse - ref)
        w_blk = torch.exp(blk_lse - ref)
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_per_head_loop(q, k, v, block_size=64, causal=False):
    """Loop over batch and head; 2-D running statistics per (b, h), in float64."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    result = torch.empty_like(q)
    inv = 1.0 / math.sqrt(d)
    for bi in range(B):
        for hi in range(H):
            qq = q[bi, hi].double() * inv  # (Nq, d)
            mx = torch.full((Nq,), -math.inf, dtype=torch.float64)
            den = torch.zeros(Nq, dtype=torch.float64)
            num = torch.zeros(Nq, d, dtype=torch.float64)
            for lo in range(0, Nk, block_size):
                kk = k[bi, hi, lo:lo + block_size].double()
                vv = v[bi, hi, lo:lo + block_size].double()
                sc = qq @ kk.T
                if causal:
                    key_idx = torch.arange(lo, lo + kk.shape[0])
                    limit = torch.arange(Nq) + (Nk - Nq)
                    sc[key_idx[None, :] > limit[:, None]] = -math.inf
                bmax = sc.max(dim=1).values
                new = torch.maximum(mx, bmax)
                ok = torch.isfinite(new)
                base = torch.where(ok, new, torch.zeros_like(new))
                factor = torch.where(ok, torch.exp(mx - base), torch.zeros_like(new))
                ex = torch.exp(sc - base[:, None])
                den = den * factor + ex.sum(dim=1)
                num = num * factor[:, None] + ex @ vv
                mx = new
            den = torch.where(den > 0, den, torch.ones_like(den))
            result[bi, hi] = (num / den[:, None]).to(q.dtype)
    return result


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp-without-shift",
          "exponentiates the raw log-sum-exps (exp(lse_a) + exp(lse_b)) without subtracting "
          "the larger one first, so lse values around 1e4 overflow to inf and the output "
          "turns to NaN/inf", merge_naive_exp),
    Entry("merge_attention_states", "wrong", "unsafe-total-divide",
          "divides the weights by their total without guarding the rows where both sets are "
          "empty, so 0/0 gives NaN output rows instead of zeros", merge_unsafe_divide),
    Entry("merge_attention_states", "wrong", "no-renormalise",
          "weights the two outputs by exp(lse_set - max) but never divides by their sum, so "
          "the merged output is not a convex combination (too large wherever both sets count)",
          merge_no_renormalise),
    Entry("merge_attention_states", "wrong", "returns-compute-dtype",
          "does the arithmetic in float32 but returns out and lse in that compute dtype "
          "instead of casting back to the inputs' dtypes (float16/bfloat16 come back as "
          "float32)", merge_keeps_float32),
    Entry("merge_attention_states", "wrong", "lse-b-copied-from-a",
          "a copy-paste slip converts lse_a twice (`lb = lse_a.to(...)`), so set B's "
          "log-sum-exp is never used and both sets get the same weight", merge_copy_paste_lse),
    Entry("merge_attention_states", "wrong", "log1p-for-log",
          "uses torch.log1p(total) where torch.log(total) belongs, as if log1p were just a "
          "'stable log': the merged lse is log(1 + total) + max, too large", merge_log1p),
    Entry("merge_attention_states", "right", "logaddexp-float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stack-logsumexp-softmax", None,
          merge_stack_softmax),

    Entry("online_softmax_attention", "wrong", "acc-not-rescaled",
          "when a block raises the running maximum it rescales row_sum but not the "
          "accumulator acc, so earlier blocks' contributions keep their old, too large scale",
          online_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "causal-top-left",
          "the causal mask compares key positions with the raw query index (j > i) instead of "
          "aligning bottom-right (j > i + N_k - N_q), so it is wrong whenever N_q != N_k",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "floor-block-count",
          "counts the blocks as N_k // block_size, so a ragged last block of keys is never "
          "visited (and no block at all when block_size > N_k)", online_floor_block_count),
    Entry("online_softmax_attention", "wrong", "unguarded-max-shift",
          "subtracts the running max without replacing -inf by 0, so a row that has only "
          "seen masked keys computes exp(-inf - (-inf)) = NaN", online_unguarded_shift),
    Entry("online_softmax_attention", "wrong", "concatenates-all-scores",
          "computes scores block by block but concatenates them into the full N_q x N_k score "
          "matrix and does one ordinary softmax: the values are right but it builds the "
          "tensor the online softmax exists to avoid", online_full_scores),
    Entry("online_softmax_attention", "wrong", "accumulates-keys-not-values",
          "the accumulator adds p @ k_block instead of p @ v_block (the key block reused "
          "where the value block belongs)", online_accumulates_keys),
    Entry("online_softmax_attention", "right", "logspace-block-merge", None,
          online_logspace_merge),
    Entry("online_softmax_attention", "right", "per-head-loops-float64", None,
          online_per_head_loop),
]
