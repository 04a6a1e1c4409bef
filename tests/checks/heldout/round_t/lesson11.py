"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry

EX_INT = "decode_attention_intensity"
EX_PAGED = "paged_attention"
EX_CHUNK = "chunked_prefill"


# ============================================================================ decode_attention_intensity
def intensity_right_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    # B, N and d cancel: 4 B H N d FLOPs over 2 B G N d bytes = 2 H / (G * bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_right_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    # exact rational arithmetic, converted once at the end
    qk_flops = 2 * batch_size * num_heads * seq_len * head_dim
    pv_flops = 2 * batch_size * num_heads * seq_len * head_dim
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    v_bytes = k_bytes
    return float(Fraction(qk_flops + pv_flops, k_bytes + v_bytes))


def intensity_wrong_k_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_wrong_one_flop_per_mac(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                     bytes_per_element=2):
    macs = 2 * batch_size * num_heads * seq_len * head_dim  # scores + weighted sum
    flops = macs
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_wrong_heads_for_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                    bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_wrong_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // bytes_read


def intensity_wrong_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_wrong_counts_q_and_out(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                     bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q_and_out = 2 * batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + q_and_out)


# ============================================================================ paged_attention
def paged_right_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    # gather the keys one token at a time through the block table, attend in float64
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t // P])
            ks.append(k_pages[page, :, t % P])  # (G, d)
            vs.append(v_pages[page, :, t % P])
        K = torch.stack(ks, dim=1).double()  # (G, n, d)
        V = torch.stack(vs, dim=1).double()
        for h in range(H):
            g = h // rep
            s = K[g] @ q[b, h].double() / math.sqrt(d)  # (n,)
            out[b, h] = torch.softmax(s, dim=0) @ V[g]
    return out.to(q.dtype)


