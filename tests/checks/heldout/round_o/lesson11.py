"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry

EX_I = "decode_attention_intensity"
EX_P = "paged_attention"
EX_C = "chunked_prefill"


# ============================================================ decode_attention_intensity: wrong
def intensity_query_heads_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return score_flops / kv_bytes


def intensity_floor_div(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(flops // kv_bytes)


def intensity_new_token_extra(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    keys = seq_len + 1  # the new token attends to itself as well
    flops = 2 * batch_size * num_heads * keys * head_dim * 2
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # N, B and d cancel: (4 B H N d) / (2 B G N d bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query = 2 * seq_len * head_dim + 2 * seq_len * head_dim  # q.K^T and p.V
    flops = per_query * num_heads * batch_size
    k_bytes = v_bytes = num_kv_heads * seq_len * head_dim * bytes_per_element * batch_size
    return float(Fraction(flops, k_bytes + v_bytes))


# ============================================================ paged_attention: wrong
def _seq_kv(k_pages, v_pages, block_table, b, n):
    G, P, d = k_pages.shape[1], k_pages.shape[2], k_pages.shape[3]
    pages = block_table[b, :math.ceil(n / P)].long()
    k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n]
    v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n]
    return k, v


def paged_softmax_over_heads(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k, v = _seq_kv(k_pages, v_pages, block_table, b, n)
        k = k.repeat_interleave(H // G, dim=0).to(ct)
        v = v.repeat_interleave(H // G, dim=0).to(ct)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)  # (H, 1, n)
        out[b] = (torch.softmax(s, dim=0) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k, v = _seq_kv(k_pages, v_pages, block_table, b, n)
        k = k.repeat(rep, 1, 1).to(ct)  # (H, n, d)
        v = v.repeat(rep, 1, 1).to(ct)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_div_mod_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        page = block_table[b, t % P].long()
        slot = t // P
        k = k_pages[page, :, slot].to(ct)  # (n, G, d)
        v = v_pages[page, :, slot].to(ct)
        for h in range(H):
            g = h // rep
            s = k[:, g] @ q[b, h].to(ct) / math.sqrt(d)
            out[b, h] = torch.softmax(s, 0) @ v[:, g]
    return out.to(q.dtype)


def paged_reshape_no_transpose(q, k_pages, v_pages, block_table, seq_lens):
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
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = q[b].to(ct)[:, None] @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    res = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            res.append(torch.zeros(H, d, dtype=ct))
            continue
        k, v = _seq_kv(k_pages, v_pages, block_table, b, n)
        k = k.repeat_interleave(H // G, 0).to(ct)
        v = v.repeat_interleave(H // G, 0).to(ct)
        s = (k @ q[b].to(ct)[:, :, None]).squeeze(-1)  # (H, n)
        res.append((torch.softmax(s, -1)[:, None, :] @ v).squeeze(1))
    return torch.stack(res).to(q.dtype)


def paged_mask_le(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        pages = block_table[b].long()  # all of the row; positions past n are masked below
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = torch.einsum("hd,htd->ht", q[b].to(ct), k) / math.sqrt(d)
        t = torch.arange(s.shape[-1])
        s = s.masked_fill(~(t <= n)[None, :], -math.inf)
        out[b] = torch.einsum("ht,htd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_gather_float64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        page_of = block_table[b].long()[t // P]
        slot_of = t % P
        keys = k_pages[page_of, :, slot_of].double()  # (n, G, d)
        vals = v_pages[page_of, :, slot_of].double()
        for h in range(H):
            g = h // per_group
            logits = keys[:, g, :] @ q[b, h].double() / math.sqrt(d)
            w = torch.exp(logits - logits.max())
            out[b, h] = (w / w.sum()) @ vals[:, g, :]
    return out.to(q.dtype)


def paged_batched_mask(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    max_pages = block_table.shape[1]
    tbl = block_table.long()
    k = k_pages[tbl].double()  # (B, max_pages, G, P, d)
    v = v_pages[tbl].double()
    k = k.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    v = v.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    qg = q.double().reshape(B, G, H // G, d)  # head h -> group h // (H // G)
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    out = torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(B, H, d)
    return out.to(q.dtype)


# ============================================================ chunked_prefill: helpers
def _split_heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _bottom_right(nq, nk):
    return torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)


# ============================================================ chunked_prefill: wrong
def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size]
        q = _split_heads(xc @ w_q, num_heads).to(ct)
        ks.append(_split_heads(xc @ w_k, num_heads).to(ct))
        vs.append(_split_heads(xc @ w_v, num_heads).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        outs.append(o.transpose(1, 2).reshape(B, -1, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_append_after(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, H, 0, dh, dtype=ct)
    v_cache = torch.zeros(B, H, 0, dh, dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        C = xc.shape[1]
        q = _split_heads(xc @ w_q, H).to(ct)
        k_new = _split_heads(xc @ w_k, H).to(ct)
        v_new = _split_heads(xc @ w_v, H).to(ct)
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~_bottom_right(C, k_cache.shape[2]), -math.inf)
        ctx = torch.softmax(s, dim=-1) @ v_cache
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_drops_ragged(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    dh = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(batch, num_heads, n, dh, dtype=ct)
    v_cache = torch.empty(batch, num_heads, n, dh, dtype=ct)
    pieces = []
    for c in range(n // chunk_size):
        start, stop = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, start:stop]
        q = _split_heads(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, start:stop] = _split_heads(xc @ w_k, num_heads).to(ct)
        v_cache[:, :, start:stop] = _split_heads(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~_bottom_right(stop - start, stop), -math.inf)
        o = torch.softmax(s, -1) @ v_cache[:, :, :stop]
        pieces.append(o.transpose(1, 2).reshape(batch, stop - start, d_model))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = _split_heads(xc @ w_q, num_heads).to(ct)
        kc[:, :, a:z] = _split_heads(xc @ w_k, num_heads).to(ct)
        vc[:, :, a:z] = _split_heads(xc @ w_v, num_heads).to(ct)
        s = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~_bottom_right(z - a, z), -math.inf)
        ctx = torch.softmax(s, -1) @ vc[:, :, :z]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, z - a, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = _split_heads(xc @ w_q, num_heads).to(ct)
        kc[:, :, a:z] = _split_heads(xc @ w_k, num_heads).to(ct)
        vc[:, :, a:z] = _split_heads(xc @ w_v, num_heads).to(ct)
        s = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(D)
        s = s.masked_fill(~_bottom_right(z - a, z), -math.inf)
        ctx = torch.softmax(s, -1) @ vc[:, :, :z]
        outs.append(ctx.transpose(1, 2).reshape(B, z - a, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_full_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    full_mask = torch.ones(N, N, dtype=torch.bool).tril()  # sliced per chunk below
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = _split_heads(xc @ w_q, num_heads).to(ct)
        kc[:, :, a:z] = _split_heads(xc @ w_k, num_heads).to(ct)
        vc[:, :, a:z] = _split_heads(xc @ w_v, num_heads).to(ct)
        s = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~full_mask[a:z, :z], -math.inf)
        ctx = torch.softmax(s, -1) @ vc[:, :, :z]
        outs.append(ctx.transpose(1, 2).reshape(B, z - a, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_bottom_right(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    k_all = _split_heads(xf @ w_k.to(ct), num_heads)  # the cache, filled once
    v_all = _split_heads(xf @ w_v.to(ct), num_heads)
    ctx_chunks = []
    pos = 0
    while pos < N:
        end = min(pos + chunk_size, N)
        q = _split_heads(xf[:, pos:end] @ w_q.to(ct), num_heads)
        allowed = torch.arange(end)[None, :] <= torch.arange(pos, end)[:, None]
        o = F.scaled_dot_product_attention(q, k_all[:, :, :end], v_all[:, :, :end],
                                           attn_mask=allowed)
        ctx_chunks.append(o.transpose(1, 2).flatten(2))
        pos = end
    return (torch.cat(ctx_chunks, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    e = D // H
    x64 = x.double()
    wq = w_q.double().reshape(D, H, e)
    wk = w_k.double().reshape(D, H, e)
    wv = w_v.double().reshape(D, H, e)
    wo = w_o.double().reshape(H, e, D)
    keys = torch.zeros(B, H, N, e, dtype=torch.float64)
    vals = torch.zeros(B, H, N, e, dtype=torch.float64)
    y = torch.zeros(B, N, D, dtype=torch.float64)
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        xc = x64[:, start:stop]
        keys[:, :, start:stop] = torch.einsum("bnd,dhe->bhne", xc, wk)
        vals[:, :, start:stop] = torch.einsum("bnd,dhe->bhne", xc, wv)
        q = torch.einsum("bnd,dhe->bhne", xc, wq)
        s = torch.einsum("bhie,bhje->bhij", q, keys[:, :, :stop]) / math.sqrt(e)
        future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        s = s.masked_fill(future, -math.inf)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bhij,bhje->bhie", p, vals[:, :, :stop])
        y[:, start:stop] = torch.einsum("bhie,hed->bid", ctx, wo)  # w_o folded per head
    return y.to(x.dtype)


ENTRIES = [
    Entry(EX_I, "wrong", "bytes_per_query_head", "The bytes count num_heads K/V heads instead "
          "of num_kv_heads: it ignores that GQA query heads share one cached K/V head.",
          intensity_query_heads_bytes),
    Entry(EX_I, "wrong", "keys_only_bytes", "Only the keys are counted in the bytes read; the "
          "values are read from the cache too (factor 2 missing).", intensity_keys_only),
    Entry(EX_I, "wrong", "score_flops_only", "Only the score product q K^T is counted in the "
          "FLOPs; the weighted sum p V costs as much again.", intensity_scores_only),
    Entry(EX_I, "wrong", "floor_division", "flops // bytes is floor division: the intensity "
          "is truncated to a whole number (0.5 becomes 0.0).", intensity_floor_div),
    Entry(EX_I, "wrong", "seq_len_plus_one", "The FLOPs use seq_len + 1 keys (the new token "
          "attending to itself) while the bytes use seq_len, so the two counts disagree.",
          intensity_new_token_extra),
    Entry(EX_I, "wrong", "missing_parentheses", "Operator precedence: flops / 2 * B * G * N * "
          "d * bytes divides by 2 and then multiplies by the rest, instead of dividing by the "
          "whole byte count.", intensity_precedence),
    Entry(EX_I, "right", "closed_form_2H_over_G_bytes", None, intensity_closed_form),
    Entry(EX_I, "right", "exact_fraction", None, intensity_fraction),
    Entry(EX_P, "wrong", "softmax_over_heads", "The softmax is taken over dim 0 of the "
          "(H, 1, n) scores, across heads, instead of over the n keys.",
          paged_softmax_over_heads),
    Entry(EX_P, "wrong", "repeat_not_interleave", "K/V heads are expanded with "
          "Tensor.repeat, which tiles them (head h reads group h % G) instead of "
          "repeat_interleave (group h // (H // G)).", paged_repeat_not_interleave),
    Entry(EX_P, "wrong", "page_and_slot_swapped", "The page index and slot are swapped: it "
          "looks up block_table[b, t % page_size] at slot t // page_size instead of page "
          "t // page_size at slot t % page_size (wrong keys, or an IndexError when "
          "t % page_size runs past the table's width).", paged_div_mod_swapped),
    Entry(EX_P, "wrong", "pages_reshaped_without_transpose", "The gathered pages "
          "(p, G, page_size, d) are reshaped to (G, p*page_size, d) without moving the G axis "
          "first, so tokens of different KV heads and pages are mixed.",
          paged_reshape_no_transpose),
    Entry(EX_P, "wrong", "no_scale", "The scores q.k are not divided by sqrt(d).",
          paged_no_scale),
    Entry(EX_P, "wrong", "mask_reads_one_extra", "The length mask keeps positions t <= "
          "seq_len instead of t < seq_len: one stale key too many is read (and a length-0 "
          "sequence attends to a stale key instead of giving zeros).", paged_mask_le),
    Entry(EX_P, "right", "token_gather_float64", None, paged_token_gather_float64),
    Entry(EX_P, "right", "batched_length_mask", None, paged_batched_mask),
    Entry(EX_C, "wrong", "sdpa_is_causal_top_left", "SDPA's is_causal=True aligns the mask "
          "top-left for a (chunk, cached keys) score matrix, so later chunks see only the "
          "first keys instead of all earlier chunks and their own causal part.",
          prefill_sdpa_is_causal),
    Entry(EX_C, "wrong", "cache_appended_after_attending", "The chunk's keys and values are "
          "appended to the cache only after it attends, so a chunk never sees its own tokens "
          "(the first chunk has no key at all and gives zeros).", prefill_append_after),
    Entry(EX_C, "wrong", "ragged_chunk_dropped", "The loop runs over N // chunk_size chunks, "
          "so a shorter last chunk is never computed and the output has fewer than N rows.",
          prefill_drops_ragged),
    Entry(EX_C, "wrong", "merge_without_transpose", "The chunk's context (B, H, C, d_head) is "
          "reshaped to (B, C, d_model) without transposing heads and tokens first, mixing "
          "them.", prefill_merge_no_transpose),
    Entry(EX_C, "wrong", "scale_sqrt_d_model", "The scores are scaled by 1/sqrt(d_model) "
          "instead of 1/sqrt(d_head).", prefill_scale_d_model),
    Entry(EX_C, "wrong", "full_mask_up_front", "It builds the full N x N causal mask once "
          "and slices it per chunk: values are right, but an N x N tensor is allocated, which "
          "chunked prefill must avoid.", prefill_full_mask),
    Entry(EX_C, "right", "sdpa_explicit_mask", None, prefill_sdpa_bottom_right),
    Entry(EX_C, "right", "einsum_float64_wo_per_head", None, prefill_einsum_float64),
]
