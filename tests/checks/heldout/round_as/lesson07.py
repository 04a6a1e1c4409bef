"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# =============================================================================================
# merge_attention_states
# =============================================================================================

def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    m = torch.maximum(la, lb)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    tot = wa + wb
    lse = m + torch.log(tot)
    out = (wa / tot)[..., None] * out_a.to(ct) + (wb / tot)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stack_wrong_dim(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    both = torch.stack([lse_a.to(work), lse_b.to(work)])
    lse = torch.logsumexp(both, dim=-1)
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    wa = torch.exp(lse_a.to(work) - safe)
    wb = torch.exp(lse_b.to(work) - safe)
    out = wa[..., None] * out_a.to(work) + wb[..., None] * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_forgets_cast_back(out_a, lse_a, out_b, lse_b):
    a, b = lse_a.float(), lse_b.float()
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    ea, eb = torch.exp(a - top), torch.exp(b - top)
    s = ea + eb
    lse = top + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    out = (ea / s).unsqueeze(-1) * out_a.float() + (eb / s).unsqueeze(-1) * out_b.float()
    return out, lse


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), 0.0, m)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    lse = m + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_log1p(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), 0.0, hi)
    wa, wb = torch.exp(la - hi), torch.exp(lb - hi)
    total = wa + wb
    lse = hi + torch.log1p(total)  # "log1p is the stable log"
    denom = torch.where(total == 0, 1.0, total)
    out = (wa / denom)[..., None] * out_a.to(c) + (wb / denom)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_reuses_out_a(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), 0.0, m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    total = wa + wb
    lse = m + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    oa = out_a.to(c)
    ob = out_a.to(c)
    out = (wa / total)[..., None] * oa + (wb / total)[..., None] * ob
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_right_logaddexp(out_a, lse_a, out_b, lse_b):
    a64, b64 = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(a64, b64)
    empty = torch.isneginf(lse)
    ref = torch.where(empty, torch.zeros_like(lse), lse)
    w_a = torch.where(empty, torch.zeros_like(lse), torch.exp(a64 - ref))
    w_b = torch.where(empty, torch.zeros_like(lse), torch.exp(b64 - ref))
    out = torch.einsum("...q,...qd->...qd", w_a, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", w_b, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_right_softmax_pair(out_a, lse_a, out_b, lse_b):
    kind = torch.promote_types(out_a.dtype, torch.float32)
    pair = torch.stack((lse_a.to(kind), lse_b.to(kind)), dim=-1)  # (..., N_q, 2)
    new_lse = torch.logsumexp(pair, dim=-1)
    mix = torch.nan_to_num(torch.softmax(pair, dim=-1), nan=0.0)  # both -inf -> NaN -> 0
    outs = torch.stack((out_a.to(kind), out_b.to(kind)), dim=-1)  # (..., N_q, d_v, 2)
    merged = (outs * mix.unsqueeze(-2)).sum(dim=-1)
    return merged.to(out_a.dtype), new_lse.to(lse_a.dtype)


# =============================================================================================
# online_softmax_attention
# =============================================================================================

def online_top_left_causal(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    rows = torch.arange(nq)[:, None]
    for s0 in range(0, nk, block_size):
        s1 = min(s0 + block_size, nk)
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-2, -1)
        if causal:
            cols = torch.arange(s0, s1)[None, :]
            sc = sc.masked_fill(cols > rows, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ vb
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_max_not_carried(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) * d ** -0.5
    run_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    acc = torch.zeros((b, h, n_q, d), dtype=dt)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = qq @ k[:, :, lo:hi].to(dt).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        base = torch.where(torch.isinf(new_max), 0.0, new_max)
        e = torch.exp(s - base)
        fix = torch.exp(run_max - base)
        run_sum = run_sum * fix + e.sum(dim=-1, keepdim=True)
        acc = acc * fix + e @ v[:, :, lo:hi].to(dt)
    out = acc / torch.where(run_sum == 0, 1.0, run_sum)
    return out.to(q.dtype)


def online_no_inf_shift(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    wd = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(wd) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=wd)
    sm = torch.zeros((B, H, Nq, 1), dtype=wd)
    ac = torch.zeros((B, H, Nq, D), dtype=wd)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for st in range(0, Nk, block_size):
        en = min(st + block_size, Nk)
        sc = qs @ k[:, :, st:en].to(wd).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(st, en)[None, :] > qpos, -math.inf)
        nm = torch.maximum(mx, sc.amax(-1, keepdim=True))
        p = torch.exp(sc - nm)
        alpha = torch.exp(mx - nm)
        sm = sm * alpha + p.sum(-1, keepdim=True)
        ac = ac * alpha + p @ v[:, :, st:en].to(wd)
        mx = nm
    return (ac / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_d_from_wrong_axis(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, _ = q.shape
    d = q.shape[2]
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=ct)
    acc = torch.zeros(q.shape, dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        resc = torch.exp(row_max - shift)
        row_sum = row_sum * resc + w.sum(dim=-1, keepdim=True)
        acc = acc * resc + w @ v[:, :, start:stop].to(ct)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    o = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    n_blocks = max(n_k // block_size, 1)
    for j in range(n_blocks):
        lo, hi = j * block_size, min((j + 1) * block_size, n_k)
        s = qs @ k[:, :, lo:hi].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        m2 = torch.maximum(m, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m2), 0.0, m2)
        p = torch.exp(s - sh)
        c = torch.exp(m - sh)
        l = l * c + p.sum(-1, keepdim=True)
        o = o * c + p @ v[:, :, lo:hi].to(ct)
        m = m2
    return (o / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.float() / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf)
    l = torch.zeros((B, H, n_q, 1))
    acc = torch.zeros((B, H, n_q, d))
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].float().transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        mn = torch.maximum(m, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(mn), 0.0, mn)
        p = torch.exp(s - sh)
        f = torch.exp(m - sh)
        l = l * f + p.sum(-1, keepdim=True)
        acc = acc * f + p @ v[:, :, start:stop].float()
        m = mn
    return acc / torch.where(l == 0, 1.0, l)


def online_right_merge_blocks(q, k, v, block_size=64, causal=False):
    """Normalised (out, lse) per block, merged into the running pair, in float64."""
    nb, nh, nq, d = q.shape
    nk = k.shape[2]
    q64 = q.double() * (1.0 / math.sqrt(d))
    run_out = torch.zeros((nb, nh, nq, d), dtype=torch.float64)
    run_lse = torch.full((nb, nh, nq), -math.inf, dtype=torch.float64)
    offset = nk - nq
    for lo in range(0, nk, block_size):
        hi = min(nk, lo + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, lo:hi].double())
        if causal:
            allowed = (torch.arange(lo, hi)[None, :] <= torch.arange(nq)[:, None] + offset)
            s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf for rows with nothing visible
        fin = torch.isfinite(blk_lse)
        p = torch.exp(s - torch.where(fin, blk_lse, 0.0)[..., None])
        blk_out = torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, lo:hi].double())
        new_lse = torch.logaddexp(run_lse, blk_lse)
        alive = torch.isfinite(new_lse)
        ref = torch.where(alive, new_lse, 0.0)
        w_old = torch.where(alive, torch.exp(run_lse - ref), 0.0)
        w_blk = torch.where(alive, torch.exp(blk_lse - ref), 0.0)
        run_out = w_old[..., None] * run_out + w_blk[..., None] * blk_out
        run_lse = new_lse
    return run_out.to(q.dtype)


