"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ========================================================= decode_attention_intensity: wrong
def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def intensity_counts_query_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q = batch_size * num_heads * head_dim * bytes_per_element
    return (score_flops + mix_flops) / (kv + q)


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_mac_is_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    macs = batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    macs += batch_size * num_heads * seq_len * head_dim  # weights @ v
    traffic = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(macs) / traffic


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


# ========================================================= decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: 4 B H N d / (2 B G N d bytes) = 2 H / (G bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query = 2 * seq_len * head_dim + 2 * seq_len * head_dim
    flops = per_query * num_heads * batch_size
    per_kv_head = 2 * seq_len * head_dim * bytes_per_element
    return float(Fraction(flops, per_kv_head * num_kv_heads * batch_size))


# ==================================================================== paged_attention: wrong
def paged_no_length_cut(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b].long()  # the sequence's pages
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    dt = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros(batch, heads, d, dtype=dt)
    for i in range(batch):
        length = int(seq_lens[i])
        n_pages = length // page
        ids = block_table[i, :n_pages].long()
        keys = k_pages[ids].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :length].to(dt)
        vals = v_pages[ids].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :length].to(dt)
        if keys.shape[1] == 0:
            continue
        keys = keys.repeat_interleave(rep, 0)
        vals = vals.repeat_interleave(rep, 0)
        sc = torch.einsum("hd,hnd->hn", q[i].to(dt), keys) / math.sqrt(d)
        result[i] = torch.einsum("hn,hnd->hd", sc.softmax(-1), vals)
    return result.to(q.dtype)


