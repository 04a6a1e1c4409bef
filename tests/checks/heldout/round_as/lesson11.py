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

def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element  # the K cache
    return flops / bytes_read


def intensity_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def intensity_one_flop_per_mac(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    score_flops = batch_size * num_heads * seq_len * head_dim
    mix_flops = batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / nbytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_new_key_counted(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    keys = seq_len + 1  # the new token also attends to itself
    flops = 2 * batch_size * num_heads * keys * head_dim * 2
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def intensity_right_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    # 4 B H N d FLOPs over 2 B G N d bytes: everything but the sharing cancels
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_right_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    macs_per_query = seq_len * head_dim  # q . k_t for every t
    macs_per_query += seq_len * head_dim  # sum_t p_t v_t
    flops = Fraction(2 * macs_per_query * num_heads * batch_size)
    kv_elems = 2 * seq_len * head_dim * num_kv_heads * batch_size
    return float(flops / (kv_elems * bytes_per_element))


# =============================================================================================
# paged_attention
# =============================================================================================

def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_tiles_kv_heads(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, :(n + P - 1) // P].long()
        ks = k_pages[used].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        vs = v_pages[used].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        ks = ks.repeat(H // G, 1, 1)
        vs = vs.repeat(H // G, 1, 1)
        sc = torch.einsum("hd,hnd->hn", q[b].to(ct), ks) / math.sqrt(d)
        res[b] = torch.einsum("hn,hnd->hd", torch.softmax(sc, dim=-1), vs)
    return res.to(q.dtype)


def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
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
        k = torch.stack(keys, dim=1).to(ct)  # (G, n, d)
        v = torch.stack(vals, dim=1).to(ct)
        for h in range(H):
            g = h // (H // G)
            w = torch.softmax(k[g] @ q[b, h].to(ct) / math.sqrt(d), dim=0)
            out[b, h] = w @ v[g]
    return out.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[idx].reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[idx].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_scale_by_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pg = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = (q[b].to(ct)[:, None] @ k.transpose(-2, -1)) / math.sqrt(k_pages.shape[-2])
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_softmax_over_query_axis(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    outs = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            outs.append(torch.zeros((H, d), dtype=ct))
            continue
        pg = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = (q[b].to(ct)[:, None] @ k.transpose(-2, -1)) / math.sqrt(d)  # (H, 1, n)
        outs.append((torch.softmax(s, dim=1) @ v)[:, 0])
    return torch.stack(outs).to(q.dtype)


def paged_right_token_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n <= 0:
            continue
        t = torch.arange(n)
        page_ids = block_table[b].long()[t // P]  # (n,)
        k = k_pages[page_ids, :, t % P].double()  # (n, G, d)
        v = v_pages[page_ids, :, t % P].double()
        for h in range(H):
            g = h // per_group
            s = (k[:, g, :] @ q[b, h].double()) / math.sqrt(d)  # (n,)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ v[:, g, :]
    return out.to(q.dtype)


def paged_right_padded_batch(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    num_pages, G, P, _ = k_pages.shape
    ct = torch.promote_types(q.dtype, torch.float32)
    T = block_table.shape[1] * P  # every slot a table row can address
    t = torch.arange(T)
    pages = block_table.long()[:, t // P]  # (B, T), arbitrary past each length
    slots = (t % P).expand(B, T)
    k = k_pages[pages, :, slots].to(ct)  # (B, T, G, d)
    v = v_pages[pages, :, slots].to(ct)
    head_group = torch.arange(H) // (H // G)  # (H,)
    k = k[:, :, head_group]  # (B, T, H, d)
    v = v[:, :, head_group]
    s = torch.einsum("bhd,bthd->bht", q.to(ct), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    return torch.einsum("bht,bthd->bhd", p, v).to(q.dtype)


# =============================================================================================
# chunked_prefill
# =============================================================================================

def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size].to(ct)
        C = xc.shape[1]
        q = (xc @ w_q.to(ct)).view(B, C, num_heads, dh).transpose(1, 2)
        ks.append((xc @ w_k.to(ct)).view(B, C, num_heads, dh).transpose(1, 2))
        vs.append((xc @ w_v.to(ct)).view(B, C, num_heads, dh).transpose(1, 2))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        outs.append(o.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    dh = dm // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    k_cache = v_cache = None
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop].to(ct)
        c = stop - start
        q = (xc @ w_q.to(ct)).reshape(b, c, num_heads, dh).transpose(1, 2)
        k_cache = (xc @ w_k.to(ct)).reshape(b, c, num_heads, dh).transpose(1, 2)
        v_cache = (xc @ w_v.to(ct)).reshape(b, c, num_heads, dh).transpose(1, 2)
        total = k_cache.shape[2]
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(c, total, dtype=torch.bool).tril(total - c)
        s = s.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(s, dim=-1) @ v_cache
        pieces.append(ctx.transpose(1, 2).reshape(b, c, dm))
    return (torch.cat(pieces, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros((B, H, N, dh), dtype=ct)
    vc = torch.zeros((B, H, N, dh), dtype=ct)
    out = []
    for start in range(0, N - chunk_size + 1, chunk_size):
        stop = start + chunk_size
        xc = x[:, start:stop].to(ct)
        q = (xc @ w_q.to(ct)).reshape(B, -1, H, dh).transpose(1, 2)
        kc[:, :, start:stop] = (xc @ w_k.to(ct)).reshape(B, -1, H, dh).transpose(1, 2)
        vc[:, :, start:stop] = (xc @ w_v.to(ct)).reshape(B, -1, H, dh).transpose(1, 2)
        s = q @ kc[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(chunk_size, stop, dtype=torch.bool).tril(stop - chunk_size)
        s = s.masked_fill(~mask, -math.inf)
        ctx = torch.softmax(s, -1) @ vc[:, :, :stop]
        out.append(ctx.transpose(1, 2).reshape(B, chunk_size, D))
    return (torch.cat(out, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty((B, num_heads, N, dh), dtype=ct)
    V = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        C = stop - start
        xc = x[:, start:stop].to(ct)
        q = (xc @ w_q.to(ct)).reshape(B, C, num_heads, dh).transpose(1, 2)
        K[:, :, start:stop] = (xc @ w_k.to(ct)).reshape(B, C, num_heads, dh).transpose(1, 2)
        V[:, :, start:stop] = (xc @ w_v.to(ct)).reshape(B, C, num_heads, dh).transpose(1, 2)
        s = q @ K[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(C, stop, dtype=torch.bool).tril(stop - C), -math.inf)
        ctx = torch.softmax(s, dim=-1) @ V[:, :, :stop]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size].to(ct)
        C = xc.shape[1]
        split = lambda t: t.reshape(B, C, num_heads, dh).transpose(1, 2)  # noqa: E731
        q = split(xc @ w_q.to(ct))
        keys.append(split(xc @ w_k.to(ct)))
        values.append(split(xc @ w_v.to(ct)))
        k, v = torch.cat(keys, 2), torch.cat(values, 2)
        T = k.shape[2]
        s = q @ k.transpose(-2, -1) / math.sqrt(D)
        s = s.masked_fill(~torch.ones(C, T, dtype=torch.bool).tril(T - C), -math.inf)
        outs.append((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, C, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_mask_multiplies_scores(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kcache = torch.empty((B, num_heads, N, dh), dtype=ct)
    vcache = torch.empty((B, num_heads, N, dh), dtype=ct)
    result = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        C = stop - start
        xc = x[:, start:stop].to(ct)
        q = (xc @ w_q.to(ct)).view(B, C, num_heads, dh).permute(0, 2, 1, 3)
        kcache[:, :, start:stop] = (xc @ w_k.to(ct)).view(B, C, num_heads, dh).permute(0, 2, 1, 3)
        vcache[:, :, start:stop] = (xc @ w_v.to(ct)).view(B, C, num_heads, dh).permute(0, 2, 1, 3)
        s = q @ kcache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(C, stop, dtype=ct).tril(stop - C)
        s = s * keep  # zero out the future
        ctx = torch.softmax(s, dim=-1) @ vcache[:, :, :stop]
        result.append(ctx.permute(0, 2, 1, 3).reshape(B, C, D))
    return (torch.cat(result, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_right_sdpa_explicit_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    k_cache = torch.zeros((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.zeros((B, num_heads, N, dh), dtype=ct)
    out = torch.zeros((B, N, D), dtype=ct)
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = xf[:, start:stop]
        heads = lambda t: t.unflatten(-1, (num_heads, dh)).transpose(1, 2)  # noqa: E731
        q = heads(xc @ w_q.to(ct))
        k_cache[:, :, start:stop] = heads(xc @ w_k.to(ct))
        v_cache[:, :, start:stop] = heads(xc @ w_v.to(ct))
        query_pos = torch.arange(start, stop)[:, None]
        key_pos = torch.arange(stop)[None, :]
        o = F.scaled_dot_product_attention(q, k_cache[:, :, :stop], v_cache[:, :, :stop],
                                           attn_mask=key_pos <= query_pos)
        out[:, start:stop] = o.transpose(1, 2).flatten(-2)
    return (out @ w_o.to(ct)).to(x.dtype)


def prefill_right_list_cache_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    x64 = x.double()
    wq, wk, wv, wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    cache_k, cache_v, ctx = [], [], []
    pos = 0
    while pos < n:
        end = min(pos + chunk_size, n)
        xc = x64[:, pos:end]
        q = torch.einsum("bcm,mhe->bhce", xc, wq.view(d_model, num_heads, d_head))
        cache_k.append(torch.einsum("bcm,mhe->bhce", xc, wk.view(d_model, num_heads, d_head)))
        cache_v.append(torch.einsum("bcm,mhe->bhce", xc, wv.view(d_model, num_heads, d_head)))
        k = torch.cat(cache_k, dim=2)
        v = torch.cat(cache_v, dim=2)
        s = torch.einsum("bhce,bhte->bhct", q, k) / math.sqrt(d_head)
        future = torch.arange(end)[None, :] > torch.arange(pos, end)[:, None]
        s = torch.where(future, torch.tensor(-math.inf, dtype=torch.float64), s)
        s = s - s.max(dim=-1, keepdim=True).values
        p = s.exp()
        p = p / p.sum(dim=-1, keepdim=True)
        ctx.append(torch.einsum("bhct,bhte->bche", p, v).reshape(b, end - pos, d_model))
        pos = end
    return (torch.cat(ctx, dim=1) @ wo).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "bytes_of_keys_only",
          "counts the bytes of the cached keys only and forgets that the values are read too: "
          "the intensity comes out twice too high",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "query_heads_in_bytes",
          "counts the bytes with num_heads instead of num_kv_heads: the cache holds one K and V "
          "per KV head, shared by H // G query heads (GQA's saving is lost)",
          intensity_query_heads_in_bytes),
    Entry("decode_attention_intensity", "wrong", "one_flop_per_multiply_add",
          "counts a multiply-add as 1 FLOP instead of 2: the FLOPs and the intensity are half "
          "of what they should be",
          intensity_one_flop_per_mac),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides with // : the intensity is floored to an integer (0.5 becomes 0)",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "division_precedence",
          "writes flops / 2 * batch * kv_heads * ... without parentheses, so it divides by 2 "
          "and then multiplies by the rest of the byte count instead of dividing by it",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "new_token_counted_as_key",
          "counts seq_len + 1 keys in the FLOPs (the new token attending to itself) but "
          "seq_len in the bytes; the contract counts seq_len cached keys for both",
          intensity_new_key_counted),
    Entry("decode_attention_intensity", "right", "closed_form", None,
          intensity_right_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_of_counts", None,
          intensity_right_fraction),

    Entry("paged_attention", "wrong", "reads_whole_last_page",
          "gathers the sequence's pages but never trims to seq_lens[b]: the unused slots of "
          "its last page (stale keys and values) are attended to",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "repeat_instead_of_repeat_interleave",
          "expands the KV heads with .repeat (tiling g0, g1, g0, g1, ...) instead of "
          "repeat_interleave, so query head h reads KV head h % G instead of h // (H // G)",
          paged_tiles_kv_heads),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "swaps the two parts of the position: page = block_table[b, t % page_size] and slot "
          "= t // page_size instead of t // page_size and t % page_size (reads the wrong keys, "
          "or indexes past the page)",
          paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "reshape_without_transpose",
          "reshapes the gathered pages (p, G, page_size, d) straight to (G, -1, d) without "
          "moving the KV-head axis first, so the keys of different KV heads are mixed",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "scale_by_page_size",
          "scales the scores by 1/sqrt(k_pages.shape[-2]), the page size, instead of "
          "1/sqrt(d)",
          paged_scale_by_page_size),
    Entry("paged_attention", "wrong", "softmax_over_query_axis",
          "takes the softmax of the (H, 1, n) scores over dim=1, the single-query axis, "
          "instead of over the keys (dim=-1): every weight is 1 and the output is the plain "
          "sum of the values",
          paged_softmax_over_query_axis),
    Entry("paged_attention", "right", "gather_token_by_token_float64", None,
          paged_right_token_gather),
    Entry("paged_attention", "right", "padded_batch_with_length_mask", None,
          paged_right_padded_batch),

    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "calls F.scaled_dot_product_attention(..., is_causal=True) with the chunk's queries "
          "against all cached keys: is_causal aligns the mask top-left, so a later chunk only "
          "sees the first keys of the sequence instead of every key up to its own position",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "cache_overwritten",
          "assigns each chunk's keys and values to the cache instead of appending them, so "
          "every chunk attends only to itself and never to the earlier chunks",
          prefill_cache_overwritten),
    Entry("chunked_prefill", "wrong", "drops_ragged_last_chunk",
          "loops with range(0, N - chunk_size + 1, chunk_size), which skips the last, shorter "
          "chunk when chunk_size does not divide N (and every chunk when chunk_size > N)",
          prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges the heads of (B, H, C, d_head) with reshape(B, C, d_model) without "
          "transposing back to (B, C, H, d_head), which mixes queries and heads",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_by_d_model),
    Entry("chunked_prefill", "wrong", "mask_multiplies_scores",
          "masks by multiplying the scores with the 0/1 mask: a future key gets score 0, "
          "which still has weight exp(0) after the softmax, instead of -inf",
          prefill_mask_multiplies_scores),
    Entry("chunked_prefill", "right", "sdpa_with_explicit_mask", None,
          prefill_right_sdpa_explicit_mask),
    Entry("chunked_prefill", "right", "list_cache_einsum_float64", None,
          prefill_right_list_cache_float64),
]
