"""Lesson 11 (serving): decode_attention_intensity, paged_attention, chunked_prefill, torch."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ---------------------------------------------------------------- decode_attention_intensity
def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_every_query_head_reads(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element)


def dai_bits(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element * 8)


def dai_counts_query_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q = batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + q)


def dai_inverted(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element) / flops


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def dai_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_seq_head = 2 * seq_len * head_dim + 2 * seq_len * head_dim
    flops = sum(per_seq_head for _ in range(batch_size * num_heads))
    bytes_read = sum(seq_len * head_dim * bytes_per_element
                     for _ in range(batch_size * num_kv_heads) for _kv in "KV")
    return float(Fraction(flops, bytes_read))


# ---------------------------------------------------------------- paged_attention
def _work(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _paged(q, k_pages, v_pages, block_table, seq_lens, *, swap_slot=False, head_mod=False,
           no_truncate=False, len_minus_one=False, pool_by_seq=False, no_transpose=False):
    b_, h_, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    w = _work(q.dtype)
    out = torch.zeros(b_, h_, d, dtype=w)
    for b in range(b_):
        n = int(seq_lens[b]) - (1 if len_minus_one else 0)
        if n <= 0:
            continue
        n_pages = block_table.shape[1] if no_truncate else math.ceil(n / ps)
        if swap_slot:
            ks = torch.stack([k_pages[int(block_table[b, t % ps]), :, t // ps] for t in range(n)],
                             1)
            vs = torch.stack([v_pages[int(block_table[b, t % ps]), :, t // ps] for t in range(n)],
                             1)
        else:
            pages = torch.arange(n_pages) + b if pool_by_seq else block_table[b, :n_pages].long()
            kp, vp = k_pages[pages], v_pages[pages]
            if no_transpose:
                ks, vs = kp.reshape(g, -1, d), vp.reshape(g, -1, d)
            else:
                ks = kp.transpose(0, 1).reshape(g, -1, d)
                vs = vp.transpose(0, 1).reshape(g, -1, d)
            if not no_truncate:
                ks, vs = ks[:, :n], vs[:, :n]
        heads = torch.arange(h_)
        grp = heads % g if head_mod else heads // (h_ // g)
        k, v = ks[grp].to(w), vs[grp].to(w)
        s = (q[b].to(w)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, swap_slot=True)


def pa_head_modulo(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, head_mod=True)


def pa_no_truncation(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, no_truncate=True)


def pa_len_minus_one(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, len_minus_one=True)


def pa_pool_by_sequence(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, pool_by_seq=True)


def pa_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, no_transpose=True)


def pa_token_gather_loop(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b].item())
        if n == 0:
            continue
        keys = torch.stack([k_pages[block_table[b, t // P], :, t % P] for t in range(n)])
        vals = torch.stack([v_pages[block_table[b, t // P], :, t % P] for t in range(n)])
        for h in range(H):
            kh = keys[:, h // rep].double()  # (n, d)
            vh = vals[:, h // rep].double()
            s = kh @ q[b, h].double() / math.sqrt(d)
            p = torch.exp(s - s.max())
            out[b, h] = (p / p.sum()) @ vh
    return out.to(q.dtype)


def pa_masked_vectorised(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_t = block_table.shape[1] * P
    w = _work(q.dtype)
    t = torch.arange(max_t)
    page = block_table.long()[:, t // P]  # (B, T)
    slot = (t % P).expand(B, -1)  # (B, T)
    k = k_pages[page, :, slot].to(w)  # (B, T, G, d)
    v = v_pages[page, :, slot].to(w)
    k = k.permute(0, 2, 1, 3).repeat_interleave(H // G, dim=1)  # (B, H, T, d)
    v = v.permute(0, 2, 1, 3).repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(w), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    p = torch.softmax(s, dim=-1).nan_to_num(nan=0.0)
    return torch.einsum("bht,bhtd->bhd", p, v).to(q.dtype)


# ---------------------------------------------------------------- chunked_prefill
def _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, top_left=False, no_cache=False,
        drop_tail=False, offset_stop=False, front_slot=False):
    b, n, dm = x.shape
    h = num_heads
    dh = dm // h
    w = _work(x.dtype)
    kc = torch.zeros(b, h, n, dh, dtype=w)
    vc = torch.zeros(b, h, n, dh, dtype=w)
    outs = []
    last = (n // chunk_size) * chunk_size if drop_tail else n
    for s0 in range(0, last, chunk_size):
        s1 = min(s0 + chunk_size, n)
        xc = x[:, s0:s1].to(w)
        sp = lambda t: t.reshape(b, s1 - s0, h, dh).transpose(1, 2)  # noqa: E731
        q = sp(xc @ w_q.to(w))
        slot = slice(0, s1 - s0) if front_slot else slice(s0, s1)
        kc[:, :, slot] = sp(xc @ w_k.to(w))
        vc[:, :, slot] = sp(xc @ w_v.to(w))
        if no_cache:
            k, v, lo = kc[:, :, s0:s1], vc[:, :, s0:s1], s0
        else:
            k, v, lo = kc[:, :, :s1], vc[:, :, :s1], 0
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        c, nk = s1 - s0, s1 - lo
        diag = 0 if top_left else (s1 if offset_stop else nk - c)
        allowed = torch.ones(c, nk, dtype=torch.bool).tril(diag)
        s = s.masked_fill(~allowed, -math.inf)
        outs.append((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, c, dm))
    return (torch.cat(outs, 1) @ w_o.to(w)).to(x.dtype)


def cp_top_left_chunk_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, top_left=True)


def cp_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, no_cache=True)


def cp_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, drop_tail=True)


def cp_offset_by_stop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, offset_stop=True)


def cp_writes_front_of_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, front_slot=True)


def cp_full_attention(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    dh = dm // num_heads
    w = _work(x.dtype)
    sp = lambda t: t.reshape(b, n, num_heads, dh).transpose(1, 2)  # noqa: E731
    xw = x.to(w)
    q, k, v = sp(xw @ w_q.to(w)), sp(xw @ w_k.to(w)), sp(xw @ w_v.to(w))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return (ctx.transpose(1, 2).reshape(b, n, dm) @ w_o.to(w)).to(x.dtype)


def cp_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    if dm % num_heads:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    dh = dm // num_heads
    w = _work(x.dtype)
    keys, values, outs = [], [], []
    start = 0
    while start < n:
        stop = min(n, start + chunk_size)
        xc = x[:, start:stop].to(w)
        heads = lambda t: t.view(b, stop - start, num_heads, dh).permute(0, 2, 1, 3)  # noqa
        q = heads(xc @ w_q.to(w))
        keys.append(heads(xc @ w_k.to(w)))
        values.append(heads(xc @ w_v.to(w)))
        k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
        qpos = torch.arange(start, stop)[:, None]
        kpos = torch.arange(stop)[None, :]
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=kpos <= qpos)
        outs.append(ctx.permute(0, 2, 1, 3).reshape(b, stop - start, dm))
        start = stop
    return (torch.cat(outs, dim=1) @ w_o.to(w)).to(x.dtype)


def cp_online_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Each chunk attends to the cached prefix (no mask) and to itself (causal), merged by
    log-sum-exp, in float64."""
    b, n, dm = x.shape
    dh = dm // num_heads
    x64 = x.double()
    split = lambda t: t.reshape(b, -1, num_heads, dh).transpose(1, 2)  # noqa: E731
    k_all = torch.empty(b, num_heads, 0, dh, dtype=torch.float64)
    v_all = torch.empty(b, num_heads, 0, dh, dtype=torch.float64)
    outs = []
    for s0 in range(0, n, chunk_size):
        xc = x64[:, s0:s0 + chunk_size]
        c = xc.shape[1]
        q = split(xc @ w_q.double()) / math.sqrt(dh)
        k_new, v_new = split(xc @ w_k.double()), split(xc @ w_v.double())
        s_own = (q @ k_new.transpose(-2, -1)).masked_fill(
            torch.ones(c, c, dtype=torch.bool).triu(1), -math.inf)
        s_old = q @ k_all.transpose(-2, -1)
        lse_own = torch.logsumexp(s_own, -1, keepdim=True)
        lse_old = torch.logsumexp(s_old, -1, keepdim=True) if s0 else torch.full_like(
            lse_own, -math.inf)
        lse = torch.logaddexp(lse_own, lse_old)
        ctx = torch.exp(s_own - lse) @ v_new
        if s0:
            ctx = ctx + torch.exp(s_old - lse) @ v_all
        outs.append(ctx.transpose(1, 2).reshape(b, c, dm))
        k_all = torch.cat([k_all, k_new], 2)
        v_all = torch.cat([v_all, v_new], 2)
    return (torch.cat(outs, 1) @ w_o.double()).to(x.dtype)


