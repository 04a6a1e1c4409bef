"""Lesson 11 (serving, torch): decode_attention_intensity, paged_attention, chunked_prefill."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ decode_attention_intensity
def _flops(h, d, n, b):
    return 4 * b * h * n * d


def _bytes(g, d, n, b, e):
    return 2 * b * g * n * d * e


def dai_w_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return _flops(num_heads, head_dim, seq_len, batch_size) // _bytes(
        num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)


def dai_w_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return _flops(num_heads, head_dim, seq_len, batch_size) / (
        batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_w_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return (2 * batch_size * num_heads * seq_len * head_dim) / _bytes(
        num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)


def dai_w_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    return _flops(num_heads, head_dim, seq_len, batch_size) / _bytes(
        num_heads, head_dim, seq_len, batch_size, bytes_per_element)


def dai_w_macs(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return (2 * batch_size * num_heads * seq_len * head_dim) / _bytes(
        num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element) * 1.0


def dai_w_bits(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return _flops(num_heads, head_dim, seq_len, batch_size) / (
        8 * _bytes(num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element))


def dai_w_adds_q_and_out(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    extra = 2 * batch_size * num_heads * head_dim * bytes_per_element  # q read, out written
    return _flops(num_heads, head_dim, seq_len, batch_size) / (
        _bytes(num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element) + extra)


def dai_w_batch_on_flops_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    # assumes the batch shares one cache read
    return _flops(num_heads, head_dim, seq_len, batch_size) / _bytes(
        num_kv_heads, head_dim, seq_len, 1, bytes_per_element)


def dai_r_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def dai_r_expanded(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    scores = batch_size * num_heads * seq_len * head_dim * 2
    weighted = batch_size * num_heads * seq_len * head_dim * 2
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    v_bytes = k_bytes
    return float(scores + weighted) / float(k_bytes + v_bytes)


# ============================================================================ paged_attention
def _gather(pages, table_row, n, page_size, mode="right"):
    """(G, n, d) keys of one sequence from the pool."""
    t = torch.arange(n)
    if mode == "swapped":
        page = table_row.long()[t % page_size]
        slot = t // page_size
    elif mode == "contiguous":
        page = t // page_size  # assumes the pages are 0, 1, 2, ...
        slot = t % page_size
    else:
        page = table_row.long()[t // page_size]
        slot = t % page_size
    return pages[page, :, slot].transpose(0, 1)  # (n, G, d) -> (G, n, d)


def _paged(q, k_pages, v_pages, block_table, seq_lens, *, mode="right", group="interleave",
           length_mode="exact", scale=True, empty="zeros"):
    b_, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    r = h // g
    c = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((b_, h, d), dtype=c)
    for b in range(b_):
        n = int(seq_lens[b])
        if length_mode == "whole_pages":
            n = math.ceil(n / page_size) * page_size
        elif length_mode == "plus_one":
            n = n + 1
        if n == 0:
            continue
        k = _gather(k_pages, block_table[b], n, page_size, mode).to(c)
        v = _gather(v_pages, block_table[b], n, page_size, mode).to(c)
        if group == "interleave":
            k, v = k.repeat_interleave(r, 0), v.repeat_interleave(r, 0)
        else:
            k, v = k.repeat(r, 1, 1), v.repeat(r, 1, 1)
        s = (q[b].to(c)[:, None, :] @ k.transpose(-2, -1))[:, 0]  # (H, n)
        if scale:
            s = s / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def pa_w_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, mode="swapped")


def pa_w_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, length_mode="whole_pages")


def pa_w_group_modulo(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, group="tile")


def pa_w_empty_nan(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    r = h // g
    c = torch.promote_types(q.dtype, torch.float32)
    outs = []
    for b in range(b_):
        n = int(seq_lens[b])
        k = _gather(k_pages, block_table[b], n, page_size).to(c).repeat_interleave(r, 0)
        v = _gather(v_pages, block_table[b], n, page_size).to(c).repeat_interleave(r, 0)
        s = (q[b].to(c)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)  # (H, 1, n)
        e = torch.exp(s - s.amax(-1, keepdim=True)) if n else s
        w = e / e.sum(-1, keepdim=True)  # 0/0 for an empty sequence
        outs.append((w @ v)[:, 0] if n else torch.full((h, d), math.nan, dtype=c))
    return torch.stack(outs).to(q.dtype)


def pa_w_contiguous_pages(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, mode="contiguous")


def pa_w_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, scale=False)


def pa_w_length_inclusive(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, length_mode="plus_one")


def pa_r_loop_concat_pages(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(b_, h, d, dtype=torch.float64)
    for b in range(b_):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = [int(p) for p in block_table[b][: -(-n // page_size)]]
        k = torch.cat([k_pages[p] for p in pages], dim=1)[:, :n].double()  # (G, n, d)
        v = torch.cat([v_pages[p] for p in pages], dim=1)[:, :n].double()
        for head in range(h):
            grp = head // (h // g)
            w = torch.softmax(k[grp] @ q[b, head].double() / math.sqrt(d), dim=0)
            out[b, head] = w @ v[grp]
    return out.to(q.dtype)


def pa_r_vectorised_mask(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    max_len = block_table.shape[1] * page_size
    c = torch.promote_types(q.dtype, torch.float32)
    t = torch.arange(max_len)
    pages = block_table.long()[:, t // page_size]  # (B, T)
    slots = (t % page_size)[None, :].expand(b_, -1)  # (B, T)
    k = k_pages[pages, :, slots].to(c)  # (B, T, G, d)
    v = v_pages[pages, :, slots].to(c)
    k = k.permute(0, 2, 1, 3).repeat_interleave(h // g, 1)  # (B, H, T, d)
    v = v.permute(0, 2, 1, 3).repeat_interleave(h // g, 1)
    s = torch.einsum("bhd,bhtd->bht", q.to(c), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    return torch.einsum("bht,bhtd->bhd", w, v).to(q.dtype)


def pa_r_sdpa_per_sequence(q, k_pages, v_pages, block_table, seq_lens):
    b_, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    rows = []
    for b in range(b_):
        n = int(seq_lens[b])
        if n == 0:
            rows.append(torch.zeros(h, d, dtype=c))
            continue
        used = block_table[b, : (n + page_size - 1) // page_size].long()
        k = k_pages.index_select(0, used).permute(1, 0, 2, 3).reshape(g, -1, d)[:, :n]
        v = v_pages.index_select(0, used).permute(1, 0, 2, 3).reshape(g, -1, d)[:, :n]
        o = F.scaled_dot_product_attention(
            q[b].to(c).reshape(g, h // g, 1, d), k.to(c)[:, None], v.to(c)[:, None])
        rows.append(o.reshape(h, d))
    return torch.stack(rows).to(q.dtype)


# ============================================================================ chunked_prefill
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, history="all", inner="causal",
             drop_tail=False, scale=None):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    stop_at = (n // chunk_size) * chunk_size if drop_tail else n
    for start in range(0, stop_at, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(c)
        ks.append(_split(xc @ w_k, num_heads).to(c))
        vs.append(_split(xc @ w_v, num_heads).to(c))
        if history == "all":
            k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        elif history == "own":
            k, v = ks[-1], vs[-1]
        else:  # the previous chunk only
            k, v = torch.cat(ks[-2:], 2), torch.cat(vs[-2:], 2)
        nq, nk = q.shape[2], k.shape[2]
        s = q @ k.transpose(-2, -1) / math.sqrt(dh if scale is None else scale)
        if inner == "causal":
            allowed = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
        elif inner == "top_left":
            allowed = torch.ones(nq, nk, dtype=torch.bool).tril()
        else:
            allowed = torch.ones(nq, nk, dtype=torch.bool)
        s = s.masked_fill(~allowed, -math.inf)
        outs.append(_merge(torch.softmax(s, -1) @ v))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def cp_w_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, history="own")


def cp_w_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, inner="none")


def cp_w_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, inner="top_left")


def cp_w_drop_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, drop_tail=True)


def cp_w_full_matrix(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    q, k, v = (_split(x @ w, num_heads).to(c) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    return _merge(torch.softmax(s, -1) @ v).to(x.dtype) @ w_o


def cp_w_previous_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, history="previous")


def cp_w_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, scale=x.shape[-1])


def cp_w_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Per chunk, SDPA with is_causal=True over (C, stop) scores: aligned top-left."""
    b, n, d_model = x.shape
    c = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        q = _split(xc @ w_q, num_heads).to(c)
        ks.append(_split(xc @ w_k, num_heads).to(c))
        vs.append(_split(xc @ w_v, num_heads).to(c))
        outs.append(_merge(F.scaled_dot_product_attention(q, torch.cat(ks, 2), torch.cat(vs, 2),
                                                          is_causal=True)))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def cp_r_list_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size)


