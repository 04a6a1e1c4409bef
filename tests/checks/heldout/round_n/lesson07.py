"""Lesson 07 (flash): merge_attention_states, online_softmax_attention."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ merge_attention_states
def merge_naive_exp(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    sa, sb = torch.exp(la), torch.exp(lb)
    total = sa + sb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (sa / safe)[..., None] * out_a.to(compute) + (sb / safe)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised_weights(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(la - m)
    wb = torch.exp(lb - m)
    lse = m + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(compute) + wb[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), 0.0, top)
    ea, eb = torch.exp(la - shift), torch.exp(lb - shift)
    total = ea + eb
    lse = shift + torch.log(total)
    denom = torch.where(total == 0, 1.0, total)
    wa, wb = ea / denom, eb / denom
    out = wa * out_a.to(compute) + wb * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_both_empty_nan(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(la, lb)
    ea, eb = torch.exp(la - m), torch.exp(lb - m)
    total = ea + eb
    lse = m + torch.log(total)
    out = (ea / total).unsqueeze(-1) * out_a.to(compute) + (eb / total).unsqueeze(-1) * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_float32_result(out_a, lse_a, out_b, lse_b):
    oa, ob = out_a.float(), out_b.float()
    la, lb = lse_a.float(), lse_b.float()
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    total = wa + wb
    lse = shift + torch.log(total)
    total = torch.where(total == 0, torch.ones_like(total), total)
    out = (wa / total)[..., None] * oa + (wb / total)[..., None] * ob
    return out, lse


def merge_lse_missing_shift(out_a, lse_a, out_b, lse_b):
    compute = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), 0.0, m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    s = wa + wb
    lse = torch.log(s)
    s = torch.where(s == 0, 1.0, s)
    out = (wa / s)[..., None] * out_a.to(compute) + (wb / s)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_right_logaddexp(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    finite = torch.isfinite(lse)
    ref = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.where(finite, torch.exp(la - ref), torch.zeros_like(la))
    wb = torch.where(finite, torch.exp(lb - ref), torch.zeros_like(lb))
    out = torch.einsum("...q,...qd->...qd", wa, out_a.double()) + \
        torch.einsum("...q,...qd->...qd", wb, out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_right_numpy_stack(out_a, lse_a, out_b, lse_b):
    lses = np.stack([lse_a.double().cpu().numpy(), lse_b.double().cpu().numpy()])  # (2, ..., N_q)
    outs = np.stack([out_a.double().cpu().numpy(), out_b.double().cpu().numpy()])
    top = lses.max(axis=0)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(lses - top)
    tot = e.sum(axis=0)
    with np.errstate(divide="ignore"):
        lse = top + np.log(tot)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    out = (w[..., None] * outs).sum(axis=0)
    return (torch.from_numpy(out).to(dtype=out_a.dtype, device=out_a.device),
            torch.from_numpy(lse).to(dtype=lse_a.dtype, device=lse_a.device))


# ============================================================================ online_softmax_attention
def online_block_local_causal(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), float("-inf"), dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(ct)
        vb = v[:, :, start:start + block_size].to(ct)
        s = qs @ kb.transpose(-1, -2)
        if causal:
            kpos = torch.arange(kb.shape[2])[None, :]
            s = s.masked_fill(kpos > qpos, float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - shift)
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m = m_new
    out = acc / torch.where(l == 0, 1.0, l)
    return out.to(q.dtype)


def online_top_left_causal(q, k, v, block_size=64, causal=False):
    b, h, nq, d = q.shape
    nk = k.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    run_max = torch.full((b, h, nq, 1), -math.inf, dtype=dt)
    run_sum = torch.zeros((b, h, nq, 1), dtype=dt)
    run_out = torch.zeros((b, h, nq, d), dtype=dt)
    rows = torch.arange(nq).unsqueeze(1)
    for lo in range(0, nk, block_size):
        hi = min(lo + block_size, nk)
        s = (q.to(dt) @ k[:, :, lo:hi].to(dt).transpose(-1, -2)) * scale
        if causal:
            cols = torch.arange(lo, hi).unsqueeze(0)
            s = s.masked_fill(cols > rows, -math.inf)
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(new_max == -math.inf, torch.zeros_like(new_max), new_max)
        w = torch.exp(s - safe)
        fix = torch.exp(run_max - safe)
        run_sum = fix * run_sum + w.sum(dim=-1, keepdim=True)
        run_out = fix * run_out + w @ v[:, :, lo:hi].to(dt)
        run_max = new_max
    run_sum = torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
    return (run_out / run_sum).to(q.dtype)


def online_max_updated_before_rescale(q, k, v, block_size=64, causal=False):
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
        scores = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            kpos = torch.arange(start, stop)[None, :]
            scores = scores.masked_fill(kpos > qpos, -math.inf)
        row_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(row_max), 0.0, row_max)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(ct)
    out = acc / torch.where(row_sum == 0, 1.0, row_sum)
    return out.to(q.dtype)


def online_unguarded_division(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = q.new_full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = q.new_zeros((B, H, n_q, 1), dtype=ct)
    acc = q.new_zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q).view(-1, 1) + n_k - n_q
    for start in range(0, n_k, block_size):
        stop = min(n_k, start + block_size)
        s = torch.matmul(qs, k[:, :, start:stop].to(ct).transpose(2, 3))
        if causal:
            s = s.masked_fill(torch.arange(start, stop).view(1, -1) > qpos, -math.inf)
        m2 = torch.maximum(m, s.amax(-1, keepdim=True))
        sh = torch.where(torch.isinf(m2), 0.0, m2)
        p = torch.exp(s - sh)
        c = torch.exp(m - sh)
        l = c * l + p.sum(-1, keepdim=True)
        acc = c * acc + torch.matmul(p, v[:, :, start:stop].to(ct))
        m = m2
    return (acc / l).to(q.dtype)


def online_drops_ragged_block(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(ct) / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf, dtype=ct)
    l = torch.zeros((B, H, n_q, 1), dtype=ct)
    acc = torch.zeros((B, H, n_q, d), dtype=ct)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    n_blocks = max(1, n_k // block_size)
    for blk in range(n_blocks):
        start, stop = blk * block_size, min((blk + 1) * block_size, n_k)
        s = qs @ k[:, :, start:stop].to(ct).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, start:stop].to(ct)
        m = m_new
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


def online_float32_output(q, k, v, block_size=64, causal=False):
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    qf, kf, vf = q.float(), k.float(), v.float()
    qf = qf / math.sqrt(d)
    m = torch.full((B, H, n_q, 1), -math.inf)
    l = torch.zeros((B, H, n_q, 1))
    acc = torch.zeros((B, H, n_q, d))
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qf @ kf[:, :, start:stop].transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ vf[:, :, start:stop]
        m = m_new
    return acc / torch.where(l == 0, 1.0, l)


def online_right_merge_states(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and its log-sum-exp, merging one block at a time (float64)."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    lse = torch.full((B, H, n_q), -math.inf, dtype=torch.float64)
    out = torch.zeros((B, H, n_q, d), dtype=torch.float64)
    offset = n_k - n_q
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].double()
        vb = v[:, :, start:start + block_size].double()
        s = torch.einsum("bhqd,bhkd->bhqk", q64, kb)
        if causal:
            ok = (torch.arange(start, start + kb.shape[2])[None, :]
                  <= torch.arange(n_q)[:, None] + offset)
            s = torch.where(ok, s, torch.full_like(s, -math.inf))
        blk_lse = torch.logsumexp(s, dim=-1)  # (B, H, N_q), -inf where nothing visible
        ref = torch.where(torch.isfinite(blk_lse), blk_lse, torch.zeros_like(blk_lse))
        blk_out = torch.einsum("bhqk,bhkd->bhqd", torch.exp(s - ref[..., None]), vb)
        new_lse = torch.logaddexp(lse, blk_lse)
        fin = torch.isfinite(new_lse)
        base = torch.where(fin, new_lse, torch.zeros_like(new_lse))
        w_old = torch.where(fin, torch.exp(lse - base), torch.zeros_like(base))
        w_blk = torch.where(fin, torch.exp(blk_lse - base), torch.zeros_like(base))
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_right_per_head_loop(q, k, v, block_size=64, causal=False):
    """One (batch, head) at a time with 2-D products; masked weights zeroed with torch.where."""
    B, H, n_q, d = q.shape
    n_k = k.shape[2]
    result = torch.zeros(q.shape, dtype=q.dtype)
    last_visible = torch.arange(n_q) + (n_k - n_q)  # (N_q,)
    for b in range(B):
        for h in range(H):
            qq = q[b, h].to(torch.float64) * d ** -0.5
            mx = torch.full((n_q,), -math.inf, dtype=torch.float64)
            den = torch.zeros(n_q, dtype=torch.float64)
            num = torch.zeros(n_q, d, dtype=torch.float64)
            for start in range(0, n_k, block_size):
                stop = min(start + block_size, n_k)
                s = torch.mm(qq, k[b, h, start:stop].to(torch.float64).t())
                if causal:
                    vis = torch.arange(start, stop)[None, :] <= last_visible[:, None]
                else:
                    vis = torch.ones_like(s, dtype=torch.bool)
                blk_max = torch.where(vis, s, torch.full_like(s, -math.inf)).max(dim=1).values
                new = torch.maximum(mx, blk_max)
                keep = torch.isfinite(new)
                ref = torch.where(keep, new, torch.zeros_like(new))
                e = torch.where(vis, torch.exp(s - ref[:, None]), torch.zeros_like(s))
                corr = torch.where(torch.isfinite(mx), torch.exp(mx - ref), torch.zeros_like(mx))
                den = den * corr + e.sum(dim=1)
                num = num * corr[:, None] + torch.mm(e, v[b, h, start:stop].to(torch.float64))
                mx = new
            res = torch.zeros_like(num)
            nz = den > 0
            res[nz] = num[nz] / den[nz][:, None]
            result[b, h] = res.to(q.dtype)
    return result


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive_exp_overflow",
          "Computes exp(lse_a) and exp(lse_b) directly without subtracting the larger "
          "log-sum-exp first, so log-sum-exps around 1e4 overflow to inf and give an inf lse "
          "and NaN outputs.", merge_naive_exp),
    Entry("merge_attention_states", "wrong", "weights_not_normalised",
          "Uses exp(lse_a - m) and exp(lse_b - m) (m the larger lse) directly as the weights of "
          "the two outputs without dividing by their sum, so whenever both sets carry weight "
          "the merged output is scaled up by w_a + w_b > 1.", merge_unnormalised_weights),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "Multiplies the per-row weights (..., N_q) into the outputs (..., N_q, d_v) without a "
          "trailing axis, so they broadcast along d_v instead of along the rows and the call "
          "raises a shape error when N_q != d_v.", merge_no_trailing_axis),
    Entry("merge_attention_states", "wrong", "both_empty_gives_nan",
          "Subtracts the larger log-sum-exp without replacing it by 0 when it is -inf, so a row "
          "where both sets are empty computes exp(-inf - (-inf)) and returns NaN instead of "
          "zeros and -inf.", merge_both_empty_nan),
    Entry("merge_attention_states", "wrong", "returns_float32",
          "Does the arithmetic in float32 but never casts the results back, so float64, "
          "float16 and bfloat16 inputs get float32 out and lse instead of their own dtypes.",
          merge_float32_result),
    Entry("merge_attention_states", "wrong", "lse_missing_shift",
          "Returns log(w_a + w_b) as the log-sum-exp without adding back the maximum that was "
          "subtracted before exponentiating, so the merged lse is off by max(lse_a, lse_b) "
          "(the output itself is right).", merge_lse_missing_shift),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_right_logaddexp),
    Entry("merge_attention_states", "right", "numpy_stacked_softmax", None,
          merge_right_numpy_stack),

    Entry("online_softmax_attention", "wrong", "block_local_causal_positions",
          "Builds the causal mask from key positions inside the block (0 .. b-1) instead of "
          "absolute positions start + j, so every block after the first lets queries see "
          "future keys.", online_block_local_causal),
    Entry("online_softmax_attention", "wrong", "top_left_causal",
          "Aligns the causal mask top-left (key j visible to query i when j <= i) instead of "
          "bottom-right at i + N_k - N_q, which is wrong whenever N_q != N_k.",
          online_top_left_causal),
    Entry("online_softmax_attention", "wrong", "max_updated_before_rescale",
          "Overwrites row_max with the new maximum before computing the rescale factor, so "
          "exp(row_max - shift) is always 1 and the old running sum and accumulator are never "
          "rescaled when a later block raises the maximum.", online_max_updated_before_rescale),
    Entry("online_softmax_attention", "wrong", "unguarded_final_division",
          "Returns acc / row_sum without guarding rows whose sum is 0, so a query that sees no "
          "key at all (causal with N_q > N_k) gets NaN instead of a row of zeros.",
          online_unguarded_division),
    Entry("online_softmax_attention", "wrong", "drops_ragged_last_block",
          "Loops over N_k // block_size full blocks only, so when N_k is not a multiple of "
          "block_size the keys of the short last block are never visited.",
          online_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "returns_float32",
          "Casts everything to float32 and returns the float32 result without casting back to "
          "q's dtype, so float64, float16 and bfloat16 inputs come back as float32.",
          online_float32_output),
    Entry("online_softmax_attention", "right", "merge_block_states_float64", None,
          online_right_merge_states),
    Entry("online_softmax_attention", "right", "per_head_2d_loop", None,
          online_right_per_head_loop),
]
