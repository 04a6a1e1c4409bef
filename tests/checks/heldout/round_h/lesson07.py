"""Lesson 07 (flash, torch): merge_attention_states, online_softmax_attention."""

import math

import torch

from entry import Entry


# ------------------------------------------------------------------ merge_attention_states: wrong
def mas_naive_logexp(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    ea, eb = torch.exp(lse_a.to(c)), torch.exp(lse_b.to(c))
    total = ea + eb
    lse = torch.log(total)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    out = (ea / safe)[..., None] * out_a.to(c) + (eb / safe)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_unnormalised(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(la, lb)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    lse = m + torch.log(wa + wb)
    out = wa[..., None] * out_a.to(c) + wb[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_max_lse(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.maximum(la, lb)
    shift = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    wa, wb = torch.exp(la - shift), torch.exp(lb - shift)
    tot = wa + wb
    tot = torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (wa / tot)[..., None] * out_a.to(c) + (wb / tot)[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_average(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a.float(), lse_b.float())
    return ((out_a.float() + out_b.float()) / 2).to(out_a.dtype), lse.to(lse_a.dtype)


def mas_no_empty_guard(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    m = torch.maximum(la, lb)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    lse = m + torch.log(wa + wb)
    out = (wa / (wa + wb))[..., None] * out_a.to(c) + (wb / (wa + wb))[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_swapped_weights(out_a, lse_a, out_b, lse_b):
    c = torch.promote_types(out_a.dtype, torch.float32)
    la, lb = lse_a.to(c), lse_b.to(c)
    lse = torch.logaddexp(la, lb)
    shift = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    wa = torch.exp(la - shift)
    wb = torch.exp(lb - shift)
    out = wb[..., None] * out_a.to(c) + wa[..., None] * out_b.to(c)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ------------------------------------------------------------------ merge_attention_states: right
def mas_logaddexp(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    wa = torch.nan_to_num(torch.exp(la - lse), nan=0.0)
    wb = torch.nan_to_num(torch.exp(lb - lse), nan=0.0)
    out = wa.unsqueeze(-1) * out_a.double() + wb.unsqueeze(-1) * out_b.double()
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def mas_stack_softmax(out_a, lse_a, out_b, lse_b):
    lses = torch.stack([lse_a.double(), lse_b.double()], dim=-1)  # (..., N_q, 2)
    lse = torch.logsumexp(lses, dim=-1)
    share = torch.nan_to_num(torch.softmax(lses, dim=-1), nan=0.0)  # (..., N_q, 2)
    outs = torch.stack([out_a.double(), out_b.double()], dim=-2)  # (..., N_q, 2, d_v)
    out = (share.unsqueeze(-2) @ outs).squeeze(-2)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


# ------------------------------------------------------------------ online_softmax_attention
def _setup(q, k, v):
    c = torch.promote_types(q.dtype, torch.float32)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    qs = q.to(c) / math.sqrt(d)
    m = torch.full((b, h, n_q, 1), -math.inf, dtype=c)
    l = torch.zeros((b, h, n_q, 1), dtype=c)
    acc = torch.zeros((b, h, n_q, d), dtype=c)
    qpos = torch.arange(n_q)[:, None] + (n_k - n_q)
    return c, qs, m, l, acc, qpos, n_k


def osa_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    c, qs, m, l, acc, qpos, n_k = _setup(q, k, v)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        s = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        p = torch.exp(s - shift)
        l = l * torch.exp(m - shift) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[:, :, s0:s1].to(c)
        m = new_m
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def osa_stale_max(q, k, v, block_size=64, causal=False):
    c, qs, m, l, acc, qpos, n_k = _setup(q, k, v)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        s = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m = m_new
        shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(s - shift)
        alpha = torch.exp(m - m_new)
        alpha = torch.nan_to_num(alpha, nan=1.0)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, :, s0:s1].to(c)
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def osa_block_local_positions(q, k, v, block_size=64, causal=False):
    c, qs, m, l, acc, qpos, n_k = _setup(q, k, v)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        s = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            kpos = torch.arange(s1 - s0)[None, :]
            s = s.masked_fill(kpos > qpos, -math.inf)
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, s0:s1].to(c)
        m = new_m
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def osa_last_block_skipped(q, k, v, block_size=64, causal=False):
    c, qs, m, l, acc, qpos, n_k = _setup(q, k, v)
    for s0 in range(0, n_k - block_size + 1, block_size):
        s1 = s0 + block_size
        s = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, s0:s1].to(c)
        m = new_m
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def osa_diagonal_masked(q, k, v, block_size=64, causal=False):
    c, qs, m, l, acc, qpos, n_k = _setup(q, k, v)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        s = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] >= qpos, -math.inf)
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[:, :, s0:s1].to(c)
        m = new_m
    return (acc / torch.where(l == 0, torch.ones_like(l), l)).to(q.dtype)


def osa_block_normalised(q, k, v, block_size=64, causal=False):
    c, qs, m, l, acc, qpos, n_k = _setup(q, k, v)
    for s0 in range(0, n_k, block_size):
        s1 = min(s0 + block_size, n_k)
        s = qs @ k[:, :, s0:s1].to(c).transpose(-2, -1)
        if causal:
            s = s.masked_fill(torch.arange(s0, s1)[None, :] > qpos, -math.inf)
        bm = s.amax(-1, keepdim=True)
        bm = torch.where(torch.isinf(bm), torch.zeros_like(bm), bm)
        p = torch.exp(s - bm)
        tot = p.sum(-1, keepdim=True)
        acc = acc + (p / torch.where(tot == 0, torch.ones_like(tot), tot)) @ v[:, :, s0:s1].to(c)
    return acc.to(q.dtype)


# ------------------------------------------------------------------ online_softmax_attention: right
def osa_lse_merge(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q64 = q.double() / math.sqrt(d)
    out = torch.zeros(b, h, n_q, d, dtype=torch.float64)
    lse = torch.full((b, h, n_q), -math.inf, dtype=torch.float64)
    qpos = torch.arange(n_q).unsqueeze(1) + n_k - n_q
    for s0 in range(0, n_k, block_size):
        s1 = min(n_k, s0 + block_size)
        s = q64 @ k[:, :, s0:s1].double().transpose(-1, -2)
        if causal:
            s = torch.where(torch.arange(s0, s1).unsqueeze(0) <= qpos, s,
                            torch.tensor(-math.inf, dtype=torch.float64))
        blk_lse = torch.logsumexp(s, dim=-1)
        p = torch.nan_to_num(torch.exp(s - blk_lse.unsqueeze(-1)), nan=0.0)
        blk_out = p @ v[:, :, s0:s1].double()
        new_lse = torch.logaddexp(lse, blk_lse)
        w_old = torch.nan_to_num(torch.exp(lse - new_lse), nan=0.0).unsqueeze(-1)
        w_blk = torch.nan_to_num(torch.exp(blk_lse - new_lse), nan=0.0).unsqueeze(-1)
        out = w_old * out + w_blk * blk_out
        lse = new_lse
    return out.to(q.dtype)


def osa_query_and_key_tiles(q, k, v, block_size=64, causal=False):
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    out = torch.empty(b, h, n_q, d, dtype=q.dtype)
    scale = d ** -0.5
    for i0 in range(0, n_q, block_size):
        i1 = min(i0 + block_size, n_q)
        qt = q[:, :, i0:i1].double() * scale
        run_max = torch.full((b, h, i1 - i0, 1), float("-inf"), dtype=torch.float64)
        run_sum = torch.zeros((b, h, i1 - i0, 1), dtype=torch.float64)
        acc = torch.zeros((b, h, i1 - i0, d), dtype=torch.float64)
        qpos = torch.arange(i0, i1)[:, None] + (n_k - n_q)
        for j0 in range(0, n_k, block_size):
            j1 = min(j0 + block_size, n_k)
            s = qt @ k[:, :, j0:j1].double().transpose(-2, -1)
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > qpos, float("-inf"))
            m_new = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
            safe = m_new.clone()
            safe[torch.isinf(safe)] = 0.0
            e = torch.exp(s - safe)
            corr = torch.exp(run_max - safe)
            run_sum = corr * run_sum + e.sum(dim=-1, keepdim=True)
            acc = corr * acc + e @ v[:, :, j0:j1].double()
            run_max = m_new
        run_sum[run_sum == 0] = 1.0
        out[:, :, i0:i1] = (acc / run_sum).to(q.dtype)
    return out


ENTRIES = [
    Entry("merge_attention_states", "wrong", "log-of-exp-sum",
          "Computes the combined lse as log(exp(lse_a) + exp(lse_b)) without shifting, which "
          "overflows (or underflows) for lse near +-1e4.", mas_naive_logexp),
    Entry("merge_attention_states", "wrong", "weights-not-normalised",
          "Weights each output by exp(lse - max) but never divides by the sum of the two "
          "weights.", mas_unnormalised),
    Entry("merge_attention_states", "wrong", "max-as-lse",
          "Returns the larger of the two lse values as the combined lse instead of their "
          "log-sum-exp.", mas_max_lse),
    Entry("merge_attention_states", "wrong", "plain-average",
          "Averages the two outputs instead of weighting each by its share of the softmax "
          "mass.", mas_average),
    Entry("merge_attention_states", "wrong", "no-both-empty-guard",
          "Subtracts the max lse without guarding rows where both sets are empty, so "
          "-inf - (-inf) gives NaN there.", mas_no_empty_guard),
    Entry("merge_attention_states", "wrong", "weights-swapped",
          "Swaps the weights, scaling out_a by B's share of the mass and out_b by A's.",
          mas_swapped_weights),
    Entry("merge_attention_states", "right", "logaddexp-float64", None, mas_logaddexp),
    Entry("merge_attention_states", "right", "stacked-softmax", None, mas_stack_softmax),

    Entry("online_softmax_attention", "wrong", "accumulator-not-rescaled",
          "Rescales the running sum when the max grows but forgets to rescale the output "
          "accumulator.", osa_acc_not_rescaled),
    Entry("online_softmax_attention", "wrong", "max-updated-before-rescale",
          "Overwrites the running max before computing the rescale factor, so the factor is "
          "always exp(0) = 1.", osa_stale_max),
    Entry("online_softmax_attention", "wrong", "block-local-key-positions",
          "Compares the query position with the key's index inside the block instead of its "
          "absolute position when masking.", osa_block_local_positions),
    Entry("online_softmax_attention", "wrong", "ragged-block-skipped",
          "Loops over range(0, N - block_size + 1, block_size), skipping the last partial "
          "block (and every key when the block is larger than N).", osa_last_block_skipped),
    Entry("online_softmax_attention", "wrong", "diagonal-masked",
          "Masks keys with key_pos >= query_pos, so each query cannot see its own key.",
          osa_diagonal_masked),
    Entry("online_softmax_attention", "wrong", "per-block-normalisation",
          "Normalises each block's softmax on its own and adds the block outputs instead of "
          "keeping a running max and sum.", osa_block_normalised),
    Entry("online_softmax_attention", "right", "blockwise-lse-merge", None, osa_lse_merge),
    Entry("online_softmax_attention", "right", "query-and-key-tiles", None,
          osa_query_and_key_tiles),
]
