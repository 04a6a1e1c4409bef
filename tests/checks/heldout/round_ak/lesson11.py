"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return score_flops / kv_bytes


def intensity_cache_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_elements_not_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    flops = 4.0 * batch_size * num_heads * seq_len * head_dim
    elements = 2.0 * batch_size * num_kv_heads * seq_len * head_dim
    return flops / elements


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: 4 B H N d / (2 B G N d bytes) = 2 H / (G bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query_head = Fraction(2 * seq_len * head_dim) * 2  # scores + weighted sum
    flops = per_query_head * num_heads * batch_size
    per_kv_head = Fraction(seq_len * head_dim * bytes_per_element) * 2  # K and V
    return float(flops / (per_kv_head * num_kv_heads * batch_size))


# ============================================================ paged_attention: wrong
def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : n // P].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ids = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[ids].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[ids].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat(H // G, 1, 1)  # (H, n, d)
        v = v.repeat(H // G, 1, 1)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_page_and_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        page = block_table[b, t % P].long()
        slot = t // P
        keys = k_pages[page, :, slot].to(ct)  # (n, G, d)
        vals = v_pages[page, :, slot].to(ct)
        for h in range(H):
            g = h // rep
            sc = keys[:, g] @ q[b, h].to(ct) / math.sqrt(d)
            result[b, h] = torch.softmax(sc, 0) @ vals[:, g]
    return result.to(q.dtype)


def paged_masked_no_guard(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    tbl = block_table.long()
    k_all = k_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v_all = v_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    k_all = k_all.repeat_interleave(H // G, dim=1)  # (B, H, T, d)
    v_all = v_all.repeat_interleave(H // G, dim=1)
    scores = torch.einsum("bhd,bhtd->bht", q.to(ct), k_all) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    scores = scores.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.softmax(scores, dim=-1)
    return torch.einsum("bht,bhtd->bhd", w, v_all).to(q.dtype)


def paged_flatten_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    n_rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : -(-n // P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)  # (p, G, P, d) -> (G, p*P, d)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(n_rep, dim=0)
        v = v.repeat_interleave(n_rep, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_softmax_over_heads(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    n_rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(n_rep, dim=0)  # (H, n, d)
        v = v.repeat_interleave(n_rep, dim=0)
        scores = (k @ q[b].to(ct)[:, :, None]).squeeze(-1) / math.sqrt(d)  # (H, n)
        w = torch.softmax(scores, dim=0)
        out[b] = (w[:, :, None] * v).sum(dim=1)
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_index_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    group = H // G
    f = torch.float64
    out = torch.zeros(B, H, d, dtype=f)
    for b in range(B):
        n = int(seq_lens[b])
        if n <= 0:
            continue
        t = torch.arange(n)
        page = block_table[b].long()[t // P]
        slot = t % P
        keys = k_pages[page, :, slot].to(f)  # (n, G, d): advanced indices go first
        vals = v_pages[page, :, slot].to(f)
        kv_head = torch.arange(H) // group
        kh = keys[:, kv_head]  # (n, H, d)
        vh = vals[:, kv_head]
        s = torch.einsum("hd,nhd->hn", q[b].to(f), kh) / math.sqrt(d)
        w = torch.softmax(s, dim=1)
        out[b] = torch.einsum("hn,nhd->hd", w, vh)
    return out.to(q.dtype)


def paged_batched_masked_guarded(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    ct = torch.promote_types(q.dtype, torch.float32)
    gathered_k = k_pages[block_table.long()]  # (B, max_pages, G, P, d)
    gathered_v = v_pages[block_table.long()]
    k_seq = gathered_k.transpose(1, 2).reshape(B, G, T, d).to(ct)
    v_seq = gathered_v.transpose(1, 2).reshape(B, G, T, d).to(ct)
    qg = q.to(ct).reshape(B, G, H // G, d)  # heads h = g * (H // G) + r share group g
    s = qg @ k_seq.transpose(-2, -1) / math.sqrt(d)  # (B, G, H//G, T)
    keep = (torch.arange(T)[None, :] < seq_lens.long()[:, None])[:, None, None, :]
    s = s.masked_fill(~keep, -math.inf)
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(dim=-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    return (w @ v_seq).reshape(B, H, d).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_cache_not_kept(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)  # this chunk only
        v = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), -math.inf)
        ctx = torch.softmax(sc, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        C = stop - start
        q = (xc @ w_q).view(B, C, H, dh).transpose(1, 2).to(ct)
        keys.append((xc @ w_k).view(B, C, H, dh).transpose(1, 2).to(ct))
        values.append((xc @ w_v).view(B, C, H, dh).transpose(1, 2).to(ct))
        k = torch.cat(keys, dim=2)
        v = torch.cat(values, dim=2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)  # (B, H, C, stop)
        mask = torch.ones(C, stop, dtype=torch.bool).tril()
        s = s.masked_fill(~mask, -math.inf)
        o = torch.softmax(s, dim=-1) @ v
        outs.append(o.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros(B, num_heads, N, dh, dtype=ct)
    vc = torch.zeros(B, num_heads, N, dh, dtype=ct)
    pieces = []
    for c in range(N // chunk_size):
        a, e = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, a:e]
        q = (xc @ w_q).reshape(B, chunk_size, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, a:e] = (xc @ w_k).reshape(B, chunk_size, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, a:e] = (xc @ w_v).reshape(B, chunk_size, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(chunk_size, e, dtype=torch.bool).tril(diagonal=a)
        sc = sc.masked_fill(~allowed, -math.inf)
        pieces.append((torch.softmax(sc, -1) @ vc[:, :, :e]).transpose(1, 2).reshape(
            B, chunk_size, D))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_heads_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    out = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        C = stop - start
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(B, num_heads, C, dh).to(ct)
        k_cache[:, :, start:stop] = (xc @ w_k).reshape(B, num_heads, C, dh).to(ct)
        v_cache[:, :, start:stop] = (xc @ w_v).reshape(B, num_heads, C, dh).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        m = torch.ones(C, stop, dtype=torch.bool).tril(stop - C)
        s = s.masked_fill(~m, -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]
        out.append(ctx.reshape(B, C, D))
    return torch.cat(out, 1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.zeros(B, num_heads, N, dh, dtype=ct)
    V = torch.zeros(B, num_heads, N, dh, dtype=ct)
    res = []
    for st in range(0, N, chunk_size):
        en = min(st + chunk_size, N)
        xc = x[:, st:en]
        q = (xc @ w_q).reshape(B, en - st, num_heads, dh).transpose(1, 2).to(ct)
        K[:, :, st:en] = (xc @ w_k).reshape(B, en - st, num_heads, dh).transpose(1, 2).to(ct)
        V[:, :, st:en] = (xc @ w_v).reshape(B, en - st, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ K[:, :, :en].transpose(-2, -1) / math.sqrt(D)
        vis = torch.arange(en)[None, :] <= torch.arange(st, en)[:, None]
        s = s.masked_fill(~vis, -math.inf)
        ctx = torch.softmax(s, -1) @ V[:, :, :en]
        res.append(ctx.transpose(1, 2).reshape(B, en - st, D))
    return torch.cat(res, 1).to(x.dtype) @ w_o


def prefill_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kcache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    vcache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    chunks = []
    for lo in range(0, N, chunk_size):
        hi = min(lo + chunk_size, N)
        xc = x[:, lo:hi]
        q = (xc @ w_q).reshape(B, hi - lo, num_heads, dh).transpose(1, 2).to(ct)
        kcache[:, :, lo:hi] = (xc @ w_k).reshape(B, hi - lo, num_heads, dh).transpose(1, 2).to(ct)
        vcache[:, :, lo:hi] = (xc @ w_v).reshape(B, hi - lo, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ kcache[:, :, :hi].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(hi - lo, hi, dtype=torch.bool).tril(lo)
        s = s.masked_fill(~allowed, -math.inf)
        p = torch.nan_to_num(torch.softmax(s, dim=-2), nan=0.0)
        chunks.append((p @ vcache[:, :, :hi]).transpose(1, 2).reshape(B, hi - lo, D))
    return torch.cat(chunks, 1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_list_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    xs, wq, wk, wv, wo = (t.to(ct) for t in (x, w_q, w_k, w_v, w_o))
    cache_k, cache_v, outs = [], [], []
    for chunk in torch.split(xs, chunk_size, dim=1):
        C = chunk.shape[1]
        q = (chunk @ wq).unflatten(-1, (H, dh)).transpose(1, 2)
        cache_k.append((chunk @ wk).unflatten(-1, (H, dh)).transpose(1, 2))
        cache_v.append((chunk @ wv).unflatten(-1, (H, dh)).transpose(1, 2))
        k = torch.cat(cache_k, dim=2)
        v = torch.cat(cache_v, dim=2)
        seen = k.shape[2]
        qpos = torch.arange(seen - C, seen)[:, None]
        mask = torch.arange(seen)[None, :] <= qpos  # (C, seen), True = may attend
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outs.append(ctx.transpose(1, 2).flatten(-2))
    return (torch.cat(outs, dim=1) @ wo).to(x.dtype)


def prefill_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    f = torch.float64
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    X = x.to(f)
    Wq, Wk, Wv = (w.to(f).reshape(D, H, dh) for w in (w_q, w_k, w_v))
    K = torch.zeros(B, H, N, dh, dtype=f)  # the cache, filled chunk by chunk
    V = torch.zeros(B, H, N, dh, dtype=f)
    merged = torch.empty(B, N, H, dh, dtype=f)
    start = 0
    while start < N:
        stop = min(N, start + chunk_size)
        xc = X[:, start:stop]
        q = torch.einsum("bnm,mhd->bhnd", xc, Wq)
        K[:, :, start:stop] = torch.einsum("bnm,mhd->bhnd", xc, Wk)
        V[:, :, start:stop] = torch.einsum("bnm,mhd->bhnd", xc, Wv)
        s = torch.einsum("bhqd,bhkd->bhqk", q, K[:, :, :stop]) / math.sqrt(dh)
        future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        s = s.masked_fill(future, float("-inf"))
        p = torch.softmax(s, dim=-1)
        merged[:, start:stop] = torch.einsum("bhqk,bhkd->bqhd", p, V[:, :, :stop])
        start = stop
    return (merged.reshape(B, N, D) @ w_o.to(f)).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "reads_keys_only", (
        "the bytes count only the cached keys, not the values: the factor 2 for K and V is "
        "missing, so the intensity comes out twice too high"),
        intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "scores_only", (
        "counts only the score products q . k and forgets the weighted sum over the values, "
        "so the FLOPs (and the intensity) are half what they are"),
        intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "kv_bytes_per_query_head", (
        "the bytes use num_heads where num_kv_heads belongs, as if every query head read its "
        "own K and V: the gain from grouped K/V heads disappears"),
        intensity_cache_per_query_head),
    Entry("decode_attention_intensity", "wrong", "floor_division", (
        "divides FLOPs by bytes with //, an integer floor division, so a fractional intensity "
        "(0.5 FLOPs per byte) becomes 0"),
        intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "elements_not_bytes", (
        "divides by the number of K/V elements read and never multiplies by "
        "bytes_per_element: FLOPs per element, not per byte"),
        intensity_elements_not_bytes),
    Entry("decode_attention_intensity", "wrong", "division_precedence", (
        "writes flops / 2 * batch_size * num_kv_heads * ...: without parentheses Python "
        "divides by 2 and then multiplies by the rest of the byte count"),
        intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed_form_2H_over_G_bytes", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "exact_fractions", None, intensity_fraction),

    Entry("paged_attention", "wrong", "floor_page_count", (
        "takes n // page_size pages instead of ceil(n / page_size), so the partly filled last "
        "page (and every key in it) is left out"),
        paged_floor_page_count),
    Entry("paged_attention", "wrong", "repeat_instead_of_repeat_interleave", (
        "expands the K/V heads with .repeat, which tiles them (0, 1, 0, 1, ...), so query head "
        "h reads KV head h % G instead of h // (H // G)"),
        paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "page_and_slot_swapped", (
        "key t is looked up in page block_table[b, t % page_size] at slot t // page_size: the "
        "page index and the slot are swapped (wrong keys, or an IndexError past the table)"),
        paged_page_and_slot_swapped),
    Entry("paged_attention", "wrong", "empty_sequence_nan", (
        "masks the keys past seq_lens[b] with -inf and takes a plain softmax, so a sequence of "
        "length 0 has an all -inf row and returns NaN instead of zeros"),
        paged_masked_no_guard),
    Entry("paged_attention", "wrong", "pages_flattened_without_transpose", (
        "reshapes the gathered (pages, G, page_size, d) straight to (G, -1, d) without moving "
        "the group axis first, so keys of different KV heads and pages get mixed"),
        paged_flatten_without_transpose),
    Entry("paged_attention", "wrong", "softmax_over_heads", (
        "the (H, n) scores are softmaxed over dim 0, the heads, instead of over the keys"),
        paged_softmax_over_heads),
    Entry("paged_attention", "right", "token_index_float64", None, paged_token_index_f64),
    Entry("paged_attention", "right", "batched_masked_grouped_heads", None,
          paged_batched_masked_guarded),

    Entry("chunked_prefill", "wrong", "cache_not_kept", (
        "each chunk attends only to its own keys and values: they are never appended to a "
        "cache, so the keys of earlier chunks are forgotten"),
        prefill_cache_not_kept),
    Entry("chunked_prefill", "wrong", "mask_top_left", (
        "the (C, stop) mask is a plain tril with diagonal 0, aligned top-left: chunk query "
        "start + i sees keys 0..i instead of 0..start + i"),
        prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "drops_ragged_last_chunk", (
        "loops over N // chunk_size chunks, so when N is not a multiple of chunk_size the "
        "last, shorter chunk is never computed (too few output rows)"),
        prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "heads_split_without_transpose", (
        "reshapes (B, C, d_model) straight to (B, H, C, d_head) (and back) without the "
        "transpose, so heads and tokens get mixed up"),
        prefill_heads_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model", (
        "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)"),
        prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "softmax_over_query_axis", (
        "softmax over dim=-2, the chunk's queries, instead of over the keys (dim=-1)"),
        prefill_softmax_over_queries),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_list_cache", None,
          prefill_sdpa_list_cache),
    Entry("chunked_prefill", "right", "einsum_float64_while_loop", None,
          prefill_einsum_float64),
]
