"""Lesson 11 (serving, torch): decode_attention_intensity, paged_attention, chunked_prefill."""

import math

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


def dai_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def dai_query_bytes_added(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    query = batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + query)


def dai_elements(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    elements = 2 * batch_size * num_kv_heads * seq_len * head_dim
    return flops / elements


def dai_separate_counts(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    score_flops = batch_size * num_heads * (2 * head_dim * seq_len)
    sum_flops = batch_size * num_heads * (2 * seq_len * head_dim)
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    v_bytes = k_bytes
    return float(score_flops + sum_flops) / float(k_bytes + v_bytes)


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    group = num_heads / num_kv_heads
    return 2.0 * group / bytes_per_element


# ------------------------------------------------------------------ paged_attention helpers
def _attend_one(q_b, k, v):
    # q_b (H, d); k, v (H, n, d) in float64
    s = torch.einsum("hd,hnd->hn", q_b, k) / math.sqrt(q_b.shape[-1])
    return torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)


def _gather_tokens(pages_pool, pages, groups, n):
    return pages_pool[pages].transpose(0, 1).reshape(groups, -1, pages_pool.shape[-1])[:, :n]


# ------------------------------------------------------------------ paged_attention: wrong
def pa_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(b_, h, d, dtype=torch.float64)
    for b in range(b_):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / ps)].long()
        m = len(pages) * ps
        k = _gather_tokens(k_pages.double(), pages, g, m).repeat_interleave(h // g, 0)
        v = _gather_tokens(v_pages.double(), pages, g, m).repeat_interleave(h // g, 0)
        out[b] = _attend_one(q[b].double(), k, v)
    return out.to(q.dtype)


def pa_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    out = torch.zeros(b_, h, d, dtype=torch.float64)
    for b in range(b_):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t % ps])
            slot = t // ps
            ks.append(k_pages[page, :, slot])
            vs.append(v_pages[page, :, slot])
        k = torch.stack(ks, 1).double().repeat_interleave(rep, 0)
        v = torch.stack(vs, 1).double().repeat_interleave(rep, 0)
        out[b] = _attend_one(q[b].double(), k, v)
    return out.to(q.dtype)


def pa_head_modulo(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(b_, h, d, dtype=torch.float64)
    for b in range(b_):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / ps)].long()
        k = _gather_tokens(k_pages.double(), pages, g, n)
        v = _gather_tokens(v_pages.double(), pages, g, n)
        idx = torch.arange(h) % g
        out[b] = _attend_one(q[b].double(), k[idx], v[idx])
    return out.to(q.dtype)


