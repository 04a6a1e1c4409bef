"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ decode_attention_intensity
def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element  # the keys
    return flops / bytes_read


def dai_bytes_without_batch(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / cache_bytes


def dai_query_heads_read(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def dai_mac_as_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    macs = batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    macs += batch_size * num_heads * seq_len * head_dim  # weights times values
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(macs / nbytes)


def dai_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    # 4 B H N d FLOPs over 2 B G N d bytes: B, N and d cancel
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def dai_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_query_head = Fraction(2 * seq_len * head_dim) * 2  # scores + weighted sum
    flops = per_query_head * num_heads * batch_size
    per_kv_head = Fraction(seq_len * head_dim * bytes_per_element) * 2  # K and V
    nbytes = per_kv_head * num_kv_heads * batch_size
    return float(flops / nbytes)


# ============================================================================ paged_attention
def paged_page_size_wrong_axis(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    P = k_pages.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        pages = block_table[b, t // P].long()
        slots = t % P
        k = k_pages[pages, :, slots].to(ct)  # (n, G, d)
        v = v_pages[pages, :, slots].to(ct)
        k = k.transpose(0, 1).repeat_interleave(H // G, dim=0)  # (H, n, d)
        v = v.transpose(0, 1).repeat_interleave(H // G, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", s.softmax(-1), v)
    return out.to(q.dtype)


def paged_head_modulo(q, k_pages, v_pages, block_table, seq_lens):
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
        kv_head = torch.arange(H) % G
        k, v = k[kv_head], v[kv_head]  # (H, n, d)
        s = (k @ q[b].to(ct)[:, :, None])[..., 0] / math.sqrt(d)  # (H, n)
        out[b] = (torch.softmax(s, -1)[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def paged_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    result = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        n_pages = n // P
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(rep, 0)
        v = v.repeat_interleave(rep, 0)
        s = (q[b].to(ct)[:, None] @ k.transpose(1, 2)) / math.sqrt(d)
        result[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return result.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :(n + P - 1) // P].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)  # (p, G, P, d) -> (G, p*P, d)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(rep, 0)
        v = v.repeat_interleave(rep, 0)
        s = q[b].to(ct)[:, None] @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_mask_le(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    k = k_pages[block_table.long()]  # (B, max_pages, G, P, d)
    v = v_pages[block_table.long()]
    k = k.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    k = k.repeat_interleave(H // G, dim=1)  # (B, H, T, d)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), k) / math.sqrt(d)
    pos = torch.arange(max_pages * P)
    valid = pos[None, :] <= seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return torch.einsum("bht,bhtd->bhd", w, v).to(q.dtype)


def paged_values_from_k_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        keys = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        vals = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        keys = keys.repeat_interleave(H // G, 0)
        vals = vals.repeat_interleave(H // G, 0)
        s = (q[b].to(ct)[:, None] @ keys.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ vals)[:, 0]
    return out.to(q.dtype)


def paged_token_by_token(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    group = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t // P])
            ks.append(k_pages[page, :, t % P].double())  # (G, d)
            vs.append(v_pages[page, :, t % P].double())
        k = torch.stack(ks, dim=1)  # (G, n, d)
        v = torch.stack(vs, dim=1)
        for h in range(H):
            g = h // group
            s = k[g] @ q[b, h].double() / math.sqrt(d)  # (n,)
            w = torch.exp(s - torch.logsumexp(s, dim=0))
            out[b, h] = w @ v[g]
    return out.to(q.dtype)


def paged_gather_masked(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    ct = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    k = k_pages[table].transpose(1, 2).reshape(B, G, T, d).to(ct)  # (B, G, T, d)
    v = v_pages[table].transpose(1, 2).reshape(B, G, T, d).to(ct)
    qg = q.to(ct).view(B, G, H // G, d)  # head h -> group h // (H // G)
    s = qg @ k.transpose(-1, -2) / math.sqrt(d)  # (B, G, H/G, T)
    live = torch.arange(T)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = torch.where(live[:, None, None, :], s, torch.tensor(-math.inf, dtype=ct))
    w = torch.softmax(s, dim=-1)
    w = torch.where(live[:, None, None, :], w, torch.zeros((), dtype=ct))
    w = torch.nan_to_num(w, nan=0.0)
    return (w @ v).reshape(B, H, d).to(q.dtype)


# ============================================================================ chunked_prefill
def prefill_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        q = (xc @ w_q).view(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        k_cache[:, :, s:e] = (xc @ w_k).view(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        v_cache[:, :, s:e] = (xc @ w_v).view(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k_cache[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.tril(torch.ones(e - s, e, dtype=torch.bool))
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, -1) @ v_cache[:, :, :e]
        outs.append(ctx.transpose(1, 2).reshape(B, e - s, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    h = num_heads
    dh = dm // h
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        c = stop - start
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(b, c, h, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).reshape(b, c, h, dh).transpose(1, 2).to(ct)  # this chunk's keys
        v = (xc @ w_v).reshape(b, c, h, dh).transpose(1, 2).to(ct)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(c, c, dtype=torch.bool).tril(), -math.inf)
        pieces.append((s.softmax(-1) @ v).transpose(1, 2).reshape(b, c, dm))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_no_min_stop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = start + chunk_size
        xc = x[:, start:stop]
        C = xc.shape[1]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(chunk_size, stop, dtype=torch.bool).tril(stop - chunk_size)
        s = s.masked_fill(~mask, -math.inf)
        outs.append((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc, vc = [], []
    out = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = (xc @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        kc.append((xc @ w_k).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct))
        vc.append((xc @ w_v).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct))
        k, v = torch.cat(kc, 2), torch.cat(vc, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(D)
        qpos = torch.arange(a, z)[:, None]
        kpos = torch.arange(z)[None, :]
        s = s.masked_fill(kpos > qpos, -math.inf)
        out.append((s.softmax(-1) @ v).transpose(1, 2).flatten(2))
    return torch.cat(out, 1).to(x.dtype) @ w_o


def prefill_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, H, N, dh, dtype=ct)
    v_cache = torch.empty(B, H, N, dh, dtype=ct)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(N, s + chunk_size)
        c = e - s
        xc = x[:, s:e]
        q = (xc @ w_q).reshape(B, H, c, dh).to(ct)
        k_cache[:, :, s:e] = (xc @ w_k).reshape(B, H, c, dh).to(ct)
        v_cache[:, :, s:e] = (xc @ w_v).reshape(B, H, c, dh).to(ct)
        sc = q @ k_cache[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(c, e, dtype=torch.bool).tril(e - c)
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, -1) @ v_cache[:, :, :e]
        outs.append(ctx.transpose(1, 2).reshape(B, c, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_forgets_w_o(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    result = torch.empty(B, N, D, dtype=ct)
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        q = (xc @ w_q).view(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        k_cache[:, :, s:e] = (xc @ w_k).view(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        v_cache[:, :, s:e] = (xc @ w_v).view(B, e - s, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k_cache[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(e - s, e, dtype=torch.bool).tril(s), -math.inf)
        ctx = torch.softmax(sc, -1) @ v_cache[:, :, :e]
        result[:, s:e] = ctx.transpose(1, 2).reshape(B, e - s, D)
    return result.to(x.dtype)


def prefill_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    x64 = x.double()
    wq, wk, wv = w_q.double(), w_k.double(), w_v.double()
    keys, vals, outs = None, None, []
    for start in range(0, N, chunk_size):
        xc = x64[:, start:start + chunk_size]
        c = xc.shape[1]
        q = (xc @ wq).view(B, c, num_heads, dh).permute(0, 2, 1, 3)
        k_new = (xc @ wk).view(B, c, num_heads, dh).permute(0, 2, 1, 3)
        v_new = (xc @ wv).view(B, c, num_heads, dh).permute(0, 2, 1, 3)
        keys = k_new if keys is None else torch.cat([keys, k_new], dim=2)
        vals = v_new if vals is None else torch.cat([vals, v_new], dim=2)
        total = keys.shape[2]
        # query r of this chunk sits at position start + r; key j is visible when j <= it
        visible = torch.arange(total)[None, :] <= (start + torch.arange(c))[:, None]
        ctx = F.scaled_dot_product_attention(q, keys, vals, attn_mask=visible)
        outs.append(ctx.permute(0, 2, 1, 3).reshape(B, c, D))
    return (torch.cat(outs, dim=1) @ w_o.double()).to(x.dtype)


def prefill_einsum_upfront_kv(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    h = num_heads
    dh = dm // h
    xd = x.double()
    k_all = torch.einsum("bnm,mo->bno", xd, w_k.double()).reshape(b, n, h, dh)
    v_all = torch.einsum("bnm,mo->bno", xd, w_v.double()).reshape(b, n, h, dh)
    out = torch.zeros((b, n, h, dh), dtype=torch.float64)
    chunk = 0
    while chunk * chunk_size < n:
        lo, hi = chunk * chunk_size, min((chunk + 1) * chunk_size, n)
        q = torch.einsum("bnm,mo->bno", xd[:, lo:hi], w_q.double()).reshape(b, hi - lo, h, dh)
        s = torch.einsum("bqhd,bkhd->bhqk", q, k_all[:, :hi]) / dh ** 0.5
        qi = torch.arange(lo, hi).view(-1, 1)
        kj = torch.arange(hi).view(1, -1)
        s = s.masked_fill(kj > qi, float("-inf"))
        p = torch.softmax(s, dim=-1)
        out[:, lo:hi] = torch.einsum("bhqk,bkhd->bqhd", p, v_all[:, :hi])
        chunk += 1
    return (out.reshape(b, n, dm) @ w_o.double()).to(x.dtype)


D_ = "decode_attention_intensity"
PA = "paged_attention"
CP = "chunked_prefill"
ENTRIES = [
    Entry(D_, "wrong", "reads_keys_only",
          "counts only the keys in the bytes read from the cache, forgetting the values "
          "(missing factor 2 in the bytes)", dai_keys_only),
    Entry(D_, "wrong", "bytes_without_batch",
          "multiplies the FLOPs by batch_size but not the bytes, as if one sequence's cache "
          "served the whole batch", dai_bytes_without_batch),
    Entry(D_, "wrong", "cache_per_query_head",
          "counts K/V bytes for num_heads heads instead of num_kv_heads, ignoring that "
          "grouped query heads share one cached K/V head", dai_query_heads_read),
    Entry(D_, "wrong", "floor_division",
          "divides FLOPs by bytes with //, which floors the ratio to an integer (0.5 "
          "becomes 0)", dai_floor_division),
    Entry(D_, "wrong", "multiply_add_as_one_flop",
          "counts one FLOP per multiply-add instead of two, so the intensity is half",
          dai_mac_as_one_flop),
    Entry(D_, "wrong", "division_precedence",
          "writes flops / 2 * batch * kv_heads * ... : the division binds only to 2, so the "
          "bytes multiply the result instead of dividing it", dai_precedence),
    Entry(D_, "right", "closed_form", None, dai_closed_form),
    Entry(D_, "right", "exact_fractions", None, dai_fraction),
    Entry(PA, "wrong", "page_size_from_group_axis",
          "reads page_size from k_pages.shape[1] (the number of KV heads G) instead of "
          "shape[2], so tokens are looked up in the wrong pages and slots (or past the end of "
          "the block table: an IndexError)",
          paged_page_size_wrong_axis),
    Entry(PA, "wrong", "head_modulo_groups",
          "maps query head h to KV head h % G instead of h // (H // G), interleaving the "
          "groups", paged_head_modulo),
    Entry(PA, "wrong", "floor_page_count",
          "takes n // page_size pages instead of ceil(n / page_size), so the keys of a "
          "partly filled last page are dropped (a sequence shorter than a page gets zeros)",
          paged_floor_pages),
    Entry(PA, "wrong", "pages_reshaped_without_transpose",
          "reshapes the gathered (pages, G, page_size, d) block straight to (G, pages * "
          "page_size, d) without moving G first, mixing pages and KV heads",
          paged_reshape_without_transpose),
    Entry(PA, "wrong", "length_mask_le",
          "keeps key positions t <= seq_len instead of t < seq_len, so one stale slot past "
          "the end is attended", paged_mask_le),
    Entry(PA, "wrong", "values_from_k_pages",
          "gathers the values from k_pages instead of v_pages", paged_values_from_k_pages),
    Entry(PA, "right", "token_by_token_logsumexp", None, paged_token_by_token),
    Entry(PA, "right", "vectorised_gather_grouped", None, paged_gather_masked),
    Entry(CP, "wrong", "top_left_chunk_mask",
          "masks each chunk with tril(ones(C, stop)) aligned top-left, so a later chunk sees "
          "only the first keys of the cache instead of everything up to its own position",
          prefill_top_left_mask),
    Entry(CP, "wrong", "attends_own_chunk_only",
          "never keeps the cache: each chunk attends only to its own keys and values, not "
          "to those of earlier chunks", prefill_no_cache),
    Entry(CP, "wrong", "last_chunk_not_clipped",
          "sets stop = start + chunk_size without min(..., N) and builds the mask from it, "
          "so a shorter last chunk gets a mask of the wrong shape (a broadcasting error)",
          prefill_no_min_stop),
    Entry(CP, "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry(CP, "wrong", "heads_split_without_transpose",
          "splits heads with reshape(B, H, C, d_head) directly from (B, C, d_model) instead "
          "of reshape(B, C, H, d_head).transpose(1, 2), mixing positions and heads",
          prefill_split_without_transpose),
    Entry(CP, "wrong", "forgets_output_projection",
          "returns the merged heads without the output projection @ w_o",
          prefill_forgets_w_o),
    Entry(CP, "right", "sdpa_per_chunk_float64", None, prefill_sdpa_chunks),
    Entry(CP, "right", "einsum_kv_projected_upfront", None, prefill_einsum_upfront_kv),
]
