"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / k_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_elements_not_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_read = 2 * batch_size * num_kv_heads * seq_len * head_dim
    return float(flops / kv_read)


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: 4 B H N d / (2 B G N d bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query = {"scores": 2 * seq_len * head_dim, "weighted_sum": 2 * seq_len * head_dim}
    flops = batch_size * num_heads * sum(per_query.values())
    cache = {"k": seq_len * head_dim, "v": seq_len * head_dim}
    nbytes = batch_size * num_kv_heads * sum(cache.values()) * bytes_per_element
    return float(Fraction(flops, nbytes))


# ============================================================ paged_attention: wrong
def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    f = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros((batch, heads, d), dtype=f)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :(n + page - 1) // page].long()
        k = k_pages[idx].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(f)
        v = v_pages[idx].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(f)
        k, v = k.repeat(rep, 1, 1), v.repeat(rep, 1, 1)
        w = torch.softmax(torch.einsum("hd,hnd->hn", q[b].to(f), k) / math.sqrt(d), dim=-1)
        res[b] = torch.einsum("hn,hnd->hd", w, v)
    return res.to(q.dtype)


def paged_div_mod_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        keys, vals = [], []
        for t in range(n):
            page = int(block_table[b, t % P])
            slot = t // P
            keys.append(k_pages[page, :, slot])
            vals.append(v_pages[page, :, slot])
        if not keys:
            continue
        K = torch.stack(keys, dim=1).to(ct)  # (G, n, d)
        V = torch.stack(vals, dim=1).to(ct)
        for h in range(H):
            g = h // (H // G)
            w = torch.softmax(K[g] @ q[b, h].to(ct) / math.sqrt(d), dim=0)
            out[b, h] = w @ V[g]
    return out.to(q.dtype)


def paged_mask_nan_for_empty(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    tbl = block_table.long()
    k = k_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    k = k.repeat_interleave(H // G, dim=1)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), k) / math.sqrt(d)
    pos = torch.arange(max_pages * P)
    s = s.masked_fill(pos[None, None, :] >= seq_lens.long()[:, None, None], float("-inf"))
    return torch.einsum("bht,bhtd->bhd", torch.softmax(s, -1), v).to(q.dtype)


def paged_batch_max_length(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    n_max = int(seq_lens.max())
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        if int(seq_lens[b]) == 0:
            continue
        pages = block_table[b, :math.ceil(n_max / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n_max].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n_max].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        p = torch.softmax((k @ q[b].to(ct)[:, :, None]).squeeze(-1) / math.sqrt(d), dim=-1)
        out[b] = (p[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def paged_flatten_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
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
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        s = q[b].to(ct)[:, None] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_loop_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(H):
            g = h // rep
            qv = q[b, h].double()
            scores, values = [], []
            for t in range(n):
                page, slot = int(block_table[b, t // P]), t % P
                scores.append(torch.dot(qv, k_pages[page, g, slot].double()) / math.sqrt(d))
                values.append(v_pages[page, g, slot].double())
            if n:
                w = torch.softmax(torch.stack(scores), dim=0)
                out[b, h] = (w[:, None] * torch.stack(values)).sum(0)
    return out.to(q.dtype)


def paged_vectorised_masked(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    tbl = block_table.long()
    t = torch.arange(T)
    page_of = tbl.gather(1, (t // P).expand(B, T))  # (B, T)
    slot_of = (t % P).expand(B, T)
    k = k_pages[page_of, :, slot_of].double()  # (B, T, G, d)
    v = v_pages[page_of, :, slot_of].double()
    group = torch.arange(H) // (H // G)
    k = k[:, :, group]  # (B, T, H, d)
    v = v[:, :, group]
    s = torch.einsum("bhd,bthd->bht", q.double(), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = torch.where(valid[:, None, :], s, torch.tensor(-math.inf, dtype=torch.float64))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return torch.einsum("bht,bthd->bhd", w, v).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v = (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), -math.inf)
        ctx = torch.softmax(sc, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    hd = dm // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for lo in range(0, n, chunk_size):
        hi = min(lo + chunk_size, n)
        xc = x[:, lo:hi]
        sp = lambda t: t.reshape(b, hi - lo, num_heads, hd).transpose(1, 2).to(f)  # noqa: E731
        q = sp(xc @ w_q)
        ks.append(sp(xc @ w_k))
        vs.append(sp(xc @ w_v))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dm)
        ok = torch.arange(hi)[None, :] <= torch.arange(lo, hi)[:, None]
        s = s.masked_fill(~ok, -math.inf)
        outs.append((s.softmax(-1) @ v).transpose(1, 2).reshape(b, hi - lo, dm))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.zeros((B, num_heads, N, dh), dtype=ct)
    outs = []
    for c in range(N // chunk_size):
        start, stop = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(B, chunk_size, num_heads, dh).transpose(1, 2).to(ct)
        k_cache[:, :, start:stop] = (xc @ w_k).reshape(B, chunk_size, num_heads, dh).transpose(
            1, 2).to(ct)
        v_cache[:, :, start:stop] = (xc @ w_v).reshape(B, chunk_size, num_heads, dh).transpose(
            1, 2).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(chunk_size, stop, dtype=torch.bool).tril(start),
                          -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(B, chunk_size, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    keys, values, pieces = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        C = stop - start
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(B, C, H, dh).transpose(1, 2).to(ct)
        keys.append((xc @ w_k).reshape(B, C, H, dh).transpose(1, 2).to(ct))
        values.append((xc @ w_v).reshape(B, C, H, dh).transpose(1, 2).to(ct))
        K, V = torch.cat(keys, dim=2), torch.cat(values, dim=2)
        s = torch.matmul(q, K.transpose(-2, -1)) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(C, stop, dtype=torch.bool).tril(stop - C), -math.inf)
        ctx = torch.matmul(torch.softmax(s, dim=-1), V)  # (B, H, C, dh)
        pieces.append(ctx.reshape(B, C, D))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_full_mask_sliced(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    full = torch.ones(N, N, dtype=torch.bool).tril()  # built once, sliced per chunk
    k_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        C = stop - start
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k_cache[:, :, start:stop] = (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v_cache[:, :, start:stop] = (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~full[start:stop, :stop], -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc, vc, outs = [], [], []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        kc.append((xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vc.append((xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        ctx = F.scaled_dot_product_attention(q, torch.cat(kc, 2), torch.cat(vc, 2),
                                             is_causal=True)
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_bottom_right_f64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    x64 = x.double()
    wq, wk, wv = w_q.double(), w_k.double(), w_v.double()
    kc, vc, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x64[:, start:stop]
        heads = lambda t: t.unflatten(-1, (num_heads, dh)).transpose(1, 2)  # noqa: E731
        q = heads(xc @ wq)
        kc.append(heads(xc @ wk))
        vc.append(heads(xc @ wv))
        keys = torch.arange(stop)[None, :]
        queries = torch.arange(start, stop)[:, None]
        ctx = F.scaled_dot_product_attention(q, torch.cat(kc, 2), torch.cat(vc, 2),
                                             attn_mask=keys <= queries)
        outs.append(ctx.transpose(1, 2).flatten(2))
    return (torch.cat(outs, 1) @ w_o.double()).to(x.dtype)


def prefill_einsum_additive_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    q_all = (x.double() @ w_q.double()).view(B, N, H, dh)  # projections of one token each
    k_all = (x.double() @ w_k.double()).view(B, N, H, dh)
    v_all = (x.double() @ w_v.double()).view(B, N, H, dh)
    result = torch.empty((B, N, H, dh), dtype=torch.float64)
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        s = torch.einsum("bqhd,bkhd->bhqk", q_all[:, start:stop], k_all[:, :stop])
        s = s / math.sqrt(dh)
        rel = torch.arange(stop)[None, :] - torch.arange(start, stop)[:, None]
        bias = torch.zeros(rel.shape, dtype=torch.float64).masked_fill(rel > 0, -math.inf)
        p = torch.softmax(s + bias, dim=-1)
        result[:, start:stop] = torch.einsum("bhqk,bkhd->bqhd", p, v_all[:, :stop])
    return (result.reshape(B, N, D) @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "scores-only",
          "counts only the score products q . k (2 B H N d) and forgets the weighted sum of "
          "the values, halving the FLOPs",
          intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "bytes-per-query-head",
          "counts the K/V bytes for every query head (num_heads) instead of every K/V head "
          "(num_kv_heads), so GQA's sharing of the cache never shows",
          intensity_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "keys-only-bytes",
          "counts the bytes of the cached keys only and forgets that the values are read "
          "too (factor 2)",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "floor-division",
          "divides with // so the intensity is truncated to an int (0 where it is 0.5) "
          "instead of a float",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "elements-not-bytes",
          "divides by the number of K/V elements read and forgets bytes_per_element, so it "
          "is FLOPs per element, not per byte",
          intensity_elements_not_bytes),
    Entry("decode_attention_intensity", "wrong", "precedence",
          "writes flops / 2 * B * G * N * d * bytes without parentheses, so Python divides by "
          "2 and then multiplies by the rest of the byte count",
          intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed-form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction-dicts", None, intensity_fraction),
    Entry("paged_attention", "wrong", "whole-pages",
          "attends to every slot of the sequence's pages instead of trimming to the first "
          "seq_lens[b] keys, so the stale tail of the last page leaks in",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "repeat-not-interleave",
          "expands the K/V heads with .repeat (head h reads group h % G) instead of "
          "repeat_interleave (group h // (H // G))",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "div-mod-swapped",
          "looks key t up in page block_table[b, t % page_size] at slot t // page_size, "
          "division and remainder swapped (wrong keys, or an index error)",
          paged_div_mod_swapped),
    Entry("paged_attention", "wrong", "masked-softmax-nan-for-empty",
          "masks keys past seq_len with -inf over all the table's pages but never guards a "
          "sequence of length 0, whose fully masked row softmaxes to NaN instead of zeros",
          paged_mask_nan_for_empty),
    Entry("paged_attention", "wrong", "batch-max-length",
          "reads seq_lens.max() keys for every sequence instead of its own seq_lens[b], so "
          "shorter sequences attend to stale slots",
          paged_batch_max_length),
    Entry("paged_attention", "wrong", "flatten-without-transpose",
          "reshapes the gathered (pages, G, page_size, d) block straight to (G, -1, d) "
          "without moving the group axis first, interleaving heads and pages",
          paged_flatten_without_transpose),
    Entry("paged_attention", "right", "token-loop-float64", None, paged_token_loop_f64),
    Entry("paged_attention", "right", "vectorised-gather-mask", None, paged_vectorised_masked),
    Entry("chunked_prefill", "wrong", "no-earlier-chunks",
          "each chunk attends only to its own keys and values: the cache of earlier chunks "
          "is never kept, so every chunk restarts the context",
          prefill_no_cache),
    Entry("chunked_prefill", "wrong", "scale-by-d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_dmodel),
    Entry("chunked_prefill", "wrong", "drops-ragged-chunk",
          "loops over N // chunk_size chunks, so a last partial chunk is never computed and "
          "the output is short",
          prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "merge-without-transpose",
          "merges the heads of each chunk with ctx.reshape(B, C, d_model) straight from "
          "(B, H, C, d_head), without transpose(1, 2), mixing heads and tokens",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "full-mask-sliced",
          "builds the whole N x N causal mask once and slices it per chunk: the values are "
          "right but it allocates the N x N tensor that chunking must avoid",
          prefill_full_mask_sliced),
    Entry("chunked_prefill", "wrong", "sdpa-is-causal-top-left",
          "passes is_causal=True to scaled_dot_product_attention for a (C, stop) chunk, but "
          "PyTorch aligns that mask top-left, so later chunks see only the first keys",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "right", "sdpa-explicit-mask-float64", None,
          prefill_sdpa_bottom_right_f64),
    Entry("chunked_prefill", "right", "einsum-additive-mask", None,
          prefill_einsum_additive_mask),
]
