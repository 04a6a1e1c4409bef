"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================== decode_attention_intensity
def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_reads_only_keys(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // bytes_read


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_counts_q_and_out(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q_and_out = 2 * batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + q_and_out)


def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    group = num_heads / num_kv_heads  # query heads per K/V head
    return 2.0 * group / bytes_per_element


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_key_flops = 2 * head_dim + 2 * head_dim  # one dot product, one axpy, per query head
    flops = Fraction(batch_size * num_heads * seq_len * per_key_flops)
    per_key_bytes = 2 * head_dim * bytes_per_element  # its K row and its V row
    nbytes = Fraction(batch_size * num_kv_heads * seq_len * per_key_bytes)
    return float(flops / nbytes)


# ============================================================== paged_attention
def _gather(pages, table_row, n, page_size):
    """(p, G, P, d) pages of one sequence -> (G, n, d) keys in order."""
    used = table_row[: math.ceil(n / page_size)].long()
    blk = pages[used]  # (p, G, P, d)
    g, d = blk.shape[1], blk.shape[-1]
    return blk.permute(1, 0, 2, 3).reshape(g, -1, d)[:, :n]


def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[used].permute(1, 0, 2, 3).reshape(G, -1, d).to(ct)  # every slot of the pages
        v = v_pages[used].permute(1, 0, 2, 3).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (k @ q[b].to(ct)[:, :, None])[..., 0] / math.sqrt(d)  # (H, n_slots)
        out[b] = (torch.softmax(s, dim=-1)[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_tiles_heads(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k = _gather(k_pages, block_table[b], n, P).to(ct).repeat(H // G, 1, 1)
        v = _gather(v_pages, block_table[b], n, P).to(ct).repeat(H // G, 1, 1)
        s = q[b].to(ct)[:, None, :] @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
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
        k = torch.stack(ks, dim=1).to(ct).repeat_interleave(rep, dim=0)  # (H, n, d)
        v = torch.stack(vs, dim=1).to(ct).repeat_interleave(rep, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_scale_by_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, _ = q.shape
    _, G, P, d = k_pages.shape
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(q.shape, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k = _gather(k_pages, block_table[b], n, P).to(ct).repeat_interleave(H // G, dim=0)
        v = _gather(v_pages, block_table[b], n, P).to(ct).repeat_interleave(H // G, dim=0)
        s = q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2) / math.sqrt(k_pages.shape[2])
        out[b] = (torch.softmax(s, dim=-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_reshape_without_permute(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_longest_length_for_all(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    n_max = int(seq_lens.max())
    for b in range(B):
        if int(seq_lens[b]) == 0:
            continue
        k = _gather(k_pages, block_table[b], n_max, P).to(ct).repeat_interleave(H // G, dim=0)
        v = _gather(v_pages, block_table[b], n_max, P).to(ct).repeat_interleave(H // G, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_flat_slot_index(q, k_pages, v_pages, block_table, seq_lens):
    """Flattens the pool to (num_pages * page_size, G, d) and gathers slot numbers."""
    B, H, d = q.shape
    num_pages, G, P, _ = k_pages.shape
    k_flat = k_pages.permute(0, 2, 1, 3).reshape(num_pages * P, G, d).double()
    v_flat = v_pages.permute(0, 2, 1, 3).reshape(num_pages * P, G, d).double()
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        slots = block_table[b].long()[t // P] * P + t % P  # (n,)
        k = k_flat[slots]  # (n, G, d)
        v = v_flat[slots]
        qg = q[b].double().reshape(G, H // G, d)  # heads of one group together
        s = torch.einsum("grd,ngd->grn", qg, k) / math.sqrt(d)
        w = torch.softmax(s, dim=-1)
        out[b] = torch.einsum("grn,ngd->grd", w, v).reshape(H, d)
    return out.to(q.dtype)


def paged_dense_padded_sdpa(q, k_pages, v_pages, block_table, seq_lens):
    """Gathers every table entry into a padded (B, G, max_pages * P, d) cache, masks."""
    B, H, d = q.shape
    num_pages, G, P, _ = k_pages.shape
    ct = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long().clamp(0, num_pages - 1)  # entries past a length are arbitrary
    k = k_pages[table].to(ct)  # (B, max_pages, G, P, d)
    v = v_pages[table].to(ct)
    k = k.permute(0, 2, 1, 3, 4).reshape(B, G, -1, d).repeat_interleave(H // G, dim=1)
    v = v.permute(0, 2, 1, 3, 4).reshape(B, G, -1, d).repeat_interleave(H // G, dim=1)
    cap = k.shape[2]
    allowed = torch.arange(cap)[None, :] < seq_lens.long()[:, None]  # (B, cap)
    attn_mask = allowed[:, None, None, :]  # (B, 1, 1, cap)
    ctx = F.scaled_dot_product_attention(q.to(ct)[:, :, None, :], k, v, attn_mask=attn_mask)
    ctx = ctx[:, :, 0]
    ctx = torch.where(allowed.any(dim=1)[:, None, None], ctx, torch.zeros_like(ctx))
    return torch.nan_to_num(ctx, nan=0.0).to(q.dtype)


# ============================================================== chunked_prefill
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size]
        q = _split(xc @ w_q, num_heads).to(ct)
        ks.append(_split(xc @ w_k, num_heads).to(ct))
        vs.append(_split(xc @ w_v, num_heads).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        outs.append(ctx.transpose(1, 2).reshape(B, xc.shape[1], D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        C = xc.shape[1]
        q = _split(xc @ w_q, num_heads).to(ct)
        k = _split(xc @ w_k, num_heads).to(ct)
        v = _split(xc @ w_v, num_heads).to(ct)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), float("-inf"))
        outs.append((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_drops_last_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    outs = []
    for c in range(N // chunk_size):
        start, stop = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, start:stop] = _split(xc @ w_k, num_heads).to(ct)
        v_cache[:, :, start:stop] = _split(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        ok = torch.ones(stop - start, stop, dtype=torch.bool).tril(start)
        s = s.masked_fill(~ok, float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, start:stop] = _split(xc @ w_k, num_heads).to(ct)
        v_cache[:, :, start:stop] = _split(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(stop - start, stop, dtype=torch.bool).tril(start),
                          float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v_cache[:, :, :stop]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, stop - start, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, start:stop] = _split(xc @ w_k, num_heads).to(ct)
        v_cache[:, :, start:stop] = _split(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(D)
        s = s.masked_fill(~torch.ones(stop - start, stop, dtype=torch.bool).tril(start),
                          float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        q = _split(xc @ w_q, num_heads).to(ct)
        k_cache[:, :, start:stop] = _split(xc @ w_q, num_heads).to(ct)
        v_cache[:, :, start:stop] = _split(xc @ w_v, num_heads).to(ct)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(stop - start, stop, dtype=torch.bool).tril(start),
                          float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v_cache[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(B, stop - start, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_sdpa_explicit_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    xx = x.to(ct)
    wq, wk, wv = w_q.to(ct), w_k.to(ct), w_v.to(ct)
    k_cache, v_cache, outs = None, None, []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = xx[:, start:stop]
        q = _split(xc @ wq, num_heads)
        k_new, v_new = _split(xc @ wk, num_heads), _split(xc @ wv, num_heads)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=2)
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=2)
        qi = torch.arange(start, stop)[:, None]  # absolute query positions
        kj = torch.arange(stop)[None, :]
        ctx = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=kj <= qi)
        outs.append(ctx.transpose(1, 2).flatten(2))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    x64 = x.double()
    q_all = (x64 @ w_q.double()).view(B, N, H, dh)
    k_all = (x64 @ w_k.double()).view(B, N, H, dh)
    v_all = (x64 @ w_v.double()).view(B, N, H, dh)
    pieces = []
    pos = 0
    while pos < N:
        end = min(pos + chunk_size, N)
        q = q_all[:, pos:end]  # (B, C, H, dh)
        k, v = k_all[:, :end], v_all[:, :end]  # the cache so far, this chunk included
        s = torch.einsum("bchd,bkhd->bhck", q, k) / math.sqrt(dh)
        bad = torch.arange(end)[None, :] > torch.arange(pos, end)[:, None]
        s = s.masked_fill(bad, float("-inf"))
        p = torch.softmax(s, dim=-1)
        pieces.append(torch.einsum("bhck,bkhd->bchd", p, v).reshape(B, end - pos, D))
        pos = end
    return (torch.cat(pieces, dim=1) @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "scores_only_flops",
          "counts only the score products q . k (2 B H N d FLOPs) and forgets the weighted "
          "sum over the values, halving the intensity",
          intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "query_heads_in_bytes",
          "counts the bytes of K and V with num_heads instead of num_kv_heads, as if every "
          "query head had its own cache, so GQA/MQA brings no gain",
          intensity_query_heads_in_bytes),
    Entry("decode_attention_intensity", "wrong", "reads_only_keys",
          "drops the factor 2 in the bytes: only the keys are counted as read, not the values",
          intensity_reads_only_keys),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with // instead of /, returning a truncated int instead of "
          "a float",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "denominator_without_parentheses",
          "writes flops / 2 * batch * kv_heads * ... without parentheses round the byte "
          "count, so it multiplies by most of the bytes instead of dividing by them",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "counts_query_and_output_bytes",
          "adds the bytes of the new queries and outputs to the denominator; the contract "
          "divides by the bytes of K and V read from the cache only",
          intensity_counts_q_and_out),
    Entry("decode_attention_intensity", "right", "closed_form_2H_over_G_bytes", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "exact_fraction", None, intensity_fraction),
    Entry("paged_attention", "wrong", "attends_whole_pages",
          "gathers the sequence's pages but never cuts them to the first seq_len keys, so the "
          "stale slots at the end of the last page are attended too",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "repeat_instead_of_repeat_interleave",
          "expands the K/V heads with .repeat (tiling: head h reads group h % G) instead of "
          "repeat_interleave (head h reads group h // (H // G))",
          paged_repeat_tiles_heads),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "looks key t up at page block_table[b, t % page_size], slot t // page_size: the "
          "page index and the slot are swapped (and the slot can run past the page, raising "
          "IndexError)",
          paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "scale_by_page_size",
          "scales the scores by 1/sqrt(k_pages.shape[2]), the page size, instead of "
          "1/sqrt(d) = 1/sqrt(k_pages.shape[-1])",
          paged_scale_by_page_size),
    Entry("paged_attention", "wrong", "pages_reshaped_without_permute",
          "reshapes the gathered (p, G, page_size, d) pages straight to (G, p * page_size, d) "
          "without moving the G axis first, so keys of different K/V heads and pages are mixed",
          paged_reshape_without_permute),
    Entry("paged_attention", "wrong", "longest_length_for_every_sequence",
          "uses the longest seq_len of the batch for every sequence (as if the batch were "
          "padded), so shorter sequences attend to slots they do not own",
          paged_longest_length_for_all),
    Entry("paged_attention", "right", "flat_slot_gather_einsum", None, paged_flat_slot_index),
    Entry("paged_attention", "right", "padded_dense_sdpa_mask", None, paged_dense_padded_sdpa),
    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "calls F.scaled_dot_product_attention(..., is_causal=True) on a (C, stop) chunk: "
          "its causal mask is aligned top-left, so later chunks see almost none of the "
          "earlier keys",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "no_kv_cache",
          "attends each chunk only to its own keys and values, never to the cached keys of "
          "earlier chunks",
          prefill_no_cache),
    Entry("chunked_prefill", "wrong", "ragged_last_chunk_dropped",
          "loops over N // chunk_size full chunks only, so the queries of a shorter last "
          "chunk are never computed (and with chunk_size > N there is no chunk at all and "
          "torch.cat raises)",
          prefill_drops_last_chunk),
    Entry("chunked_prefill", "wrong", "heads_merged_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2), mixing positions and heads",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "keys_projected_with_w_q",
          "copy-pastes the query line for the keys and caches x_c @ w_q instead of x_c @ w_k",
          prefill_keys_from_w_q),
    Entry("chunked_prefill", "right", "sdpa_bottom_right_bool_mask", None,
          prefill_sdpa_explicit_mask),
    Entry("chunked_prefill", "right", "einsum_float64_while_loop", None, prefill_einsum_float64),
]
