"""Lesson 07 answer key: merging two partial attention states, and exact attention with an
online softmax over key blocks (torch).

``merge_attention_states`` is the step that split-key attention ends with (flash-decoding
reduces the partial results of its key splits this way): the same queries attended over two
disjoint key sets give two normalised outputs and two log-sum-exps, and those four tensors are
all it takes to get attention over both sets exactly.

The scores of a query row are never all in memory at once. Keys are visited one block at
a time; for each query row we keep

- ``row_max``: the largest score seen so far (for a stable exponent),
- ``row_sum``: the sum of exp(score - row_max) seen so far,
- ``acc``:     the sum of exp(score - row_max) * v seen so far.

When a block raises the maximum, the old sum and accumulator are rescaled by
exp(old_max - new_max). At the end ``acc / row_sum`` is exactly softmax(scores) @ v. The
largest temporary is (B, H, N_q, block_size), never (N_q, N_k).
"""

from __future__ import annotations

import math

import torch

from mhalib import validate


def merge_attention_states(out_a, lse_a, out_b, lse_b):
    """Attention over the keys of A and B together, from each set's own result.

    out_a, out_b: (..., N_q, d_v) normalised outputs of the same queries over two disjoint key
    sets; lse_a, lse_b: (..., N_q) the log-sum-exp of each set's scaled scores (-inf where a
    set has no allowed key, and then its out rows are zeros). Returns ``(out, lse)``:
    out = w_a * out_a + w_b * out_b with w = exp(lse_set - lse), lse = log(e^lse_a + e^lse_b).
    Every exponent is <= 0, so no overflow for any finite lse; rows where both sets are empty
    get zeros and -inf, never NaN. Computed in at least float32, returned in the inputs' dtypes.
    """
    _check_states(out_a, lse_a, out_b, lse_b)
    compute = torch.promote_types(out_a.dtype, torch.float32)
    lse_a32, lse_b32 = lse_a.to(compute), lse_b.to(compute)  # (..., N_q)
    top = torch.maximum(lse_a32, lse_b32)  # (..., N_q), -inf only where both sets are empty
    shift = torch.where(torch.isinf(top), 0.0, top)  # both empty: subtract 0, exp(-inf) = 0
    w_a = torch.exp(lse_a32 - shift)  # (..., N_q), the larger of w_a, w_b is exactly 1
    w_b = torch.exp(lse_b32 - shift)  # (..., N_q)
    total = w_a + w_b  # (..., N_q), 0 where both are empty
    lse = shift + torch.log(total)  # (..., N_q), log(0) = -inf where both are empty
    safe = torch.where(total == 0, 1.0, total)  # (..., N_q)
    out = (w_a / safe)[..., None] * out_a.to(compute) + (w_b / safe)[..., None] * out_b.to(
        compute)  # (..., N_q, d_v)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def _check_states(out_a, lse_a, out_b, lse_b) -> None:
    validate.tensor("out_a", out_a, None)
    validate.tensor("lse_a", lse_a, None)
    validate.tensor("out_b", out_b, None)
    validate.tensor("lse_b", lse_b, None)
    validate.same_dtype_and_device(out_a=out_a, out_b=out_b)
    validate.same_dtype_and_device(lse_a=lse_a, lse_b=lse_b)
    if out_a.dim() < 2:
        raise ValueError(f"out_a must be (..., N_q, d_v), got out_a.shape={tuple(out_a.shape)}")
    validate.shape_equals("out_b", out_b, tuple(out_a.shape), "(..., N_q, d_v) matching out_a")
    rows = tuple(out_a.shape[:-1])
    validate.shape_equals("lse_a", lse_a, rows, "(..., N_q): out_a's shape without d_v")
    validate.shape_equals("lse_b", lse_b, rows, "(..., N_q): out_a's shape without d_v")


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """Attention softmax(q k^T / sqrt(d)) v computed block by block over the keys.

    q: (B, H, N_q, d); k, v: (B, H, N_k, d). ``causal`` aligns bottom-right like
    ``causal_mask``: query i may see keys j <= i + N_k - N_q; a query with no visible key
    gets a row of zeros. Returns (B, H, N_q, d) in q's dtype (accumulates in float32).
    """
    _check_args(q, k, v)
    block_size = validate.positive_int("block_size", block_size)
    validate.boolean("causal", causal)
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) * (1.0 / math.sqrt(d))  # (B, H, N_q, d)

    row_max = torch.full((batch, heads, n_q, 1), -math.inf, dtype=compute, device=q.device)
    row_sum = torch.zeros((batch, heads, n_q, 1), dtype=compute, device=q.device)
    acc = torch.zeros((batch, heads, n_q, d), dtype=compute, device=q.device)
    query_pos = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)  # (N_q, 1)

    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk = k[:, :, start:stop].to(compute)  # (B, H, b, d)
        v_blk = v[:, :, start:stop].to(compute)  # (B, H, b, d)
        scores = q_scaled @ k_blk.transpose(-2, -1)  # (B, H, N_q, b)
        if causal:
            key_pos = torch.arange(start, stop, device=q.device)[None, :]  # (1, b)
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)  # (B, H, N_q, b)

        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))  # (B, H, N_q, 1)
        # A row that has seen only masked keys keeps max -inf; shift it by 0 instead so
        # that exp(-inf - 0) = 0 rather than exp(-inf + inf) = NaN.
        shift = torch.where(torch.isinf(new_max), 0.0, new_max)  # (B, H, N_q, 1)
        weights = torch.exp(scores - shift)  # (B, H, N_q, b), unnormalised
        rescale = torch.exp(row_max - shift)  # (B, H, N_q, 1), shrinks the old totals
        row_sum = row_sum * rescale + weights.sum(dim=-1, keepdim=True)  # (B, H, N_q, 1)
        acc = acc * rescale + weights @ v_blk  # (B, H, N_q, d)
        row_max = new_max

    out = acc / torch.where(row_sum == 0, 1.0, row_sum)  # (B, H, N_q, d), empty rows 0
    return out.to(q.dtype)


def _check_args(q, k, v) -> None:
    validate.tensor("q", q, 4, "(B, H, N_q, d)")
    validate.tensor("k", k, 4, "(B, H, N_k, d)")
    validate.tensor("v", v, 4, "(B, H, N_k, d)")
    validate.same_dtype_and_device(q=q, k=k, v=v)
    batch, heads, _, d = q.shape
    expected = (batch, heads, k.shape[2], d)
    validate.shape_equals("k", k, expected, "(B, H, N_k, d) matching q's B, H and d")
    validate.shape_equals("v", v, expected, "(B, H, N_k, d) matching k")
