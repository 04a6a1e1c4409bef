"""Round k, lesson 07 (torch): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


def _up(t):
    return t.to(torch.promote_types(t.dtype, torch.float32))


# ============================================================================ merge_attention_states
@add("merge_attention_states", "wrong", "raw_exponentials",
     "It weights the two outputs by exp(lse_a) and exp(lse_b) directly, without subtracting the "
     "larger lse first, so lse values around 1e4 overflow to inf and give NaN.")
def merge_raw_exp(out_a, lse_a, out_b, lse_b):
    a, b = _up(lse_a), _up(lse_b)
    ea, eb = torch.exp(a), torch.exp(b)
    total = ea + eb
    out = (ea[..., None] * _up(out_a) + eb[..., None] * _up(out_b)) / total[..., None]
    return out.to(out_a.dtype), torch.log(total).to(lse_a.dtype)


@add("merge_attention_states", "wrong", "sigmoid_share_nan_when_both_empty",
     "It takes A's share as sigmoid(lse_a - lse_b), which is NaN where both sets are empty "
     "(-inf - (-inf)), so those rows come out NaN instead of zeros.")
def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    a, b = _up(lse_a), _up(lse_b)
    share_a = torch.sigmoid(a - b)[..., None]
    out = share_a * _up(out_a) + (1 - share_a) * _up(out_b)
    return out.to(out_a.dtype), torch.logaddexp(a, b).to(lse_a.dtype)


@add("merge_attention_states", "wrong", "weights_not_unsqueezed",
     "The per-row weights (..., N_q) are multiplied with out (..., N_q, d_v) without adding a "
     "trailing axis, so they broadcast against d_v and the call raises (or mixes rows).")
def merge_no_unsqueeze(out_a, lse_a, out_b, lse_b):
    a, b = _up(lse_a), _up(lse_b)
    lse = torch.logaddexp(a, b)
    w_a = torch.exp(a - lse).nan_to_num(0.0)
    w_b = torch.exp(b - lse).nan_to_num(0.0)
    out = w_a * _up(out_a) + w_b * _up(out_b)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


@add("merge_attention_states", "wrong", "logsumexp_wrong_dim",
     "It stacks the two lse tensors on dim 0 but reduces with logsumexp over dim=-1, summing "
     "over the queries instead of over the two sets.")
def merge_lse_dim(out_a, lse_a, out_b, lse_b):
    both = torch.stack([_up(lse_a), _up(lse_b)])
    lse = torch.logsumexp(both, dim=-1, keepdim=True)[0]
    w_a = torch.exp(_up(lse_a) - lse).nan_to_num(0.0)[..., None]
    w_b = torch.exp(_up(lse_b) - lse).nan_to_num(0.0)[..., None]
    out = w_a * _up(out_a) + w_b * _up(out_b)
    return out.to(out_a.dtype), lse.expand_as(lse_a).to(lse_a.dtype)


@add("merge_attention_states", "wrong", "out_a_used_twice",
     "The second term reuses out_a (copy-paste) instead of out_b, so B's output never enters "
     "the result.")
def merge_out_a_twice(out_a, lse_a, out_b, lse_b):
    a, b = _up(lse_a), _up(lse_b)
    m = torch.maximum(a, b)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    ea, eb = torch.exp(a - m), torch.exp(b - m)
    total = ea + eb
    safe = torch.where(total > 0, total, torch.ones_like(total))
    out = (ea / safe)[..., None] * _up(out_a) + (eb / safe)[..., None] * _up(out_a)
    return out.to(out_a.dtype), (m + torch.log(total)).to(lse_a.dtype)


@add("merge_attention_states", "wrong", "lse_missing_max",
     "When re-assembling the log-sum-exp it returns log(exp(a - m) + exp(b - m)) and forgets to "
     "add the maximum m back (the merged output itself is right).")
def merge_lse_no_max(out_a, lse_a, out_b, lse_b):
    a, b = _up(lse_a), _up(lse_b)
    m = torch.maximum(a, b)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    ea, eb = torch.exp(a - m), torch.exp(b - m)
    total = ea + eb
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * _up(out_a) + (eb / safe)[..., None] * _up(out_b)
    return out.to(out_a.dtype), torch.log(total).to(lse_a.dtype)


@add("merge_attention_states", "right", "logaddexp_nan_to_num")
def merge_logaddexp(out_a, lse_a, out_b, lse_b):
    a, b = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(a, b)
    w_a = torch.exp(a - lse).nan_to_num(nan=0.0).unsqueeze(-1)
    w_b = torch.exp(b - lse).nan_to_num(nan=0.0).unsqueeze(-1)
    out = w_a * out_a.double() + w_b * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


@add("merge_attention_states", "right", "softmax_over_two_sets")
def merge_softmax_pair(out_a, lse_a, out_b, lse_b):
    stacked = torch.stack([lse_a.double(), lse_b.double()], dim=-1)
    lse = torch.logsumexp(stacked, dim=-1)
    shares = torch.softmax(stacked, dim=-1)
    shares = torch.where(torch.isneginf(lse)[..., None], torch.zeros_like(shares), shares)
    outs = torch.stack([out_a.double(), out_b.double()], dim=-1)
    out = (outs * shares[..., None, :]).sum(dim=-1)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ============================================================================ online_softmax_attention
def _compute(q):
    return torch.promote_types(q.dtype, torch.float32)


@add("online_softmax_attention", "wrong", "average_of_block_softmaxes",
     "It normalises each key block's weights on their own and averages the block outputs, "
     "instead of carrying a running max and sum across blocks (only right with one block).")
def osa_block_average(q, k, v, block_size=64, causal=False):
    c = _compute(q)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.to(c) / math.sqrt(d)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    outs = []
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].to(c)
        vb = v[:, :, start:start + block_size].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            kpos = torch.arange(start, start + kb.shape[2])[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        outs.append(torch.softmax(s, dim=-1).nan_to_num(0.0) @ vb)
    return (sum(outs) / len(outs)).to(q.dtype)


@add("online_softmax_attention", "wrong", "causal_top_left",
     "Its causal test compares key index with query index directly (top-left alignment), "
     "ignoring the N_k - N_q offset, so causal attention with N_q != N_k is wrong.")
def osa_top_left(q, k, v, block_size=64, causal=False):
    c = _compute(q)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.to(c) * (1.0 / math.sqrt(d))
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    rows = torch.arange(n_q)[:, None]
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        kb, vb = k[:, :, start:stop].to(c), v[:, :, start:stop].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            cols = torch.arange(start, stop)[None, :]
            s = s.masked_fill(cols > rows, -math.inf)
        new_m = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), 0.0, new_m)
        p = torch.exp(s - shift)
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m = new_m
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


@add("online_softmax_attention", "wrong", "drops_partial_last_block",
     "The block loop runs over n_k // block_size full blocks only, so the keys of a last "
     "partial block are never visited (and N_k < block_size visits none).")
def osa_full_blocks(q, k, v, block_size=64, causal=False):
    c = _compute(q)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.to(c) / math.sqrt(d)
    running_max = torch.full((b, h, n_q, 1), float("-inf"), dtype=c)
    running_sum = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    qpos = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    for blk in range(n_k // block_size):
        start, stop = blk * block_size, (blk + 1) * block_size
        kb, vb = k[:, :, start:stop].to(c), v[:, :, start:stop].to(c)
        s = qs @ kb.transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop).unsqueeze(0) > qpos, float("-inf"))
        new_max = torch.maximum(running_max, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        p = torch.exp(s - safe)
        corr = torch.exp(running_max - safe)
        running_sum = running_sum * corr + p.sum(dim=-1, keepdim=True)
        acc = acc * corr + p @ vb
        running_max = new_max
    out = acc / torch.where(running_sum == 0, torch.ones_like(running_sum), running_sum)
    return out.to(q.dtype)


@add("online_softmax_attention", "wrong", "full_score_matrix",
     "It computes the whole N_q x N_k score matrix up front and only then walks over it in "
     "blocks, so the values are right but it builds the N x N tensor the exercise forbids.")
def osa_full_scores(q, k, v, block_size=64, causal=False):
    c = _compute(q)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    scores = (q.to(c) @ k.to(c).transpose(-2, -1)) / math.sqrt(d)
    if causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~allowed, -math.inf)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    for start in range(0, n_k, block_size):
        s = scores[..., start:start + block_size]
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), 0.0, new_m)
        p = torch.exp(s - shift)
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, start:start + block_size].to(c)
        m = new_m
    return (acc / torch.where(l == 0, 1.0, l)).to(q.dtype)


@add("online_softmax_attention", "wrong", "no_guard_for_empty_rows",
     "It shifts by the running max even while it is still -inf, so a query row with no visible "
     "key computes exp(-inf - (-inf)) and comes out NaN instead of zeros.")
def osa_no_guard(q, k, v, block_size=64, causal=False):
    c = _compute(q)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q_scaled = q.to(c) * d ** -0.5
    row_max = q_scaled.new_full((b, h, n_q, 1), -math.inf)
    row_sum = q_scaled.new_zeros((b, h, n_q, 1))
    acc = q_scaled.new_zeros((b, h, n_q, d))
    last_key = torch.arange(n_q)[:, None] + n_k - n_q
    start = 0
    while start < n_k:
        stop = min(start + block_size, n_k)
        scores = q_scaled @ k[:, :, start:stop].to(c).transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > last_key, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        weights = torch.exp(scores - new_max)
        rescale = torch.exp(row_max - new_max)
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[:, :, start:stop].to(c)
        row_max = new_max
        start = stop
    return (acc / row_sum).to(q.dtype)


@add("online_softmax_attention", "wrong", "max_updated_before_rescale",
     "It overwrites the running max with the new max before computing the rescale factor "
     "exp(old_max - new_max), so the factor is always 1 and earlier blocks are never rescaled.")
def osa_update_first(q, k, v, block_size=64, causal=False):
    c = _compute(q)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.to(c) / math.sqrt(d)
    m_i = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l_i = torch.zeros((b, h, n_q, 1), dtype=c)
    o_i = torch.zeros((b, h, n_q, d), dtype=c)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = qs @ k[:, :, start:stop].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(start, stop)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m_i, s.amax(dim=-1, keepdim=True))
        m_i = m_new
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - shift)
        alpha = torch.exp(m_i - shift)
        l_i = alpha * l_i + p.sum(dim=-1, keepdim=True)
        o_i = alpha * o_i + p @ v[:, :, start:stop].to(c)
    return (o_i / torch.where(l_i == 0, 1.0, l_i)).to(q.dtype)


@add("online_softmax_attention", "right", "merge_block_states_float64")
def osa_merge_states(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros(b, h, n_q, d, dtype=torch.float64)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    last_visible = torch.arange(n_q) + (n_k - n_q)
    for start in range(0, n_k, block_size):
        kb = k[:, :, start:start + block_size].double()
        vb = v[:, :, start:start + block_size].double()
        s = torch.einsum("bhqd,bhkd->bhqk", q64, kb)
        if causal:
            keys = torch.arange(start, start + kb.shape[2])
            s = s.masked_fill(keys[None, :] > last_visible[:, None], -math.inf)
        blk_lse = torch.logsumexp(s, dim=-1)
        blk_out = torch.einsum("bhqk,bhkd->bhqd",
                               torch.exp(s - blk_lse[..., None]).nan_to_num(0.0), vb)
        new_lse = torch.logaddexp(lse, blk_lse)
        w_old = torch.exp(lse - new_lse).nan_to_num(0.0)[..., None]
        w_new = torch.exp(blk_lse - new_lse).nan_to_num(0.0)[..., None]
        out = w_old * out + w_new * blk_out
        lse = new_lse
    return out.to(q.dtype)


@add("online_softmax_attention", "right", "query_and_key_tiles")
def osa_tiles(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    result = torch.zeros(b, h, n_q, d, dtype=torch.float64)
    scale = d ** -0.5
    for q0 in range(0, n_q, block_size):
        qt = q[:, :, q0:q0 + block_size].double() * scale
        rows = qt.shape[2]
        run_max = torch.full((b, h, rows, 1), float("-inf"), dtype=torch.float64)
        run_sum = torch.zeros(b, h, rows, 1, dtype=torch.float64)
        acc = torch.zeros(b, h, rows, d, dtype=torch.float64)
        qpos = torch.arange(q0, q0 + rows) + (n_k - n_q)
        for k0 in range(0, n_k, block_size):
            kt = k[:, :, k0:k0 + block_size].double()
            vt = v[:, :, k0:k0 + block_size].double()
            s = qt @ kt.transpose(2, 3)
            if causal:
                kpos = torch.arange(k0, k0 + kt.shape[2])
                s = torch.where(kpos[None, :] <= qpos[:, None], s, torch.tensor(float("-inf"),
                                                                                dtype=s.dtype))
            blk_max = s.max(dim=-1, keepdim=True).values
            new_max = torch.maximum(run_max, blk_max)
            safe = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
            p = torch.exp(s - safe)
            corr = torch.exp(run_max - safe)
            run_sum = corr * run_sum + p.sum(dim=-1, keepdim=True)
            acc = corr * acc + p @ vt
            run_max = new_max
        result[:, :, q0:q0 + rows] = acc / run_sum.clamp_min(1e-300)
    return result.to(q.dtype)
