"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_no_kv_sharing(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_mac_is_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
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


def intensity_reads_new_token_too(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cached = seq_len + 1  # the cache after appending the new token
    nbytes = 2 * batch_size * num_kv_heads * cached * head_dim * bytes_per_element
    return flops / nbytes


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return float(2 * num_heads) / float(num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query = Fraction(2 * seq_len * head_dim + 2 * seq_len * head_dim)
    queries = batch_size * num_heads
    per_kv_head = Fraction(2 * seq_len * head_dim * bytes_per_element)
    return float(per_query * queries / (per_kv_head * batch_size * num_kv_heads))


# ============================================================ paged_attention: wrong
def paged_mask_off_by_one(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    tbl = block_table.long()
    k_all = k_pages[tbl].to(ct)  # (B, max_pages, G, P, d)
    v_all = v_pages[tbl].to(ct)
    k_all = k_all.permute(0, 2, 1, 3, 4).reshape(B, G, -1, d)
    v_all = v_all.permute(0, 2, 1, 3, 4).reshape(B, G, -1, d)
    rep = H // G
    k_all = k_all.repeat_interleave(rep, dim=1)
    v_all = v_all.repeat_interleave(rep, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), k_all) / math.sqrt(d)
    pos = torch.arange(k_all.shape[2])
    valid = pos[None, :] <= seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return torch.einsum("bht,bhtd->bhd", p, v_all).to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=ct)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / page)].long()
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(ct)
        k = k.repeat(heads // groups, 1, 1)
        v = v.repeat(heads // groups, 1, 1)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :(n + P - 1) // P].long()
        keys = k_pages[idx].reshape(G, -1, d)[:, :n].to(ct)
        vals = v_pages[idx].reshape(G, -1, d)[:, :n].to(ct)
        for h in range(H):
            s = keys[h // rep] @ q[b, h].to(ct) / math.sqrt(d)
            result[b, h] = torch.softmax(s, dim=0) @ vals[h // rep]
    return result.to(q.dtype)


def paged_scale_by_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    P = k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pg = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(k_pages.shape[2])
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_div_mod_swapped(q, k_pages, v_pages, block_table, seq_lens):
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


def paged_empty_sequence_nan(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    kk = k_pages[block_table.long()].to(ct).transpose(1, 2).flatten(2, 3)  # (B, G, T, d)
    vv = v_pages[block_table.long()].to(ct).transpose(1, 2).flatten(2, 3)
    rep = H // G
    qq = q.to(ct).view(B, G, rep, d)
    s = qq @ kk.transpose(-2, -1) / math.sqrt(d)  # (B, G, rep, T)
    t = torch.arange(kk.shape[2])
    keep = t[None, :] < seq_lens.long()[:, None]
    s = s.masked_fill(~keep[:, None, None, :], float("-inf"))
    out = torch.softmax(s, dim=-1) @ vv  # (B, G, rep, d)
    return out.reshape(B, H, d).to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_loops_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(H):
            if n == 0:
                continue
            g = h // per_group
            keys = torch.stack([k_pages[int(block_table[b, t // P]), g, t % P] for t in range(n)])
            vals = torch.stack([v_pages[int(block_table[b, t // P]), g, t % P] for t in range(n)])
            s = keys.double() @ q[b, h].double() / math.sqrt(d)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ vals.double()
    return out.to(q.dtype)


def paged_vectorised_masked(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    tbl = block_table.long()
    k_seq = k_pages[tbl].permute(0, 2, 1, 3, 4).flatten(2, 3).to(ct)  # (B, G, T, d)
    v_seq = v_pages[tbl].permute(0, 2, 1, 3, 4).flatten(2, 3).to(ct)
    q_g = q.to(ct).reshape(B, G, rep, d)
    s = torch.einsum("bgrd,bgtd->bgrt", q_g, k_seq) / math.sqrt(d)
    visible = torch.arange(k_seq.shape[2])[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~visible[:, None, None, :], float("-inf"))
    p = torch.softmax(s, dim=-1)
    p = torch.where(visible[:, None, None, :], p, torch.zeros_like(p))
    p = torch.nan_to_num(p, nan=0.0)
    out = torch.einsum("bgrt,bgtd->bgrd", p, v_seq)
    return out.reshape(B, H, d).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v = (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros((B, num_heads, 0, dh), dtype=ct)
    v_cache = torch.zeros((B, num_heads, 0, dh), dtype=ct)
    pieces = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k_cache = torch.cat([k_cache, (xc @ w_k).reshape(B, C, num_heads, dh)
                             .transpose(1, 2).to(ct)], dim=2)
        v_cache = torch.cat([v_cache, (xc @ w_v).reshape(B, C, num_heads, dh)
                             .transpose(1, 2).to(ct)], dim=2)
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(C, s1, dtype=torch.bool).tril(s0)
        s = s.masked_fill(~allowed, float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v_cache  # (B, H, C, dh)
        pieces.append(ctx.reshape(B, C, D))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_drops_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((batch, num_heads, n, d_head), dtype=ct)
    v_cache = torch.empty((batch, num_heads, n, d_head), dtype=ct)
    outputs = []
    n_chunks = max(n // chunk_size, 1)
    for c in range(n_chunks):
        start, stop = c * chunk_size, min((c + 1) * chunk_size, n)
        xc = x[:, start:stop]
        m = stop - start
        q = (xc @ w_q).reshape(batch, m, num_heads, d_head).transpose(1, 2).to(ct)
        k_cache[:, :, start:stop] = (xc @ w_k).reshape(batch, m, num_heads, d_head) \
            .transpose(1, 2).to(ct)
        v_cache[:, :, start:stop] = (xc @ w_v).reshape(batch, m, num_heads, d_head) \
            .transpose(1, 2).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        mask = torch.ones(m, stop, dtype=torch.bool).tril(stop - m)
        s = s.masked_fill(~mask, float("-inf"))
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]
        outputs.append(ctx.transpose(1, 2).reshape(batch, m, d_model))
    return torch.cat(outputs, dim=1).to(x.dtype) @ w_o


def prefill_cache_appended_late(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k_new = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v_new = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        if ks:
            K = torch.cat(ks, dim=2)
            V = torch.cat(vs, dim=2)
            s = q @ K.transpose(-2, -1) / math.sqrt(dh)
            ctx = torch.softmax(s, dim=-1) @ V
        else:
            ctx = torch.zeros_like(q)
        ks.append(k_new)  # the chunk's keys join the cache after it has attended
        vs.append(v_new)
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty((B, num_heads, 0, dh), dtype=ct)
    V = torch.empty((B, num_heads, 0, dh), dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size].to(ct)
        C = xc.shape[1]
        q = (xc @ w_q.to(ct)).view(B, C, num_heads, dh).transpose(1, 2)
        K = torch.cat([K, (xc @ w_k.to(ct)).view(B, C, num_heads, dh).transpose(1, 2)], 2)
        V = torch.cat([V, (xc @ w_v.to(ct)).view(B, C, num_heads, dh).transpose(1, 2)], 2)
        ctx = F.scaled_dot_product_attention(q, K, V, is_causal=True)
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty((B, num_heads, N, dh), dtype=ct)
    vc = torch.empty((B, num_heads, N, dh), dtype=ct)
    res = []
    for a in range(0, N, chunk_size):
        b = min(a + chunk_size, N)
        xc = x[:, a:b]
        q = (xc @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        kc[:, :, a:b] = (xc @ w_k).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        vc[:, :, a:b] = (xc @ w_v).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :b].transpose(-2, -1) / math.sqrt(D)
        qi = torch.arange(a, b)[:, None]
        kj = torch.arange(b)[None, :]
        s = s.masked_fill(kj > qi, float("-inf"))
        res.append((torch.softmax(s, -1) @ vc[:, :, :b]).transpose(1, 2).flatten(2))
    return torch.cat(res, 1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_explicit_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    wq, wk, wv, wo = (w.to(ct) for w in (w_q, w_k, w_v, w_o))
    K = torch.empty((B, num_heads, 0, dh), dtype=ct)
    V = torch.empty((B, num_heads, 0, dh), dtype=ct)
    outs = []
    start = 0
    while start < N:
        stop = min(start + chunk_size, N)
        xc = xf[:, start:stop]
        C = stop - start
        q = (xc @ wq).view(B, C, num_heads, dh).transpose(1, 2)
        K = torch.cat([K, (xc @ wk).view(B, C, num_heads, dh).transpose(1, 2)], dim=2)
        V = torch.cat([V, (xc @ wv).view(B, C, num_heads, dh).transpose(1, 2)], dim=2)
        mask = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]  # (C, stop)
        ctx = F.scaled_dot_product_attention(q, K, V, attn_mask=mask)
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
        start = stop
    return (torch.cat(outs, dim=1) @ wo).to(x.dtype)


def prefill_per_head_f64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    k_cache = [[] for _ in range(num_heads)]
    v_cache = [[] for _ in range(num_heads)]
    merged = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = xd[:, start:stop]
        head_outs = []
        for h in range(num_heads):
            cols = slice(h * dh, (h + 1) * dh)
            qh = xc @ w_q[:, cols].double()
            k_cache[h].append(xc @ w_k[:, cols].double())
            v_cache[h].append(xc @ w_v[:, cols].double())
            kh = torch.cat(k_cache[h], dim=1)  # (B, stop, dh)
            vh = torch.cat(v_cache[h], dim=1)
            s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
            future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
            s = s.masked_fill(future, -math.inf)
            p = torch.exp(s - s.amax(dim=-1, keepdim=True))
            p = p / p.sum(dim=-1, keepdim=True)
            head_outs.append(torch.einsum("bij,bjd->bid", p, vh))
        merged.append(torch.cat(head_outs, dim=-1))
    ctx = torch.cat(merged, dim=1)
    return (ctx @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "keys_only_bytes",
          "counts the bytes of the cached keys only and forgets the values, so the intensity "
          "is twice too high",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "no_kv_sharing",
          "counts K/V bytes for every query head (num_heads) instead of num_kv_heads: it "
          "ignores that grouped query heads share one cached K/V head",
          intensity_no_kv_sharing),
    Entry("decode_attention_intensity", "wrong", "mac_is_one_flop",
          "counts one multiply-add as 1 FLOP instead of 2, so the FLOPs and the intensity are "
          "halved",
          intensity_mac_is_one_flop),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, returning a floored int (0 when the intensity is "
          "below 1) instead of the float ratio",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "missing_parentheses",
          "writes flops / 2 * batch * kv_heads * ... without parentheses, so it divides by 2 "
          "and then multiplies by the rest of the byte count",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "seq_len_plus_one_bytes",
          "counts the bytes of seq_len + 1 cached tokens (the new token's K/V too) while the "
          "FLOPs use seq_len keys",
          intensity_reads_new_token_too),
    Entry("decode_attention_intensity", "right", "closed_form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fractions", None, intensity_fraction),

    Entry("paged_attention", "wrong", "length_mask_off_by_one",
          "the length mask keeps positions t <= seq_len instead of t < seq_len, so each "
          "sequence also attends one stale slot past its last key",
          paged_mask_off_by_one),
    Entry("paged_attention", "wrong", "repeat_instead_of_interleave",
          "expands the K/V heads with .repeat, which tiles them (head h reads group h % G) "
          "instead of repeat_interleave (group h // (H // G))",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "reshape_without_transpose",
          "reshapes the gathered pages (p, G, page_size, d) straight to (G, p * page_size, d) "
          "without first moving the group axis in front, so keys of different groups and "
          "pages are mixed",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "scale_by_page_size",
          "scales the scores by 1/sqrt(k_pages.shape[2]), which is page_size, instead of "
          "1/sqrt(d) (shape[-1])",
          paged_scale_by_page_size),
    Entry("paged_attention", "wrong", "div_mod_swapped",
          "swaps // and %: it looks up the page with t % page_size and the slot with "
          "t // page_size, so it reads the wrong keys and raises IndexError when "
          "t % page_size runs past the block table's width",
          paged_div_mod_swapped),
    Entry("paged_attention", "wrong", "empty_sequence_nan",
          "masks the unused slots with -inf and takes the softmax without a guard: a sequence "
          "of length 0 has every key masked and gets NaN instead of zeros",
          paged_empty_sequence_nan),
    Entry("paged_attention", "right", "token_loops_float64", None, paged_token_loops_f64),
    Entry("paged_attention", "right", "vectorised_masked_gather", None,
          paged_vectorised_masked),

    Entry("chunked_prefill", "wrong", "no_cache",
          "each chunk attends only to its own keys: the keys and values of earlier chunks are "
          "never kept, so queries after the first chunk miss their past",
          prefill_no_cache),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head) "
          "without transposing back, scrambling heads and tokens",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "drops_ragged_tail",
          "loops over N // chunk_size chunks, so when chunk_size does not divide N the last "
          "queries are never computed and the output is too short",
          prefill_drops_tail),
    Entry("chunked_prefill", "wrong", "cache_appended_after_attending",
          "appends the chunk's keys and values to the cache only after the chunk has "
          "attended, so a chunk never sees itself (the first chunk gets zeros)",
          prefill_cache_appended_late),
    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "calls scaled_dot_product_attention(q_chunk, K_cache, V_cache, is_causal=True): "
          "with fewer queries than keys its causal mask is aligned top-left, so later chunks "
          "see only the first keys of the cache",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "scale_sqrt_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "right", "sdpa_explicit_bottom_right_mask", None,
          prefill_sdpa_explicit_mask),
    Entry("chunked_prefill", "right", "per_head_lists_float64", None, prefill_per_head_f64),
]
