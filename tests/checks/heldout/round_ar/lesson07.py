"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ============================================================== merge_attention_states: wrong
def merge_overflow(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    ea, eb = torch.exp(la), torch.exp(lb)
    tot = ea + eb
    lse = torch.log(tot)
    den = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / den)[..., None] * out_a.to(ct) + (eb / den)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_inf_guard(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(work), lse_b.to(work)
    m = torch.maximum(a, b)
    wa = torch.exp(a - m)
    wb = torch.exp(b - m)
    s = wa + wb
    new_lse = m + torch.log(s)
    merged = (wa / s).unsqueeze(-1) * out_a.to(work) + (wb / s).unsqueeze(-1) * out_b.to(work)
    return merged.to(out_a.dtype), new_lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    lse_a_, lse_b_ = lse_a.to(dt), lse_b.to(dt)
    big = torch.maximum(lse_a_, lse_b_)
    ref = torch.where(torch.isinf(big), torch.zeros_like(big), big)
    w_a = torch.exp(lse_a_ - ref)
    w_b = torch.exp(lse_b_ - ref)
    total = w_a + w_b
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (w_a / safe)[..., None] * out_a.to(dt) + (w_b / safe)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), big.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    x, y = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(x, y)
    top = torch.where(torch.isinf(top), 0.0, top)
    alpha = torch.exp(x - top)
    beta = torch.exp(y - top)
    lse = top + torch.log(alpha + beta)
    out = alpha[..., None] * out_a.to(c) + beta[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_copy_paste_weight(out_a, lse_a, out_b, lse_b):
    comp = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(comp)
    lb = lse_b.to(comp)
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    scale_a = torch.exp(la - mx)
    scale_b = torch.exp(la - mx)
    tot = scale_a + torch.exp(lb - mx)
    lse = mx + torch.log(tot)
    tot = torch.where(tot == 0, 1.0, tot)
    out = (scale_a / tot)[..., None] * out_a.to(comp) + (scale_b / tot)[..., None] * out_b.to(comp)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(f), lse_b.to(f)
    hi = torch.maximum(la, lb)
    hi = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    pa, pb = torch.exp(la - hi), torch.exp(lb - hi)
    norm = pa + pb
    lse = hi + torch.log(norm)
    norm = torch.where(norm == 0, torch.ones_like(norm), norm)
    out = (pa / norm)[..., None] * out_a.to(f) + (pb / norm)[..., None] * out_b.to(f)
    return out, lse


# ============================================================== merge_attention_states: right
def merge_logaddexp_float64(out_a, lse_a, out_b, lse_b):
    a = lse_a.double()
    b = lse_b.double()
    lse = torch.logaddexp(a, b)
    both_empty = torch.isneginf(a) & torch.isneginf(b)
    lse = torch.where(both_empty, torch.full_like(lse, -math.inf), lse)
    ref = torch.where(both_empty, torch.zeros_like(lse), lse)
    wa = torch.where(torch.isneginf(a), torch.zeros_like(a), torch.exp(a - ref))
    wb = torch.where(torch.isneginf(b), torch.zeros_like(b), torch.exp(b - ref))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stacked_softmax(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    lses = torch.stack([lse_a.to(work), lse_b.to(work)], dim=0)  # (2, ..., N_q)
    outs = torch.stack([out_a.to(work), out_b.to(work)], dim=0)  # (2, ..., N_q, d_v)
    lse = torch.logsumexp(lses, dim=0)
    share = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)
    out = (share.unsqueeze(-1) * outs).sum(dim=0)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


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
        kb, vb = k[:, :, s0:s1].to(ct), v[:, :, s0:s1].to(ct)
        sc = qs @ kb.transpose(-1, -2)
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
    compute = torch.promote_types(q.dtype, torch.float32)
    b, h, n_q, d = q.shape
    n_k = k.shape[-2]
    q32 = q.to(compute) * d ** -0.5
    run_max = q32.new_full((b, h, n_q, 1), float("-inf"))
    run_sum = q32.new_zeros((b, h, n_q, 1))
    acc = q32.new_zeros((b, h, n_q, d))
    rows = torch.arange(n_q).unsqueeze(1)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = q32 @ k[:, :, lo:hi].to(compute).transpose(-2, -1)
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            s = s.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        ref = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        e = torch.exp(s - ref)
        fix = torch.exp(run_max - ref)
        run_sum = run_sum * fix + e.sum(dim=-1, keepdim=True)
        acc = acc * fix + e @ v[:, :, lo:hi].to(compute)
        run_max = new_max
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (acc / run_sum).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(dt) / math.sqrt(D)
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=dt)
    sm = torch.zeros((B, H, Nq, 1), dtype=dt)
    o = torch.zeros((B, H, Nq, D), dtype=dt)
    offset = Nk - Nq
    for blk in range(Nk // block_size):
        a, z = blk * block_size, (blk + 1) * block_size
        sc = torch.einsum("bhqd,bhkd->bhqk", qq, k[:, :, a:z].to(dt))
        if causal:
            qi = torch.arange(Nq)[:, None] + offset
            kj = torch.arange(a, z)[None, :]
            sc = sc.masked_fill(kj > qi, -math.inf)
        nm = torch.maximum(mx, sc.amax(-1, keepdim=True))
        nm0 = torch.where(torch.isinf(nm), 0.0, nm)
        w = torch.exp(sc - nm0)
        r = torch.exp(mx - nm0)
        sm = sm * r + w.sum(-1, keepdim=True)
        o = o * r + torch.einsum("bhqk,bhkd->bhqd", w, v[:, :, a:z].to(dt))
        mx = nm
    return (o / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_no_scale(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(f)
    best = torch.full((B, H, n_q, 1), -math.inf, dtype=f)
    denom = torch.zeros((B, H, n_q, 1), dtype=f)
    numer = torch.zeros((B, H, n_q, d), dtype=f)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    start = 0
    while start < n_k:
        stop = min(start + block_size, n_k)
        scores = qf @ k[:, :, start:stop].to(f).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        cand = torch.maximum(best, scores.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(cand), 0.0, cand)
        ex = torch.exp(scores - base)
        shrink = torch.exp(best - base)
        denom = denom * shrink + ex.sum(-1, keepdim=True)
        numer = numer * shrink + ex @ v[:, :, start:stop].to(f)
        best = cand
        start = stop
    return (numer / torch.where(denom == 0, 1.0, denom)).to(q.dtype)


def online_unguarded_final_divide(q, k, v, block_size=64, causal=False):
    bsz, nh, nq, hd = q.shape
    nk = k.shape[2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(cdt) * (1.0 / math.sqrt(hd))
    row_max = torch.full((bsz, nh, nq, 1), -math.inf, dtype=cdt)
    row_sum = torch.zeros((bsz, nh, nq, 1), dtype=cdt)
    acc = torch.zeros((bsz, nh, nq, hd), dtype=cdt)
    query_pos = torch.arange(nq)[:, None] + nk - nq
    for start in range(0, nk, block_size):
        stop = min(nk, start + block_size)
        scores = qs @ k[:, :, start:stop].to(cdt).transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        p = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = rescale * row_sum + p.sum(dim=-1, keepdim=True)
        acc = rescale * acc + p @ v[:, :, start:stop].to(cdt)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def online_returns_float32(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    acc_t = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(acc_t) / math.sqrt(d)
    M = torch.full((B, H, Nq, 1), -math.inf, dtype=acc_t)
    L = torch.zeros((B, H, Nq, 1), dtype=acc_t)
    O = torch.zeros((B, H, Nq, d), dtype=acc_t)
    qp = (torch.arange(Nq) + (Nk - Nq)).view(Nq, 1)
    for j in range(0, Nk, block_size):
        kj = k[:, :, j:j + block_size].to(acc_t)
        vj = v[:, :, j:j + block_size].to(acc_t)
        S = q_ @ kj.transpose(-2, -1)
        if causal:
            kp = torch.arange(j, j + kj.shape[2]).view(1, -1)
            S = S.masked_fill(kp > qp, -math.inf)
        Mn = torch.maximum(M, S.amax(-1, keepdim=True))
        Ms = torch.where(torch.isinf(Mn), 0.0, Mn)
        P = torch.exp(S - Ms)
        c = torch.exp(M - Ms)
        L = L * c + P.sum(-1, keepdim=True)
        O = O * c + P @ vj
        M = Mn
    return O / torch.where(L == 0, 1.0, L)


# ============================================================ online_softmax_attention: right
def online_float64_einsum(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    running_max = torch.full((B, H, n_q), -math.inf, dtype=torch.float64)
    running_sum = torch.zeros((B, H, n_q), dtype=torch.float64)
    acc = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    last_visible = torch.arange(n_q) + (n_k - n_q)  # (N_q,) largest key index each query sees
    for start in range(0, n_k, block_size):
        k_blk = k[:, :, start:start + block_size].double()
        v_blk = v[:, :, start:start + block_size].double()
        s = torch.einsum("bhid,bhjd->bhij", q64, k_blk)
        if causal:
            j = torch.arange(start, start + k_blk.shape[2])
            hidden = j.unsqueeze(0) > last_visible.unsqueeze(1)
            s = s.masked_fill(hidden, -math.inf)
        m_new = torch.maximum(running_max, s.amax(dim=-1))
        finite = torch.isfinite(m_new)
        m_ref = torch.where(finite, m_new, torch.zeros_like(m_new))
        decay = torch.where(finite, torch.exp(running_max - m_ref), torch.zeros_like(m_ref))
        e = torch.exp(s - m_ref.unsqueeze(-1))
        running_sum = running_sum * decay + e.sum(dim=-1)
        acc = acc * decay.unsqueeze(-1) + torch.einsum("bhij,bhjd->bhid", e, v_blk)
        running_max = m_new
    safe = torch.where(running_sum > 0, running_sum, torch.ones_like(running_sum))
    return (acc / safe.unsqueeze(-1)).to(q.dtype)


def online_tiled_base2(q, k, v, block_size=64, causal=False):
    """Tiles queries as well as keys and exponentiates in base 2 (as FlashAttention kernels do)."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    log2e = 1.0 / math.log(2.0)
    out = torch.zeros((B, H, n_q, d), dtype=work)
    for qs in range(0, n_q, block_size):
        qe = min(qs + block_size, n_q)
        qt = q[:, :, qs:qe].to(work) * (log2e / math.sqrt(d))
        m2 = torch.full((B, H, qe - qs, 1), -math.inf, dtype=work)
        den = torch.zeros((B, H, qe - qs, 1), dtype=work)
        num = torch.zeros((B, H, qe - qs, d), dtype=work)
        for ks in range(0, n_k, block_size):
            ke = min(ks + block_size, n_k)
            s2 = qt @ k[:, :, ks:ke].to(work).transpose(-2, -1)
            if causal:
                qi = torch.arange(qs, qe)[:, None] + (n_k - n_q)
                kj = torch.arange(ks, ke)[None, :]
                s2 = s2.masked_fill(kj > qi, -math.inf)
            top = torch.maximum(m2, s2.amax(-1, keepdim=True))
            ref = torch.where(torch.isinf(top), torch.zeros_like(top), top)
            e2 = torch.exp2(s2 - ref)
            r2 = torch.exp2(m2 - ref)
            den = den * r2 + e2.sum(-1, keepdim=True)
            num = num * r2 + e2 @ v[:, :, ks:ke].to(work)
            m2 = top
        out[:, :, qs:qe] = num / torch.where(den == 0, torch.ones_like(den), den)
    return out.to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exp_without_max_shift",
          "Adds exp(lse_a) + exp(lse_b) directly without subtracting the larger log-sum-exp "
          "first, so a log-sum-exp near 1e4 overflows to inf (and the weights become NaN).",
          merge_overflow),
    Entry("merge_attention_states", "wrong", "no_guard_when_both_empty",
          "Subtracts the larger log-sum-exp without replacing -inf by 0, so a row where both "
          "sets are empty computes -inf - (-inf) = NaN instead of a zero row and -inf.",
          merge_no_inf_guard),
    Entry("merge_attention_states", "wrong", "lse_is_the_max",
          "Returns max(lse_a, lse_b) as the merged log-sum-exp, leaving out the "
          "log(w_a + w_b) term that adds the smaller set's mass.",
          merge_lse_is_max),
    Entry("merge_attention_states", "wrong", "weights_not_divided_by_total",
          "Multiplies the outputs by exp(lse_x - max) without dividing by their sum "
          "w_a + w_b, so the merged output is not renormalised (too large when both sets "
          "count).",
          merge_unnormalised),
    Entry("merge_attention_states", "wrong", "weight_b_from_lse_a",
          "Copy-paste slip: set B's weight is computed from lse_a (exp(lse_a - max)) instead of "
          "lse_b, so out_b gets A's share.",
          merge_copy_paste_weight),
    Entry("merge_attention_states", "wrong", "returns_float32_working_copy",
          "Returns the float32 working tensors without casting back, so float16 / bfloat16 "
          "inputs get float32 results instead of the inputs' dtypes.",
          merge_keeps_float32),
    Entry("merge_attention_states", "right", "logaddexp_float64", None,
          merge_logaddexp_float64),
    Entry("merge_attention_states", "right", "stacked_softmax_logsumexp", None,
          merge_stacked_softmax),
    Entry("online_softmax_attention", "wrong", "accumulator_not_rescaled",
          "When a block raises the running max the running sum is rescaled by "
          "exp(old_max - new_max) but the output accumulator acc is not, so earlier blocks "
          "keep too much weight.",
          online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "causal_mask_top_left",
          "The causal mask compares key index with the raw query index (j > i) instead of "
          "aligning bottom-right (j > i + N_k - N_q), so with N_q != N_k queries see the wrong "
          "keys.",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "drops_ragged_last_block",
          "Loops over N_k // block_size full blocks only, so when block_size does not divide "
          "N_k the last, shorter block of keys is never visited.",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "no_score_scale",
          "The scores q k^T are never multiplied by 1/sqrt(d).",
          online_no_scale),
    Entry("online_softmax_attention", "wrong", "final_divide_unguarded",
          "Divides acc by row_sum at the end without guarding row_sum == 0, so a query with "
          "no visible key (causal, N_q > N_k) gives 0/0 = NaN instead of a zero row.",
          online_unguarded_final_divide),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "Returns the float32 accumulator without casting back to q's dtype, so float16 / "
          "bfloat16 inputs get a float32 result.",
          online_returns_float32),
    Entry("online_softmax_attention", "right", "float64_einsum_1d_state", None,
          online_float64_einsum),
    Entry("online_softmax_attention", "right", "query_and_key_tiles_base2", None,
          online_tiled_base2),
]
