"""Round k, lesson 11 (torch): decode_attention_intensity, paged_attention, chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


# ============================================================================ decode_attention_intensity
@add("decode_attention_intensity", "wrong", "floor_division",
     "It divides FLOPs by bytes with //, which floors the ratio, so an intensity below 1 (or "
     "any fractional one) comes out wrong.")
def dai_floor(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    moved = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // moved


@add("decode_attention_intensity", "wrong", "keys_only_bytes",
     "It counts only the bytes of the cached keys and forgets that the values are read too, "
     "doubling the intensity.")
def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    key_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / key_bytes


@add("decode_attention_intensity", "wrong", "bytes_per_query_head",
     "It sizes the cache reads with num_heads instead of num_kv_heads, as if every query head "
     "had its own K/V, so grouped-query sharing never shows.")
def dai_query_heads(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    moved = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / moved


@add("decode_attention_intensity", "wrong", "multiply_adds_not_flops",
     "It counts one multiply-add as one operation instead of 2 FLOPs, halving the intensity.")
def dai_macs(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    macs = 2 * batch_size * num_heads * seq_len * head_dim
    moved = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / moved


@add("decode_attention_intensity", "wrong", "division_precedence",
     "It writes flops / 2 * batch * kv_heads * n * d * bytes, which divides by 2 and then "
     "multiplies by the rest instead of dividing by the whole byte count.")
def dai_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


@add("decode_attention_intensity", "wrong", "counts_query_and_output_bytes",
     "It adds the bytes of the new queries and the outputs to the denominator, but the "
     "contract's bytes are only the K and V read from the cache.")
def dai_extra_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q_and_out = 2 * batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + q_and_out)


@add("decode_attention_intensity", "right", "fraction_exact")
def dai_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    score = Fraction(2 * batch_size * num_heads * seq_len * head_dim)
    mix = Fraction(2 * batch_size * num_heads * seq_len * head_dim)
    read = Fraction(2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)
    return float((score + mix) / read)


@add("decode_attention_intensity", "right", "closed_form_ratio")
def dai_closed(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


# ============================================================================ paged_attention
def _attend_one(q_b, k, v, n_rep):
    """q_b (H, d); k, v (G, n, d) -> (H, d), computed in at least float32."""
    c = torch.promote_types(q_b.dtype, torch.float32)
    k = k.to(c).repeat_interleave(n_rep, dim=0)
    v = v.to(c).repeat_interleave(n_rep, dim=0)
    s = torch.einsum("hd,hnd->hn", q_b.to(c), k) / math.sqrt(q_b.shape[-1])
    return torch.einsum("hn,hnd->hd", torch.softmax(s, dim=-1), v)


def _gather(pool, pages, n):
    return pool[pages].transpose(0, 1).reshape(pool.shape[1], -1, pool.shape[-1])[:, :n]


@add("paged_attention", "wrong", "page_and_slot_swapped",
     "It finds key t at page t % page_size and slot t // page_size, the two roles swapped, so it "
     "reads the wrong slots (or runs off the block table).")
def paged_swapped(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros_like(q, dtype=torch.promote_types(q.dtype, torch.float32))
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks = [k_pages[int(block_table[b, t % p]), :, t // p] for t in range(n)]
        vs = [v_pages[int(block_table[b, t % p]), :, t // p] for t in range(n)]
        out[b] = _attend_one(q[b], torch.stack(ks, 1), torch.stack(vs, 1), h // g)
    return out.to(q.dtype)


@add("paged_attention", "wrong", "whole_last_page",
     "It attends over every slot of the sequence's pages instead of only the first seq_lens[b] "
     "keys, so stale entries at the end of the last page are included.")
def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros_like(q, dtype=torch.promote_types(q.dtype, torch.float32))
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / p)].long()
        k = k_pages[pages].transpose(0, 1).reshape(g, -1, d)
        v = v_pages[pages].transpose(0, 1).reshape(g, -1, d)
        out[b] = _attend_one(q[b], k, v, h // g)
    return out.to(q.dtype)


@add("paged_attention", "wrong", "kv_heads_tiled",
     "It expands the K/V heads with Tensor.repeat, which tiles them, so query head h reads KV "
     "head h % G instead of h // (H // G).")
def paged_tiled(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(b_sz, h, d, dtype=torch.float64)
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / p)].long()
        k = _gather(k_pages, pages, n).double().repeat(h // g, 1, 1)
        v = _gather(v_pages, pages, n).double().repeat(h // g, 1, 1)
        s = torch.einsum("hd,hnd->hn", q[b].double(), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


@add("paged_attention", "wrong", "floor_page_count",
     "It takes seq_lens[b] // page_size pages, dropping the partly filled last page, so the "
     "last keys of a sequence whose length is not a multiple of page_size are lost.")
def paged_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros_like(q, dtype=torch.promote_types(q.dtype, torch.float32))
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :n // p].long()
        k = _gather(k_pages, pages, n)
        v = _gather(v_pages, pages, n)
        out[b] = _attend_one(q[b], k, v, h // g)
    return out.to(q.dtype)


@add("paged_attention", "wrong", "skips_length_one",
     "The guard for empty sequences tests n <= 1 instead of n == 0, so a sequence with a single "
     "cached key gets zeros instead of that key's value.")
def paged_skip_one(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros_like(q, dtype=torch.promote_types(q.dtype, torch.float32))
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n <= 1:
            continue
        pages = block_table[b, :math.ceil(n / p)].long()
        out[b] = _attend_one(q[b], _gather(k_pages, pages, n), _gather(v_pages, pages, n), h // g)
    return out.to(q.dtype)


@add("paged_attention", "wrong", "reshape_pages_without_transpose",
     "It reshapes the gathered (pages, G, page_size, d) block straight to (G, pages*page_size, "
     "d) without moving the group axis first, mixing KV heads and pages.")
def paged_reshape(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros_like(q, dtype=torch.promote_types(q.dtype, torch.float32))
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / p)].long()
        k = k_pages[pages].reshape(g, -1, d)[:, :n]
        v = v_pages[pages].reshape(g, -1, d)[:, :n]
        out[b] = _attend_one(q[b], k, v, h // g)
    return out.to(q.dtype)


@add("paged_attention", "right", "token_by_token_float64")
def paged_tokens(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p = k_pages.shape[1], k_pages.shape[2]
    per_group = h // g
    out = torch.zeros(b_sz, h, d, dtype=torch.float64)
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[b, t // p]), :, t % p] for t in range(n)])
        vals = torch.stack([v_pages[int(block_table[b, t // p]), :, t % p] for t in range(n)])
        for head in range(h):
            grp = head // per_group
            s = keys[:, grp].double() @ q[b, head].double() / math.sqrt(d)
            w = torch.exp(s - s.max())
            out[b, head] = (w / w.sum()) @ vals[:, grp].double()
    return out.to(q.dtype)


@add("paged_attention", "right", "vectorised_masked_gather")
def paged_vectorised(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, p = k_pages.shape[1], k_pages.shape[2]
    max_len = block_table.shape[1] * p
    t = torch.arange(max_len)
    page_ids = block_table.long()[:, t // p]
    slots = (t % p).expand(b_sz, max_len)
    k = k_pages[page_ids, :, slots].double()
    v = v_pages[page_ids, :, slots].double()
    k = k.repeat_interleave(h // g, dim=2)
    v = v.repeat_interleave(h // g, dim=2)
    s = torch.einsum("bhd,bthd->bht", q.double(), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    w = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("bht,bthd->bhd", w, v).to(q.dtype)


# ============================================================================ chunked_prefill
def _split(t, h):
    b, n, w = t.shape
    return t.view(b, n, h, w // h).transpose(1, 2)


@add("chunked_prefill", "wrong", "chunk_mask_top_left",
     "It builds each chunk's mask as tril over (chunk, stop) aligned top-left, so query r of a "
     "later chunk sees only keys 0..r instead of every key up to its own position.")
def prefill_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    v_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(c)
        k_cache[:, :, start:stop] = _split(xc @ w_k, num_heads).to(c)
        v_cache[:, :, start:stop] = _split(xc @ w_v, num_heads).to(c)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(stop - start, stop, dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


@add("chunked_prefill", "wrong", "no_cache_own_chunk_only",
     "Each chunk attends only to its own keys and values, forgetting the cached keys of the "
     "earlier chunks.")
def prefill_own_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        rows = xc.shape[1]
        q = _split(xc @ w_q, num_heads).to(c)
        k = _split(xc @ w_k, num_heads).to(c)
        v = _split(xc @ w_v, num_heads).to(c)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(rows, rows, dtype=torch.bool).tril(), float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v
        outs.append(ctx.transpose(1, 2).reshape(b, rows, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


@add("chunked_prefill", "wrong", "cache_written_at_start",
     "It writes every chunk's keys and values at the start of the cache (slots 0..C-1) instead "
     "of at the chunk's own offset, overwriting earlier chunks and leaving later slots empty.")
def prefill_write_zero(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    k_cache = x.new_zeros((b, num_heads, n, dh), dtype=c)
    v_cache = x.new_zeros((b, num_heads, n, dh), dtype=c)
    pos = torch.arange(n)
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        length = stop - start
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(c)
        k_cache[:, :, :length] = _split(xc @ w_k, num_heads).to(c)
        v_cache[:, :, :length] = _split(xc @ w_v, num_heads).to(c)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k_cache[:, :, :stop]) / math.sqrt(dh)
        allowed = pos[None, :stop] <= pos[start:stop, None]
        s = s.masked_fill(~allowed, -math.inf)
        ctx = torch.einsum("bhqk,bhkd->bqhd", torch.softmax(s, -1), v_cache[:, :, :stop])
        outs.append(ctx.reshape(b, length, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


@add("chunked_prefill", "wrong", "full_score_matrix",
     "It computes the full N x N causal score matrix at once and only slices the chunks out "
     "afterwards, so the values are right but it builds the tensor the exercise forbids.")
def prefill_full(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    q = _split(x @ w_q, num_heads).to(c)
    k = _split(x @ w_k, num_heads).to(c)
    v = _split(x @ w_v, num_heads).to(c)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1)
    outs = []
    for start in range(0, n, chunk_size):
        ctx = p[:, :, start:start + chunk_size] @ v
        outs.append(ctx.transpose(1, 2).flatten(2))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


@add("chunked_prefill", "wrong", "merge_without_transpose",
     "It merges each chunk's heads by reshaping (B, H, C, d_head) straight to (B, C, d_model) "
     "without transposing, scrambling tokens and heads.")
def prefill_merge(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(c)
        ks.append(_split(xc @ w_k, num_heads).to(c))
        vs.append(_split(xc @ w_v, num_heads).to(c))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(stop - start, stop, dtype=torch.bool).tril(start)
        s = s.masked_fill(~mask, float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v
        outs.append(ctx.reshape(b, stop - start, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


@add("chunked_prefill", "wrong", "strict_causal",
     "Its causal test is key < query instead of key <= query, so no token attends to itself "
     "(and the first token sees nothing).")
def prefill_strict(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    v_cache = torch.zeros(b, num_heads, n, dh, dtype=c)
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(c)
        k_cache[:, :, start:stop] = _split(xc @ w_k, num_heads).to(c)
        v_cache[:, :, start:stop] = _split(xc @ w_v, num_heads).to(c)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        qpos = torch.arange(start, stop)[:, None]
        kpos = torch.arange(stop)[None, :]
        s = s.masked_fill(~(kpos < qpos), float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
        outs.append((p @ v_cache[:, :, :stop]).transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


@add("chunked_prefill", "right", "sdpa_per_chunk")
def prefill_sdpa(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    c = torch.float64 if x.dtype == torch.float64 else torch.float32
    keys, values, outs = [], [], []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        rows = xc.shape[1]
        q = _split(xc @ w_q, num_heads).to(c)
        keys.append(_split(xc @ w_k, num_heads).to(c))
        values.append(_split(xc @ w_v, num_heads).to(c))
        k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
        total = k.shape[2]
        mask = torch.ones(rows, total, dtype=torch.bool).tril(total - rows)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outs.append(ctx.transpose(1, 2).reshape(b, rows, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


@add("chunked_prefill", "right", "float64_logsumexp")
def prefill_lse(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    dh = d_model // num_heads
    k_all = torch.empty(b, num_heads, 0, dh, dtype=torch.float64)
    v_all = torch.empty(b, num_heads, 0, dh, dtype=torch.float64)
    pieces = []
    start = 0
    while start < n:
        stop = min(n, start + chunk_size)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).double()
        k_all = torch.cat([k_all, _split(xc @ w_k, num_heads).double()], dim=2)
        v_all = torch.cat([v_all, _split(xc @ w_v, num_heads).double()], dim=2)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k_all) / math.sqrt(dh)
        visible = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]
        s = s.masked_fill(~visible, -math.inf)
        p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
        pieces.append(torch.einsum("bhqk,bhkd->bqhd", p, v_all).reshape(b, stop - start, -1))
        start = stop
    return (torch.cat(pieces, dim=1) @ w_o.double()).to(x.dtype)
