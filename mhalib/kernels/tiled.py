"""Tiled attention with an online softmax in plain PyTorch: the CPU (and fallback) path.

Same algorithm as the Triton kernel and as the lesson 07 answer key, tuned for speed and
memory on a CPU: queries and keys are both cut into blocks, the block size is chosen so
that one block of scores stays within a fixed budget (4 MiB by default), elementwise work
happens in place, and K/V groups are broadcast instead of copied for GQA/MQA. The extra
memory is the output plus a few blocks, whatever N is.
"""

from __future__ import annotations

import math

import torch

from mhalib import validate

SCORE_BLOCK_BYTES = 4 * 2**20  # budget for one block of float32 scores


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_q: int | None = None,
    block_k: int | None = None,
) -> torch.Tensor:
    """Exact attention without an (N_q, N_k) tensor.

    q: (B, H, N_q, d); k, v: (B, G, N_k, d) with H a multiple of G. ``causal`` is aligned
    bottom-right (query i sees keys j <= i + N_k - N_q); rows with no visible key are 0.
    ``scale`` defaults to 1/sqrt(d). Returns (B, H, N_q, d) in q's dtype.
    """
    batch, heads, n_q, d, groups, n_k = check_qkv(q, k, v)
    validate.boolean("causal", causal)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    block_q, block_k = _block_sizes(batch * heads, n_q, n_k, block_q, block_k)
    rep = heads // groups
    compute = torch.promote_types(q.dtype, torch.float32)
    # Fold batch and K/V group into one batch axis of bmm; the R = H // G query heads that
    # share a K/V head are stacked along the rows, so K/V are never copied per query head.
    q4 = q.reshape(batch * groups, rep, n_q, d)  # (BG, R, N_q, d), a view when possible
    k3 = k.reshape(batch * groups, n_k, d)  # (BG, N_k, d)
    v3 = v.reshape(batch * groups, n_k, d)  # (BG, N_k, d)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # (B, H, N_q, d), contiguous
    out4 = out.view(batch * groups, rep, n_q, d)  # (BG, R, N_q, d)
    # one buffer reused for every block of scores: no allocator churn, a fixed footprint
    buffer = torch.empty(heads * batch * block_q * block_k, dtype=compute, device=q.device)
    offset = n_k - n_q  # query i sits at absolute position i + offset

    for q_start in range(0, n_q, block_q):
        q_stop = min(q_start + block_q, n_q)
        bq = q_stop - q_start
        q_blk = q4[:, :, q_start:q_stop].to(compute) * scale  # (BG, R, bq, d)
        q_blk = q_blk.view(-1, rep * bq, d)  # (BG, R bq, d)
        row_max = q_blk.new_full((q_blk.shape[0], rep * bq, 1), -math.inf)  # (BG, R bq, 1)
        row_sum = torch.zeros_like(row_max)  # (BG, R bq, 1)
        acc = torch.zeros_like(q_blk)  # (BG, R bq, d)
        # keys visible to the last query of the block (causal) or all keys
        k_end = min(n_k, q_stop + offset) if causal else n_k
        for k_start in range(0, max(k_end, 0), block_k):
            k_stop = min(k_start + block_k, k_end)
            k_blk = k3[:, k_start:k_stop].to(compute)  # (BG, bk, d)
            v_blk = v3[:, k_start:k_stop].to(compute)  # (BG, bk, d)
            scores = buffer[: q_blk.shape[0] * rep * bq * (k_stop - k_start)].view(
                q_blk.shape[0], rep * bq, k_stop - k_start
            )  # (BG, R bq, bk)
            torch.bmm(q_blk, k_blk.transpose(1, 2), out=scores)
            if causal and k_stop - 1 > q_start + offset:  # block crosses the diagonal
                _mask_future(scores.view(-1, rep, bq, k_stop - k_start), q_start, k_start, offset)
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))  # (BG, R bq, 1)
            shift = new_max.nan_to_num(neginf=0.0)  # rows with no visible key yet: 0, no NaN
            scores.sub_(shift).exp_()  # unnormalised weights, in place
            rescale = (row_max - shift).exp_()  # (BG, R bq, 1)
            row_sum.mul_(rescale).add_(scores.sum(dim=-1, keepdim=True))
            acc.mul_(rescale).baddbmm_(scores, v_blk)  # acc += weights @ v, in place
            row_max = new_max
        row_sum.masked_fill_(row_sum == 0, 1.0)  # rows that saw no key: 0 / 1 = 0
        out4[:, :, q_start:q_stop] = acc.div_(row_sum).view(-1, rep, bq, d)  # (BG, R, bq, d)
    return out


def check_qkv(q, k, v):
    """Validate (B, H, N_q, d), (B, G, N_k, d) x2; return (B, H, N_q, d, G, N_k)."""
    validate.tensor("q", q, 4, "(B, H, N_q, d)")
    validate.tensor("k", k, 4, "(B, G, N_k, d)")
    validate.tensor("v", v, 4, "(B, G, N_k, d)")
    validate.same_dtype_and_device(q=q, k=k, v=v)
    batch, heads, n_q, d = q.shape
    groups, n_k = k.shape[1], k.shape[2]
    layout = "(B, G, N_k, d) with q's B and d"
    validate.shape_equals("k", k, (batch, groups, n_k, d), layout)
    validate.shape_equals("v", v, (batch, groups, n_k, d), layout)
    validate.divisible("num_heads", heads, "num_kv_heads", groups)
    return batch, heads, n_q, d, groups, n_k


def _mask_future(scores, q_start, k_start, offset) -> None:
    """Set scores (BG, R, bq, bk) of keys after each query's position to -inf, in place."""
    bq, bk = scores.shape[-2:]
    query_pos = torch.arange(q_start, q_start + bq, device=scores.device)[:, None] + offset
    key_pos = torch.arange(k_start, k_start + bk, device=scores.device)[None, :]  # (1, bk)
    scores.masked_fill_(key_pos > query_pos, -math.inf)  # (bq, bk) broadcast over BG, R


def _block_sizes(batch_heads: int, n_q: int, n_k: int, block_q, block_k) -> tuple[int, int]:
    """Blocks so that batch_heads * block_q * block_k float32 scores fit the budget."""
    if block_k is None:
        block_k = min(n_k, 512)
    block_k = validate.positive_int("block_k", block_k)
    if block_q is None:
        fit = SCORE_BLOCK_BYTES // (4 * batch_heads * block_k)
        block_q = max(16, min(1024, fit))
    block_q = validate.positive_int("block_q", block_q)
    return min(block_q, n_q), block_k
