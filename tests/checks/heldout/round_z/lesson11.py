"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def dai_only_keys_read(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / read


def dai_ignores_sharing(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def dai_mac_is_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    score = batch_size * num_heads * seq_len * head_dim
    mix = batch_size * num_heads * seq_len * head_dim
    loaded = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score + mix) / loaded


def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def dai_counts_elements(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    elements = 2 * batch_size * num_kv_heads * seq_len * head_dim
    return flops / elements


def dai_reads_new_token_too(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 4.0 * batch_size * num_heads * seq_len * head_dim
    cached = seq_len + 1  # the cache plus the new token's K and V
    return flops / (2 * batch_size * num_kv_heads * cached * head_dim * bytes_per_element)


# ============================================================ decode_attention_intensity: right
def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def dai_fraction_per_token(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    flops_per_cached_token = Fraction(0)
    for _ in range(num_heads):
        flops_per_cached_token += 2 * head_dim  # q . k
        flops_per_cached_token += 2 * head_dim  # p * v
    bytes_per_cached_token = num_kv_heads * head_dim * bytes_per_element * 2
    ratio = (flops_per_cached_token * seq_len * batch_size) / (
        bytes_per_cached_token * seq_len * batch_size)
    return float(ratio)


# ============================================================ paged_attention: wrong
def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        pages = block_table[b].long()[t % P]
        slots = t // P
        k = k_pages[pages, :, slots].double()  # (n, G, d)
        v = v_pages[pages, :, slots].double()
        k = k.repeat_interleave(rep, dim=1)  # (n, H, d)
        v = v.repeat_interleave(rep, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].double(), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,nhd->hd", s.softmax(-1), v)
    return out.to(q.dtype)


def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float32 if q.dtype != torch.float64 else q.dtype)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[used].transpose(0, 1).reshape(G, -1, d).to(out.dtype)
        v = v_pages[used].transpose(0, 1).reshape(G, -1, d).to(out.dtype)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        sc = (q[b].to(out.dtype)[:, None] @ k.transpose(1, 2)) / math.sqrt(d)
        out[b] = (torch.softmax(sc, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_head_modulo(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            pg = int(block_table[b, t // P])
            ks.append(k_pages[pg, :, t % P])
            vs.append(v_pages[pg, :, t % P])
        k = torch.stack(ks, 1).to(ct)  # (G, n, d)
        v = torch.stack(vs, 1).to(ct)
        for h in range(H):
            g = h % G
            w = torch.softmax(k[g] @ q[b, h].to(ct) / math.sqrt(d), dim=0)
            res[b, h] = w @ v[g]
    return res.to(q.dtype)


def paged_scale_from_page_axis(q, k_pages, v_pages, block_table, seq_lens):
    B, H, _ = q.shape
    G, P, d = k_pages.shape[1], k_pages.shape[2], k_pages.shape[-2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(q.shape, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : -(-n // P)].long()
        k = k_pages[pages].transpose(0, 1).flatten(1, 2)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).flatten(1, 2)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        num_pages = n // P
        if num_pages == 0:
            continue
        pages = block_table[b, :num_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_nan_for_empty(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    k = k_pages[block_table.long()]  # (B, max_pages, G, P, d)
    v = v_pages[block_table.long()]
    k = k.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    k = k.repeat_interleave(H // G, dim=1)  # (B, H, T, d)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens[:, None].long()  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    return torch.einsum("bht,bhtd->bhd", torch.softmax(s, -1), v).to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_loop_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(H):
            g = h // per_group
            if n == 0:
                continue
            keys = torch.stack([k_pages[int(block_table[b, t // P]), g, t % P]
                                for t in range(n)]).double()
            vals = torch.stack([v_pages[int(block_table[b, t // P]), g, t % P]
                                for t in range(n)]).double()
            logits = keys @ q[b, h].double() / math.sqrt(d)
            logits = logits - logits.max()
            w = torch.exp(logits)
            out[b, h] = (w / w.sum()) @ vals
    return out.to(q.dtype)


def paged_vectorised_masked(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    t = torch.arange(T)
    page_ids = block_table.long()[:, t // P]  # (B, T)
    slot = (t % P).expand(B, T)
    k = k_pages[page_ids, :, slot].double()  # (B, T, G, d)
    v = v_pages[page_ids, :, slot].double()
    head_group = torch.arange(H) // (H // G)
    k = k[:, :, head_group]  # (B, T, H, d)
    v = v[:, :, head_group]
    s = torch.einsum("bhd,bthd->bht", q.double(), k) * d ** -0.5
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, :]  # (B, 1, T)
    s = torch.where(valid, s, torch.full_like(s, -math.inf))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z == 0, torch.ones_like(z), z)
    return torch.einsum("bht,bthd->bhd", w, v).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for a in range(0, N, chunk_size):
        xc = x[:, a:a + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        allowed = torch.ones(C, k.shape[2], dtype=torch.bool).tril()
        s = s.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(s, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads

    def _split(t, h):
        return t.reshape(t.shape[0], t.shape[1], h, -1).transpose(1, 2)
    f = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, 0, dh, dtype=f)
    v_cache = torch.zeros(B, num_heads, 0, dh, dtype=f)
    pieces = []
    for st in range(0, N, chunk_size):
        xc = x[:, st:st + chunk_size]
        q = _split(xc @ w_q, num_heads).to(f)
        k_cache = torch.cat([k_cache, _split(xc @ w_k, num_heads).to(f)], dim=2)
        v_cache = torch.cat([v_cache, _split(xc @ w_v, num_heads).to(f)], dim=2)
        # earlier chunks are all in the past, so every cached key is visible
        w = torch.softmax(q @ k_cache.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        pieces.append((w @ v_cache).transpose(1, 2).flatten(2))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_forgets_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads

    def _split(t, h):
        b_, n_, w_ = t.shape
        return t.view(b_, n_, h, w_ // h).permute(0, 2, 1, 3)
    f = torch.promote_types(x.dtype, torch.float32)
    out = torch.empty(B, N, D, dtype=f)
    for st in range(0, N, chunk_size):
        en = min(st + chunk_size, N)
        xc = x[:, st:en]
        q = _split(xc @ w_q, num_heads).to(f)
        k = _split(xc @ w_k, num_heads).to(f)
        v = _split(xc @ w_v, num_heads).to(f)
        C = en - st
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        s = s.masked_fill(torch.ones(C, C, dtype=torch.bool).triu(1), -math.inf)
        out[:, st:en] = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, C, D)
    return out.to(x.dtype) @ w_o


def prefill_floor_chunk_count(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads

    def _split(t, h):
        return t.unflatten(-1, (h, dh)).transpose(1, 2)
    f = torch.promote_types(x.dtype, torch.float32)
    n_chunks = max(N // chunk_size, 1)
    kc, vc, outs = [], [], []
    for c in range(n_chunks):
        st, en = c * chunk_size, min((c + 1) * chunk_size, N)
        xc = x[:, st:en]
        q = _split(xc @ w_q, num_heads).to(f)
        kc.append(_split(xc @ w_k, num_heads).to(f))
        vc.append(_split(xc @ w_v, num_heads).to(f))
        k, v = torch.cat(kc, 2), torch.cat(vc, 2)
        allowed = torch.ones(en - st, en, dtype=torch.bool).tril(st)
        s = (q @ k.transpose(-1, -2) / math.sqrt(dh)).masked_fill(~allowed, -math.inf)
        outs.append((s.softmax(-1) @ v).transpose(1, 2).reshape(B, en - st, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads

    def _split(t, h):
        return t.reshape(B, -1, h, dh).transpose(1, 2)
    f = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, num_heads, N, dh, dtype=f)
    V = torch.empty(B, num_heads, N, dh, dtype=f)
    outs = []
    for st in range(0, N, chunk_size):
        en = min(st + chunk_size, N)
        xc = x[:, st:en]
        q = _split(xc @ w_q, num_heads).to(f)
        K[:, :, st:en] = _split(xc @ w_k, num_heads).to(f)
        V[:, :, st:en] = _split(xc @ w_v, num_heads).to(f)
        s = q @ K[:, :, :en].transpose(-1, -2) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(en - st, en, dtype=torch.bool).tril(st), -math.inf)
        ctx = torch.softmax(s, -1) @ V[:, :, :en]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, en - st, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads

    def _split(t, h):
        return t.reshape(B, t.shape[1], h, dh).transpose(1, 2)
    f = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, num_heads, N, dh, dtype=f)
    V = torch.empty(B, num_heads, N, dh, dtype=f)
    outs = []
    for st in range(0, N, chunk_size):
        en = min(st + chunk_size, N)
        xc = x[:, st:en]
        q = _split(xc @ w_q, num_heads).to(f)
        K[:, :, st:en] = _split(xc @ w_k, num_heads).to(f)
        V[:, :, st:en] = _split(xc @ w_v, num_heads).to(f)
        s = q @ K[:, :, :en].transpose(-1, -2) / math.sqrt(D)
        s = s.masked_fill(~torch.ones(en - st, en, dtype=torch.bool).tril(st), -math.inf)
        ctx = torch.softmax(s, -1) @ V[:, :, :en]
        outs.append(ctx.transpose(1, 2).reshape(B, en - st, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    keys = torch.zeros(B, num_heads, 0, dh, dtype=torch.float64)
    values = torch.zeros(B, num_heads, 0, dh, dtype=torch.float64)
    results = []
    start = 0
    while start < N:
        chunk = xd[:, start:start + chunk_size]
        C = chunk.shape[1]
        q = (chunk @ w_q.double()).view(B, C, num_heads, dh).permute(0, 2, 1, 3)
        keys = torch.cat([keys, (chunk @ w_k.double()).view(B, C, num_heads, dh)
                          .permute(0, 2, 1, 3)], dim=2)
        values = torch.cat([values, (chunk @ w_v.double()).view(B, C, num_heads, dh)
                            .permute(0, 2, 1, 3)], dim=2)
        total = start + C
        key_pos = torch.arange(total)[None, :]
        query_pos = torch.arange(start, total)[:, None]
        ctx = F.scaled_dot_product_attention(q, keys, values, attn_mask=key_pos <= query_pos)
        results.append(ctx.permute(0, 2, 1, 3).reshape(B, C, D))
        start = total
    return (torch.cat(results, dim=1) @ w_o.double()).to(x.dtype)


def prefill_per_head_loops(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.to(torch.float64)
    q_all = xd @ w_q.double()  # (B, N, D): projections up front are O(N D)
    k_all = xd @ w_k.double()
    v_all = xd @ w_v.double()
    ctx = torch.zeros(B, N, D, dtype=torch.float64)
    for c0 in range(0, N, chunk_size):
        c1 = min(N, c0 + chunk_size)
        for h in range(num_heads):
            cols = slice(h * dh, (h + 1) * dh)
            qh = q_all[:, c0:c1, cols]  # (B, C, dh)
            kh = k_all[:, :c1, cols]  # (B, c1, dh): the cache so far
            vh = v_all[:, :c1, cols]
            s = torch.einsum("bqe,bke->bqk", qh, kh) / math.sqrt(dh)
            future = torch.arange(c1)[None, :] > torch.arange(c0, c1)[:, None]
            s = s.masked_fill(future, -math.inf)
            ctx[:, c0:c1, cols] = torch.einsum("bqk,bke->bqe", torch.softmax(s, -1), vh)
    return (ctx @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "counts_only_keys",
          "counts the bytes of the cached keys only and forgets that the values are read too",
          dai_only_keys_read),
    Entry("decode_attention_intensity", "wrong", "ignores_kv_head_sharing",
          "counts num_heads K/V heads read from the cache instead of num_kv_heads, so grouped "
          "heads seem to read their own copy",
          dai_ignores_sharing),
    Entry("decode_attention_intensity", "wrong", "multiply_add_one_flop",
          "counts one multiply-add as 1 FLOP instead of 2, halving the FLOPs",
          dai_mac_is_one_flop),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides with //, so it returns a floored int instead of a float ratio",
          dai_floor_division),
    Entry("decode_attention_intensity", "wrong", "elements_not_bytes",
          "divides by the number of cached elements and forgets bytes_per_element",
          dai_counts_elements),
    Entry("decode_attention_intensity", "wrong", "seq_len_plus_one_read",
          "reads K and V of seq_len + 1 tokens (adding the new token) while the FLOPs use "
          "seq_len cached keys",
          dai_reads_new_token_too),
    Entry("decode_attention_intensity", "right", "closed_form_2H_over_G_bytes", None,
          dai_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_per_cached_token", None,
          dai_fraction_per_token),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "looks key t up in page t % page_size at slot t // page_size: the quotient and the "
          "remainder are swapped, so it reads wrong keys or, when page_size exceeds the "
          "block table's width, indexes past it and raises IndexError",
          paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "whole_last_page",
          "keeps every slot of the sequence's last page instead of cutting to its first "
          "seq_lens[b] keys, so stale slots join the softmax",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "kv_head_by_modulo",
          "maps query head h to KV head h % G instead of h // (H // G), interleaving the groups",
          paged_head_modulo),
    Entry("paged_attention", "wrong", "scale_from_page_size_axis",
          "reads d from k_pages.shape[-2], which is page_size, so the scores are scaled by "
          "1/sqrt(page_size) instead of 1/sqrt(d)",
          paged_scale_from_page_axis),
    Entry("paged_attention", "wrong", "floor_page_count",
          "counts the pages of a sequence as seq_len // page_size, dropping a partly filled "
          "last page (and a sequence shorter than one page gets zeros)",
          paged_floor_page_count),
    Entry("paged_attention", "wrong", "nan_for_empty_sequence",
          "masks keys past seq_len with -inf and calls softmax, so a sequence of length 0 "
          "gets a NaN row instead of zeros",
          paged_nan_for_empty),
    Entry("paged_attention", "right", "token_by_token_float64", None, paged_token_loop_f64),
    Entry("paged_attention", "right", "vectorised_gather_masked", None,
          paged_vectorised_masked),
    Entry("chunked_prefill", "wrong", "mask_not_offset_by_chunk_start",
          "builds each chunk's mask with tril() on (C, stop), aligned top-left, so a chunk's "
          "queries cannot see most earlier chunks' keys: the offset by the chunk start is missing",
          prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "no_causal_mask_inside_chunk",
          "treats every cached key as past and applies no mask, so a query sees the later "
          "tokens of its own chunk",
          prefill_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "forgets_earlier_chunks",
          "keeps no cache: each chunk attends only to its own keys and values, not to the "
          "earlier chunks'",
          prefill_forgets_cache),
    Entry("chunked_prefill", "wrong", "floor_chunk_count",
          "counts the chunks as N // chunk_size, so the last, shorter chunk is never processed "
          "and its rows are missing",
          prefill_floor_chunk_count),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "mixing heads and tokens",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_float64", None, prefill_sdpa_chunks),
    Entry("chunked_prefill", "right", "per_head_loops_projections_up_front", None,
          prefill_per_head_loops),
]
