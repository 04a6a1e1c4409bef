"""Lesson 07 (flash, torch): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


def _c(dtype):
    return torch.promote_types(dtype, torch.float32)


# ============================================================================ merge_attention_states
def _merge(out_a, lse_a, out_b, lse_b, *, shift_mode="max", lse_mode="logsum", normalise=True,
           unsqueeze=True, cast=True):
    c = _c(out_a.dtype)
    la, lb = lse_a.to(c), lse_b.to(c)
    oa, ob = out_a.to(c), out_b.to(c)
    if shift_mode == "max":
        top = torch.maximum(la, lb)
        shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    elif shift_mode == "max_unguarded":
        shift = torch.maximum(la, lb)
    else:
        shift = torch.zeros_like(la)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    total = wa + wb
    if lse_mode == "logsum":
        lse = shift + torch.log(total)
    elif lse_mode == "max":
        lse = torch.maximum(la, lb)
    else:
        lse = la + lb
    if normalise:
        safe = torch.where(total == 0, torch.ones_like(total), total)
        wa, wb = wa / safe, wb / safe
    if unsqueeze:
        out = wa[..., None] * oa + wb[..., None] * ob
    else:
        out = wa * oa + wb * ob
    if cast:
        return out.to(out_a.dtype), lse.to(lse_a.dtype)
    return out, lse


def mas_w_no_shift(out_a, lse_a, out_b, lse_b):
    return _merge(out_a, lse_a, out_b, lse_b, shift_mode="none")


def mas_w_average(out_a, lse_a, out_b, lse_b):
    return (out_a + out_b) / 2, torch.logaddexp(lse_a, lse_b)


def mas_w_lse_max(out_a, lse_a, out_b, lse_b):
    return _merge(out_a, lse_a, out_b, lse_b, lse_mode="max")


def mas_w_both_empty_nan(out_a, lse_a, out_b, lse_b):
    return _merge(out_a, lse_a, out_b, lse_b, shift_mode="max_unguarded")


def mas_w_unnormalised(out_a, lse_a, out_b, lse_b):
    return _merge(out_a, lse_a, out_b, lse_b, normalise=False)


def mas_w_lse_sum(out_a, lse_a, out_b, lse_b):
    return _merge(out_a, lse_a, out_b, lse_b, lse_mode="sum")


def mas_w_no_unsqueeze(out_a, lse_a, out_b, lse_b):
    return _merge(out_a, lse_a, out_b, lse_b, unsqueeze=False)


def mas_w_compute_dtype(out_a, lse_a, out_b, lse_b):
    return _merge(out_a, lse_a, out_b, lse_b, cast=False)


def mas_w_weights_swapped(out_a, lse_a, out_b, lse_b):
    """The right weights, attached to the wrong outputs."""
    out, lse = _merge(out_a, lse_a, out_b, lse_b)
    c = _c(out_a.dtype)
    la, lb = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    safe = torch.where(wa + wb == 0, torch.ones_like(wa), wa + wb)
    swapped = (wb / safe)[..., None] * out_a.to(c) + (wa / safe)[..., None] * out_b.to(c)
    return swapped.to(out_a.dtype), lse


def mas_r_logaddexp_sigmoid(out_a, lse_a, out_b, lse_b):
    c = _c(out_a.dtype)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.logaddexp(la, lb)
    finite = torch.isfinite(lse)
    safe = torch.where(finite, lse, torch.zeros_like(lse))
    wa = torch.where(finite, torch.exp(la - safe), torch.zeros_like(la))
    wb = torch.where(finite, torch.exp(lb - safe), torch.zeros_like(lb))
    out = wa.unsqueeze(-1) * out_a.to(c) + wb.unsqueeze(-1) * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_r_stack_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a, lse_b]).double()  # (2, ..., N_q)
    outs = torch.stack([out_a, out_b]).double()  # (2, ..., N_q, d_v)
    lse = torch.logsumexp(lses, dim=0)
    w = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)
    out = (w[..., None] * outs).sum(0)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_r_float64_branches(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    hi, lo = torch.maximum(la, lb), torch.minimum(la, lb)
    hi_safe = torch.where(torch.isneginf(hi), torch.zeros_like(hi), hi)
    rest = torch.exp(lo - hi_safe)  # <= 1
    lse = torch.where(torch.isneginf(hi), hi, hi + torch.log1p(rest))
    lse_safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
    wa = torch.exp(la - lse_safe).masked_fill(torch.isneginf(lse), 0.0)
    wb = torch.exp(lb - lse_safe).masked_fill(torch.isneginf(lse), 0.0)
    out = wa[..., None] * out_a.double() + wb[..., None] * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================================ online_softmax_attention
def _online(q, k, v, block_size, causal, *, rescale_acc=True, rescale_sum=True,
            key_pos="absolute", offset=True, guard_div=True, drop_tail=False, cast=True,
            guard_shift=True):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q.dtype)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    qpos = torch.arange(n_q)[:, None] + ((n_k - n_q) if offset else 0)
    stop_at = (n_k // block_size) * block_size if drop_tail else n_k
    for start in range(0, stop_at, block_size):
        kb = k[:, :, start:start + block_size].to(c)
        vb = v[:, :, start:start + block_size].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kp = (torch.arange(start, start + kb.shape[2]) if key_pos == "absolute"
                  else torch.arange(kb.shape[2]))
            s = s.masked_fill(kp[None, :] > qpos, -math.inf)
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m) \
            if guard_shift else new_m
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = (l * r if rescale_sum else l) + p.sum(-1, keepdim=True)
        acc = (acc * r if rescale_acc else acc) + p @ vb
        m = new_m
    out = acc / torch.where(l == 0, torch.ones_like(l), l) if guard_div else acc / l
    return out.to(q.dtype) if cast else out


def os_w_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_acc=False)


def os_w_sum_not_rescaled(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_sum=False)


def os_w_block_local_mask(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, key_pos="local")


def os_w_top_left(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, offset=False)


def os_w_nan_empty_rows(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, guard_div=False)


def os_w_full_scores(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, k.shape[2], causal)  # one block of every key


def os_w_drop_tail(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, drop_tail=True)


def os_w_compute_dtype(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, cast=False)


def os_w_shift_unguarded(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, guard_shift=False)


def os_r_lse_merge(q, k, v, block_size=64, causal=False):
    """Keeps (out, lse) per row and merges each block's normalised result into it."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q.dtype)
    qs = q.to(c) * d ** -0.5
    out = torch.zeros((b, h, n_q, d), dtype=c)
    lse = torch.full((b, h, n_q), -math.inf, dtype=c)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    for kb, vb, kp in zip(k.to(c).split(block_size, 2), v.to(c).split(block_size, 2),
                          torch.arange(n_k).split(block_size)):
        s = qs @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(kp[None, :] > qpos, -math.inf)
        blse = torch.logsumexp(s, -1)
        bsafe = torch.where(torch.isinf(blse), torch.zeros_like(blse), blse)
        bout = torch.exp(s - bsafe[..., None]) @ vb
        new = torch.logaddexp(lse, blse)
        nsafe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        out = (torch.exp(lse - nsafe)[..., None] * out + torch.exp(blse - nsafe)[..., None] *
               bout)
        lse = new
    return out.to(q.dtype)


