"""Lesson 11 (serving, torch): decode_attention_intensity, paged_attention, chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- decode_attention_intensity
def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def dai_keys_only_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def dai_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return score_flops / kv_bytes


def dai_query_heads_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


def dai_elements(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    elements = 2 * batch_size * num_kv_heads * seq_len * head_dim
    return flops / elements


def dai_macs(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    macs = 2 * batch_size * num_heads * seq_len * head_dim  # scores + weighted sum
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / nbytes


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def dai_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_query = Fraction(2 * seq_len * head_dim) * 2
    flops = per_query * batch_size * num_heads
    read = Fraction(batch_size * num_kv_heads * seq_len) * head_dim * 2 * bytes_per_element
    return float(flops / read)


# ----------------------------------------------------------------------------- paged_attention
def _c(q):
    return torch.promote_types(q.dtype, torch.float32)


def _seq_kv(pages_tensor, page_ids, n, groups, d):
    return pages_tensor[page_ids].transpose(0, 1).reshape(groups, -1, d)[:, :n]


def pa_swapped_index(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    c = _c(q)
    out = torch.zeros(B, H, d, dtype=c)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = block_table[b, t % P]  # slot and page swapped
            slot = t // P
            ks.append(k_pages[page, :, slot])
            vs.append(v_pages[page, :, slot])
        k = torch.stack(ks, 1).to(c).repeat_interleave(H // G, 0)
        v = torch.stack(vs, 1).to(c).repeat_interleave(H // G, 0)
        s = (k @ q[b].to(c)[:, :, None])[..., 0] / math.sqrt(d)
        out[b] = (torch.softmax(s, -1)[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def pa_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    c = _c(q)
    out = torch.zeros(B, H, d, dtype=c)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ids = block_table[b, : math.ceil(n / P)].long()
        k = k_pages[ids].transpose(0, 1).reshape(G, -1, d).to(c)  # every slot of the pages
        v = v_pages[ids].transpose(0, 1).reshape(G, -1, d).to(c)
        k, v = k.repeat_interleave(H // G, 0), v.repeat_interleave(H // G, 0)
        s = (q[b].to(c)[:, None] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_tiled_heads(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    c = _c(q)
    out = torch.zeros(B, H, d, dtype=c)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ids = block_table[b, : math.ceil(n / P)].long()
        k = _seq_kv(k_pages, ids, n, G, d).to(c)
        v = _seq_kv(v_pages, ids, n, G, d).to(c)
        kv_head = torch.arange(H) % G
        s = torch.einsum("hd,hnd->hn", q[b].to(c), k[kv_head]) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v[kv_head])
    return out.to(q.dtype)


def pa_masked_nan(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    num_pages, G, P, _ = k_pages.shape
    c = _c(q)
    table = block_table.long()
    k = k_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, -1, d).to(c)  # (B, G, max_pages*P, d)
    v = v_pages[table].permute(0, 2, 1, 3, 4).reshape(B, G, -1, d).to(c)
    k = k.repeat_interleave(H // G, 1)
    v = v.repeat_interleave(H // G, 1)
    s = torch.einsum("bhd,bhtd->bht", q.to(c), k) / math.sqrt(d)
    valid = torch.arange(k.shape[2])[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.einsum("bht,bhtd->bhd", w, v).to(q.dtype)


def pa_sorted_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    c = _c(q)
    out = torch.zeros(B, H, d, dtype=c)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ids, _ = torch.sort(block_table[b, : math.ceil(n / P)].long())
        k = _seq_kv(k_pages, ids, n, G, d).to(c).repeat_interleave(H // G, 0)
        v = _seq_kv(v_pages, ids, n, G, d).to(c).repeat_interleave(H // G, 0)
        s = (q[b].to(c)[:, None] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    c = _c(q)
    out = torch.zeros(B, H, d, dtype=c)
    for b in range(B):
        n = int(seq_lens[b])
        n_pages = max(n // P, 1)
        if n == 0:
            continue
        ids = block_table[b, :n_pages].long()
        k = _seq_kv(k_pages, ids, n, G, d).to(c).repeat_interleave(H // G, 0)
        v = _seq_kv(v_pages, ids, n, G, d).to(c).repeat_interleave(H // G, 0)
        s = (q[b].to(c)[:, None] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_token_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(H):
            g = h // rep
            if n == 0:
                continue
            keys = torch.stack([k_pages[int(block_table[b, t // P]), g, t % P] for t in range(n)]).double()
            vals = torch.stack([v_pages[int(block_table[b, t // P]), g, t % P] for t in range(n)]).double()
            s = keys @ q[b, h].double() / math.sqrt(d)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ vals
    return out.to(q.dtype)


def pa_vector_mask(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    c = torch.float64
    table = block_table.long()
    k = k_pages[table].to(c).permute(0, 2, 1, 3, 4).flatten(2, 3)  # (B, G, T, d)
    v = v_pages[table].to(c).permute(0, 2, 1, 3, 4).flatten(2, 3)
    qg = q.to(c).view(B, G, H // G, d)
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = torch.arange(k.shape[2]) < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z == 0, torch.ones_like(z), z)
    return torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(B, H, d).to(q.dtype)


# ----------------------------------------------------------------------------- chunked_prefill
def _sp(t, h):
    B, N, D = t.shape
    return t.view(B, N, h, D // h).transpose(1, 2)


def _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, mask_fn, scale_fn=None, ranges=None,
             keys_upto=None):
    B, N, D = x.shape
    dh = D // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    K = torch.zeros(B, num_heads, N, dh, dtype=c)
    V = torch.zeros(B, num_heads, N, dh, dtype=c)
    outs = []
    starts = ranges(N, chunk_size) if ranges else range(0, N, chunk_size)
    for s0 in starts:
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        q = _sp(xc @ w_q, num_heads).to(c)
        K[:, :, s0:s1] = _sp(xc @ w_k, num_heads).to(c)
        V[:, :, s0:s1] = _sp(xc @ w_v, num_heads).to(c)
        hi = keys_upto(s0, s1) if keys_upto else s1
        k, v = K[:, :, :hi], V[:, :, :hi]
        scale = scale_fn(D, dh) if scale_fn else 1 / math.sqrt(dh)
        sc = q @ k.transpose(-2, -1) * scale
        allowed = mask_fn(s0, s1, hi)
        if allowed is not None:
            sc = sc.masked_fill(~allowed, float("-inf"))
        w = torch.nan_to_num(torch.softmax(sc, -1), nan=0.0)
        outs.append((w @ v).transpose(1, 2).reshape(B, s1 - s0, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def _bottom_right(s0, s1, hi):
    return torch.arange(hi)[None, :] <= torch.arange(s0, s1)[:, None]


def cp_top_left(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size,
                    lambda s0, s1, hi: torch.ones(s1 - s0, hi, dtype=torch.bool).tril())


def cp_earlier_chunks_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, lambda s0, s1, hi: None,
                    keys_upto=lambda s0, s1: s0)


def cp_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, lambda s0, s1, hi: None)


def cp_drops_last(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, _bottom_right,
                    ranges=lambda n, c: range(0, n - c + 1, c) if n >= c else range(0, 1))


def cp_full_then_slice(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    q = _sp(x @ w_q, num_heads).to(c)
    k = _sp(x @ w_k, num_heads).to(c)
    v = _sp(x @ w_v, num_heads).to(c)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)  # (B, H, N, N)
    scores = scores.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        w = torch.softmax(scores[:, :, s0:s1], -1)
        outs.append((w @ v).transpose(1, 2).reshape(B, s1 - s0, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def cp_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, _bottom_right,
                    scale_fn=lambda D, dh: 1 / math.sqrt(D))


def cp_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size]
        C = xc.shape[1]
        q = _sp(xc @ w_q, num_heads)
        ks.append(_sp(xc @ w_k, num_heads))
        vs.append(_sp(xc @ w_v, num_heads))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        L = k.shape[2]
        mask = torch.ones(C, L, dtype=torch.bool).tril(L - C)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1) @ w_o


def cp_online_over_key_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    f = torch.float64
    K = _sp(x @ w_k, num_heads).to(f)
    V = _sp(x @ w_v, num_heads).to(f)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        q = _sp(x[:, s0:s1] @ w_q, num_heads).to(f) / math.sqrt(dh)
        m = torch.full((B, num_heads, s1 - s0, 1), -math.inf, dtype=f)
        l = torch.zeros_like(m)
        acc = torch.zeros(B, num_heads, s1 - s0, dh, dtype=f)
        for j0 in range(0, s1, chunk_size):  # key chunks up to this query chunk
            j1 = min(j0 + chunk_size, s1)
            s = q @ K[:, :, j0:j1].transpose(-2, -1)
            ok = torch.arange(j0, j1)[None, :] <= torch.arange(s0, s1)[:, None]
            s = s.masked_fill(~ok, -math.inf)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            m_safe = torch.where(torch.isinf(m_new), 0.0, m_new)
            p = torch.exp(s - m_safe)
            a = torch.exp(m - m_safe)
            l = l * a + p.sum(-1, keepdim=True)
            acc = acc * a + p @ V[:, :, j0:j1]
            m = m_new
        outs.append((acc / l).transpose(1, 2).reshape(B, s1 - s0, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "floor-division", "Divides FLOPs by bytes with //, returning a truncated int instead of a float.", dai_floor_division),
    Entry("decode_attention_intensity", "wrong", "keys-only-bytes", "Counts only the keys read from the cache, forgetting the values (factor 2 in the bytes).", dai_keys_only_bytes),
    Entry("decode_attention_intensity", "wrong", "scores-only-flops", "Counts only the score FLOPs and forgets the weighted sum over the values.", dai_scores_only),
    Entry("decode_attention_intensity", "wrong", "query-heads-bytes", "Counts K/V bytes for num_heads heads instead of num_kv_heads, ignoring that query heads share K/V.", dai_query_heads_bytes),
    Entry("decode_attention_intensity", "wrong", "elements-not-bytes", "Divides by the number of cached elements, forgetting bytes_per_element.", dai_elements),
    Entry("decode_attention_intensity", "wrong", "multiply-adds", "Counts one multiply-add as one FLOP instead of two.", dai_macs),
    Entry("decode_attention_intensity", "right", "closed-form", None, dai_closed_form),
    Entry("decode_attention_intensity", "right", "fractions", None, dai_fraction),
    Entry("paged_attention", "wrong", "page-slot-swapped", "Swaps the page and slot formulas (page t % page_size, slot t // page_size).", pa_swapped_index),
    Entry("paged_attention", "wrong", "whole-pages", "Attends over every slot of the sequence's pages, including stale slots past seq_len in the last page.", pa_whole_pages),
    Entry("paged_attention", "wrong", "tiled-kv-heads", "Maps query head h to KV head h % G instead of h // (H // G).", pa_tiled_heads),
    Entry("paged_attention", "wrong", "nan-empty-sequence", "Masks invalid slots with -inf without a guard, so a sequence of length 0 gives NaN instead of zeros.", pa_masked_nan),
    Entry("paged_attention", "wrong", "sorted-pages", "Sorts the page ids, reading the pages in pool order instead of the block table's order.", pa_sorted_pages),
    Entry("paged_attention", "wrong", "floor-page-count", "Uses seq_len // page_size pages (floor instead of ceil), dropping the keys in a partly filled last page.", pa_floor_pages),
    Entry("paged_attention", "right", "token-gather-loop", None, pa_token_gather),
    Entry("paged_attention", "right", "vectorised-mask", None, pa_vector_mask),
    Entry("chunked_prefill", "wrong", "top-left-chunk-mask", "Builds each chunk's mask top-left (tril of (C, stop)) instead of bottom-right, so later chunks cannot see most of their cache.", cp_top_left),
    Entry("chunked_prefill", "wrong", "earlier-chunks-only", "Attends only to the cached earlier chunks and not causally to the chunk's own tokens.", cp_earlier_chunks_only),
    Entry("chunked_prefill", "wrong", "no-mask-in-chunk", "Lets every query in a chunk see all keys of its own chunk (no causal mask inside the chunk).", cp_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "drops-last-chunk", "Loops range(0, N - chunk_size + 1, chunk_size), dropping the last partial chunk.", cp_drops_last),
    Entry("chunked_prefill", "wrong", "full-scores-then-slice", "Builds the full N x N score matrix up front and only slices it per chunk.", cp_full_then_slice),
    Entry("chunked_prefill", "wrong", "scale-d-model", "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", cp_scale_dmodel),
    Entry("chunked_prefill", "right", "sdpa-per-chunk", None, cp_sdpa_chunks),
    Entry("chunked_prefill", "right", "online-over-key-chunks", None, cp_online_over_key_chunks),
]
