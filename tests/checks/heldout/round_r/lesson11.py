"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def dai_kv_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def dai_only_keys_read(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def dai_mac_as_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    score_flops = batch_size * num_heads * seq_len * head_dim
    mix_flops = batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(score_flops + mix_flops) / kv_bytes


def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def dai_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def dai_cache_shared_by_batch(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element  # read once
    return flops / cache_bytes


# ============================================================ decode_attention_intensity: right
def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    # 4 B H N d FLOPs over 2 B G N d bytes: only the sharing factor and the element size remain
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def dai_fraction_per_sequence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = 0
    nbytes = 0
    for _ in range(batch_size):
        for _h in range(num_heads):
            flops += 2 * seq_len * head_dim  # q . k_t for every cached t
            flops += 2 * seq_len * head_dim  # sum_t p_t v_t
        for _g in range(num_kv_heads):
            nbytes += seq_len * head_dim * bytes_per_element  # K
            nbytes += seq_len * head_dim * bytes_per_element  # V
    return float(Fraction(flops, nbytes))


# ============================================================ paged_attention: wrong
def _gather_seq(pages_pool, table_row, n, page_size):
    groups, d = pages_pool.shape[1], pages_pool.shape[3]
    pages = table_row[: math.ceil(n / page_size)].long()
    return pages_pool[pages].transpose(0, 1).reshape(groups, -1, d)  # (G, p * P, d)


def pa_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k = _gather_seq(k_pages, block_table[b], n, P).to(ct)  # every slot of the pages
        v = _gather_seq(v_pages, block_table[b], n, P).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        n_pages = n // P
        if n_pages == 0:
            continue
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    results = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            results.append(torch.zeros((H, d), dtype=ct))
            continue
        k = _gather_seq(k_pages, block_table[b], n, P)[:, :n].to(ct)
        v = _gather_seq(v_pages, block_table[b], n, P)[:, :n].to(ct)
        k = k.repeat(H // G, 1, 1)  # (H, n, d)
        v = v.repeat(H // G, 1, 1)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        results.append(torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v))
    return torch.stack(results).to(q.dtype)


def pa_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_softmax_over_heads(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k = _gather_seq(k_pages, block_table[b], n, P)[:, :n].to(ct)
        v = _gather_seq(v_pages, block_table[b], n, P)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (k @ q[b].to(ct)[:, :, None])[..., 0] / math.sqrt(d)  # (H, n)
        p = torch.softmax(s, dim=0)
        out[b] = (p[:, :, None] * v).sum(dim=1)
    return out.to(q.dtype)


def pa_pool_indexed_directly(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page, slot = t // P, t % P  # page and slot of key t
            ks.append(k_pages[page, :, slot])
            vs.append(v_pages[page, :, slot])
        k = torch.stack(ks, dim=1).double()  # (G, n, d)
        v = torch.stack(vs, dim=1).double()
        for h in range(H):
            s = k[h // rep] @ q[b, h].double() / math.sqrt(d)
            out[b, h] = torch.softmax(s, dim=0) @ v[h // rep]
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def pa_token_loop_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        rows = [block_table[b, t // P].item() for t in range(n)]
        slots = [t % P for t in range(n)]
        idx_p = torch.tensor(rows, dtype=torch.long)
        idx_s = torch.tensor(slots, dtype=torch.long)
        k = k_pages[idx_p, :, idx_s].double()  # (n, G, d)
        v = v_pages[idx_p, :, idx_s].double()
        for h in range(H):
            g = h // per_group
            logits = (k[:, g, :] @ q[b, h].double()) / math.sqrt(d)
            w = torch.exp(logits - logits.max())
            out[b, h] = (w / w.sum()) @ v[:, g, :]
    return out.to(q.dtype)


def pa_padded_masked(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    num_pages, G, P, _ = k_pages.shape
    max_pages = block_table.shape[1]
    dt = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long().clamp(0, num_pages - 1)  # entries past a length are masked
    k_all = k_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(dt)
    v_all = v_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(dt)
    qg = q.to(dt).reshape(B, G, H // G, d)  # head h = g * (H // G) + r
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k_all) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)  # empty sequences: zeros
    out = torch.einsum("bgrt,bgtd->bgrd", p, v_all)
    return out.reshape(B, H, d).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def _to_heads(t, h):
    b, n, w = t.shape
    return t.view(b, n, h, w // h).transpose(1, 2)


def cp_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        q = _to_heads(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, start:stop] = _to_heads(xc @ w_k, num_heads).to(ct)
        v_cache[:, :, start:stop] = _to_heads(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(stop - start, stop, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, -math.inf)
        ctx = torch.softmax(s, dim=-1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        q = _to_heads(xc @ w_q, num_heads).to(ct)
        k = _to_heads(xc @ w_k, num_heads).to(ct)
        v = _to_heads(xc @ w_v, num_heads).to(ct)
        c = stop - start
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(c, c, dtype=torch.bool).tril(), -math.inf)
        pieces.append((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, c, D))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def cp_ragged_chunk_dropped(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, N - chunk_size + 1, chunk_size):
        stop = start + chunk_size
        xc = x[:, start:stop]
        q = _to_heads(xc @ w_q, num_heads).to(ct)
        ks.append(_to_heads(xc @ w_k, num_heads).to(ct))
        vs.append(_to_heads(xc @ w_v, num_heads).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(chunk_size, stop, dtype=torch.bool).tril(start)
        s = s.masked_fill(~allowed, -math.inf)
        outs.append((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, chunk_size, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_cache_written_at_front(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.zeros((B, num_heads, N, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        c = stop - start
        xc = x[:, start:stop]
        q = _to_heads(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, :c] = _to_heads(xc @ w_k, num_heads).to(ct)
        v_cache[:, :, :c] = _to_heads(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(c, stop, dtype=torch.bool).tril(start), -math.inf)
        outs.append((torch.softmax(s, -1) @ v_cache[:, :, :stop]).transpose(1, 2)
                    .reshape(B, c, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_full_mask_sliced(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    full_mask = torch.ones(N, N, dtype=torch.bool).tril()  # built once, sliced per chunk
    k_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        q = _to_heads(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, start:stop] = _to_heads(xc @ w_k, num_heads).to(ct)
        v_cache[:, :, start:stop] = _to_heads(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~full_mask[start:stop, :stop], -math.inf)
        outs.append((torch.softmax(s, -1) @ v_cache[:, :, :stop]).transpose(1, 2)
                    .reshape(B, stop - start, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        q = _to_heads(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, start:stop] = _to_heads(xc @ w_k, num_heads).to(ct)
        v_cache[:, :, start:stop] = _to_heads(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(stop - start, stop, dtype=torch.bool).tril(start),
                          -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, stop - start, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def cp_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    dt = torch.float64
    xd = x.to(dt)
    k_parts, v_parts, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        xc = xd[:, start:stop]
        q = _to_heads(xc @ w_q.to(dt), num_heads)
        k_parts.append(_to_heads(xc @ w_k.to(dt), num_heads))
        v_parts.append(_to_heads(xc @ w_v.to(dt), num_heads))
        k, v = torch.cat(k_parts, dim=2), torch.cat(v_parts, dim=2)
        qpos = torch.arange(start, stop)[:, None]
        mask = torch.arange(stop)[None, :] <= qpos  # (C, stop)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return (torch.cat(outs, dim=1) @ w_o.to(dt)).to(x.dtype)


def cp_head_loop_einsum(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    dt = torch.float64
    K = torch.zeros((B, N, D), dtype=dt)  # cache in token-major layout
    V = torch.zeros((B, N, D), dtype=dt)
    out = torch.zeros((B, N, D), dtype=dt)
    start = 0
    while start < N:
        stop = min(N, start + chunk_size)
        xc = x[:, start:stop].to(dt)
        Qc = xc @ w_q.to(dt)
        K[:, start:stop] = xc @ w_k.to(dt)
        V[:, start:stop] = xc @ w_v.to(dt)
        future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        for h in range(num_heads):
            cols = slice(h * dh, (h + 1) * dh)
            s = torch.einsum("bid,bjd->bij", Qc[..., cols], K[:, :stop, cols]) / math.sqrt(dh)
            s = s.masked_fill(future, -math.inf)
            s = s - s.amax(-1, keepdim=True)
            e = s.exp()
            out[:, start:stop, cols] = torch.einsum("bij,bjd->bid", e / e.sum(-1, keepdim=True),
                                                    V[:, :stop, cols])
        start = stop
    return (out @ w_o.to(dt)).to(x.dtype)


E = Entry
ENTRIES = [
    E("decode_attention_intensity", "wrong", "kv_bytes_for_every_query_head",
      "counts the K/V bytes with num_heads instead of num_kv_heads, as if every query head "
      "had its own cache: the GQA sharing disappears", dai_kv_bytes_per_query_head),
    E("decode_attention_intensity", "wrong", "only_keys_read",
      "counts only the keys' bytes read from the cache and forgets the values (no factor 2 "
      "in the bytes)", dai_only_keys_read),
    E("decode_attention_intensity", "wrong", "multiply_add_as_one_flop",
      "counts one FLOP per multiply-add instead of two, so the FLOPs and the intensity are "
      "halved", dai_mac_as_one_flop),
    E("decode_attention_intensity", "wrong", "floor_division",
      "divides FLOPs by bytes with //, a floor division that returns an int and rounds "
      "intensities below 1 (or non-integer ones) down", dai_floor_division),
    E("decode_attention_intensity", "wrong", "denominator_without_parentheses",
      "writes flops / 2 * batch * kv_heads * ... without parentheses, so it divides by 2 and "
      "then multiplies by the rest of the byte count", dai_precedence),
    E("decode_attention_intensity", "wrong", "cache_read_once_for_batch",
      "counts the K/V cache read once for the whole batch, but every sequence has its own "
      "keys and values, so the bytes must scale with batch_size too",
      dai_cache_shared_by_batch),
    E("decode_attention_intensity", "right", "closed_form_2H_over_G_bytes", None,
      dai_closed_form),
    E("decode_attention_intensity", "right", "loops_and_fraction", None,
      dai_fraction_per_sequence),

    E("paged_attention", "wrong", "whole_pages_attended",
      "keeps every slot of the sequence's pages instead of cutting to the first seq_lens[b] "
      "keys, so the stale slots at the end of the last page enter the softmax",
      pa_whole_pages),
    E("paged_attention", "wrong", "floor_page_count",
      "takes seq_len // page_size pages, a floor where a ceiling belongs, so the partly "
      "filled last page (and a sequence shorter than a page entirely) is left out",
      pa_floor_pages),
    E("paged_attention", "wrong", "repeat_instead_of_repeat_interleave",
      "expands the KV heads with .repeat (g0 g1 g0 g1 ...) instead of repeat_interleave "
      "(g0 g0 g1 g1 ...), so query head h reads KV head h % G instead of h // (H // G)",
      pa_repeat_not_interleave),
    E("paged_attention", "wrong", "pages_reshaped_without_transpose",
      "reshapes the gathered (p, G, page_size, d) pages straight to (G, p * page_size, d) "
      "without moving the group axis first, mixing the KV heads and the pages",
      pa_reshape_without_transpose),
    E("paged_attention", "wrong", "softmax_over_heads",
      "takes the softmax of the (H, n) scores over dim 0, the heads, instead of over the "
      "keys", pa_softmax_over_heads),
    E("paged_attention", "wrong", "pool_indexed_without_block_table",
      "reads key t from pool page t // page_size directly, the logical page number, without "
      "looking it up in block_table[b], so it reads other (stale) pages of the pool",
      pa_pool_indexed_directly),
    E("paged_attention", "right", "per_token_gather_float64", None, pa_token_loop_f64),
    E("paged_attention", "right", "padded_gather_with_length_mask", None, pa_padded_masked),

    E("chunked_prefill", "wrong", "chunk_mask_top_left",
      "masks each chunk with tril() on its (C, stop) block, aligned top-left, instead of "
      "bottom-right (offset start), so later chunks' queries lose most of the earlier keys",
      cp_mask_top_left),
    E("chunked_prefill", "wrong", "no_cache_own_chunk_only",
      "lets each chunk attend only to its own keys and values: the cache of the earlier "
      "chunks is never used", cp_own_chunk_only),
    E("chunked_prefill", "wrong", "ragged_last_chunk_dropped",
      "loops with range(0, N - chunk_size + 1, chunk_size), so a ragged last chunk is never "
      "processed and the output has fewer than N tokens", cp_ragged_chunk_dropped),
    E("chunked_prefill", "wrong", "cache_written_at_front",
      "writes every chunk's keys and values into slots 0 .. C-1 of the cache instead of "
      "start .. stop-1, overwriting the first chunk's entries", cp_cache_written_at_front),
    E("chunked_prefill", "wrong", "full_mask_sliced_per_chunk",
      "builds the full N x N causal mask once and slices it per chunk: the output is right but "
      "an N x N tensor is built, which chunked prefill must never do", cp_full_mask_sliced),
    E("chunked_prefill", "wrong", "heads_merged_without_transpose",
      "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
      "without transposing back to (B, C, H, d_head) first", cp_merge_without_transpose),
    E("chunked_prefill", "right", "sdpa_per_chunk_with_bool_mask", None, cp_sdpa_per_chunk),
    E("chunked_prefill", "right", "token_major_cache_head_loop", None, cp_head_loop_einsum),
]
