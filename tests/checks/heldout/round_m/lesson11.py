"""Round m catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def intensity_macs(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    flops = batch_size * num_heads * seq_len * head_dim * 2  # scores + weighted sum
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
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


def intensity_all_queries(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # every query of the sequence against every cached key
    flops = 4 * batch_size * num_heads * seq_len * seq_len * head_dim
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # N, B and d cancel: 4 B H N d / (2 B G N d bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_per_head_loop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 0
    for _b in range(batch_size):
        for _h in range(num_heads):
            flops += 2 * seq_len * head_dim  # q . k_t for every cached t
            flops += 2 * seq_len * head_dim  # sum_t p_t v_t
    bytes_read = 0
    for _b in range(batch_size):
        for _g in range(num_kv_heads):
            bytes_read += seq_len * head_dim * bytes_per_element * 2  # K and V
    return float(flops) / float(bytes_read)


# ======================================================================= paged_attention: wrong
def paged_zero_length_nan(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    ct = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    k = k_pages[table].to(ct)  # (B, M, G, P, d)
    v = v_pages[table].to(ct)
    M = table.shape[1]
    k = k.permute(0, 2, 1, 3, 4).reshape(B, G, M * P, d).repeat_interleave(H // G, dim=1)
    v = v.permute(0, 2, 1, 3, 4).reshape(B, G, M * P, d).repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), k) / math.sqrt(d)
    valid = torch.arange(M * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bht,bhtd->bhd", p, v).to(q.dtype)


def paged_repeat_tiles_groups(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=ct)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : -(-n // page_size)].long()
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(ct)
        k, v = k.repeat(rep, 1, 1), v.repeat(rep, 1, 1)  # (H, n, d)
        w = torch.softmax(k @ q[b].to(ct).unsqueeze(-1) / math.sqrt(d), dim=1)  # (H, n, 1)
        out[b] = (w * v).sum(dim=1)
    return out.to(q.dtype)


def paged_slot_page_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys, vals = [], []
        for t in range(n):
            page = int(block_table[b, t % P])
            slot = t // P
            keys.append(k_pages[page, :, slot])  # (G, d)
            vals.append(v_pages[page, :, slot])
        K = torch.stack(keys, dim=1).to(ct)  # (G, n, d)
        V = torch.stack(vals, dim=1).to(ct)
        for h in range(H):
            g = h // (H // G)
            s = K[g] @ q[b, h].to(ct) / math.sqrt(d)
            out[b, h] = torch.softmax(s, dim=0) @ V[g]
    return out.to(q.dtype)


def paged_contiguous_pages(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        n_pages = math.ceil(n / page_size)
        first = int(block_table[b, 0])
        pages = torch.arange(first, first + n_pages) % k_pages.shape[0]  # the sequence's pages
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        scores = (q[b].to(compute)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_reshape_mixes_groups(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / page_size)].long()
        k = k_pages[pages].reshape(groups, -1, d)[:, :n].to(compute)  # (G, n, d)
        v = v_pages[pages].reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat_interleave(heads // groups, dim=0)
        v = v.repeat_interleave(heads // groups, dim=0)
        att = torch.softmax(torch.einsum("hd,hnd->hn", q[b].to(compute), k) / math.sqrt(d), -1)
        out[b] = torch.einsum("hn,hnd->hd", att, v)
    return out.to(q.dtype)


def paged_mask_off_by_one(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b].long()  # every listed page
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = torch.einsum("hd,htd->ht", q[b].to(ct), k) / math.sqrt(d)
        keep = torch.arange(s.shape[-1]) <= n
        s = s.masked_fill(~keep, -math.inf)
        out[b] = torch.einsum("ht,htd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


# ======================================================================= paged_attention: right
def paged_token_gather_float64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    group_of = [h // (H // G) for h in range(H)]
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx_page = [int(block_table[b, t // P]) for t in range(n)]
        idx_slot = [t % P for t in range(n)]
        K = k_pages[idx_page, :, idx_slot].double()  # (n, G, d)
        V = v_pages[idx_page, :, idx_slot].double()
        for h in range(H):
            g = group_of[h]
            s = K[:, g] @ q[b, h].double() / math.sqrt(d)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ V[:, g]
    return out.to(q.dtype)


def paged_vectorised_guarded(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    M = block_table.shape[1]
    f = torch.float64
    t = torch.arange(M * P)
    pages = block_table.long()[:, t // P]  # (B, T): page of token t
    slots = (t % P).expand(B, -1)  # (B, T)
    K = k_pages[pages, :, slots].to(f)  # (B, T, G, d)
    V = v_pages[pages, :, slots].to(f)
    qg = q.to(f).reshape(B, G, H // G, d)  # head h = g * (H // G) + r
    s = torch.einsum("bgrd,btgd->bgrt", qg, K) / math.sqrt(d)
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, None, :]  # (B, 1, 1, T)
    s = torch.where(valid, s, torch.tensor(-math.inf, dtype=f))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot > 0, tot, torch.ones_like(tot))
    out = torch.einsum("bgrt,btgd->bgrd", p, V).reshape(B, H, d)
    return out.to(q.dtype)


# ======================================================================= chunked_prefill: wrong
def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    dh = dm // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros((b, num_heads, 0, dh), dtype=ct)
    v_cache = torch.zeros((b, num_heads, 0, dh), dtype=ct)
    outs = []
    for s in range(0, n, chunk_size):
        xc = x[:, s:s + chunk_size].to(ct)
        c = xc.shape[1]
        q = (xc @ w_q.to(ct)).view(b, c, num_heads, dh).transpose(1, 2)
        k = (xc @ w_k.to(ct)).view(b, c, num_heads, dh).transpose(1, 2)
        v = (xc @ w_v.to(ct)).view(b, c, num_heads, dh).transpose(1, 2)
        k_cache = torch.cat([k_cache, k], dim=2)
        v_cache = torch.cat([v_cache, v], dim=2)
        ctx = F.scaled_dot_product_attention(q, k_cache, v_cache, is_causal=True)
        outs.append(ctx.transpose(1, 2).reshape(b, c, dm))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        c = xc.shape[1]

        def heads(t):
            return t.reshape(batch, c, num_heads, d_head).transpose(1, 2).to(compute)

        q, k, v = heads(xc @ w_q), heads(xc @ w_k), heads(xc @ w_v)
        s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        s = s.masked_fill(torch.ones(c, c, dtype=torch.bool).triu(1), -math.inf)
        ctx = torch.softmax(s, dim=-1) @ v
        pieces.append(ctx.transpose(1, 2).reshape(batch, c, d_model))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_cache_after_attention(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs = [], []
    out = []
    for lo in range(0, N, chunk_size):
        hi = min(lo + chunk_size, N)
        xc = x[:, lo:hi]
        C = hi - lo
        q = (xc @ w_q).reshape(B, C, H, dh).transpose(1, 2).to(ct)
        if ks:
            k_all = torch.cat(ks, dim=2)
            v_all = torch.cat(vs, dim=2)
        else:
            k_all = torch.zeros((B, H, 0, dh), dtype=ct)
            v_all = torch.zeros((B, H, 0, dh), dtype=ct)
        s = q @ k_all.transpose(-2, -1) / math.sqrt(dh)
        ctx = torch.softmax(s, dim=-1) @ v_all
        out.append(ctx.transpose(1, 2).reshape(B, C, D))
        ks.append((xc @ w_k).reshape(B, C, H, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, H, dh).transpose(1, 2).to(ct))
    return torch.cat(out, dim=1).to(x.dtype) @ w_o


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    h = num_heads
    dh = dm // h
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty((b, h, n, dh), dtype=ct)
    vc = torch.empty((b, h, n, dh), dtype=ct)
    outs = []
    for i in range(max(1, n // chunk_size)):
        lo, hi = i * chunk_size, min((i + 1) * chunk_size, n)
        xc = x[:, lo:hi]
        c = hi - lo
        q = (xc @ w_q).view(b, c, h, dh).transpose(1, 2).to(ct)
        kc[:, :, lo:hi] = (xc @ w_k).view(b, c, h, dh).transpose(1, 2).to(ct)
        vc[:, :, lo:hi] = (xc @ w_v).view(b, c, h, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :hi].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(c, hi, dtype=torch.bool).tril(hi - c)
        s = s.masked_fill(~allowed, -math.inf)
        outs.append((torch.softmax(s, -1) @ vc[:, :, :hi]).transpose(1, 2).reshape(b, c, dm))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    v_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        c = stop - start
        q = (xc @ w_q).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(compute)
        k_cache[:, :, start:stop] = (xc @ w_k).reshape(batch, c, num_heads, d_head).transpose(
            1, 2).to(compute)
        v_cache[:, :, start:stop] = (xc @ w_v).reshape(batch, c, num_heads, d_head).transpose(
            1, 2).to(compute)
        scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        q_pos = torch.arange(start, stop)[:, None]
        scores = scores.masked_fill(torch.arange(stop)[None, :] > q_pos, -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v_cache[:, :, :stop]  # (B, H, C, d_head)
        outputs.append(ctx.reshape(batch, c, d_model))
    return torch.cat(outputs, dim=1).to(x.dtype) @ w_o


def prefill_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    Q = None
    kc = torch.empty((B, H, N, dh), dtype=ct)
    vc = torch.empty((B, H, N, dh), dtype=ct)
    res = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        Q = torch.einsum("bcm,mhd->bhcd", xc.to(ct), w_q.to(ct).view(D, H, dh))
        kc[:, :, a:z] = torch.einsum("bcm,mhd->bhcd", xc.to(ct), w_k.to(ct).view(D, H, dh))
        vc[:, :, a:z] = torch.einsum("bcm,mhd->bhcd", xc.to(ct), w_v.to(ct).view(D, H, dh))
        s = torch.einsum("bhcd,bhkd->bhck", Q, kc[:, :, :z]) / math.sqrt(D)
        s = s.masked_fill(torch.arange(z)[None, :] > torch.arange(a, z)[:, None], -math.inf)
        ctx = torch.einsum("bhck,bhkd->bchd", torch.softmax(s, -1), vc[:, :, :z])
        res.append(ctx.reshape(B, z - a, D))
    return (torch.cat(res, dim=1) @ w_o.to(ct)).to(x.dtype)


# ======================================================================= chunked_prefill: right
def prefill_sdpa_bottom_right_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    dh = dm // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((b, num_heads, n, dh), dtype=ct)
    v_cache = torch.empty((b, num_heads, n, dh), dtype=ct)
    outs = []
    for s in range(0, n, chunk_size):
        e = min(s + chunk_size, n)
        xc = x[:, s:e].to(ct)
        c = e - s
        q = (xc @ w_q.to(ct)).view(b, c, num_heads, dh).transpose(1, 2)
        k_cache[:, :, s:e] = (xc @ w_k.to(ct)).view(b, c, num_heads, dh).transpose(1, 2)
        v_cache[:, :, s:e] = (xc @ w_v.to(ct)).view(b, c, num_heads, dh).transpose(1, 2)
        allowed = torch.arange(e)[None, :] <= torch.arange(s, e)[:, None]  # (C, e)
        ctx = F.scaled_dot_product_attention(q, k_cache[:, :, :e], v_cache[:, :, :e],
                                             attn_mask=allowed)
        outs.append(ctx.transpose(1, 2).reshape(b, c, dm))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_merge_states_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Each chunk attends to every cached chunk separately; the partial results are merged
    with their log-sum-exps (flash-decoding style), all in float64."""
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    f = torch.float64
    cache = []  # list of (k, v, first position)
    out = torch.empty((B, N, D), dtype=f)
    for lo in range(0, N, chunk_size):
        hi = min(lo + chunk_size, N)
        xc = x[:, lo:hi].to(f)
        C = hi - lo
        q = (xc @ w_q.to(f)).reshape(B, C, H, dh).permute(0, 2, 1, 3)
        k = (xc @ w_k.to(f)).reshape(B, C, H, dh).permute(0, 2, 1, 3)
        v = (xc @ w_v.to(f)).reshape(B, C, H, dh).permute(0, 2, 1, 3)
        cache.append((k, v, lo))
        acc = torch.zeros((B, H, C, dh), dtype=f)
        lse = torch.full((B, H, C), -math.inf, dtype=f)
        for k_j, v_j, first in cache:
            s = q @ k_j.transpose(-2, -1) / math.sqrt(dh)
            key_pos = torch.arange(first, first + k_j.shape[2])
            s = s.masked_fill(key_pos[None, :] > torch.arange(lo, hi)[:, None], -math.inf)
            l_j = torch.logsumexp(s, dim=-1)
            o_j = torch.exp(s - l_j[..., None]).nan_to_num(0.0) @ v_j
            new = torch.logaddexp(lse, l_j)
            acc = torch.exp(lse - new)[..., None] * acc + torch.exp(l_j - new)[..., None] * o_j
            lse = new
        out[:, lo:hi] = acc.permute(0, 2, 1, 3).reshape(B, C, D)
    return (out @ w_o.to(f)).to(x.dtype)