def paged_right_vectorised(q, k_pages, v_pages, block_table, seq_lens):
    # all sequences at once: gather T = max length slots, mask t >= seq_len, grouped einsum
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    lens = seq_lens.long()
    T = max(int(lens.max()), 1)
    t = torch.arange(T, device=q.device)
    pages = block_table.long()[:, t // P]  # (B, T)
    slots = (t % P).expand(B, T)
    K = k_pages[pages, :, slots].to(ct)  # (B, T, G, d)
    V = v_pages[pages, :, slots].to(ct)
    qg = q.to(ct).view(B, G, H // G, d)
    s = torch.einsum("bgrd,btgd->bgrt", qg, K) / math.sqrt(d)
    valid = (t[None, :] < lens[:, None])[:, None, None, :]  # (B, 1, 1, T)
    s = s.masked_fill(~valid, -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    o = torch.einsum("bgrt,btgd->bgrd", p, V)
    return o.reshape(B, H, d).to(q.dtype)


def _paged_loop(q, k_pages, v_pages, block_table, seq_lens, *, truncate=True, tile=False,
                no_transpose=False, scale_dim=-1, swap_index=False):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        if swap_index:
            ks = [k_pages[int(block_table[b, t % P]), :, t // P] for t in range(n)]
            vs = [v_pages[int(block_table[b, t % P]), :, t // P] for t in range(n)]
            k, v = torch.stack(ks, 1).to(ct), torch.stack(vs, 1).to(ct)
        else:
            pages = block_table[b, :math.ceil(n / P)].long()
            if no_transpose:
                k = k_pages[pages].reshape(G, -1, d)
                v = v_pages[pages].reshape(G, -1, d)
            else:
                k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)
                v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)
            if truncate:
                k, v = k[:, :n], v[:, :n]
            k, v = k.to(ct), v.to(ct)
        if tile:
            k, v = k.repeat(rep, 1, 1), v.repeat(rep, 1, 1)
        else:
            k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
        width = k_pages.shape[scale_dim]
        s = (k @ q[b].to(ct)[:, :, None])[..., 0] / math.sqrt(width)  # (H, n)
        out[b] = (torch.softmax(s, dim=-1)[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def paged_wrong_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, truncate=False)


def paged_wrong_repeat_tiles_groups(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, tile=True)


def paged_wrong_reshape_mixes_pages_groups(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, no_transpose=True)


def paged_wrong_scale_page_size(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, scale_dim=-2)


def paged_wrong_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    return _paged_loop(q, k_pages, v_pages, block_table, seq_lens, swap_index=True)


def paged_wrong_empty_sequence_nan(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    lens = seq_lens.long()
    T = max(int(lens.max()), 1)
    t = torch.arange(T, device=q.device)
    pages = block_table.long()[:, t // P]
    slots = (t % P).expand(B, T)
    K = k_pages[pages, :, slots].to(ct)  # (B, T, G, d)
    V = v_pages[pages, :, slots].to(ct)
    qg = q.to(ct).view(B, G, H // G, d)
    s = torch.einsum("bgrd,btgd->bgrt", qg, K) / math.sqrt(d)
    valid = (t[None, :] < lens[:, None])[:, None, None, :]
    s = s.masked_fill(~valid, -math.inf)
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("bgrt,btgd->bgrd", p, V)
    return o.reshape(B, H, d).to(q.dtype)


# ============================================================================ chunked_prefill
def _bottom_right(n_q, n_k, device):
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(n_k - n_q)


def chunk_right_sdpa_cache_list(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    # a list cache concatenated per chunk, one SDPA call per chunk with a bottom-right mask
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)

    def heads(t):
        return t.view(B, -1, num_heads, dh).permute(0, 2, 1, 3).to(ct)

    k_cache, v_cache, pieces = [], [], []
    start = 0
    while start < N:
        stop = min(N, start + chunk_size)
        xc = x[:, start:stop]
        k_cache.append(heads(xc @ w_k))
        v_cache.append(heads(xc @ w_v))
        k_all = torch.cat(k_cache, dim=2)
        v_all = torch.cat(v_cache, dim=2)
        mask = _bottom_right(stop - start, stop, x.device)
        ctx = F.scaled_dot_product_attention(heads(xc @ w_q), k_all, v_all, attn_mask=mask)
        pieces.append(ctx.permute(0, 2, 1, 3).reshape(B, stop - start, D))
        start = stop
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def chunk_right_past_and_own(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    # scores against the cached past (no mask needed) and against the own chunk (tril),
    # one softmax over both parts, einsum in float64
    B, N, D = x.shape
    dh = D // num_heads
    f = torch.float64
    xd = x.to(f)
    Kc = torch.zeros(B, num_heads, 0, dh, dtype=f, device=x.device)
    Vc = torch.zeros(B, num_heads, 0, dh, dtype=f, device=x.device)
    outs = []
    for s0 in range(0, N, chunk_size):
        xc = xd[:, s0:s0 + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q.to(f)).reshape(B, C, num_heads, dh).transpose(1, 2)
        k = (xc @ w_k.to(f)).reshape(B, C, num_heads, dh).transpose(1, 2)
        v = (xc @ w_v.to(f)).reshape(B, C, num_heads, dh).transpose(1, 2)
        s_past = torch.einsum("bhid,bhjd->bhij", q, Kc) / math.sqrt(dh)
        s_own = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(dh)
        own_ok = torch.ones(C, C, dtype=torch.bool, device=x.device).tril()
        s_own = s_own.masked_fill(~own_ok, -math.inf)
        w = torch.softmax(torch.cat([s_past, s_own], dim=-1), dim=-1)
        ctx = torch.einsum("bhij,bhjd->bhid", w, torch.cat([Vc, v], dim=2))
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
        Kc, Vc = torch.cat([Kc, k], dim=2), torch.cat([Vc, v], dim=2)
    return (torch.cat(outs, dim=1) @ w_o.to(f)).to(x.dtype)


def _chunk_template(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, top_left=False,
                    no_cache=False, full_chunks_only=False, merge_no_transpose=False,
                    skip_w_o=False, full_mask=False):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((B, num_heads, N, dh), dtype=ct, device=x.device)
    v_cache = torch.empty((B, num_heads, N, dh), dtype=ct, device=x.device)
    big_mask = _bottom_right(N, N, x.device) if full_mask else None

    def split(t):
        return t.reshape(B, -1, num_heads, dh).transpose(1, 2).to(ct)

    last = N - chunk_size + 1 if full_chunks_only else N
    outs = []
    for start in range(0, last, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        q = split(xc @ w_q)
        k_cache[:, :, start:stop] = split(xc @ w_k)
        v_cache[:, :, start:stop] = split(xc @ w_v)
        lo = start if no_cache else 0
        k, v = k_cache[:, :, lo:stop], v_cache[:, :, lo:stop]
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        if big_mask is not None:
            allowed = big_mask[start:stop, lo:stop]
        elif top_left:
            allowed = torch.ones(stop - start, stop - lo, dtype=torch.bool,
                                 device=x.device).tril()
        else:
            allowed = _bottom_right(stop - start, stop - lo, x.device)
        s = s.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(s, dim=-1) @ v
        if merge_no_transpose:
            outs.append(ctx.reshape(B, stop - start, D))
        else:
            outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    merged = torch.cat(outs, dim=1).to(x.dtype)
    return merged if skip_w_o else merged @ w_o


def chunk_wrong_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_template(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, top_left=True)


def chunk_wrong_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_template(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, no_cache=True)


def chunk_wrong_ragged_chunk_dropped(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_template(x, w_q, w_k, w_v, w_o, num_heads, chunk_size,
                           full_chunks_only=True)


def chunk_wrong_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_template(x, w_q, w_k, w_v, w_o, num_heads, chunk_size,
                           merge_no_transpose=True)


def chunk_wrong_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_template(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, skip_w_o=True)


def chunk_wrong_full_mask_up_front(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunk_template(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, full_mask=True)


ENTRIES = [
    Entry(EX_INT, "right", "closed_form_2H_over_G_bytes", None, intensity_right_closed_form),
    Entry(EX_INT, "right", "exact_fraction", None, intensity_right_fraction),
    Entry(EX_INT, "wrong", "keys_only_bytes",
          "Counts only the bytes of the cached keys; the values are read from the cache too, "
          "so the bytes are half what they should be.",
          intensity_wrong_k_only),
    Entry(EX_INT, "wrong", "one_flop_per_multiply_add",
          "Counts one FLOP per multiply-add instead of two, halving the FLOPs.",
          intensity_wrong_one_flop_per_mac),
    Entry(EX_INT, "wrong", "bytes_use_query_heads",
          "Counts the cache bytes with num_heads instead of num_kv_heads: with GQA / MQA only "
          "the G shared K/V heads are stored and read.",
          intensity_wrong_heads_for_bytes),
    Entry(EX_INT, "wrong", "floor_division",
          "Divides FLOPs by bytes with //, which floors the intensity to an integer "
          "(0.5 becomes 0, 2.67 becomes 2).",
          intensity_wrong_floor_division),
    Entry(EX_INT, "wrong", "division_precedence",
          "Writes flops / 2 * batch * kv_heads * seq_len * head_dim * bytes without parentheses: "
          "it divides by 2 and multiplies by the rest instead of dividing by the whole byte count.",
          intensity_wrong_precedence),
    Entry(EX_INT, "wrong", "counts_query_and_output_bytes",
          "Adds the bytes of the query and of the output to the bytes read; the contract counts "
          "only K and V read from the cache.",
          intensity_wrong_counts_q_and_out),
    Entry(EX_PAGED, "right", "token_by_token_gather_float64", None, paged_right_token_loop),
    Entry(EX_PAGED, "right", "vectorised_masked_grouped_einsum", None, paged_right_vectorised),
    Entry(EX_PAGED, "wrong", "reads_whole_last_page",
          "Uses every slot of the sequence's pages without cutting at seq_lens[b]: the stale "
          "slots at the end of the last page enter the softmax.",
          paged_wrong_whole_last_page),
    Entry(EX_PAGED, "wrong", "repeat_instead_of_repeat_interleave",
          "Expands the K/V heads with .repeat (tiling 0, 1, 0, 1, ...) instead of "
          ".repeat_interleave, so query head h reads KV head h % G instead of h // (H // G).",
          paged_wrong_repeat_tiles_groups),
    Entry(EX_PAGED, "wrong", "pages_reshaped_without_transpose",
          "Reshapes the gathered pages (p, G, page_size, d) straight to (G, p * page_size, d) "
          "without moving the G axis first, which mixes pages and KV heads.",
          paged_wrong_reshape_mixes_pages_groups),
    Entry(EX_PAGED, "wrong", "scale_by_page_size",
          "Scales the scores by 1/sqrt(k_pages.shape[-2]), the page size, instead of "
          "1/sqrt(d) (k_pages.shape[-1]).",
          paged_wrong_scale_page_size),
    Entry(EX_PAGED, "wrong", "page_and_slot_swapped",
          "Looks key t up in page block_table[b, t % page_size] at slot t // page_size: the "
          "page and the slot formulas are swapped (wrong keys, or an IndexError when "
          "t % page_size runs past the block table's columns).",
          paged_wrong_page_slot_swapped),
    Entry(EX_PAGED, "wrong", "empty_sequence_nan",
          "Masks the slots past each length with -inf but has no guard for a sequence of length "
          "0: the softmax of an all -inf row is NaN instead of an output of zeros.",
          paged_wrong_empty_sequence_nan),
    Entry(EX_CHUNK, "right", "sdpa_per_chunk_list_cache", None, chunk_right_sdpa_cache_list),
    Entry(EX_CHUNK, "right", "past_and_own_scores_float64", None, chunk_right_past_and_own),
    Entry(EX_CHUNK, "wrong", "chunk_mask_top_left",
          "Builds each chunk's (C, stop) mask with tril() aligned top-left, so a later chunk's "
          "queries see only the first C keys instead of every key up to their own position.",
          chunk_wrong_top_left_mask),
    Entry(EX_CHUNK, "wrong", "earlier_chunks_not_attended",
          "Stores the keys and values in the cache but attends each chunk only to its own keys "
          "(cache[start:stop]), so earlier chunks are never seen.",
          chunk_wrong_no_cache),
    Entry(EX_CHUNK, "wrong", "ragged_last_chunk_dropped",
          "Loops over range(0, N - chunk_size + 1, chunk_size), so a last chunk shorter than "
          "chunk_size is never processed and the output has fewer than N rows.",
          chunk_wrong_ragged_chunk_dropped),
    Entry(EX_CHUNK, "wrong", "heads_merged_without_transpose",
          "Merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2) first: features of different tokens get mixed.",
          chunk_wrong_merge_without_transpose),
    Entry(EX_CHUNK, "wrong", "output_projection_missing",
          "Returns the merged heads without the final @ w_o output projection.",
          chunk_wrong_no_output_projection),
    Entry(EX_CHUNK, "wrong", "full_mask_built_up_front",
          "Builds the whole N x N causal mask once and slices it per chunk: the values are "
          "right, but an N x N tensor is exactly what chunked prefill must never build.",
          chunk_wrong_full_mask_up_front),
]
