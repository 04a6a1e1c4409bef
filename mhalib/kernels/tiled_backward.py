"""The backward pass of tiled attention in plain PyTorch: FlashAttention-2's algorithm on a CPU.

Given what a FlashAttention forward keeps (``out`` and the natural log-sum-exp ``lse`` of every
query row), the gradients are computed tile by tile: an outer loop over blocks of keys and an
inner loop over blocks of queries. Each tile's probabilities are recomputed exactly as
``exp(s - lse)`` (no running max: the forward already normalised), ``delta = rowsum(grad_out *
out)`` gives the softmax gradient's row term, a key block's ``grad_k`` and ``grad_v`` are summed
over the query blocks while it is being visited, and ``grad_q`` accumulates over the key blocks.
Five products per tile; tiles entirely in a query's future are skipped when causal. One score
buffer of a fixed budget is reused for every tile, so the extra memory is the three gradients
plus a few tiles, whatever N is. K/V groups (GQA, MQA) are read without copies: the query heads
that share a K/V head are stacked along the rows of each tile, as in
:func:`mhalib.kernels.tiled.tiled_attention`.
"""

from __future__ import annotations

import math

import torch

from mhalib import validate
from mhalib.kernels.tiled import _mask_future, check_qkv

TILE_BYTES = 4 * 2**20  # budget for one tile of float32 scores


def tiled_attention_backward(q, k, v, out, lse, grad_out, causal: bool = False,
                             scale: float | None = None, block_q: int | None = None,
                             block_k: int | None = None):
    """Gradients of attention from the forward's ``out`` and ``lse``.

    q, out, grad_out: (B, H, N_q, d); k, v: (B, G, N_k, d) with H a multiple of G; lse:
    (B, H, N_q), natural log, -inf for a row with no visible key. ``causal`` aligns
    bottom-right (query i sees keys j <= i + N_k - N_q). ``scale`` defaults to 1/sqrt(d).
    Returns (grad_q (B, H, N_q, d), grad_k (B, G, N_k, d), grad_v (B, G, N_k, d)) in q's dtype,
    computed in float32 or wider.
    """
    batch, heads, n_q, d, groups, n_k = check_qkv(q, k, v)
    _check_kept(out, lse, grad_out, q)
    validate.boolean("causal", causal)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    rep = heads // groups
    block_q, block_k = _block_sizes(batch * groups * rep, n_q, n_k, block_q, block_k)
    compute = torch.promote_types(q.dtype, torch.float32)
    bg = batch * groups
    # (BG, R, N_q, d) views: the R query heads of a K/V group side by side
    q4 = q.reshape(bg, rep, n_q, d)
    g4 = grad_out.reshape(bg, rep, n_q, d)
    lse4 = lse.reshape(bg, rep, n_q)
    delta4 = (grad_out.to(compute) * out.to(compute)).sum(-1).reshape(bg, rep, n_q)  # row term
    k3, v3 = k.reshape(bg, n_k, d), v.reshape(bg, n_k, d)  # (BG, N_k, d)
    grad_q = torch.zeros((bg, rep, n_q, d), dtype=compute, device=q.device)
    grad_k = torch.zeros((bg, n_k, d), dtype=compute, device=q.device)
    grad_v = torch.zeros((bg, n_k, d), dtype=compute, device=q.device)
    buffer = torch.empty(2 * bg * rep * block_q * block_k, dtype=compute, device=q.device)
    offset = n_k - n_q  # query i sits at absolute position i + offset

    for k_start in range(0, n_k, block_k):
        k_stop = min(k_start + block_k, n_k)
        bk = k_stop - k_start
        k_blk = k3[:, k_start:k_stop].to(compute)  # (BG, bk, d)
        v_blk = v3[:, k_start:k_stop].to(compute)  # (BG, bk, d)
        # the first query that sees this block's first key: earlier query blocks are skipped
        first_q = max(0, k_start - offset) if causal else 0
        for q_start in range(first_q - first_q % block_q, n_q, block_q):
            q_stop = min(q_start + block_q, n_q)
            bq = q_stop - q_start
            rows = rep * bq
            q_blk = (q4[:, :, q_start:q_stop].to(compute) * scale).reshape(bg, rows, d)
            g_blk = g4[:, :, q_start:q_stop].to(compute).reshape(bg, rows, d)
            lse_blk = lse4[:, :, q_start:q_stop].to(compute).reshape(bg, rows, 1)
            lse_blk = lse_blk.masked_fill(torch.isneginf(lse_blk), math.inf)  # no key: p = 0
            delta_blk = delta4[:, :, q_start:q_stop].reshape(bg, rows, 1)
            p = buffer[: bg * rows * bk].view(bg, rows, bk)
            torch.bmm(q_blk, k_blk.transpose(1, 2), out=p)  # the recomputed scores
            if causal and k_stop - 1 > q_start + offset:  # the tile crosses the diagonal
                _mask_future(p.view(bg, rep, bq, bk), q_start, k_start, offset)
            p.sub_(lse_blk).exp_()  # exact probabilities of the tile
            grad_v[:, k_start:k_stop].baddbmm_(p.transpose(1, 2), g_blk)  # += p^T grad_out
            grad_s = buffer[bg * rows * bk: 2 * bg * rows * bk].view(bg, rows, bk)
            torch.bmm(g_blk, v_blk.transpose(1, 2), out=grad_s)  # grad_p
            grad_s.sub_(delta_blk).mul_(p)  # p * (grad_p - delta)
            grad_k[:, k_start:k_stop].baddbmm_(grad_s.transpose(1, 2), q_blk)  # scale in q
            grad_q[:, :, q_start:q_stop] += (grad_s @ k_blk).view(bg, rep, bq, d)
    grad_q.mul_(scale)
    return (grad_q.reshape(q.shape).to(q.dtype), grad_k.reshape(k.shape).to(k.dtype),
            grad_v.reshape(v.shape).to(v.dtype))


def _block_sizes(rows_per_query: int, n_q: int, n_k: int, block_q, block_k) -> tuple[int, int]:
    """Tile sizes: as given, else 128 keys and up to 256 queries, fewer where one float32 tile
    of all (batch, head) rows would pass ``TILE_BYTES`` (smaller query blocks also let a causal
    pass skip more tiles)."""
    block_k = validate.positive_int("block_k", block_k) if block_k is not None else min(n_k, 128)
    if block_q is None:
        block_q = max(16, min(256, TILE_BYTES // (4 * rows_per_query * block_k)))
    return min(validate.positive_int("block_q", block_q), n_q), min(block_k, n_k)


def _check_kept(out, lse, grad_out, q) -> None:
    validate.tensor("out", out, 4, "(B, H, N_q, d)")
    validate.tensor("grad_out", grad_out, 4, "(B, H, N_q, d)")
    validate.tensor("lse", lse, 3, "(B, H, N_q)")
    validate.same_dtype_and_device(q=q, out=out, grad_out=grad_out)
    validate.shape_equals("out", out, tuple(q.shape), "(B, H, N_q, d) like q")
    validate.shape_equals("grad_out", grad_out, tuple(q.shape), "(B, H, N_q, d) like q")
    validate.shape_equals("lse", lse, tuple(q.shape[:-1]), "(B, H, N_q)")