def pa_consecutive_pages(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(b_, h, d, dtype=torch.float64)
    for b in range(b_):
        n = int(seq_lens[b])
        if n == 0:
            continue
        first = int(block_table[b, 0])
        count = math.ceil(n / ps)
        k = k_pages[first:first + count].double().transpose(0, 1).reshape(g, -1, d)[:, :n]
        v = v_pages[first:first + count].double().transpose(0, 1).reshape(g, -1, d)[:, :n]
        k, v = k.repeat_interleave(h // g, 0), v.repeat_interleave(h // g, 0)
        out[b] = _attend_one(q[b].double(), k, v)
    return out.to(q.dtype)


def pa_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(b_, h, d, dtype=torch.float64)
    for b in range(b_):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / ps)].long()
        k = k_pages[pages].double().reshape(g, -1, d)[:, :n].repeat_interleave(h // g, 0)
        v = v_pages[pages].double().reshape(g, -1, d)[:, :n].repeat_interleave(h // g, 0)
        out[b] = _attend_one(q[b].double(), k, v)
    return out.to(q.dtype)


def pa_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(b_, h, d, dtype=torch.float64)
    for b in range(b_):
        n = int(seq_lens[b])
        pages = block_table[b, :n // ps].long()
        k = _gather_tokens(k_pages.double(), pages, g, n).repeat_interleave(h // g, 0)
        v = _gather_tokens(v_pages.double(), pages, g, n).repeat_interleave(h // g, 0)
        if k.shape[1] == 0:
            continue
        out[b] = _attend_one(q[b].double(), k, v)
    return out.to(q.dtype)


# ------------------------------------------------------------------ paged_attention: right
def pa_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    out = torch.zeros(b_, h, d, dtype=torch.float64)
    for b in range(b_):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks = torch.stack([k_pages[int(block_table[b, t // ps]), :, t % ps] for t in range(n)], 1)
        vs = torch.stack([v_pages[int(block_table[b, t // ps]), :, t % ps] for t in range(n)], 1)
        for head in range(h):
            kk, vv = ks[head // rep].double(), vs[head // rep].double()
            s = kk @ q[b, head].double() / math.sqrt(d)
            w = torch.exp(s - s.max())
            out[b, head] = (w / w.sum()) @ vv
    return out.to(q.dtype)


def pa_padded_mask(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    table = block_table.long().clamp(0, k_pages.shape[0] - 1)
    k = k_pages.float()[table]  # (B, max_pages, G, P, d)
    v = v_pages.float()[table]
    k = k.permute(0, 2, 1, 3, 4).reshape(b_, g, max_pages * ps, d)
    v = v.permute(0, 2, 1, 3, 4).reshape(b_, g, max_pages * ps, d)
    qg = q.float().reshape(b_, g, h // g, d)
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = torch.arange(max_pages * ps)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(b_, h, d)
    return out.to(q.dtype)


# ------------------------------------------------------------------ chunked_prefill helpers
def _split(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, make_mask, use_cache=True,
                scale_width=None, last_chunk=True):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    width = dh if scale_width is None else scale_width
    ks, vs, outs = [], [], []
    stop_at = n if last_chunk else n - n % chunk_size
    for start in range(0, stop_at, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).double()
        k_new = _split(xc @ w_k, num_heads).double()
        v_new = _split(xc @ w_v, num_heads).double()
        if use_cache:
            ks.append(k_new)
            vs.append(v_new)
            k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        else:
            k, v = k_new, v_new
        s = q @ k.transpose(-2, -1) / math.sqrt(width)
        mask = make_mask(stop - start, k.shape[2], chunk_size)
        if mask is not None:
            s = s.masked_fill(~mask, -math.inf)
        ctx = torch.softmax(s, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def _bottom_right(c, total, chunk):
    return torch.ones(c, total, dtype=torch.bool).tril(total - c)


# ------------------------------------------------------------------ chunked_prefill: wrong
def cp_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size,
                       lambda c, total, chunk: torch.ones(c, total, dtype=torch.bool).tril())


def cp_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, _bottom_right,
                       use_cache=False)


def cp_last_chunk_dropped(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, _bottom_right,
                       last_chunk=False)


def cp_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size,
                       lambda c, total, chunk: None)


def cp_mask_from_chunk_size(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size,
                       lambda c, total, chunk: torch.ones(chunk, total,
                                                          dtype=torch.bool).tril(total - chunk))


def cp_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, _bottom_right,
                       scale_width=x.shape[-1])


# ------------------------------------------------------------------ chunked_prefill: right
def cp_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    k_cache = _split(x[:, :0] @ w_k, num_heads).float()
    v_cache = _split(x[:, :0] @ w_v, num_heads).float()
    pieces = []
    pos = 0
    while pos < n:
        end = min(pos + chunk_size, n)
        xc = x[:, pos:end]
        q = _split(xc @ w_q, num_heads).float()
        k_cache = torch.cat([k_cache, _split(xc @ w_k, num_heads).float()], dim=2)
        v_cache = torch.cat([v_cache, _split(xc @ w_v, num_heads).float()], dim=2)
        qpos = torch.arange(pos, end)[:, None]
        allowed = torch.arange(end)[None, :] <= qpos
        ctx = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=allowed)
        pieces.append(ctx.transpose(1, 2).flatten(2))
        pos = end
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def cp_online_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    k_all = torch.empty(b, num_heads, n, dh, dtype=torch.float64)
    v_all = torch.empty_like(k_all)
    result = torch.empty(b, n, d_model, dtype=torch.float64)
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        xc = x[:, start:stop].double()
        q = _split(xc @ w_q.double(), num_heads) / math.sqrt(dh)
        k_all[:, :, start:stop] = _split(xc @ w_k.double(), num_heads)
        v_all[:, :, start:stop] = _split(xc @ w_v.double(), num_heads)
        for i in range(stop - start):
            t = start + i  # absolute position: keys 0..t
            s = q[:, :, i:i + 1] @ k_all[:, :, :t + 1].transpose(-2, -1)
            p = torch.softmax(s, dim=-1)
            result[:, t] = (p @ v_all[:, :, :t + 1]).reshape(b, d_model)
    return (result.to(x.dtype) @ w_o)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "floor-division",
          "Divides FLOPs by bytes with //, truncating the intensity to an integer.",
          dai_floor_division),
    Entry("decode_attention_intensity", "wrong", "scores-only",
          "Counts only the score product's FLOPs, forgetting the weighted sum over V.",
          dai_scores_only),
    Entry("decode_attention_intensity", "wrong", "bytes-per-query-head",
          "Counts the K/V bytes once per query head instead of once per KV head, so GQA's "
          "sharing disappears.", dai_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "values-not-read",
          "Counts only the keys' bytes read from the cache, forgetting the values'.",
          dai_keys_only),
    Entry("decode_attention_intensity", "wrong", "query-bytes-added",
          "Adds the new query's bytes to the bytes read, although the contract divides by "
          "the K and V cache bytes only.", dai_query_bytes_added),
    Entry("decode_attention_intensity", "wrong", "elements-not-bytes",
          "Divides by the number of cached elements instead of their bytes (ignores "
          "bytes_per_element).", dai_elements),
    Entry("decode_attention_intensity", "right", "separate-counts", None, dai_separate_counts),
    Entry("decode_attention_intensity", "right", "closed-form", None, dai_closed_form),

    Entry("paged_attention", "wrong", "whole-last-page",
          "Attends to every slot of the sequence's pages, including the stale slots past "
          "seq_lens[b] in the last page.", pa_whole_pages),
    Entry("paged_attention", "wrong", "page-and-slot-swapped",
          "Swaps page and slot: looks up the page with t % page_size and the slot with "
          "t // page_size.", pa_page_slot_swapped),
    Entry("paged_attention", "wrong", "head-modulo-groups",
          "Maps query head h to KV head h % G instead of h // (H / G).", pa_head_modulo),
    Entry("paged_attention", "wrong", "pages-assumed-consecutive",
          "Assumes a sequence's pages are consecutive in the pool from its first table "
          "entry, instead of reading each page from the block table.", pa_consecutive_pages),
    Entry("paged_attention", "wrong", "flatten-without-group-transpose",
          "Flattens the gathered (pages, G, page_size, d) to (G, pages * page_size, d) with a "
          "plain reshape, without first moving the group axis in front.",
          pa_reshape_without_transpose),
    Entry("paged_attention", "wrong", "floor-page-count",
          "Takes seq_len // page_size pages, dropping the partly filled last page.",
          pa_floor_page_count),
    Entry("paged_attention", "right", "token-by-token-loop", None, pa_token_loop),
    Entry("paged_attention", "right", "padded-gather-with-mask", None, pa_padded_mask),

    Entry("chunked_prefill", "wrong", "top-left-chunk-mask",
          "Aligns each chunk's causal mask top-left, as if its queries sat at positions "
          "0 .. C-1, instead of after the cached keys.", cp_top_left),
    Entry("chunked_prefill", "wrong", "no-cache",
          "Attends only to the keys of its own chunk, never to the cached keys of earlier "
          "chunks.", cp_no_cache),
    Entry("chunked_prefill", "wrong", "ragged-chunk-dropped",
          "Stops the loop at the last full chunk, dropping the shorter final chunk.",
          cp_last_chunk_dropped),
    Entry("chunked_prefill", "wrong", "no-mask-inside-chunk",
          "Lets each chunk attend to all keys of its own chunk, without the causal mask "
          "inside the chunk.", cp_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "mask-from-chunk_size",
          "Builds the mask with chunk_size rows even for the shorter last chunk, which "
          "broadcasts that chunk's scores to the wrong number of query rows.",
          cp_mask_from_chunk_size),
    Entry("chunked_prefill", "wrong", "scale-by-d_model",
          "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", cp_scale_d_model),
    Entry("chunked_prefill", "right", "sdpa-per-chunk", None, cp_sdpa_chunks),
    Entry("chunked_prefill", "right", "row-by-row-float64", None, cp_online_per_chunk),
]
