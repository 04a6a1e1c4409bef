"""Lesson 07 (torch): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


def _c(t):
    return torch.promote_types(t.dtype, torch.float32)


# ------------------------------------------------------------------ merge_attention_states, wrong
def merge_naive_lse(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.log(torch.exp(la) + torch.exp(lb))
    wa = torch.nan_to_num(torch.exp(la - lse), nan=0.0)
    wb = torch.nan_to_num(torch.exp(lb - lse), nan=0.0)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unnormalised(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    lse = shift + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)  # forgot / (wa + wb)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_plain_average(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    lse = shift + torch.log(torch.exp(la - shift) + torch.exp(lb - shift))
    out = (out_a.to(c) + out_b.to(c)) / 2
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_empty_guard(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(la, lb)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    tot = wa + wb
    lse = top + torch.log(tot)
    out = (wa / tot)[..., None] * out_a.to(c) + (wb / tot)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_lse_is_max(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.maximum(la, lb)  # combined log-sum-exp taken as the larger one
    shift = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_no_trailing_axis(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    tot = wa + wb
    lse = shift + torch.log(tot)
    safe = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / safe) * out_a.to(c) + (wb / safe) * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ------------------------------------------------------------------ merge_attention_states, right
def merge_logaddexp(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    both_empty = torch.isneginf(lse)
    safe = torch.where(both_empty, torch.zeros_like(lse), lse)
    wa = torch.where(both_empty, torch.zeros_like(la), torch.exp(la - safe))
    wb = torch.where(both_empty, torch.zeros_like(lb), torch.exp(lb - safe))
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_stack_softmax(out_a, lse_a, out_b, lse_b):
    c = _c(out_a)
    lses = torch.stack([lse_a.to(c), lse_b.to(c)], dim=0)  # (2, ..., N_q)
    lse = torch.logsumexp(lses, dim=0)
    w = torch.nan_to_num(torch.softmax(lses, dim=0), nan=0.0)
    outs = torch.stack([out_a.to(c), out_b.to(c)], dim=0)
    out = (w[..., None] * outs).sum(0)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ------------------------------------------------------------------ online softmax
def _online(q, k, v, block_size, causal, *, rescale_acc=True, rescale_sum=True,
            inverted=False, stale=False, floor_blocks=False, local_pos=False, sum_init=0.0, fill=-math.inf):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.full((b, h, n_q, 1), sum_init, dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    stop_at = (n_k // block_size) * block_size if floor_blocks else n_k
    for start in range(0, stop_at, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(c).transpose(-2, -1)
        if causal:
            kpos = torch.arange(stop - start)[None, :] if local_pos \
                else torch.arange(start, stop)[None, :]
            s = s.masked_fill(kpos > qpos, fill)
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        if stale:
            m = new_m
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        old = torch.where(torch.isinf(m), torch.full_like(m, -math.inf), m)
        alpha = torch.exp(shift - old) if inverted else torch.exp(old - shift)
        if inverted:
            alpha = torch.where(torch.isinf(m), torch.zeros_like(alpha), alpha)
        p = torch.exp(s - shift)
        l = (l * alpha if rescale_sum else l) + p.sum(-1, keepdim=True)
        acc = (acc * alpha if rescale_acc else acc) + p @ v[:, :, start:stop].to(c)
        m = new_m
    out = acc / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(q.dtype)


def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_acc=False)


def osa_no_sum_rescale(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_sum=False)


def osa_inverted_rescale(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, inverted=True)


def osa_max_updated_first(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, stale=True)


def osa_drops_ragged_block(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, floor_blocks=True)


def osa_local_key_positions(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, local_pos=True)


def osa_mask_fill_zero(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, fill=0.0)


# ------------------------------------------------------------------ online softmax, right
def osa_running_lse(q, k, v, block_size=64, causal=False):
    """Keeps a running log-sum-exp and a normalised output, merging block by block."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.double() / math.sqrt(d)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    out = torch.zeros((b, h, n_q, d), dtype=torch.float64)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].double().transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_p = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0)
        blk_out = blk_p @ v[:, :, start:stop].double()
        new = torch.logaddexp(lse, blk_lse)
        safe = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
        w_old = torch.where(torch.isneginf(lse), torch.zeros_like(lse), torch.exp(lse - safe))
        w_blk = torch.where(torch.isneginf(blk_lse), torch.zeros_like(lse),
                            torch.exp(blk_lse - safe))
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new
    return out.to(q.dtype)


