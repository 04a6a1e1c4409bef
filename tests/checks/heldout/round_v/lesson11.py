"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================== decode_attention_intensity
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


def intensity_macs_not_flops(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    score_macs = batch_size * num_heads * seq_len * head_dim
    mix_macs = batch_size * num_heads * seq_len * head_dim
    flops = score_macs + mix_macs
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_counts_query_and_output(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                      bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q_and_out = 2 * batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + q_and_out)


def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: each K/V element read is used by H/G query heads, 2 FLOPs each
    return float(2 * num_heads) / float(num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query = Fraction(2 * seq_len * head_dim) + Fraction(2 * seq_len * head_dim)
    flops = per_query * batch_size * num_heads
    per_kv_head = Fraction(seq_len * head_dim * bytes_per_element) * 2
    return float(flops / (per_kv_head * batch_size * num_kv_heads))


# ============================================================== paged_attention
def paged_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
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
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
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
        k = k.repeat(H // G, 1, 1)
        v = v.repeat(H // G, 1, 1)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_page_and_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    result = torch.zeros(batch, heads, d, dtype=torch.float64)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys, vals = [], []
        for t in range(n):
            page = int(block_table[b, t % page_size])
            slot = t // page_size
            keys.append(k_pages[page, :, slot])
            vals.append(v_pages[page, :, slot])
        K = torch.stack(keys, dim=1).double()  # (G, n, d)
        V = torch.stack(vals, dim=1).double()
        for h in range(heads):
            s = K[h // rep] @ q[b, h].double() / math.sqrt(d)
            result[b, h] = torch.softmax(s, dim=0) @ V[h // rep]
    return result.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : n // P].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_softmax_wrong_axis(q, k_pages, v_pages, block_table, seq_lens):
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
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)  # (H, 1, n)
        out[b] = (torch.softmax(s, dim=-2) @ v)[:, 0]
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
        pages = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_token_gather_float64(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    kv_heads, page_size = k_pages.shape[1], k_pages.shape[2]
    group_of = torch.arange(heads) // (heads // kv_heads)  # (H,)
    rows = []
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            rows.append(torch.zeros(heads, d, dtype=torch.float64))
            continue
        t = torch.arange(n)
        page_ids = block_table[b].long()[t // page_size]
        slots = t % page_size
        keys = k_pages[page_ids, :, slots].double()  # (n, G, d)
        vals = v_pages[page_ids, :, slots].double()
        keys_h = keys[:, group_of]  # (n, H, d)
        vals_h = vals[:, group_of]
        s = torch.einsum("hd,nhd->hn", q[b].double(), keys_h) / math.sqrt(d)
        w = torch.softmax(s, dim=-1)
        rows.append(torch.einsum("hn,nhd->hd", w, vals_h))
    return torch.stack(rows).to(q.dtype)


def paged_padded_masked(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    tbl = block_table.long()
    kk = k_pages.double()[tbl]  # (B, max_pages, G, P, d)
    vv = v_pages.double()[tbl]
    kk = kk.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    vv = vv.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    qq = q.double().reshape(B, G, H // G, d)
    s = torch.einsum("bgrd,bgtd->bgrt", qq, kk) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    o = torch.einsum("bgrt,bgtd->bgrd", w, vv)
    return o.reshape(B, H, d).to(q.dtype)


# ============================================================== chunked_prefill
def prefill_mask_not_offset(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = (xc @ w_q).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(s1 - s0, s1, dtype=torch.bool).tril()
        sc = sc.masked_fill(~allowed, float("-inf"))
        outs.append((torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(B, s1 - s0, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        c = s1 - s0
        q = (xc @ w_q).reshape(B, c, num_heads, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).reshape(B, c, num_heads, dh).transpose(1, 2).to(ct)
        v = (xc @ w_v).reshape(B, c, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(c, c, dtype=torch.bool).tril(), float("-inf"))
        outs.append((torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(B, c, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_append_after_attending(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, 0, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, 0, dh, dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        c = s1 - s0
        q = (xc @ w_q).reshape(B, c, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)  # (B, H, c, s0)
        w = torch.nan_to_num(torch.softmax(sc, -1), nan=0.0)
        outs.append((w @ v_cache).transpose(1, 2).reshape(B, c, D))
        k_new = (xc @ w_k).reshape(B, c, num_heads, dh).transpose(1, 2).to(ct)
        v_new = (xc @ w_v).reshape(B, c, num_heads, dh).transpose(1, 2).to(ct)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_drops_ragged_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for c in range(N // chunk_size):
        s0, s1 = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, s0:s1]
        q = (xc @ w_q).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s0:s1] = (xc @ w_k).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s0:s1] = (xc @ w_v).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(s1 - s0, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~allowed, float("-inf"))
        outs.append((torch.softmax(sc, -1) @ vc[:, :, :s1]).transpose(1, 2).reshape(B, -1, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = (xc @ w_q).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s0:s1] = (xc @ w_k).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s0:s1] = (xc @ w_v).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(D)
        allowed = torch.ones(s1 - s0, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~allowed, float("-inf"))
        outs.append((torch.softmax(sc, -1) @ vc[:, :, :s1]).transpose(1, 2).reshape(B, -1, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = (xc @ w_q).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, s0:s1] = (xc @ w_k).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, s0:s1] = (xc @ w_v).reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(s1 - s0, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~allowed, float("-inf"))
        ctx = torch.softmax(sc, -1) @ vc[:, :, :s1]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, s1 - s0, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    hd = dm // num_heads
    f32 = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(f32)
    wq, wk, wv, wo = (w.to(f32) for w in (w_q, w_k, w_v, w_o))
    past_k = []
    past_v = []
    pieces = []
    for lo in range(0, n, chunk_size):
        hi = min(n, lo + chunk_size)
        seg = xf[:, lo:hi]
        qh = (seg @ wq).view(b, hi - lo, num_heads, hd).transpose(1, 2)
        past_k.append((seg @ wk).view(b, hi - lo, num_heads, hd).transpose(1, 2))
        past_v.append((seg @ wv).view(b, hi - lo, num_heads, hd).transpose(1, 2))
        keys = torch.cat(past_k, dim=2)
        vals = torch.cat(past_v, dim=2)
        q_pos = torch.arange(lo, hi)[:, None]
        k_pos = torch.arange(hi)[None, :]
        ctx = F.scaled_dot_product_attention(qh, keys, vals, attn_mask=k_pos <= q_pos)
        pieces.append(ctx.transpose(1, 2).reshape(b, hi - lo, dm))
    return (torch.cat(pieces, dim=1) @ wo).to(x.dtype)


def prefill_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, dm = x.shape
    h = num_heads
    e = dm // h
    x64 = x.double()
    Q = x64 @ w_q.double()
    K = x64 @ w_k.double()
    V = x64 @ w_v.double()
    out = torch.empty(batch, n, dm, dtype=torch.float64)
    for first in range(0, n, chunk_size):
        last = min(first + chunk_size, n)  # exclusive
        qc = Q[:, first:last].reshape(batch, last - first, h, e)
        kc = K[:, :last].reshape(batch, last, h, e)
        vc = V[:, :last].reshape(batch, last, h, e)
        s = torch.einsum("bqhe,bkhe->bhqk", qc, kc) / math.sqrt(e)
        qi = torch.arange(first, last).view(-1, 1)
        kj = torch.arange(last).view(1, -1)
        s = s.masked_fill(kj > qi, -math.inf)
        p = s.softmax(dim=-1)
        out[:, first:last] = torch.einsum("bhqk,bkhe->bqhe", p, vc).reshape(batch, last - first, dm)
    return (out @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "bytes_for_every_query_head",
          "counts K and V bytes for all num_heads query heads instead of the num_kv_heads "
          "that are actually cached, so GQA sharing disappears from the intensity",
          intensity_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "keys_only",
          "divides by the bytes of the cached keys only; the values are read too (factor 2)",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "multiply_add_as_one_flop",
          "counts each multiply-add as 1 FLOP instead of 2, halving the intensity",
          intensity_macs_not_flops),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, returning a truncated int instead of a float",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "division_precedence",
          "writes flops / 2 * B * G * N * d * bytes, which divides by 2 and then multiplies by "
          "the rest, instead of dividing by the whole byte count",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "counts_query_and_output_bytes",
          "adds the bytes of the queries and outputs to the denominator; the contract counts "
          "only the K and V read from the cache",
          intensity_counts_query_and_output),
    Entry("decode_attention_intensity", "right", "closed_form_ratio", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fractions", None, intensity_fraction),

    Entry("paged_attention", "wrong", "whole_last_page",
          "attends to every slot of the sequence's pages, including the stale slots past "
          "seq_len in its last page (no [:n] cut)",
          paged_whole_last_page),
    Entry("paged_attention", "wrong", "repeat_instead_of_repeat_interleave",
          "expands the KV heads with repeat (head h reads group h % G) instead of "
          "repeat_interleave (group h // (H // G))",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "looks up key t at page block_table[b, t % page_size], slot t // page_size: page and "
          "slot are swapped (it reads the wrong keys, or indexes past the table and raises)",
          paged_page_and_slot_swapped),
    Entry("paged_attention", "wrong", "floor_page_count",
          "takes n // page_size pages instead of ceil(n / page_size), so a partly filled last "
          "page is dropped with its keys",
          paged_floor_page_count),
    Entry("paged_attention", "wrong", "softmax_over_query_axis",
          "the scores are (H, 1, n) and the softmax runs over dim=-2 (size 1) instead of the "
          "keys, so every weight is 1",
          paged_softmax_wrong_axis),
    Entry("paged_attention", "wrong", "pages_reshaped_without_transpose",
          "reshapes the gathered (pages, G, page_size, d) straight to (G, -1, d) without "
          "moving G first, so keys of different KV heads and pages are mixed",
          paged_reshape_without_transpose),
    Entry("paged_attention", "right", "token_gather_einsum_float64", None,
          paged_token_gather_float64),
    Entry("paged_attention", "right", "padded_batch_masked", None, paged_padded_masked),

    Entry("chunked_prefill", "wrong", "chunk_mask_not_offset",
          "the mask of a chunk is tril of (C, stop) with no offset, so query start+i sees only "
          "keys 0..i instead of 0..start+i (top-left instead of bottom-right)",
          prefill_mask_not_offset),
    Entry("chunked_prefill", "wrong", "no_cache",
          "each chunk attends only to its own keys and values; the earlier chunks' keys are "
          "never kept",
          prefill_no_cache),
    Entry("chunked_prefill", "wrong", "cache_appended_after_attention",
          "appends the chunk's keys and values to the cache after attending, so each chunk "
          "sees only earlier chunks and never itself (the first chunk gives zeros)",
          prefill_append_after_attending),
    Entry("chunked_prefill", "wrong", "ragged_tail_dropped",
          "loops over N // chunk_size full chunks only, so the shorter last chunk is never "
          "computed and the output is too short",
          prefill_drops_ragged_tail),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_by_d_model),
    Entry("chunked_prefill", "wrong", "heads_merged_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2), mixing heads and positions",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_with_mask", None, prefill_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "project_then_einsum_float64", None, prefill_einsum_float64),
]
