"""Lesson 11 (torch): decode_attention_intensity, paged_attention and chunked_prefill, as learners
write them."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------- decode_attention_intensity: wrong
def intensity_keys_only_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / cache_bytes


def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim  # q . k for every cached key
    cache_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / cache_bytes


def intensity_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / cache_bytes


def intensity_per_element(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    elements = 2 * batch_size * num_kv_heads * seq_len * head_dim
    return flops / elements


def intensity_integer_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // cache_bytes


def intensity_counts_query_and_output(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                      bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q_and_out = 2 * batch_size * num_heads * head_dim * bytes_per_element
    return flops / (cache_bytes + q_and_out)


def intensity_bytes_over_flops(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return cache_bytes / flops


# ----------------------------------------------------------- decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)  # N, B and d cancel


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query_head = Fraction(2 * seq_len * head_dim + 2 * seq_len * head_dim)
    flops = per_query_head * num_heads * batch_size
    bytes_read = Fraction(2 * seq_len * head_dim * bytes_per_element) * num_kv_heads * batch_size
    return float(flops / bytes_read)


# ----------------------------------------------------------- paged_attention helpers
def _gather(pool, block_table, b, n, page_size, groups, d, compute):
    """(G, n, d) keys (or values) of sequence b, in order."""
    t = torch.arange(n, device=pool.device)
    pages = block_table[b, t // page_size].long()
    return pool[pages, :, t % page_size].transpose(0, 1).to(compute)


def _attend_one(q_b, k, v, heads, groups, d):
    k = k.repeat_interleave(heads // groups, dim=0)  # (H, n, d)
    v = v.repeat_interleave(heads // groups, dim=0)
    scores = (k @ q_b[:, :, None])[..., 0] / math.sqrt(d)  # (H, n)
    return (torch.softmax(scores, dim=-1)[:, None, :] @ v)[:, 0]


# ----------------------------------------------------------- paged_attention: wrong
def paged_ignores_seq_lens(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(batch, heads, d, dtype=compute, device=q.device)
    for b in range(batch):
        n = block_table.shape[1] * page_size  # every page listed in the table
        k = _gather(k_pages, block_table, b, n, page_size, groups, d, compute)
        v = _gather(v_pages, block_table, b, n, page_size, groups, d, compute)
        out[b] = _attend_one(q[b].to(compute), k, v, heads, groups, d)
    return out.to(q.dtype)


def paged_reads_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(batch, heads, d, dtype=compute, device=q.device)
    for b in range(batch):
        n_pages = math.ceil(int(seq_lens[b]) / page_size)
        if n_pages == 0:
            continue
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d).to(compute)  # whole pages
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d).to(compute)
        out[b] = _attend_one(q[b].to(compute), k, v, heads, groups, d)
    return out.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(batch, heads, d, dtype=compute, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        pages = block_table[b, : n // page_size].long()  # full pages only
        if len(pages) == 0:
            continue
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        out[b] = _attend_one(q[b].to(compute), k, v, heads, groups, d)
    return out.to(q.dtype)


def paged_tiled_head_mapping(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(batch, heads, d, dtype=compute, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k = _gather(k_pages, block_table, b, n, page_size, groups, d, compute)
        v = _gather(v_pages, block_table, b, n, page_size, groups, d, compute)
        kv_head = torch.arange(heads, device=q.device) % groups  # head h reads group h % G
        scores = (k[kv_head] @ q[b].to(compute)[:, :, None])[..., 0] / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1)[:, None, :] @ v[kv_head])[:, 0]
    return out.to(q.dtype)


def paged_nan_for_empty_sequence(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    max_len = block_table.shape[1] * page_size
    compute = torch.promote_types(q.dtype, torch.float32)
    t = torch.arange(max_len, device=q.device)
    pages = block_table[:, t // page_size].long()  # (B, T)
    k = k_pages[pages, :, t % page_size].to(compute)  # (B, T, G, d)
    v = v_pages[pages, :, t % page_size].to(compute)
    k = k.repeat_interleave(heads // groups, dim=2)  # (B, T, H, d)
    v = v.repeat_interleave(heads // groups, dim=2)
    scores = torch.einsum("bhd,bthd->bht", q.to(compute), k) / math.sqrt(d)
    valid = t[None, :] < seq_lens[:, None].to(q.device)  # (B, T)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # a length-0 row is all -inf: NaN
    return torch.einsum("bht,bthd->bhd", weights, v).to(q.dtype)


def paged_ignores_block_table(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(batch, heads, d, dtype=compute, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n, device=q.device)
        pages = t // page_size  # the logical page number used as the physical one
        k = k_pages[pages, :, t % page_size].transpose(0, 1).to(compute)
        v = v_pages[pages, :, t % page_size].transpose(0, 1).to(compute)
        out[b] = _attend_one(q[b].to(compute), k, v, heads, groups, d)
    return out.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(batch, heads, d, dtype=compute, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, : math.ceil(n / page_size)].long()
        k = k_pages[pages].reshape(groups, -1, d)[:, :n].to(compute)  # (p, G, P, d) -> (G, ...)
        v = v_pages[pages].reshape(groups, -1, d)[:, :n].to(compute)
        out[b] = _attend_one(q[b].to(compute), k, v, heads, groups, d)
    return out.to(q.dtype)


def paged_page_and_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(batch, heads, d, dtype=compute, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n, device=q.device)
        pages = block_table[b, t % page_size].long()
        slots = t // page_size
        k = k_pages[pages, :, slots].transpose(0, 1).to(compute)
        v = v_pages[pages, :, slots].transpose(0, 1).to(compute)
        out[b] = _attend_one(q[b].to(compute), k, v, heads, groups, d)
    return out.to(q.dtype)


# ----------------------------------------------------------- paged_attention: right
def paged_dense_masked_guarded(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    max_len = block_table.shape[1] * page_size
    t = torch.arange(max_len, device=q.device)
    pages = block_table[:, t // page_size].long()  # (B, T) physical page of every slot
    k = k_pages[pages, :, t % page_size].double()  # (B, T, G, d)
    v = v_pages[pages, :, t % page_size].double()
    qg = q.double().view(batch, groups, heads // groups, d)  # head h = group h // (H/G)
    scores = torch.einsum("bgrd,btgd->bgrt", qg, k) / math.sqrt(d)
    valid = (t[None, :] < seq_lens[:, None].to(q.device))[:, None, None, :]
    scores = scores.masked_fill(~valid, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(scores - top)
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total == 0, torch.ones_like(total), total)
    out = torch.einsum("bgrt,btgd->bgrd", weights, v).reshape(batch, heads, d)
    return out.to(q.dtype)


def paged_page_by_page_online(q, k_pages, v_pages, block_table, seq_lens):
    """Flash-decoding style: visit the pages in table order with a running max and sum."""
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    out = torch.zeros(batch, heads, d, dtype=torch.float32, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        m = torch.full((heads,), -math.inf, device=q.device)
        s = torch.zeros(heads, device=q.device)
        acc = torch.zeros(heads, d, device=q.device)
        qb = q[b].float() / math.sqrt(d)
        for p in range(math.ceil(n / page_size)):
            page = int(block_table[b, p])
            used = min(page_size, n - p * page_size)
            k = k_pages[page, :, :used].float().repeat_interleave(rep, dim=0)  # (H, used, d)
            v = v_pages[page, :, :used].float().repeat_interleave(rep, dim=0)
            sc = torch.einsum("hd,htd->ht", qb, k)
            new_m = torch.maximum(m, sc.amax(dim=-1))
            w = torch.exp(sc - new_m[:, None])
            alpha = torch.exp(m - new_m)
            s = s * alpha + w.sum(dim=-1)
            acc = acc * alpha[:, None] + torch.einsum("ht,htd->hd", w, v)
            m = new_m
        if n:
            out[b] = acc / s[:, None]
    return out.to(q.dtype)


# ----------------------------------------------------------- chunked_prefill helpers
def _bottom_right(n_q, n_k, device):
    return torch.arange(n_k, device=device)[None, :] <= torch.arange(n_q, device=device)[:, None] \
        + (n_k - n_q)


def _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, attend):
    """Shared skeleton: projects each chunk, appends to the cache, calls attend(q, k, v, start,
    stop) for the chunk's context."""
    b, n, d_model = x.shape
    dh = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)

    def split(t):
        return t.reshape(b, -1, num_heads, dh).transpose(1, 2).to(compute)

    k_cache = torch.empty(b, num_heads, n, dh, dtype=compute, device=x.device)
    v_cache = torch.empty(b, num_heads, n, dh, dtype=compute, device=x.device)
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        x_c = x[:, start:stop]
        q = split(x_c @ w_q)
        k_cache[:, :, start:stop] = split(x_c @ w_k)
        v_cache[:, :, start:stop] = split(x_c @ w_v)
        ctx = attend(q, k_cache, v_cache, start, stop)
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