def osa_query_and_key_blocks(q, k, v, block_size=64, causal=False):
    """Tiles queries as well as keys; per (query block) running max/sum in float32."""
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = _c(q)
    out = torch.empty((b, h, n_q, d), dtype=q.dtype)
    scale = d ** -0.5
    for qs in range(0, n_q, block_size):
        qe = min(qs + block_size, n_q)
        qb = q[:, :, qs:qe].to(c)
        qpos = torch.arange(qs, qe)[:, None] + (n_k - n_q)
        m = torch.full((b, h, qe - qs, 1), -math.inf, dtype=c)
        l = torch.zeros((b, h, qe - qs, 1), dtype=c)
        acc = torch.zeros((b, h, qe - qs, d), dtype=c)
        for ks in range(0, n_k, block_size):
            ke = min(ks + block_size, n_k)
            s = torch.einsum("bhqd,bhkd->bhqk", qb, k[:, :, ks:ke].to(c)) * scale
            if causal:
                s = torch.where(torch.arange(ks, ke)[None, :] <= qpos, s,
                                torch.tensor(-math.inf, dtype=c))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            safe = torch.nan_to_num(m_new, neginf=0.0)
            corr = torch.exp(m - safe)
            p = torch.exp(s - safe)
            l = l * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, ks:ke].to(c))
            m = m_new
        out[:, :, qs:qe] = torch.where(l > 0, acc / l.clamp_min(1e-30), 0.0).to(q.dtype)
    return out


ENTRIES = [
    Entry("merge_attention_states", "wrong", "naive_log_of_sum", "Computes the combined lse as "
          "log(exp(lse_a) + exp(lse_b)) without factoring out the maximum, so lse around 1e4 "
          "overflows.", merge_naive_lse),
    Entry("merge_attention_states", "wrong", "weights_not_normalised", "Weights the two outputs "
          "by exp(lse - max) but forgets to divide by their sum, so the merged output is not "
          "normalised.", merge_unnormalised),
    Entry("merge_attention_states", "wrong", "plain_average", "Averages out_a and out_b "
          "equally instead of weighting them by exp(lse_set - lse).", merge_plain_average),
    Entry("merge_attention_states", "wrong", "no_guard_both_empty", "Does not guard rows where "
          "both lse are -inf, so they give NaN (exp(-inf - -inf)) instead of zeros and -inf.",
          merge_no_empty_guard),
    Entry("merge_attention_states", "wrong", "combined_lse_is_max", "Takes the larger of the two "
          "lse as the combined lse (forgetting the log of the sum), so both the lse and the "
          "output weights are wrong.", merge_lse_is_max),
    Entry("merge_attention_states", "wrong", "weights_missing_trailing_axis", "Multiplies the "
          "(..., N_q) weights with the (..., N_q, d_v) outputs without adding a trailing axis, "
          "so they broadcast against the wrong axis.", merge_no_trailing_axis),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, merge_logaddexp),
    Entry("merge_attention_states", "right", "stack_logsumexp_softmax", None,
          merge_stack_softmax),

    Entry("online_softmax_attention", "wrong", "accumulator_not_rescaled", "Rescales the "
          "running sum when the maximum grows but not the output accumulator.",
          osa_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "sum_not_rescaled", "Rescales the output "
          "accumulator when the maximum grows but not the running sum.", osa_no_sum_rescale),
    Entry("online_softmax_attention", "wrong", "rescale_factor_inverted", "Uses "
          "exp(new_max - old_max) as the rescale factor instead of exp(old_max - new_max).",
          osa_inverted_rescale),
    Entry("online_softmax_attention", "wrong", "max_updated_before_rescale", "Overwrites the "
          "running max with the new max before computing the rescale factor, so the factor is "
          "always 1 and old blocks are never rescaled.", osa_max_updated_first),
    Entry("online_softmax_attention", "wrong", "floor_division_drops_last_block", "Loops over "
          "N // block_size full blocks only, dropping the ragged last block of keys.",
          osa_drops_ragged_block),
    Entry("online_softmax_attention", "wrong", "causal_uses_block_local_index", "Builds the "
          "causal mask of each block from block-local key indices (0..b-1) instead of the "
          "absolute positions start..stop-1.", osa_local_key_positions),
    Entry("online_softmax_attention", "wrong", "masked_scores_filled_with_zero", "Fills the "
          "causally masked scores with 0 instead of -inf, so future keys still get weight.",
          osa_mask_fill_zero),
    Entry("online_softmax_attention", "right", "running_lse_merge_float64", None,
          osa_running_lse),
    Entry("online_softmax_attention", "right", "query_and_key_tiles_einsum", None,
          osa_query_and_key_blocks),
]
