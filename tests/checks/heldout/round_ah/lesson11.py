"""Held-out learners' answers, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ decode_attention_intensity
def intensity_multiply_adds(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    macs = batch_size * num_heads * seq_len * head_dim * 2  # scores + weighted sum
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / kv_bytes


def intensity_query_heads_in_cache(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / cache


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / k_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_counts_query_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim
    q = batch_size * num_heads * head_dim  # the new queries are read too
    return flops / ((kv + q) * bytes_per_element)


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_right_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    # 4 B H N d / (2 B G N d bytes): B, N and d cancel
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_right_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    per_query = 2 * seq_len * head_dim + 2 * seq_len * head_dim  # q.K^T and p.V
    flops = per_query * num_heads * batch_size
    per_kv_head = (seq_len * head_dim) * 2 * bytes_per_element  # K and V
    nbytes = per_kv_head * num_kv_heads * batch_size
    return float(Fraction(flops, nbytes))


# ============================================================================ paged_attention
def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, :math.ceil(n / P)].long()
        keys = k_pages[used].transpose(0, 1).reshape(G, -1, d).to(ct)
        vals = v_pages[used].transpose(0, 1).reshape(G, -1, d).to(ct)
        keys = keys.repeat_interleave(H // G, dim=0)
        vals = vals.repeat_interleave(H // G, dim=0)
        s = (keys @ q[b].to(ct).unsqueeze(-1)).squeeze(-1) / math.sqrt(d)  # (H, n_pages * P)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), vals)
    return out.to(q.dtype)


def paged_head_modulo(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros((batch, heads, d), dtype=f)
    for b in range(batch):
        L = int(seq_lens[b])
        if L == 0:
            continue
        pg = block_table[b, :(L + page - 1) // page].long()
        K = k_pages[pg].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :L].to(f)
        V = v_pages[pg].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :L].to(f)
        K = K.repeat(heads // groups, 1, 1)  # head h -> group h % G
        V = V.repeat(heads // groups, 1, 1)
        sc = torch.bmm(q[b].to(f).unsqueeze(1), K.transpose(1, 2)) / math.sqrt(d)
        res[b] = torch.bmm(torch.softmax(sc, dim=-1), V).squeeze(1)
    return res.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ids = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[ids].reshape(G, -1, d)[:, :n].to(ct)  # (p, G, P, d) -> (G, p*P, d)
        v = v_pages[ids].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_manual_softmax_raises_on_empty(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    outs = []
    for b in range(B):
        n = int(seq_lens[b])
        n_pages = -(-n // P)
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, n_pages * P, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, n_pages * P, d)[:, :n].to(ct)
        k = k.repeat_interleave(rep, 0)
        v = v.repeat_interleave(rep, 0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        m = s.max(dim=-1, keepdim=True).values
        e = torch.exp(s - m)
        w = e / e.sum(dim=-1, keepdim=True)
        outs.append(torch.einsum("hn,hnd->hd", w, v))
    return torch.stack(outs).to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
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
        scores = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_softmax_wrong_dim(q, k_pages, v_pages, block_table, seq_lens):
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
        scores = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)  # (H, 1, n)
        out[b] = (torch.softmax(scores, dim=1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_right_token_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        page_ids = block_table[b].long()[t // P]  # (n,)
        slots = t % P  # (n,)
        keys = k_pages[page_ids, :, slots].double()  # (n, G, d)
        vals = v_pages[page_ids, :, slots].double()  # (n, G, d)
        qb = q[b].double().view(G, per_group, d)  # heads g*per_group .. read group g
        s = torch.einsum("grd,ngd->grn", qb, keys) / math.sqrt(d)
        w = torch.softmax(s, dim=-1)
        out[b] = torch.einsum("grn,ngd->grd", w, vals).reshape(H, d)
    return out.to(q.dtype)


def paged_right_padded_sdpa(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    max_pages = block_table.shape[1]
    T = max_pages * P
    t = torch.arange(T)
    pages = block_table.long()[:, t // P]  # (B, T): arbitrary past each length
    slots = (t % P).expand(B, T)
    k = k_pages[pages, :, slots].float()  # (B, T, G, d)
    v = v_pages[pages, :, slots].float()
    k = k.permute(0, 2, 1, 3).repeat_interleave(H // G, dim=1)  # (B, H, T, d)
    v = v.permute(0, 2, 1, 3).repeat_interleave(H // G, dim=1)
    keep = (t[None, :] < seq_lens.long()[:, None])[:, None, None, :]  # (B, 1, 1, T)
    o = F.scaled_dot_product_attention(q.float()[:, :, None, :], k, v, attn_mask=keep)
    o = torch.where(keep.any(dim=-1, keepdim=True), o, torch.zeros_like(o))  # empty: zeros
    return o[:, :, 0].to(q.dtype)


# ============================================================================ chunked_prefill
def prefill_own_chunk_unmasked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
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
        k = torch.cat(ks, dim=2)
        v = torch.cat(vs, dim=2)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outs.append((att @ v).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(batch, num_heads, n, d_head, dtype=f)
    v_cache = torch.empty(batch, num_heads, n, d_head, dtype=f)
    pieces = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        c = stop - start
        q = (xc @ w_q).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(f)
        k_cache[:, :, start:stop] = (xc @ w_k).reshape(batch, c, num_heads, d_head).transpose(1, 2)
        v_cache[:, :, start:stop] = (xc @ w_v).reshape(batch, c, num_heads, d_head).transpose(1, 2)
        k, v = k_cache[:, :, :stop], v_cache[:, :, :stop]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        allowed = torch.ones(c, stop, dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v
        pieces.append(ctx.transpose(1, 2).reshape(batch, c, d_model))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_cache_updated_after(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, H, 0, dh, dtype=ct)
    v_cache = torch.zeros(B, H, 0, dh, dtype=ct)
    result = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        C = z - a
        q = (xc @ w_q).reshape(B, C, H, dh).transpose(1, 2).to(ct)
        k_new = (xc @ w_k).reshape(B, C, H, dh).transpose(1, 2).to(ct)
        v_new = (xc @ w_v).reshape(B, C, H, dh).transpose(1, 2).to(ct)
        L = k_cache.shape[2]
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)  # (B, H, C, L)
        mask = torch.ones(C, L, dtype=torch.bool).tril(L - C)
        s = s.masked_fill(~mask, -math.inf)
        p = torch.nan_to_num(torch.softmax(s, -1))
        result.append((p @ v_cache).transpose(1, 2).reshape(B, C, D))
        k_cache = torch.cat([k_cache, k_new], 2)
        v_cache = torch.cat([v_cache, v_new], 2)
    return torch.cat(result, 1).to(x.dtype) @ w_o


def prefill_full_mask_sliced(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    full_mask = torch.ones(N, N, dtype=torch.bool).tril()  # built once, sliced per chunk
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    chunks = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = (xc @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        kc[:, :, s0:s1] = (xc @ w_k).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        vc[:, :, s0:s1] = (xc @ w_v).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~full_mask[s0:s1, :s1], -math.inf)
        o = torch.softmax(sc, -1) @ vc[:, :, :s1]
        chunks.append(o.transpose(1, 2).flatten(2))
    return torch.cat(chunks, 1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for st in range(0, N, chunk_size):
        en = min(st + chunk_size, N)
        C = en - st
        xc = x[:, st:en]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, st:en] = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, st:en] = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :en].transpose(-2, -1) / math.sqrt(dh)
        ok = torch.ones(C, en, dtype=torch.bool).tril(en - C)
        s = s.masked_fill(~ok, -math.inf)
        ctx = torch.softmax(s, -1) @ vc[:, :, :en]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for st in range(0, N, chunk_size):
        en = min(st + chunk_size, N)
        C = en - st
        xc = x[:, st:en]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, st:en] = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, st:en] = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :en].transpose(-2, -1) / math.sqrt(D)
        ok = torch.ones(C, en, dtype=torch.bool).tril(en - C)
        s = s.masked_fill(~ok, -math.inf)
        ctx = torch.softmax(s, -1) @ vc[:, :, :en]
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_right_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xf = x.float() if x.dtype != torch.float64 else x
    wq, wk, wv, wo = (w.to(xf.dtype) for w in (w_q, w_k, w_v, w_o))
    keys, values, outs = [], [], []
    for lo in range(0, N, chunk_size):
        hi = min(lo + chunk_size, N)
        xc = xf[:, lo:hi]
        q = (xc @ wq).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        keys.append((xc @ wk).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        values.append((xc @ wv).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        k = torch.cat(keys, dim=2)
        v = torch.cat(values, dim=2)
        # query lo + i may see keys 0 .. lo + i
        allowed = torch.arange(hi)[None, :] <= torch.arange(lo, hi)[:, None]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        outs.append(o.transpose(1, 2).flatten(2))
    return (torch.cat(outs, dim=1) @ wo).to(x.dtype)


def prefill_right_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    x64 = x.double()
    Wq = w_q.double().view(D, H, dh)
    Wk = w_k.double().view(D, H, dh)
    Wv = w_v.double().view(D, H, dh)
    K = torch.zeros(B, H, N, dh, dtype=torch.float64)
    V = torch.zeros(B, H, N, dh, dtype=torch.float64)
    ctx = torch.zeros(B, N, H, dh, dtype=torch.float64)
    for c0 in range(0, N, chunk_size):
        c1 = min(N, c0 + chunk_size)
        xc = x64[:, c0:c1]
        K[:, :, c0:c1] = torch.einsum("bnm,mhd->bhnd", xc, Wk)
        V[:, :, c0:c1] = torch.einsum("bnm,mhd->bhnd", xc, Wv)
        Q = torch.einsum("bnm,mhd->bhnd", xc, Wq)
        s = torch.einsum("bhqd,bhkd->bhqk", Q, K[:, :, :c1]) / math.sqrt(dh)
        qpos = torch.arange(c0, c1).view(-1, 1)
        kpos = torch.arange(c1).view(1, -1)
        s = torch.where(kpos <= qpos, s, torch.tensor(float("-inf"), dtype=torch.float64))
        p = torch.softmax(s, dim=-1)
        ctx[:, c0:c1] = torch.einsum("bhqk,bhkd->bqhd", p, V[:, :, :c1])
    return (ctx.reshape(B, N, D) @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "multiply_adds_not_flops",
          "counts one multiply-add as one operation (2 B H N d for both products) instead of "
          "2 FLOPs, so the intensity comes out halved",
          intensity_multiply_adds),
    Entry("decode_attention_intensity", "wrong", "cache_sized_by_query_heads",
          "sizes the K/V reads with num_heads instead of num_kv_heads, as if every query head "
          "had its own cached keys and values (ignores GQA sharing)",
          intensity_query_heads_in_cache),
    Entry("decode_attention_intensity", "wrong", "only_keys_read",
          "divides by the bytes of the cached keys only and forgets the values, which are read "
          "as well: the intensity comes out doubled",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides with //, so the intensity is floored to an integer (0 instead of 0.5 for "
          "MHA in float32)",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "query_bytes_counted",
          "adds the bytes of the new queries to the bytes read; the contract divides by the "
          "bytes of K and V read from the cache only",
          intensity_counts_query_bytes),
    Entry("decode_attention_intensity", "wrong", "denominator_without_parentheses",
          "writes flops / 2 * B * G * N * d * bytes, which divides by 2 and then multiplies "
          "by the rest: the denominator needs parentheses",
          intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed_form_2H_over_G_bytes", None,
          intensity_right_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_then_float", None,
          intensity_right_fraction),

    Entry("paged_attention", "wrong", "whole_pages_attended",
          "attends to every slot of the sequence's pages without cutting at seq_lens[b], so "
          "the stale slots after the last key of a partly filled last page are read too",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "kv_head_by_modulo",
          "expands the KV heads with repeat (head h reads group h % G) instead of "
          "repeat_interleave (group h // (H // G))",
          paged_head_modulo),
    Entry("paged_attention", "wrong", "pages_reshaped_without_moving_groups",
          "reshapes the gathered (pages, G, page_size, d) straight to (G, pages * page_size, "
          "d) without transposing the group axis first, which mixes the KV heads' keys and "
          "pages",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "no_guard_for_empty_sequence",
          "runs its own softmax (max, exp, sum) on every sequence: for seq_lens[b] = 0 the max "
          "over zero keys raises instead of giving zeros",
          paged_manual_softmax_raises_on_empty),
    Entry("paged_attention", "wrong", "no_sqrt_d_scale",
          "forgets to scale the scores by 1/sqrt(d)",
          paged_no_scale),
    Entry("paged_attention", "wrong", "softmax_over_query_axis",
          "applies softmax over dim=1 of the (H, 1, n) scores, the single-query axis, so every "
          "weight becomes 1 and the output is the sum of the values",
          paged_softmax_wrong_dim),
    Entry("paged_attention", "right", "gather_each_token_float64", None,
          paged_right_token_gather),
    Entry("paged_attention", "right", "padded_batch_sdpa_mask", None, paged_right_padded_sdpa),

    Entry("chunked_prefill", "wrong", "own_chunk_not_causal",
          "applies no mask at all: the cache keeps later chunks out, but inside its own chunk "
          "a query also sees the keys of the queries after it (no causal mask within a chunk)",
          prefill_own_chunk_unmasked),
    Entry("chunked_prefill", "wrong", "chunk_mask_top_left",
          "masks a chunk with ones(C, stop).tril(), aligned top-left, so query start + i sees "
          "only keys 0..i instead of 0..start + i (the offset stop - C is missing)",
          prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "cache_appended_after_attention",
          "appends the chunk's keys and values to the cache after attending, so each chunk "
          "attends only to earlier chunks and never to itself (the first chunk sees nothing)",
          prefill_cache_updated_after),
    Entry("chunked_prefill", "wrong", "full_n_by_n_mask",
          "builds the full N x N causal mask once and slices it per chunk: correct values, "
          "but an N x N tensor is exactly what chunked prefill must never build",
          prefill_full_mask_sliced),
    Entry("chunked_prefill", "wrong", "heads_merged_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2), so tokens and heads are mixed up",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_by_d_model),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_with_mask", None,
          prefill_right_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "einsum_float64_cache", None,
          prefill_right_einsum_float64),
]