def paged_group_repeat(q, k_pages, v_pages, block_table, seq_lens):
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
        k = k.repeat(H // G, 1, 1)  # one K/V head per query head
        v = v.repeat(H // G, 1, 1)
        w = torch.softmax(q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2) / math.sqrt(d), dim=-1)
        out[b] = (w @ v).squeeze(1)
    return out.to(q.dtype)


def paged_masked_nan_empty(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    k = k_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    k = k.repeat_interleave(H // G, dim=1)  # (B, H, T, d)
    v = v.repeat_interleave(H // G, dim=1)
    scores = torch.einsum("bhd,bhtd->bht", q.to(ct), k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    scores = scores.masked_fill(~valid[:, None, :], -math.inf)
    out = torch.einsum("bht,bhtd->bhd", torch.softmax(scores, dim=-1), v)
    return out.to(q.dtype)


def paged_scale_page_size(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, dim = q.shape
    n_groups = k_pages.shape[1]
    page_size = k_pages.shape[2]
    scale = 1.0 / math.sqrt(k_pages.shape[2])
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(batch, heads, dim, dtype=ct)
    for b in range(batch):
        L = int(seq_lens[b])
        if L == 0:
            continue
        pg = block_table[b, : (L + page_size - 1) // page_size].long()
        K = k_pages[pg].transpose(0, 1).reshape(n_groups, -1, dim)[:, :L].to(ct)
        V = v_pages[pg].transpose(0, 1).reshape(n_groups, -1, dim)[:, :L].to(ct)
        K = K.repeat_interleave(heads // n_groups, dim=0)
        V = V.repeat_interleave(heads // n_groups, dim=0)
        s = (q[b].to(ct)[:, None] @ K.transpose(1, 2)) * scale
        out[b] = (s.softmax(-1) @ V)[:, 0]
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
        pages = block_table[b, : -(-n // P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)  # (G, n, d)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = torch.bmm(q[b].to(ct).unsqueeze(1), k.transpose(1, 2)) / math.sqrt(d)
        out[b] = torch.bmm(torch.softmax(s, -1), v).squeeze(1)
    return out.to(q.dtype)


# ==================================================================== paged_attention: right
def paged_token_loop_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[b, t // P]), :, t % P].double()
                            for t in range(n)], dim=1)  # (G, n, d)
        vals = torch.stack([v_pages[int(block_table[b, t // P]), :, t % P].double()
                            for t in range(n)], dim=1)
        for h in range(H):
            g = h // per_group
            s = keys[g] @ q[b, h].double() / math.sqrt(d)  # (n,)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ vals[g]
    return out.to(q.dtype)


def paged_gather_index(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    ct = torch.promote_types(q.dtype, torch.float32)
    t = torch.arange(T)
    page_ids = block_table.long()[:, t // P]  # (B, T)
    slots = (t % P).expand(B, T)
    k = k_pages[page_ids, :, slots].to(ct)  # (B, T, G, d)
    v = v_pages[page_ids, :, slots].to(ct)
    groups = torch.arange(H) // (H // G)
    k = k[:, :, groups]  # (B, T, H, d)
    v = v[:, :, groups]
    s = torch.einsum("bhd,bthd->bht", q.to(ct), k) * (1.0 / math.sqrt(d))
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, :]  # (B, 1, T)
    s = torch.where(valid, s, torch.full_like(s, -math.inf))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    den = e.sum(-1, keepdim=True)
    w = e / torch.where(den > 0, den, torch.ones_like(den))
    return torch.einsum("bht,bthd->bhd", w, v).to(q.dtype)


# ==================================================================== chunked_prefill: wrong
def prefill_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e].to(ct)
        C = e - s
        q = (xc @ w_q.to(ct)).view(B, C, num_heads, dh).transpose(1, 2)
        k = (xc @ w_k.to(ct)).view(B, C, num_heads, dh).transpose(1, 2)
        v = (xc @ w_v.to(ct)).view(B, C, num_heads, dh).transpose(1, 2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), -math.inf)
        ctx = torch.softmax(sc, -1) @ v
        pieces.append(ctx.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(pieces, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    hd = dm // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    k_cache, v_cache, outs = [], [], []
    for start in range(0, n, chunk_size):
        xc = xf[:, start:start + chunk_size]
        c = xc.shape[1]
        q = (xc @ w_q.to(ct)).view(b, c, num_heads, hd).transpose(1, 2)
        k_cache.append((xc @ w_k.to(ct)).view(b, c, num_heads, hd).transpose(1, 2))
        v_cache.append((xc @ w_v.to(ct)).view(b, c, num_heads, hd).transpose(1, 2))
        k, v = torch.cat(k_cache, dim=2), torch.cat(v_cache, dim=2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        outs.append(o.transpose(1, 2).reshape(b, c, dm))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_drops_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(batch, num_heads, n, d_head, dtype=compute)
    v_cache = torch.zeros(batch, num_heads, n, d_head, dtype=compute)
    outs = []
    num_chunks = n // chunk_size
    for c in range(num_chunks):
        start, stop = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, start:stop].to(compute)
        q = (xc @ w_q.to(compute)).reshape(batch, -1, num_heads, d_head).transpose(1, 2)
        k_cache[:, :, start:stop] = (xc @ w_k.to(compute)).reshape(
            batch, -1, num_heads, d_head).transpose(1, 2)
        v_cache[:, :, start:stop] = (xc @ w_v.to(compute)).reshape(
            batch, -1, num_heads, d_head).transpose(1, 2)
        scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        qpos = torch.arange(start, stop)[:, None]
        scores = scores.masked_fill(torch.arange(stop)[None, :] > qpos, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(batch, stop - start, d_model))
    return (torch.cat(outs, dim=1) @ w_o.to(compute)).to(x.dtype)


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    h = num_heads
    dh = D // h
    f = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, h, 0, dh, dtype=f)
    V = torch.empty(B, h, 0, dh, dtype=f)
    out = []
    for s in range(0, N, chunk_size):
        xc = x[:, s:s + chunk_size].to(f)
        C = xc.shape[1]
        Q = (xc @ w_q.to(f)).reshape(B, C, h, dh).transpose(1, 2)
        K = torch.cat([K, (xc @ w_k.to(f)).reshape(B, C, h, dh).transpose(1, 2)], dim=2)
        V = torch.cat([V, (xc @ w_v.to(f)).reshape(B, C, h, dh).transpose(1, 2)], dim=2)
        total = K.shape[2]
        allowed = torch.arange(total)[None, :] <= torch.arange(s, s + C)[:, None]
        S = (Q @ K.transpose(-1, -2) / math.sqrt(dh)).masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(S, dim=-1) @ V  # (B, h, C, dh)
        out.append(ctx.reshape(B, C, D))
    return (torch.cat(out, dim=1) @ w_o.to(f)).to(x.dtype)


def prefill_softmax_dim_queries(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    bsz, seq, dm = x.shape
    hd = dm // num_heads
    cdt = torch.promote_types(x.dtype, torch.float32)
    ks, vs, ys = [], [], []
    for lo in range(0, seq, chunk_size):
        hi = min(lo + chunk_size, seq)
        xc = x[:, lo:hi].to(cdt)
        sp = lambda t: t.view(bsz, hi - lo, num_heads, hd).transpose(1, 2)  # noqa: E731
        q = sp(xc @ w_q.to(cdt))
        ks.append(sp(xc @ w_k.to(cdt)))
        vs.append(sp(xc @ w_v.to(cdt)))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        logits = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(hd)
        mask = torch.ones(hi - lo, hi, dtype=torch.bool).tril(lo)
        logits = logits.masked_fill(~mask, float("-inf"))
        att = torch.softmax(logits, dim=-2)
        att = torch.nan_to_num(att, nan=0.0)
        ys.append(torch.einsum("bhqk,bhkd->bqhd", att, v).reshape(bsz, hi - lo, dm))
    return (torch.cat(ys, 1) @ w_o.to(cdt)).to(x.dtype)


def prefill_values_with_w_k(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    res = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z].to(ct)
        q = (xc @ w_q.to(ct)).view(B, z - a, num_heads, dh).transpose(1, 2)
        kc[:, :, a:z] = (xc @ w_k.to(ct)).view(B, z - a, num_heads, dh).transpose(1, 2)
        vc[:, :, a:z] = (xc @ w_k.to(ct)).view(B, z - a, num_heads, dh).transpose(1, 2)
        sc = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(z - a, z, dtype=torch.bool).tril(a)
        sc = sc.masked_fill(~keep, -math.inf)
        res.append((torch.softmax(sc, -1) @ vc[:, :, :z]).transpose(1, 2).reshape(B, z - a, D))
    return (torch.cat(res, 1) @ w_o.to(ct)).to(x.dtype)


# ==================================================================== chunked_prefill: right
def prefill_sdpa_bottom_right_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    q_all_chunks = []
    k_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    start = 0
    while start < N:
        stop = min(start + chunk_size, N)
        C = stop - start
        xc = xf[:, start:stop]
        q = (xc @ w_q.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        k_cache[:, :, start:stop] = (xc @ w_k.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        v_cache[:, :, start:stop] = (xc @ w_v.to(ct)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        mask = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]  # (C, stop)
        o = F.scaled_dot_product_attention(q, k_cache[:, :, :stop], v_cache[:, :, :stop],
                                           attn_mask=mask)
        q_all_chunks.append(o.transpose(1, 2).flatten(2))
        start = stop
    return (torch.cat(q_all_chunks, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_head_loop_f64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    Wq, Wk, Wv, Wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    cache_k = [[] for _ in range(num_heads)]
    cache_v = [[] for _ in range(num_heads)]
    y = torch.zeros(B, N, D, dtype=torch.float64)
    for s in range(0, N, chunk_size):
        e = min(N, s + chunk_size)
        xc = xd[:, s:e]
        for h in range(num_heads):
            cols = slice(h * dh, (h + 1) * dh)
            qh = xc @ Wq[:, cols]
            cache_k[h].append(xc @ Wk[:, cols])
            cache_v[h].append(xc @ Wv[:, cols])
            kh = torch.cat(cache_k[h], dim=1)  # (B, e, dh)
            vh = torch.cat(cache_v[h], dim=1)
            sc = torch.einsum("bqd,bkd->bqk", qh, kh) / math.sqrt(dh)
            later = torch.arange(e)[None, :] > torch.arange(s, e)[:, None]
            sc = sc.masked_fill(later, -math.inf)
            p = torch.softmax(sc, dim=-1)
            y[:, s:e] += torch.einsum("bqk,bkd->bqd", p, vh) @ Wo[cols, :]
    return y.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "keys_only_bytes",
          "the bytes count only the cached keys, not the values: K and V are both read, "
          "2 B G N d bytes",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "bytes_per_query_head",
          "the K/V bytes are counted with num_heads instead of num_kv_heads, ignoring that "
          "H / G query heads share one cached K/V head",
          intensity_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "counts_query_bytes",
          "it adds the bytes of the new queries to the bytes read, but the contract divides "
          "by the bytes of K and V read from the cache only",
          intensity_counts_query_bytes),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "`flops // bytes` floors the ratio to an int, so a fractional intensity such as 0.5 "
          "becomes 0 (and the result is not a float)",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "mac_as_one_flop",
          "it counts each multiply-add as one FLOP, so the intensity is half the contract's "
          "(one multiply-add = 2 FLOPs)",
          intensity_mac_is_one_flop),
    Entry("decode_attention_intensity", "wrong", "precedence_divide_then_multiply",
          "`flops / 2 * batch * ... * bytes` divides by 2 only and then multiplies by the rest "
          "of the byte count: the denominator needs parentheses",
          intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed_form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction", None, intensity_fraction),

    Entry("paged_attention", "wrong", "no_length_cut",
          "it attends over every slot of every page in the block-table row, never cutting at "
          "seq_lens[b], so stale slots and pages past the length are read",
          paged_no_length_cut),
    Entry("paged_attention", "wrong", "floor_page_count",
          "the number of pages is seq_len // page_size instead of the ceiling, so the last, "
          "partly filled page (and a sequence shorter than one page) is dropped",
          paged_floor_page_count),
    Entry("paged_attention", "wrong", "repeat_not_interleave",
          "the K/V heads are widened with .repeat (g0 g1 g0 g1), so query head h reads K/V "
          "head h % G instead of h // (H // G) (repeat_interleave)",
          paged_group_repeat),
    Entry("paged_attention", "wrong", "masked_nan_length_zero",
          "the masked version has no guard for a sequence of length 0: its row is all -inf and "
          "the softmax gives NaN instead of zeros",
          paged_masked_nan_empty),
    Entry("paged_attention", "wrong", "scale_by_page_size",
          "the scale reads k_pages.shape[2], the page size, instead of the head dim "
          "k_pages.shape[-1], so scores are divided by sqrt(page_size)",
          paged_scale_page_size),
    Entry("paged_attention", "wrong", "pages_reshaped_without_transpose",
          "the gathered (pages, G, page_size, d) block is reshaped to (G, -1, d) without first "
          "swapping the page and group axes, so keys of different groups and pages are mixed",
          paged_reshape_without_transpose),
    Entry("paged_attention", "right", "token_loop_float64", None, paged_token_loop_f64),
    Entry("paged_attention", "right", "vectorised_gather", None, paged_gather_index),

    Entry("chunked_prefill", "wrong", "own_chunk_only",
          "each chunk attends only to its own keys with a square causal mask; the keys and "
          "values of earlier chunks are never cached or used",
          prefill_own_chunk_only),
    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "scaled_dot_product_attention(is_causal=True) aligns the mask top-left when the "
          "chunk has fewer queries than cached keys, so later chunks see only the first keys",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "tail_chunk_dropped",
          "it runs N // chunk_size chunks, so the last, shorter chunk is never computed (and "
          "with chunk_size > N there is nothing to concatenate)",
          prefill_drops_tail),
    Entry("chunked_prefill", "wrong", "merge_without_transpose",
          "the chunk's (B, H, C, d_head) context is reshaped straight to (B, C, d_model) "
          "without transpose(1, 2), which mixes heads and tokens",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "softmax_over_queries",
          "the softmax runs over dim=-2 (the chunk's queries) instead of the keys",
          prefill_softmax_dim_queries),
    Entry("chunked_prefill", "wrong", "values_with_w_k",
          "the value cache is filled with x @ w_k (copy-paste of the key line) instead of "
          "x @ w_v",
          prefill_values_with_w_k),
    Entry("chunked_prefill", "right", "sdpa_bottom_right_mask", None,
          prefill_sdpa_bottom_right_mask),
    Entry("chunked_prefill", "right", "head_loop_float64", None, prefill_head_loop_f64),
]
