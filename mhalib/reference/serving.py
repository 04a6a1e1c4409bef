"""Lesson 11 answer key: serving-time attention (torch, and one plain-Python count).

- :func:`decode_attention_intensity`: FLOPs per byte of one decode step's attention, the number
  that places decoding on a roofline.
- :func:`paged_attention`: one decode step over a KV cache stored in fixed-size pages of a shared
  pool, found through a block table (the layout of vLLM's PagedAttention).
- :func:`chunked_prefill`: causal self-attention over a prompt computed a chunk of queries at a
  time against a growing K/V cache, so that no N x N score tensor ever exists.

Written out step by step (no SDPA) so each line can be read against the lesson; scores and
softmax run in float32 for half-precision inputs and results come back in the input's dtype.
"""

from __future__ import annotations

import math

import torch

from mhalib import validate
from mhalib.nn.masks import causal_mask
from mhalib.reference.gqa import _split


def decode_attention_intensity(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2) -> float:
    """Arithmetic intensity (FLOPs per byte) of one decode step's attention.

    FLOPs: each of the ``batch_size * num_heads`` new queries takes ``seq_len`` dot products of
    length ``head_dim`` (the scores) and sums ``seq_len`` value vectors (the weighted sum), one
    multiply-add = 2 FLOPs each: ``4 * B * H * N * d``. Bytes: the cached keys and values,
    ``2 * B * G * N * d * bytes_per_element``, read once. The ratio is ``2 H / (G * bytes)``:
    it does not depend on N, B or d, only on how many query heads share one K/V head.
    """
    heads = validate.positive_int("num_heads", num_heads)
    kv_heads = validate.positive_int("num_kv_heads", num_kv_heads)
    validate.divisible("num_heads", heads, "num_kv_heads", kv_heads)
    dim = validate.positive_int("head_dim", head_dim)
    n = validate.positive_int("seq_len", seq_len)
    batch = validate.positive_int("batch_size", batch_size)
    size = validate.positive_int("bytes_per_element", bytes_per_element)
    flops = 2 * batch * heads * n * dim + 2 * batch * heads * n * dim  # scores + weighted sum
    bytes_read = 2 * batch * kv_heads * n * dim * size  # K and V of every cached token
    return flops / bytes_read


def paged_attention(q, k_pages, v_pages, block_table, seq_lens):
    """One decode step over a paged KV cache.

    q: (B, H, d), one query per sequence and head. k_pages, v_pages: (num_pages, G, page_size,
    d), a pool shared by all sequences. block_table: (B, max_pages) ints, row b listing the
    pages of sequence b in order (entries past its length are ignored). seq_lens: (B,) ints.
    Key t of sequence b is at ``k_pages[block_table[b, t // page_size], :, t % page_size]``;
    query head h reads K/V head ``h // (H // G)``. Returns (B, H, d); a sequence of length 0
    gives zeros.
    """
    _check_paged_args(q, k_pages, v_pages, block_table, seq_lens)
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    n_rep = heads // groups
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute, device=q.device)  # (B, H, d)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / page_size)].long()  # (p,) in table order
        # (p, G, P, d) -> (G, p, P, d) -> (G, p * P, d): the sequence's keys in order
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)  # (G, n, d)
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)  # (G, n, d)
        k = k.repeat_interleave(n_rep, dim=0)  # (H, n, d): head h reads group h // n_rep
        v = v.repeat_interleave(n_rep, dim=0)  # (H, n, d)
        q_b = q[b].to(compute)[:, None, :]  # (H, 1, d)
        scores = q_b @ k.transpose(-2, -1) / math.sqrt(d)  # (H, 1, n)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]  # (H, d)
    return out.to(q.dtype)


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Causal multi-head self-attention computed ``chunk_size`` queries at a time.

    x: (B, N, d_model); weights (d_model, d_model), applied as ``x @ W``. Chunk c holds
    queries ``start .. stop - 1``; its keys and values are appended to a cache, and it attends
    to the ``stop`` cached keys with lesson 04's bottom-right causal mask ``(stop - start,
    stop)``. The largest score tensor is (B, H, chunk_size, N). Returns (B, N, d_model).
    """
    validate.tensor("x", x, 3, "(B, N, d_model)")
    batch, n, d_model = x.shape
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        validate.tensor(name, w, 2, "(d_model, d_model)")
        validate.shape_equals(name, w, (d_model, d_model), "(d_model, d_model)")
    validate.same_dtype_and_device(x=x, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o)
    heads = validate.positive_int("num_heads", num_heads)
    validate.divisible("d_model", d_model, "num_heads", heads)
    chunk = validate.positive_int("chunk_size", chunk_size)
    d_head = d_model // heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((batch, heads, n, d_head), dtype=compute, device=x.device)
    v_cache = torch.empty((batch, heads, n, d_head), dtype=compute, device=x.device)
    outputs = []
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)  # the last chunk may be shorter
        x_c = x[:, start:stop]  # (B, C, d_model)
        q = _split(x_c @ w_q, heads).to(compute)  # (B, H, C, d_head)
        k_cache[:, :, start:stop] = _split(x_c @ w_k, heads).to(compute)  # (B, H, C, d_head)
        v_cache[:, :, start:stop] = _split(x_c @ w_v, heads).to(compute)
        k, v = k_cache[:, :, :stop], v_cache[:, :, :stop]  # (B, H, stop, d_head): views
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (B, H, C, stop)
        allowed = causal_mask(stop - start, stop, device=x.device)  # (C, stop), bottom-right
        scores = scores.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v  # (B, H, C, d_head)
        outputs.append(ctx.transpose(1, 2).reshape(batch, stop - start, d_model))  # (B, C, d)
    merged = torch.cat(outputs, dim=1).to(x.dtype)  # (B, N, d_model)
    return merged @ w_o  # (B, N, d_model)


def _check_paged_args(q, k_pages, v_pages, block_table, seq_lens) -> None:
    validate.tensor("q", q, 3, "(B, H, d)")
    validate.tensor("k_pages", k_pages, 4, "(num_pages, G, page_size, d)")
    validate.tensor("v_pages", v_pages, 4, "(num_pages, G, page_size, d)")
    validate.same_dtype_and_device(q=q, k_pages=k_pages, v_pages=v_pages)
    validate.shape_equals("v_pages", v_pages, tuple(k_pages.shape),
                          "(num_pages, G, page_size, d) matching k_pages")
    batch, heads, d = q.shape
    if k_pages.shape[-1] != d:
        raise ValueError(f"k_pages.shape[-1]={k_pages.shape[-1]} must equal q's head dim {d}")
    validate.divisible("num_heads", heads, "num_kv_heads", k_pages.shape[1])
    for name, t, ndim in (("block_table", block_table, 2), ("seq_lens", seq_lens, 1)):
        if not torch.is_tensor(t) or t.dim() != ndim or t.is_floating_point():
            raise TypeError(f"{name} must be a {ndim}-D integer tensor, got {t!r:.80}")
    if block_table.shape[0] != batch or seq_lens.shape[0] != batch:
        raise ValueError(f"block_table rows ({block_table.shape[0]}) and seq_lens "
                         f"({seq_lens.shape[0]}) must equal the batch size {batch}")
    capacity = block_table.shape[1] * k_pages.shape[2]
    if bool((seq_lens < 0).any()) or bool((seq_lens > capacity).any()):
        raise ValueError(f"seq_lens must lie in [0, max_pages * page_size = {capacity}], "
                         f"got {seq_lens.tolist()}")