# ----------------------------------------------------------- chunked_prefill: wrong
def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    def attend(q, kc, vc, start, stop):
        return F.scaled_dot_product_attention(q, kc[:, :, :stop], vc[:, :, :stop],
                                              is_causal=True)
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, attend)


def prefill_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    def attend(q, kc, vc, start, stop):
        k, v = kc[:, :, start:stop], vc[:, :, start:stop]
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~_bottom_right(stop - start, stop - start, q.device), -math.inf)
        return torch.softmax(s, dim=-1) @ v
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, attend)


def prefill_full_score_matrix(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)

    def split(t):
        return t.reshape(b, n, num_heads, dh).transpose(1, 2).to(compute)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)  # (B, H, N, N), then cut into chunks
    scores = scores.masked_fill(~_bottom_right(n, n, x.device), -math.inf)
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        ctx = torch.softmax(scores[:, :, start:stop], dim=-1) @ v
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)

    def split(t):
        return t.reshape(b, -1, num_heads, dh).transpose(1, 2).to(compute)

    k_cache, v_cache, outs = [], [], []
    for c in range(n // chunk_size):  # number of chunks
        start, stop = c * chunk_size, (c + 1) * chunk_size
        x_c = x[:, start:stop]
        q = split(x_c @ w_q)
        k_cache.append(split(x_c @ w_k))
        v_cache.append(split(x_c @ w_v))
        k, v = torch.cat(k_cache, dim=2), torch.cat(v_cache, dim=2)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~_bottom_right(stop - start, stop, x.device), -math.inf)
        outs.append((torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, -1, d_model))
    if not outs:
        return x.new_zeros(b, 0, d_model)
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    def attend(q, kc, vc, start, stop):
        k, v = kc[:, :, :stop], vc[:, :, :stop]  # earlier chunks and this one, all visible
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return torch.softmax(s, dim=-1) @ v
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, attend)


