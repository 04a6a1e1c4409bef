"""Held-out catalogue, lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------------------- merge_attention_states
def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    work = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(work), lse_b.to(work)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    tot = wa + wb
    lse = top + torch.log(tot)
    tot = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / tot) * out_a.to(work) + (wb / tot) * out_b.to(work)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    ea = torch.exp(lse_a.to(dt))
    eb = torch.exp(lse_b.to(dt))
    total = ea + eb
    lse = torch.log(total)
    denom = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / denom)[..., None] * out_a.to(dt) + (eb / denom)[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unguarded_max(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(a, b)
    wa = torch.exp(a - m)
    wb = torch.exp(b - m)
    s = wa + wb
    lse = m + torch.log(s)
    out = (wa / s).unsqueeze(-1) * out_a.to(c) + (wb / s).unsqueeze(-1) * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_float32_result(out_a, lse_a, out_b, lse_b):
    f = torch.promote_types(out_a.dtype, torch.float32)
    lse_a, lse_b = lse_a.to(f), lse_b.to(f)
    hi = torch.maximum(lse_a, lse_b)
    hi = torch.where(torch.isneginf(hi), torch.zeros_like(hi), hi)
    alpha = torch.exp(lse_a - hi)
    beta = torch.exp(lse_b - hi)
    norm = alpha + beta
    new_lse = hi + torch.log(norm)
    norm = norm.masked_fill(norm == 0, 1.0)
    new_out = (alpha / norm)[..., None] * out_a.to(f) + (beta / norm)[..., None] * out_b.to(f)
    return new_out, new_lse


def merge_out_a_twice(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la = lse_a.to(dt)
    lb = lse_b.to(dt)
    mx = torch.maximum(la, lb)
    mx = torch.where(torch.isinf(mx), 0.0, mx)
    wa = torch.exp(la - mx)
    wb = torch.exp(lb - mx)
    z = wa + wb
    lse = mx + torch.log(z)
    z = torch.where(z == 0, 1.0, z)
    merged = (wa / z)[..., None] * out_a.to(dt) + (wb / z)[..., None] * out_a.to(dt)
    return merged.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    dt = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(dt), lse_b.to(dt)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), 0.0, top)
    wa = torch.exp(la - top)
    wb = torch.exp(lb - top)
    lse = top + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(dt) + wb[..., None] * out_b.to(dt)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_logaddexp_f64(out_a, lse_a, out_b, lse_b):
    la = lse_a.double()
    lb = lse_b.double()
    lse = torch.logaddexp(la, lb)
    empty = torch.isneginf(lse)
    safe = torch.where(empty, torch.zeros_like(lse), lse)
    wa = torch.where(empty, torch.zeros_like(la), torch.exp(la - safe))
    wb = torch.where(empty, torch.zeros_like(lb), torch.exp(lb - safe))
    out = torch.einsum("...q,...qd->...qd", wa, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stack_softmax(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    lses = torch.stack([lse_a.to(ct), lse_b.to(ct)], dim=0)  # (2, ..., N_q)
    outs = torch.stack([out_a.to(ct), out_b.to(ct)], dim=0)  # (2, ..., N_q, d_v)
    lse = torch.logsumexp(lses, dim=0)
    mix = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)  # both -inf -> NaN -> 0
    out = (mix.unsqueeze(-1) * outs).sum(dim=0)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ----------------------------------------------------------------------------- online_softmax_attention
def online_topleft_causal(q, k, v, block_size=64, causal=False):
    B, H, nq, d = q.shape
    nk = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, nq, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, nq, 1), dtype=ct)
    acc = torch.zeros((B, H, nq, d), dtype=ct)
    rows = torch.arange(nq)[:, None]
    for s in range(0, nk, block_size):
        e = min(s + block_size, nk)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-2, -1)
        if causal:
            cols = torch.arange(s, e)[None, :]
            sc = sc.masked_fill(cols > rows, -math.inf)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(sc - sh)
        corr = torch.exp(m - sh)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc * corr + p @ v[:, :, s:e].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    qq = q.to(work) * d ** -0.5
    run_max = torch.full((batch, heads, n_q, 1), float("-inf"), dtype=work)
    run_sum = torch.zeros(batch, heads, n_q, 1, dtype=work)
    acc = torch.zeros(batch, heads, n_q, d, dtype=work)
    qpos = torch.arange(n_q).unsqueeze(1) + n_k - n_q
    start = 0
    while start < n_k:
        stop = min(n_k, start + block_size)
        scores = qq @ k[:, :, start:stop].to(work).transpose(2, 3)
        if causal:
            kpos = torch.arange(start, stop).unsqueeze(0)
            scores = scores.masked_fill(kpos > qpos, float("-inf"))
        new_max = torch.maximum(run_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(scores - shift)
        run_sum = run_sum * torch.exp(run_max - shift) + w.sum(dim=-1, keepdim=True)
        acc = acc + w @ v[:, :, start:stop].to(work)
        run_max = new_max
        start = stop
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (acc / run_sum).to(q.dtype)


def online_no_inf_guard(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[-2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(dt) / math.sqrt(d)
    row_max = torch.full((b, h, n_q, 1), -math.inf, dtype=dt)
    row_sum = torch.zeros((b, h, n_q, 1), dtype=dt)
    acc = torch.zeros((b, h, n_q, d), dtype=dt)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for lo in range(0, n_k, block_size):
        hi = min(lo + block_size, n_k)
        s = qs @ k[:, :, lo:hi].to(dt).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > query_pos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - new_max)
        scale = torch.exp(row_max - new_max)
        row_sum = row_sum * scale + p.sum(dim=-1, keepdim=True)
        acc = acc * scale + p @ v[:, :, lo:hi].to(dt)
        row_max = new_max
    out = acc / torch.where(row_sum == 0, 1.0, row_sum)
    return out.to(q.dtype)


def online_drops_last_block(q, k, v, block_size=64, causal=False):
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    cd = torch.promote_types(q.dtype, torch.float32)
    q_ = q.to(cd) * (1.0 / math.sqrt(d))
    mx = torch.full((B, H, Nq, 1), -math.inf, dtype=cd)
    sm = torch.zeros((B, H, Nq, 1), dtype=cd)
    acc = torch.zeros((B, H, Nq, d), dtype=cd)
    qpos = torch.arange(Nq)[:, None] + (Nk - Nq)
    for blk in range(Nk // block_size):
        lo, hi = blk * block_size, (blk + 1) * block_size
        kb = k[:, :, lo:hi].to(cd)
        vb = v[:, :, lo:hi].to(cd)
        s = q_ @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(lo, hi)[None, :] > qpos, -math.inf)
        new = torch.maximum(mx, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new), 0.0, new)
        w = torch.exp(s - shift)
        r = torch.exp(mx - shift)
        sm = sm * r + w.sum(-1, keepdim=True)
        acc = acc * r + w @ vb
        mx = new
    return (acc / torch.where(sm == 0, 1.0, sm)).to(q.dtype)


def online_d_from_wrong_axis(q, k, v, block_size=64, causal=False):
    B, H = q.shape[0], q.shape[1]
    n_q = q.shape[2]
    d = q.shape[-2]
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros_like(q, dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for s in range(0, n_k, block_size):
        e = min(s + block_size, n_k)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        mn = torch.maximum(m, sc.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(mn), 0.0, mn)
        p = torch.exp(sc - sh)
        f = torch.exp(m - sh)
        l = f * l + p.sum(-1, keepdim=True)
        acc = f * acc + p @ v[:, :, s:e].to(ct)
        m = mn
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_amax_without_keepdim(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    row_max = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    row_sum = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for s in range(0, n_k, block_size):
        e = min(s + block_size, n_k)
        sc = qs @ k[:, :, s:e].to(ct).transpose(-2, -1)
        if causal:
            sc = sc.masked_fill(torch.arange(s, e)[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, sc.amax(dim=-1))
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)
        p = torch.exp(sc - shift)
        resc = torch.exp(row_max - shift)
        row_sum = row_sum * resc + p.sum(dim=-1, keepdim=True)
        acc = acc * resc + p @ v[:, :, s:e].to(ct)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, 1.0, row_sum)).to(q.dtype)


def online_merge_block_states(q, k, v, block_size=64, causal=False):
    """Right: each block's (out, lse) merged into the running (out, lse) in float64."""
    b, h, nq, d = q.shape
    nk = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((b, h, nq, d), dtype=torch.float64)
    lse = torch.full((b, h, nq), -math.inf, dtype=torch.float64)
    offset = nk - nq
    for lo in range(0, nk, block_size):
        hi = min(nk, lo + block_size)
        s = torch.matmul(q64, k[:, :, lo:hi].double().transpose(-1, -2))
        if causal:
            allowed = torch.arange(lo, hi).view(1, -1) <= torch.arange(nq).view(-1, 1) + offset
            s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf where the block is fully masked
        safe_blk = torch.where(torch.isneginf(blk_lse), torch.zeros_like(blk_lse), blk_lse)
        blk_out = torch.exp(s - safe_blk[..., None]) @ v[:, :, lo:hi].double()
        new_lse = torch.logaddexp(lse, blk_lse)
        safe_new = torch.where(torch.isneginf(new_lse), torch.zeros_like(new_lse), new_lse)
        out = torch.exp(lse - safe_new)[..., None] * out + \
            torch.exp(blk_lse - safe_new)[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_einsum_float32(q, k, v, block_size=64, causal=False):
    """Right: einsum and a per-block boolean visibility test, state kept as exp-sums."""
    n_q, d = q.shape[2], q.shape[3]
    n_k = k.shape[2]
    acc_t = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(acc_t)
    top = qf.new_full(q.shape[:3] + (1,), -float("inf"))
    den = qf.new_zeros(q.shape[:3] + (1,))
    num = qf.new_zeros(q.shape)
    i = torch.arange(n_q).reshape(n_q, 1)
    starts = list(range(0, n_k, block_size))
    for j0 in starts:
        j1 = min(j0 + block_size, n_k)
        kb = k[:, :, j0:j1].to(acc_t)
        vb = v[:, :, j0:j1].to(acc_t)
        logits = torch.einsum("bhqd,bhkd->bhqk", qf, kb) / math.sqrt(d)
        if causal:
            j = torch.arange(j0, j1).reshape(1, -1)
            logits = logits.masked_fill(~(j - (n_k - n_q) <= i), -float("inf"))
        blk_top = logits.max(dim=-1, keepdim=True).values
        new_top = torch.maximum(top, blk_top)
        ref = new_top.clone()
        ref[torch.isinf(ref)] = 0.0
        e = (logits - ref).exp()
        keep = (top - ref).exp()
        den = den * keep + e.sum(-1, keepdim=True)
        num = num * keep + torch.einsum("bhqk,bhkd->bhqd", e, vb)
        top = new_top
    den[den == 0] = 1.0
    return (num / den).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "no_trailing_axis",
          "the per-row weights are multiplied into the (..., N_q, d_v) outputs without a "
          "trailing axis (w instead of w[..., None]), so the product broadcasts N_q against "
          "d_v and raises a shape error", merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "exp_without_shift",
          "exponentiates the log-sum-exps directly (log(exp(lse_a) + exp(lse_b))) without "
          "subtracting the larger one first, so lse of about 1e4 overflows to inf and the "
          "outputs become NaN or zero", merge_naive_exp),
    Entry("merge_attention_states", "wrong", "max_not_guarded",
          "subtracts max(lse_a, lse_b) without replacing a -inf maximum by 0, so a row where "
          "both sets are empty computes exp(-inf - -inf) and gives NaN instead of zeros and "
          "-inf", merge_unguarded_max),
    Entry("merge_attention_states", "wrong", "result_left_in_float32",
          "does the arithmetic in float32 but forgets to cast back, so half-precision inputs "
          "get float32 (out, lse) instead of out_a's and lse_a's dtype", merge_float32_result),
    Entry("merge_attention_states", "wrong", "out_a_used_twice",
          "copy-paste slip: the second term multiplies B's weight into out_a again instead of "
          "out_b, so set B's values never reach the output", merge_out_a_twice),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "weights the outputs by exp(lse_set - max) but never divides by their sum, so the "
          "merged output is not a convex combination (too large wherever both sets "
          "contribute)", merge_unnormalised),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp_f64),
    Entry("merge_attention_states", "right", "stacked_softmax", None, merge_stack_softmax),

    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "the causal mask compares key j with query i directly (j > i) instead of with "
          "i + N_k - N_q, so it is aligned top-left and wrong whenever N_q != N_k",
          online_topleft_causal),
    Entry("online_softmax_attention", "wrong", "acc_not_rescaled",
          "when a block raises the running max the row sum is rescaled by "
          "exp(old_max - new_max) but the accumulator acc is not, so earlier blocks keep "
          "too much weight", online_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "shift_not_guarded",
          "exponentiates scores - new_max without replacing a -inf max by 0, so a query row "
          "that sees no key yet (causal, N_q > N_k) computes exp(-inf + inf) and gives NaN",
          online_no_inf_guard),
    Entry("online_softmax_attention", "wrong", "ragged_block_dropped",
          "loops over N_k // block_size full blocks only, so the shorter last block of keys is "
          "never visited when block_size does not divide N_k", online_drops_last_block),
    Entry("online_softmax_attention", "wrong", "scale_from_seq_axis",
          "takes d from q.shape[-2] (the query length N_q) instead of q.shape[-1], so scores "
          "are scaled by 1/sqrt(N_q) rather than 1/sqrt(d)", online_d_from_wrong_axis),
    Entry("online_softmax_attention", "wrong", "amax_without_keepdim",
          "takes the block maximum with amax(dim=-1) without keepdim, so torch.maximum "
          "has to broadcast the running max (B, H, N_q, 1) against (B, H, N_q): the axes "
          "no longer line up and the code raises a shape error", online_amax_without_keepdim),
    Entry("online_softmax_attention", "right", "merge_block_states_f64", None,
          online_merge_block_states),
    Entry("online_softmax_attention", "right", "einsum_float32", None, online_einsum_float32),
]
