"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# =============================================================================================
# decode_attention_intensity
# =============================================================================================

def intensity_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_elements_not_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim  # K and V values
    return flops / read


def intensity_integer_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_counts_new_token(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    keys_seen = seq_len + 1  # the cached keys plus the new token's own key
    flops = 4 * batch_size * num_heads * keys_seen * head_dim
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # 4 B H N d FLOPs over 2 B G N d bytes: everything but the head ratio cancels
    return float(2 * num_heads) / float(num_kv_heads * bytes_per_element)


def intensity_per_head_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    flops = 0
    for _seq in range(batch_size):
        for _head in range(num_heads):
            flops += seq_len * head_dim * 2  # scores: one multiply-add per (key, feature)
            flops += seq_len * head_dim * 2  # weighted sum of the values
    kv_bytes = batch_size * num_kv_heads * seq_len * (head_dim + head_dim) * bytes_per_element
    return float(Fraction(flops, kv_bytes))


# =============================================================================================
# paged_attention
# =============================================================================================

def paged_softmax_over_heads(q, k_pages, v_pages, block_table, seq_lens):
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
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(1, 2) / math.sqrt(d)  # (H, 1, n)
        out[b] = (torch.softmax(s, dim=0) @ v)[:, 0]
    return out.to(q.dtype)


def paged_slot_page_swapped(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    dt = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros(batch, heads, d, dtype=dt)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t % page_size])
            slot = t // page_size
            ks.append(k_pages[page, :, slot])
            vs.append(v_pages[page, :, slot])
        K = torch.stack(ks, dim=1).to(dt)  # (G, n, d)
        V = torch.stack(vs, dim=1).to(dt)
        for h in range(heads):
            sc = K[h // rep] @ q[b, h].to(dt) / math.sqrt(d)
            result[b, h] = torch.softmax(sc, -1) @ V[h // rep]
    return result.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=f)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :(n + P - 1) // P].long()
        keys = k_pages[idx].permute(1, 0, 2, 3).reshape(G, -1, d)[:, :n].to(f)
        vals = v_pages[idx].permute(1, 0, 2, 3).reshape(G, -1, d)[:, :n].to(f)
        keys = keys.repeat(H // G, 1, 1)  # (H, n, d)
        vals = vals.repeat(H // G, 1, 1)
        sc = torch.einsum("hd,hnd->hn", q[b].to(f), keys) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", sc.softmax(-1), vals)
    return out.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)  # (p, G, P, d) -> (G, p*P, d)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct).unsqueeze(1) @ k.transpose(-2, -1)).squeeze(1) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1).unsqueeze(1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    P = k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = math.ceil(n / P)
        pages = block_table[b, :used].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, used * P, d).to(ct)  # all slots of the pages
        v = v_pages[pages].transpose(0, 1).reshape(G, used * P, d).to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = q[b].to(ct)[:, None] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_unscaled(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    res = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            res.append(torch.zeros(H, d, dtype=ct))
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k)
        res.append(torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v))
    return torch.stack(res).to(q.dtype)


