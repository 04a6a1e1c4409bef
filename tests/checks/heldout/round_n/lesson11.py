"""Lesson 11 (serving): decode_attention_intensity, paged_attention, chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ decode_attention_intensity
def intensity_mac_as_one(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = batch_size * num_heads * seq_len * head_dim * 2  # one multiply-add per element, two products
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def intensity_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
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


def intensity_counts_own_key(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    keys_seen = seq_len + 1  # the cached keys plus the new token's own key
    flops = 4 * batch_size * num_heads * keys_seen * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def intensity_cache_shared_by_batch(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                    bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element  # read once per step
    return flops / nbytes


def intensity_right_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    return float(2 * num_heads) / float(num_kv_heads * bytes_per_element)


def intensity_right_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    per_query_head = 2 * seq_len * head_dim + 2 * seq_len * head_dim  # q.k and p.v
    flops = per_query_head * num_heads * batch_size
    per_kv_head = 2 * seq_len * head_dim * bytes_per_element  # K and V
    nbytes = per_kv_head * num_kv_heads * batch_size
    return float(Fraction(flops, nbytes))


# ============================================================================ paged_attention
def paged_full_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)  # whole pages
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(1, 2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_tiles(q, k_pages, v_pages, block_table, seq_lens):
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
        k = k.repeat(H // G, 1, 1)
        v = v.repeat(H // G, 1, 1)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_ignores_block_table(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.stack([k_pages[t // P, :, t % P] for t in range(n)], dim=1).to(ct)  # (G, n, d)
        vals = torch.stack([v_pages[t // P, :, t % P] for t in range(n)], dim=1).to(ct)
        for h in range(H):
            s = keys[h // rep] @ q[b, h].to(ct) / math.sqrt(d)
            out[b, h] = torch.softmax(s, 0) @ vals[h // rep]
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
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (k @ q[b].to(ct)[:, :, None]).squeeze(-1) / math.sqrt(d)  # (H, n)
        out[b] = (torch.softmax(s, -1)[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def paged_mask_off_by_one(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    # gather every slot the table can address: (B, max_pages * P, G, d)
    k = k_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    k = k.repeat_interleave(H // G, dim=1)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), k) / math.sqrt(d)
    t = torch.arange(max_pages * P)
    valid = t[None, :] <= seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.softmax(s, -1)
    out = torch.einsum("bht,bhtd->bhd", w, v)
    out = torch.where((seq_lens > 0)[:, None, None], out, torch.zeros_like(out))
    return out.to(q.dtype)


def paged_keeps_query_axis(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, 1, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct).unsqueeze(1) @ k.transpose(-2, -1) / math.sqrt(d)  # (H, 1, n)
        out[b] = torch.softmax(s, -1) @ v  # (H, 1, d)
    return out.to(q.dtype)


def paged_right_token_loop(q, k_pages, v_pages, block_table, seq_lens):
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
            ks, vs = [], []
            for t in range(n):
                page = int(block_table[b, t // P])
                ks.append(k_pages[page, g, t % P].double())
                vs.append(v_pages[page, g, t % P].double())
            K, V = torch.stack(ks), torch.stack(vs)
            s = K @ q[b, h].double() / math.sqrt(d)
            s = s - s.max()
            e = torch.exp(s)
            out[b, h] = (e / e.sum()) @ V
    return out.to(q.dtype)


def paged_right_padded_batch(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    lens = seq_lens.long()
    T = max(int(lens.max()), 1)
    t = torch.arange(T)
    page_of = torch.gather(block_table.long(), 1, (t // P).clamp(max=block_table.shape[1] - 1)
                           .expand(B, T))  # (B, T)
    slot_of = (t % P).expand(B, T)
    k = k_pages[page_of, :, slot_of].double()  # (B, T, G, d)
    v = v_pages[page_of, :, slot_of].double()
    group = torch.arange(H) // (H // G)
    k = k[:, :, group]  # (B, T, H, d)
    v = v[:, :, group]
    s = torch.einsum("bhd,bthd->bht", q.double(), k) * d ** -0.5
    visible = (t[None, :] < lens[:, None])[:, None, :]  # (B, 1, T)
    s = torch.where(visible, s, torch.full_like(s, -math.inf))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.where(visible, torch.exp(s - top), torch.zeros_like(s))
    den = e.sum(-1, keepdim=True)
    w = e / torch.where(den > 0, den, torch.ones_like(den))
    return torch.einsum("bht,bthd->bhd", w, v).to(q.dtype)


# ============================================================================ chunked_prefill
def _heads(t, h):
    b, n, dm = t.shape
    return t.view(b, n, h, dm // h).transpose(1, 2)


def prefill_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        q = _heads(xc @ w_q.to(ct), num_heads)
        ks.append(_heads(xc @ w_k.to(ct), num_heads))
        vs.append(_heads(xc @ w_v.to(ct), num_heads))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(stop - start, stop, dtype=torch.bool).tril()  # top-left aligned
        s = s.masked_fill(~mask, -math.inf)
        ctx = torch.softmax(s, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size].to(ct)
        c = xc.shape[1]
        q = _heads(xc @ w_q.to(ct), num_heads)
        k = _heads(xc @ w_k.to(ct), num_heads)
        v = _heads(xc @ w_v.to(ct), num_heads)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(torch.ones(c, c, dtype=torch.bool).triu(1), -math.inf)
        outs.append((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, c, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, 0, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, 0, dh, dtype=ct)
    outs = []
    for start in range(0, N - chunk_size + 1, chunk_size):
        stop = start + chunk_size
        xc = x[:, start:stop].to(ct)
        q = _heads(xc @ w_q.to(ct), num_heads)
        k_cache = torch.cat([k_cache, _heads(xc @ w_k.to(ct), num_heads)], 2)
        v_cache = torch.cat([v_cache, _heads(xc @ w_v.to(ct), num_heads)], 2)
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)
        qpos = torch.arange(start, stop)[:, None]
        s = s.masked_fill(torch.arange(stop)[None, :] > qpos, -math.inf)
        outs.append((torch.softmax(s, -1) @ v_cache).transpose(1, 2).reshape(B, chunk_size, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_excludes_self(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        q = _heads(xc @ w_q.to(ct), num_heads)
        k_cache[:, :, start:stop] = _heads(xc @ w_k.to(ct), num_heads)
        v_cache[:, :, start:stop] = _heads(xc @ w_v.to(ct), num_heads)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.arange(stop)[None, :] < torch.arange(start, stop)[:, None]
        s = s.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        q = _heads(xc @ w_q.to(ct), num_heads)
        k_cache[:, :, start:stop] = _heads(xc @ w_k.to(ct), num_heads)
        v_cache[:, :, start:stop] = _heads(xc @ w_v.to(ct), num_heads)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        s = s.masked_fill(future, -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, stop - start, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_prepends_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = v_cache = None
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        q = _heads(xc @ w_q.to(ct), num_heads)
        k_new = _heads(xc @ w_k.to(ct), num_heads)
        v_new = _heads(xc @ w_v.to(ct), num_heads)
        k_cache = k_new if k_cache is None else torch.cat([k_new, k_cache], dim=2)
        v_cache = v_new if v_cache is None else torch.cat([v_new, v_cache], dim=2)
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)
        ok = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]
        s = s.masked_fill(~ok, -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_right_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        q = _heads(xc @ w_q.to(ct), num_heads)
        keys.append(_heads(xc @ w_k.to(ct), num_heads))
        values.append(_heads(xc @ w_v.to(ct), num_heads))
        k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
        allowed = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]  # (C, stop)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_right_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    x64 = x.double()
    Q, K, V = x64 @ w_q.double(), x64 @ w_k.double(), x64 @ w_v.double()  # (B, N, D)
    ctx = torch.zeros(B, N, D, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        for start in range(0, N, chunk_size):
            stop = min(start + chunk_size, N)
            q = Q[:, start:stop, cols]  # (B, C, dh)
            k = K[:, :stop, cols]  # (B, stop, dh): cache of this head so far
            v = V[:, :stop, cols]
            s = torch.einsum("bcd,btd->bct", q, k) / math.sqrt(dh)
            hide = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
            s = s.masked_fill(hide, -math.inf)
            s = s - s.max(dim=-1, keepdim=True).values
            e = s.exp()
            ctx[:, start:stop, cols] = torch.einsum("bct,btd->bcd", e / e.sum(-1, keepdim=True), v)
    return (ctx @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "multiply_add_as_one_flop",
          "Counts each multiply-add as one FLOP instead of two, so the intensity comes out "
          "half as large.", intensity_mac_as_one),
    Entry("decode_attention_intensity", "wrong", "reads_only_keys",
          "Divides by the bytes of the cached keys only and forgets that the values are read "
          "too, doubling the intensity.", intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "query_heads_in_cache_bytes",
          "Counts the cache bytes with num_heads instead of num_kv_heads, as if every query "
          "head had its own K/V head, which loses the GQA saving whenever the two differ.",
          intensity_query_heads_in_bytes),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "Divides FLOPs by bytes with //, which returns a truncated int (0 instead of 0.5 "
          "when the intensity is below 1) instead of a float.", intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "counts_new_token_key",
          "Counts seq_len + 1 keys in the FLOPs (the new token's own key as well) but seq_len "
          "keys in the bytes, so FLOPs and bytes no longer describe the same keys.",
          intensity_counts_own_key),
    Entry("decode_attention_intensity", "wrong", "cache_shared_across_batch",
          "Counts the K/V bytes of one sequence only, as if the batch shared one cache like it "
          "shares weights, so the intensity grows with batch_size.",
          intensity_cache_shared_by_batch),
    Entry("decode_attention_intensity", "right", "closed_form_ratio", None,
          intensity_right_closed_form),
    Entry("decode_attention_intensity", "right", "exact_fraction", None,
          intensity_right_fraction),

    Entry("paged_attention", "wrong", "whole_last_page",
          "Attends to every slot of the sequence's pages without trimming to seq_lens[b], so "
          "the stale slots at the end of a partly filled last page are read as keys.",
          paged_full_pages),
    Entry("paged_attention", "wrong", "repeat_tiles_groups",
          "Expands the K/V heads with Tensor.repeat, which tiles the groups (head h reads "
          "group h % G) instead of repeat_interleave's h // (H // G).", paged_repeat_tiles),
    Entry("paged_attention", "wrong", "ignores_block_table",
          "Looks key t up in pool page t // page_size, as if each sequence's pages were the "
          "first pages of the pool in order, instead of in block_table[b, t // page_size].",
          paged_ignores_block_table),
    Entry("paged_attention", "wrong", "reshape_pages_without_transpose",
          "Reshapes the gathered pages (p, G, page_size, d) straight to (G, p * page_size, d) "
          "without moving the group axis first, which mixes groups and pages when a sequence "
          "spans several pages and G > 1.", paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "length_mask_off_by_one",
          "Masks the padded keys with t <= seq_lens[b] instead of t < seq_lens[b], so a sequence "
          "whose pages have room left also attends to one stale slot past its end.", paged_mask_off_by_one),
    Entry("paged_attention", "wrong", "keeps_query_axis",
          "Keeps the length-1 query axis of q[b][:, None, :] @ k^T in the result, returning "
          "(B, H, 1, d) instead of (B, H, d).", paged_keeps_query_axis),
    Entry("paged_attention", "right", "token_by_token_float64", None, paged_right_token_loop),
    Entry("paged_attention", "right", "padded_gather_masked", None, paged_right_padded_batch),

    Entry("chunked_prefill", "wrong", "top_left_chunk_mask",
          "Masks each chunk with a top-left aligned (C, stop) lower triangle, so query i of a "
          "later chunk only sees the first i + 1 keys instead of all keys up to its absolute "
          "position start + i.", prefill_top_left_mask),
    Entry("chunked_prefill", "wrong", "own_chunk_only",
          "Attends only to the keys of the query's own chunk and never keeps a cache of the "
          "earlier chunks, so every chunk after the first misses the keys before it.",
          prefill_own_chunk_only),
    Entry("chunked_prefill", "wrong", "drops_ragged_last_chunk",
          "Loops over range(0, N - chunk_size + 1, chunk_size), so when N is not a multiple "
          "of chunk_size the short last chunk is never processed and the output has fewer "
          "than N rows.", prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "mask_excludes_own_key",
          "Allows keys j < start + i instead of j <= start + i, so no query attends to its own "
          "key and the first query's row (no key at all) becomes NaN.", prefill_excludes_self),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "Reshapes the (B, H, C, d_head) context straight to (B, C, d_model) without first "
          "transposing the head and query axes, scrambling positions and heads.",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "cache_prepended",
          "Puts each new chunk's keys and values in front of the cache (cat([new, cache])) "
          "while the causal mask assumes keys in position order, so later chunks mask the "
          "wrong keys.", prefill_prepends_cache),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_bool_mask", None,
          prefill_right_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "head_loop_float64", None, prefill_right_head_loop_float64),
]
