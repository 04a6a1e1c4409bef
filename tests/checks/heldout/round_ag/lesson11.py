"""Held-out learners' answers, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity — wrong
def dai_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element  # the cache
    return (score_flops + mix_flops) / read


def dai_mac_is_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    macs = batch_size * num_heads * (seq_len * head_dim + seq_len * head_dim)
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(macs) / nbytes


def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def dai_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def dai_counts_query_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q = batch_size * num_heads * head_dim * bytes_per_element  # the new query is read too
    return flops / (kv + q)


# ============================================================ decode_attention_intensity — right
def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    # 4 B H N d / (2 B G N d bytes): only the sharing ratio and the element size remain
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def dai_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_query_flops = Fraction(2 * seq_len * head_dim) * 2
    total_flops = per_query_flops * batch_size * num_heads
    k_bytes = Fraction(seq_len * head_dim * bytes_per_element) * batch_size * num_kv_heads
    return float(total_flops / (k_bytes * 2))


# ============================================================ paged_attention — wrong
def pa_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (k @ q[b].to(ct).unsqueeze(-1)).squeeze(-1) / math.sqrt(d)  # (H, pages*P)
        out[b] = torch.einsum("ht,htd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def pa_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ids = block_table[b, : -(-n // page)].long()
        keys = k_pages[ids].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        vals = v_pages[ids].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        keys = keys.repeat(heads // groups, 1, 1)  # (H, n, d)
        vals = vals.repeat(heads // groups, 1, 1)
        sc = (q[b].to(compute)[:, None, :] @ keys.transpose(1, 2)) / math.sqrt(d)
        result[b] = (torch.softmax(sc, dim=-1) @ vals)[:, 0]
    return result.to(q.dtype)


def pa_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
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
        K = torch.stack(ks, dim=1).to(ct).repeat_interleave(rep, 0)  # (H, n, d)
        V = torch.stack(vs, dim=1).to(ct).repeat_interleave(rep, 0)
        w = torch.softmax(torch.einsum("hd,hnd->hn", q[b].to(ct), K) / math.sqrt(d), dim=-1)
        out[b] = torch.einsum("hn,hnd->hd", w, V)
    return out.to(q.dtype)


def pa_empty_sequence_nan(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    K = k_pages[table].transpose(1, 2).reshape(B, G, -1, d).to(ct)  # (B, G, max_pages*P, d)
    V = v_pages[table].transpose(1, 2).reshape(B, G, -1, d).to(ct)
    K = K.repeat_interleave(H // G, dim=1)
    V = V.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), K) / math.sqrt(d)
    t = torch.arange(K.shape[2])
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.einsum("bht,bhtd->bhd", w, V).to(q.dtype)


def pa_contiguous_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        first = int(block_table[b, 0])
        pages = torch.arange(first, first + math.ceil(n / P))  # the sequence's pages
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        w = torch.softmax((q[b].to(ct)[:, None] @ k.transpose(1, 2)) / math.sqrt(d), -1)
        out[b] = (w @ v)[:, 0]
    return out.to(q.dtype)


def pa_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    n_b, n_h, dim = q.shape
    n_g, psize = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(n_b, n_h, dim, dtype=ct)
    for b in range(n_b):
        length = int(seq_lens[b])
        if length == 0:
            continue
        used = block_table[b, : (length + psize - 1) // psize].long()
        k = k_pages[used].reshape(n_g, -1, dim)[:, :length].to(ct)  # (G, n, d)
        v = v_pages[used].reshape(n_g, -1, dim)[:, :length].to(ct)
        k = k.repeat_interleave(n_h // n_g, dim=0)
        v = v.repeat_interleave(n_h // n_g, dim=0)
        att = torch.softmax((q[b].to(ct)[:, None, :] @ k.transpose(-1, -2)) / math.sqrt(dim), -1)
        out[b] = (att @ v).squeeze(1)
    return out.to(q.dtype)


# ============================================================ paged_attention — right
def pa_token_by_token_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    group_size = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)])
        vals = torch.stack([v_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)])
        keys, vals = keys.double(), vals.double()  # (n, G, d)
        for h in range(H):
            g = h // group_size
            s = keys[:, g, :] @ q[b, h].double() / math.sqrt(d)  # (n,)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ vals[:, g, :]
    return out.to(q.dtype)


def pa_vectorised_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    cap = block_table.shape[1] * P
    t = torch.arange(cap)
    page_of = block_table.long()[:, t // P]  # (B, cap)
    K = k_pages[page_of, :, t % P].double()  # (B, cap, G, d)
    V = v_pages[page_of, :, t % P].double()
    qg = q.double().reshape(B, G, H // G, d)
    s = torch.einsum("bgrd,btgd->bgrt", qg, K) / math.sqrt(d)
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, None, :]
    s = s.masked_fill(~valid, -math.inf)
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(dim=-1, keepdim=True)
    w = e / torch.where(z == 0, torch.ones_like(z), z)
    o = torch.einsum("bgrt,btgd->bgrd", w, V)
    return o.reshape(B, H, d).to(q.dtype)


# ============================================================ chunked_prefill — wrong
def cp_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
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
        k = torch.cat(ks, dim=2)
        v = torch.cat(vs, dim=2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        outs.append(o.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def cp_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        C = stop - start
        q = (xc @ w_q.to(ct)).reshape(B, C, H, dh).transpose(1, 2)
        k = (xc @ w_k.to(ct)).reshape(B, C, H, dh).transpose(1, 2)
        v = (xc @ w_v.to(ct)).reshape(B, C, H, dh).transpose(1, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), -math.inf)
        ctx = torch.softmax(s, dim=-1) @ v
        pieces.append(ctx.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(pieces, dim=1) @ w_o.to(ct)).to(x.dtype)


def cp_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    outs = []
    for c in range(N // chunk_size):
        a, z = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, a:z].to(ct)
        q = (xc @ w_q.to(ct)).reshape(B, -1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, a:z] = (xc @ w_k.to(ct)).reshape(B, -1, num_heads, dh).transpose(1, 2)
        v_cache[:, :, a:z] = (xc @ w_v.to(ct)).reshape(B, -1, num_heads, dh).transpose(1, 2)
        s = q @ k_cache[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(z - a, z, dtype=torch.bool).tril(a)
        s = s.masked_fill(~allowed, -math.inf)
        outs.append((torch.softmax(s, -1) @ v_cache[:, :, :z]).transpose(1, 2).reshape(B, -1, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def cp_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(batch, num_heads, n, d_head, dtype=ct)
    vc = torch.empty(batch, num_heads, n, d_head, dtype=ct)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop].to(ct)
        C = stop - start
        q = (xc @ w_q.to(ct)).reshape(batch, C, num_heads, d_head).transpose(1, 2)
        kc[:, :, start:stop] = (xc @ w_k.to(ct)).reshape(batch, C, num_heads, d_head).transpose(1, 2)
        vc[:, :, start:stop] = (xc @ w_v.to(ct)).reshape(batch, C, num_heads, d_head).transpose(1, 2)
        scores = q @ kc[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        key_pos = torch.arange(stop)[None, :]
        query_pos = torch.arange(start, stop)[:, None]
        scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ vc[:, :, :stop]
        outputs.append(ctx.reshape(batch, C, d_model))
    return (torch.cat(outputs, dim=1) @ w_o.to(ct)).to(x.dtype)


def cp_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    Q = (x.to(ct) @ w_q.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    K = (x.to(ct) @ w_k.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    V = (x.to(ct) @ w_v.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        s = Q[:, :, start:stop] @ K[:, :, :stop].transpose(-2, -1) / math.sqrt(D)
        mask = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]
        s = s.masked_fill(~mask, -math.inf)
        outs.append(torch.softmax(s, -1) @ V[:, :, :stop])
    ctx = torch.cat(outs, dim=2).transpose(1, 2).reshape(B, N, D)
    return (ctx @ w_o.to(ct)).to(x.dtype)


def cp_strict_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    res = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        q = (xc @ w_q.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        k_cache[:, :, start:stop] = (xc @ w_k.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        v_cache[:, :, start:stop] = (xc @ w_v.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        future = torch.arange(stop)[None, :] >= torch.arange(start, stop)[:, None]
        s = s.masked_fill(future, -math.inf)
        ctx = torch.softmax(s, dim=-1) @ v_cache[:, :, :stop]
        res.append(ctx.transpose(1, 2).flatten(-2))
    return (torch.cat(res, dim=1) @ w_o.to(ct)).to(x.dtype)


# ============================================================ chunked_prefill — right
def cp_sdpa_explicit_mask_f64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    X = x.double()
    Wq, Wk, Wv, Wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    k_list, v_list, outs = [], [], []
    start = 0
    while start < N:
        stop = min(start + chunk_size, N)
        xc = X[:, start:stop]
        C = stop - start
        q = (xc @ Wq).view(B, C, num_heads, dh).permute(0, 2, 1, 3)
        k_list.append((xc @ Wk).view(B, C, num_heads, dh).permute(0, 2, 1, 3))
        v_list.append((xc @ Wv).view(B, C, num_heads, dh).permute(0, 2, 1, 3))
        k = torch.cat(k_list, dim=2)
        v = torch.cat(v_list, dim=2)
        mask = torch.arange(stop).view(1, stop) <= torch.arange(start, stop).view(C, 1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outs.append(o.permute(0, 2, 1, 3).reshape(B, C, D))
        start = stop
    return (torch.cat(outs, dim=1) @ Wo).to(x.dtype)


def cp_per_head_logsumexp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    f = torch.float64
    out = torch.zeros(B, N, D, dtype=f)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq, wk, wv = w_q[:, cols].to(f), w_k[:, cols].to(f), w_v[:, cols].to(f)
        cache_k = torch.zeros(B, 0, dh, dtype=f)
        cache_v = torch.zeros(B, 0, dh, dtype=f)
        head_out = []
        for start in range(0, N, chunk_size):
            xc = x[:, start:start + chunk_size].to(f)
            C = xc.shape[1]
            cache_k = torch.cat([cache_k, xc @ wk], dim=1)
            cache_v = torch.cat([cache_v, xc @ wv], dim=1)
            total = cache_k.shape[1]
            s = torch.einsum("bqe,bke->bqk", xc @ wq, cache_k) * dh ** -0.5
            qpos = torch.arange(start, start + C).unsqueeze(-1)
            s = torch.where(torch.arange(total).unsqueeze(0) > qpos, -math.inf, s)
            p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
            head_out.append(torch.einsum("bqk,bke->bqe", p, cache_v))
        out = out + torch.cat(head_out, dim=1) @ w_o[cols, :].to(f)
    return out.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "kv_bytes_per_query_head",
          "counts the K/V bytes with num_heads instead of num_kv_heads, as if every query head "
          "had its own cache: GQA's sharing disappears from the intensity",
          dai_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "reads_keys_only",
          "counts only the keys' bytes read from the cache and forgets the values (no factor 2 "
          "in the bytes)",
          dai_keys_only),
    Entry("decode_attention_intensity", "wrong", "multiply_add_one_flop",
          "counts one multiply-add as one FLOP instead of two, halving the FLOPs",
          dai_mac_is_one_flop),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, which floors the ratio to an int (0 instead of 0.5 for "
          "MHA in 4-byte elements) instead of a true division giving a float",
          dai_floor_division),
    Entry("decode_attention_intensity", "wrong", "denominator_precedence",
          "writes flops / 2 * batch * kv_heads * ... without parentheses: the byte count "
          "multiplies the result instead of dividing it",
          dai_precedence),
    Entry("decode_attention_intensity", "wrong", "counts_query_bytes",
          "adds the bytes of the new queries to the denominator; the contract divides by the "
          "bytes of K and V read from the cache only",
          dai_counts_query_bytes),
    Entry("decode_attention_intensity", "right", "closed_form_ratio", None, dai_closed_form),
    Entry("decode_attention_intensity", "right", "exact_fractions", None, dai_fraction),

    Entry("paged_attention", "wrong", "whole_last_page",
          "keeps every slot of the sequence's pages instead of trimming to the first seq_lens[b] "
          "keys, so the stale rest of a partly filled last page is attended to",
          pa_whole_pages),
    Entry("paged_attention", "wrong", "repeat_not_repeat_interleave",
          "expands the KV heads with .repeat instead of .repeat_interleave, so query head h reads "
          "KV head h % G instead of h // (H // G)",
          pa_repeat_not_interleave),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "looks key t up in page block_table[b, t % page_size] at slot t // page_size: the "
          "page index and the slot are swapped (an index past the table row or the page raises "
          "IndexError)",
          pa_page_slot_swapped),
    Entry("paged_attention", "wrong", "empty_sequence_nan",
          "masks keys t >= seq_lens[b] with -inf and softmaxes without a guard, so a sequence of "
          "length 0 (all keys masked) gives NaN instead of zeros",
          pa_empty_sequence_nan),
    Entry("paged_attention", "wrong", "assumes_contiguous_pages",
          "takes only block_table[b, 0] and assumes the following pages are consecutive in the "
          "pool, instead of reading each page number from the block table (it reads the wrong pages, "
          "or runs past the end of the pool: IndexError)",
          pa_contiguous_pages),
    Entry("paged_attention", "wrong", "reshape_without_transpose",
          "reshapes the gathered (pages, G, page_size, d) straight to (G, -1, d) without moving "
          "the group axis first, so tokens of different KV heads and pages get mixed",
          pa_reshape_without_transpose),
    Entry("paged_attention", "right", "token_by_token_float64", None, pa_token_by_token_f64),
    Entry("paged_attention", "right", "vectorised_gather_mask", None, pa_vectorised_gather),

    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "calls scaled_dot_product_attention(..., is_causal=True) on a (C, stop) chunk: SDPA's "
          "is_causal is aligned top-left, so later chunks see only the first keys of the cache "
          "instead of all earlier chunks",
          cp_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "own_chunk_only",
          "each chunk attends only to its own keys and values (no cache of the earlier chunks)",
          cp_own_chunk_only),
    Entry("chunked_prefill", "wrong", "ragged_chunk_dropped",
          "loops over N // chunk_size chunks, so when chunk_size does not divide N the last "
          "tokens are never processed and the output is too short",
          cp_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), without "
          "transpose(1, 2), mixing tokens and heads",
          cp_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          cp_scale_by_d_model),
    Entry("chunked_prefill", "wrong", "mask_excludes_diagonal",
          "masks keys with key_pos >= query_pos (>= where > belongs), so a token cannot attend to "
          "itself and the first query has no key at all (NaN)",
          cp_strict_mask),
    Entry("chunked_prefill", "right", "sdpa_explicit_mask_float64", None,
          cp_sdpa_explicit_mask_f64),
    Entry("chunked_prefill", "right", "per_head_logsumexp", None, cp_per_head_logsumexp),
]
