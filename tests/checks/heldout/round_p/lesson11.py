"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry

NEG = float("-inf")


# ============================================================ decode_attention_intensity: wrong
def intensity_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) / k_bytes


def intensity_mac_as_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = batch_size * num_heads * seq_len * head_dim * 2  # scores + weighted sum
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // bytes_read


def intensity_counts_query_and_output(num_heads, num_kv_heads, head_dim, seq_len,
                                      batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim
    q_and_out = 2 * batch_size * num_heads * head_dim
    return flops / ((kv + q_and_out) * bytes_per_element)


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: (4 B H N d) / (2 B G N d bytes) = 2 H / (G bytes)
    return 2 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction_per_token(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    per_token_flops = Fraction(num_heads * (2 * head_dim + 2 * head_dim))
    per_token_bytes = Fraction(num_kv_heads * 2 * head_dim * bytes_per_element)
    total_flops = per_token_flops * seq_len * batch_size
    total_bytes = per_token_bytes * seq_len * batch_size
    return float(total_flops / total_bytes)


# ============================================================ paged_attention: helpers
def _seq_kv(pages_pool, table_row, n_pages, d):
    idx = table_row[:n_pages].long()
    g = pages_pool.shape[1]
    return pages_pool[idx].transpose(0, 1).reshape(g, -1, d)  # (G, n_pages * P, d)


# ============================================================ paged_attention: wrong
def paged_reads_stale_slots(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        npg = math.ceil(n / P)
        k = _seq_kv(k_pages, block_table[b], npg, d).to(ct).repeat_interleave(H // G, dim=0)
        v = _seq_kv(v_pages, block_table[b], npg, d).to(ct).repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
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
        npg = math.ceil(n / P)
        k = _seq_kv(k_pages, block_table[b], npg, d)[:, :n].to(ct).repeat(H // G, 1, 1)
        v = _seq_kv(v_pages, block_table[b], npg, d)[:, :n].to(ct).repeat(H // G, 1, 1)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_scale_by_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        npg = -(-n // P)
        k = _seq_kv(k_pages, block_table[b], npg, d)[:, :n].to(ct)
        v = _seq_kv(v_pages, block_table[b], npg, d)[:, :n].to(ct)
        kh, vh = k[torch.arange(H) // rep], v[torch.arange(H) // rep]
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), kh) / math.sqrt(k_pages.shape[2])
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), vh)
    return out.to(q.dtype)


def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
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
        k = torch.stack(ks, 1).to(ct)  # (G, n, d)
        v = torch.stack(vs, 1).to(ct)
        for h in range(H):
            s = k[h // rep] @ q[b, h].to(ct) / math.sqrt(d)
            out[b, h] = torch.softmax(s, 0) @ v[h // rep]
    return out.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        npg = n // P
        k = _seq_kv(k_pages, block_table[b], npg, d)[:, :n].to(ct).repeat_interleave(H // G, 0)
        v = _seq_kv(v_pages, block_table[b], npg, d)[:, :n].to(ct).repeat_interleave(H // G, 0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_softmax_wrong_dim(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        npg = math.ceil(n / P)
        k = _seq_kv(k_pages, block_table[b], npg, d)[:, :n].to(ct).repeat_interleave(H // G, 0)
        v = _seq_kv(v_pages, block_table[b], npg, d)[:, :n].to(ct).repeat_interleave(H // G, 0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)  # (H, 1, n)
        out[b] = (torch.softmax(s, dim=1) @ v)[:, 0]
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_index_arithmetic(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    kv_head = torch.div(torch.arange(H), H // G, rounding_mode="floor")
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        pages = block_table[b].long()[t // P]
        slots = t % P
        k = k_pages[pages, :, slots].double()  # (n, G, d)
        v = v_pages[pages, :, slots].double()
        s = torch.einsum("hd,nhd->hn", q[b].double(), k[:, kv_head]) / math.sqrt(d)
        w = torch.softmax(s, dim=-1)
        out[b] = torch.einsum("hn,nhd->hd", w, v[:, kv_head])
    return out.to(q.dtype)


def paged_padded_batch(q, k_pages, v_pages, block_table, seq_lens):
    """All sequences at once over max_pages * page_size slots, a length mask, float64."""
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    t = torch.arange(T)
    page_idx = block_table.long()[:, t // P]  # (B, T)
    slot_idx = (t % P).expand(B, T)
    k = k_pages[page_idx, :, slot_idx].double()  # (B, T, G, d)
    v = v_pages[page_idx, :, slot_idx].double()
    k = k.repeat_interleave(H // G, dim=2)  # (B, T, H, d)
    v = v.repeat_interleave(H // G, dim=2)
    s = torch.einsum("bhd,bthd->bht", q.double(), k) * d ** -0.5
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, :]  # (B, 1, T)
    s = s.masked_fill(~valid, NEG)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    return torch.einsum("bht,bthd->bhd", w, v).to(q.dtype)


# ============================================================ chunked_prefill: helpers
def _split(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _merge(t):
    b, h, n, dh = t.shape
    return t.transpose(1, 2).reshape(b, n, h * dh)


# ============================================================ chunked_prefill: wrong
def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = _split(xc @ w_q, num_heads).to(ct)
        kc[:, :, s0:s1] = _split(xc @ w_k, num_heads).to(ct)
        vc[:, :, s0:s1] = _split(xc @ w_v, num_heads).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(s1 - s0, s1, dtype=torch.bool).tril()
        sc = sc.masked_fill(~allowed, NEG)
        outs.append(_merge(torch.softmax(sc, -1) @ vc[:, :, :s1]))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size]
        c = xc.shape[1]
        q = _split(xc @ w_q, num_heads).to(ct)
        k = _split(xc @ w_k, num_heads).to(ct)
        v = _split(xc @ w_v, num_heads).to(ct)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(c, c, dtype=torch.bool).tril(), NEG)
        outs.append(_merge(torch.softmax(sc, -1) @ v))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_drops_last_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for c in range(N // chunk_size):
        s0, s1 = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, s0:s1]
        q = _split(xc @ w_q, num_heads).to(ct)
        ks.append(_split(xc @ w_k, num_heads).to(ct))
        vs.append(_split(xc @ w_v, num_heads).to(ct))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(s1 - s0, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~keep, NEG)
        outs.append(_merge(torch.softmax(sc, -1) @ v))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_cache_appended_late(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, 0, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, 0, dh, dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size]
        q = _split(xc @ w_q, num_heads).to(ct)
        sc = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)  # the cache holds earlier chunks
        outs.append(_merge(torch.softmax(sc, -1) @ v_cache))
        k_cache = torch.cat([k_cache, _split(xc @ w_k, num_heads).to(ct)], 2)
        v_cache = torch.cat([v_cache, _split(xc @ w_v, num_heads).to(ct)], 2)
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = _split(xc @ w_q, num_heads).to(ct)
        kc[:, :, s0:s1] = _split(xc @ w_k, num_heads).to(ct)
        vc[:, :, s0:s1] = _split(xc @ w_v, num_heads).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(D)
        keep = torch.ones(s1 - s0, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~keep, NEG)
        outs.append(_merge(torch.softmax(sc, -1) @ vc[:, :, :s1]))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_values_with_w_k(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = _split(xc @ w_q, num_heads).to(ct)
        kc[:, :, s0:s1] = _split(xc @ w_k, num_heads).to(ct)
        vc[:, :, s0:s1] = _split(xc @ w_k, num_heads).to(ct)
        sc = q @ kc[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(s1 - s0, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~keep, NEG)
        outs.append(_merge(torch.softmax(sc, -1) @ vc[:, :, :s1]))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    k_parts, v_parts, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size].to(ct)
        c = xc.shape[1]
        q = _split(xc @ w_q.to(ct), num_heads)
        k_parts.append(_split(xc @ w_k.to(ct), num_heads))
        v_parts.append(_split(xc @ w_v.to(ct), num_heads))
        k, v = torch.cat(k_parts, dim=2), torch.cat(v_parts, dim=2)
        stop = s0 + c
        # query s0 + i sees key j when j <= s0 + i
        mask = torch.arange(stop)[None, :] <= (torch.arange(c)[:, None] + s0)
        outs.append(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_einsum_float64_while(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    h = num_heads
    dh = D // h
    X = x.double()
    Wq, Wk, Wv = (w.double().reshape(D, h, dh) for w in (w_q, w_k, w_v))
    K = torch.zeros(B, N, h, dh, dtype=torch.float64)
    V = torch.zeros(B, N, h, dh, dtype=torch.float64)
    ctx = torch.zeros(B, N, h, dh, dtype=torch.float64)
    start = 0
    while start < N:
        stop = min(N, start + chunk_size)
        xc = X[:, start:stop]
        Q = torch.einsum("bnd,dhe->bnhe", xc, Wq)
        K[:, start:stop] = torch.einsum("bnd,dhe->bnhe", xc, Wk)
        V[:, start:stop] = torch.einsum("bnd,dhe->bnhe", xc, Wv)
        s = torch.einsum("bqhe,bkhe->bhqk", Q, K[:, :stop]) / math.sqrt(dh)
        qi = torch.arange(start, stop)[:, None]
        kj = torch.arange(stop)[None, :]
        s = torch.where(kj <= qi, s, torch.full_like(s, NEG))
        ctx[:, start:stop] = torch.einsum("bhqk,bkhe->bqhe", torch.softmax(s, -1), V[:, :stop])
        start = stop
    return (ctx.reshape(B, N, D) @ w_o.double()).to(x.dtype)


D_ = "decode_attention_intensity"
P_ = "paged_attention"
C_ = "chunked_prefill"
ENTRIES = [
    Entry(D_, "wrong", "kv_bytes_per_query_head", "It counts the K/V bytes with num_heads "
          "instead of num_kv_heads, as if every query head had its own cached K and V: the "
          "sharing of GQA/MQA disappears from the bytes.", intensity_bytes_per_query_head),
    Entry(D_, "wrong", "keys_only_bytes", "The bytes count only the cached keys; the values, "
          "read from the cache as well, are left out (no factor 2).", intensity_keys_only),
    Entry(D_, "wrong", "mac_as_one_flop", "Each multiply-add is counted as 1 FLOP instead of "
          "2, so the FLOPs of the two products are halved.", intensity_mac_as_one_flop),
    Entry(D_, "wrong", "floor_division", "flops // bytes floors the ratio and returns an int "
          "where the contract asks for a float intensity.", intensity_floor_division),
    Entry(D_, "wrong", "counts_query_and_output", "It adds the bytes of the new query and of "
          "the output to the bytes read, where only the cached K and V count.",
          intensity_counts_query_and_output),
    Entry(D_, "wrong", "precedence_denominator", "flops / 2 * B * G * N * d * bytes divides "
          "only by 2 and multiplies by the rest: the denominator needs parentheses.",
          intensity_precedence),
    Entry(D_, "right", "closed_form_2H_over_G_bytes", None, intensity_closed_form),
    Entry(D_, "right", "fraction_per_token", None, intensity_fraction_per_token),
    Entry(P_, "wrong", "reads_stale_slots", "After flattening the sequence's pages it never "
          "cuts to the first seq_lens[b] keys ([:, :n]), so the unused slots of the last page "
          "(stale values) join the softmax.", paged_reads_stale_slots),
    Entry(P_, "wrong", "repeat_not_repeat_interleave", "KV heads are expanded with "
          ".repeat (tiling: head h reads group h % G) instead of .repeat_interleave (head h "
          "reads group h // (H // G)).", paged_repeat_not_interleave),
    Entry(P_, "wrong", "scale_by_page_size", "The scores are divided by sqrt(k_pages.shape[2]), "
          "the page size, instead of sqrt(d), the last axis.", paged_scale_by_page_size),
    Entry(P_, "wrong", "page_and_slot_swapped", "Page and slot are swapped: it looks up "
          "block_table[b, t % page_size] at slot t // page_size instead of page t // page_size "
          "at slot t % page_size (and raises an IndexError when page_size exceeds the table's "
          "width).", paged_page_slot_swapped),
    Entry(P_, "wrong", "floor_page_count", "The number of pages is n // page_size (floor) "
          "instead of ceil(n / page_size), so a partly filled last page is never read.",
          paged_floor_page_count),
    Entry(P_, "wrong", "softmax_over_singleton_axis", "The softmax runs over dim=1 of the "
          "(H, 1, n) scores, the axis of size 1, so every weight is 1 and the output is the "
          "plain sum of the values.", paged_softmax_wrong_dim),
    Entry(P_, "right", "index_arithmetic_float64", None, paged_index_arithmetic),
    Entry(P_, "right", "padded_batch_masked", None, paged_padded_batch),
    Entry(C_, "wrong", "mask_top_left", "The chunk's mask is tril() of a (C, stop) block, "
          "aligned top-left, so query start + i sees only keys 0 .. i instead of keys "
          "0 .. start + i (bottom-right alignment, tril(start)).", prefill_mask_top_left),
    Entry(C_, "wrong", "no_cache", "Each chunk attends only to its own keys and values: the "
          "keys and values of earlier chunks are never kept or used.", prefill_no_cache),
    Entry(C_, "wrong", "last_chunk_dropped", "It loops over N // chunk_size chunks, so a last, "
          "shorter chunk is never computed (the output is too short, or the concatenation "
          "of no chunks raises when chunk_size > N).", prefill_drops_last_chunk),
    Entry(C_, "wrong", "cache_appended_after_attention", "The chunk's own keys and values are "
          "appended to the cache only after it has attended, so each query sees earlier "
          "chunks but not itself or its own chunk, and the first chunk gets zeros.",
          prefill_cache_appended_late),
    Entry(C_, "wrong", "scale_sqrt_d_model", "The scores are divided by sqrt(d_model) instead "
          "of sqrt(d_head).", prefill_scale_d_model),
    Entry(C_, "wrong", "values_projected_with_w_k", "The value cache is filled with xc @ w_k: "
          "the key projection is reused where w_v belongs.", prefill_values_with_w_k),
    Entry(C_, "right", "sdpa_per_chunk_bool_mask", None, prefill_sdpa_per_chunk),
    Entry(C_, "right", "einsum_float64_while", None, prefill_einsum_float64_while),
]
