"""Learner-style answers to lesson 11 (see answers/lesson01.py for the layout).

Written independently of the checker's mistake models (mhalib/checks/lesson11.py).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F


# -- decode_attention_intensity ------------------------------------------------------------------
def intensity_counted(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    traffic = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / traffic


def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return 2 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_per_token(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    """FLOPs and bytes for one cached token of one sequence (the rest cancels)."""
    group = num_heads // num_kv_heads
    flops_per_kv_head = group * (2 * head_dim + 2 * head_dim)
    bytes_per_kv_head = 2 * head_dim * bytes_per_element
    return float(flops_per_kv_head) / bytes_per_kv_head


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def intensity_query_heads(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element)


def intensity_bits(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    bits = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element * 8
    return 4 * batch_size * num_heads * seq_len * head_dim / bits


def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    scores = 2 * batch_size * num_heads * seq_len * head_dim
    return scores / (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def intensity_bf16_always(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return 4 * num_heads * head_dim / (2 * num_kv_heads * head_dim * 2)


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops // (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


# -- paged_attention -----------------------------------------------------------------------------
def _gather(k_pages, v_pages, row, n, page_size, *, sort=False, swap=False, length=None):
    """Keys and values (G, m, d) of one sequence, with switches for the slips."""
    m = n if length is None else length
    pages = row[: math.ceil(n / page_size)]
    if sort:
        pages = torch.sort(pages).values
    ks, vs = [], []
    for t in range(m):
        if swap:
            page, slot = row[t % page_size], t // page_size
        else:
            page, slot = pages[t // page_size] if t // page_size < len(pages) else row[
                t // page_size], t % page_size
        ks.append(k_pages[page, :, slot])
        vs.append(v_pages[page, :, slot])
    return torch.stack(ks, dim=1), torch.stack(vs, dim=1)


def _paged_loop(q, k_pages, v_pages, block_table, seq_lens, *, head_map="interleave",
                sort=False, swap=False, extra=0, whole_page=False, scale=None, nan_empty=False):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(batch, heads, d, dtype=torch.float32)
    for b in range(batch):
        n = int(seq_lens[b])
        length = math.ceil(n / page_size) * page_size if whole_page else n + extra
        if n == 0 or length <= 0:
            if nan_empty:
                out[b] = float("nan")
            continue
        k, v = _gather(k_pages, v_pages, block_table[b], n, page_size, sort=sort, swap=swap,
                       length=length)
        for h in range(heads):
            g = h % groups if head_map == "tile" else h // (heads // groups)
            s = (k[g].float() @ q[b, h].float()) * (1 / math.sqrt(d) if scale is None else scale)
            out[b, h] = torch.softmax(s, dim=0) @ v[g].float()
    return out.to(q.dtype)


def paged_loop(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens)


def paged_gather_sdpa(q, k_pages, v_pages, block_table, seq_lens):
    """Gather every table entry's page, then SDPA with a length mask."""
    batch, heads, d = q.shape
    num_pages, groups, page_size, _ = k_pages.shape
    max_pages = block_table.shape[1]
    k = k_pages[block_table.long()]  # (B, max_pages, G, P, d)
    v = v_pages[block_table.long()]
    k = k.permute(0, 2, 1, 3, 4).reshape(batch, groups, max_pages * page_size, d)
    v = v.permute(0, 2, 1, 3, 4).reshape(batch, groups, max_pages * page_size, d)
    k = k.repeat_interleave(heads // groups, dim=1)  # (B, H, T, d)
    v = v.repeat_interleave(heads // groups, dim=1)
    keep = torch.arange(max_pages * page_size)[None, :] < seq_lens[:, None]  # (B, T)
    out = F.scaled_dot_product_attention(q[:, :, None].float(), k.float(), v.float(),
                                         attn_mask=keep[:, None, None, :])[:, :, 0]
    return torch.where((seq_lens > 0)[:, None, None], out, 0.0).to(q.dtype)


def paged_einsum_masked(q, k_pages, v_pages, block_table, seq_lens):
    """Positions -> (page, slot) with index arithmetic, einsum, -inf mask, guarded softmax."""
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    longest = int(seq_lens.max())
    if longest == 0:
        return torch.zeros_like(q)
    t = torch.arange(longest)
    pages = block_table[:, t // page_size].long()  # (B, T)
    slots = (t % page_size).expand(batch, -1)  # (B, T)
    k = k_pages[pages, :, slots].double()  # (B, T, G, d)
    v = v_pages[pages, :, slots].double()
    q_g = q.double().reshape(batch, groups, heads // groups, d)
    scores = torch.einsum("bgrd,btgd->bgrt", q_g, k) / math.sqrt(d)
    valid = (t[None, :] < seq_lens[:, None])[:, None, None, :]
    scores = scores.masked_fill(~valid, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    out = torch.einsum("bgrt,btgd->bgrd", weights, v).reshape(batch, heads, d)
    return out.to(q.dtype)


def paged_tiled_heads(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, head_map="tile")


def paged_sorted_pages(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, sort=True)


def paged_swapped_page_slot(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, swap=True)


def paged_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, whole_page=True)


def paged_one_short(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, extra=-1)


def paged_one_long(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, extra=1)


def paged_unscaled(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, scale=1.0)


def paged_nan_for_empty(q, k_pages, v_pages, block_table, seq_lens):
    """Masked softmax over all slots without a guard: an empty row is NaN."""
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    t = torch.arange(block_table.shape[1] * page_size)
    pages = block_table[:, t // page_size].long()
    k = k_pages[pages, :, (t % page_size).expand(batch, -1)].float()  # (B, T, G, d)
    v = v_pages[pages, :, (t % page_size).expand(batch, -1)].float()
    k = k.repeat_interleave(heads // groups, dim=2)  # (B, T, H, d)
    v = v.repeat_interleave(heads // groups, dim=2)
    scores = torch.einsum("bhd,bthd->bht", q.float(), k) / math.sqrt(d)
    scores = scores.masked_fill(~(t[None, None, :] < seq_lens[:, None, None]), float("-inf"))
    return torch.einsum("bht,bthd->bhd", torch.softmax(scores, -1), v).to(q.dtype)


# -- chunked_prefill -----------------------------------------------------------------------------
def _heads(t, num_heads):
    b, n, width = t.shape
    return t.reshape(b, n, num_heads, width // num_heads).transpose(1, 2)


def _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, mask="right", skip_tail=False,
             scale=None, project=True, own_only=False, append_after=False):
    """A learner's chunk loop with a growing K/V cache (torch.cat), with switches
    (``append_after``: the chunk's keys and values are added to the cache after it attends)."""
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    dtype = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, num_heads, 0, d_head, dtype=dtype)
    v_cache = torch.zeros(b, num_heads, 0, d_head, dtype=dtype)
    outs = []
    end = n - n % chunk_size if skip_tail else n
    for start in range(0, end, chunk_size):
        xc = x[:, start:start + chunk_size]
        c = xc.shape[1]
        q = _heads(xc @ w_q, num_heads).to(dtype)
        k_new = _heads(xc @ w_k, num_heads).to(dtype)
        v_new = _heads(xc @ w_v, num_heads).to(dtype)
        if not append_after:
            k_cache = torch.cat([k_cache, k_new], dim=2)
            v_cache = torch.cat([v_cache, v_new], dim=2)
        k, v = (k_new, v_new) if own_only else (k_cache, v_cache)
        t = k.shape[2]
        s = q @ k.transpose(-1, -2) * (1 / math.sqrt(d_head) if scale is None else scale)
        if mask == "right":
            allowed = torch.ones(c, t, dtype=torch.bool).tril(t - c)
        elif mask == "top_left":
            allowed = torch.ones(c, t, dtype=torch.bool).tril()
        elif mask == "strict":
            allowed = torch.ones(c, t, dtype=torch.bool).tril(t - c - 1)
        else:
            allowed = torch.ones(c, t, dtype=torch.bool)
        s = s.masked_fill(~allowed, float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
        outs.append((p @ v).transpose(1, 2).reshape(b, c, d_model))
        if append_after:
            k_cache = torch.cat([k_cache, k_new], dim=2)
            v_cache = torch.cat([v_cache, v_new], dim=2)
    merged = torch.cat(outs, dim=1).to(x.dtype)
    return merged @ w_o if project else merged


def prefill_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size)


def prefill_sdpa_with_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Projections up front; per chunk SDPA with a (C, stop) bottom-right bool mask."""
    b, n, d_model = x.shape
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        allowed = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]
        outs.append(F.scaled_dot_product_attention(q[:, :, start:stop], k[:, :, :stop],
                                                   v[:, :, :stop], attn_mask=allowed))
    ctx = torch.cat(outs, dim=2)
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def prefill_einsum_preallocated(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """A preallocated cache and output, einsum scores, float64 arithmetic."""
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    xd = x.double()
    cache_k = torch.empty(b, n, num_heads, d_head, dtype=torch.float64)
    cache_v = torch.empty(b, n, num_heads, d_head, dtype=torch.float64)
    out = torch.empty(b, n, num_heads, d_head, dtype=torch.float64)
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        xc = xd[:, start:stop]
        cache_k[:, start:stop] = (xc @ w_k.double()).reshape(b, -1, num_heads, d_head)
        cache_v[:, start:stop] = (xc @ w_v.double()).reshape(b, -1, num_heads, d_head)
        q = (xc @ w_q.double()).reshape(b, -1, num_heads, d_head)
        s = torch.einsum("bqhd,bkhd->bhqk", q, cache_k[:, :stop]) / math.sqrt(d_head)
        pos_q = torch.arange(start, stop)[:, None]
        s = s.masked_fill(torch.arange(stop)[None, :] > pos_q, float("-inf"))
        out[:, start:stop] = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1),
                                          cache_v[:, :stop])
    return (out.reshape(b, n, d_model) @ w_o.double()).to(x.dtype)


def prefill_full_scores_torch(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Chunks in name only: the whole N x N score matrix is built, then sliced per chunk."""
    b, n, d_model = x.shape
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_model // num_heads)  # (B, H, N, N)
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    outs = [torch.softmax(scores[:, :, s:s + chunk_size], -1) @ v
            for s in range(0, n, chunk_size)]
    return torch.cat(outs, dim=2).transpose(1, 2).reshape(b, n, d_model) @ w_o


def prefill_full_mask_per_head(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Chunked loop over heads, but each head's full (N, N) score matrix is built first."""
    b, n, d_model = x.shape
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = torch.zeros_like(q)
    for h in range(num_heads):
        for i in range(b):
            s = q[i, h] @ k[i, h].T / math.sqrt(d_model // num_heads)  # (N, N)
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            for start in range(0, n, chunk_size):
                rows = slice(start, start + chunk_size)
                ctx[i, h, rows] = torch.softmax(s[rows], -1) @ v[i, h]
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def prefill_full_scores_numpy(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """The N x N scores built in numpy, where the torch memory watch cannot see them."""
    xs, wq, wk, wv, wo = (t.double().numpy() for t in (x, w_q, w_k, w_v, w_o))
    b, n, d_model = xs.shape
    d_head = d_model // num_heads

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = heads(xs @ wq), heads(xs @ wk), heads(xs @ wv)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    ctx = (w / w.sum(-1, keepdims=True)) @ v
    out = ctx.transpose(0, 2, 1, 3).reshape(b, n, d_model) @ wo
    return torch.from_numpy(out).to(x.dtype)


def prefill_whole_sdpa(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Ignores chunk_size: one fused causal SDPA call over the whole prompt."""
    b, n, d_model = x.shape
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def prefill_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """SDPA's is_causal on a chunk over the whole cache: aligned top-left."""
    b, n, d_model = x.shape
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        outs.append(F.scaled_dot_product_attention(q[:, :, start:stop], k[:, :, :stop],
                                                   v[:, :, :stop], is_causal=True))
    return torch.cat(outs, dim=2).transpose(1, 2).reshape(b, n, d_model) @ w_o


def prefill_own_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, own_only=True)


def prefill_unmasked_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, mask="none")


def prefill_strict_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, mask="strict")


def prefill_appends_after_attending(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Attends over the cache of earlier chunks (no mask needed there, it thinks), then
    appends the chunk's keys and values: a chunk never sees its own tokens."""
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, mask="none",
                    append_after=True)


def prefill_appends_after_with_chunk_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """The same, with the chunk's bottom-right mask laid over the cache alone."""
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, append_after=True)


def prefill_skips_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Loops over the whole chunks only (range(n // chunk_size)): the output is shorter."""
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, skip_tail=True)


def prefill_unscaled(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, scale=1.0)


def prefill_no_w_o(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, project=False)


def prefill_skips_tail_zero_rows(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """A preallocated output whose last partial chunk is never written."""
    b, n, d_model = x.shape
    full = _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, skip_tail=True,
                    project=False)
    out = torch.zeros(b, n, d_model, dtype=x.dtype)
    out[:, :full.shape[1]] = full
    return out @ w_o


def prefill_heads_reshaped(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Heads split per chunk by reshape(b, H, c, d_head) and merged by reshape: no transpose."""
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    keys, values, rows = [], [], []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size].double()
        c = xc.shape[1]
        q = (xc @ w_q.double()).reshape(b, num_heads, c, d_head)
        keys.append((xc @ w_k.double()).reshape(b, num_heads, c, d_head))
        values.append((xc @ w_v.double()).reshape(b, num_heads, c, d_head))
        k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d_head)
        hidden = torch.ones(c, k.shape[2], dtype=torch.bool).triu(k.shape[2] - c + 1)
        rows.append((torch.softmax(s.masked_fill(hidden, -math.inf), -1) @ v).reshape(b, c, -1))
    return (torch.cat(rows, dim=1) @ w_o.double()).to(x.dtype)


# -- calling the answer key ----------------------------------------------------------------------
def intensity_from_reference(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    from mhalib.reference import decode_attention_intensity

    return decode_attention_intensity(num_heads, num_kv_heads, head_dim, seq_len, batch_size,
                                      bytes_per_element)


def paged_from_reference(q, k_pages, v_pages, block_table, seq_lens):
    from mhalib.reference import paged_attention

    return paged_attention(q, k_pages, v_pages, block_table, seq_lens)


def paged_via_nn_attend(q, k_pages, v_pages, block_table, seq_lens):
    from mhalib.nn.functional import attend

    batch, heads, d = q.shape
    outs = []
    for b in range(batch):
        n = int(seq_lens[b])
        page_size = k_pages.shape[2]
        pages = block_table[b, :math.ceil(n / page_size)].long()
        k = k_pages[pages].transpose(0, 1).reshape(k_pages.shape[1], -1, d)[:, :n]
        v = v_pages[pages].transpose(0, 1).reshape(k_pages.shape[1], -1, d)[:, :n]
        rep = heads // k.shape[0]
        outs.append(attend(q[b][None, :, None], k.repeat_interleave(rep, 0)[None],
                           v.repeat_interleave(rep, 0)[None])[0, :, 0])
    return torch.stack(outs)


def prefill_from_reference(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    from mhalib.reference import chunked_prefill

    return chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size)


def prefill_via_reference_gqa(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    from mhalib.reference import grouped_query_attention

    return grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_heads, causal=True)


WRONG = {
    "decode_attention_intensity": {
        "keys_only": intensity_keys_only,
        "per_query_head": intensity_query_heads,
        "bits_not_bytes": intensity_bits,
        "scores_flops_only": intensity_scores_only,
        "fixed_bytes_per_element": intensity_bf16_always,
        "integer_division": intensity_floor_division,
    },
    "paged_attention": {
        "tiled_groups": paged_tiled_heads,
        "pages_sorted": paged_sorted_pages,
        "page_slot_swapped": paged_swapped_page_slot,
        "reads_whole_last_page": paged_whole_last_page,
        "drops_last_key": paged_one_short,
        "one_key_too_many": paged_one_long,
        "no_scale": paged_unscaled,
        "nan_for_empty_sequence": paged_nan_for_empty,
    },
    "chunked_prefill": {
        "builds_n_by_n": prefill_full_scores_torch,
        "leaves_torch": prefill_full_scores_numpy,
        "not_chunked": prefill_whole_sdpa,
        "top_left_mask": prefill_top_left,
        "chunk_ignores_cache": prefill_own_chunk,
        "no_mask_in_chunk": prefill_unmasked_chunk,
        "causal_excludes_self": prefill_strict_mask,
        "attends_before_append": prefill_appends_after_attending,
        "drops_last_partial_chunk": prefill_skips_tail,
        "no_scale": prefill_unscaled,
        "no_output_projection": prefill_no_w_o,
        "heads_without_transpose": prefill_heads_reshaped,
    },
}

ALSO_WRONG = {
    "chunked_prefill": {
        "builds_n_by_n": prefill_full_mask_per_head,
        "drops_last_partial_chunk": prefill_skips_tail_zero_rows,
        "attends_before_append": prefill_appends_after_with_chunk_mask,
    },
}

RIGHT = {
    "decode_attention_intensity": [intensity_counted, intensity_closed_form, intensity_per_token],
    "paged_attention": [paged_loop, paged_gather_sdpa, paged_einsum_masked],
    "chunked_prefill": [prefill_loop, prefill_sdpa_with_mask, prefill_einsum_preallocated],
}

ANSWER_KEY = {
    "decode_attention_intensity": [intensity_from_reference],
    "paged_attention": [paged_from_reference, paged_via_nn_attend],
    "chunked_prefill": [prefill_from_reference, prefill_via_reference_gqa],
}
