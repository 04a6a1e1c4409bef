"""Lesson 07 (torch): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


# ---------------------------------------------------------------- merge_attention_states, wrong
def mas_unshifted(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    ea, eb = torch.exp(lse_a.to(c)), torch.exp(lse_b.to(c))
    tot = ea + eb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (ea / safe)[..., None] * out_a.to(c) + (eb / safe)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), torch.log(tot).to(lse_a.dtype)


def _weights(lse_a, lse_b, c):
    a, b = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(a, b)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    return torch.exp(a - shift), torch.exp(b - shift), shift


def mas_max_lse(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    wa, wb, shift = _weights(lse_a, lse_b, c)
    tot = wa + wb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe)[..., None] * out_a.to(c) + (wb / safe)[..., None] * out_b.to(c)
    lse = torch.maximum(lse_a.to(c), lse_b.to(c))
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_swapped_weights(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    wa, wb, shift = _weights(lse_a, lse_b, c)
    tot = wa + wb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wb / safe)[..., None] * out_a.to(c) + (wa / safe)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), (shift + torch.log(tot)).to(lse_a.dtype)


def mas_lse_added(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    wa, wb, shift = _weights(lse_a, lse_b, c)
    tot = wa + wb
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe)[..., None] * out_a.to(c) + (wb / safe)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), (lse_a.to(c) + lse_b.to(c)).to(lse_a.dtype)


def mas_not_normalised(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    wa, wb, shift = _weights(lse_a, lse_b, c)
    tot = wa + wb
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), (shift + torch.log(tot)).to(lse_a.dtype)


def mas_both_empty_nan(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    a, b = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(a, b)
    wa, wb = torch.exp(a - top), torch.exp(b - top)
    tot = wa + wb
    out = (wa / tot)[..., None] * out_a.to(c) + (wb / tot)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), (top + torch.log(tot)).to(lse_a.dtype)


# ---------------------------------------------------------------- merge_attention_states, right
def mas_logsumexp_stack(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a.double(), lse_b.double()])  # (2, ..., N_q)
    lse = torch.logsumexp(lses, dim=0)  # -inf where both are empty
    w = torch.exp(lses - lse)  # NaN only where both are -inf
    w = torch.nan_to_num(w, nan=0.0)
    out = w[0][..., None] * out_a.double() + w[1][..., None] * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_sigmoid(out_a, lse_a, out_b, lse_b):
    a, b = lse_a.double(), lse_b.double()
    diff = a - b  # NaN only where both are -inf (or both +inf)
    w_a = torch.sigmoid(torch.nan_to_num(diff, nan=0.0))
    w_a = torch.where(torch.isneginf(a) & torch.isneginf(b), torch.zeros_like(w_a), w_a)
    w_b = torch.where(torch.isneginf(a) & torch.isneginf(b), torch.zeros_like(w_a), 1.0 - w_a)
    hi = torch.maximum(a, b)
    lo = torch.minimum(a, b)
    hi_safe = torch.where(torch.isinf(hi), torch.zeros_like(hi), hi)
    lse = torch.where(torch.isneginf(hi), hi, hi + torch.log1p(torch.exp(lo - hi_safe)))
    out = w_a[..., None] * out_a.double() + w_b[..., None] * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ---------------------------------------------------------------- online_softmax_attention
def _online(q, k, v, block_size, causal, *, rescale_acc=True, flip_rescale=False,
            block_local_keys=False, drop_tail=False, keep_max=True, overwrite_sum=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q)
    qs = q.to(c) / math.sqrt(d)
    row_max = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    row_sum = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    stop_at = (n_k // block_size) * block_size if drop_tail else n_k
    for start in range(0, stop_at, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(c), v[:, :, start:stop].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(0, stop - start) if block_local_keys else torch.arange(start, stop)
            s = s.masked_fill(kpos[None, :] > qpos, -math.inf)
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        p = torch.exp(s - shift)
        rescale = torch.exp(shift - row_max) if flip_rescale else torch.exp(row_max - shift)
        if flip_rescale:
            rescale = torch.where(torch.isinf(rescale), torch.zeros_like(rescale), rescale)
        if overwrite_sum:
            row_sum = p.sum(-1, keepdim=True)
        else:
            row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        acc = (acc * rescale if rescale_acc else acc) + p @ vb
        if keep_max:
            row_max = new_max
    out = acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
    return out.to(q.dtype)


def osa_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_acc=False)


def osa_rescale_sign(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, flip_rescale=True)


def osa_block_local_keys(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, block_local_keys=True)


def osa_drops_tail(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, drop_tail=True)


def osa_running_max_not_stored(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, keep_max=False)


def osa_sum_overwritten(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, overwrite_sum=True)


def osa_full_scores_first(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q)
    scores = (q.to(c) @ k.to(c).transpose(-2, -1)) / math.sqrt(d)  # all scores up front
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~allowed, -math.inf)
    row_max = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    row_sum = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    for start in range(0, n_k, block_size):
        s = scores[..., start:start + block_size]
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        p = torch.exp(s - shift)
        r = torch.exp(row_max - shift)
        row_sum = row_sum * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, start:start + block_size].to(c)
        row_max = new_max
    return (acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)).to(q.dtype)


# ---------------------------------------------------------------- online_softmax_attention, right
def osa_lse_merging(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros((b, h, n_q, d), dtype=torch.float64)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].double()
        vb = v[:, :, start:start + block_size].double()
        s = torch.einsum("bhqd,bhkd->bhqk", q64, kb)
        if causal:
            kpos = torch.arange(start, start + kb.shape[2])[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_out = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0) @ vb
        new_lse = torch.logsumexp(torch.stack([lse, blk_lse]), dim=0)
        w_old = torch.nan_to_num(torch.exp(lse - new_lse), nan=0.0)
        w_blk = torch.nan_to_num(torch.exp(blk_lse - new_lse), nan=0.0)
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def osa_reverse_blocks(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.float64
    qs = q.to(c) * (1.0 / math.sqrt(d))
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    o = torch.zeros((b, h, n_q, d), dtype=c)
    starts = list(range(0, n_k, block_size))[::-1]  # any block order gives the same result
    for start in starts:
        stop = min(n_k, start + block_size)
        s = qs @ k[:, :, start:stop].to(c).transpose(-2, -1)
        if causal:
            allowed = (torch.arange(start, stop)[None, :]
                       <= torch.arange(n_q)[:, None] + n_k - n_q)
            s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=c))
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        finite = torch.isfinite(m_new)
        ref = torch.where(finite, m_new, torch.zeros_like(m_new))
        p = torch.exp(s - ref)
        alpha = torch.where(torch.isfinite(m), torch.exp(m - ref), torch.zeros_like(m))
        l = alpha * l + p.sum(dim=-1, keepdim=True)
        o = alpha * o + p @ v[:, :, start:stop].to(c)
        m = m_new
    o = torch.where(l > 0, o / l.clamp_min(1e-300), torch.zeros_like(o))
    return o.to(q.dtype)


E = Entry
ENTRIES = [
    E("merge_attention_states", "wrong", "exponentiates_raw_lse",
      "Exponentiates lse_a and lse_b directly without subtracting their maximum, so lse "
      "values around 1e4 overflow.", mas_unshifted),
    E("merge_attention_states", "wrong", "lse_is_max",
      "Returns max(lse_a, lse_b) as the merged lse instead of log(e^lse_a + e^lse_b).",
      mas_max_lse),
    E("merge_attention_states", "wrong", "weights_swapped",
      "Copy-paste slip: weights out_a with B's share and out_b with A's share.",
      mas_swapped_weights),
    E("merge_attention_states", "wrong", "lse_added",
      "Adds the two log-sum-exps (multiplying the sums) instead of log-adding them.",
      mas_lse_added),
    E("merge_attention_states", "wrong", "weights_not_normalised",
      "Weights each output by exp(lse - max) but forgets to divide by their total, so the "
      "merged output is not a convex combination.", mas_not_normalised),
    E("merge_attention_states", "wrong", "both_empty_gives_nan",
      "Shifts by max(lse_a, lse_b) with no guard, so a row where both sets are empty "
      "computes -inf - (-inf) and 0/0 and comes out NaN.", mas_both_empty_nan),
    E("merge_attention_states", "right", "logsumexp_stack_float64", None, mas_logsumexp_stack),
    E("merge_attention_states", "right", "sigmoid_of_lse_difference", None, mas_sigmoid),

    E("online_softmax_attention", "wrong", "accumulator_not_rescaled",
      "Rescales the running sum when the maximum grows but forgets to rescale the output "
      "accumulator.", osa_acc_not_rescaled),
    E("online_softmax_attention", "wrong", "rescale_exponent_sign_flipped",
      "Rescales the old totals by exp(new_max - old_max) instead of exp(old_max - new_max).",
      osa_rescale_sign),
    E("online_softmax_attention", "wrong", "causal_mask_block_local_key_index",
      "Builds each block's causal mask from the key index inside the block (0 .. b-1) "
      "instead of its absolute position start + j, so later blocks are under-masked.",
      osa_block_local_keys),
    E("online_softmax_attention", "wrong", "ragged_last_block_dropped",
      "Loops over n_k // block_size full blocks only, dropping the keys of a shorter last "
      "block.", osa_drops_tail),
    E("online_softmax_attention", "wrong", "running_max_never_stored",
      "Computes the new maximum but never assigns it back to row_max, so the next block's "
      "rescale factor exp(-inf - new_max) = 0 wipes the totals accumulated so far.",
      osa_running_max_not_stored),
    E("online_softmax_attention", "wrong", "running_sum_overwritten",
      "Overwrites the running sum with the current block's sum instead of rescaling and "
      "accumulating it.", osa_sum_overwritten),
    E("online_softmax_attention", "wrong", "full_score_matrix_first",
      "Computes the whole N_q x N_k score matrix up front and only then walks over it in "
      "blocks, which the exercise forbids.", osa_full_scores_first),
    E("online_softmax_attention", "right", "lse_merging_blocks_float64", None, osa_lse_merging),
    E("online_softmax_attention", "right", "reverse_block_order", None, osa_reverse_blocks),
]