E = "decode_attention_intensity"
ENTRIES = [
    Entry(E, "wrong", "reads_keys_only", "The bytes count only the cached keys, forgetting the "
          "values are read too.", dai_keys_only),
    Entry(E, "wrong", "scores_flops_only", "The FLOPs count only the score products and leave "
          "out the weighted sum over the values.", dai_scores_only),
    Entry(E, "wrong", "every_query_head_reads_kv", "The bytes use num_heads instead of "
          "num_kv_heads, as if each query head read its own K/V.",
          dai_every_query_head_reads),
    Entry(E, "wrong", "bits_in_denominator", "It multiplies the bytes by 8 (bits), giving "
          "FLOPs per bit.", dai_bits),
    Entry(E, "wrong", "counts_query_bytes", "It adds the new query vectors to the bytes read, "
          "which the definition limits to K and V from the cache.", dai_counts_query_bytes),
    Entry(E, "wrong", "ratio_inverted", "It returns bytes per FLOP instead of FLOPs per byte.",
          dai_inverted),
    Entry(E, "right", "closed_form", None, dai_closed_form),
    Entry(E, "right", "fraction_sums", None, dai_fraction),
]

E = "paged_attention"
ENTRIES += [
    Entry(E, "wrong", "page_and_slot_swapped", "It looks key t up in page t % page_size at "
          "slot t // page_size, swapping the page index and the slot.", pa_page_slot_swapped),
    Entry(E, "wrong", "head_modulo_groups", "Query head h reads KV head h % G instead of "
          "h // (H // G).", pa_head_modulo),
    Entry(E, "wrong", "no_truncation_to_seq_len", "It attends to every slot of all max_pages "
          "listed pages instead of only the first seq_lens[b] keys.", pa_no_truncation),
    Entry(E, "wrong", "length_minus_one", "It uses seq_lens[b] - 1 keys, treating the length "
          "as the index of the last key.", pa_len_minus_one),
    Entry(E, "wrong", "pool_indexed_by_sequence", "It reads pages b, b+1, ... of the pool "
          "instead of the pages the block table lists for sequence b.", pa_pool_by_sequence),
    Entry(E, "wrong", "reshape_without_transpose", "The gathered (pages, G, page_size, d) "
          "block is reshaped to (G, pages*page_size, d) without moving G to the front first.",
          pa_reshape_without_transpose),
    Entry(E, "right", "per_token_gather_loop", None, pa_token_gather_loop),
    Entry(E, "right", "masked_vectorised_gather", None, pa_masked_vectorised),
]