def cp_r_sdpa_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    v_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    out = torch.zeros(b, n, d_model, dtype=c)
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(c)
        k_cache[:, :, start:stop] = _split(xc @ w_k, num_heads).to(c)
        v_cache[:, :, start:stop] = _split(xc @ w_v, num_heads).to(c)
        qpos = torch.arange(start, stop)[:, None]
        mask = torch.arange(stop)[None, :] <= qpos  # absolute positions
        ctx = F.scaled_dot_product_attention(q, k_cache[:, :, :stop], v_cache[:, :, :stop],
                                             attn_mask=mask)
        out[:, start:stop] = _merge(ctx)
    return out.to(x.dtype) @ w_o


def cp_r_online_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Each chunk's queries attend chunk by chunk over the cache with an online softmax."""
    b, n, d_model = x.shape
    dh = d_model // num_heads
    X = x.double()
    ks, vs, outs = [], [], []
    for start in range(0, n, chunk_size):
        xc = X[:, start:start + chunk_size]
        nq = xc.shape[1]
        q = _split(xc @ w_q.double(), num_heads) / math.sqrt(dh)
        ks.append(_split(xc @ w_k.double(), num_heads))
        vs.append(_split(xc @ w_v.double(), num_heads))
        m = torch.full((b, num_heads, nq, 1), -math.inf, dtype=torch.float64)
        l = torch.zeros((b, num_heads, nq, 1), dtype=torch.float64)
        acc = torch.zeros((b, num_heads, nq, dh), dtype=torch.float64)
        key_start = 0
        for kb, vb in zip(ks, vs):
            s = q @ kb.transpose(-2, -1)
            kpos = torch.arange(key_start, key_start + kb.shape[2])[None, :]
            qpos = torch.arange(start, start + nq)[:, None]
            s = s.masked_fill(kpos > qpos, -math.inf)
            new_m = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - new_m)
            corr = torch.exp(m - new_m)
            l = l * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + p @ vb
            m = new_m
            key_start += kb.shape[2]
        outs.append(_merge(acc / l))
    return (torch.cat(outs, 1) @ w_o.double()).to(x.dtype)


