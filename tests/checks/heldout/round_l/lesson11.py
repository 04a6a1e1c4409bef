"""Round l, lesson 11 (serving): decode_attention_intensity, paged_attention, chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry

D = "decode_attention_intensity"
P = "paged_attention"
C = "chunked_prefill"


# ============================================================ decode_attention_intensity: wrong
def intensity_ignores_sharing(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    value_flops = 2 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + value_flops) / cache_bytes


def intensity_macs(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    macs_scores = batch_size * num_heads * seq_len * head_dim
    macs_values = batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(macs_scores + macs_values) / kv_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // kv_bytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_counts_new_token(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    tokens_in_cache = seq_len + 1
    kv_bytes = 2 * batch_size * num_kv_heads * tokens_in_cache * head_dim * bytes_per_element
    return flops / kv_bytes


# ============================================================ decode_attention_intensity: right
def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = Fraction(2 * 2 * num_heads * head_dim * seq_len * batch_size)
    kv = Fraction(2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element)
    return float(flops / kv)


def intensity_per_head_loop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 0
    for _b in range(batch_size):
        for _h in range(num_heads):
            flops += 2 * seq_len * head_dim  # q . k_t for every cached key
            flops += 2 * seq_len * head_dim  # sum_t p_t v_t
    per_group = 2 * seq_len * head_dim * bytes_per_element  # K and V of one KV head
    return flops / float(batch_size * num_kv_heads * per_group)


# ============================================================ paged_attention helpers
def _seq_kv(pages_pool, table_row, n, page_size):
    num = math.ceil(n / page_size)
    pages = pages_pool[table_row[:num].long()]  # (p, G, P, d)
    g, d = pages.shape[1], pages.shape[-1]
    return pages.transpose(0, 1).reshape(g, -1, d)[:, :n]  # (G, n, d)


# ============================================================ paged_attention: wrong
def paged_modulo_heads(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k = _seq_kv(k_pages, block_table[b], n, P).double()
        v = _seq_kv(v_pages, block_table[b], n, P).double()
        for h in range(H):
            g = h % G
            w = torch.softmax(k[g] @ q[b, h].double() / math.sqrt(d), dim=0)
            out[b, h] = w @ v[g]
    return out.to(q.dtype)


def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).double()
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).double()
        k = k.repeat_interleave(rep, 0)
        v = v.repeat_interleave(rep, 0)
        s = (k @ q[b].double().unsqueeze(-1)).squeeze(-1) / math.sqrt(d)  # (H, p*P)
        out[b] = (torch.softmax(s, -1).unsqueeze(1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_div_mod_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float32 if q.dtype != torch.float64 else q.dtype)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys, vals = [], []
        for t in range(n):
            page = int(block_table[b, t % P])
            slot = t // P
            keys.append(k_pages[page, :, slot])
            vals.append(v_pages[page, :, slot])
        k = torch.stack(keys, 1).to(out.dtype).repeat_interleave(rep, 0)  # (H, n, d)
        v = torch.stack(vals, 1).to(out.dtype).repeat_interleave(rep, 0)
        s = torch.einsum("hd,hnd->hn", q[b].to(out.dtype), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_reshape_no_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].double().repeat_interleave(rep, 0)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].double().repeat_interleave(rep, 0)
        s = (q[b].double()[:, None, :] @ k.transpose(-1, -2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        num_pages = n // P
        if num_pages == 0:
            continue
        pages = block_table[b, :num_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].double()
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].double()
        k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        s = (q[b].double()[:, None, :] @ k.transpose(-1, -2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_scale_from_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    scale = 1.0 / math.sqrt(k_pages.shape[2])
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k = _seq_kv(k_pages, block_table[b], n, k_pages.shape[2]).double()
        v = _seq_kv(v_pages, block_table[b], n, k_pages.shape[2]).double()
        k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        s = (q[b].double()[:, None, :] @ k.transpose(-1, -2)) * scale
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_padded_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    t = torch.arange(max_pages * P)  # every token slot a table row can address
    page_ids = block_table.long()[:, t // P]  # (B, T)
    slots = (t % P).expand(B, -1)  # (B, T)
    k = k_pages[page_ids, :, slots].double()  # (B, T, G, d)
    v = v_pages[page_ids, :, slots].double()
    head_group = torch.arange(H) // (H // G)
    k = k[:, :, head_group]  # (B, T, H, d)
    v = v[:, :, head_group]
    s = torch.einsum("bhd,bthd->bht", q.double(), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    return torch.einsum("bht,bthd->bhd", p, v).to(q.dtype)


def paged_token_loop_sdpa(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    outs = []
    for b in range(B):
        n = int(seq_lens[b].item())
        if n == 0:
            outs.append(torch.zeros(H, d, dtype=torch.float64))
            continue
        ks = [k_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)]
        vs = [v_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)]
        k = torch.stack(ks, dim=1).double()  # (G, n, d)
        v = torch.stack(vs, dim=1).double()
        qb = q[b].double().reshape(G, H // G, 1, d)  # heads of one group together
        o = F.scaled_dot_product_attention(qb, k[:, None], v[:, None])  # (G, H/G, 1, d)
        outs.append(o.reshape(H, d))
    return torch.stack(outs).to(q.dtype)


# ============================================================ chunked_prefill helpers
def _split(t, h):
    b, n, dm = t.shape
    return t.view(b, n, h, dm // h).transpose(1, 2)


def _merge(t):
    b, h, n, dh = t.shape
    return t.transpose(1, 2).reshape(b, n, h * dh)


def _softmax_rows(s):
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


# ============================================================ chunked_prefill: wrong
def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, dm = x.shape
    dh = dm // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        q = _split(xc @ w_q, num_heads).to(work)
        k = _split(xc @ w_k, num_heads).to(work)
        v = _split(xc @ w_v, num_heads).to(work)
        c = q.shape[2]
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(c, c, dtype=torch.bool).tril(), -math.inf)
        pieces.append(_merge(_softmax_rows(s) @ v))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, dm = x.shape
    f = torch.float64
    k_cache, v_cache, pieces = [], [], []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size].to(f)
        q = _split(xc @ w_q.to(f), num_heads)
        k_cache.append(_split(xc @ w_k.to(f), num_heads))
        v_cache.append(_split(xc @ w_v.to(f), num_heads))
        k = torch.cat(k_cache, dim=2)
        v = torch.cat(v_cache, dim=2)
        pieces.append(_merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
    return (torch.cat(pieces, 1) @ w_o.to(f)).to(x.dtype)


def prefill_full_chunk_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, dm = x.shape
    dh = dm // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    ks, vs, pieces = [], [], []
    for start in range(0, N, chunk_size):
        stop = start + chunk_size
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(work)
        ks.append(_split(xc @ w_k, num_heads).to(work))
        vs.append(_split(xc @ w_v, num_heads).to(work))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        allowed = torch.ones(chunk_size, k.shape[2], dtype=torch.bool).tril(start)
        s = s.masked_fill(~allowed, -math.inf)
        pieces.append(_merge(_softmax_rows(s) @ v))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_attends_before_append(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, dm = x.shape
    dh = dm // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, 0, dh, dtype=work)
    v_cache = torch.zeros(B, num_heads, 0, dh, dtype=work)
    pieces = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        q = _split(xc @ w_q, num_heads).to(work)
        s = q @ k_cache.transpose(-1, -2) / math.sqrt(dh)  # (B, H, C, start): all earlier
        pieces.append(_merge(torch.softmax(s, dim=-1) @ v_cache))
        k_cache = torch.cat([k_cache, _split(xc @ w_k, num_heads).to(work)], 2)
        v_cache = torch.cat([v_cache, _split(xc @ w_v, num_heads).to(work)], 2)
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_full_mask_sliced(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, dm = x.shape
    dh = dm // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    causal = torch.ones(N, N, dtype=torch.bool).tril()
    ks, vs, pieces = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(work)
        ks.append(_split(xc @ w_k, num_heads).to(work))
        vs.append(_split(xc @ w_v, num_heads).to(work))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        s = s.masked_fill(~causal[start:stop, :stop], -math.inf)
        pieces.append(_merge(_softmax_rows(s) @ v))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, dm = x.shape
    dh = dm // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    ks, vs, pieces = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(work)
        ks.append(_split(xc @ w_k, num_heads).to(work))
        vs.append(_split(xc @ w_v, num_heads).to(work))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        allowed = torch.ones(stop - start, stop, dtype=torch.bool).tril(start)
        s = s.masked_fill(~allowed, -math.inf)
        ctx = _softmax_rows(s) @ v  # (B, H, C, dh)
        pieces.append(ctx.reshape(B, stop - start, dm))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_bottom_right(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, dm = x.shape
    f = torch.float64
    xd = x.to(f)
    wq, wk, wv = w_q.to(f), w_k.to(f), w_v.to(f)
    k_cache = torch.empty(B, num_heads, N, dm // num_heads, dtype=f)
    v_cache = torch.empty_like(k_cache)
    out = torch.empty(B, N, dm, dtype=f)
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = xd[:, start:stop]
        k_cache[:, :, start:stop] = _split(xc @ wk, num_heads)
        v_cache[:, :, start:stop] = _split(xc @ wv, num_heads)
        q = _split(xc @ wq, num_heads)
        rows = torch.arange(start, stop)[:, None]
        mask = torch.arange(stop)[None, :] <= rows  # (C, stop), True = may attend
        ctx = F.scaled_dot_product_attention(q, k_cache[:, :, :stop], v_cache[:, :, :stop],
                                             attn_mask=mask)
        out[:, start:stop] = _merge(ctx)
    return (out @ w_o.to(f)).to(x.dtype)


def prefill_head_loop_einsum(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, dm = x.shape
    dh = dm // num_heads
    f = torch.float64
    K = torch.einsum("bnm,mk->bnk", x.to(f), w_k.to(f))  # (B, N, d_model): the cache
    V = torch.einsum("bnm,mk->bnk", x.to(f), w_v.to(f))
    rows_out = []
    start = 0
    while start < N:
        stop = min(start + chunk_size, N)
        Q = x[:, start:stop].to(f) @ w_q.to(f)  # (B, C, d_model)
        heads = []
        for h in range(num_heads):
            sl = slice(h * dh, (h + 1) * dh)
            s = torch.einsum("bcd,bkd->bck", Q[..., sl], K[:, :stop, sl]) / math.sqrt(dh)
            pos_q = torch.arange(start, stop).view(-1, 1)
            s = torch.where(torch.arange(stop).view(1, -1) > pos_q,
                            torch.tensor(-math.inf, dtype=f), s)
            heads.append(torch.einsum("bck,bkd->bcd", torch.softmax(s, -1), V[:, :stop, sl]))
        rows_out.append(torch.cat(heads, -1))
        start = stop
    return (torch.cat(rows_out, 1) @ w_o.to(f)).to(x.dtype)


ENTRIES = [
    Entry(D, "wrong", "ignores_kv_head_sharing",
          "Counts the K/V bytes with num_heads instead of num_kv_heads, as if every query head "
          "read its own cache, so GQA/MQA sharing never raises the intensity.",
          intensity_ignores_sharing),
    Entry(D, "wrong", "reads_keys_only",
          "Counts the bytes of the cached keys but not of the values, halving the bytes read "
          "and doubling the intensity.",
          intensity_keys_only),
    Entry(D, "wrong", "multiply_add_as_one_flop",
          "Counts each multiply-add as one FLOP instead of two, so the FLOPs and the "
          "intensity come out halved.",
          intensity_macs),
    Entry(D, "wrong", "floor_division",
          "Divides FLOPs by bytes with //, which returns an int and truncates a fractional "
          "intensity (0.5 becomes 0).",
          intensity_floor_division),
    Entry(D, "wrong", "precedence_in_denominator",
          "Writes flops / 2 * B * G * N * d * bytes without parentheses, so the byte factors "
          "multiply the quotient instead of forming the denominator.",
          intensity_precedence),
    Entry(D, "wrong", "counts_new_token_in_cache",
          "Counts seq_len + 1 cached tokens in the bytes read (adding the new token) while the "
          "FLOPs use seq_len keys.",
          intensity_counts_new_token),
    Entry(D, "right", "fraction_then_float", None, intensity_fraction),
    Entry(D, "right", "per_head_flop_loop", None, intensity_per_head_loop),

    Entry(P, "wrong", "head_to_group_modulo",
          "Maps query head h to KV head h % G (repeat-style) instead of h // (H // G), so "
          "heads read the wrong group whenever H // G > 1.",
          paged_modulo_heads),
    Entry(P, "wrong", "whole_last_page",
          "Attends over every slot of the sequence's pages without cutting at seq_lens[b], "
          "so stale entries at the end of the last page are included.",
          paged_whole_pages),
    Entry(P, "wrong", "page_and_slot_swapped",
          "Finds key t in page block_table[b, t % page_size] at slot t // page_size, swapping "
          "the division and the remainder (which reads wrong keys or indexes past the table "
          "and raises IndexError).",
          paged_div_mod_swapped),
    Entry(P, "wrong", "reshape_without_transpose",
          "Flattens the gathered (pages, G, page_size, d) blocks straight to (G, -1, d) "
          "without first moving the group axis to the front, mixing groups and pages.",
          paged_reshape_no_transpose),
    Entry(P, "wrong", "floor_page_count",
          "Takes seq_len // page_size pages instead of rounding up, so the keys on a "
          "partly filled last page are dropped (and a sequence shorter than a page gets "
          "zeros).",
          paged_floor_pages),
    Entry(P, "wrong", "scale_from_page_size",
          "Scales the scores by 1/sqrt(k_pages.shape[2]), the page size, instead of 1/sqrt(d) "
          "from the last axis.",
          paged_scale_from_page_size),
    Entry(P, "right", "padded_gather_masked", None, paged_padded_gather),
    Entry(P, "right", "token_loop_grouped_sdpa", None, paged_token_loop_sdpa),

    Entry(C, "wrong", "chunk_ignores_cache",
          "Lets each chunk attend only to its own keys and values, forgetting the cached keys "
          "of all earlier chunks.",
          prefill_no_cache),
    Entry(C, "wrong", "sdpa_is_causal_top_left",
          "Relies on scaled_dot_product_attention(is_causal=True), whose mask is aligned "
          "top-left, so a chunk's queries cannot see the cached keys beyond their own local "
          "index.",
          prefill_sdpa_is_causal),
    Entry(C, "wrong", "mask_sized_for_full_chunk",
          "Builds every chunk's mask with chunk_size rows, so a shorter last chunk's scores "
          "do not match it: a one-row chunk broadcasts into extra output rows (wrong shape) "
          "and other ragged chunks raise a shape error.",
          prefill_full_chunk_mask),
    Entry(C, "wrong", "attends_before_appending",
          "Lets the chunk attend to the cache before appending its own keys and values, so "
          "queries never see themselves or earlier tokens of their own chunk (the first "
          "chunk sees no key at all and gets zeros).",
          prefill_attends_before_append),
    Entry(C, "wrong", "full_causal_mask_up_front",
          "Builds one N x N causal mask up front and slices it for each chunk, which breaks "
          "the rule never to build an N x N tensor.",
          prefill_full_mask_sliced),
    Entry(C, "wrong", "merge_heads_without_transpose",
          "Merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head) "
          "without transposing heads and tokens back first.",
          prefill_merge_without_transpose),
    Entry(C, "right", "sdpa_with_bottom_right_mask", None, prefill_sdpa_bottom_right),
    Entry(C, "right", "per_head_einsum_float64", None, prefill_head_loop_einsum),
]
