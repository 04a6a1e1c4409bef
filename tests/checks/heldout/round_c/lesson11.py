"""Round c, lesson 11: decode_attention_intensity, paged_attention, chunked_prefill (torch)."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------ decode_attention_intensity
def _dai(num_heads, num_kv_heads, head_dim, seq_len, batch_size, bpe, *, flops_terms=2,
         flop_per_mac=2, bytes_heads=None, kv_tensors=2, extra_bytes=0, floor=False):
    b, h, g, d, n = batch_size, num_heads, num_kv_heads, head_dim, seq_len
    flops = flops_terms * flop_per_mac * b * h * n * d
    heads_read = g if bytes_heads is None else bytes_heads
    nbytes = kv_tensors * b * heads_read * n * d * bpe + extra_bytes
    return flops // nbytes if floor else flops / nbytes


def dai_integer_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return _dai(num_heads, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element,
                floor=True)


def dai_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return _dai(num_heads, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element,
                flops_terms=1)


def dai_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    return _dai(num_heads, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element,
                bytes_heads=num_heads)


def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return _dai(num_heads, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element,
                kv_tensors=1)


def dai_mac_as_one(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return _dai(num_heads, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element,
                flop_per_mac=1)


def dai_counts_query_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    extra = 2 * batch_size * num_heads * head_dim * bytes_per_element  # q read, out written
    return _dai(num_heads, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element,
                extra_bytes=extra)


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return float(2 * num_heads) / float(num_kv_heads * bytes_per_element)


def dai_per_sequence_loop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 0
    nbytes = 0
    for _ in range(batch_size):
        for _h in range(num_heads):
            flops += 2 * seq_len * head_dim  # q . k for every cached key
            flops += 2 * seq_len * head_dim  # weights times values
        nbytes += num_kv_heads * seq_len * head_dim * bytes_per_element * 2
    return flops / nbytes


# ------------------------------------------------------------------ paged_attention
def _gather_seq(pages_pool, block_table, b, n, page_size, all_pages=False, direct=False):
    num = block_table.shape[1] if all_pages else math.ceil(n / page_size)
    if direct:
        idx = torch.arange(num)
    else:
        idx = block_table[b, :num].long()
    g, d = pages_pool.shape[1], pages_pool.shape[3]
    return pages_pool[idx].transpose(0, 1).reshape(g, -1, d)


def _paged(q, k_pages, v_pages, block_table, seq_lens, *, all_pages=False, tile=False,
           scale=True, direct=False, extra=0):
    bsz, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    n_rep = h // g
    c = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(bsz, h, d, dtype=c)
    for b in range(bsz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        k = _gather_seq(k_pages, block_table, b, n, page_size, all_pages, direct).to(c)
        v = _gather_seq(v_pages, block_table, b, n, page_size, all_pages, direct).to(c)
        if not all_pages:
            k, v = k[:, :n + extra], v[:, :n + extra]
        if tile:
            k, v = k.repeat(n_rep, 1, 1), v.repeat(n_rep, 1, 1)
        else:
            k, v = k.repeat_interleave(n_rep, 0), v.repeat_interleave(n_rep, 0)
        s = q[b].to(c)[:, None, :] @ k.transpose(-2, -1)
        if scale:
            s = s / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_reads_whole_table(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, all_pages=True)


def paged_tiled_heads(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, tile=True)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, scale=False)


def paged_ignores_block_table(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, direct=True)


def paged_one_key_too_many(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, extra=1)


def paged_masked_nan_on_empty(q, k_pages, v_pages, block_table, seq_lens):
    bsz, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    n_rep = h // g
    c = torch.promote_types(q.dtype, torch.float32)
    k = k_pages[block_table.long()]  # (B, max_pages, G, P, d)
    v = v_pages[block_table.long()]
    k = k.permute(0, 2, 1, 3, 4).reshape(bsz, g, -1, d).repeat_interleave(n_rep, 1).to(c)
    v = v.permute(0, 2, 1, 3, 4).reshape(bsz, g, -1, d).repeat_interleave(n_rep, 1).to(c)
    s = (q.to(c)[:, :, None, :] @ k.transpose(-2, -1))[:, :, 0] / math.sqrt(d)  # (B, H, T)
    t = torch.arange(s.shape[-1])
    s = s.masked_fill(t[None, None, :] >= seq_lens.long()[:, None, None], float("-inf"))
    w = torch.softmax(s, -1)
    return (w[:, :, None, :] @ v)[:, :, 0].to(q.dtype)


def paged_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    bsz, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    group_of = [hh // (h // g) for hh in range(h)]
    out = torch.zeros(bsz, h, d, dtype=torch.float64)
    for b in range(bsz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t // page_size])
            ks.append(k_pages[page, :, t % page_size].double())  # (G, d)
            vs.append(v_pages[page, :, t % page_size].double())
        k = torch.stack(ks, dim=1)  # (G, n, d)
        v = torch.stack(vs, dim=1)
        for hh in range(h):
            s = k[group_of[hh]] @ q[b, hh].double() / math.sqrt(d)  # (n,)
            out[b, hh] = torch.softmax(s, 0) @ v[group_of[hh]]
    return out.to(q.dtype)


def paged_masked_guarded(q, k_pages, v_pages, block_table, seq_lens):
    bsz, h, d = q.shape
    g, page_size = k_pages.shape[1], k_pages.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    t = torch.arange(block_table.shape[1] * page_size)
    pages = block_table.long()[:, t // page_size]  # (B, T)
    slots = t % page_size  # (T,)
    k = k_pages[pages, :, slots[None, :].expand_as(pages)]  # (B, T, G, d)
    v = v_pages[pages, :, slots[None, :].expand_as(pages)]
    q_g = q.to(c).reshape(bsz, g, h // g, d)
    s = torch.einsum("bgrd,btgd->bgrt", q_g, k.to(c)) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, 1.0, tot)
    out = torch.einsum("bgrt,btgd->bgrd", w, v.to(c)).reshape(bsz, h, d)
    return out.to(q.dtype)


# ------------------------------------------------------------------ chunked_prefill
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, use_cache=True, mask="bottom",
             drop_tail=False, scale_width=None):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    last = (n // chunk_size) * chunk_size if drop_tail else n
    for start in range(0, last, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _heads(xc @ w_q, num_heads).to(c)
        ks.append(_heads(xc @ w_k, num_heads).to(c))
        vs.append(_heads(xc @ w_v, num_heads).to(c))
        if use_cache:
            k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        else:
            k, v = ks[-1], vs[-1]
        s = q @ k.transpose(-2, -1) / math.sqrt(scale_width or dh)
        nq, nk = s.shape[-2], s.shape[-1]
        if mask == "bottom":
            allowed = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
        elif mask == "top":
            allowed = torch.ones(nq, nk, dtype=torch.bool).tril()
        else:
            allowed = torch.ones(nq, nk, dtype=torch.bool)
        s = s.masked_fill(~allowed, float("-inf"))
        ctx = torch.softmax(s, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, use_cache=False)


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    c = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _heads(xc @ w_q, num_heads).to(c)
        ks.append(_heads(xc @ w_k, num_heads).to(c))
        vs.append(_heads(xc @ w_v, num_heads).to(c))
        ctx = F.scaled_dot_product_attention(q, torch.cat(ks, 2), torch.cat(vs, 2),
                                             is_causal=True)
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, mask="none")


def prefill_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, drop_tail=True)


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, scale_width=x.shape[-1])


def prefill_full_scores_up_front(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    q_all = _heads(x @ w_q, num_heads).to(c)
    k = _heads(x @ w_k, num_heads).to(c)
    v = _heads(x @ w_v, num_heads).to(c)
    scores_all = q_all @ k.transpose(-2, -1) / math.sqrt(dh)  # (B, H, N, N), once
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        s = scores_all[:, :, start:stop, :stop]
        allowed = torch.ones(stop - start, stop, dtype=torch.bool).tril(start)
        s = s.masked_fill(~allowed, float("-inf"))
        ctx = torch.softmax(s, -1) @ v[:, :, :stop]
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    c = torch.promote_types(x.dtype, torch.float32)
    k_all = torch.empty(b, num_heads, 0, d_model // num_heads, dtype=c)
    v_all = k_all.clone()
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _heads(xc @ w_q, num_heads).to(c)
        k_all = torch.cat([k_all, _heads(xc @ w_k, num_heads).to(c)], dim=2)
        v_all = torch.cat([v_all, _heads(xc @ w_v, num_heads).to(c)], dim=2)
        qpos = torch.arange(start, stop)[:, None]
        allowed = torch.arange(stop)[None, :] <= qpos  # (C, stop), absolute positions
        ctx = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=allowed)
        outs.append(ctx.transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_online_over_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    f = torch.float64
    ks, vs, outs = [], [], []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = _heads(xc @ w_q, num_heads).to(f) / math.sqrt(dh)
        ks.append(_heads(xc @ w_k, num_heads).to(f))
        vs.append(_heads(xc @ w_v, num_heads).to(f))
        m = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=f)
        l = torch.zeros_like(m)
        acc = torch.zeros_like(q)
        for j, (kj, vj) in enumerate(zip(ks, vs)):  # earlier chunks, then its own
            s = q @ kj.transpose(-2, -1)
            if j == len(ks) - 1:
                s = s.masked_fill(torch.ones(s.shape[-2], s.shape[-1],
                                             dtype=torch.bool).triu(1), -math.inf)
            new_m = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - new_m)
            alpha = torch.exp(m - new_m)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ vj
            m = new_m
        outs.append((acc / l).transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "integer_division", "Divides with //, returning a truncated whole number instead of a float ratio.", dai_integer_division),
    Entry("decode_attention_intensity", "wrong", "scores_only", "Counts only the score product's FLOPs and forgets the weighted sum over the values.", dai_scores_only),
    Entry("decode_attention_intensity", "wrong", "bytes_per_query_head", "Counts the bytes read with num_heads instead of num_kv_heads, ignoring that query heads share K/V heads.", dai_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "keys_only", "Counts only the keys read from the cache, forgetting the values.", dai_keys_only),
    Entry("decode_attention_intensity", "wrong", "mac_as_one_flop", "Counts a multiply-add as one FLOP instead of two.", dai_mac_as_one),
    Entry("decode_attention_intensity", "wrong", "counts_query_bytes", "Adds the bytes of the query read and the output written to the denominator, which should hold only the K and V cache reads.", dai_counts_query_bytes),
    Entry("decode_attention_intensity", "right", "closed_form", None, dai_closed_form),
    Entry("decode_attention_intensity", "right", "per_sequence_loop", None, dai_per_sequence_loop),
    Entry("paged_attention", "wrong", "reads_whole_table", "Attends over every page in the block-table row instead of only the first seq_lens[b] keys, so stale slots are included.", paged_reads_whole_table),
    Entry("paged_attention", "wrong", "tiled_heads", "Maps query head h to KV head h % G (tiling) instead of h // (H // G).", paged_tiled_heads),
    Entry("paged_attention", "wrong", "no_scaling", "Forgets to scale the scores by 1/sqrt(d).", paged_no_scale),
    Entry("paged_attention", "wrong", "ignores_block_table", "Reads pool pages 0, 1, 2, ... directly instead of looking up the sequence's pages in block_table.", paged_ignores_block_table),
    Entry("paged_attention", "wrong", "one_key_too_many", "Attends over seq_lens[b] + 1 keys, as if the length did not count the newest token.", paged_one_key_too_many),
    Entry("paged_attention", "wrong", "nan_for_empty_sequence", "Masks keys past the length with -inf but does not guard a length-0 sequence, whose softmax becomes NaN instead of zeros.", paged_masked_nan_on_empty),
    Entry("paged_attention", "right", "token_loop", None, paged_token_loop),
    Entry("paged_attention", "right", "masked_gather_guarded", None, paged_masked_guarded),
    Entry("chunked_prefill", "wrong", "no_cache", "Each chunk attends only to its own keys and values, forgetting the cache of earlier chunks.", prefill_no_cache),
    Entry("chunked_prefill", "wrong", "sdpa_is_causal", "Calls scaled_dot_product_attention with is_causal=True on a (chunk, cached keys) problem, whose mask is aligned top-left, so later chunks cannot see most earlier keys.", prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "no_mask_within_chunk", "Applies no causal mask inside a chunk, so queries see later tokens of their own chunk.", prefill_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "drops_ragged_chunk", "Loops over full chunks only, dropping the last tokens when N is not a multiple of chunk_size.", prefill_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "scale_by_d_model", "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "full_scores_up_front", "Computes the full N x N score matrix once and then runs the softmax chunk by chunk, which defeats the point of never building an N x N score tensor.", prefill_full_scores_up_front),
    Entry("chunked_prefill", "right", "sdpa_per_chunk", None, prefill_sdpa_chunks),
    Entry("chunked_prefill", "right", "online_over_chunks", None, prefill_online_over_chunks),
]