ENTRIES = [
    # decode_attention_intensity
    Entry("decode_attention_intensity", "wrong", "multiply_add_as_one_flop",
          "It counts each multiply-add of the two products as one FLOP (2 B H N d in all instead "
          "of 4 B H N d), halving the intensity.",
          intensity_macs),
    Entry("decode_attention_intensity", "wrong", "keys_only_bytes",
          "The bytes read count only the cached keys, not the values, so the intensity comes out "
          "twice too large.",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "kv_bytes_per_query_head",
          "It counts K and V bytes for every query head (num_heads) instead of every K/V head "
          "(num_kv_heads), missing that grouped heads share one read of the cache.",
          intensity_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "It divides with //, which floors the ratio and returns an int instead of the float "
          "intensity.",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "denominator_not_parenthesised",
          "flops / 2 * B * G * N * d * bytes divides by 2 only and then multiplies by the rest, "
          "because the denominator is not in parentheses.",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "counts_all_queries",
          "It counts seq_len queries per sequence and head (prefill) instead of the one new "
          "query of a decode step, so the FLOPs and the intensity are seq_len times too large.",
          intensity_all_queries),
    Entry("decode_attention_intensity", "right", "closed_form_ratio", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "per_head_loop", None, intensity_per_head_loop),
    # paged_attention
    Entry("paged_attention", "wrong", "zero_length_nan",
          "The batched masked softmax has no guard for a sequence of length 0: its whole score "
          "row is -inf and softmax returns NaN instead of zeros.",
          paged_zero_length_nan),
    Entry("paged_attention", "wrong", "repeat_tiles_groups",
          "It expands the K/V heads with Tensor.repeat, which tiles them (query head h reads group "
          "h % G) instead of repeat_interleave (group h // (H // G)).",
          paged_repeat_tiles_groups),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "It takes the page from block_table[b, t % page_size] and the slot t // page_size, "
          "swapping the two, so it reads the wrong cache slots (and raises IndexError once "
          "t % page_size runs past the block table's max_pages columns).",
          paged_slot_page_swapped),
    Entry("paged_attention", "wrong", "assumes_contiguous_pages",
          "It assumes a sequence's pages are consecutive from block_table[b, 0] and reads "
          "pages first, first + 1, ... instead of the pages listed in the block table.",
          paged_contiguous_pages),
    Entry("paged_attention", "wrong", "reshape_mixes_groups",
          "It reshapes the gathered (pages, G, page_size, d) block straight to (G, -1, d) without "
          "moving the group axis first, so with more than one page and group the keys of "
          "different KV heads and pages are interleaved.",
          paged_reshape_mixes_groups),
    Entry("paged_attention", "wrong", "mask_includes_one_stale_key",
          "The length mask is arange(T) <= n instead of < n, so every sequence also attends to "
          "the stale slot just past its last key.",
          paged_mask_off_by_one),
    Entry("paged_attention", "right", "token_gather_float64", None, paged_token_gather_float64),
    Entry("paged_attention", "right", "vectorised_grouped_einsum", None, paged_vectorised_guarded),
    # chunked_prefill
    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "scaled_dot_product_attention's is_causal aligns the mask top-left, so with C queries "
          "against the longer cache each chunk after the first sees only the first keys of the "
          "cache instead of all earlier chunks plus its own past.",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "no_cache_own_chunk_only",
          "Each chunk attends only to its own keys and values: the earlier chunks are never kept "
          "in a cache, so tokens after the first chunk do not see the earlier tokens.",
          prefill_own_chunk_only),
    Entry("chunked_prefill", "wrong", "cache_appended_after_attention",
          "The chunk's keys and values are added to the cache only after its attention is "
          "computed, so a chunk never sees its own tokens (not even the query's own key) and the "
          "first chunk, with an empty cache, gets all-zero outputs.",
          prefill_cache_after_attention),
    Entry("chunked_prefill", "wrong", "drops_ragged_chunk",
          "It loops over n // chunk_size chunks, so when N is not a multiple of chunk_size the "
          "last, shorter chunk is never computed and the output has too few tokens.",
          prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "merge_without_transpose",
          "It merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head) "
          "without transposing back to (B, C, H, d_head), which scrambles tokens and heads.",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "The scores are scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head) for multi-head "
          "attention.",
          prefill_scale_by_d_model),
    Entry("chunked_prefill", "right", "sdpa_bottom_right_mask", None,
          prefill_sdpa_bottom_right_mask),
    Entry("chunked_prefill", "right", "merge_chunk_states_float64", None,
          prefill_merge_states_float64),
]
