"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def intensity_k_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element  # the keys
    return flops / bytes_read


def intensity_query_heads_read(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    cache_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / cache_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) // kv_bytes


def intensity_mac_as_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    macs = batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    macs += batch_size * num_heads * seq_len * head_dim  # weighted sum of the values
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(macs / nbytes)


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_cache_shared_by_batch(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                    bytes_per_element=2):
    flops = 4.0 * batch_size * num_heads * seq_len * head_dim
    kv = 2.0 * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / kv


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # 4 B H N d / (2 B G N d bytes): everything but the head ratio cancels
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fractions(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    queries = batch_size * num_heads
    flops = Fraction(queries * seq_len * head_dim * 2) * 2
    k_bytes = Fraction(batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)
    return float(flops / (2 * k_bytes))


# ============================================================ paged_attention: wrong
def paged_reads_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
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
        out[b] = (s.softmax(-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    n_rep = heads // groups
    compute = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ids = block_table[b, :(n + page - 1) // page].long()
        keys = k_pages[ids].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        vals = v_pages[ids].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        keys = keys.repeat(n_rep, 1, 1)
        vals = vals.repeat(n_rep, 1, 1)
        scores = torch.einsum("hd,hnd->hn", q[b].to(compute), keys) / math.sqrt(d)
        result[b] = torch.einsum("hn,hnd->hd", torch.softmax(scores, -1), vals)
    return result.to(q.dtype)


def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, page_size = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t % page_size])
            slot = t // page_size
            ks.append(k_pages[page, :, slot])
            vs.append(v_pages[page, :, slot])
        K = torch.stack(ks, dim=1).to(ct)  # (G, n, d)
        V = torch.stack(vs, dim=1).to(ct)
        for h in range(H):
            g = h // (H // G)
            w = torch.softmax(K[g] @ q[b, h].to(ct) / math.sqrt(d), dim=0)
            out[b, h] = w @ V[g]
    return out.to(q.dtype)


def paged_masked_nan_for_empty(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    ct = torch.promote_types(q.dtype, torch.float32)
    t = torch.arange(T)
    pages = block_table[:, t // P].long()  # (B, T)
    slots = (t % P)[None, :].expand(B, T)
    k = k_pages[pages, :, slots].to(ct)  # (B, T, G, d)
    v = v_pages[pages, :, slots].to(ct)
    k = k.repeat_interleave(H // G, dim=2)  # (B, T, H, d)
    v = v.repeat_interleave(H // G, dim=2)
    s = torch.einsum("bhd,bthd->bht", q.to(ct), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bht,bthd->bhd", p, v).to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    n_rep = heads // groups
    c = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=c)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, : math.ceil(n / page_size)].long()
        k = k_pages[used].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(c)
        v = v_pages[used].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(c)
        k = k.repeat_interleave(n_rep, 0)
        v = v.repeat_interleave(n_rep, 0)
        scores = q[b].to(c)[:, None, :] @ k.transpose(-2, -1)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
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
        n_pages = n // P
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v).squeeze(1)
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_loop_float64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)])
        vals = torch.stack([v_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)])
        keys, vals = keys.double(), vals.double()  # (n, G, d)
        for h in range(H):
            g = h // per_group
            s = keys[:, g, :] @ q[b, h].double() / math.sqrt(d)  # (n,)
            e = torch.exp(s - s.max())
            out[b, h] = (e / e.sum()) @ vals[:, g, :]
    return out.to(q.dtype)


