"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ======================================================== decode_attention_intensity: wrong
def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element  # slip: no V
    return flops / bytes_read


def intensity_mac_as_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    scores = batch_size * num_heads * seq_len * head_dim  # slip: one multiply-add = 1 FLOP
    weighted = batch_size * num_heads * seq_len * head_dim
    cache = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (scores + weighted) / cache


def intensity_cache_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    # slip: K and V counted per query head, as if GQA did not share them
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // bytes_read  # slip: floor division truncates a fractional intensity


def intensity_bytes_without_batch(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element  # slip: one cache only
    return flops / bytes_read


def intensity_counts_new_token(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    # slip: the new query also scores against itself, seq_len + 1 keys, but the bytes use seq_len
    flops = 4 * batch_size * num_heads * (seq_len + 1) * head_dim
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


# ======================================================== decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_head_flops = 2 * seq_len * head_dim + 2 * seq_len * head_dim
    flops = Fraction(batch_size * num_heads * per_head_flops)
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    v_bytes = k_bytes
    return float(flops / (k_bytes + v_bytes))


# ==================================================================== paged_attention: wrong
def _gather_seq(pages_pool, table_row, n, page_size):
    p = math.ceil(n / page_size)
    g, d = pages_pool.shape[1], pages_pool.shape[3]
    return pages_pool[table_row[:p].long()].transpose(0, 1).reshape(g, -1, d)[:, :n]


def paged_slot_page_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        pg = block_table[b, t % P].long()  # slip: page from t % page_size, slot from t // page_size
        sl = t // P
        K = k_pages[pg, :, sl].transpose(0, 1).to(ct)  # (G, n, d)
        V = v_pages[pg, :, sl].transpose(0, 1).to(ct)
        K = K.repeat_interleave(H // G, 0)
        V = V.repeat_interleave(H // G, 0)
        s = (q[b].to(ct)[:, None, :] @ K.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ V)[:, 0]
    return out.to(q.dtype)


def paged_one_key_too_many(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    cap = block_table.shape[1] * P
    pos = torch.arange(cap)
    all_k = k_pages[block_table.long()].permute(0, 2, 1, 3, 4).reshape(B, G, cap, d).to(ct)
    all_v = v_pages[block_table.long()].permute(0, 2, 1, 3, 4).reshape(B, G, cap, d).to(ct)
    all_k = all_k.repeat_interleave(H // G, 1)
    all_v = all_v.repeat_interleave(H // G, 1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), all_k) / math.sqrt(d)
    keep = pos[None, :] <= seq_lens[:, None]  # slip: <= lets in the stale slot at t = seq_len
    s = s.masked_fill(~keep[:, None, :], -math.inf)
    w = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    return torch.einsum("bht,bhtd->bhd", w, all_v).to(q.dtype)


def paged_head_mapping_modulo(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        K = _gather_seq(k_pages, block_table[b], n, P).to(ct)
        V = _gather_seq(v_pages, block_table[b], n, P).to(ct)
        K = K.repeat(H // G, 1, 1)  # slip: tiles the groups, head h reads h % G
        V = V.repeat(H // G, 1, 1)
        s = (q[b].to(ct)[:, None, :] @ K.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ V)[:, 0]
    return out.to(q.dtype)


def paged_nan_for_empty(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    cap = block_table.shape[1] * P
    all_k = k_pages[block_table.long()].permute(0, 2, 1, 3, 4).reshape(B, G, cap, d).to(ct)
    all_v = v_pages[block_table.long()].permute(0, 2, 1, 3, 4).reshape(B, G, cap, d).to(ct)
    all_k = all_k.repeat_interleave(H // G, 1)
    all_v = all_v.repeat_interleave(H // G, 1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), all_k) / math.sqrt(d)
    keep = torch.arange(cap)[None, :] < seq_lens[:, None]
    s = s.masked_fill(~keep[:, None, :], -math.inf)
    w = torch.softmax(s, -1)  # slip: a length-0 sequence has all -inf scores, softmax gives NaN
    return torch.einsum("bht,bhtd->bhd", w, all_v).to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        K = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)  # slip: (p, G, P, d) reshaped as is
        V = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        K = K.repeat_interleave(H // G, 0)
        V = V.repeat_interleave(H // G, 0)
        s = (q[b].to(ct)[:, None, :] @ K.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ V)[:, 0]
    return out.to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        K = _gather_seq(k_pages, block_table[b], n, P).to(ct).repeat_interleave(H // G, 0)
        V = _gather_seq(v_pages, block_table[b], n, P).to(ct).repeat_interleave(H // G, 0)
        s = q[b].to(ct)[:, None, :] @ K.transpose(1, 2)  # slip: no 1/sqrt(d)
        out[b] = (s.softmax(-1) @ V)[:, 0]
    return out.to(q.dtype)


# ==================================================================== paged_attention: right
def paged_token_by_token(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys, vals = [], []
        for t in range(n):
            page = int(block_table[b, t // P])
            keys.append(k_pages[page, :, t % P].double())  # (G, d)
            vals.append(v_pages[page, :, t % P].double())
        K = torch.stack(keys, 1)  # (G, n, d)
        V = torch.stack(vals, 1)
        for h in range(H):
            g = h // rep
            s = K[g] @ q[b, h].double() / math.sqrt(d)  # (n,)
            out[b, h] = torch.softmax(s, 0) @ V[g]
    return out.to(q.dtype)


def paged_masked_batch(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    cap = block_table.shape[1] * P
    t = torch.arange(cap)
    page_of = block_table.long()[:, t // P]  # (B, cap)
    slot_of = (t % P).expand(B, cap)
    K = k_pages[page_of, :, slot_of].double()  # (B, cap, G, d)
    V = v_pages[page_of, :, slot_of].double()
    head_group = torch.arange(H) // (H // G)
    Kh = K[:, :, head_group]  # (B, cap, H, d)
    Vh = V[:, :, head_group]
    s = torch.einsum("bhd,bthd->bht", q.double(), Kh) * d ** -0.5
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, :]  # (B, 1, cap)
    s = torch.where(valid, s, torch.tensor(-math.inf, dtype=torch.float64))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    return torch.einsum("bht,bthd->bhd", w, Vh).to(q.dtype)


# ==================================================================== chunked_prefill: wrong
def _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, offset=True, use_cache=True,
             n_chunks=None, scale_width=None, merge_transpose=True, invert=False):
    """One learner's chunked prefill; the keyword switches reproduce single slips below."""
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    X = x.to(ct)
    Wq, Wk, Wv = w_q.to(ct), w_k.to(ct), w_v.to(ct)
    ks, vs, outs = [], [], []
    starts = list(range(0, N, chunk_size))
    if n_chunks is not None:
        starts = starts[:n_chunks]
    for a in starts:
        z = min(a + chunk_size, N)
        xc = X[:, a:z]
        qc = xc @ Wq
        qc = qc.view(B, z - a, H, dh).transpose(1, 2)
        ks.append((xc @ Wk).view(B, z - a, H, dh).transpose(1, 2))
        vs.append((xc @ Wv).view(B, z - a, H, dh).transpose(1, 2))
        if use_cache:
            K, V, kpos0 = torch.cat(ks, 2), torch.cat(vs, 2), 0
        else:
            K, V, kpos0 = ks[-1], vs[-1], a
        width = dh if scale_width is None else scale_width
        s = qc @ K.transpose(-1, -2) / math.sqrt(width)
        qpos = torch.arange(a, z)[:, None] if offset else torch.arange(z - a)[:, None]
        allowed = torch.arange(kpos0, z)[None, :] <= qpos
        s = s.masked_fill(allowed if invert else ~allowed, -math.inf)
        ctx = torch.softmax(s, -1) @ V
        if merge_transpose:
            outs.append(ctx.transpose(1, 2).reshape(B, z - a, D))
        else:
            outs.append(ctx.reshape(B, z - a, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_mask_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, offset=False)


def prefill_forgets_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, use_cache=False)


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    n = x.shape[1]
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, n_chunks=n // chunk_size)


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, scale_width=x.shape[-1])


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, merge_transpose=False)


def prefill_mask_polarity(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, invert=True)


# ==================================================================== chunked_prefill: right
def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xf = x.double()
    K = (xf @ w_k.double()).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    V = (xf @ w_v.double()).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    Q = (xf @ w_q.double()).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    pieces = []
    for lo in range(0, N, chunk_size):
        hi = min(N, lo + chunk_size)
        mask = torch.arange(hi)[None, :] <= torch.arange(lo, hi)[:, None]  # True = may attend
        o = F.scaled_dot_product_attention(Q[:, :, lo:hi], K[:, :, :hi], V[:, :, :hi],
                                           attn_mask=mask)
        pieces.append(o)
    ctx = torch.cat(pieces, dim=2).permute(0, 2, 1, 3).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


def prefill_head_loops_preallocated(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.float64
    k_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    y = torch.zeros(B, N, D, dtype=ct)
    c = 0
    while c < N:
        e = min(c + chunk_size, N)
        xc = x[:, c:e].to(ct)
        qc = xc @ w_q.to(ct)
        kc = xc @ w_k.to(ct)
        vc = xc @ w_v.to(ct)
        for h in range(num_heads):
            cols = slice(h * dh, (h + 1) * dh)
            k_cache[:, h, c:e] = kc[..., cols]
            v_cache[:, h, c:e] = vc[..., cols]
            sc = torch.einsum("bqd,bkd->bqk", qc[..., cols], k_cache[:, h, :e]) / math.sqrt(dh)
            future = torch.arange(e)[None, :] > torch.arange(c, e)[:, None]
            sc = sc.masked_fill(future, float("-inf"))
            y[:, c:e, cols] = torch.softmax(sc, dim=-1) @ v_cache[:, h, :e]
        c = e
    return (y @ w_o.to(ct)).to(x.dtype)


D = "decode_attention_intensity"
P = "paged_attention"
C = "chunked_prefill"
ENTRIES = [
    Entry(D, "wrong", "keys_only_in_bytes", "Only the cached keys are counted in the bytes "
          "read; the values are read too, so the intensity comes out twice too high.",
          intensity_keys_only),
    Entry(D, "wrong", "multiply_add_as_one_flop", "Each multiply-add is counted as one FLOP "
          "instead of two, halving the intensity.", intensity_mac_as_one_flop),
    Entry(D, "wrong", "cache_per_query_head", "The K/V bytes use num_heads instead of "
          "num_kv_heads, as if every query head had its own cache; GQA's sharing is lost.",
          intensity_cache_per_query_head),
    Entry(D, "wrong", "floor_division", "flops // bytes floors the ratio, so an intensity "
          "below 1 (e.g. 0.5 FLOPs/byte) becomes 0.", intensity_floor_division),
    Entry(D, "wrong", "bytes_without_batch", "The FLOPs scale with batch_size but the bytes do "
          "not, as if all sequences shared one cache.", intensity_bytes_without_batch),
    Entry(D, "wrong", "new_token_counted_in_flops", "The FLOPs use seq_len + 1 keys (the new "
          "token attending to itself) while the bytes use seq_len: an off-by-one between the "
          "two.", intensity_counts_new_token),
    Entry(D, "right", "closed_form_2H_over_G_bytes", None, intensity_closed_form),
    Entry(D, "right", "fraction_then_float", None, intensity_fraction),
    Entry(P, "wrong", "page_and_slot_swapped", "The page comes from block_table[b, t % "
          "page_size] and the slot from t // page_size: division and modulo are swapped (with "
          "fewer table columns than page_size the page lookup goes out of range and raises "
          "IndexError).",
          paged_slot_page_swapped),
    Entry(P, "wrong", "length_mask_le", "The length mask keeps positions t <= seq_len, one "
          "stale key too many.", paged_one_key_too_many),
    Entry(P, "wrong", "kv_heads_tiled_not_interleaved", "K/V heads are expanded with "
          ".repeat, so query head h reads KV head h % G instead of h // (H // G).",
          paged_head_mapping_modulo),
    Entry(P, "wrong", "nan_for_empty_sequence", "A sequence of length 0 has only -inf scores "
          "and torch.softmax returns NaN there instead of a row of zeros.", paged_nan_for_empty),
    Entry(P, "wrong", "pages_flattened_without_transpose", "The gathered (pages, G, page_size, "
          "d) block is reshaped straight to (G, -1, d) without moving G first, mixing KV heads "
          "and pages.", paged_reshape_without_transpose),
    Entry(P, "wrong", "no_sqrt_d_scale", "The scores are not divided by sqrt(d).",
          paged_no_scale),
    Entry(P, "right", "token_by_token_gather", None, paged_token_by_token),
    Entry(P, "right", "masked_whole_table", None, paged_masked_batch),
    Entry(C, "wrong", "chunk_mask_top_left", "Inside a chunk the causal mask compares key "
          "positions with the query's index within the chunk, not its absolute position, so "
          "later chunks cannot see most of the cache (top-left alignment).",
          prefill_mask_top_left),
    Entry(C, "wrong", "earlier_chunks_not_attended", "Each chunk attends only to its own keys "
          "and values: the cache of earlier chunks is filled but never used.",
          prefill_forgets_cache),
    Entry(C, "wrong", "ragged_last_chunk_dropped", "The loop runs over N // chunk_size chunks, "
          "so a shorter last chunk is never computed and the output has too few rows.",
          prefill_drops_ragged_chunk),
    Entry(C, "wrong", "scale_by_d_model", "The scores are divided by sqrt(d_model) instead of "
          "sqrt(d_head).", prefill_scale_d_model),
    Entry(C, "wrong", "heads_merged_without_transpose", "The (B, H, C, d_head) context is "
          "reshaped straight to (B, C, d_model) without transposing H and C back.",
          prefill_merge_without_transpose),
    Entry(C, "wrong", "mask_polarity_inverted", "masked_fill is given the allowed mask itself "
          "(True = may attend), so the past is blanked and the future kept; the last query of a "
          "chunk is left with no key and gives NaN.",
          prefill_mask_polarity),
    Entry(C, "right", "sdpa_per_chunk_bool_mask", None, prefill_sdpa_per_chunk),
    Entry(C, "right", "head_loops_preallocated_cache", None, prefill_head_loops_preallocated),
]