E = "chunked_prefill"
ENTRIES += [
    Entry(E, "wrong", "top_left_chunk_mask", "The chunk's (C, stop) mask is aligned top-left "
          "(tril without offset), so query i of a later chunk sees only cache keys 0..i "
          "instead of every key up to its own position.",
          cp_top_left_chunk_mask),
    Entry(E, "wrong", "own_chunk_only", "Each chunk attends only to its own keys and values, "
          "ignoring the cache of earlier chunks.", cp_own_chunk_only),
    Entry(E, "wrong", "drops_ragged_chunk", "The loop stops at N // chunk_size * chunk_size, "
          "so a ragged last chunk is never computed.", cp_drops_ragged_chunk),
    Entry(E, "wrong", "mask_offset_by_stop", "The mask's diagonal offset is stop instead of "
          "stop - chunk length (= start), so every query sees all keys of its chunk.",
          cp_offset_by_stop),
    Entry(E, "wrong", "cache_written_at_front", "Every chunk's keys and values are written at "
          "the front of the cache (slots 0..C-1) instead of at start..stop-1.",
          cp_writes_front_of_cache),
    Entry(E, "wrong", "one_sdpa_over_all_queries", "It runs one causal SDPA call over the whole "
          "sequence instead of chunk by chunk.", cp_full_attention),
    Entry(E, "right", "list_cache_sdpa_per_chunk", None, cp_list_cache_sdpa),
    Entry(E, "right", "prefix_and_own_lse_merge", None, cp_online_float64),
]
