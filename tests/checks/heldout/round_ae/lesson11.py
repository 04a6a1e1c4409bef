"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ decode_attention_intensity
# ---------------------------------------------------------------------------- wrong
def intensity_kv_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / cache_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_macs(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    macs = batch_size * num_heads * (seq_len * head_dim + seq_len * head_dim)
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / kv_bytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_cache_read_once(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = 2 * 2 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / kv


# ---------------------------------------------------------------------------- right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: 4 B H N d / (2 B G N d bytes)
    return 2 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = Fraction(0)
    for _ in range(batch_size * num_heads):
        flops += 2 * seq_len * head_dim  # q . k for every cached key
        flops += 2 * seq_len * head_dim  # weighted sum of the values
    read = Fraction(2 * num_kv_heads * seq_len * head_dim * bytes_per_element * batch_size)
    return float(flops / read)


# ============================================================================ paged_attention
# ---------------------------------------------------------------------------- wrong
def paged_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
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
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros(batch, heads, d, dtype=f)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, :(n + page_size - 1) // page_size].long()
        keys = k_pages[used].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(f)
        vals = v_pages[used].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(f)
        keys = keys.repeat(heads // groups, 1, 1)
        vals = vals.repeat(heads // groups, 1, 1)
        scores = torch.einsum("hd,hnd->hn", q[b].to(f), keys) / math.sqrt(d)
        res[b] = torch.einsum("hn,hnd->hd", scores.softmax(-1), vals)
    return res.to(q.dtype)


def paged_contiguous_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, ps = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        n_pages = math.ceil(n / ps)
        first = int(block_table[b, 0])
        pages = torch.arange(first, first + n_pages) % k_pages.shape[0]
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        w = torch.softmax((k @ q[b].to(ct)[:, :, None])[..., 0] / math.sqrt(d), dim=-1)
        out[b] = (w[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def paged_reshape_no_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=compute)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, : -(-n // P)].long()
        k = k_pages[idx].reshape(G, -1, d)[:, :n].to(compute)  # (p, G, P, d) -> (G, p*P, d)
        v = v_pages[idx].reshape(G, -1, d)[:, :n].to(compute)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (k @ q[b].to(compute).unsqueeze(-1)).squeeze(-1) / math.sqrt(d)
        out[b] = (s.softmax(-1).unsqueeze(1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_masked_nan(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    num_pages, G, P, _ = k_pages.shape
    ct = torch.promote_types(q.dtype, torch.float32)
    max_pages = block_table.shape[1]
    T = max_pages * P
    t = torch.arange(T)
    pid = block_table.long()[:, t // P]  # (B, T)
    slot = t % P
    k = k_pages[pid, :, slot].to(ct)  # (B, T, G, d)
    v = v_pages[pid, :, slot].to(ct)
    k = k.repeat_interleave(H // G, dim=2)  # (B, T, H, d)
    v = v.repeat_interleave(H // G, dim=2)
    scores = torch.einsum("bhd,bthd->bht", q.to(ct), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return torch.einsum("bht,bthd->bhd", w, v).to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    outs = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            outs.append(torch.zeros(H, d, dtype=ct))
            continue
        pg = block_table[b, :math.ceil(n / P)].long()
        kk = k_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        vv = v_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        kk = kk.repeat_interleave(H // G, dim=0)
        vv = vv.repeat_interleave(H // G, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), kk)
        outs.append(torch.einsum("hn,hnd->hd", torch.softmax(s, -1), vv))
    return torch.stack(outs).to(q.dtype)


# ---------------------------------------------------------------------------- right
def paged_key_by_key_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t // P])
            ks.append(k_pages[page, :, t % P].double())  # (G, d)
            vs.append(v_pages[page, :, t % P].double())
        K = torch.stack(ks, dim=1)  # (G, n, d)
        V = torch.stack(vs, dim=1)
        for h in range(H):
            g = h // per_group
            s = K[g] @ q[b, h].double() / math.sqrt(d)  # (n,)
            out[b, h] = torch.softmax(s, dim=0) @ V[g]
    return out.to(q.dtype)


def paged_gather_masked(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    span = block_table.shape[1] * P
    t = torch.arange(span)
    lens = seq_lens.long()
    valid = t[None, :] < lens[:, None]  # (B, T)
    page_ids = torch.where(valid, block_table.long()[:, t // P], torch.zeros_like(valid,
                                                                                dtype=torch.long))
    keys = k_pages[page_ids, :, t % P].to(f)  # (B, T, G, d)
    vals = v_pages[page_ids, :, t % P].to(f)
    qg = q.to(f).reshape(B, G, H // G, d)  # head h = g * (H // G) + r
    s = torch.einsum("bgrd,btgd->bgrt", qg, keys) / math.sqrt(d)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    out = torch.einsum("bgrt,btgd->bgrd", w, vals)
    return out.reshape(B, H, d).to(q.dtype)


# ============================================================================ chunked_prefill
# ---------------------------------------------------------------------------- wrong
def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(C, k.shape[2], dtype=torch.bool).tril()
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_cache_after(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(batch, num_heads, 0, d_head, dtype=f)
    v_cache = torch.zeros(batch, num_heads, 0, d_head, dtype=f)
    pieces = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        c = stop - start

        def heads(t):
            return t.view(batch, c, num_heads, d_head).transpose(1, 2).to(f)

        q = heads(xc @ w_q)
        scores = q @ k_cache.transpose(-2, -1) / math.sqrt(d_head)
        ctx = torch.softmax(scores, dim=-1) @ v_cache
        k_cache = torch.cat([k_cache, heads(xc @ w_k)], dim=2)
        v_cache = torch.cat([v_cache, heads(xc @ w_v)], dim=2)
        pieces.append(ctx.transpose(1, 2).reshape(batch, c, d_model))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_drops_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, H, N, dh, dtype=ct)
    vc = torch.empty(B, H, N, dh, dtype=ct)
    out = []
    for ci in range(max(N // chunk_size, 1)):
        a, z = ci * chunk_size, min((ci + 1) * chunk_size, N)
        xc = x[:, a:z]
        q = (xc @ w_q).reshape(B, z - a, H, dh).transpose(1, 2).to(ct)
        kc[:, :, a:z] = (xc @ w_k).reshape(B, z - a, H, dh).transpose(1, 2).to(ct)
        vc[:, :, a:z] = (xc @ w_v).reshape(B, z - a, H, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(z - a, z, dtype=torch.bool).tril(diagonal=a)
        s = s.masked_fill(~keep, -math.inf)
        out.append((torch.softmax(s, -1) @ vc[:, :, :z]).transpose(1, 2).reshape(B, z - a, D))
    return torch.cat(out, dim=1).to(x.dtype) @ w_o


def prefill_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, num_heads, N, dh, dtype=ct)
    V = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for lo in range(0, N, chunk_size):
        hi = min(lo + chunk_size, N)
        xc = x[:, lo:hi]
        L = hi - lo
        q = (xc @ w_q).reshape(B, L, num_heads, dh).transpose(1, 2).to(ct)
        K[:, :, lo:hi] = (xc @ w_k).reshape(B, L, num_heads, dh).transpose(1, 2).to(ct)
        V[:, :, lo:hi] = (xc @ w_v).reshape(B, L, num_heads, dh).transpose(1, 2).to(ct)
        mask = torch.arange(hi)[None, :] <= torch.arange(lo, hi)[:, None]
        att = (q @ K[:, :, :hi].transpose(-2, -1) / math.sqrt(dh)).masked_fill(~mask, -math.inf)
        ctx = torch.softmax(att, -1) @ V[:, :, :hi]  # (B, H, L, dh)
        outs.append(ctx.reshape(B, L, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    dh = dm // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_all = []
    v_all = []
    res = []
    start = 0
    while start < n:
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = (xc @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        k_all.append((xc @ w_k).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct))
        v_all.append((xc @ w_v).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct))
        k, v = torch.cat(k_all, 2), torch.cat(v_all, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dm)
        vis = torch.ones(stop - start, stop, dtype=torch.bool).tril(stop - (stop - start))
        s = s.masked_fill(~vis, -math.inf)
        res.append((s.softmax(-1) @ v).transpose(1, 2).flatten(-2))
        start = stop
    return torch.cat(res, 1).to(x.dtype) @ w_o


def prefill_max_no_keepdim(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = (xc @ w_q).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, a:z] = (xc @ w_k).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, a:z] = (xc @ w_v).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        ok = torch.arange(z)[None, :] <= torch.arange(a, z)[:, None]
        s = s.masked_fill(~ok, -math.inf)
        e = torch.exp(s - s.max(dim=-1).values)
        p = e / e.sum(dim=-1)
        outs.append((p @ vc[:, :, :z]).transpose(1, 2).reshape(B, z - a, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


# ---------------------------------------------------------------------------- right
def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(f)
    cache_k, cache_v, outs = None, None, []
    for xc in torch.split(xf, chunk_size, dim=1):
        C = xc.shape[1]
        q = (xc @ w_q.to(f)).view(B, C, num_heads, dh).transpose(1, 2)
        k_new = (xc @ w_k.to(f)).view(B, C, num_heads, dh).transpose(1, 2)
        v_new = (xc @ w_v.to(f)).view(B, C, num_heads, dh).transpose(1, 2)
        cache_k = k_new if cache_k is None else torch.cat([cache_k, k_new], dim=2)
        cache_v = v_new if cache_v is None else torch.cat([cache_v, v_new], dim=2)
        T = cache_k.shape[2]
        mask = torch.ones(C, T, dtype=torch.bool).tril(T - C)  # bottom-right causal
        ctx = F.scaled_dot_product_attention(q, cache_k, cache_v, attn_mask=mask)
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(outs, dim=1) @ w_o.to(f)).to(x.dtype)


def prefill_per_head_f64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    out = torch.zeros(B, N, D, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq, wk, wv = w_q.double()[:, cols], w_k.double()[:, cols], w_v.double()[:, cols]
        keys, values = [], []
        for start in range(0, N, chunk_size):
            stop = min(start + chunk_size, N)
            xc = xd[:, start:stop]
            keys.append(xc @ wk)
            values.append(xc @ wv)
            K = torch.cat(keys, dim=1)  # (B, stop, dh)
            V = torch.cat(values, dim=1)
            s = torch.einsum("bqd,bkd->bqk", xc @ wq, K) / math.sqrt(dh)
            q_pos = torch.arange(start, stop)[:, None]
            s = s.masked_fill(torch.arange(stop)[None, :] > q_pos, float("-inf"))
            ctx = torch.einsum("bqk,bkd->bqd", torch.softmax(s, dim=-1), V)
            out[:, start:stop] += ctx @ w_o.double()[cols, :]
    return out.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "kv_bytes_per_query_head",
          "counts the K/V bytes with num_heads instead of num_kv_heads, as if every query head "
          "had its own cache, so grouped-query attention gets no credit",
          intensity_kv_per_query_head),
    Entry("decode_attention_intensity", "wrong", "reads_keys_only",
          "counts only the bytes of K read from the cache and forgets V, doubling the "
          "intensity",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, so a fractional intensity such as 0.5 is floored "
          "(to 0) and an int comes back",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "counts_macs",
          "counts one FLOP per multiply-add instead of two, halving the intensity",
          intensity_macs),
    Entry("decode_attention_intensity", "wrong", "division_precedence",
          "writes flops / 2 * batch * kv_heads * ... without parentheses, so it divides by 2 "
          "and then multiplies by the rest of the byte count",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "cache_read_once_per_batch",
          "counts the K/V bytes of one sequence only while the FLOPs cover the whole batch, as "
          "if every sequence shared one cache: the intensity grows with batch_size",
          intensity_cache_read_once),
    Entry("decode_attention_intensity", "right", "closed_form_ratio", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_loop", None, intensity_fraction),

    Entry("paged_attention", "wrong", "reads_whole_last_page",
          "keeps every slot of the sequence's pages instead of cutting at seq_lens[b], so the "
          "stale slots after the last key of a partly filled page are attended to",
          paged_whole_last_page),
    Entry("paged_attention", "wrong", "repeat_instead_of_interleave",
          "expands the KV heads with .repeat (g0, g1, g0, g1, ...) instead of "
          "repeat_interleave, so query head h reads KV head h % G instead of h // (H // G)",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "assumes_contiguous_pages",
          "takes the sequence's pages as block_table[b, 0], block_table[b, 0] + 1, ... as if "
          "they were contiguous in the pool, instead of reading every entry of the block table",
          paged_contiguous_pages),
    Entry("paged_attention", "wrong", "merge_pages_without_transpose",
          "reshapes the gathered pages (p, G, page_size, d) straight to (G, p * page_size, d) "
          "without moving G in front first, mixing KV heads and pages",
          paged_reshape_no_transpose),
    Entry("paged_attention", "wrong", "empty_sequence_nan",
          "masks the keys past seq_lens with -inf but never guards a sequence of length 0: its "
          "softmax over all -inf gives NaN instead of zeros",
          paged_masked_nan),
    Entry("paged_attention", "wrong", "no_scale",
          "forgets the 1/sqrt(d) scale on the scores", paged_no_scale),
    Entry("paged_attention", "right", "key_by_key_float64", None, paged_key_by_key_f64),
    Entry("paged_attention", "right", "gather_and_mask", None, paged_gather_masked),

    Entry("chunked_prefill", "wrong", "mask_top_left",
          "builds each chunk's mask as tril(ones(C, stop)) aligned top-left, so a chunk's "
          "queries see only the first keys of the cache instead of all earlier chunks plus "
          "their own causal part",
          prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "cache_updated_after_attention",
          "appends a chunk's keys and values to the cache only after attending, so each chunk "
          "sees the earlier chunks but not itself (the first chunk sees nothing)",
          prefill_cache_after),
    Entry("chunked_prefill", "wrong", "drops_ragged_tail",
          "loops over N // chunk_size chunks, so when N is not a multiple of chunk_size the "
          "last, shorter chunk is never computed and the output has too few tokens",
          prefill_drops_tail),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2), mixing tokens and heads",
          prefill_merge_no_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "max_sum_without_keepdim",
          "takes the row max and the row sum of its hand-written softmax without keepdim=True, "
          "so they broadcast against the key axis: wrong values when a chunk is square and a "
          "shape error otherwise",
          prefill_max_no_keepdim),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_bool_mask", None, prefill_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "per_head_float64", None, prefill_per_head_f64),
]