def paged_vectorised_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    ct = torch.promote_types(q.dtype, torch.float32)
    t = torch.arange(T)
    page_ids = block_table.long()[:, t // P]  # (B, T)
    slot_ids = (t % P).expand(B, T)
    k = k_pages[page_ids, :, slot_ids].to(ct)  # (B, T, G, d)
    v = v_pages[page_ids, :, slot_ids].to(ct)
    qg = q.to(ct).reshape(B, G, H // G, d)  # head h -> group h // (H // G)
    s = torch.einsum("bgrd,btgd->bgrt", qg, k) / math.sqrt(d)
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, None, :]  # (B, 1, 1, T)
    s = torch.where(valid, s, torch.full_like(s, -math.inf))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    out = torch.einsum("bgrt,btgd->bgrd", p, v)
    return out.reshape(B, H, d).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_strict_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    v_cache = torch.empty((B, num_heads, N, dh), dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = (xc @ w_q).view(B, s1 - s0, num_heads, dh).transpose(1, 2).to(ct)
        k_cache[:, :, s0:s1] = (xc @ w_k).view(B, s1 - s0, num_heads, dh).transpose(1, 2).to(ct)
        v_cache[:, :, s0:s1] = (xc @ w_v).view(B, s1 - s0, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k_cache[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        qpos = torch.arange(s0, s1)[:, None]
        kpos = torch.arange(s1)[None, :]
        sc = sc.masked_fill(~(kpos < qpos), -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ v_cache[:, :, :s1]
        outs.append(ctx.transpose(1, 2).reshape(B, s1 - s0, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_cache_appended_late(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)

    def split(t):
        return t.reshape(batch, -1, num_heads, d_head).transpose(1, 2).to(compute)

    cache_k = torch.zeros((batch, num_heads, 0, d_head), dtype=compute)
    cache_v = torch.zeros((batch, num_heads, 0, d_head), dtype=compute)
    pieces = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = split(xc @ w_q)
        seen = cache_k.shape[2]
        scores = q @ cache_k.transpose(-2, -1) / math.sqrt(d_head)
        allowed = torch.arange(seen)[None, :] <= torch.arange(start, stop)[:, None]
        scores = scores.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ cache_v
        pieces.append(ctx.transpose(1, 2).reshape(batch, stop - start, d_model))
        cache_k = torch.cat([cache_k, split(xc @ w_k)], dim=2)
        cache_v = torch.cat([cache_v, split(xc @ w_v)], dim=2)
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty((B, num_heads, N, d_head), dtype=c)
    V = torch.empty((B, num_heads, N, d_head), dtype=c)
    result = []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        xs = x[:, start:stop]
        C = stop - start
        Q = (xs @ w_q).reshape(B, C, num_heads, d_head).permute(0, 2, 1, 3).to(c)
        K[:, :, start:stop] = (xs @ w_k).reshape(B, C, num_heads, d_head).permute(0, 2, 1, 3)
        V[:, :, start:stop] = (xs @ w_v).reshape(B, C, num_heads, d_head).permute(0, 2, 1, 3)
        S = Q @ K[:, :, :stop].transpose(-1, -2) / math.sqrt(d_model)
        ok = torch.ones(C, stop, dtype=torch.bool).tril(stop - C)
        S = S.masked_fill(~ok, float("-inf"))
        O = torch.softmax(S, -1) @ V[:, :, :stop]
        result.append(O.permute(0, 2, 1, 3).reshape(B, C, d_model))
    return torch.cat(result, 1).to(x.dtype) @ w_o


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    hd = dm // num_heads
    f32 = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for i in range(0, n, chunk_size):
        xc = x[:, i:i + chunk_size].to(f32)
        c = xc.shape[1]
        q = (xc @ w_q.to(f32)).view(b, c, num_heads, hd).transpose(1, 2)
        ks.append((xc @ w_k.to(f32)).view(b, c, num_heads, hd).transpose(1, 2))
        vs.append((xc @ w_v.to(f32)).view(b, c, num_heads, hd).transpose(1, 2))
        k_all, v_all = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        o = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=True)
        outs.append(o.transpose(1, 2).reshape(b, c, dm))
    return (torch.cat(outs, dim=1) @ w_o.to(f32)).to(x.dtype)


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    Dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty((B, num_heads, N, Dh), dtype=ct)
    vc = torch.empty((B, num_heads, N, Dh), dtype=ct)
    chunks = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xx = x[:, a:z]
        q = (xx @ w_q).reshape(B, z - a, num_heads, Dh).transpose(1, 2).to(ct)
        kc[:, :, a:z] = (xx @ w_k).reshape(B, z - a, num_heads, Dh).transpose(1, 2)
        vc[:, :, a:z] = (xx @ w_v).reshape(B, z - a, num_heads, Dh).transpose(1, 2)
        s = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(Dh)
        vis = torch.arange(z)[None, :] <= torch.arange(a, z)[:, None]
        s = s.masked_fill(~vis, -math.inf)
        o = torch.softmax(s, dim=-1) @ vc[:, :, :z]  # (B, H, C, Dh)
        chunks.append(o.reshape(B, z - a, D))
    return torch.cat(chunks, dim=1).to(x.dtype) @ w_o


def prefill_full_mask_up_front(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))  # sliced per chunk below
    k_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    v_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        x_c = x[:, start:stop]
        C = stop - start
        q = (x_c @ w_q).reshape(batch, C, num_heads, d_head).transpose(1, 2).to(compute)
        k_cache[:, :, start:stop] = (x_c @ w_k).reshape(batch, C, num_heads, d_head).transpose(1, 2)
        v_cache[:, :, start:stop] = (x_c @ w_v).reshape(batch, C, num_heads, d_head).transpose(1, 2)
        scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        scores = scores.masked_fill(~causal[start:stop, :stop], -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v_cache[:, :, :stop]
        outputs.append(ctx.transpose(1, 2).reshape(batch, C, d_model))
    return torch.cat(outputs, dim=1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_explicit_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    hd = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    keys, values, outs = [], [], []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = xf[:, s:e]
        q = (xc @ w_q.to(ct)).unflatten(-1, (num_heads, hd)).transpose(1, 2)
        keys.append((xc @ w_k.to(ct)).unflatten(-1, (num_heads, hd)).transpose(1, 2))
        values.append((xc @ w_v.to(ct)).unflatten(-1, (num_heads, hd)).transpose(1, 2))
        k, v = torch.cat(keys, 2), torch.cat(values, 2)
        mask = torch.arange(e)[None, :] <= torch.arange(s, e)[:, None]  # (C, e) bottom-right
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outs.append(o.transpose(1, 2).flatten(2))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    d = d_model // num_heads
    xd = x.double()
    wq = w_q.double().reshape(d_model, num_heads, d)
    wk = w_k.double().reshape(d_model, num_heads, d)
    wv = w_v.double().reshape(d_model, num_heads, d)
    ck = xd.new_zeros((b, num_heads, 0, d))
    cv = xd.new_zeros((b, num_heads, 0, d))
    result = xd.new_zeros((b, n, d_model))
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = xd[:, start:stop]
        q = torch.einsum("bcm,mhd->bhcd", xc, wq)
        ck = torch.cat([ck, torch.einsum("bcm,mhd->bhcd", xc, wk)], dim=2)
        cv = torch.cat([cv, torch.einsum("bcm,mhd->bhcd", xc, wv)], dim=2)
        s = torch.einsum("bhcd,bhkd->bhck", q, ck) / math.sqrt(d)
        future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        s[..., future] = -math.inf
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bhck,bhkd->bchd", p, cv).reshape(b, stop - start, d_model)
        result[:, start:stop] = ctx @ w_o.double()
    return result.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "k_only",
          "counts only the keys as bytes read from the cache; the values are read too (a factor 2)",
          intensity_k_only),
    Entry("decode_attention_intensity", "wrong", "query_heads_read",
          "counts the bytes with num_heads instead of num_kv_heads, as if every query head had "
          "its own K/V: the GQA sharing is lost", intensity_query_heads_read),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides the FLOPs by the bytes with //: an int, and 0 for a ratio below 1 such as "
          "0.5", intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "mac_as_one_flop",
          "counts one multiply-add as 1 FLOP instead of 2, halving the intensity",
          intensity_mac_as_one_flop),
    Entry("decode_attention_intensity", "wrong", "precedence",
          "writes flops / 2 * B * G * N * d * bytes without parentheses, so it divides by 2 and "
          "then multiplies by the rest", intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "cache_shared_by_batch",
          "leaves batch_size out of the bytes, as if all sequences of the batch read one shared "
          "cache; each sequence reads its own K and V", intensity_cache_shared_by_batch),
    Entry("decode_attention_intensity", "right", "closed_form_2H_over_G_bytes", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fractions", None, intensity_fractions),
    Entry("paged_attention", "wrong", "reads_whole_last_page",
          "gathers the sequence's pages but never trims to seq_lens[b], so the stale slots at "
          "the end of the last page are attended too", paged_reads_whole_last_page),
    Entry("paged_attention", "wrong", "repeat_not_interleave",
          "expands the KV heads with .repeat (head h reads group h % G) instead of "
          "repeat_interleave (group h // (H // G))", paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "page_slot_swapped",
          "finds key t at page block_table[b, t % page_size], slot t // page_size: the // and % "
          "are swapped (wrong keys, or an IndexError once t // page_size passes the last "
          "slot)", paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "masked_nan_for_empty",
          "masks the keys past seq_lens with -inf and takes torch.softmax, so a sequence of "
          "length 0 (all keys masked) gives NaN instead of zeros", paged_masked_nan_for_empty),
    Entry("paged_attention", "wrong", "no_scale",
          "forgets to scale the scores by 1/sqrt(d)", paged_no_scale),
    Entry("paged_attention", "wrong", "floor_page_count",
          "takes n // page_size pages instead of ceil(n / page_size), so a partly filled last "
          "page is dropped with its keys", paged_floor_page_count),
    Entry("paged_attention", "right", "token_loop_float64", None, paged_token_loop_float64),
    Entry("paged_attention", "right", "vectorised_gather_grouped_einsum", None,
          paged_vectorised_gather),
    Entry("chunked_prefill", "wrong", "strict_mask",
          "the causal mask is key < query, so each token does not see itself (the first token "
          "sees nothing and gives NaN); <= belongs there", prefill_strict_mask),
    Entry("chunked_prefill", "wrong", "cache_appended_late",
          "appends the chunk's keys and values to the cache only after attending, so a chunk "
          "never sees itself (the first chunk sees no key at all and outputs zeros)",
          prefill_cache_appended_late),
    Entry("chunked_prefill", "wrong", "scale_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)", prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "sdpa_is_causal",
          "passes is_causal=True to scaled_dot_product_attention with C queries and more keys: "
          "SDPA's causal mask is top-left aligned, so later chunks lose most of the cache",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "merge_without_transpose",
          "merges the heads with reshape(B, C, d_model) straight from (B, H, C, d_head), without "
          "transposing heads and tokens back first", prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "full_mask_up_front",
          "builds the whole N x N causal mask once and slices it per chunk: the values are "
          "right but the N x N tensor is exactly what chunking must avoid",
          prefill_full_mask_up_front),
    Entry("chunked_prefill", "right", "sdpa_explicit_bottom_right_mask", None,
          prefill_sdpa_explicit_mask),
    Entry("chunked_prefill", "right", "einsum_float64_list_cache", None, prefill_einsum_float64),
]