def prefill_mask_uses_chunk_size(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    def attend(q, kc, vc, start, stop):
        k, v = kc[:, :, :stop], vc[:, :, :stop]
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        allowed = _bottom_right(chunk_size, stop, q.device)[: stop - start]
        return torch.softmax(s.masked_fill(~allowed, -math.inf), dim=-1) @ v
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, attend)


def prefill_one_sdpa_call(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads

    def split(t):
        return t.reshape(b, n, num_heads, dh).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # the fused kernel "chunks"
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


# ----------------------------------------------------------- chunked_prefill: right
def prefill_sdpa_explicit_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    def attend(q, kc, vc, start, stop):
        mask = _bottom_right(stop - start, stop, q.device)  # earlier chunks all visible
        return F.scaled_dot_product_attention(q, kc[:, :, :stop], vc[:, :, :stop],
                                              attn_mask=mask)
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, attend)


def prefill_online_over_cached_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    def attend(q, kc, vc, start, stop):
        dh = q.shape[-1]
        m = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=q.dtype, device=q.device)
        s = torch.zeros_like(m)
        acc = torch.zeros_like(q)
        for ks in range(0, stop, chunk_size):  # the cache one earlier chunk at a time
            ke = min(ks + chunk_size, stop)
            sc = q @ kc[:, :, ks:ke].transpose(-2, -1) / math.sqrt(dh)
            visible = torch.arange(ks, ke, device=q.device)[None, :] <= \
                torch.arange(start, stop, device=q.device)[:, None]
            sc = sc.masked_fill(~visible, -math.inf)
            new_m = torch.maximum(m, sc.amax(dim=-1, keepdim=True))
            w = torch.exp(sc - new_m)
            alpha = torch.exp(m - new_m)
            s = s * alpha + w.sum(dim=-1, keepdim=True)
            acc = acc * alpha + w @ vc[:, :, ks:ke]
            m = new_m
        return acc / s
    return _chunk_loop(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, attend)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "keys_only_bytes",
          "Counts only the keys' bytes (no factor 2 for the values), doubling the intensity.",
          intensity_keys_only_bytes),
    Entry("decode_attention_intensity", "wrong", "scores_only_flops",
          "Counts the FLOPs of the scores but not of the weighted sum of the values.",
          intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "query_heads_in_bytes",
          "Counts num_heads K/V heads in the bytes read, as if every query head had its own "
          "cache, instead of num_kv_heads.", intensity_query_heads_in_bytes),
    Entry("decode_attention_intensity", "wrong", "per_element_not_byte",
          "Divides by the number of cached elements, forgetting bytes_per_element.",
          intensity_per_element),
    Entry("decode_attention_intensity", "wrong", "integer_division",
          "Divides with //, truncating the intensity to an integer.",
          intensity_integer_division),
    Entry("decode_attention_intensity", "wrong", "adds_query_and_output_bytes",
          "Adds the bytes of the query and the output to the bytes read, which the exercise "
          "counts as K and V only.", intensity_counts_query_and_output),
    Entry("decode_attention_intensity", "wrong", "bytes_over_flops",
          "Divides bytes by FLOPs instead of FLOPs by bytes.", intensity_bytes_over_flops),
    Entry("decode_attention_intensity", "right", "closed_form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fractions", None, intensity_fraction),

    Entry("paged_attention", "wrong", "ignores_seq_lens",
          "Attends over every slot of every page in the table row, ignoring seq_lens, so stale "
          "slots and pages are read.", paged_ignores_seq_lens),
    Entry("paged_attention", "wrong", "reads_whole_last_page",
          "Takes the right pages but keeps every slot of the last one, reading the stale slots "
          "past seq_lens[b].", paged_reads_whole_last_page),
    Entry("paged_attention", "wrong", "floor_page_count",
          "Counts the pages with seq_len // page_size (floor instead of ceil), dropping the "
          "keys on a partly filled last page.", paged_floor_page_count),
    Entry("paged_attention", "wrong", "tiled_head_mapping",
          "Maps query head h to KV head h % G instead of h // (H // G).",
          paged_tiled_head_mapping),
    Entry("paged_attention", "wrong", "nan_for_empty_sequence",
          "Masks the slots past each length with -inf but never guards a sequence of length "
          "0, whose row is all -inf and gives NaN instead of zeros.",
          paged_nan_for_empty_sequence),
    Entry("paged_attention", "wrong", "ignores_block_table",
          "Uses the logical page number t // page_size as the physical page instead of looking "
          "it up in block_table.", paged_ignores_block_table),
    Entry("paged_attention", "wrong", "reshape_without_transpose",
          "Reshapes the gathered (pages, G, page_size, d) block straight to (G, -1, d) without "
          "moving the head axis first, mixing heads and pages.",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "Swaps the two indices: looks up block_table at t % page_size and uses t // page_size "
          "as the slot.", paged_page_and_slot_swapped),
    Entry("paged_attention", "right", "dense_masked_guarded_float64", None,
          paged_dense_masked_guarded),
    Entry("paged_attention", "right", "page_by_page_online", None, paged_page_by_page_online),

    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "Calls scaled_dot_product_attention with is_causal=True for a chunk against all "
          "cached keys; its mask is aligned top-left, so later chunks barely see the cache.",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "own_chunk_only",
          "Attends only to the chunk's own keys and values, forgetting the cached earlier "
          "chunks.", prefill_own_chunk_only),
    Entry("chunked_prefill", "wrong", "full_score_matrix",
          "Computes the full N x N score matrix up front and only cuts the softmax into "
          "chunks.", prefill_full_score_matrix),
    Entry("chunked_prefill", "wrong", "drops_ragged_chunk",
          "Loops over N // chunk_size chunks, so the last, shorter chunk is never computed.",
          prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "no_mask_inside_chunk",
          "Lets each query see all of its own chunk (no causal mask inside the chunk), so it "
          "attends to later tokens of the chunk.", prefill_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "mask_uses_chunk_size",
          "Builds each chunk's mask with chunk_size rows instead of the chunk's actual length, "
          "so the shorter last chunk's queries are placed at the wrong positions.",
          prefill_mask_uses_chunk_size),
    Entry("chunked_prefill", "wrong", "one_sdpa_call",
          "Runs one causal scaled_dot_product_attention over the whole sequence instead of "
          "processing it chunk by chunk.", prefill_one_sdpa_call),
    Entry("chunked_prefill", "right", "sdpa_explicit_bottom_right_mask", None,
          prefill_sdpa_explicit_mask),
    Entry("chunked_prefill", "right", "online_over_cached_chunks", None,
          prefill_online_over_cached_chunks),
]
