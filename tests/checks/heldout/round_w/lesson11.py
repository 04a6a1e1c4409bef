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
    flops = 2 * batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_all_heads_read(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / kv_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_elements_not_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cached = 2 * batch_size * num_kv_heads * seq_len * head_dim  # K and V values read
    return flops / cached


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: (4 B H N d) / (2 B G N d bytes) = 2 H / (G bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction_loop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 0
    for _seq in range(batch_size):
        for _head in range(num_heads):
            flops += seq_len * head_dim * 2  # scores: one multiply-add per key and feature
            flops += seq_len * head_dim * 2  # weighted sum of the values
    bytes_read = 0
    for _seq in range(batch_size):
        for _group in range(num_kv_heads):
            bytes_read += 2 * seq_len * head_dim * bytes_per_element  # K and V
    return float(Fraction(flops, bytes_read))


# ----------------------------------------------------------------------------- paged_attention
def paged_heads_modulo(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat(H // G, 1, 1)  # (H, n, d)
        v = v.repeat(H // G, 1, 1)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_one_key_too_many(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    ct = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros(batch, heads, d, dtype=ct)
    for b in range(batch):
        n = int(seq_lens[b])
        ks, vs = [], []
        for t in range(n + 1):
            p = int(block_table[b, t // page])
            ks.append(k_pages[p, :, t % page])
            vs.append(v_pages[p, :, t % page])
        k = torch.stack(ks, 1).to(ct).repeat_interleave(rep, 0)  # (H, n + 1, d)
        v = torch.stack(vs, 1).to(ct).repeat_interleave(rep, 0)
        w = torch.softmax(torch.einsum("hd,htd->ht", q[b].to(ct), k) / math.sqrt(d), -1)
        res[b] = torch.einsum("ht,htd->hd", w, v)
    return res.to(q.dtype)


def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    head_group = torch.arange(H) // (H // G)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        page_ids = block_table[b, t % P].long()
        slots = t // P
        k = k_pages[page_ids, :, slots].transpose(0, 1).to(ct)  # (G, n, d)
        v = v_pages[page_ids, :, slots].transpose(0, 1).to(ct)
        k, v = k[head_group], v[head_group]
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_block_table_ignored(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        k = k_pages[t // P, :, t % P].permute(1, 0, 2).to(ct)  # (G, n, d)
        v = v_pages[t // P, :, t % P].permute(1, 0, 2).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (k @ q[b].to(ct)[:, :, None])[..., 0] / math.sqrt(d)  # (H, n)
        out[b] = (torch.softmax(s, -1)[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def paged_masked_no_guard(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    num_pages, G, P, _ = k_pages.shape
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    k = k_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    k = k.repeat_interleave(H // G, dim=1)  # (B, H, T, d)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.softmax(s, dim=-1)
    return torch.einsum("bht,bhtd->bhd", w, v).to(q.dtype)


def paged_scale_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :(n + P - 1) // P].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = q[b].to(ct)[:, None] @ k.transpose(-1, -2) / math.sqrt(k_pages.shape[-2])
        out[b] = (torch.softmax(s, dim=-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_token_gather_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    group_of = [h // (H // G) for h in range(H)]
    result = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)],
                           dim=1).double()  # (G, n, d)
        vals = torch.stack([v_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)],
                           dim=1).double()
        for h in range(H):
            g = group_of[h]
            logits = keys[g] @ q[b, h].double() / math.sqrt(d)  # (n,)
            logits = logits - logits.max()
            e = torch.exp(logits)
            result[b, h] = (e / e.sum()) @ vals[g]
    return result.to(q.dtype)


def paged_padded_batch(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    ct = torch.promote_types(q.dtype, torch.float32)
    t = torch.arange(T)
    num_pages = k_pages.shape[0]
    pages = block_table.long().clamp(0, num_pages - 1)[:, t // P]  # (B, T); junk past n is masked
    slots = (t % P).expand(B, T)
    k = k_pages[pages, :, slots].to(ct)  # (B, T, G, d)
    v = v_pages[pages, :, slots].to(ct)
    grp = torch.arange(H) // (H // G)
    k, v = k[:, :, grp], v[:, :, grp]  # (B, T, H, d)
    s = torch.einsum("bhd,bthd->bht", q.to(ct), k) * (1.0 / math.sqrt(d))
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, :]  # (B, 1, T)
    s = torch.where(valid, s, torch.full_like(s, -math.inf))
    w = torch.softmax(s, dim=-1)
    w = torch.where(valid, w, torch.zeros_like(w))  # NaN rows of empty sequences -> 0
    return torch.einsum("bht,bthd->bhd", w, v).to(q.dtype)


# ----------------------------------------------------------------------------- chunked_prefill
def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        q = (xc @ w_q).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s:e] = (xc @ w_k).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s:e] = (xc @ w_v).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(e - s, e, dtype=torch.bool).tril()  # (C, stop)
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, -1) @ vc[:, :, :e]
        outs.append(ctx.transpose(1, 2).reshape(B, e - s, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        c = e - s
        q = (xc @ w_q).view(B, c, num_heads, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).view(B, c, num_heads, dh).transpose(1, 2).to(ct)
        v = (xc @ w_v).view(B, c, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(c, c, dtype=torch.bool).tril(), -math.inf)
        outs.append((torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(B, c, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_drops_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for c in range(n // chunk_size):
        start, stop = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(batch, -1, num_heads, d_head).transpose(1, 2).to(ct)
        keys.append((xc @ w_k).reshape(batch, -1, num_heads, d_head).transpose(1, 2).to(ct))
        values.append((xc @ w_v).reshape(batch, -1, num_heads, d_head).transpose(1, 2).to(ct))
        k = torch.cat(keys, dim=2)
        v = torch.cat(values, dim=2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        mask = torch.ones(chunk_size, stop, dtype=torch.bool).tril(stop - chunk_size)
        sc = sc.masked_fill(~mask, -math.inf)
        outs.append((torch.softmax(sc, dim=-1) @ v).transpose(1, 2).reshape(batch, -1, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        q = (xc @ w_q).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s:e] = (xc @ w_k).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s:e] = (xc @ w_v).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(e - s, e, dtype=torch.bool).tril(s)
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, -1) @ vc[:, :, :e]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, e - s, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_strict_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, H, N, dh, dtype=ct)
    v_cache = torch.zeros(B, H, N, dh, dtype=ct)
    pieces = []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        xc = x[:, start:stop]
        C = stop - start
        q = (xc @ w_q).view(B, C, H, dh).transpose(1, 2).to(ct)
        k_cache[:, :, start:stop] = (xc @ w_k).view(B, C, H, dh).transpose(1, 2).to(ct)
        v_cache[:, :, start:stop] = (xc @ w_v).view(B, C, H, dh).transpose(1, 2).to(ct)
        scores = q @ k_cache[:, :, :stop].transpose(-1, -2) / math.sqrt(dh)
        qpos = torch.arange(start, stop)[:, None]
        kpos = torch.arange(stop)[None, :]
        scores = scores.masked_fill(~(kpos < qpos), -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v_cache[:, :, :stop]
        pieces.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        q = (xc @ w_q).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s:e] = (xc @ w_k).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s:e] = (xc @ w_v).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(e - s, e, dtype=torch.bool).tril(s), -math.inf)
        ctx = torch.softmax(sc, -1) @ vc[:, :, :e]
        outs.append(ctx.transpose(1, 2).reshape(B, e - s, D))
    return torch.cat(outs, 1).to(x.dtype)


def prefill_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    wq, wk, wv = w_q.to(ct), w_k.to(ct), w_v.to(ct)
    cache_k, cache_v, ctxs = [], [], []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size].to(ct)
        c = xc.shape[1]
        stop = start + c
        q = (xc @ wq).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        cache_k.append((xc @ wk).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        cache_v.append((xc @ wv).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        k = torch.cat(cache_k, dim=2)
        v = torch.cat(cache_v, dim=2)
        visible = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]  # (c, stop)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)
        ctxs.append(ctx.transpose(1, 2).flatten(2))
    return (torch.cat(ctxs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_per_head_f64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    out = torch.zeros(B, N, D, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        k_all = torch.zeros(B, N, dh, dtype=torch.float64)  # this head's cache
        v_all = torch.zeros(B, N, dh, dtype=torch.float64)
        start = 0
        while start < N:
            stop = min(start + chunk_size, N)
            xc = xd[:, start:stop]
            q = xc @ w_q.double()[:, cols]
            k_all[:, start:stop] = xc @ w_k.double()[:, cols]
            v_all[:, start:stop] = xc @ w_v.double()[:, cols]
            s = torch.einsum("bid,bjd->bij", q, k_all[:, :stop]) / math.sqrt(dh)
            future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
            s = s.masked_fill(future, -math.inf)
            ctx = torch.softmax(s, dim=-1) @ v_all[:, :stop]
            out[:, start:stop] += ctx @ w_o.double()[cols, :]
            start = stop
    return out.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "weighted_sum_not_counted",
          "counts only the score product q . k (2 B H N d FLOPs) and forgets the weighted sum "
          "of the values, so the intensity is half the true one", intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "values_not_read",
          "counts the bytes of the cached keys only, forgetting that V is read from the cache "
          "too, so the intensity comes out twice too high", intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "kv_read_per_query_head",
          "counts the cache bytes with num_heads instead of num_kv_heads, as if every query "
          "head read its own K and V; with GQA/MQA the shared heads are read once",
          intensity_all_heads_read),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides with // so the result is a truncated int (0 instead of 0.5) rather than "
          "the float intensity", intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "elements_not_bytes",
          "divides by the number of K and V values read, never multiplying by "
          "bytes_per_element, so it gives FLOPs per element, not per byte",
          intensity_elements_not_bytes),
    Entry("decode_attention_intensity", "wrong", "denominator_not_parenthesised",
          "writes flops / 2 * B * G * N * d * bytes without parentheses, so it divides by 2 "
          "and then multiplies by the rest of the byte count", intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed_form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_loops", None, intensity_fraction_loop),

    Entry("paged_attention", "wrong", "kv_heads_tiled",
          "expands the K/V heads with .repeat (tiling), so query head h reads KV head h % G "
          "instead of h // (H // G) (.repeat_interleave)", paged_heads_modulo),
    Entry("paged_attention", "wrong", "one_key_too_many",
          "loops t over range(n + 1), reading one stale slot past the sequence's length (and "
          "a key for an empty sequence)", paged_one_key_too_many),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "swaps // and %: looks up page block_table[b, t % page_size] at slot t // page_size "
          "instead of page block_table[b, t // page_size] at slot t % page_size (it reads "
          "the wrong keys, or raises an IndexError when t % page_size runs past the table's "
          "width)",
          paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "block_table_ignored",
          "reads page t // page_size of the pool directly, as if the sequence's pages were the "
          "first ones in order, instead of looking the page up in block_table[b]",
          paged_block_table_ignored),
    Entry("paged_attention", "wrong", "empty_sequence_not_guarded",
          "masks the slots past seq_lens with -inf but does not guard a sequence of length 0: "
          "its softmax over all -inf gives NaN instead of zeros", paged_masked_no_guard),
    Entry("paged_attention", "wrong", "scale_by_page_size",
          "scales by 1/sqrt(k_pages.shape[-2]), the page size, instead of 1/sqrt(d) "
          "(k_pages.shape[-1])", paged_scale_page_size),
    Entry("paged_attention", "right", "token_gather_float64", None, paged_token_gather_f64),
    Entry("paged_attention", "right", "padded_batch_gather", None, paged_padded_batch),

    Entry("chunked_prefill", "wrong", "chunk_mask_top_left",
          "masks each chunk with a plain tril of shape (C, stop) aligned top-left instead of "
          "bottom-right (offset start), so every chunk after the first loses most of the keys "
          "it may see", prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "earlier_chunks_forgotten",
          "each chunk attends only to its own keys and values: the cache of earlier chunks is "
          "never used, so a query misses every key before its chunk", prefill_no_cache),
    Entry("chunked_prefill", "wrong", "ragged_tail_dropped",
          "loops over N // chunk_size chunks, so when chunk_size does not divide N the last "
          "short chunk is dropped and the output has fewer than N rows", prefill_drops_tail),
    Entry("chunked_prefill", "wrong", "heads_merged_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2) first, mixing heads and positions", prefill_merge_no_transpose),
    Entry("chunked_prefill", "wrong", "diagonal_masked",
          "keeps key j only when j < i (strict), so no query sees its own key; the first "
          "query sees nothing and its row is NaN", prefill_strict_mask),
    Entry("chunked_prefill", "wrong", "output_projection_missing",
          "returns the merged heads without the output projection @ w_o",
          prefill_no_output_projection),
    Entry("chunked_prefill", "right", "sdpa_per_chunk", None, prefill_sdpa_chunks),
    Entry("chunked_prefill", "right", "per_head_float64", None, prefill_per_head_f64),
]
