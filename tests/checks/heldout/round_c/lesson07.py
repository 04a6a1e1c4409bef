"""Round c, lesson 07: merge_attention_states, online_softmax_attention (torch)."""

import math

import torch

from entry import Entry


# ------------------------------------------------------------------ merge_attention_states
def _compute(t):
    return torch.promote_types(t.dtype, torch.float32)


def mas_no_shift(out_a, lse_a, out_b, lse_b):
    c = _compute(out_a)
    ea, eb = torch.exp(lse_a.to(c)), torch.exp(lse_b.to(c))
    tot = ea + eb
    out = (ea[..., None] * out_a.to(c) + eb[..., None] * out_b.to(c)) / tot[..., None]
    return out.to(out_a.dtype), torch.log(tot).to(lse_a.dtype)


def mas_plain_sum(out_a, lse_a, out_b, lse_b):
    return out_a + out_b, torch.logaddexp(lse_a, lse_b)


def mas_lse_max(out_a, lse_a, out_b, lse_b):
    c = _compute(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.logaddexp(la, lb)
    safe = torch.where(torch.isinf(lse), 0.0, lse)
    wa = torch.exp(la - safe)
    wb = torch.exp(lb - safe)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), torch.maximum(lse_a, lse_b)


def mas_lse_sum(out_a, lse_a, out_b, lse_b):
    c = _compute(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(la, lb)
    top = torch.where(torch.isinf(top), 0.0, top)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    tot = torch.where(wa + wb == 0, 1.0, wa + wb)
    out = (wa / tot)[..., None] * out_a.to(c) + (wb / tot)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), (lse_a + lse_b)


def mas_nan_when_both_empty(out_a, lse_a, out_b, lse_b):
    c = _compute(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    top = torch.maximum(la, lb)
    wa, wb = torch.exp(la - top), torch.exp(lb - top)
    tot = wa + wb
    out = (wa / tot)[..., None] * out_a.to(c) + (wb / tot)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), (top + torch.log(tot)).to(lse_a.dtype)


def mas_upcasts(out_a, lse_a, out_b, lse_b):
    c = _compute(out_a)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.logaddexp(la, lb)
    safe = torch.where(torch.isinf(lse), 0.0, lse)
    wa, wb = torch.exp(la - safe), torch.exp(lb - safe)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out, lse


def mas_logaddexp(out_a, lse_a, out_b, lse_b):
    c = torch.float64
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.logaddexp(la, lb)
    wa = torch.nan_to_num(torch.exp(la - lse), nan=0.0)
    wb = torch.nan_to_num(torch.exp(lb - lse), nan=0.0)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_stack_softmax(out_a, lse_a, out_b, lse_b):
    c = _compute(out_a)
    lses = torch.stack([lse_a.to(c), lse_b.to(c)], dim=-1)  # (..., N_q, 2)
    both_empty = torch.isneginf(lses).all(dim=-1, keepdim=True)
    w = torch.softmax(lses.masked_fill(both_empty, 0.0), dim=-1).masked_fill(both_empty, 0.0)
    outs = torch.stack([out_a.to(c), out_b.to(c)], dim=-1)  # (..., N_q, d_v, 2)
    out = (outs * w[..., None, :]).sum(-1)
    lse = torch.logsumexp(lses, dim=-1)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ------------------------------------------------------------------ online_softmax_attention
