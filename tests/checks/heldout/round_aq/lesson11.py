"""Held-out learners' answers, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ decode_attention_intensity

def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element  # the K cache
    return flops / bytes_read


def intensity_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_one_flop_per_mac(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    score_flops = batch_size * num_heads * seq_len * head_dim
    mix_flops = batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / kv_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_bytes_divided(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    elements = 2 * batch_size * num_kv_heads * seq_len * head_dim
    bytes_read = elements / bytes_per_element
    return flops / bytes_read


def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # 4 B H N d / (2 B G N d bytes): only the group size and the element size remain
    return float(Fraction(2 * num_heads, num_kv_heads * bytes_per_element))


def intensity_per_head_sum(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    flops = 0
    for _b in range(batch_size):
        for _h in range(num_heads):
            flops += 2 * seq_len * head_dim  # q . k_t for every cached t
            flops += 2 * seq_len * head_dim  # sum_t p_t v_t
    read = 0
    for _b in range(batch_size):
        for _g in range(num_kv_heads):
            read += seq_len * head_dim * bytes_per_element * 2  # K and V of this group
    return flops / read


# ============================================================================ paged_attention

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
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_slot_and_page_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
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
        K = torch.stack(ks, dim=1).to(ct)  # (G, n, d)
        V = torch.stack(vs, dim=1).to(ct)
        for h in range(H):
            g = h // (H // G)
            w = torch.softmax(K[g] @ q[b, h].to(ct) / math.sqrt(d), dim=0)
            out[b, h] = w @ V[g]
    return out.to(q.dtype)


def paged_repeat_tiles_heads(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pg = block_table[b, :(n + page_size - 1) // page_size].long()
        k = k_pages[pg].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        v = v_pages[pg].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat(heads // groups, 1, 1)  # (H, n, d)
        v = v.repeat(heads // groups, 1, 1)
        scores = torch.einsum("hd,hnd->hn", q[b].to(compute), k) / math.sqrt(d)
        result[b] = torch.einsum("hn,hnd->hd", scores.softmax(-1), v)
    return result.to(q.dtype)


def paged_scale_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    scale = 1.0 / math.sqrt(k_pages.shape[2])
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) * scale
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        n_pages = max(1, n // P)
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
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
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)  # (p, G, P, d) -> (G, p*P, d)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_token_by_token(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    per_group = heads // groups
    out = torch.zeros((batch, heads, d), dtype=torch.float64)
    for b in range(batch):
        length = int(seq_lens[b])
        for h in range(heads):
            g = h // per_group
            qv = q[b, h].double()
            logits, values = [], []
            for t in range(length):
                page = int(block_table[b, t // page_size])
                slot = t % page_size
                logits.append(torch.dot(qv, k_pages[page, g, slot].double()) / math.sqrt(d))
                values.append(v_pages[page, g, slot].double())
            if not logits:
                continue
            lg = torch.stack(logits)
            w = torch.exp(lg - lg.max())
            w = w / w.sum()
            out[b, h] = (w[:, None] * torch.stack(values)).sum(dim=0)
    return out.to(q.dtype)


def paged_vectorised_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    t = torch.arange(T)
    page_ids = block_table.long()[:, t // P]  # (B, T)
    slots = (t % P).expand(B, T)  # (B, T)
    K = k_pages[page_ids, :, slots].double()  # (B, T, G, d)
    V = v_pages[page_ids, :, slots].double()
    head_group = torch.arange(H) // (H // G)  # (H,)
    K = K[:, :, head_group]  # (B, T, H, d)
    V = V[:, :, head_group]
    scores = torch.einsum("bhd,bthd->bht", q.double(), K) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    scores = scores.masked_fill(~valid[:, None, :], -math.inf)
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(scores - top)
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    return torch.einsum("bht,bthd->bhd", p, V).to(q.dtype)


# ============================================================================ chunked_prefill

def prefill_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros((B, num_heads, N, dh), dtype=ct)
    vc = torch.zeros((B, num_heads, N, dh), dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s0:s1] = (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s0:s1] = (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(C, s1, dtype=torch.bool).tril()  # (C, s1)
        sc = sc.masked_fill(~mask, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ vc[:, :, :s1]
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    dh = dm // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        c = xc.shape[1]

        def heads(t):
            return t.reshape(b, c, num_heads, dh).transpose(1, 2).to(f)

        q, k, v = heads(xc @ w_q), heads(xc @ w_k), heads(xc @ w_v)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(c, c, dtype=torch.bool).tril(), -math.inf)
        o = torch.softmax(s, dim=-1) @ v
        pieces.append(o.transpose(1, 2).reshape(b, c, dm))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    n_chunks = max(1, N // chunk_size)
    for ci in range(n_chunks):
        start, stop = ci * chunk_size, min((ci + 1) * chunk_size, N)
        xc = x[:, start:stop]
        C = stop - start
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        K, V = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        s = q @ K.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(C, stop, dtype=torch.bool).tril(stop - C), -math.inf)
        outs.append((torch.softmax(s, -1) @ V).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty((B, num_heads, N, dh), dtype=ct)
    vc = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        C = s1 - s0
        xc = x[:, s0:s1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s0:s1] = (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s0:s1] = (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(D)
        keep = torch.ones(C, s1, dtype=torch.bool).tril(s1 - C)
        sc = sc.masked_fill(~keep, -math.inf)
        outs.append((torch.softmax(sc, dim=-1) @ vc[:, :, :s1]).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty((B, num_heads, N, dh), dtype=ct)
    vc = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        C = s1 - s0
        xc = x[:, s0:s1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s0:s1] = (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s0:s1] = (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(C, s1, dtype=torch.bool).tril(s1 - C)
        sc = sc.masked_fill(~keep, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ vc[:, :, :s1]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_softmax_wrong_axis(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty((B, num_heads, N, dh), dtype=ct)
    vc = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        C = s1 - s0
        xc = x[:, s0:s1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s0:s1] = (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s0:s1] = (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(C, s1, dtype=torch.bool).tril(s1 - C)
        sc = sc.masked_fill(~keep, -math.inf)
        p = torch.softmax(sc, dim=-2)
        outs.append((p @ vc[:, :, :s1]).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    dh = d_model // num_heads
    f32 = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    start = 0
    while start < n:
        stop = min(n, start + chunk_size)
        xc = x[:, start:stop].to(f32)
        split = lambda t: t.unflatten(-1, (num_heads, dh)).permute(0, 2, 1, 3)  # noqa: E731
        q = split(xc @ w_q.to(f32))
        keys.append(split(xc @ w_k.to(f32)))
        values.append(split(xc @ w_v.to(f32)))
        K = torch.cat(keys, dim=2)
        V = torch.cat(values, dim=2)
        rows = torch.arange(start, stop)[:, None]
        cols = torch.arange(stop)[None, :]
        ctx = F.scaled_dot_product_attention(q, K, V, attn_mask=cols <= rows)
        outs.append(ctx.permute(0, 2, 1, 3).flatten(2))
        start = stop
    merged = torch.cat(outs, dim=1)
    return (merged @ w_o.to(f32)).to(x.dtype)


def prefill_online_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    X = x.double()
    Wq, Wk, Wv, Wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    k_cache = torch.zeros((B, num_heads, 0, dh), dtype=torch.float64)
    v_cache = torch.zeros((B, num_heads, 0, dh), dtype=torch.float64)
    y = torch.zeros((B, N, D), dtype=torch.float64)
    for c0 in range(0, N, chunk_size):
        c1 = min(N, c0 + chunk_size)
        xc = X[:, c0:c1]
        q = torch.einsum("bcm,mhe->bhce", xc, Wq.view(D, num_heads, dh))
        k_new = torch.einsum("bcm,mhe->bhce", xc, Wk.view(D, num_heads, dh))
        v_new = torch.einsum("bcm,mhe->bhce", xc, Wv.view(D, num_heads, dh))
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
        s = torch.einsum("bhce,bhte->bhct", q, k_cache) / math.sqrt(dh)
        pos_q = torch.arange(c0, c1).view(-1, 1)
        pos_k = torch.arange(c1).view(1, -1)
        s = torch.where(pos_k <= pos_q, s, torch.tensor(-math.inf, dtype=torch.float64))
        p = torch.exp(s - s.amax(dim=-1, keepdim=True))
        p = p / p.sum(dim=-1, keepdim=True)
        ctx = torch.einsum("bhct,bhte->bche", p, v_cache).reshape(B, c1 - c0, D)
        y[:, c0:c1] = ctx @ Wo
    return y.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "counts_only_k_bytes",
          "divides by the bytes of the K cache alone; V is read from the cache too, so the "
          "bytes need a factor 2", intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "bytes_use_query_heads",
          "counts the cache bytes with num_heads instead of num_kv_heads, as if every query "
          "head had its own K/V, which erases GQA's saving", intensity_query_heads_in_bytes),
    Entry("decode_attention_intensity", "wrong", "one_flop_per_multiply_add",
          "counts one FLOP per multiply-add instead of two, so both products and the intensity "
          "come out half as large", intensity_one_flop_per_mac),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides with // instead of /, so a fractional intensity such as 0.5 is floored to "
          "the int 0", intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "denominator_not_parenthesised",
          "writes flops / 2 * B * G * N * d * bytes, which divides by 2 and then multiplies by "
          "the rest instead of dividing by the whole byte count", intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "divides_by_bytes_per_element",
          "divides the element count by bytes_per_element instead of multiplying, so the "
          "'bytes' are in the wrong units whenever an element is not one byte",
          intensity_bytes_divided),
    Entry("decode_attention_intensity", "right", "closed_form_fraction", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "per_head_accumulation", None,
          intensity_per_head_sum),

    Entry("paged_attention", "wrong", "whole_last_page_read",
          "reads every slot of the sequence's pages and never cuts them to seq_lens[b], so the "
          "stale slots at the end of the last page join the softmax", paged_whole_pages),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "looks key t up at page block_table[b, t % page_size], slot t // page_size: the "
          "modulo and the floor division are swapped, so it reads the wrong keys, and once "
          "t // page_size passes the page size the lookup raises IndexError", paged_slot_and_page_swapped),
    Entry("paged_attention", "wrong", "repeat_tiles_heads",
          "expands the KV heads with .repeat, which tiles them (head h reads group h % G), "
          "instead of repeat_interleave, which gives head h group h // (H // G)",
          paged_repeat_tiles_heads),
    Entry("paged_attention", "wrong", "scale_by_page_size",
          "scales the scores by 1/sqrt(k_pages.shape[2]), the page size, instead of "
          "1/sqrt(d), the head dimension", paged_scale_page_size),
    Entry("paged_attention", "wrong", "page_count_floored",
          "takes n // page_size pages (at least one) instead of ceil(n / page_size), so the "
          "partly filled last page is never read and its keys are missing",
          paged_floor_page_count),
    Entry("paged_attention", "wrong", "pages_reshaped_without_transpose",
          "reshapes the gathered pages (p, G, P, d) straight to (G, p*P, d) without moving G "
          "first, so the keys of different KV heads and pages are interleaved",
          paged_reshape_without_transpose),
    Entry("paged_attention", "right", "token_by_token_float64", None, paged_token_by_token),
    Entry("paged_attention", "right", "vectorised_gather_with_length_mask", None,
          paged_vectorised_gather),

    Entry("chunked_prefill", "wrong", "mask_aligned_top_left",
          "builds the chunk's (C, stop) mask with tril() aligned top-left, so query i of the "
          "chunk sees keys 0..i instead of keys up to start + i (bottom-right alignment)",
          prefill_top_left_mask),
    Entry("chunked_prefill", "wrong", "no_kv_cache",
          "attends each chunk only to its own keys and values and keeps no cache of the "
          "earlier chunks", prefill_no_cache),
    Entry("chunked_prefill", "wrong", "ragged_last_chunk_dropped",
          "loops over N // chunk_size chunks, so the last, shorter chunk is never processed "
          "and the output has fewer than N rows", prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges the heads with reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transposing back to (B, C, H, d_head) first", prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "softmax_over_queries",
          "normalises the scores with softmax over dim=-2 (the chunk's queries) instead of "
          "dim=-1 (the keys)", prefill_softmax_wrong_axis),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_growing_cache", None,
          prefill_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "einsum_float64_cat_cache", None, prefill_online_float64),
]
