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
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element  # the keys
    return flops / bytes_read


def intensity_reads_every_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim  # q . k for every key
    cache_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return score_flops / cache_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_counts_elements(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_values = 2 * batch_size * num_kv_heads * seq_len * head_dim
    return flops / kv_values


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
    per_query = Fraction(2 * seq_len * head_dim + 2 * seq_len * head_dim)
    flops = per_query * num_heads * batch_size
    per_kv_head = Fraction(seq_len * head_dim * bytes_per_element) * 2
    return float(flops / (per_kv_head * num_kv_heads * batch_size))


# ============================================================ paged_attention: wrong
def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
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
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : -(-n // page_size)].long()
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat(heads // groups, 1, 1)
        v = v.repeat(heads // groups, 1, 1)
        scores = torch.einsum("hd,hnd->hn", q[b].to(compute), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(scores, dim=-1), v)
    return out.to(q.dtype)


def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    res = torch.zeros(B, H, d, dtype=torch.float64)
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
        K = torch.stack(keys, 1).double().repeat_interleave(rep, 0)  # (H, n, d)
        V = torch.stack(vals, 1).double().repeat_interleave(rep, 0)
        w = torch.softmax((K @ q[b].double()[:, :, None])[..., 0] / math.sqrt(d), dim=-1)
        res[b] = (w[:, None, :] @ V)[:, 0]
    return res.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    n_rep = heads // groups
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / page_size)].long()
        k = k_pages[pages].reshape(groups, -1, d)[:, :n].to(compute)  # (G, n, d)
        v = v_pages[pages].reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat_interleave(n_rep, dim=0)
        v = v.repeat_interleave(n_rep, dim=0)
        scores = q[b].to(compute)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    bsz, nh, hd = q.shape
    ng, ps = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    result = []
    for b in range(bsz):
        length = int(seq_lens[b])
        n_pages = length // ps
        idx = block_table[b, :n_pages].long()
        k = k_pages[idx].permute(1, 0, 2, 3).reshape(ng, -1, hd)[:, :length].to(ct)
        v = v_pages[idx].permute(1, 0, 2, 3).reshape(ng, -1, hd)[:, :length].to(ct)
        k = k.repeat_interleave(nh // ng, 0)
        v = v.repeat_interleave(nh // ng, 0)
        if k.shape[1] == 0:
            result.append(torch.zeros(nh, hd, dtype=ct))
            continue
        att = torch.softmax(torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(hd), -1)
        result.append(torch.einsum("hn,hnd->hd", att, v))
    return torch.stack(result).to(q.dtype)


def paged_values_from_k_pages(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / page_size)].long()
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        v = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat_interleave(heads // groups, dim=0)
        v = v.repeat_interleave(heads // groups, dim=0)
        scores = q[b].to(compute)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(H):
            g = h // (H // G)
            qv = q[b, h].double()
            logits, values = [], []
            for t in range(n):
                page, slot = int(block_table[b, t // P]), t % P
                logits.append(float(qv @ k_pages[page, g, slot].double()) / math.sqrt(d))
                values.append(v_pages[page, g, slot].double())
            if n == 0:
                continue
            lg = torch.tensor(logits, dtype=torch.float64)
            w = torch.exp(lg - lg.max())
            w = w / w.sum()
            out[b, h] = (w[:, None] * torch.stack(values)).sum(0)
    return out.to(q.dtype)


def paged_padded_gather(q, k_pages, v_pages, block_table, seq_lens):
    """Gather every sequence to the longest length at once, then mask by length."""
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    lens = seq_lens.long()
    n_max = max(int(lens.max()), 1)
    t = torch.arange(n_max)
    page_col = (t // P).clamp(max=block_table.shape[1] - 1)
    page_ids = block_table.long()[:, page_col]  # (B, n_max)
    slots = (t % P).expand(B, -1)  # (B, n_max)
    keys = k_pages.double()[page_ids, :, slots]  # (B, n_max, G, d)
    vals = v_pages.double()[page_ids, :, slots]
    head_group = torch.arange(H) // (H // G)
    keys = keys[:, :, head_group]  # (B, n_max, H, d)
    vals = vals[:, :, head_group]
    s = torch.einsum("bhd,bnhd->bhn", q.double(), keys) / math.sqrt(d)
    valid = (t[None, :] < lens[:, None])[:, None, :]  # (B, 1, n_max)
    s = s.masked_fill(~valid, -math.inf)
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return torch.einsum("bhn,bnhd->bhd", w, vals).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
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
        K, V = torch.cat(ks, 2), torch.cat(vs, 2)
        sc = q @ K.transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(C, K.shape[2], dtype=torch.bool).tril()
        sc = sc.masked_fill(~mask, -math.inf)
        outs.append((torch.softmax(sc, -1) @ V).transpose(1, 2).reshape(B, C, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop].to(compute)
        c = stop - start
        q = (xc @ w_q.to(compute)).reshape(batch, c, num_heads, d_head).transpose(1, 2)
        k_cache = (xc @ w_k.to(compute)).reshape(batch, c, num_heads, d_head).transpose(1, 2)
        v_cache = (xc @ w_v.to(compute)).reshape(batch, c, num_heads, d_head).transpose(1, 2)
        scores = q @ k_cache.transpose(-2, -1) / math.sqrt(d_head)
        allowed = torch.ones(c, k_cache.shape[2], dtype=torch.bool).tril(k_cache.shape[2] - c)
        scores = scores.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v_cache
        outputs.append(ctx.transpose(1, 2).reshape(batch, c, d_model))
    return (torch.cat(outputs, dim=1) @ w_o.to(compute)).to(x.dtype)


def prefill_floor_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    h = num_heads
    dh = dm // h
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, h, n, dh, dtype=ct)
    v_cache = torch.zeros(b, h, n, dh, dtype=ct)
    pieces = []
    for ci in range(max(n // chunk_size, 1)):
        lo = ci * chunk_size
        hi = min(lo + chunk_size, n)
        xc = x[:, lo:hi].to(ct)
        q = (xc @ w_q.to(ct)).reshape(b, hi - lo, h, dh).transpose(1, 2)
        k_cache[:, :, lo:hi] = (xc @ w_k.to(ct)).reshape(b, hi - lo, h, dh).transpose(1, 2)
        v_cache[:, :, lo:hi] = (xc @ w_v.to(ct)).reshape(b, hi - lo, h, dh).transpose(1, 2)
        s = q @ k_cache[:, :, :hi].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(hi - lo, hi, dtype=torch.bool).tril(lo), -math.inf)
        pieces.append((torch.softmax(s, -1) @ v_cache[:, :, :hi]).transpose(1, 2)
                      .reshape(b, hi - lo, dm))
    return (torch.cat(pieces, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    v_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        x_c = x[:, start:stop].to(compute)
        c = stop - start

        def split(t):
            return t.reshape(batch, c, num_heads, d_head).transpose(1, 2)

        q = split(x_c @ w_q.to(compute))
        k_cache[:, :, start:stop] = split(x_c @ w_k.to(compute))
        v_cache[:, :, start:stop] = split(x_c @ w_v.to(compute))
        scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        allowed = torch.ones(c, stop, dtype=torch.bool).tril(stop - c)
        scores = scores.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v_cache[:, :, :stop]  # (B, H, C, d_head)
        outputs.append(ctx.reshape(batch, c, d_model))
    return (torch.cat(outputs, dim=1) @ w_o.to(compute)).to(x.dtype)


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    q_all, out = None, []
    keys = torch.zeros(B, H, 0, D // H, dtype=ct)
    vals = torch.zeros(B, H, 0, D // H, dtype=ct)
    for lo in range(0, N, chunk_size):
        xc = x[:, lo:lo + chunk_size].to(ct)
        C = xc.shape[1]
        q_all = torch.einsum("bcd,de->bce", xc, w_q.to(ct)).reshape(B, C, H, -1).permute(0, 2, 1, 3)
        k_new = torch.einsum("bcd,de->bce", xc, w_k.to(ct)).reshape(B, C, H, -1).permute(0, 2, 1, 3)
        v_new = torch.einsum("bcd,de->bce", xc, w_v.to(ct)).reshape(B, C, H, -1).permute(0, 2, 1, 3)
        keys = torch.cat([keys, k_new], dim=2)
        vals = torch.cat([vals, v_new], dim=2)
        total = keys.shape[2]
        sc = torch.einsum("bhqe,bhke->bhqk", q_all, keys) / math.sqrt(D)
        vis = torch.ones(C, total, dtype=torch.bool).tril(total - C)
        sc = sc.masked_fill(~vis, -math.inf)
        ctx = torch.einsum("bhqk,bhke->bqhe", torch.softmax(sc, -1), vals)
        out.append(ctx.reshape(B, C, D))
    return (torch.cat(out, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_keys_with_w_q(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    v_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop].to(compute)
        c = stop - start
        q = (xc @ w_q.to(compute)).reshape(batch, c, num_heads, d_head).transpose(1, 2)
        k_cache[:, :, start:stop] = (xc @ w_q.to(compute)).reshape(
            batch, c, num_heads, d_head).transpose(1, 2)
        v_cache[:, :, start:stop] = (xc @ w_v.to(compute)).reshape(
            batch, c, num_heads, d_head).transpose(1, 2)
        scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        scores = scores.masked_fill(~torch.ones(c, stop, dtype=torch.bool).tril(stop - c),
                                    -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v_cache[:, :, :stop]
        outputs.append(ctx.transpose(1, 2).reshape(batch, c, d_model))
    return (torch.cat(outputs, dim=1) @ w_o.to(compute)).to(x.dtype)


# ============================================================ chunked_prefill: right
def prefill_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    k_list, v_list, outs = [], [], []
    for lo in range(0, N, chunk_size):
        xc = xd[:, lo:lo + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        k_list.append((xc @ w_k.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        v_list.append((xc @ w_v.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2))
        K = torch.cat(k_list, dim=2)
        V = torch.cat(v_list, dim=2)
        total = K.shape[2]
        q_pos = torch.arange(lo, lo + C)[:, None]
        k_pos = torch.arange(total)[None, :]
        ctx = F.scaled_dot_product_attention(q, K, V, attn_mask=k_pos <= q_pos)
        outs.append(ctx.transpose(1, 2).flatten(2))
    return (torch.cat(outs, dim=1) @ w_o.double()).to(x.dtype)


def prefill_row_by_row(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Chunk by chunk; inside a chunk, one query row at a time against the cache so far."""
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    xd = x.double()
    k_cache = torch.zeros(B, N, H, dh, dtype=torch.float64)
    v_cache = torch.zeros(B, N, H, dh, dtype=torch.float64)
    ctx = torch.zeros(B, N, H, dh, dtype=torch.float64)
    for lo in range(0, N, chunk_size):
        hi = min(N, lo + chunk_size)
        xc = xd[:, lo:hi]
        k_cache[:, lo:hi] = (xc @ w_k.double()).view(B, hi - lo, H, dh)
        v_cache[:, lo:hi] = (xc @ w_v.double()).view(B, hi - lo, H, dh)
        qc = (xc @ w_q.double()).view(B, hi - lo, H, dh)
        for r in range(hi - lo):
            pos = lo + r
            s = torch.einsum("bhe,bkhe->bhk", qc[:, r], k_cache[:, :pos + 1]) / math.sqrt(dh)
            w = torch.softmax(s, dim=-1)
            ctx[:, pos] = torch.einsum("bhk,bkhe->bhe", w, v_cache[:, :pos + 1])
    return (ctx.reshape(B, N, D) @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "bytes-keys-only",
          "counts only the cached keys in the bytes read (no factor 2 for K and V), so the "
          "intensity comes out twice too high", intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "kv-bytes-per-query-head",
          "reads one K/V head per query head (num_heads) instead of per KV head "
          "(num_kv_heads), so GQA's sharing, the whole point, disappears from the bytes",
          intensity_reads_every_head),
    Entry("decode_attention_intensity", "wrong", "scores-flops-only",
          "counts the FLOPs of the scores q.k but not of the weighted sum of the values, "
          "so the intensity is half the key's", intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "floor-division",
          "divides FLOPs by bytes with // instead of /, so a fractional intensity (e.g. 0.5) "
          "is floored to an int", intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "counts-elements-not-bytes",
          "divides by the number of K/V values read, forgetting to multiply by "
          "bytes_per_element: FLOPs per element, not per byte", intensity_counts_elements),
    Entry("decode_attention_intensity", "wrong", "divisor-not-parenthesised",
          "writes flops / 2 * B * G * N * d * bytes: without parentheses around the "
          "denominator Python divides by 2 and then multiplies by the rest",
          intensity_precedence),
    Entry("decode_attention_intensity", "right", "closed-form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fractions", None, intensity_fraction),

    Entry("paged_attention", "wrong", "attends-whole-pages",
          "takes every slot of the sequence's pages without cutting at seq_lens[b], so the "
          "stale tail of the last page is attended to", paged_whole_pages),
    Entry("paged_attention", "wrong", "repeat-instead-of-interleave",
          "expands the G KV heads with .repeat (g0, g1, g0, g1, ...) instead of "
          "repeat_interleave, so query head h reads KV head h % G, not h // (H // G)",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "page-and-slot-swapped",
          "finds key t in page block_table[b, t % page_size] at slot t // page_size, the "
          "division and the remainder swapped (reads the wrong keys, or indexes out of range "
          "and raises)", paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "pages-reshaped-without-transpose",
          "reshapes the gathered (pages, G, page_size, d) block straight to (G, -1, d) without "
          "moving the G axis first, which mixes KV heads and pages into one key sequence",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "floor-page-count",
          "gathers seq_len // page_size pages instead of ceil(seq_len / page_size), so the "
          "keys in a partly filled last page are dropped", paged_floor_page_count),
    Entry("paged_attention", "wrong", "values-from-k-pages",
          "gathers the values from k_pages (the key line copied) instead of v_pages",
          paged_values_from_k_pages),
    Entry("paged_attention", "right", "per-token-loop", None, paged_token_loop),
    Entry("paged_attention", "right", "padded-gather-masked", None, paged_padded_gather),

    Entry("chunked_prefill", "wrong", "chunk-mask-top-left",
          "masks each chunk with tril() over (C, cached keys), i.e. aligned top-left, so "
          "query i of a later chunk sees keys 0..i instead of 0..start+i",
          prefill_mask_top_left),
    Entry("chunked_prefill", "wrong", "cache-overwritten",
          "replaces the K/V cache with the current chunk's keys and values instead of "
          "appending, so each chunk attends only to itself and forgets the earlier chunks",
          prefill_cache_overwritten),
    Entry("chunked_prefill", "wrong", "floor-chunk-count",
          "loops over n // chunk_size chunks, so the ragged last chunk is never computed "
          "and the output has too few tokens", prefill_floor_chunks),
    Entry("chunked_prefill", "wrong", "merge-without-transpose",
          "merges the heads of each chunk with reshape(B, C, d_model) straight from "
          "(B, H, C, d_head), without transpose(1, 2), which scrambles heads and tokens",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale-by-d-model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "keys-from-w-q",
          "projects the cached keys with w_q (copied from the query line) instead of w_k",
          prefill_keys_with_w_q),
    Entry("chunked_prefill", "right", "sdpa-per-chunk-float64", None, prefill_sdpa_chunks),
    Entry("chunked_prefill", "right", "row-by-row-in-chunks", None, prefill_row_by_row),
]
