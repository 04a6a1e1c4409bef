"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ========================================================== decode_attention_intensity: wrong
def intensity_kv_heads_ignored(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / k_bytes


def intensity_mac_as_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    macs = batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    macs += batch_size * num_heads * seq_len * head_dim  # p * v for every cached value
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / read


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    moved = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // moved


def intensity_hardcoded_bf16(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * 2  # bf16
    return float(flops / kv_bytes)


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


# ========================================================== decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    group = num_heads / num_kv_heads  # query heads sharing one K/V head
    return 2.0 * group / bytes_per_element


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_key_flops = Fraction(2 * head_dim) * 2  # score + weighted sum, per query head
    flops = per_key_flops * num_heads * seq_len * batch_size
    per_key_bytes = Fraction(2 * head_dim * bytes_per_element)  # one key + one value
    nbytes = per_key_bytes * num_kv_heads * seq_len * batch_size
    return float(flops / nbytes)


# ===================================================================== paged_attention: wrong
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
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros((batch, heads, d), dtype=ct)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :(n + page - 1) // page].long()
        k = k_pages[idx].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(ct)
        v = v_pages[idx].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(ct)
        k = k.repeat(heads // groups, 1, 1)
        v = v.repeat(heads // groups, 1, 1)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        res[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return res.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :max(n // P, 1)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_masked_no_guard(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    tbl = block_table.long()
    k = k_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    k = k.repeat_interleave(H // G, dim=1)  # (B, H, T, d)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.softmax(s, dim=-1)
    return torch.einsum("bht,bhtd->bhd", w, v).to(q.dtype)


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
        keys = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        vals = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        keys = keys.repeat_interleave(H // G, dim=0)
        vals = vals.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct).unsqueeze(1) @ keys.transpose(1, 2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ vals)[:, 0]
    return out.to(q.dtype)


def paged_softmax_over_heads(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        scores = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)  # (H, n)
        w = torch.softmax(scores, dim=0)
        out[b] = torch.einsum("hn,hnd->hd", w, v)
    return out.to(q.dtype)


# ===================================================================== paged_attention: right
def paged_token_loop_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.empty((G, n, d), dtype=torch.float64)
        vals = torch.empty((G, n, d), dtype=torch.float64)
        for t in range(n):
            page = int(block_table[b, t // P])
            keys[:, t] = k_pages[page, :, t % P].double()
            vals[:, t] = v_pages[page, :, t % P].double()
        for h in range(H):
            g = h // per_group
            s = keys[g] @ q[b, h].double() / math.sqrt(d)  # (n,)
            out[b, h] = torch.softmax(s, dim=0) @ vals[g]
    return out.to(q.dtype)


def paged_gather_masked_guarded(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    T = block_table.shape[1] * P
    ct = torch.promote_types(q.dtype, torch.float32)
    tbl = block_table.long()
    kk = k_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, T, d).to(ct)
    vv = v_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, T, d).to(ct)
    qg = q.to(ct).reshape(B, G, H // G, d)  # head h = g * (H // G) + r
    s = torch.einsum("bgrd,bgtd->bgrt", qg, kk) / math.sqrt(d)
    valid = (torch.arange(T)[None, :] < seq_lens.long()[:, None])[:, None, None, :]
    s = torch.where(valid, s, torch.tensor(-math.inf, dtype=ct))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    o = torch.einsum("bgrt,bgtd->bgrd", w, vv)
    return o.reshape(B, H, d).to(q.dtype)


# ===================================================================== chunked_prefill: wrong
def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s in range(0, N, chunk_size):
        xc = x[:, s:s + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(C, k.shape[2], dtype=torch.bool).tril()
        sc = sc.masked_fill(~allowed, -math.inf)
        outs.append((torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    pieces = []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        xc = x[:, start:stop]
        q = (xc @ w_q).view(B, stop - start, num_heads, dh).transpose(1, 2).to(ct)
        k_cache[:, :, start:stop] = (xc @ w_k).view(B, stop - start, num_heads, dh).transpose(1, 2).to(ct)
        v_cache[:, :, start:stop] = (xc @ w_v).view(B, stop - start, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        ctx = torch.softmax(sc, -1) @ v_cache[:, :, :stop]
        pieces.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for s in range(0, N, chunk_size):
        xc = x[:, s:s + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), -math.inf)
        outs.append((torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_drops_last_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    n_chunks = max(N // chunk_size, 1)
    ks, vs, outs = [], [], []
    for c in range(n_chunks):
        s, e = c * chunk_size, min((c + 1) * chunk_size, N)
        xc = x[:, s:e]
        L = e - s
        q = (xc @ w_q).reshape(B, L, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, L, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, L, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(L, e, dtype=torch.bool).tril(e - L)
        sc = sc.masked_fill(~allowed, -math.inf)
        outs.append((torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(B, L, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s in range(0, N, chunk_size):
        xc = x[:, s:s + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        T = k.shape[2]
        sc = q @ k.transpose(-2, -1) / math.sqrt(D)
        sc = sc.masked_fill(~torch.ones(C, T, dtype=torch.bool).tril(T - C), -math.inf)
        outs.append((torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s in range(0, N, chunk_size):
        xc = x[:, s:s + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        T = k.shape[2]
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(C, T, dtype=torch.bool).tril(T - C), -math.inf)
        ctx = torch.softmax(sc, -1) @ v  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


# ===================================================================== chunked_prefill: right
def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    xs = x.to(ct)
    wq, wk, wv = w_q.to(ct), w_k.to(ct), w_v.to(ct)
    keys = torch.zeros((B, H, 0, dh), dtype=ct)
    vals = torch.zeros((B, H, 0, dh), dtype=ct)
    out = torch.empty((B, N, D), dtype=ct)
    for start in range(0, N, chunk_size):
        xc = xs[:, start:start + chunk_size]
        C = xc.shape[1]
        q = (xc @ wq).unflatten(-1, (H, dh)).transpose(1, 2)
        keys = torch.cat([keys, (xc @ wk).unflatten(-1, (H, dh)).transpose(1, 2)], dim=2)
        vals = torch.cat([vals, (xc @ wv).unflatten(-1, (H, dh)).transpose(1, 2)], dim=2)
        T = keys.shape[2]
        key_pos = torch.arange(T)[None, :]
        query_pos = torch.arange(start, start + C)[:, None]
        mask = key_pos <= query_pos  # (C, T)
        ctx = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask)
        out[:, start:start + C] = ctx.transpose(1, 2).flatten(-2)
    return (out @ w_o.to(ct)).to(x.dtype)


def prefill_merge_past_and_own(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Each chunk: attention over the cached past (no mask) and causal attention over its own
    keys, merged exactly with their log-sum-exps (flash-decoding style), in float64."""
    B, N, D = x.shape
    H, dh = num_heads, D // num_heads
    x64 = x.double()

    def heads(t):
        return t.reshape(t.shape[0], t.shape[1], H, dh).permute(0, 2, 1, 3)

    past_k = torch.zeros((B, H, 0, dh), dtype=torch.float64)
    past_v = torch.zeros((B, H, 0, dh), dtype=torch.float64)
    chunks = []
    for c0 in range(0, N, chunk_size):
        xc = x64[:, c0:c0 + chunk_size]
        L = xc.shape[1]
        q = heads(xc @ w_q.double()) / math.sqrt(dh)
        k = heads(xc @ w_k.double())
        v = heads(xc @ w_v.double())
        s_own = q @ k.transpose(-1, -2)
        s_own = s_own.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
        lse_own = torch.logsumexp(s_own, -1)
        out_own = torch.exp(s_own - lse_own[..., None]) @ v
        if past_k.shape[2] > 0:
            s_past = q @ past_k.transpose(-1, -2)
            lse_past = torch.logsumexp(s_past, -1)
            out_past = torch.exp(s_past - lse_past[..., None]) @ past_v
            lse = torch.logaddexp(lse_own, lse_past)
            ctx = (torch.exp(lse_own - lse)[..., None] * out_own
                   + torch.exp(lse_past - lse)[..., None] * out_past)
        else:
            ctx = out_own
        chunks.append(ctx.permute(0, 2, 1, 3).reshape(B, L, D))
        past_k = torch.cat([past_k, k], dim=2)
        past_v = torch.cat([past_v, v], dim=2)
    return (torch.cat(chunks, dim=1) @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "kv_heads_ignored",
          "counts the K/V bytes with num_heads instead of num_kv_heads, as if every query "
          "head had its own cached keys and values (no GQA sharing)",
          intensity_kv_heads_ignored),
    Entry("decode_attention_intensity", "wrong", "keys_only",
          "counts only the bytes of the cached keys and forgets the values, halving the "
          "bytes read",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "mac_as_one_flop",
          "counts each multiply-add as one FLOP instead of two, halving the FLOPs",
          intensity_mac_as_one_flop),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, which returns a truncated int instead of the float "
          "ratio (an intensity of 0.5 becomes 0)",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "hardcoded_bf16",
          "hard-codes 2 bytes per element (bf16) instead of using bytes_per_element",
          intensity_hardcoded_bf16),
    Entry("decode_attention_intensity", "wrong", "division_precedence",
          "writes flops / 2 * batch * kv_heads * ... without parentheses, so it divides by 2 "
          "and multiplies by the rest of the byte count instead of dividing by it",
          intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed_form_ratio", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fractions_per_key", None, intensity_fraction),

    Entry("paged_attention", "wrong", "whole_pages",
          "attends to every slot of the sequence's pages, including the stale slots past "
          "seq_lens[b] in its last page",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "repeat_not_interleave",
          "expands the K/V heads with .repeat (head h reads group h % G) instead of "
          "repeat_interleave (group h // (H // G))",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "floor_page_count",
          "takes n // page_size pages instead of ceil(n / page_size), so the keys in a "
          "partly filled last page are dropped",
          paged_floor_page_count),
    Entry("paged_attention", "wrong", "masked_no_empty_guard",
          "masks the slots past each length with -inf and calls softmax without a guard, so "
          "a sequence of length 0 gives NaN instead of zeros",
          paged_masked_no_guard),
    Entry("paged_attention", "wrong", "reshape_without_transpose",
          "reshapes the gathered pages (p, G, page_size, d) straight to (G, p * page_size, d) "
          "without moving the group axis first, mixing the groups' and pages' keys",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "softmax_over_heads",
          "applies the softmax over dim 0 of the (H, n) scores, normalising across heads "
          "instead of across the sequence's keys",
          paged_softmax_over_heads),
    Entry("paged_attention", "right", "token_loop_float64", None, paged_token_loop_f64),
    Entry("paged_attention", "right", "gather_mask_guarded", None, paged_gather_masked_guarded),

    Entry("chunked_prefill", "wrong", "mask_top_left",
          "masks each chunk with tril() of a (C, T) matrix, aligned top-left, so query i of a "
          "later chunk sees only the first i + 1 cached keys instead of everything up to its "
          "own position",
          prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "no_mask_inside_chunk",
          "lets every query of a chunk see all keys of its own chunk, including the later "
          "tokens: no causal mask within the chunk",
          prefill_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "no_cache",
          "attends each chunk to its own keys only, never keeping the earlier chunks' keys "
          "and values in a cache",
          prefill_no_cache),
    Entry("chunked_prefill", "wrong", "drops_last_chunk",
          "loops over N // chunk_size chunks, so the ragged last chunk is never processed "
          "and the output is too short",
          prefill_drops_last_chunk),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "merge_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transposing the head axis back first",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "right", "sdpa_per_chunk", None, prefill_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "merge_past_and_own", None, prefill_merge_past_and_own),
]
