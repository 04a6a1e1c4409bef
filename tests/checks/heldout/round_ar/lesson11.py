"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ========================================================== decode_attention_intensity: wrong
def intensity_k_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_ignores_gqa(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_macs_not_flops(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    score = batch_size * num_heads * seq_len * head_dim
    weighted = batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score + weighted) / kv_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_cache_shared_by_batch(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                    bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / cache


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


# ========================================================== decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: 4 B H N d / (2 B G N d bytes) = 2 H / (G bytes)
    return (2 * num_heads) / (num_kv_heads * bytes_per_element)


def intensity_fractions_per_token(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                  bytes_per_element=2):
    flops = Fraction(0)
    nbytes = Fraction(0)
    for _ in range(seq_len):  # one cached token at a time
        flops += batch_size * num_heads * (2 * head_dim + 2 * head_dim)
        nbytes += batch_size * num_kv_heads * 2 * head_dim * bytes_per_element
    return float(flops / nbytes)


# ===================================================================== paged_attention: wrong
def paged_keeps_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : (n + P - 1) // P].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_repeat_tiles_groups(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros(batch, heads, d, dtype=work)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        pg = block_table[b][t // page].long()
        sl = t % page
        k = k_pages[pg, :, sl].transpose(0, 1).to(work)  # (G, n, d)
        v = v_pages[pg, :, sl].transpose(0, 1).to(work)
        k = k.repeat(heads // groups, 1, 1)
        v = v.repeat(heads // groups, 1, 1)
        sc = (k @ q[b].to(work).unsqueeze(-1)).squeeze(-1) / math.sqrt(d)
        res[b] = (torch.softmax(sc, dim=-1).unsqueeze(1) @ v).squeeze(1)
    return res.to(q.dtype)


def paged_assumes_consecutive_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    f = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=f)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        first = int(block_table[b, 0])
        n_pages = math.ceil(n / P)
        pages = torch.arange(first, first + n_pages) % k_pages.shape[0]
        k = k_pages[pages].permute(1, 0, 2, 3).reshape(G, n_pages * P, d)[:, :n].to(f)
        v = v_pages[pages].permute(1, 0, 2, 3).reshape(G, n_pages * P, d)[:, :n].to(f)
        k = k.repeat_interleave(rep, 0)
        v = v.repeat_interleave(rep, 0)
        w = torch.softmax((q[b].to(f)[:, None, :] @ k.transpose(1, 2)) / math.sqrt(d), -1)
        out[b] = (w @ v)[:, 0]
    return out.to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    B, H, D = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros(B, H, D, dtype=c)
    for b in range(B):
        L = int(seq_lens[b])
        if L == 0:
            continue
        idx = block_table[b, : math.ceil(L / P)].long()
        keys = k_pages[idx].transpose(0, 1).reshape(G, -1, D)[:, :L].to(c)
        vals = v_pages[idx].transpose(0, 1).reshape(G, -1, D)[:, :L].to(c)
        keys = keys.repeat_interleave(H // G, dim=0)
        vals = vals.repeat_interleave(H // G, dim=0)
        scores = q[b].to(c)[:, None, :] @ keys.transpose(-2, -1)
        result[b] = (torch.softmax(scores, dim=-1) @ vals)[:, 0]
    return result.to(q.dtype)


def paged_softmax_wrong_dim(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
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
        out[b] = (torch.softmax(s, dim=-2) @ v)[:, 0]
    return out.to(q.dtype)


def paged_page_size_from_group_axis(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    page_size = k_pages.shape[1]
    work = torch.promote_types(q.dtype, torch.float32)
    outs = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            outs.append(torch.zeros(H, d, dtype=work))
            continue
        pos = torch.arange(n)
        pg = block_table[b, pos // page_size].long()
        slot = pos % page_size
        k = k_pages[pg, :, slot].to(work)  # (n, G, d)
        v = v_pages[pg, :, slot].to(work)
        g_of_h = torch.arange(H) // (H // G)
        k_h = k[:, g_of_h]  # (n, H, d)
        v_h = v[:, g_of_h]
        s = torch.einsum("hd,nhd->hn", q[b].to(work), k_h) / math.sqrt(d)
        outs.append(torch.einsum("hn,nhd->hd", s.softmax(-1), v_h))
    return torch.stack(outs).to(q.dtype)


# ===================================================================== paged_attention: right
def paged_token_gather_float64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(H):
            g = h // (H // G)
            if n == 0:
                continue
            keys = torch.stack([k_pages[int(block_table[b, t // P]), g, t % P]
                                for t in range(n)]).double()  # (n, d)
            vals = torch.stack([v_pages[int(block_table[b, t // P]), g, t % P]
                                for t in range(n)]).double()
            s = keys @ q[b, h].double() / math.sqrt(d)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ vals
    return out.to(q.dtype)


def paged_padded_batch_masked(q, k_pages, v_pages, block_table, seq_lens):
    """Gathers every table entry for the whole batch, then masks keys past each length."""
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    work = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    max_pages = table.shape[1]
    # (B, max_pages, G, P, d) -> (B, G, max_pages * P, d)
    k_all = k_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(work)
    v_all = v_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(work)
    qg = q.to(work).reshape(B, G, H // G, d)  # query heads grouped by their KV head
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k_all) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    o = torch.einsum("bgrt,bgtd->bgrd", p, v_all)
    return o.reshape(B, H, d).to(q.dtype)


# ===================================================================== chunked_prefill: wrong
def prefill_no_mask_in_own_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
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
        p = torch.softmax(q @ K.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outs.append((p @ V).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    hd = dm // num_heads
    comp = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(b, num_heads, n, hd, dtype=comp)
    v_cache = torch.empty(b, num_heads, n, hd, dtype=comp)
    pieces = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(b, stop - start, num_heads, hd).transpose(1, 2).to(comp)
        k_cache[:, :, start:stop] = (xc @ w_k).reshape(b, stop - start, num_heads, hd).transpose(1, 2)
        v_cache[:, :, start:stop] = (xc @ w_v).reshape(b, stop - start, num_heads, hd).transpose(1, 2)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(stop - start, stop, dtype=torch.bool).tril()
        s = s.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]
        pieces.append(ctx.transpose(1, 2).reshape(b, stop - start, dm))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_cache_replaced(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    out = []
    k_cache = v_cache = None
    for a in range(0, N, chunk_size):
        xc = x[:, a:a + chunk_size]
        C = xc.shape[1]
        split = lambda t: t.reshape(B, C, num_heads, dh).transpose(1, 2).to(f)  # noqa: E731
        q = split(xc @ w_q)
        k_cache = split(xc @ w_k)  # the cache for this step
        v_cache = split(xc @ w_v)
        L = k_cache.shape[2]
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(C, L, dtype=torch.bool).tril(L - C)
        s = s.masked_fill(~mask, -math.inf)
        out.append((torch.softmax(s, -1) @ v_cache).transpose(1, 2).reshape(B, C, D))
    return torch.cat(out, 1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.zeros(B, num_heads, N, dh, dtype=ct)
    V = torch.zeros(B, num_heads, N, dh, dtype=ct)
    res = []
    for i in range(0, N, chunk_size):
        j = min(i + chunk_size, N)
        xc = x[:, i:j]
        q = (xc @ w_q).view(B, j - i, num_heads, dh).transpose(1, 2).to(ct)
        K[:, :, i:j] = (xc @ w_k).view(B, j - i, num_heads, dh).transpose(1, 2).to(ct)
        V[:, :, i:j] = (xc @ w_v).view(B, j - i, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ K[:, :, :j].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(j - i, j, dtype=torch.bool).tril(i)
        sc = sc.masked_fill(~keep, -math.inf)
        ctx = torch.softmax(sc, -1) @ V[:, :, :j]
        res.append(ctx.reshape(B, j - i, D))
    return torch.cat(res, 1).to(x.dtype) @ w_o


def prefill_drops_last_partial_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    bsz, n, d_model = x.shape
    d_head = d_model // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for start in range(0, n - chunk_size + 1, chunk_size):
        stop = start + chunk_size
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(bsz, chunk_size, num_heads, d_head).transpose(1, 2).to(work)
        keys.append((xc @ w_k).reshape(bsz, chunk_size, num_heads, d_head).transpose(1, 2).to(work))
        values.append((xc @ w_v).reshape(bsz, chunk_size, num_heads, d_head).transpose(1, 2).to(work))
        k, v = torch.cat(keys, 2), torch.cat(values, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        s = s.masked_fill(~torch.ones(chunk_size, stop, dtype=torch.bool).tril(start), -math.inf)
        outs.append((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(bsz, chunk_size, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    hd = D // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, hd, dtype=c)
    vc = torch.empty(B, num_heads, N, hd, dtype=c)
    ys = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        q = (xc @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2).to(c)
        kc[:, :, s:e] = (xc @ w_k).unflatten(-1, (num_heads, hd)).transpose(1, 2).to(c)
        vc[:, :, s:e] = (xc @ w_v).unflatten(-1, (num_heads, hd)).transpose(1, 2).to(c)
        att = q @ kc[:, :, :e].transpose(-2, -1) / math.sqrt(D)
        att = att.masked_fill(~torch.ones(e - s, e, dtype=torch.bool).tril(s), -math.inf)
        ys.append((att.softmax(-1) @ vc[:, :, :e]).transpose(1, 2).flatten(-2))
    return torch.cat(ys, 1).to(x.dtype) @ w_o


# ===================================================================== chunked_prefill: right
def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    xw = x.to(work)
    k_parts, v_parts, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = xw[:, start:stop]
        heads = lambda t: t.unflatten(-1, (num_heads, dh)).transpose(1, 2)  # noqa: E731
        q = heads(xc @ w_q.to(work))
        k_parts.append(heads(xc @ w_k.to(work)))
        v_parts.append(heads(xc @ w_v.to(work)))
        k, v = torch.cat(k_parts, dim=2), torch.cat(v_parts, dim=2)
        qi = torch.arange(start, stop)[:, None]
        kj = torch.arange(stop)[None, :]
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=kj <= qi)
        outs.append(ctx.transpose(1, 2).flatten(-2))
    return (torch.cat(outs, dim=1) @ w_o.to(work)).to(x.dtype)


def prefill_per_head_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    x64 = x.double()
    out = torch.zeros(B, N, D, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq, wk, wv = w_q.double()[:, cols], w_k.double()[:, cols], w_v.double()[:, cols]
        k_cache = torch.zeros(B, 0, dh, dtype=torch.float64)
        v_cache = torch.zeros(B, 0, dh, dtype=torch.float64)
        for start in range(0, N, chunk_size):
            xc = x64[:, start:start + chunk_size]
            C = xc.shape[1]
            k_cache = torch.cat([k_cache, xc @ wk], dim=1)
            v_cache = torch.cat([v_cache, xc @ wv], dim=1)
            s = torch.einsum("bcd,btd->bct", xc @ wq, k_cache) / math.sqrt(dh)
            pos_q = torch.arange(start, start + C)[:, None]
            pos_k = torch.arange(k_cache.shape[1])[None, :]
            s = s.masked_fill(pos_k > pos_q, -math.inf)
            ctx = torch.einsum("bct,btd->bcd", torch.softmax(s, dim=-1), v_cache)
            out[:, start:start + C] += ctx @ w_o.double()[cols, :]
    return out.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "bytes_of_k_only",
          "Counts the bytes of the cached keys only and forgets the values, so the bytes are "
          "half what is read and the intensity doubles.",
          intensity_k_only),
    Entry("decode_attention_intensity", "wrong", "bytes_with_query_heads",
          "Counts the cache bytes with num_heads instead of num_kv_heads, as if every query "
          "head had its own K and V (ignores the GQA sharing).",
          intensity_ignores_gqa),
    Entry("decode_attention_intensity", "wrong", "multiply_add_as_one_flop",
          "Counts each multiply-add of the two products as 1 FLOP instead of 2, halving the "
          "FLOPs.",
          intensity_macs_not_flops),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "Divides with // so the intensity is an int rounded down, not a float.",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "cache_bytes_without_batch",
          "Counts the cache bytes once for the whole batch, as if the sequences shared K and "
          "V; each sequence reads its own cache.",
          intensity_cache_shared_by_batch),
    Entry("decode_attention_intensity", "wrong", "division_precedence",
          "Writes flops / 2 * batch * kv_heads * ... without parentheses, which divides by 2 "
          "and then multiplies by the rest of the byte count.",
          intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed_form_2h_over_g_bytes", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fractions_token_by_token", None,
          intensity_fractions_per_token),
    Entry("paged_attention", "wrong", "whole_last_page",
          "Keeps every slot of the sequence's pages, including the stale slots of the last "
          "page past seq_len, instead of cutting the keys to the first seq_len.",
          paged_keeps_whole_last_page),
    Entry("paged_attention", "wrong", "repeat_instead_of_repeat_interleave",
          "Expands the KV heads with .repeat (tiling g0, g1, g0, g1, ...) instead of "
          "repeat_interleave, so query head h reads group h % G instead of h // (H // G).",
          paged_repeat_tiles_groups),
    Entry("paged_attention", "wrong", "assumes_consecutive_pages",
          "Reads only block_table[b, 0] and assumes the sequence's other pages follow it in "
          "the pool, instead of looking every page up in the block table.",
          paged_assumes_consecutive_pages),
    Entry("paged_attention", "wrong", "no_score_scale",
          "The scores q . k are not divided by sqrt(d).",
          paged_no_scale),
    Entry("paged_attention", "wrong", "softmax_over_size_one_axis",
          "Applies the softmax over dim=-2, the size-1 query axis of (H, 1, n), so every weight "
          "is 1 and the output is the sum of the values.",
          paged_softmax_wrong_dim),
    Entry("paged_attention", "wrong", "page_size_from_group_axis",
          "Reads page_size from k_pages.shape[1] (the KV-head axis G) instead of "
          "k_pages.shape[2], so token t is looked up in the wrong page and slot (or past the end "
          "of the block table row, which raises IndexError).",
          paged_page_size_from_group_axis),
    Entry("paged_attention", "right", "token_by_token_gather_float64", None,
          paged_token_gather_float64),
    Entry("paged_attention", "right", "padded_batch_with_length_mask", None,
          paged_padded_batch_masked),
    Entry("chunked_prefill", "wrong", "own_chunk_not_masked",
          "Lets each chunk attend to all of its own keys: the causal mask inside the chunk is "
          "missing, so a query sees later tokens of its chunk.",
          prefill_no_mask_in_own_chunk),
    Entry("chunked_prefill", "wrong", "mask_aligned_top_left",
          "Builds the (C, stop) mask with tril() (top-left aligned) instead of tril(start) "
          "(bottom-right), so from the second chunk on queries lose most of the cached keys.",
          prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "cache_replaced_not_extended",
          "Overwrites the K/V cache with the current chunk's keys and values instead of "
          "appending them, so a chunk never sees earlier chunks.",
          prefill_cache_replaced),
    Entry("chunked_prefill", "wrong", "heads_merged_without_transpose",
          "Merges heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transposing heads and tokens back first.",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "range_drops_partial_chunk",
          "Loops with range(0, N - chunk_size + 1, chunk_size), which skips the last, shorter "
          "chunk when chunk_size does not divide N (and every chunk when chunk_size > N, where "
          "torch.cat of no pieces raises).",
          prefill_drops_last_partial_chunk),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).",
          prefill_scale_by_d_model),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_bool_mask", None, prefill_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "per_head_float64_growing_cache", None,
          prefill_per_head_float64),
]
