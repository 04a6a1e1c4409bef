"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- decode_attention_intensity
def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(flops // bytes_read)


def intensity_bits(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    traffic = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element * 8
    return flops / traffic


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: 4 B H N d / (2 B G N d bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query = 0
    for _ in range(seq_len):
        per_query += 2 * head_dim  # one score
        per_query += 2 * head_dim  # one value row into the weighted sum
    flops = per_query * num_heads * batch_size
    per_group = seq_len * head_dim * bytes_per_element * 2
    return float(Fraction(flops, per_group * num_kv_heads * batch_size))


# ----------------------------------------------------------------------------- paged_attention
def paged_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : n // P].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-1, -2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_tiles(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[used].permute(1, 0, 2, 3).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[used].permute(1, 0, 2, 3).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat(H // G, 1, 1)
        v = v.repeat(H // G, 1, 1)
        w = torch.softmax(torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d), dim=-1)
        res[b] = torch.einsum("hn,hnd->hd", w, v)
    return res.to(q.dtype)


def paged_reshape_no_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : (n + P - 1) // P].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_div_mod_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
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
        K = torch.stack(keys, dim=1).double()  # (G, n, d)
        V = torch.stack(vals, dim=1).double()
        for h in range(H):
            s = K[h // rep] @ q[b, h].double() / math.sqrt(d)
            out[b, h] = torch.softmax(s, 0) @ V[h // rep]
    return out.to(q.dtype)


def paged_softmax_size_one_axis(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)  # (H, 1, n)
        out[b] = (torch.softmax(s, dim=1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(H):
            g = h // rep
            if n == 0:
                continue
            ks = torch.stack([k_pages[int(block_table[b, t // P]), g, t % P] for t in range(n)])
            vs = torch.stack([v_pages[int(block_table[b, t // P]), g, t % P] for t in range(n)])
            s = ks.double() @ q[b, h].double() / math.sqrt(d)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ vs.double()
    return out.to(q.dtype)


def paged_padded_batch(q, k_pages, v_pages, block_table, seq_lens):
    # gather every listed page for every sequence, then mask by length
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    table = block_table.long()
    L = table.shape[1] * P
    k = k_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, L, d).double()
    v = v_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, L, d).double()
    k = k.repeat_interleave(H // G, dim=1)  # (B, H, L, d)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhld->bhl", q.double(), k) / math.sqrt(d)
    valid = torch.arange(L)[None, :] < seq_lens.long()[:, None]  # (B, L)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z == 0, torch.ones_like(z), z)
    return torch.einsum("bhl,bhld->bhd", w, v).to(q.dtype)


# ----------------------------------------------------------------------------- chunked_prefill
def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s in range(0, N, chunk_size):
        xc = x[:, s:s + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k = torch.cat(ks, dim=2)
        v = torch.cat(vs, dim=2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        outs.append(o.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    hd = dm // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        c = stop - start
        q = (xc @ w_q).reshape(b, c, num_heads, hd).transpose(1, 2).to(ct)
        k_cache = (xc @ w_k).reshape(b, c, num_heads, hd).transpose(1, 2).to(ct)
        v_cache = (xc @ w_v).reshape(b, c, num_heads, hd).transpose(1, 2).to(ct)
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(hd)
        keep = torch.ones(c, c, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, -math.inf)
        o = torch.softmax(s, -1) @ v_cache
        pieces.append(o.transpose(1, 2).reshape(b, c, dm))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros((B, H, N, dh), dtype=ct)
    vc = torch.zeros((B, H, N, dh), dtype=ct)
    outs = []
    for i in range(max(N // chunk_size, 1)):
        start, stop = i * chunk_size, min((i + 1) * chunk_size, N)
        xc = x[:, start:stop]
        C = stop - start
        q = (xc @ w_q).reshape(B, C, H, dh).transpose(1, 2).to(ct)
        kc[:, :, start:stop] = (xc @ w_k).reshape(B, C, H, dh).transpose(1, 2).to(ct)
        vc[:, :, start:stop] = (xc @ w_v).reshape(B, C, H, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        vis = torch.ones(C, stop, dtype=torch.bool).tril(stop - C)
        s = s.masked_fill(~vis, -math.inf)
        outs.append((torch.softmax(s, -1) @ vc[:, :, :stop]).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = None, None, []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        C = stop - start
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k_new = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v_new = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        keys = k_new if keys is None else torch.cat([keys, k_new], dim=2)
        values = v_new if values is None else torch.cat([values, v_new], dim=2)
        s = q @ keys.transpose(-2, -1) / math.sqrt(D)
        allowed = torch.ones(C, stop, dtype=torch.bool).tril(start)
        s = s.masked_fill(~allowed, -math.inf)
        outs.append((torch.softmax(s, dim=-1) @ values).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_append_after_attention(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros((B, num_heads, 0, dh), dtype=ct)
    v_cache = torch.zeros((B, num_heads, 0, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)  # (B, H, C, start)
        o = torch.softmax(s, dim=-1) @ v_cache
        outs.append(o.transpose(1, 2).reshape(B, C, D))
        k_new = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v_new = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty((B, num_heads, N, dh), dtype=ct)
    vc = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        C = stop - start
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).permute(0, 2, 1, 3).to(ct)
        kc[:, :, start:stop] = (xc @ w_k).reshape(B, C, num_heads, dh).permute(0, 2, 1, 3).to(ct)
        vc[:, :, start:stop] = (xc @ w_v).reshape(B, C, num_heads, dh).permute(0, 2, 1, 3).to(ct)
        s = q @ kc[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(C, stop, dtype=torch.bool).tril(diagonal=start)
        s = s.masked_fill(~mask, -math.inf)
        ctx = torch.softmax(s, -1) @ vc[:, :, :stop]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_sdpa_bool_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        C = stop - start
        q = (xc @ w_q.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        ks.append((xc @ w_k.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        vs.append((xc @ w_v.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        rows = torch.arange(start, stop)[:, None]
        cols = torch.arange(stop)[None, :]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=cols <= rows)
        outs.append(o.transpose(1, 2).flatten(2))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_heads_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    # project everything once, then per chunk and head attend to the prefix in float64
    B, N, D = x.shape
    dh = D // num_heads
    x64 = x.double()
    Q, K, V = x64 @ w_q.double(), x64 @ w_k.double(), x64 @ w_v.double()
    ctx = torch.zeros((B, N, D), dtype=torch.float64)
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        pos = torch.arange(start, stop)
        for h in range(num_heads):
            cols = slice(h * dh, (h + 1) * dh)
            s = torch.einsum("bqe,bke->bqk", Q[:, start:stop, cols], K[:, :stop, cols])
            s = s / math.sqrt(dh)
            s = torch.where(torch.arange(stop)[None, :] > pos[:, None], -math.inf, s)
            p = torch.softmax(s, dim=-1)
            ctx[:, start:stop, cols] = torch.einsum("bqk,bke->bqe", p, V[:, :stop, cols])
    return (ctx @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "scores_only",
          "counts only the score products (2 B H N d) and forgets the weighted sum of the values, "
          "halving the FLOPs", intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "reads_keys_only",
          "counts the bytes of the cached keys only and forgets that the values are read too",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "bytes_per_query_head",
          "counts the K/V bytes with num_heads instead of num_kv_heads, as if every query head "
          "read its own copy: the GQA sharing disappears from the ratio",
          intensity_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, which floors a ratio below 1 (or any non-integer "
          "ratio) to a whole number", intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "bits_not_bytes",
          "multiplies the traffic by 8, counting bits read instead of bytes",
          intensity_bits),
    Entry("decode_attention_intensity", "wrong", "division_precedence",
          "writes flops / 2 * B * G * N * d * bytes, which divides by 2 only and multiplies by "
          "the rest: the denominator needs parentheses", intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed_form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_count", None, intensity_fraction),

    Entry("paged_attention", "wrong", "floor_page_count",
          "takes n // page_size pages instead of ceil(n / page_size), so the keys on a partly "
          "filled last page are dropped", paged_floor_pages),
    Entry("paged_attention", "wrong", "repeat_tiles_groups",
          "widens the K/V heads with .repeat(H // G, 1, 1), which tiles the groups (head h reads "
          "group h % G) instead of repeat_interleave (group h // (H // G))", paged_repeat_tiles),
    Entry("paged_attention", "wrong", "pages_reshaped_without_transpose",
          "reshapes the gathered pages (p, G, page_size, d) straight to (G, p * page_size, d) "
          "without moving the group axis first, which mixes pages and groups",
          paged_reshape_no_transpose),
    Entry("paged_attention", "wrong", "div_mod_swapped",
          "looks token t up in page block_table[b, t % page_size] at slot t // page_size: the "
          "page index and the slot are swapped (an IndexError once t % page_size passes the "
          "table's width or t // page_size the page size, wrong keys otherwise)", paged_div_mod_swapped),
    Entry("paged_attention", "wrong", "softmax_over_size_one_axis",
          "applies the softmax over dim=1 of the (H, 1, n) scores, an axis of size 1, so every "
          "weight is 1 and the values are summed, not averaged", paged_softmax_size_one_axis),
    Entry("paged_attention", "wrong", "no_scale",
          "leaves out the 1/sqrt(d) scale of the scores", paged_no_scale),
    Entry("paged_attention", "right", "token_by_token_loops", None, paged_token_loop),
    Entry("paged_attention", "right", "padded_batch_mask", None, paged_padded_batch),

    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "passes is_causal=True to scaled_dot_product_attention for a chunk of C queries over "
          "the whole cache; SDPA aligns that mask top-left, so the chunk sees only the first C "
          "keys instead of the prefix and its own causal part", prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "cache_overwritten",
          "assigns each chunk's keys and values to the cache instead of appending them, so a "
          "chunk attends only to itself and never to earlier chunks", prefill_cache_overwritten),
    Entry("chunked_prefill", "wrong", "ragged_chunk_dropped",
          "loops over N // chunk_size chunks, so the last, shorter chunk is never computed and "
          "the output is too short when chunk_size does not divide N",
          prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "cache_appended_after_attention",
          "attends to the cache before appending the chunk's own keys and values, so each chunk "
          "sees only the earlier chunks (the first chunk nothing) and never causally itself",
          prefill_append_after_attention),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2) first, which mixes heads and tokens",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "right", "sdpa_with_offset_bool_mask", None, prefill_sdpa_bool_mask),
    Entry("chunked_prefill", "right", "per_head_einsum_float64", None, prefill_heads_loop_float64),
]