def _online(q, k, v, block_size=64, causal=False, *, rescale_acc=True, aligned=True,
            guard=True, keep_dtype=True, drop_tail=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    offset = (n_k - n_q) if aligned else 0
    qpos = torch.arange(n_q)[:, None] + offset
    stop_all = (n_k // block_size) * block_size if drop_tail else n_k
    for start in range(0, stop_all, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), 0.0, new_m) if guard else new_m
        p = torch.exp(s - shift)
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = (acc * alpha if rescale_acc else acc) + p @ v[:, :, start:stop].to(c)
        m = new_m
    out = acc / torch.where(l == 0, 1.0, l) if guard else acc / l
    return out.to(q.dtype) if keep_dtype else out


def osa_no_acc_rescale(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, rescale_acc=False)


def osa_top_left_causal(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, aligned=False)


def osa_nan_empty_rows(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, guard=False)


def osa_float32_result(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, keep_dtype=False)


def osa_drops_last_block(q, k, v, block_size=64, causal=False):
    return _online(q, k, v, block_size, causal, drop_tail=True)


def osa_full_scores(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    s = q.to(c) @ k.to(c).transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q).logical_not(),
                          -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    out = torch.zeros((b, h, n_q, d), dtype=c)
    tot = torch.zeros((b, h, n_q, 1), dtype=c)
    for start in range(0, n_k, block_size):
        tot += e[..., start:start + block_size].sum(-1, keepdim=True)
        out += e[..., start:start + block_size] @ v[:, :, start:start + block_size].to(c)
    return (out / torch.where(tot == 0, 1.0, tot)).to(q.dtype)


def osa_two_pass(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.float64
    qs = q.to(c) / math.sqrt(d)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)

    def block_scores(start):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        return s, stop

    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    for start in range(0, n_k, block_size):  # pass 1: the row maxima
        s, _ = block_scores(start)
        m = torch.maximum(m, s.amax(-1, keepdim=True))
    m = m.masked_fill(torch.isinf(m), 0.0)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    for start in range(0, n_k, block_size):  # pass 2: sums with a fixed maximum
        s, stop = block_scores(start)
        p = torch.exp(s - m)
        l += p.sum(-1, keepdim=True)
        acc += p @ v[:, :, start:stop].to(c)
    return (acc / l.clamp_min(1e-300)).to(q.dtype)


def osa_merge_block_states(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    qs = q.to(c) / math.sqrt(d)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    out = torch.zeros((b, h, n_q, d), dtype=c)
    lse = torch.full((b, h, n_q), -math.inf, dtype=c)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)  # -inf where the block has no allowed key
        p = torch.nan_to_num(torch.exp(s - blk_lse[..., None]), nan=0.0)
        blk_out = p @ v[:, :, start:stop].to(c)
        new_lse = torch.logaddexp(lse, blk_lse)
        wa = torch.nan_to_num(torch.exp(lse - new_lse), nan=0.0)
        wb = torch.nan_to_num(torch.exp(blk_lse - new_lse), nan=0.0)
        out = wa[..., None] * out + wb[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "no_max_shift", "Exponentiates the log-sum-exps directly, so lse values around 1e4 overflow to inf/NaN.", mas_no_shift),
    Entry("merge_attention_states", "wrong", "adds_outputs", "Adds the two normalised outputs instead of weighting each by its share exp(lse_set - lse).", mas_plain_sum),
    Entry("merge_attention_states", "wrong", "lse_is_max", "Returns max(lse_a, lse_b) as the combined log-sum-exp instead of log(e^lse_a + e^lse_b).", mas_lse_max),
    Entry("merge_attention_states", "wrong", "lse_is_sum", "Adds lse_a and lse_b (multiplying the sums) instead of combining them with log-add-exp.", mas_lse_sum),
    Entry("merge_attention_states", "wrong", "nan_when_both_empty", "Subtracts max(lse_a, lse_b) without a guard, so a row where both sets are empty gives -inf - (-inf) = NaN.", mas_nan_when_both_empty),
    Entry("merge_attention_states", "wrong", "returns_float32", "Computes in float32 but forgets to cast back, so half-precision inputs get float32 results.", mas_upcasts),
    Entry("merge_attention_states", "right", "logaddexp_float64", None, mas_logaddexp),
    Entry("merge_attention_states", "right", "stacked_softmax", None, mas_stack_softmax),
    Entry("online_softmax_attention", "wrong", "no_accumulator_rescale", "Rescales the running sum when the maximum grows but not the running output accumulator.", osa_no_acc_rescale),
    Entry("online_softmax_attention", "wrong", "top_left_causal", "Aligns the causal mask top-left (key j <= i) instead of bottom-right (j <= i + N_k - N_q).", osa_top_left_causal),
    Entry("online_softmax_attention", "wrong", "nan_on_empty_rows", "Does not guard rows whose keys are all masked, so -inf - (-inf) and 0/0 give NaN instead of zeros.", osa_nan_empty_rows),
    Entry("online_softmax_attention", "wrong", "returns_float32", "Accumulates in float32 and returns that instead of casting back to q's dtype.", osa_float32_result),
    Entry("online_softmax_attention", "wrong", "drops_ragged_block", "Loops only over full blocks, dropping the last keys when N_k is not a multiple of block_size.", osa_drops_last_block),
    Entry("online_softmax_attention", "wrong", "builds_full_scores", "Computes the full N x N score matrix first and only then sums it block by block, which is not online.", osa_full_scores),
    Entry("online_softmax_attention", "right", "two_pass_blocks", None, osa_two_pass),
    Entry("online_softmax_attention", "right", "merge_block_states", None, osa_merge_block_states),
]
