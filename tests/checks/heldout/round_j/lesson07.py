"""Lesson 07 (torch): merge_attention_states, online_softmax_attention; round j entries."""

import math

import torch

from entry import Entry

# -------------------------------------------------------------------- merge_attention_states


def mas_no_shift(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    ea, eb = torch.exp(lse_a.to(c)), torch.exp(lse_b.to(c))
    tot = ea + eb
    out = (ea / tot)[..., None] * out_a.to(c) + (eb / tot)[..., None] * out_b.to(c)
    out = torch.where((tot == 0)[..., None], 0.0, out)
    return out.to(out_a.dtype), torch.log(tot).to(lse_a.dtype)


def mas_unguarded_shift(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(a, b)
    wa, wb = torch.exp(a - m), torch.exp(b - m)
    tot = wa + wb
    out = (wa / tot)[..., None] * out_a.to(c) + (wb / tot)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), (m + torch.log(tot)).to(lse_a.dtype)


def _merge_core(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(a, b)
    shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(a - shift), torch.exp(b - shift)
    tot = wa + wb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    return c, shift, wa, wb, tot, safe


def mas_lse_is_max(out_a, lse_a, out_b, lse_b):
    c, shift, wa, wb, tot, safe = _merge_core(out_a, lse_a, out_b, lse_b)
    out = (wa / safe)[..., None] * out_a.to(c) + (wb / safe)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), torch.maximum(lse_a, lse_b)


def mas_weights_not_unsqueezed(out_a, lse_a, out_b, lse_b):
    c, shift, wa, wb, tot, safe = _merge_core(out_a, lse_a, out_b, lse_b)
    out = (wa / safe) * out_a.to(c) + (wb / safe) * out_b.to(c)
    return out.to(out_a.dtype), (shift + torch.log(tot)).to(lse_a.dtype)


def mas_not_renormalised(out_a, lse_a, out_b, lse_b):
    c, shift, wa, wb, tot, safe = _merge_core(out_a, lse_a, out_b, lse_b)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), (shift + torch.log(tot)).to(lse_a.dtype)


def mas_log1p_sign(out_a, lse_a, out_b, lse_b):
    c, shift, wa, wb, tot, safe = _merge_core(out_a, lse_a, out_b, lse_b)
    out = (wa / safe)[..., None] * out_a.to(c) + (wb / safe)[..., None] * out_b.to(c)
    a, b = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(a, b)
    diff = torch.where(torch.isinf(m), torch.full_like(m, math.inf), (a - b).abs())
    lse = m - torch.log1p(torch.exp(-diff))
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_logaddexp_float64(out_a, lse_a, out_b, lse_b):
    a, b = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(a, b)
    both_empty = torch.isneginf(lse)
    ref = torch.where(both_empty, torch.zeros_like(lse), lse)
    wa = torch.exp(a - ref).masked_fill(both_empty, 0.0)
    wb = torch.exp(b - ref).masked_fill(both_empty, 0.0)
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_stacked_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a.double(), lse_b.double()], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(lses, dim=-1)
    w = torch.nan_to_num(torch.softmax(lses, dim=-1), nan=0.0)  # both -inf: NaN -> 0
    outs = torch.stack([out_a.double(), out_b.double()], dim=-2)  # (..., N_q, 2, d_v)
    out = torch.einsum("...s,...sd->...d", w, outs)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ------------------------------------------------------------------ online_softmax_attention