def paged_token_by_token_float64(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    per_group = heads // groups
    out = torch.zeros(batch, heads, d, dtype=torch.float64)
    for b in range(batch):
        n = int(seq_lens[b])
        for h in range(heads):
            g = h // per_group
            logits, values = [], []
            for t in range(n):
                page = int(block_table[b, t // page_size])
                slot = t % page_size
                key = k_pages[page, g, slot].double()
                logits.append(float(q[b, h].double() @ key) / math.sqrt(d))
                values.append(v_pages[page, g, slot].double())
            if not logits:
                continue
            top = max(logits)
            ws = [math.exp(s - top) for s in logits]
            z = sum(ws)
            out[b, h] = sum(w / z * val for w, val in zip(ws, values))
    return out.to(q.dtype)


def paged_gather_all_masked(q, k_pages, v_pages, block_table, seq_lens):
    """All sequences at once: gather every table entry, then mask keys past each length."""
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    k = k_pages[table].to(ct)  # (B, max_pages, G, P, d)
    v = v_pages[table].to(ct)
    k = k.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    v = v.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    qg = q.to(ct).reshape(B, G, H // G, d)  # heads h = g * (H // G) + r
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    out = torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(B, H, d)
    return out.to(q.dtype)


# =============================================================================================
# chunked_prefill
# =============================================================================================

def prefill_mask_not_offset(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        K, V = torch.cat(ks, 2), torch.cat(vs, 2)
        allowed = torch.ones(C, K.shape[2], dtype=torch.bool).tril()
        sc = (q @ K.transpose(-2, -1) / math.sqrt(dh)).masked_fill(~allowed, -math.inf)
        outs.append((sc.softmax(-1) @ V).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        c = stop - start
        q = (xc @ w_q).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(work)
        k = (xc @ w_k).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(work)
        v = (xc @ w_v).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(work)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        causal = torch.tril(torch.ones(c, c, dtype=torch.bool))
        scores = scores.masked_fill(~causal, float("-inf"))
        ctx = torch.softmax(scores, dim=-1) @ v
        pieces.append(ctx.transpose(1, 2).reshape(batch, c, d_model))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_drops_partial_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, H, 0, dh, dtype=ct)
    v_cache = torch.zeros(B, H, 0, dh, dtype=ct)
    outs = []
    n_chunks = max(1, N // chunk_size)
    for c in range(n_chunks):
        lo = c * chunk_size
        hi = min(lo + chunk_size, N)
        xc = x[:, lo:hi]
        L = hi - lo
        q = (xc @ w_q).reshape(B, L, H, dh).transpose(1, 2).to(ct)
        k_cache = torch.cat([k_cache, (xc @ w_k).reshape(B, L, H, dh).transpose(1, 2).to(ct)], dim=2)
        v_cache = torch.cat([v_cache, (xc @ w_v).reshape(B, L, H, dh).transpose(1, 2).to(ct)], dim=2)
        mask = torch.arange(hi)[None, :] <= torch.arange(lo, hi)[:, None]
        s = (q @ k_cache.transpose(-2, -1)) / math.sqrt(dh)
        s = s.masked_fill(~mask, -math.inf)
        outs.append((torch.softmax(s, -1) @ v_cache).transpose(1, 2).reshape(B, L, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, num_heads, N, dh, dtype=ct)
    V = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for lo in range(0, N, chunk_size):
        hi = min(lo + chunk_size, N)
        xc = x[:, lo:hi]
        C = hi - lo
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        K[:, :, lo:hi] = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        V[:, :, lo:hi] = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ K[:, :, :hi].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(C, hi, dtype=torch.bool).tril(diagonal=lo)
        s = s.masked_fill(~keep, -math.inf)
        ctx = torch.softmax(s, dim=-1) @ V[:, :, :hi]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    h = num_heads
    hd = dm // h
    ft = torch.promote_types(x.dtype, torch.float32)
    cache_k, cache_v, res = None, None, []
    for st in range(0, n, chunk_size):
        en = min(st + chunk_size, n)
        xc = x[:, st:en]
        c = en - st
        q = (xc @ w_q).view(b, c, h, hd).permute(0, 2, 1, 3).to(ft)
        k = (xc @ w_k).view(b, c, h, hd).permute(0, 2, 1, 3).to(ft)
        v = (xc @ w_v).view(b, c, h, hd).permute(0, 2, 1, 3).to(ft)
        cache_k = k if cache_k is None else torch.cat([cache_k, k], 2)
        cache_v = v if cache_v is None else torch.cat([cache_v, v], 2)
        sc = q @ cache_k.transpose(2, 3) / math.sqrt(dm)
        future = torch.arange(en)[None, :] > torch.arange(st, en)[:, None]
        sc = sc.masked_fill(future, -math.inf)
        res.append((sc.softmax(-1) @ cache_v).permute(0, 2, 1, 3).reshape(b, c, dm))
    return torch.cat(res, 1).to(x.dtype) @ w_o


def prefill_forgets_w_o(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    out = torch.empty(B, N, D, dtype=ct)
    for lo in range(0, N, chunk_size):
        hi = min(lo + chunk_size, N)
        xc = x[:, lo:hi]
        C = hi - lo
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k_cache[:, :, lo:hi] = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v_cache[:, :, lo:hi] = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ k_cache[:, :, :hi].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(torch.arange(hi)[None, :] > torch.arange(lo, hi)[:, None], -math.inf)
        out[:, lo:hi] = (torch.softmax(s, -1) @ v_cache[:, :, :hi]).transpose(1, 2).reshape(B, C, D)
    return out.to(x.dtype)


def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    up = torch.promote_types(x.dtype, torch.float32)
    xs = x.to(up)
    wq, wk, wv = w_q.to(up), w_k.to(up), w_v.to(up)
    keys, vals, chunks = [], [], []
    for lo in range(0, N, chunk_size):
        hi = min(N, lo + chunk_size)
        part = xs[:, lo:hi]
        q = (part @ wq).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        keys.append((part @ wk).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        vals.append((part @ wv).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        k_all, v_all = torch.cat(keys, dim=2), torch.cat(vals, dim=2)
        # query lo + i may see keys 0 .. lo + i (True = may attend)
        allowed = torch.arange(hi)[None, :] <= torch.arange(lo, hi)[:, None]
        ctx = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=allowed)
        chunks.append(ctx.transpose(1, 2).flatten(2))
    return torch.cat(chunks, dim=1).to(x.dtype) @ w_o


def prefill_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    merged = torch.zeros(B, N, D, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_h, wk_h, wv_h = w_q[:, cols].double(), w_k[:, cols].double(), w_v[:, cols].double()
        kc = torch.zeros(B, N, dh, dtype=torch.float64)  # this head's cache
        vc = torch.zeros(B, N, dh, dtype=torch.float64)
        start = 0
        while start < N:
            stop = min(start + chunk_size, N)
            kc[:, start:stop] = xd[:, start:stop] @ wk_h
            vc[:, start:stop] = xd[:, start:stop] @ wv_h
            qh = xd[:, start:stop] @ wq_h
            s = torch.einsum("bqe,bke->bqk", qh, kc[:, :stop]) / math.sqrt(dh)
            rows = torch.arange(start, stop)[:, None]
            s = torch.where(torch.arange(stop)[None, :] <= rows, s, torch.full_like(s, -math.inf))
            p = torch.softmax(s, dim=-1)
            merged[:, start:stop, cols] = torch.einsum("bqk,bke->bqe", p, vc[:, :stop])
            start = stop
    return merged.to(x.dtype) @ w_o


ENTRIES = [
    # ---- decode_attention_intensity
    Entry("decode_attention_intensity", "wrong", "bytes-per-query-head",
          "The bytes count num_heads K/V heads instead of num_kv_heads: with GQA the cache "
          "holds (and the step reads) only G heads of keys and values.",
          intensity_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "scores-only",
          "Only the score product q . k is counted; the weighted sum of the values, another "
          "2 N d FLOPs per head, is left out, halving the intensity.",
          intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "elements-not-bytes",
          "The denominator counts K and V elements and never multiplies by bytes_per_element, "
          "so it returns FLOPs per element, not per byte.",
          intensity_elements_not_bytes),
    Entry("decode_attention_intensity", "wrong", "integer-division",
          "flops // bytes is integer division: the result is an int, truncated (0 instead of "
          "0.5), instead of a float.",
          intensity_integer_division),
    Entry("decode_attention_intensity", "wrong", "denominator-precedence",
          "Operator precedence: flops / 2 * batch * ... divides by 2 only and multiplies by the "
          "rest of the byte count instead of dividing by it.",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "counts-new-token",
          "The FLOPs use seq_len + 1 keys (adding the new token) while the bytes use seq_len, "
          "so the ratio is off by a factor (N + 1) / N.",
          intensity_counts_new_token),
    Entry("decode_attention_intensity", "right", "closed-form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "loop-fraction", None,
          intensity_per_head_fraction),
    # ---- paged_attention
    Entry("paged_attention", "wrong", "softmax-over-heads",
          "The softmax runs over dim 0 of the (H, 1, n) scores, i.e. across heads, instead of "
          "over the keys (last axis).",
          paged_softmax_over_heads),
    Entry("paged_attention", "wrong", "page-slot-swapped",
          "Page and slot are swapped: it reads page block_table[b, t % page_size] at slot "
          "t // page_size instead of page t // page_size at slot t % page_size; once "
          "t % page_size reaches the table's width the lookup raises IndexError.",
          paged_slot_page_swapped),
    Entry("paged_attention", "wrong", "repeat-not-interleave",
          "KV heads are expanded with repeat (tiling g0, g1, g0, g1, ...) instead of "
          "repeat_interleave, so query head h reads KV head h % G instead of h // (H // G).",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "reshape-without-transpose",
          "The gathered pages (p, G, P, d) are reshaped to (G, p*P, d) without first moving the "
          "G axis in front, so the key order mixes KV heads and pages.",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "whole-last-page",
          "It attends to every slot of the used pages instead of the first seq_lens[b] keys, so "
          "the stale slots at the end of the last page are read too.",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "no-scale",
          "The scores are not divided by sqrt(d).",
          paged_unscaled),
    Entry("paged_attention", "right", "token-by-token-float64", None,
          paged_token_by_token_float64),
    Entry("paged_attention", "right", "gather-all-then-mask", None, paged_gather_all_masked),
    # ---- chunked_prefill
    Entry("chunked_prefill", "wrong", "mask-not-offset",
          "The chunk's mask is tril() of a (C, stop) matrix, aligned top-left: it forgets the "
          "offset of start, so later chunks' queries see only the first keys of the cache.",
          prefill_mask_not_offset),
    Entry("chunked_prefill", "wrong", "no-cache",
          "Each chunk attends only to its own keys and values: the cache of earlier chunks is "
          "never used, so every chunk restarts the context.",
          prefill_no_cache),
    Entry("chunked_prefill", "wrong", "drops-partial-chunk",
          "The number of chunks is N // chunk_size, so a ragged last chunk is never processed "
          "and the output is missing those tokens.",
          prefill_drops_partial_chunk),
    Entry("chunked_prefill", "wrong", "merge-without-transpose",
          "The heads are merged with ctx.reshape(B, C, d_model) on a (B, H, C, d_head) tensor, "
          "without transposing H and C first, which scrambles tokens and heads.",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale-d-model",
          "Scores are divided by sqrt(d_model) instead of sqrt(d_head).",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "forgets-w_o",
          "The output projection w_o is never applied: it returns the merged heads.",
          prefill_forgets_w_o),
    Entry("chunked_prefill", "right", "sdpa-per-chunk", None, prefill_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "head-loop-float64", None, prefill_head_loop_float64),
]
