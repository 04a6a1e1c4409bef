"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ========================================================== decode_attention_intensity: wrong
def intensity_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def intensity_one_flop_per_mac(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    score_flops = batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    mix_flops = batch_size * num_heads * seq_len * head_dim  # sum of weighted values
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / bytes_read


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    moved = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(flops // moved)


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_counts_elements(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    k_and_v = 2 * batch_size * num_kv_heads * seq_len * head_dim
    return flops / k_and_v


def intensity_prefill_flops(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    # scores q k^T and weights @ v over the sequence
    flops = 2 * (2 * batch_size * num_heads * seq_len * seq_len * head_dim)
    bytes_kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_kv


# ========================================================== decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # N, B and d cancel: 4 B H N d / (2 B G N d bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query_flops = 2 * seq_len * head_dim * 2
    per_kv_head_bytes = seq_len * head_dim * bytes_per_element * 2
    ratio = Fraction(batch_size * num_heads * per_query_flops,
                     batch_size * num_kv_heads * per_kv_head_bytes)
    return float(ratio)


# ===================================================================== paged_attention: wrong
def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)  # every slot of the pages
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_tiles_heads(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :(n + page - 1) // page].long()
        keys = k_pages[idx].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        vals = v_pages[idx].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        keys = keys.repeat(heads // groups, 1, 1)
        vals = vals.repeat(heads // groups, 1, 1)
        scores = torch.einsum("hd,hnd->hn", q[b].to(compute), keys) / math.sqrt(d)
        result[b] = torch.einsum("hn,hnd->hd", torch.softmax(scores, -1), vals)
    return result.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    outs = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            outs.append(torch.zeros(H, d, dtype=ct))
            continue
        n_pages = max(1, n // P)
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        s = torch.bmm(q[b].to(ct).unsqueeze(1), k.transpose(1, 2)) / math.sqrt(d)
        outs.append(torch.bmm(torch.softmax(s, -1), v).squeeze(1))
    return torch.stack(outs).to(q.dtype)


def paged_no_empty_guard(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    n_rep = heads // groups
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        pages = block_table[b, : math.ceil(n / page_size)].long()
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat_interleave(n_rep, dim=0)
        v = v.repeat_interleave(n_rep, dim=0)
        scores = q[b].to(compute)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        scores = scores - scores.amax(dim=-1, keepdim=True)  # stable softmax by hand
        e = torch.exp(scores)
        out[b] = (e / e.sum(dim=-1, keepdim=True) @ v)[:, 0]
    return out.to(q.dtype)


def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t % P])
            slot = t // P
            ks.append(k_pages[page, :, slot])
            vs.append(v_pages[page, :, slot])
        k = torch.stack(ks, dim=1).to(ct)  # (G, n, d)
        v = torch.stack(vs, dim=1).to(ct)
        for h in range(H):
            g = h // (H // G)
            w = torch.softmax(k[g] @ q[b, h].to(ct) / math.sqrt(d), dim=0)
            out[b, h] = w @ v[g]
    return out.to(q.dtype)


def paged_flatten_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / page_size)].long()
        k = k_pages[pages].reshape(groups, -1, d)[:, :n].to(compute)
        v = v_pages[pages].reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat_interleave(heads // groups, dim=0)
        v = v.repeat_interleave(heads // groups, dim=0)
        scores = q[b].to(compute)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


# ===================================================================== paged_attention: right
def paged_token_gather_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        t = torch.arange(n)
        page_ids = block_table[b].long()[t // P]
        k = k_pages[page_ids, :, t % P].double()  # (n, G, d)
        v = v_pages[page_ids, :, t % P].double()
        qg = q[b].double().view(G, H // G, d)  # heads h = g * (H // G) + r
        s = torch.einsum("grd,ngd->grn", qg, k) / math.sqrt(d)
        if n == 0:
            continue
        w = torch.softmax(s, dim=-1)
        out[b] = torch.einsum("grn,ngd->grd", w, v).reshape(H, d)
    return out.to(q.dtype)


def paged_masked_batch(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    k = k_pages[block_table.long()]  # (B, max_pages, G, P, d)
    v = v_pages[block_table.long()]
    k = k.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    qg = q.to(ct).reshape(B, G, H // G, d)
    s = qg @ k.transpose(-2, -1) / math.sqrt(d)  # (B, G, H/G, T)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    top = s.amax(dim=-1, keepdim=True)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    e = torch.exp(s - top)
    z = e.sum(dim=-1, keepdim=True)
    w = e / z.masked_fill(z == 0, 1.0)
    return (w @ v).reshape(B, H, d).to(q.dtype)


# ===================================================================== chunked_prefill: wrong
def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        q = (xc @ w_q).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        v = (xc @ w_v).reshape(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        causal = torch.ones(e - s, e - s, dtype=torch.bool).tril()
        sc = sc.masked_fill(~causal, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ v
        pieces.append(ctx.transpose(1, 2).reshape(B, e - s, D))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache, v_cache, outs = [], [], []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        split = lambda t: t.reshape(batch, stop - start, num_heads, d_head).transpose(1, 2)  # noqa
        q = split(xc @ w_q).to(compute)
        k_cache.append(split(xc @ w_k).to(compute))
        v_cache.append(split(xc @ w_v).to(compute))
        k, v = torch.cat(k_cache, dim=2), torch.cat(v_cache, dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        allowed = torch.tril(torch.ones(stop - start, stop, dtype=torch.bool))
        scores = scores.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v
        outs.append(ctx.transpose(1, 2).reshape(batch, stop - start, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_drops_last_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros(B, H, N, dh, dtype=ct)
    vc = torch.zeros(B, H, N, dh, dtype=ct)
    out = []
    n_chunks = max(1, N // chunk_size)
    for c in range(n_chunks):
        a, z = c * chunk_size, min((c + 1) * chunk_size, N)
        xc = x[:, a:z]
        q = (xc @ w_q).view(B, z - a, H, dh).transpose(1, 2).to(ct)
        kc[:, :, a:z] = (xc @ w_k).view(B, z - a, H, dh).transpose(1, 2).to(ct)
        vc[:, :, a:z] = (xc @ w_v).view(B, z - a, H, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(z - a, z, dtype=torch.bool).tril(a)
        s = s.masked_fill(~keep, -math.inf)
        o = torch.softmax(s, -1) @ vc[:, :, :z]
        out.append(o.transpose(1, 2).reshape(B, z - a, D))
    return torch.cat(out, 1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    heads = num_heads
    d_head = d_model // heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((batch, heads, n, d_head), dtype=compute)
    v_cache = torch.empty((batch, heads, n, d_head), dtype=compute)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        x_c = x[:, start:stop]
        q = (x_c @ w_q).reshape(batch, -1, heads, d_head).transpose(1, 2).to(compute)
        k_cache[:, :, start:stop] = (x_c @ w_k).reshape(batch, -1, heads, d_head).transpose(1, 2)
        v_cache[:, :, start:stop] = (x_c @ w_v).reshape(batch, -1, heads, d_head).transpose(1, 2)
        k, v = k_cache[:, :, :stop], v_cache[:, :, :stop]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        mask = torch.ones(stop - start, stop, dtype=torch.bool).tril(start)
        scores = scores.masked_fill(~mask, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v  # (B, H, C, d_head)
        outputs.append(ctx.reshape(batch, stop - start, d_model))
    return torch.cat(outputs, dim=1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, num_heads, 0, dh, dtype=ct)
    V = torch.empty(B, num_heads, 0, dh, dtype=ct)
    res = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = (xc @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        K = torch.cat([K, (xc @ w_k).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)], 2)
        V = torch.cat([V, (xc @ w_v).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)], 2)
        s = q @ K.transpose(-2, -1) / math.sqrt(D)
        qpos = torch.arange(a, z)[:, None]
        kpos = torch.arange(z)[None, :]
        s = s.masked_fill(kpos > qpos, -math.inf)
        res.append((torch.softmax(s, -1) @ V).transpose(1, 2).flatten(2))
    return torch.cat(res, 1).to(x.dtype) @ w_o


def prefill_strict_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = (xc @ w_q).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, a:z] = (xc @ w_k).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, a:z] = (xc @ w_v).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        visible = torch.arange(z)[None, :] < torch.arange(a, z)[:, None]
        s = s.masked_fill(~visible, -math.inf)
        p = torch.nan_to_num(torch.softmax(s, dim=-1))
        outs.append((p @ vc[:, :, :z]).transpose(1, 2).reshape(B, z - a, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


# ===================================================================== chunked_prefill: right
def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xf = x.float()
    q_all = (xf @ w_q.float()).view(B, N, num_heads, dh).transpose(1, 2)
    k_all = (xf @ w_k.float()).view(B, N, num_heads, dh).transpose(1, 2)
    v_all = (xf @ w_v.float()).view(B, N, num_heads, dh).transpose(1, 2)
    ctx = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        allowed = torch.arange(z)[None, :] <= torch.arange(a, z)[:, None]  # (C, z)
        ctx.append(F.scaled_dot_product_attention(q_all[:, :, a:z], k_all[:, :, :z],
                                                  v_all[:, :, :z], attn_mask=allowed))
    merged = torch.cat(ctx, dim=2).transpose(1, 2).reshape(B, N, D)
    return (merged @ w_o.float()).to(x.dtype)


def prefill_einsum_f64_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    xd = x.double()
    wq = w_q.double().view(d_model, num_heads, d_head)
    wk = w_k.double().view(d_model, num_heads, d_head)
    wv = w_v.double().view(d_model, num_heads, d_head)
    wo = w_o.double().view(num_heads, d_head, d_model)
    cache_k, cache_v = None, None
    result = torch.empty((batch, n, d_model), dtype=torch.float64)
    chunk_starts = list(range(0, n, chunk_size))
    for a in chunk_starts:
        z = min(a + chunk_size, n)
        xc = xd[:, a:z]
        q = torch.einsum("bcm,mhe->bhce", xc, wq)
        k_new = torch.einsum("bcm,mhe->bhce", xc, wk)
        v_new = torch.einsum("bcm,mhe->bhce", xc, wv)
        cache_k = k_new if cache_k is None else torch.cat([cache_k, k_new], dim=2)
        cache_v = v_new if cache_v is None else torch.cat([cache_v, v_new], dim=2)
        s = torch.einsum("bhce,bhte->bhct", q, cache_k) / math.sqrt(d_head)
        rel = torch.arange(z)[None, :] - torch.arange(a, z)[:, None]  # key - query position
        s = s.masked_fill(rel > 0, -math.inf)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bhct,bhte->bhce", p, cache_v)
        result[:, a:z] = torch.einsum("bhce,hem->bcm", ctx, wo)
    return result.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "query-heads-in-bytes",
          "counts the cached K/V bytes with num_heads instead of num_kv_heads, as if every "
          "query head had its own cache, so GQA/MQA sharing never raises the intensity",
          intensity_query_heads_in_bytes),
    Entry("decode_attention_intensity", "wrong", "one-flop-per-mac",
          "counts one FLOP per multiply-add instead of two, halving the FLOPs",
          intensity_one_flop_per_mac),
    Entry("decode_attention_intensity", "wrong", "floor-division",
          "divides FLOPs by bytes with //, flooring a fractional intensity (0.5 becomes 0)",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "missing-parentheses",
          "writes flops / 2 * B * G * N * d * bytes, which divides by 2 and then multiplies by "
          "the rest: the byte count needs parentheses",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "elements-not-bytes",
          "divides by the number of K and V elements, forgetting bytes_per_element",
          intensity_counts_elements),
    Entry("decode_attention_intensity", "wrong", "prefill-flops",
          "counts seq_len queries against seq_len keys (N^2, a prefill) instead of the one new "
          "query per sequence and head of a decode step",
          intensity_prefill_flops),
    Entry("decode_attention_intensity", "right", "closed-form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction-per-head", None, intensity_fraction),

    Entry("paged_attention", "wrong", "whole-last-page",
          "attends over every slot of the sequence's pages, including the stale slots past "
          "seq_lens[b] in its last page, instead of cutting to the first seq_lens[b] keys",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "repeat-tiles-heads",
          "expands the KV heads with .repeat, which tiles them (0, 1, 0, 1), so query head h "
          "reads KV head h % G instead of h // (H // G) (repeat_interleave)",
          paged_repeat_tiles_heads),
    Entry("paged_attention", "wrong", "floor-page-count",
          "takes n // page_size pages instead of ceil(n / page_size), so the partly filled last "
          "page (and its keys) is dropped",
          paged_floor_page_count),
    Entry("paged_attention", "wrong", "no-empty-sequence-case",
          "has no special case for seq_lens[b] == 0: its hand-written stable softmax takes amax "
          "over zero keys, which raises an IndexError instead of giving a zero row",
          paged_no_empty_guard),
    Entry("paged_attention", "wrong", "page-slot-swapped",
          "swaps the page and slot of key t: reads page block_table[b, t % page_size] at slot "
          "t // page_size instead of page t // page_size at slot t % page_size (wrong keys, or an "
          "IndexError once t // page_size passes the page size)",
          paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "flatten-without-moving-groups",
          "flattens the gathered (pages, G, page_size, d) block to (G, keys, d) without moving "
          "the group axis first, so KV heads and pages are mixed up",
          paged_flatten_without_transpose),
    Entry("paged_attention", "right", "token-gather-float64", None, paged_token_gather_f64),
    Entry("paged_attention", "right", "masked-whole-batch", None, paged_masked_batch),

    Entry("chunked_prefill", "wrong", "no-earlier-chunks",
          "each chunk attends only to its own keys and values (causally) and never to the "
          "cached keys of earlier chunks",
          prefill_no_cache),
    Entry("chunked_prefill", "wrong", "mask-top-left",
          "builds the chunk's (C, stop) mask with torch.tril and no offset, aligned top-left, "
          "so query start + i sees only keys 0..i instead of 0..start + i",
          prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "drops-ragged-chunk",
          "loops over N // chunk_size chunks, so the shorter last chunk is never computed and "
          "the output has fewer than N rows",
          prefill_drops_last_chunk),
    Entry("chunked_prefill", "wrong", "merge-without-transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transposing heads and tokens first",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale-d-model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "strict-mask",
          "the mask keeps key j only when j < i: `<` where `<=` belongs, so every token is "
          "hidden from itself (and the first token sees nothing)",
          prefill_strict_mask),
    Entry("chunked_prefill", "right", "sdpa-per-chunk-f32", None, prefill_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "einsum-cat-cache-f64", None, prefill_einsum_f64_loop),
]
