"""Lesson 11 (torch): decode_attention_intensity, paged_attention, chunked_prefill; round j."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry

# ---------------------------------------------------------------- decode_attention_intensity


def dai_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / read


def dai_keys_only_read(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / read


def dai_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / read


def dai_macs(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    macs = 2 * batch_size * num_heads * seq_len * head_dim
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / read


def dai_counts_query_and_output_bytes(num_heads, num_kv_heads, head_dim, seq_len,
                                      batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q_and_out = 2 * batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + q_and_out)


def dai_inverted(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return read / flops


def dai_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_query = Fraction(2 * seq_len * head_dim) * 2  # scores and weighted sum
    flops = per_query * batch_size * num_heads
    read = Fraction(2 * seq_len * head_dim * bytes_per_element) * batch_size * num_kv_heads
    return float(flops / read)


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


# --------------------------------------------------------------------------- paged_attention


def _paged(q, k_pages, v_pages, block_table, seq_lens, *, swap=False, trim=True, tile=False,
           scale_dim=None, transpose=True, floor_pages=False):
    b_sz, h, d = q.shape
    g, p_sz = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    c = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(b_sz, h, d, dtype=c)
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        if swap:
            idx = torch.arange(n)
            pages = block_table[b, (idx % p_sz).long()].long()
            slots = idx // p_sz
            k = k_pages[pages, :, slots].transpose(0, 1)
            v = v_pages[pages, :, slots].transpose(0, 1)
        else:
            n_pages = n // p_sz if floor_pages else math.ceil(n / p_sz)
            pages = block_table[b, :n_pages].long()
            if transpose:
                k = k_pages[pages].transpose(0, 1).reshape(g, -1, d)
                v = v_pages[pages].transpose(0, 1).reshape(g, -1, d)
            else:
                k = k_pages[pages].reshape(g, -1, d)
                v = v_pages[pages].reshape(g, -1, d)
            if trim:
                k, v = k[:, :n], v[:, :n]
        k, v = k.to(c), v.to(c)
        if tile:
            k, v = k.repeat(rep, 1, 1), v.repeat(rep, 1, 1)
        else:
            k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        s = (q[b].to(c)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(scale_dim or d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_page_and_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, swap=True)


def pa_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, trim=False)


def pa_heads_tiled(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, tile=True)


def pa_scale_page_size(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, scale_dim=k_pages.shape[2])


def pa_pages_not_transposed(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, transpose=False)


def pa_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, floor_pages=True)


def pa_token_by_token(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p_sz = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    out = torch.zeros(b_sz, h, d, dtype=torch.float64)
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys, vals = [], []
        for t in range(n):
            page = int(block_table[b, t // p_sz])
            keys.append(k_pages[page, :, t % p_sz].double())  # (G, d)
            vals.append(v_pages[page, :, t % p_sz].double())
        K = torch.stack(keys, dim=1)  # (G, n, d)
        V = torch.stack(vals, dim=1)
        for head in range(h):
            grp = head // rep
            w = torch.softmax(K[grp] @ q[b, head].double() / math.sqrt(d), dim=0)
            out[b, head] = w @ V[grp]
    return out.to(q.dtype)


def pa_padded_gather_mask(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    num_pages, g, p_sz, _ = k_pages.shape
    max_pages = block_table.shape[1]
    t = torch.arange(max_pages * p_sz)
    pages = block_table.long()[:, t // p_sz]  # (B, T)
    slots = (t % p_sz).expand(b_sz, -1)  # (B, T)
    k = k_pages.double()[pages, :, slots]  # (B, T, G, d)
    v = v_pages.double()[pages, :, slots]
    k = k.permute(0, 2, 1, 3).repeat_interleave(h // g, dim=1)  # (B, H, T, d)
    v = v.permute(0, 2, 1, 3).repeat_interleave(h // g, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.double(), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return torch.einsum("bht,bhtd->bhd", w, v).to(q.dtype)


# --------------------------------------------------------------------------- chunked_prefill


def _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, use_cache=True,
             top_left=False, full_scores=False, drop_tail=False, cache_at_zero=False,
             softmax_dim=-1):
    b, n, dm = x.shape
    dh = dm // num_heads
    c = torch.promote_types(x.dtype, torch.float32)

    def heads(t):
        return t.reshape(b, -1, num_heads, dh).transpose(1, 2).to(c)

    if full_scores:
        q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
        s_all = q @ k.transpose(-2, -1) / math.sqrt(dh)  # (B, H, N, N)
        s_all = s_all.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    k_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    v_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    outs = []
    end = (n // chunk_size) * chunk_size if drop_tail else n
    for start in range(0, end, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        if full_scores:
            s = s_all[:, :, start:stop, :stop]
            ctx = torch.softmax(s, -1) @ v[:, :, :stop]
        else:
            q = heads(xc @ w_q)
            at = slice(0, stop - start) if cache_at_zero else slice(start, stop)
            k_cache[:, :, at] = heads(xc @ w_k)
            v_cache[:, :, at] = heads(xc @ w_v)
            first = start if not use_cache else 0
            k, v = k_cache[:, :, first:stop], v_cache[:, :, first:stop]
            s = q @ k.transpose(-2, -1) / math.sqrt(dh)
            nq, nk = stop - start, stop - first
            allowed = torch.ones(nq, nk, dtype=torch.bool).tril(0 if top_left else nk - nq)
            s = s.masked_fill(~allowed, -math.inf)
            ctx = torch.softmax(s, softmax_dim) @ v
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, dm))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def cp_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, use_cache=False)


def cp_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, top_left=True)


def cp_full_score_matrix(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, full_scores=True)


def cp_ragged_tail_dropped(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, drop_tail=True)


def cp_cache_written_at_start(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, cache_at_zero=True)


def cp_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    out = _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, softmax_dim=-2)
    return torch.nan_to_num(out)


def cp_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    if dm % num_heads:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    dh = dm // num_heads
    ks, vs, outs = [], [], []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        m = xc.shape[1]
        q = (xc @ w_q).view(b, m, num_heads, dh).transpose(1, 2).double()
        ks.append((xc @ w_k).view(b, m, num_heads, dh).transpose(1, 2).double())
        vs.append((xc @ w_v).view(b, m, num_heads, dh).transpose(1, 2).double())
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        total = k.shape[2]
        mask = torch.arange(total)[None, :] <= torch.arange(start, start + m)[:, None]
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outs.append(ctx.transpose(1, 2).reshape(b, m, dm))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def cp_row_by_row(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    dh = dm // num_heads
    xd = x.double()
    k_all = torch.empty(b, num_heads, 0, dh, dtype=torch.float64)
    v_all = torch.empty(b, num_heads, 0, dh, dtype=torch.float64)
    ctx = torch.empty(b, n, num_heads, dh, dtype=torch.float64)
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        xc = xd[:, start:stop]
        q = torch.einsum("bnm,mhd->bhnd", xc, w_q.double().view(dm, num_heads, dh))
        k_all = torch.cat([k_all, torch.einsum("bnm,mhd->bhnd", xc,
                                               w_k.double().view(dm, num_heads, dh))], 2)
        v_all = torch.cat([v_all, torch.einsum("bnm,mhd->bhnd", xc,
                                               w_v.double().view(dm, num_heads, dh))], 2)
        for r in range(stop - start):
            pos = start + r
            s = torch.einsum("bhd,bhkd->bhk", q[:, :, r], k_all[:, :, :pos + 1]) / math.sqrt(dh)
            ctx[:, pos] = torch.einsum("bhk,bhkd->bhd", torch.softmax(s, -1),
                                       v_all[:, :, :pos + 1])
    return (ctx.reshape(b, n, dm) @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "scores_flops_only",
          "Counts only the score products (2 B H N d FLOPs) and forgets the weighted sum over "
          "the values.", dai_scores_only),
    Entry("decode_attention_intensity", "wrong", "keys_only_in_bytes",
          "Counts only the cached keys as bytes read, leaving out the values.",
          dai_keys_only_read),
    Entry("decode_attention_intensity", "wrong", "bytes_use_query_heads",
          "Counts the cache bytes with num_heads instead of num_kv_heads, as if every query "
          "head had its own K/V, so GQA's saving disappears.", dai_query_heads_in_bytes),
    Entry("decode_attention_intensity", "wrong", "multiply_adds_counted_once",
          "Counts each multiply-add as 1 FLOP instead of 2, halving the intensity.", dai_macs),
    Entry("decode_attention_intensity", "wrong", "query_and_output_bytes_added",
          "Adds the bytes of the query and output vectors to the K/V bytes read, although "
          "the contract divides by the cache reads only.", dai_counts_query_and_output_bytes),
    Entry("decode_attention_intensity", "wrong", "bytes_per_flop",
          "Divides bytes by FLOPs instead of FLOPs by bytes.", dai_inverted),
    Entry("decode_attention_intensity", "right", "exact_fraction", None, dai_fraction),
    Entry("decode_attention_intensity", "right", "closed_form_two_h_over_g", None,
          dai_closed_form),

    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "Finds key t at page block_table[b, t % page_size], slot t // page_size, swapping "
          "the page index and the slot.", pa_page_and_slot_swapped),
    Entry("paged_attention", "wrong", "whole_last_page_attended",
          "Gathers the sequence's pages but never trims to seq_lens[b], so the stale slots at "
          "the end of a partly filled last page are attended too.", pa_whole_last_page),
    Entry("paged_attention", "wrong", "kv_heads_tiled",
          "Expands the G KV heads with .repeat (tiling), so query head h reads KV head h % G "
          "instead of h // (H // G).", pa_heads_tiled),
    Entry("paged_attention", "wrong", "scaled_by_page_size",
          "Scales the scores by 1/sqrt(page_size) instead of 1/sqrt(d).", pa_scale_page_size),
    Entry("paged_attention", "wrong", "pages_reshaped_without_transpose",
          "Reshapes the gathered (pages, G, page_size, d) block straight to (G, -1, d) "
          "without first swapping the page and KV-head axes, mixing heads and pages.",
          pa_pages_not_transposed),
    Entry("paged_attention", "wrong", "page_count_floored",
          "Takes seq_lens[b] // page_size pages instead of rounding up, so the keys in a "
          "partly filled last page are missed.", pa_floor_page_count),
    Entry("paged_attention", "right", "token_by_token_gather", None, pa_token_by_token),
    Entry("paged_attention", "right", "padded_gather_with_length_mask", None,
          pa_padded_gather_mask),

    Entry("chunked_prefill", "wrong", "chunk_attends_only_itself",
          "Lets each chunk attend only to its own keys and values, ignoring the cached "
          "earlier chunks.", cp_no_cache),
    Entry("chunked_prefill", "wrong", "chunk_mask_top_left",
          "Builds each chunk's (C, stop) causal mask top-left aligned (tril with offset 0), "
          "so later chunks' queries see only the first keys instead of everything up to "
          "their own position.", cp_mask_top_left),
    Entry("chunked_prefill", "wrong", "full_score_matrix_sliced",
          "Computes the full N x N score matrix up front and slices it per chunk: the right "
          "values, but it builds the N x N tensor the exercise forbids.", cp_full_score_matrix),
    Entry("chunked_prefill", "wrong", "ragged_last_chunk_dropped",
          "Loops only over full chunks (up to N // chunk_size * chunk_size), so a ragged "
          "final chunk is never processed and the output is too short.",
          cp_ragged_tail_dropped),
    Entry("chunked_prefill", "wrong", "cache_written_at_offset_zero",
          "Writes each chunk's keys and values to cache positions 0..C-1 instead of "
          "start..stop-1, overwriting the first chunk.", cp_cache_written_at_start),
    Entry("chunked_prefill", "wrong", "softmax_over_queries",
          "Normalises each chunk's scores over the query axis (dim=-2) instead of the keys.",
          cp_softmax_over_queries),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_bool_mask", None, cp_sdpa_chunks),
    Entry("chunked_prefill", "right", "row_by_row_float64", None, cp_row_by_row),
]
