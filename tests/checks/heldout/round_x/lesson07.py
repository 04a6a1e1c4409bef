"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ merge_attention_states: wrong
def merge_no_max_shift(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(ct), lse_b.to(ct)
    ea, eb = torch.exp(la), torch.exp(lb)
    tot = ea + eb
    lse = torch.log(tot)
    denom = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / denom)[..., None] * out_a.to(ct) + (eb / denom)[..., None] * out_b.to(ct)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(a, b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(a - m), torch.exp(b - m)
    s = wa + wb
    lse = m + torch.log(s)
    s = torch.where(s == 0, torch.ones_like(s), s)
    out = (wa / s) * out_a.to(compute) + (wb / s) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_nan_when_both_empty(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    lse_a_, lse_b_ = lse_a.to(dt), lse_b.to(dt)
    big = torch.maximum(lse_a_, lse_b_)
    w_a = torch.exp(lse_a_ - big)
    w_b = torch.exp(lse_b_ - big)
    total = w_a + w_b
    merged_lse = big + torch.log(total)
    merged = (w_a / total).unsqueeze(-1) * out_a.to(dt) + (w_b / total).unsqueeze(-1) * out_b.to(dt)
    return merged.to(out_a.dtype), merged_lse.to(lse_a.dtype)


def merge_lse_forgets_shift(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(work)
    lb = lse_b.to(work)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), 0.0, top)
    ea = torch.exp(la - top)
    eb = torch.exp(lb - top)
    norm = ea + eb
    lse = torch.log(norm)
    safe = torch.where(norm == 0, 1.0, norm)
    out = (ea / safe)[..., None] * out_a.to(work) + (eb / safe)[..., None] * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_not_renormalised(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    x, y = lse_a.to(c), lse_b.to(c)
    mx = torch.maximum(x, y)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    alpha = torch.exp(x - mx)
    beta = torch.exp(y - mx)
    lse = mx + torch.log(alpha + beta)
    out = alpha[..., None] * out_a.to(c) + beta[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_forgets_cast_back(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    lse_a, lse_b = lse_a.to(compute), lse_b.to(compute)
    out_a, out_b = out_a.to(compute), out_b.to(compute)
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(torch.isinf(m), 0.0, m)
    wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)
    total = wa + wb
    lse = m + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    out = (wa / total)[..., None] * out_a + (wb / total)[..., None] * out_b
    return out, lse


# ============================================================ merge_attention_states: right
def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    a64, b64 = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(a64, b64)
    finite = torch.isfinite(lse)
    safe_lse = torch.where(finite, lse, torch.zeros_like(lse))
    w_a = torch.where(finite, torch.exp(a64 - safe_lse), torch.zeros_like(lse))
    w_b = torch.where(finite, torch.exp(b64 - safe_lse), torch.zeros_like(lse))
    out = torch.einsum("...q,...qd->...qd", w_a, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", w_b, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.to(torch.float64), lse_b.to(torch.float64)
    a_empty, b_empty = torch.isneginf(la), torch.isneginf(lb)
    both = a_empty & b_empty
    diff = torch.where(both, torch.zeros_like(la), la - lb)  # +inf / -inf when one is empty
    share_a = torch.sigmoid(diff)
    share_b = torch.sigmoid(-diff)
    share_a = torch.where(both, torch.zeros_like(share_a), share_a)
    share_b = torch.where(both, torch.zeros_like(share_b), share_b)
    hi = torch.maximum(la, lb)
    gap = torch.where(both, torch.zeros_like(la), (la - lb).abs())
    lse = torch.where(both, hi, hi + torch.log1p(torch.exp(-gap)))
    out = share_a.unsqueeze(-1) * out_a.double() + share_b.unsqueeze(-1) * out_b.double()
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
    for s in range(0, nk, block_size):
        e = min(s + block_size, nk)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-1, -2)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        l = l * torch.exp(m - sh) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s:e].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    q_s = q.to(dt) * d ** -0.5
    run_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=dt)
    run_sum = torch.zeros((batch, heads, n_q, 1), dtype=dt)
    acc = torch.zeros((batch, heads, n_q, d), dtype=dt)
    rows = torch.arange(n_q)[:, None]
    for start in range(0, n_k, block_size):
        stop = min(n_k, start + block_size)
        scores = q_s @ k[:, :, start:stop].to(dt).transpose(-2, -1)
        if causal:
            cols = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(cols > rows, float("-inf"))
        new_max = torch.maximum(run_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        corr = torch.exp(run_max - shift)
        run_sum = run_sum * corr + w.sum(dim=-1, keepdim=True)
        acc = acc * corr + w @ v[:, :, start:stop].to(dt)
        run_max = new_max
    return (acc / torch.where(run_sum == 0, 1.0, run_sum)).to(q.dtype)


def online_nan_on_empty_rows(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[-2]
    f = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    mx = torch.full((b, h, nq, 1), -math.inf, dtype=f)
    den = torch.zeros((b, h, nq, 1), dtype=f)
    num = torch.zeros((b, h, nq, d), dtype=f)
    last_visible = torch.arange(nq)[:, None] + nk - nq
    for j0 in range(0, nk, block_size):
        j1 = min(j0 + block_size, nk)
        kb, vb = k[:, :, j0:j1].to(f), v[:, :, j0:j1].to(f)
        s = (q.to(f) @ kb.transpose(-2, -1)) * scale
        if causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > last_visible, -math.inf)
        mnew = torch.maximum(mx, s.amax(dim=-1, keepdim=True))
        e = torch.exp(s - mnew)
        r = torch.exp(mx - mnew)
        den = den * r + e.sum(dim=-1, keepdim=True)
        num = num * r + e @ vb
        mx = mnew
    den = torch.where(den == 0, torch.ones_like(den), den)
    return (num / den).to(q.dtype)


def online_ragged_tail_dropped(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    cdt = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(cdt) / math.sqrt(d)
    row_max = torch.full((B, H, Nq, 1), -math.inf, dtype=cdt)
    row_sum = torch.zeros((B, H, Nq, 1), dtype=cdt)
    acc = torch.zeros((B, H, Nq, d), dtype=cdt)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    n_blocks = max(1, Nk // block_size)
    for i in range(n_blocks):
        lo, hi = i * block_size, min((i + 1) * block_size, Nk)
        sc = qq @ k[:, :, lo:hi].to(cdt).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        nm = torch.maximum(row_max, sc.amax(dim=-1, keepdim=True))
        sh = torch.where(torch.isinf(nm), 0.0, nm)
        p = torch.exp(sc - sh)
        rs = torch.exp(row_max - sh)
        row_sum = row_sum * rs + p.sum(dim=-1, keepdim=True)
        acc = acc * rs + p @ v[:, :, lo:hi].to(cdt)
        row_max = nm
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_k_as_values(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) * (1.0 / math.sqrt(d))
    row_max = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk = k[:, :, start:stop].to(ct)
        v_blk = v[:, :, start:stop].to(ct)
        scores = qs @ k_blk.transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        w = torch.exp(scores - shift)
        resc = torch.exp(row_max - shift)
        row_sum = row_sum * resc + w.sum(dim=-1, keepdim=True)
        acc = acc * resc + w @ k_blk
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_no_scale(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(ct)
    M = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    L = torch.zeros((B, H, n_q, 1), dtype=ct)
    O = torch.zeros((B, H, n_q, d), dtype=ct)
    visible_upto = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        S = qf @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            S = S.masked_fill(torch.arange(start, stop)[None, :] > visible_upto, -math.inf)
        M_new = torch.maximum(M, S.amax(-1, keepdim=True))
        Ms = torch.where(torch.isinf(M_new), 0.0, M_new)
        P = torch.exp(S - Ms)
        alpha = torch.exp(M - Ms)
        L = alpha * L + P.sum(-1, keepdim=True)
        O = alpha * O + P @ v[:, :, start:stop].to(ct)
        M = M_new
    return (O / torch.where(L == 0, 1.0, L)).to(q.dtype)


# ============================================================ online_softmax_attention: right
def online_merge_block_states_per_head(q, k, v, block_size=64, causal=False):
    """Per (batch, head): each key block's own (out, lse), merged into the running pair."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    result = torch.zeros(q.shape, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            qh = q[b, h].double() / math.sqrt(d)
            run_out = torch.zeros(n_q, d, dtype=torch.float64)
            run_lse = torch.full((n_q,), -math.inf, dtype=torch.float64)
            for start in range(0, n_k, block_size):
                stop = min(start + block_size, n_k)
                s = qh @ k[b, h, start:stop].double().T
                if causal:
                    qi = torch.arange(n_q)[:, None] + (n_k - n_q)
                    kj = torch.arange(start, stop)[None, :]
                    s = torch.where(kj <= qi, s, torch.tensor(-math.inf, dtype=torch.float64))
                blk_lse = torch.logsumexp(s, dim=1)
                ok = torch.isfinite(blk_lse)
                p = torch.exp(s - torch.where(ok, blk_lse, 0.0)[:, None])
                blk_out = p @ v[b, h, start:stop].double()
                new_lse = torch.logaddexp(run_lse, blk_lse)
                fin = torch.isfinite(new_lse)
                base = torch.where(fin, new_lse, 0.0)
                wa = torch.where(fin, torch.exp(run_lse - base), 0.0)
                wb = torch.where(fin, torch.exp(blk_lse - base), 0.0)
                run_out = wa[:, None] * run_out + wb[:, None] * blk_out
                run_lse = new_lse
            result[b, h] = run_out
    return result.to(q.dtype)


def online_einsum_f64(q, k, v, block_size=64, causal=False):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qd = q.to(torch.float64) / math.sqrt(d)
    running_max = None
    denom = None
    numer = None
    offset = n_k - n_q
    for lo in range(0, n_k, block_size):
        hi = min(n_k, lo + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", qd, k[:, :, lo:hi].to(torch.float64))
        if causal:
            allowed = (torch.arange(lo, hi)[None, :] - torch.arange(n_q)[:, None]) <= offset
            s = s.masked_fill(~allowed, float("-inf"))
        blk_max = s.max(dim=-1, keepdim=True).values
        if running_max is None:
            running_max = torch.full_like(blk_max, float("-inf"))
            denom = torch.zeros_like(blk_max)
            numer = torch.zeros(q.shape, dtype=torch.float64)
        m = torch.maximum(running_max, blk_max)
        m_safe = m.nan_to_num(neginf=0.0)
        e = (s - m_safe).exp()
        shrink = (running_max - m_safe).exp()
        denom = denom * shrink + e.sum(dim=-1, keepdim=True)
        numer = numer * shrink + torch.einsum("bhqk,bhkd->bhqd", e, v[:, :, lo:hi].to(torch.float64))
        running_max = m
    out = numer / denom.clamp_min(1e-300)
    return out.to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "no_max_shift",
          "exponentiates the raw log-sum-exps exp(lse_a), exp(lse_b) without subtracting the "
          "larger one first, so lse of size 1e4 overflows to inf and the result is NaN/inf",
          merge_no_max_shift),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "multiplies the per-row weights (..., N_q) into the outputs (..., N_q, d_v) without "
          "a trailing axis, so they broadcast against d_v instead of the rows (a shape error, "
          "or rows mixed up when N_q == d_v)",
          merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "nan_when_both_empty",
          "subtracts the larger lse without replacing -inf by 0, so a row where both sets are "
          "empty computes exp(-inf - (-inf)) = NaN instead of a zero row and -inf",
          merge_nan_when_both_empty),
    Entry("merge_attention_states", "wrong", "lse_forgets_shift",
          "returns log(w_a + w_b) as the merged log-sum-exp and forgets to add back the max it "
          "subtracted, so lse is off by max(lse_a, lse_b)",
          merge_lse_forgets_shift),
    Entry("merge_attention_states", "wrong", "outputs_not_renormalised",
          "mixes the outputs with exp(lse_set - max) instead of exp(lse_set - lse): the weights "
          "are not divided by their sum, so they do not add up to 1",
          merge_not_renormalised),
    Entry("merge_attention_states", "wrong", "forgets_cast_back",
          "returns out and lse in the float32 compute dtype instead of casting them back to the "
          "inputs' dtypes (float16 / bfloat16 inputs come back as float32)",
          merge_forgets_cast_back),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "sigmoid_shares", None, merge_sigmoid),

    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "rescales the running sum by exp(old_max - new_max) but not the accumulator acc, so "
          "blocks seen before the max grew keep too much weight",
          online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "aligns the causal mask top-left (key j visible when j <= i) instead of bottom-right "
          "(j <= i + N_k - N_q), wrong whenever N_q != N_k",
          online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "nan_on_empty_rows",
          "shifts by the running max without replacing -inf by 0, so a query row that has seen "
          "only masked keys computes exp(-inf + inf) = NaN",
          online_nan_on_empty_rows),
    Entry("online_softmax_attention", "wrong", "ragged_tail_dropped",
          "loops over N_k // block_size blocks, so the last, shorter block of keys is never "
          "visited when block_size does not divide N_k",
          online_ragged_tail_dropped),
    Entry("online_softmax_attention", "wrong", "keys_as_values",
          "accumulates weights @ k_blk instead of weights @ v_blk: the block of keys is reused "
          "where the values belong",
          online_k_as_values),
    Entry("online_softmax_attention", "wrong", "no_scale",
          "never divides the scores by sqrt(d)",
          online_no_scale),
    Entry("online_softmax_attention", "right", "merge_block_states_per_head", None,
          online_merge_block_states_per_head),
    Entry("online_softmax_attention", "right", "einsum_float64", None, online_einsum_f64),
]