E = Entry
ENTRIES = [
    E("decode_attention_intensity", "wrong", "floor_division",
      "Divides FLOPs by bytes with //, truncating intensities below 1 (or any fraction).",
      dai_w_floor_division),
    E("decode_attention_intensity", "wrong", "keys_only_bytes",
      "Counts only the keys read from the cache, not the values.", dai_w_keys_only),
    E("decode_attention_intensity", "wrong", "scores_only_flops",
      "Counts the score product's FLOPs but forgets the weighted sum's.", dai_w_scores_only),
    E("decode_attention_intensity", "wrong", "bytes_per_query_head",
      "Counts K/V bytes for every query head (num_heads) instead of every KV head.",
      dai_w_bytes_per_query_head),
    E("decode_attention_intensity", "wrong", "macs_not_flops",
      "Counts one multiply-add as one FLOP, halving the intensity.", dai_w_macs),
    E("decode_attention_intensity", "wrong", "bits_not_bytes",
      "Divides by bits (bytes times 8) instead of bytes.", dai_w_bits),
    E("decode_attention_intensity", "wrong", "counts_q_and_out_traffic",
      "Adds the query read and output write to the bytes, though the contract counts K and V "
      "only.", dai_w_adds_q_and_out),
    E("decode_attention_intensity", "wrong", "cache_shared_across_batch",
      "Assumes the whole batch reads one shared cache, leaving the batch out of the bytes.",
      dai_w_batch_on_flops_only),
    E("decode_attention_intensity", "right", "closed_form_ratio", None, dai_r_closed_form),
    E("decode_attention_intensity", "right", "expanded_terms", None, dai_r_expanded),
    E("paged_attention", "wrong", "page_and_slot_swapped",
      "Uses t % page_size as the page index and t // page_size as the slot.",
      pa_w_page_slot_swapped),
    E("paged_attention", "wrong", "whole_last_page",
      "Attends to every slot of the sequence's last page, including stale entries past "
      "seq_len.", pa_w_whole_pages),
    E("paged_attention", "wrong", "kv_head_modulo",
      "Maps query head h to KV head h % G instead of h // (H // G).", pa_w_group_modulo),
    E("paged_attention", "wrong", "nan_for_empty_sequence",
      "Divides by the softmax total even for a sequence of length 0, giving NaN instead of "
      "zeros.", pa_w_empty_nan),
    E("paged_attention", "wrong", "ignores_block_table",
      "Assumes sequence pages are 0, 1, 2, ... and never reads the block table.",
      pa_w_contiguous_pages),
    E("paged_attention", "wrong", "no_scale",
      "Forgets the 1/sqrt(d) scale on the scores.", pa_w_no_scale),
    E("paged_attention", "wrong", "length_inclusive",
      "Attends to keys t <= seq_len, one stale key too many.", pa_w_length_inclusive),
    E("paged_attention", "right", "concat_pages_head_loop_float64", None,
      pa_r_loop_concat_pages),
    E("paged_attention", "right", "vectorised_gather_mask", None, pa_r_vectorised_mask),
    E("paged_attention", "right", "index_select_grouped_sdpa", None, pa_r_sdpa_per_sequence),
    E("chunked_prefill", "wrong", "own_chunk_only",
      "Lets each chunk attend only to its own keys, never to the cached earlier chunks.",
      cp_w_own_chunk_only),
    E("chunked_prefill", "wrong", "no_mask_within_chunk",
      "Attends to all cached keys and the whole current chunk with no causal mask inside it.",
      cp_w_no_mask_in_chunk),
    E("chunked_prefill", "wrong", "top_left_mask",
      "Uses tril(0) on the (C, stop) scores, aligned top-left, so later chunks see only the "
      "first keys.", cp_w_top_left_mask),
    E("chunked_prefill", "wrong", "drops_ragged_chunk",
      "Loops over N // chunk_size full chunks and drops the shorter last chunk.",
      cp_w_drop_tail),
    E("chunked_prefill", "wrong", "full_n_by_n",
      "Computes ordinary causal attention over the whole sequence at once, building N x N "
      "scores.", cp_w_full_matrix),
    E("chunked_prefill", "wrong", "previous_chunk_only",
      "Keeps only the previous chunk in the cache (a sliding window) instead of all earlier "
      "chunks.", cp_w_previous_chunk_only),
    E("chunked_prefill", "wrong", "scale_by_d_model",
      "Scales scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", cp_w_scale_d_model),
    E("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
      "Calls SDPA with is_causal=True on (C, stop) scores, whose causal mask is aligned "
      "top-left.", cp_w_sdpa_is_causal),
    E("chunked_prefill", "right", "list_cache_bottom_right", None, cp_r_list_cache),
    E("chunked_prefill", "right", "preallocated_cache_sdpa_mask", None, cp_r_sdpa_mask),
    E("chunked_prefill", "right", "online_softmax_over_cache_float64", None,
      cp_r_online_float64),
]