def online_right_flat_state(q, k, v, block_size=64, causal=False):
    """Running max and sum kept as (B, H, N_q) (no keepdim), masks as -inf adds."""
    B, H, Nq, d = q.shape
    Nk = k.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(ct)
    big_m = torch.full((B, H, Nq), -math.inf, dtype=ct)
    ell = torch.zeros((B, H, Nq), dtype=ct)
    numer = torch.zeros((B, H, Nq, d), dtype=ct)
    last_key = torch.arange(Nq) + (Nk - Nq)  # (Nq,) last visible key of each query
    starts = list(range(0, Nk, block_size))
    for start in starts:
        kb = k[..., start:start + block_size, :].to(ct)
        vb = v[..., start:start + block_size, :].to(ct)
        s = torch.matmul(qf, kb.transpose(-1, -2)) / math.sqrt(d)
        if causal:
            key_idx = torch.arange(start, start + kb.shape[-2])
            bias = torch.zeros((Nq, kb.shape[-2]), dtype=ct)
            bias[key_idx[None, :] > last_key[:, None]] = -math.inf
            s = s + bias
        cand = torch.maximum(big_m, s.max(dim=-1).values)
        ref = torch.nan_to_num(cand, neginf=0.0)
        e = torch.exp(s - ref.unsqueeze(-1))
        decay = torch.exp(big_m - ref)
        ell = decay * ell + e.sum(dim=-1)
        numer = decay.unsqueeze(-1) * numer + torch.matmul(e, vb)
        big_m = cand
    ell = torch.where(ell > 0, ell, torch.ones_like(ell))
    return (numer / ell.unsqueeze(-1)).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "no_empty_guard",
          "subtracts the larger log-sum-exp even where both sets are empty: exp(-inf - (-inf)) "
          "is NaN, so a row with no key in A or B gives NaN instead of zeros and -inf",
          merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "logsumexp_wrong_dim",
          "stacks the two log-sum-exps on a new axis 0 and then reduces with logsumexp over "
          "dim=-1 (the query axis) instead of dim=0, so the merged lse has the wrong shape and "
          "the weights fail to broadcast (the code raises)",
          merge_stack_wrong_dim),
    Entry("merge_attention_states", "wrong", "forgets_cast_back",
          "computes in float32 and returns the float32 working tensors: out and lse do not "
          "come back in the inputs' dtype (float16, bfloat16 and float64 inputs)",
          merge_forgets_cast_back),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "mixes the outputs with exp(lse_set - max) without dividing by their sum: the two "
          "outputs are already normalised, so the weights must be exp(lse_set - lse)",
          merge_unnormalised),
    Entry("merge_attention_states", "wrong", "log1p_for_log",
          "uses torch.log1p(w_a + w_b) for the log of the total, which is log(1 + total): the "
          "merged lse is too large (log 2 too large where the two sets are equal)",
          merge_log1p),
    Entry("merge_attention_states", "wrong", "out_a_used_twice",
          "copies the line for set A and forgets to change the variable: out_a is used in place "
          "of out_b, so set B's values never enter the output",
          merge_reuses_out_a),
    Entry("merge_attention_states", "right", "logaddexp_einsum_float64", None,
          merge_right_logaddexp),
    Entry("merge_attention_states", "right", "softmax_over_the_pair", None,
          merge_right_softmax_pair),

    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "aligns the causal mask top-left (key j visible when j <= i) instead of bottom-right "
          "(j <= i + N_k - N_q): wrong whenever N_q != N_k",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "running_max_not_updated",
          "never stores the new maximum (row_max = new_max is missing), so every block rescales "
          "the old totals by exp(-inf) = 0 and only the last block of keys survives",
          online_max_not_carried),
    Entry("online_softmax_attention", "wrong", "no_shift_for_masked_rows",
          "subtracts the running max even while it is still -inf: a query whose keys are all "
          "masked so far gets exp(-inf - (-inf)) = NaN instead of a zero row",
          online_no_inf_shift),
    Entry("online_softmax_attention", "wrong", "d_read_from_sequence_axis",
          "reads the head dimension from q.shape[2], which is N_q, so the scores are scaled by "
          "1/sqrt(N_q) instead of 1/sqrt(d)",
          online_d_from_wrong_axis),
    Entry("online_softmax_attention", "wrong", "drops_ragged_last_block",
          "counts the blocks with n_k // block_size, so the last, shorter block of keys is "
          "never visited when block_size does not divide N_k",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "does everything in float32 with .float() and never casts back: the result is "
          "float32 instead of q's dtype (and float64 inputs lose precision)",
          online_returns_float32),
    Entry("online_softmax_attention", "right", "merge_normalised_blocks_float64", None,
          online_right_merge_blocks),
    Entry("online_softmax_attention", "right", "flat_state_additive_bias", None,
          online_right_flat_state),
]
