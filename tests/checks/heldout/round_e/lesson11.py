"""Lesson 11 (torch): decode_attention_intensity, paged_attention, chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------ decode_attention_intensity
def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def dai_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def dai_mha_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def dai_bits(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbits = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element * 8
    return flops / nbits


def dai_fixed_two_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * 2
    return flops / nbytes


def dai_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_query = Fraction(2 * head_dim * seq_len + 2 * head_dim * seq_len)
    queries = batch_size * num_heads
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(per_query * queries / read)


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


# ------------------------------------------------------------------ paged_attention
def _paged(q, k_pages, v_pages, block_table, seq_lens, *, tile=False, swap=False,
           whole_pages=False, floor_pages=False, no_transpose=False, max_len=False):
    b, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    c = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(b, h, d, dtype=c)
    longest = int(seq_lens.max()) if len(seq_lens) else 0
    for i in range(b):
        n = longest if max_len else int(seq_lens[i])
        if n == 0:
            continue
        if swap:
            idx = torch.arange(n)
            pages = block_table[i, (idx % ps).long()].long()
            slots = idx // ps
            k = k_pages[pages, :, slots].transpose(0, 1)  # (G, n, d)
            v = v_pages[pages, :, slots].transpose(0, 1)
        else:
            n_pages = n // ps if floor_pages else math.ceil(n / ps)
            pages = block_table[i, :n_pages].long()
            if no_transpose:
                k = k_pages[pages].reshape(g, -1, d)
                v = v_pages[pages].reshape(g, -1, d)
            else:
                k = k_pages[pages].transpose(0, 1).reshape(g, -1, d)
                v = v_pages[pages].transpose(0, 1).reshape(g, -1, d)
            if not whole_pages:
                k, v = k[:, :n], v[:, :n]
        if k.shape[1] == 0:
            continue
        k, v = k.to(c), v.to(c)
        if tile:
            k, v = k.repeat(rep, 1, 1), v.repeat(rep, 1, 1)
        else:
            k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        s = (q[i].to(c)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[i] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_tiled_heads(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, tile=True)


def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, swap=True)


def paged_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, whole_pages=True)


def paged_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, floor_pages=True)


def paged_reshape_mixes_axes(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, no_transpose=True)


def paged_longest_length(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, max_len=True)


# ------------------------------------------------------------------ paged_attention, right
def paged_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    b, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(b, h, d, dtype=torch.float64)
    for i in range(b):
        n = int(seq_lens[i])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[i, t // ps]), :, t % ps] for t in range(n)], 1)
        vals = torch.stack([v_pages[int(block_table[i, t // ps]), :, t % ps] for t in range(n)], 1)
        for head in range(h):
            grp = head // (h // g)
            s = keys[grp].double() @ q[i, head].double() / math.sqrt(d)
            out[i, head] = torch.softmax(s, 0) @ vals[grp].double()
    return out.to(q.dtype)


def paged_gather_masked_sdpa(q, k_pages, v_pages, block_table, seq_lens):
    b, h, d = q.shape
    _, g, ps, _ = k_pages.shape
    max_pages = block_table.shape[1]
    c = torch.promote_types(q.dtype, torch.float32)
    t = torch.arange(max_pages * ps)
    pages = block_table.long()[:, t // ps]  # (B, T)
    k = k_pages[pages, :, t % ps].to(c)  # (B, T, G, d)
    v = v_pages[pages, :, t % ps].to(c)
    k = k.permute(0, 2, 1, 3).repeat_interleave(h // g, dim=1)  # (B, H, T, d)
    v = v.permute(0, 2, 1, 3).repeat_interleave(h // g, dim=1)
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, None, :]  # (B, 1, 1, T)
    s = (q.to(c)[:, :, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
    s = s.masked_fill(~valid, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    return (w @ v)[:, :, 0].to(q.dtype)


# ------------------------------------------------------------------ chunked_prefill
def _split(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, top_left=False, own_only=False,
             floor_chunks=False, no_mask=False, cache_at_zero=False, unclipped=False):
    b, n, d = x.shape
    dh = d // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    v_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    outs = []
    last = (n // chunk_size) * chunk_size if floor_chunks else n
    for start in range(0, last, chunk_size):
        stop = start + chunk_size if unclipped else min(start + chunk_size, n)
        xc = x[:, start:stop]
        m = xc.shape[1]
        q = _split(xc @ w_q, num_heads).to(c)
        lo = 0 if cache_at_zero else start
        k_cache[:, :, lo:lo + m] = _split(xc @ w_k, num_heads).to(c)
        v_cache[:, :, lo:lo + m] = _split(xc @ w_v, num_heads).to(c)
        first = start if own_only else 0
        k, v = k_cache[:, :, first:start + m], v_cache[:, :, first:start + m]
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        if not no_mask:
            width = k.shape[2]
            rows = stop - start
            offset = 0 if top_left else width - rows
            allowed = torch.ones(rows, width, dtype=torch.bool).tril(offset)
            s = s.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(s, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(b, m, d))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def cp_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, top_left=True)


def cp_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, own_only=True)


def cp_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, floor_chunks=True)


def cp_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, no_mask=True)


def cp_cache_written_at_zero(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, cache_at_zero=True)


def cp_stop_not_clipped(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, unclipped=True)


# ------------------------------------------------------------------ chunked_prefill, right
def cp_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d = x.shape
    dh = d // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        m = xc.shape[1]
        q = _split(xc @ w_q, num_heads).to(c)
        ks.append(_split(xc @ w_k, num_heads).to(c))
        vs.append(_split(xc @ w_v, num_heads).to(c))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        total = k.shape[2]
        qpos = torch.arange(start, start + m)[:, None]
        allowed = torch.arange(total)[None, :] <= qpos  # (m, total), absolute positions
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        outs.append(ctx.transpose(1, 2).reshape(b, m, d).to(x.dtype))
    return torch.cat(outs, 1) @ w_o


def cp_per_head_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d = x.shape
    dh = d // num_heads
    x64 = x.double()
    q_all = x64 @ w_q.double()
    k_all = x64 @ w_k.double()
    v_all = x64 @ w_v.double()
    ctx = torch.zeros(b, n, d, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        for start in range(0, n, chunk_size):
            stop = min(n, start + chunk_size)
            q = q_all[:, start:stop, cols]
            k = k_all[:, :stop, cols]
            v = v_all[:, :stop, cols]
            s = torch.einsum("bqd,bkd->bqk", q, k) / math.sqrt(dh)
            future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
            s = s.masked_fill(future, -math.inf)
            ctx[:, start:stop, cols] = torch.softmax(s, -1) @ v
    return (ctx.to(x.dtype) @ w_o)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "floor_division", "Divides FLOPs by bytes with "
          "//, truncating fractional intensities.", dai_floor_division),
    Entry("decode_attention_intensity", "wrong", "scores_product_only", "Counts only the score "
          "product q k^T, leaving out the weighted sum with V.", dai_scores_only),
    Entry("decode_attention_intensity", "wrong", "reads_keys_only", "Counts the bytes of the "
          "cached keys only, forgetting that the values are read too.", dai_keys_only),
    Entry("decode_attention_intensity", "wrong", "cache_sized_by_query_heads", "Sizes the cache "
          "read with num_heads instead of num_kv_heads, as if every query head had its own K/V.",
          dai_mha_bytes),
    Entry("decode_attention_intensity", "wrong", "divides_by_bits", "Divides by the bits read "
          "(bytes * 8) instead of the bytes.", dai_bits),
    Entry("decode_attention_intensity", "wrong", "hardcodes_two_bytes", "Hard-codes 2 bytes per "
          "element instead of using bytes_per_element.", dai_fixed_two_bytes),
    Entry("decode_attention_intensity", "right", "fraction_then_float", None, dai_fraction),
    Entry("decode_attention_intensity", "right", "closed_form_2h_over_g_bytes", None,
          dai_closed_form),

    Entry("paged_attention", "wrong", "kv_heads_tiled", "Expands the KV heads with "
          ".repeat, so query head h reads KV head h % G instead of h // (H // G).",
          paged_tiled_heads),
    Entry("paged_attention", "wrong", "page_and_slot_swapped", "Looks key t up in page "
          "block_table[b, t % page_size] at slot t // page_size (page and slot swapped).",
          paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "whole_last_page", "Attends over every slot of the last "
          "page instead of trimming to the first seq_lens[b] keys, so stale slots are read.",
          paged_whole_last_page),
    Entry("paged_attention", "wrong", "floor_page_count", "Takes n // page_size pages instead "
          "of ceil(n / page_size), dropping a partly filled last page.", paged_floor_pages),
    Entry("paged_attention", "wrong", "reshape_mixes_pages_and_heads", "Reshapes the gathered "
          "(pages, G, page_size, d) straight to (G, -1, d) without moving the KV-head axis "
          "first, mixing pages and heads.", paged_reshape_mixes_axes),
    Entry("paged_attention", "wrong", "longest_length_for_all", "Uses the longest sequence "
          "length for every sequence, so shorter ones read keys past their end.",
          paged_longest_length),
    Entry("paged_attention", "right", "per_token_lookup_loop", None, paged_token_loop),
    Entry("paged_attention", "right", "gather_all_then_mask", None, paged_gather_masked_sdpa),

    Entry("chunked_prefill", "wrong", "chunk_mask_top_left", "Builds each chunk's mask "
          "top-left aligned over the (chunk, stop) scores, so later chunks cannot see most "
          "earlier tokens.", cp_top_left_mask),
    Entry("chunked_prefill", "wrong", "attends_own_chunk_only", "Fills the cache but lets each "
          "chunk attend only to its own keys, not to the earlier chunks.", cp_own_chunk_only),
    Entry("chunked_prefill", "wrong", "floor_chunk_count", "Loops over N // chunk_size full "
          "chunks only, dropping the ragged last chunk.", cp_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "no_mask_inside_chunk", "Applies no causal mask inside "
          "the chunk, so queries see later tokens of their own chunk.", cp_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "cache_written_at_zero", "Writes each chunk's keys and "
          "values at cache[:, :, :C] instead of at its own positions start:stop, overwriting "
          "the first chunk.", cp_cache_written_at_zero),
    Entry("chunked_prefill", "wrong", "stop_not_clipped", "Sets stop = start + chunk_size "
          "without clipping to N, so the last chunk's mask is built with the wrong sizes.",
          cp_stop_not_clipped),
    Entry("chunked_prefill", "right", "list_cache_sdpa_bool_mask", None, cp_list_cache_sdpa),
    Entry("chunked_prefill", "right", "per_head_float64_einsum", None, cp_per_head_float64),
]
