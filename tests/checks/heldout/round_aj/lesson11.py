"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def intensity_kv_heads_ignored(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
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


def intensity_mac_is_one_flop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    macs = batch_size * num_heads * (seq_len * head_dim + seq_len * head_dim)
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / nbytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    traffic = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // traffic


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_counts_new_key(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    keys = seq_len + 1  # the cached keys plus the new token's own key
    flops = 2 * 2 * batch_size * num_heads * keys * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / nbytes


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # everything but the sharing ratio and the element size cancels
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction_per_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    flops = Fraction(0)
    for _seq in range(batch_size):
        for _head in range(num_heads):
            flops += 2 * seq_len * head_dim  # q . k for every cached key
            flops += 2 * seq_len * head_dim  # sum of weight * v
    nbytes = Fraction(batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element * 2)
    return float(flops / nbytes)


# ============================================================ paged_attention: wrong
def paged_full_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[idx].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[idx].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        idx = block_table[b, :n // P].long()
        k = k_pages[idx].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[idx].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        if k.shape[1] == 0:
            continue
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    ct = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros(batch, heads, d, dtype=ct)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pg = block_table[b, :(n + page - 1) // page].long()
        ks = k_pages[pg].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(ct)
        vs = v_pages[pg].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(ct)
        ks = ks.repeat(rep, 1, 1)  # (H, n, d)
        vs = vs.repeat(rep, 1, 1)
        w = torch.softmax(torch.einsum("hd,hnd->hn", q[b].to(ct), ks) / math.sqrt(d), dim=-1)
        res[b] = torch.einsum("hn,hnd->hd", w, vs)
    return res.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[idx].reshape(G, -1, d)[:, :n].to(ct)  # (p, G, P, d) -> (G, p * P, d)
        v = v_pages[idx].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_div_mod_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    group_of = [h // (H // G) for h in range(H)]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
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
        K = torch.stack(keys, 1).to(ct)[group_of]  # (H, n, d)
        V = torch.stack(vals, 1).to(ct)[group_of]
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), K) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", s.softmax(-1), V)
    return out.to(q.dtype)


def paged_longest_length_for_all(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    n = int(seq_lens.max())
    for b in range(B):
        if int(seq_lens[b]) == 0:
            continue
        idx = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[idx].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[idx].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    head_group = torch.arange(H) // (H // G)
    outs = []
    for b in range(B):
        n = int(seq_lens[b])
        t = torch.arange(n)
        pages = block_table[b].long()[t // P]
        slots = t % P
        K = k_pages[pages, :, slots].double()  # (n, G, d)
        V = v_pages[pages, :, slots].double()
        K, V = K[:, head_group], V[:, head_group]  # (n, H, d)
        if n == 0:
            outs.append(torch.zeros(H, d, dtype=torch.float64))
            continue
        s = torch.einsum("hd,nhd->hn", q[b].double(), K) / math.sqrt(d)
        p = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("hn,nhd->hd", p, V))
    return torch.stack(outs).to(q.dtype)


def paged_masked_table(q, k_pages, v_pages, block_table, seq_lens):
    """Reads every page in each row of the table and hides positions past the length."""
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    table = block_table.long()
    K = k_pages[table].double()  # (B, max_pages, G, P, d)
    V = v_pages[table].double()
    K = K.permute(0, 2, 1, 3, 4).flatten(2, 3)  # (B, G, max_pages * P, d)
    V = V.permute(0, 2, 1, 3, 4).flatten(2, 3)
    qg = q.double().view(B, G, rep, d)  # head h = g * rep + r
    s = torch.einsum("bgrd,bgtd->bgrt", qg, K) / math.sqrt(d)
    pos = torch.arange(K.shape[2])
    valid = pos[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    o = torch.einsum("bgrt,bgtd->bgrd", p, V)
    return o.reshape(B, H, d).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_values_with_w_k(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros(B, num_heads, N, dh, dtype=ct)
    vc = torch.zeros(B, num_heads, N, dh, dtype=ct)
    pieces = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e].to(ct)
        q = (xc @ w_q.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        kc[:, :, s:e] = (xc @ w_k.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        vc[:, :, s:e] = (xc @ w_k.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        sc = q @ kc[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.arange(e)[None, :] <= torch.arange(s, e)[:, None]
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, -1) @ vc[:, :, :e]
        pieces.append(ctx.transpose(1, 2).reshape(B, e - s, D))
    return (torch.cat(pieces, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_floor_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros(B, num_heads, N, dh, dtype=ct)
    vc = torch.zeros(B, num_heads, N, dh, dtype=ct)
    pieces = []
    for c in range(max(N // chunk_size, 1)):
        s = c * chunk_size
        e = min(s + chunk_size, N)
        xc = x[:, s:e].to(ct)
        q = (xc @ w_q.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        kc[:, :, s:e] = (xc @ w_k.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        vc[:, :, s:e] = (xc @ w_v.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        sc = q @ kc[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.arange(e)[None, :] <= torch.arange(s, e)[:, None]
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, -1) @ vc[:, :, :e]
        pieces.append(ctx.transpose(1, 2).reshape(B, e - s, D))
    return (torch.cat(pieces, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_cache_written_after(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e].to(ct)
        q = (xc @ w_q.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        scores = q @ k_cache[:, :, :e].transpose(-2, -1) / math.sqrt(dh)
        ok = torch.arange(e)[None, :] <= torch.arange(s, e)[:, None]
        scores = scores.masked_fill(~ok, -math.inf)
        ctx = torch.softmax(scores, -1) @ v_cache[:, :, :e]
        # now store this chunk's keys and values for the next chunks
        k_cache[:, :, s:e] = (xc @ w_k.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        v_cache[:, :, s:e] = (xc @ w_v.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        outs.append(ctx.transpose(1, 2).reshape(B, e - s, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e].to(ct)
        q = (xc @ w_q.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        ks.append((xc @ w_k.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2))
        vs.append((xc @ w_v.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(torch.arange(e)[None, :] > torch.arange(s, e)[:, None], -math.inf)
        ctx = torch.softmax(sc, -1) @ v  # (B, H, C, dh)
        outs.append(ctx.reshape(B, e - s, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    res = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e].to(ct)
        q = (xc @ w_q.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        kc[:, :, s:e] = (xc @ w_k.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        vc[:, :, s:e] = (xc @ w_v.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        sc = q @ kc[:, :, :e].transpose(-2, -1) / math.sqrt(D)
        sc = sc.masked_fill(torch.arange(e)[None, :] > torch.arange(s, e)[:, None], -math.inf)
        res.append((torch.softmax(sc, -1) @ vc[:, :, :e]).transpose(1, 2).reshape(B, e - s, D))
    return (torch.cat(res, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros(B, num_heads, N, dh, dtype=ct)
    vc = torch.zeros(B, num_heads, N, dh, dtype=ct)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e].to(ct)
        q = (xc @ w_q.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        kc[:, :, s:e] = (xc @ w_k.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        vc[:, :, s:e] = (xc @ w_v.to(ct)).view(B, e - s, num_heads, dh).transpose(1, 2)
        ctx = F.scaled_dot_product_attention(q, kc[:, :, :e], vc[:, :, :e], is_causal=True)
        outs.append(ctx.transpose(1, 2).reshape(B, e - s, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


# ============================================================ chunked_prefill: right
def prefill_sdpa_explicit_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    x64 = x.double()
    heads = lambda t: t.unflatten(-1, (num_heads, dh)).transpose(1, 2)  # noqa: E731
    k_cache = x64.new_zeros(B, num_heads, N, dh)
    v_cache = x64.new_zeros(B, num_heads, N, dh)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x64[:, s:e]
        q = heads(xc @ w_q.double())
        k_cache[:, :, s:e] = heads(xc @ w_k.double())
        v_cache[:, :, s:e] = heads(xc @ w_v.double())
        allowed = torch.arange(e)[None, :] <= torch.arange(s, e)[:, None]  # (C, e)
        ctx = F.scaled_dot_product_attention(q, k_cache[:, :, :e], v_cache[:, :, :e],
                                             attn_mask=allowed)
        outs.append(ctx.transpose(1, 2).flatten(2))
    return (torch.cat(outs, dim=1) @ w_o.double()).to(x.dtype)


def prefill_list_cache_logsumexp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    wq, wk, wv, wo = (w.to(torch.float64) for w in (w_q, w_k, w_v, w_o))
    cache_k, cache_v = [], []
    out = []
    pos = 0
    while pos < N:
        end = min(pos + chunk_size, N)
        xc = x[:, pos:end].to(torch.float64)
        C = end - pos
        q = (xc @ wq).reshape(B, C, num_heads, dh)
        cache_k.append((xc @ wk).reshape(B, C, num_heads, dh))
        cache_v.append((xc @ wv).reshape(B, C, num_heads, dh))
        K = torch.cat(cache_k, dim=1)  # (B, end, H, dh)
        V = torch.cat(cache_v, dim=1)
        s = torch.einsum("bqhd,bkhd->bhqk", q, K) / math.sqrt(dh)
        future = torch.arange(end)[None, :] > (torch.arange(C)[:, None] + pos)
        s = s.masked_fill(future, -math.inf)
        p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
        out.append(torch.einsum("bhqk,bkhd->bqhd", p, V).reshape(B, C, D))
        pos = end
    return (torch.cat(out, dim=1) @ wo).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "bytes_per_query_head",
          "counts the K/V bytes with num_heads instead of num_kv_heads, as if every query "
          "head read its own keys and values: GQA's sharing never shows", intensity_kv_heads_ignored),
    Entry("decode_attention_intensity", "wrong", "reads_only_keys",
          "counts only the bytes of K read from the cache and forgets V, doubling the "
          "intensity", intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "multiply_add_as_one_flop",
          "counts one multiply-add as 1 FLOP instead of 2, halving the intensity",
          intensity_mac_is_one_flop),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, returning a truncated int instead of a float "
          "(0.5 becomes 0)", intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "denominator_not_parenthesised",
          "writes flops / 2 * B * G * N * d * bytes, which divides by 2 only and multiplies by "
          "the rest: the byte count needs parentheses", intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "counts_the_new_key",
          "counts seq_len + 1 keys in the FLOPs (the new token's own key as well) but seq_len "
          "in the bytes, so the ratio is off by (N + 1) / N", intensity_counts_new_key),
    Entry("decode_attention_intensity", "right", "closed_form_ratio", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_loop", None,
          intensity_fraction_per_head),

    Entry("paged_attention", "wrong", "whole_last_page",
          "reads every slot of the sequence's pages and never cuts at seq_lens[b], so the "
          "stale slots after the last key of the last page are attended too", paged_full_pages),
    Entry("paged_attention", "wrong", "floor_page_count",
          "takes seq_lens[b] // page_size pages instead of rounding up, so the keys in a "
          "partly filled last page are dropped (and a sequence shorter than a page gives "
          "zeros)", paged_floor_pages),
    Entry("paged_attention", "wrong", "repeat_instead_of_repeat_interleave",
          "expands the KV heads with .repeat(H // G, 1, 1), which gives head h group h % G, "
          "instead of repeat_interleave, which gives group h // (H // G)",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "pages_reshaped_without_transpose",
          "reshapes the gathered (pages, G, page_size, d) block straight to (G, -1, d) "
          "without moving G in front, so KV heads and pages get mixed up",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "finds key t at page block_table[b, t % page_size], slot t // page_size: the // "
          "and % are swapped (here t % page_size runs past the table's columns and it raises an "
          "IndexError; elsewhere it reads the wrong keys)",
          paged_div_mod_swapped),
    Entry("paged_attention", "wrong", "longest_length_for_every_sequence",
          "uses seq_lens.max() as the length of every sequence, so shorter ones attend to "
          "stale slots and arbitrary table entries past their end", paged_longest_length_for_all),
    Entry("paged_attention", "right", "per_token_gather", None, paged_token_gather),
    Entry("paged_attention", "right", "whole_table_masked", None, paged_masked_table),

    Entry("chunked_prefill", "wrong", "values_projected_with_w_k",
          "copy-paste slip: the cached values are x_chunk @ w_k instead of x_chunk @ w_v",
          prefill_values_with_w_k),
    Entry("chunked_prefill", "wrong", "floor_chunk_count",
          "loops over N // chunk_size chunks, so the ragged last chunk is never computed and "
          "the output is missing its last rows", prefill_floor_chunks),
    Entry("chunked_prefill", "wrong", "cache_written_after_attending",
          "writes the chunk's keys and values into the zero-initialised cache only after "
          "attending, so each chunk scores its own tokens against zero keys and mixes zero "
          "values", prefill_cache_written_after),
    Entry("chunked_prefill", "wrong", "heads_merged_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2) first, mixing tokens and heads", prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_by_d_model),
    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "calls scaled_dot_product_attention(..., is_causal=True) on a chunk against all "
          "cached keys: is_causal aligns the mask top-left, so later chunks see only the first "
          "keys instead of everything up to their own position", prefill_sdpa_is_causal),
    Entry("chunked_prefill", "right", "sdpa_bottom_right_mask_float64", None,
          prefill_sdpa_explicit_mask),
    Entry("chunked_prefill", "right", "list_cache_logsumexp", None,
          prefill_list_cache_logsumexp),
]