def os_r_query_tiles(q, k, v, block_size=64, causal=False):
    """Blocks over queries as well as keys, in float64."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qd, kd, vd = q.double() / math.sqrt(d), k.double(), v.double()
    rows = []
    for qs in range(0, n_q, block_size):
        qb = qd[:, :, qs:qs + block_size]
        nq = qb.shape[2]
        m = torch.full((b, h, nq, 1), -math.inf, dtype=torch.float64)
        l = torch.zeros((b, h, nq, 1), dtype=torch.float64)
        acc = torch.zeros((b, h, nq, d), dtype=torch.float64)
        qpos = torch.arange(qs, qs + nq)[:, None] + n_k - n_q
        for ks in range(0, n_k, block_size):
            s = qb @ kd[:, :, ks:ks + block_size].transpose(-1, -2)
            if causal:
                kp = torch.arange(ks, ks + s.shape[-1])[None, :]
                s = s.masked_fill(kp > qpos, -math.inf)
            new_m = torch.maximum(m, s.amax(-1, keepdim=True))
            safe = new_m.nan_to_num(neginf=0.0)
            p = (s - safe).exp()
            corr = (m - safe).exp()
            l = l * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + p @ vd[:, :, ks:ks + block_size]
            m = new_m
        rows.append(torch.where(l > 0, acc / l.clamp_min(1e-300), torch.zeros_like(acc)))
    return torch.cat(rows, dim=2).to(q.dtype)


def os_r_loop_einsum(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q.dtype)
    qc = q.to(c)
    m = torch.full((b, h, n_q), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    i = torch.arange(n_q)[:, None] + (n_k - n_q)
    start = 0
    while start < n_k:
        end = min(n_k, start + block_size)
        s = torch.einsum("bhqd,bhkd->bhqk", qc, k[:, :, start:end].to(c)) / math.sqrt(d)
        if causal:
            s = torch.where(torch.arange(start, end)[None, :] <= i, s,
                            torch.tensor(-math.inf, dtype=c))
        m_new = torch.maximum(m, s.max(-1).values)
        base = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
        p = torch.exp(s - base[..., None])
        alpha = torch.exp(m - base)
        l = alpha * l + p.sum(-1)
        acc = alpha[..., None] * acc + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, start:end].to(c))
        m = m_new
        start = end
    l = torch.where(l == 0, torch.ones_like(l), l)
    return (acc / l[..., None]).to(q.dtype)


E = Entry
ENTRIES = [
    E("merge_attention_states", "wrong", "exp_without_shift",
      "Exponentiates lse_a and lse_b directly, which overflows for lse of size 1e4.",
      mas_w_no_shift),
    E("merge_attention_states", "wrong", "plain_average",
      "Averages the two outputs instead of weighting them by their softmax mass.",
      mas_w_average),
    E("merge_attention_states", "wrong", "lse_is_max",
      "Returns the larger of the two lse's as the merged lse instead of their log-sum-exp.",
      mas_w_lse_max),
    E("merge_attention_states", "wrong", "nan_when_both_empty",
      "Shifts by max(lse_a, lse_b) without a guard, so exp(-inf - (-inf)) gives NaN where "
      "both sets are empty.", mas_w_both_empty_nan),
    E("merge_attention_states", "wrong", "weights_not_normalised",
      "Weights each output by exp(lse - max) but never divides by their sum.",
      mas_w_unnormalised),
    E("merge_attention_states", "wrong", "lse_added",
      "Adds the two lse's (multiplying the sums) instead of log-adding them.", mas_w_lse_sum),
    E("merge_attention_states", "wrong", "weights_missing_axis",
      "Multiplies the (..., N_q) weights into the (..., N_q, d_v) outputs without "
      "unsqueezing, so they broadcast along d_v.", mas_w_no_unsqueeze),
    E("merge_attention_states", "wrong", "left_in_float32",
      "Computes in float32 and returns float32 instead of the inputs' dtypes.",
      mas_w_compute_dtype),
    E("merge_attention_states", "wrong", "weights_swapped",
      "Multiplies out_a by B's weight and out_b by A's weight.", mas_w_weights_swapped),
    E("merge_attention_states", "right", "logaddexp_guarded", None, mas_r_logaddexp_sigmoid),
    E("merge_attention_states", "right", "stack_softmax_float64", None, mas_r_stack_softmax),
    E("merge_attention_states", "right", "log1p_branches", None, mas_r_float64_branches),
    E("online_softmax_attention", "wrong", "accumulator_not_rescaled",
      "Rescales the running sum when the maximum grows but not the output accumulator.",
      os_w_acc_not_rescaled),
    E("online_softmax_attention", "wrong", "sum_not_rescaled",
      "Rescales the accumulator when the maximum grows but not the running sum.",
      os_w_sum_not_rescaled),
    E("online_softmax_attention", "wrong", "block_local_key_positions",
      "Masks each block with key positions starting at 0 instead of the block's absolute "
      "positions.", os_w_block_local_mask),
    E("online_softmax_attention", "wrong", "causal_top_left",
      "Compares key and query positions without the N_k - N_q offset.", os_w_top_left),
    E("online_softmax_attention", "wrong", "nan_on_empty_rows",
      "Divides the accumulator by the running sum without a guard, 0/0 on rows with no key.",
      os_w_nan_empty_rows),
    E("online_softmax_attention", "wrong", "one_block_of_all_keys",
      "Ignores block_size and processes all keys as one block, building N_q x N_k scores.",
      os_w_full_scores),
    E("online_softmax_attention", "wrong", "drops_ragged_block",
      "Iterates over n_k // block_size full blocks only, skipping the shorter last block.",
      os_w_drop_tail),
    E("online_softmax_attention", "wrong", "left_in_float32",
      "Returns the float32 accumulator without casting back to q's dtype.", os_w_compute_dtype),
    E("online_softmax_attention", "wrong", "running_max_unguarded",
      "Subtracts a running max that is still -inf for rows that have seen only masked keys, "
      "producing NaN.", os_w_shift_unguarded),
    E("online_softmax_attention", "right", "lse_merge_per_block", None, os_r_lse_merge),
    E("online_softmax_attention", "right", "query_and_key_tiles_float64", None,
      os_r_query_tiles),
    E("online_softmax_attention", "right", "einsum_while_loop", None, os_r_loop_einsum),
]
