"""Lesson 07 (torch): merge_attention_states and online_softmax_attention, as learners write them."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------- merge_attention_states: wrong
def _f32(*ts):
    compute = torch.promote_types(ts[0].dtype, torch.float32)
    return [t.to(compute) for t in ts]


def merge_equal_weights(out_a, lse_a, out_b, lse_b):
    oa, la, ob, lb = _f32(out_a, lse_a, out_b, lse_b)
    out = 0.5 * (oa + ob)
    lse = torch.logaddexp(la, lb)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_unshifted_exp(out_a, lse_a, out_b, lse_b):
    oa, la, ob, lb = _f32(out_a, lse_a, out_b, lse_b)
    sum_a, sum_b = torch.exp(la), torch.exp(lb)  # the two softmax denominators
    total = sum_a + sum_b
    out = (sum_a / total)[..., None] * oa + (sum_b / total)[..., None] * ob
    return out.to(out_a.dtype), torch.log(total).to(lse_a.dtype)


def merge_adds_lse(out_a, lse_a, out_b, lse_b):
    oa, la, ob, lb = _f32(out_a, lse_a, out_b, lse_b)
    lse = la + lb
    w_a = torch.exp(la - lse).nan_to_num(0.0)
    w_b = torch.exp(lb - lse).nan_to_num(0.0)
    out = w_a[..., None] * oa + w_b[..., None] * ob
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_nan_when_both_empty(out_a, lse_a, out_b, lse_b):
    oa, la, ob, lb = _f32(out_a, lse_a, out_b, lse_b)
    m = torch.maximum(la, lb)
    w_a, w_b = torch.exp(la - m), torch.exp(lb - m)
    total = w_a + w_b
    out = (w_a / total)[..., None] * oa + (w_b / total)[..., None] * ob
    return out.to(out_a.dtype), (m + torch.log(total)).to(lse_a.dtype)


def merge_not_normalised(out_a, lse_a, out_b, lse_b):
    oa, la, ob, lb = _f32(out_a, lse_a, out_b, lse_b)
    m = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w_a, w_b = torch.exp(la - shift), torch.exp(lb - shift)
    out = w_a[..., None] * oa + w_b[..., None] * ob  # forgot to divide by w_a + w_b
    return out.to(out_a.dtype), (shift + torch.log(w_a + w_b)).to(lse_a.dtype)


def merge_swapped_weights(out_a, lse_a, out_b, lse_b):
    oa, la, ob, lb = _f32(out_a, lse_a, out_b, lse_b)
    m = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w_a, w_b = torch.exp(la - shift), torch.exp(lb - shift)
    total = torch.where(w_a + w_b == 0, torch.ones_like(m), w_a + w_b)
    out = (w_b / total)[..., None] * oa + (w_a / total)[..., None] * ob
    return out.to(out_a.dtype), (shift + torch.log(w_a + w_b)).to(lse_a.dtype)


def merge_weights_without_trailing_axis(out_a, lse_a, out_b, lse_b):
    oa, la, ob, lb = _f32(out_a, lse_a, out_b, lse_b)
    m = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w_a, w_b = torch.exp(la - shift), torch.exp(lb - shift)
    total = torch.where(w_a + w_b == 0, torch.ones_like(m), w_a + w_b)
    out = (w_a / total) * oa + (w_b / total) * ob
    return out.to(out_a.dtype), (shift + torch.log(w_a + w_b)).to(lse_a.dtype)


def merge_keeps_float32(out_a, lse_a, out_b, lse_b):
    oa, la, ob, lb = _f32(out_a, lse_a, out_b, lse_b)
    m = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w_a, w_b = torch.exp(la - shift), torch.exp(lb - shift)
    total = torch.where(w_a + w_b == 0, torch.ones_like(m), w_a + w_b)
    out = (w_a / total)[..., None] * oa + (w_b / total)[..., None] * ob
    return out, shift + torch.log(w_a + w_b)  # left in the compute dtype


# ----------------------------------------------------------------- merge_attention_states: right
def merge_logsumexp_stack(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logsumexp(torch.stack([la, lb]), dim=0)  # -inf when both are -inf
    w_a = torch.exp(la - lse).nan_to_num(nan=0.0)
    w_b = torch.exp(lb - lse).nan_to_num(nan=0.0)
    out = w_a.unsqueeze(-1) * out_a.double() + w_b.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.float(), lse_b.float()
    if out_a.dtype == torch.float64:
        la, lb = lse_a, lse_b
    both_empty = torch.isinf(la) & torch.isinf(lb) & (la < 0) & (lb < 0)
    diff = torch.where(both_empty, torch.zeros_like(la), la - lb)
    w_a = torch.sigmoid(diff)  # e^a / (e^a + e^b)
    w_b = torch.sigmoid(-diff)
    out = w_a[..., None] * out_a.to(la.dtype) + w_b[..., None] * out_b.to(la.dtype)
    out = torch.where(both_empty[..., None], torch.zeros_like(out), out)
    lse = torch.logaddexp(la, lb)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ----------------------------------------------------------------- online softmax helpers
def _setup(q, k):
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) / math.sqrt(d)
    row_max = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=compute, device=q.device)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros_like(q_scaled)
    query_pos = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)
    return n_k, compute, q_scaled, row_max, row_sum, acc, query_pos


def _block_scores(q_scaled, k, start, stop, compute, causal, query_pos):
    k_blk = k[..., start:stop, :].to(compute)
    scores = q_scaled @ k_blk.transpose(-2, -1)
    if causal:
        key_pos = torch.arange(start, stop, device=k.device)[None, :]
        scores = scores.masked_fill(key_pos > query_pos, -math.inf)
    return scores


def _safe(m):
    return torch.where(torch.isinf(m), torch.zeros_like(m), m)


def _finish(acc, row_sum, dtype):
    return (acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)).to(dtype)


# ----------------------------------------------------------------- online softmax: wrong
def online_no_rescale(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, row_max, row_sum, acc, qpos = _setup(q, k)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = _block_scores(qs, k, start, stop, compute, causal, qpos)
        row_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - _safe(row_max))
        row_sum = row_sum + p.sum(dim=-1, keepdim=True)  # old terms keep the old max
        acc = acc + p @ v[..., start:stop, :].to(compute)
    return _finish(acc, row_sum, q.dtype)


def online_rescales_sum_only(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, row_max, row_sum, acc, qpos = _setup(q, k)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = _block_scores(qs, k, start, stop, compute, causal, qpos)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - _safe(new_max))
        alpha = torch.exp(row_max - _safe(new_max))
        row_sum = row_sum * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc + p @ v[..., start:stop, :].to(compute)  # acc not rescaled
        row_max = new_max
    return _finish(acc, row_sum, q.dtype)


def online_causal_top_left(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, row_max, row_sum, acc, _ = _setup(q, k)
    qpos = torch.arange(q.shape[-2], device=q.device)[:, None]  # query i at position i
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = _block_scores(qs, k, start, stop, compute, causal, qpos)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - _safe(new_max))
        alpha = torch.exp(row_max - _safe(new_max))
        row_sum = row_sum * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ v[..., start:stop, :].to(compute)
        row_max = new_max
    return _finish(acc, row_sum, q.dtype)


def online_builds_full_scores(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, _, _, _, qpos = _setup(q, k)
    blocks = []
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        blocks.append(_block_scores(qs, k, start, stop, compute, causal, qpos))
    scores = torch.cat(blocks, dim=-1)  # (B, H, N_q, N_k), assembled from the blocks
    row_max = _safe(scores.amax(dim=-1, keepdim=True))
    p = torch.exp(scores - row_max)
    total = p.sum(dim=-1, keepdim=True)
    return _finish(p @ v.to(compute), total, q.dtype)


def online_nan_on_empty_rows(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, row_max, row_sum, acc, qpos = _setup(q, k)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = _block_scores(qs, k, start, stop, compute, causal, qpos)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - new_max)
        alpha = torch.exp(row_max - new_max)
        row_sum = row_sum * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ v[..., start:stop, :].to(compute)
        row_max = new_max
    return (acc / row_sum).to(q.dtype)


def online_normalises_each_block(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, _, _, acc, qpos = _setup(q, k)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = _block_scores(qs, k, start, stop, compute, causal, qpos)
        p = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # each block's own softmax
        acc = acc + p @ v[..., start:stop, :].to(compute)
    n_blocks = math.ceil(n_k / block_size)
    return (acc / n_blocks).to(q.dtype)


def online_forgets_final_division(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, row_max, row_sum, acc, qpos = _setup(q, k)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = _block_scores(qs, k, start, stop, compute, causal, qpos)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - _safe(new_max))
        alpha = torch.exp(row_max - _safe(new_max))
        row_sum = row_sum * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ v[..., start:stop, :].to(compute)
        row_max = new_max
    return acc.to(q.dtype)


def online_drops_last_partial_block(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, row_max, row_sum, acc, qpos = _setup(q, k)
    for start in range(0, n_k - block_size + 1, block_size):
        stop = start + block_size
        scores = _block_scores(qs, k, start, stop, compute, causal, qpos)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - _safe(new_max))
        alpha = torch.exp(row_max - _safe(new_max))
        row_sum = row_sum * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ v[..., start:stop, :].to(compute)
        row_max = new_max
    return _finish(acc, row_sum, q.dtype)


def online_returns_compute_dtype(q, k, v, block_size=64, causal=False):
    n_k, compute, qs, row_max, row_sum, acc, qpos = _setup(q, k)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = _block_scores(qs, k, start, stop, compute, causal, qpos)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        p = torch.exp(scores - _safe(new_max))
        alpha = torch.exp(row_max - _safe(new_max))
        row_sum = row_sum * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ v[..., start:stop, :].to(compute)
        row_max = new_max
    return acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)


# ----------------------------------------------------------------- online softmax: right
def online_lse_merge(q, k, v, block_size=64, causal=False):
    """Keeps a normalised output and a log-sum-exp per row and merges each block in."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qd = q.double() * d ** -0.5
    dev = q.device
    out = torch.zeros(q.shape, dtype=torch.float64, device=dev)
    lse = torch.full(q.shape[:-1], -math.inf, dtype=torch.float64, device=dev)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qd @ k[..., start:stop, :].double().transpose(-1, -2)
        if causal:
            visible = (torch.arange(start, stop, device=dev)[None, :]
                       <= torch.arange(n_q, device=dev)[:, None] + (n_k - n_q))
            s = s.masked_fill(~visible, -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_out = torch.exp(s - blk_lse[..., None]).nan_to_num(0.0) @ v[..., start:stop, :].double()
        new_lse = torch.logaddexp(lse, blk_lse)
        w_old = torch.exp(lse - new_lse).nan_to_num(0.0)
        w_blk = torch.exp(blk_lse - new_lse).nan_to_num(0.0)
        out = w_old[..., None] * out + w_blk[..., None] * blk_out
        lse = new_lse
    return out.to(q.dtype)


def online_exp2_kernel_style(q, k, v, block_size=64, causal=False):
    """The Triton kernel's bookkeeping in PyTorch: base-2 exponentials, scale folded in."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    qk_scale = (1.0 / math.sqrt(d)) * 1.4426950408889634  # log2(e)
    qf = q.float()
    dev = q.device
    m_i = torch.full(q.shape[:-1], -math.inf, device=dev)
    l_i = torch.zeros(q.shape[:-1], device=dev)
    acc = torch.zeros(q.shape, device=dev)
    offset = n_k - n_q
    for start in range(0, n_k, block_size):
        kb = k[..., start:start + block_size, :].float()
        vb = v[..., start:start + block_size, :].float()
        qk = (qf @ kb.transpose(-1, -2)) * qk_scale
        if causal:
            cols = torch.arange(start, start + kb.shape[-2], device=dev)
            rows = torch.arange(n_q, device=dev)
            qk = torch.where(cols[None, :] <= rows[:, None] + offset, qk, -math.inf)
        m_ij = torch.maximum(m_i, qk.amax(-1))
        m_shift = torch.where(m_ij == -math.inf, 0.0, m_ij)
        p = torch.exp2(qk - m_shift[..., None])
        alpha = torch.exp2(m_i - m_shift)
        l_i = l_i * alpha + p.sum(-1)
        acc = acc * alpha[..., None] + p @ vb
        m_i = m_ij
    l_safe = torch.where(l_i == 0, 1.0, l_i)
    return (acc / l_safe[..., None]).to(q.dtype)


ENTRIES = [
    Entry("merge_attention_states", "wrong", "equal_weights",
          "Averages the two outputs half and half instead of weighting each set by its share "
          "of the total, exp(lse_set - lse).", merge_equal_weights),
    Entry("merge_attention_states", "wrong", "unshifted_exp",
          "Exponentiates the log-sum-exps directly without subtracting the larger one, so "
          "lse of 1e4 overflows to inf and the result is NaN.", merge_unshifted_exp),
    Entry("merge_attention_states", "wrong", "adds_lse",
          "Adds the two log-sum-exps (lse_a + lse_b) instead of log-adding them "
          "(log(e^lse_a + e^lse_b)).", merge_adds_lse),
    Entry("merge_attention_states", "wrong", "nan_when_both_empty",
          "Subtracts the maximum without guarding the case where both sets are empty, so "
          "-inf - (-inf) gives NaN on those rows.", merge_nan_when_both_empty),
    Entry("merge_attention_states", "wrong", "not_normalised",
          "Combines the two outputs with the shifted weights exp(lse - max) but never divides "
          "by their sum.", merge_not_normalised),
    Entry("merge_attention_states", "wrong", "swapped_weights",
          "Multiplies out_a by set B's weight and out_b by set A's.", merge_swapped_weights),
    Entry("merge_attention_states", "wrong", "weights_without_trailing_axis",
          "Multiplies the (..., N_q) weights into the (..., N_q, d_v) outputs without adding a "
          "trailing axis, so they line up with d_v instead of N_q.",
          merge_weights_without_trailing_axis),
    Entry("merge_attention_states", "wrong", "keeps_compute_dtype",
          "Never casts the results back: half-precision inputs come back as float32.",
          merge_keeps_float32),
    Entry("merge_attention_states", "right", "logsumexp_stack_float64", None,
          merge_logsumexp_stack),
    Entry("merge_attention_states", "right", "sigmoid_weights", None, merge_sigmoid),

    Entry("online_softmax_attention", "wrong", "no_rescale",
          "Raises the running maximum but never rescales the old sum and accumulator by "
          "exp(old_max - new_max).", online_no_rescale),
    Entry("online_softmax_attention", "wrong", "rescales_sum_only",
          "Rescales the running sum when the maximum changes but not the accumulator.",
          online_rescales_sum_only),
    Entry("online_softmax_attention", "wrong", "causal_top_left",
          "Compares key positions with the query index i instead of i + N_k - N_q (top-left "
          "causal alignment).", online_causal_top_left),
    Entry("online_softmax_attention", "wrong", "builds_full_scores",
          "Computes the scores block by block but concatenates them into the full "
          "(B, H, N_q, N_k) matrix and takes an ordinary softmax.", online_builds_full_scores),
    Entry("online_softmax_attention", "wrong", "nan_on_rows_without_keys",
          "Does not guard rows that have seen no visible key: -inf - (-inf) and 0/0 give NaN "
          "instead of zeros.", online_nan_on_empty_rows),
    Entry("online_softmax_attention", "wrong", "normalises_each_block",
          "Takes a separate softmax in every block and averages the blocks' outputs, instead "
          "of carrying one running max and sum across blocks.", online_normalises_each_block),
    Entry("online_softmax_attention", "wrong", "forgets_final_division",
          "Returns the accumulator without dividing it by the running sum.",
          online_forgets_final_division),
    Entry("online_softmax_attention", "wrong", "drops_last_partial_block",
          "Loops over range(0, N_k - block_size + 1, block_size), so a shorter last block of "
          "keys is never visited.", online_drops_last_partial_block),
    Entry("online_softmax_attention", "wrong", "returns_compute_dtype",
          "Returns the float32 accumulator without casting back to q's dtype.",
          online_returns_compute_dtype),
    Entry("online_softmax_attention", "right", "lse_merge_float64", None, online_lse_merge),
    Entry("online_softmax_attention", "right", "exp2_kernel_style", None,
          online_exp2_kernel_style),
]