def _online(q, k, v, block_size, causal, *, rescale_acc=True, full_blocks_only=False,
            local_key_index=False, scale_power=0.5, masked_value=-math.inf):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) / d ** scale_power
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, v.shape[-1]), dtype=c)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    end = (n_k // block_size) * block_size if full_blocks_only else n_k
    for start in range(0, end, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(c), v[:, :, start:stop].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(stop - start) if local_key_index else torch.arange(start, stop)
            s = s.masked_fill(kpos[None, :] > qpos, masked_value)
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = (acc * r if rescale_acc else acc) + p @ vb
        m = new_m
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def osa_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_acc=False)


def osa_ragged_tail_dropped(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, full_blocks_only=True)


def osa_block_local_key_positions(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, local_key_index=True)


def osa_scaled_by_d(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, scale_power=1.0)


def osa_masked_with_zero(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, masked_value=0.0)


def osa_block_own_max_shift(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        blk_max = s.amax(-1, keepdim=True)
        new_m = torch.maximum(m, blk_max)
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        blk_shift = torch.where(torch.isinf(blk_max), torch.zeros_like(blk_max), blk_max)
        p = torch.exp(s - blk_shift)  # shifted by this block's own maximum
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, start:stop].to(c)
        m = new_m
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def osa_running_lse_merge(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and a log-sum-exp per row, merged block by block."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() * d ** -0.5
    out = torch.zeros(b, h, n_q, v.shape[-1], dtype=torch.float64)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    qpos = torch.arange(n_q).unsqueeze(1) + n_k - n_q
    for start in range(0, n_k, block_size):
        stop = min(n_k, start + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", q64, k[:, :, start:stop].double())
        if causal:
            s = torch.where(torch.arange(start, stop).unsqueeze(0) <= qpos, s,
                            torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)
        new_lse = torch.logaddexp(lse, blk_lse)
        safe = torch.where(torch.isneginf(new_lse), torch.zeros_like(new_lse), new_lse)
        w_old = torch.exp(lse - safe).unsqueeze(-1)
        p = torch.exp(s - safe.unsqueeze(-1))
        out = w_old * out + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, start:stop].double())
        lse = new_lse
    return out.to(q.dtype)


def osa_two_pass(q, k, v, block_size=64, causal=False):
    """First pass: exact row maxima block by block; second pass: sums and values."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.double() / math.sqrt(d)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    blocks = [(s0, min(s0 + block_size, n_k)) for s0 in range(0, n_k, block_size)]

    def scores(s0, s1):
        s = qs @ k[:, :, s0:s1].double().transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        return s

    row_max = torch.full((b, h, n_q, 1), -math.inf, dtype=torch.float64)
    for s0, s1 in blocks:
        row_max = torch.maximum(row_max, scores(s0, s1).amax(-1, keepdim=True))
    row_max = torch.nan_to_num(row_max, neginf=0.0)
    total = torch.zeros((b, h, n_q, 1), dtype=torch.float64)
    acc = torch.zeros((b, h, n_q, v.shape[-1]), dtype=torch.float64)
    for s0, s1 in blocks:
        p = torch.exp(scores(s0, s1) - row_max)
        total += p.sum(-1, keepdim=True)
        acc += p @ v[:, :, s0:s1].double()
    total[total == 0] = 1.0
    return (acc / total).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "exponentials_without_shift",
          "Exponentiates lse_a and lse_b directly without subtracting their maximum, so "
          "log-sum-exps of magnitude 1e4 overflow to inf (or underflow to 0) and the merge "
          "breaks.", mas_no_shift),
    Entry("merge_attention_states", "wrong", "both_empty_rows_not_guarded",
          "Shifts by max(lse_a, lse_b) without guarding rows where both are -inf, so those "
          "rows compute -inf - (-inf) and come out NaN instead of zeros and -inf.",
          mas_unguarded_shift),
    Entry("merge_attention_states", "wrong", "lse_taken_as_maximum",
          "Returns max(lse_a, lse_b) as the merged log-sum-exp, dropping the log of the sum "
          "of the two weights.", mas_lse_is_max),
    Entry("merge_attention_states", "wrong", "weights_not_unsqueezed",
          "Multiplies the (..., N_q) weights into the (..., N_q, d_v) outputs without adding "
          "a trailing axis, so broadcasting lines N_q up with d_v and fails.",
          mas_weights_not_unsqueezed),
    Entry("merge_attention_states", "wrong", "outputs_not_renormalised",
          "Weights the two outputs by exp(lse - max) but never divides by their sum, so the "
          "merged output is not a convex combination.", mas_not_renormalised),
    Entry("merge_attention_states", "wrong", "log1p_sign_flipped",
          "Writes the merged log-sum-exp as max - log1p(exp(-|lse_a - lse_b|)) instead of "
          "max + log1p(...).", mas_log1p_sign),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, mas_logaddexp_float64),
    Entry("merge_attention_states", "right", "softmax_over_stacked_lse", None,
          mas_stacked_softmax),

    Entry("online_softmax_attention", "wrong", "accumulator_not_rescaled",
          "Rescales the running sum when the running maximum grows but not the output "
          "accumulator, so earlier blocks keep too much weight.", osa_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "block_exponentials_use_own_max",
          "Exponentiates each block's scores against that block's own maximum instead of "
          "the updated running maximum, while the old totals are rescaled to the running "
          "maximum, so blocks are mixed on different scales.", osa_block_own_max_shift),
    Entry("online_softmax_attention", "wrong", "ragged_last_block_dropped",
          "Loops only up to the last full block (N_k // block_size * block_size), so the keys "
          "of a ragged last block are never visited.", osa_ragged_tail_dropped),
    Entry("online_softmax_attention", "wrong", "causal_key_positions_block_local",
          "Builds the causal mask from key positions 0..b-1 within each block instead of "
          "the absolute positions start..stop-1, so later blocks are masked as if they "
          "started at key 0.", osa_block_local_key_positions),
    Entry("online_softmax_attention", "wrong", "scaled_by_d",
          "Divides the scores by d instead of sqrt(d).", osa_scaled_by_d),
    Entry("online_softmax_attention", "wrong", "masked_scores_set_to_zero",
          "Fills causally masked scores with 0 instead of -inf, so future keys still get "
          "weight exp(0 - max).", osa_masked_with_zero),
    Entry("online_softmax_attention", "right", "running_lse_merge_float64", None,
          osa_running_lse_merge),
    Entry("online_softmax_attention", "right", "two_pass_blocks", None, osa_two_pass),
]
