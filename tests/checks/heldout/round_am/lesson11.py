"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ========================================================== decode_attention_intensity -- wrong
def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element  # K
    return flops / bytes_read


def intensity_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    cache = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / cache


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    mix_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + mix_flops) // kv_bytes


def intensity_macs_as_flops(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    scores = batch_size * num_heads * seq_len * head_dim  # one per multiply-add
    weighted_sum = batch_size * num_heads * seq_len * head_dim
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(scores + weighted_sum) / read


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_cache_shared_by_batch(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                    bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element  # read once
    return flops / kv


# ========================================================== decode_attention_intensity -- right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # 4 B H N d FLOPs over 2 B G N d bytes: B, N and d cancel.
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_query_flops = 2 * head_dim * seq_len * 2  # q.k for each key, then sum of p v
    queries = batch_size * num_heads
    per_kv_head_bytes = seq_len * head_dim * bytes_per_element * 2  # K and V
    ratio = Fraction(per_query_flops * queries, per_kv_head_bytes * batch_size * num_kv_heads)
    return float(ratio)


# ===================================================================== paged_attention -- wrong
def paged_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (k @ q[b].to(ct).unsqueeze(-1)).squeeze(-1) / math.sqrt(d)  # (H, pages * P)
        out[b] = torch.softmax(s, dim=-1).unsqueeze(1).matmul(v).squeeze(1)
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, : (n + page_size - 1) // page_size].long()
        k = k_pages[used].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(compute)
        v = v_pages[used].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat(rep, 1, 1)
        v = v.repeat(rep, 1, 1)
        scores = q[b].to(compute)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_reshape_without_group_move(q, k_pages, v_pages, block_table, seq_lens):
    nb, nh, hd = q.shape
    ng, ps = k_pages.shape[1], k_pages.shape[2]
    f = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros(nb, nh, hd, dtype=f)
    for b in range(nb):
        L = int(seq_lens[b])
        if L == 0:
            continue
        ids = block_table[b, :math.ceil(L / ps)].long()
        keys = k_pages[ids].reshape(ng, -1, hd)[:, :L].to(f)
        vals = v_pages[ids].reshape(ng, -1, hd)[:, :L].to(f)
        keys = keys.repeat_interleave(nh // ng, 0)
        vals = vals.repeat_interleave(nh // ng, 0)
        w = torch.softmax(torch.einsum("hd,hnd->hn", q[b].to(f), keys) / math.sqrt(hd), -1)
        res[b] = torch.einsum("hn,hnd->hd", w, vals)
    return res.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((B, H, d), dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        n_pages = n // P
        if n_pages == 0:
            continue
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_table_column(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    compute = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=compute)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        n_pages = math.ceil(n / page_size)
        pages = block_table[:, b][:n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        v = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n].to(compute)
        k = k.repeat_interleave(heads // groups, dim=0)
        v = v.repeat_interleave(heads // groups, dim=0)
        scores = q[b].to(compute)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    B, H, D = q.shape
    G, P = k_pages.shape[1:3]
    ct = torch.promote_types(q.dtype, torch.float32)
    outs = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            outs.append(torch.zeros(H, D, dtype=ct))
            continue
        pg = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pg].transpose(0, 1).flatten(1, 2)[:, :n].to(ct)  # (G, n, D)
        v = v_pages[pg].transpose(0, 1).flatten(1, 2)[:, :n].to(ct)
        grp = torch.arange(H) // (H // G)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k[grp])
        outs.append(torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v[grp]))
    return torch.stack(outs).to(q.dtype)


# ===================================================================== paged_attention -- right
def paged_token_loop_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros((B, H, d), dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)],
                           dim=1).double()  # (G, n, d)
        vals = torch.stack([v_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)],
                           dim=1).double()
        for h in range(H):
            g = h // per_group
            s = keys[g] @ q[b, h].double() / math.sqrt(d)  # (n,)
            w = torch.exp(s - s.max())
            out[b, h] = (w / w.sum()) @ vals[g]
    return out.to(q.dtype)


def paged_padded_masked(q, k_pages, v_pages, block_table, seq_lens):
    """Gather every table entry for every sequence at once, then mask positions >= length."""
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    tbl = block_table.long()
    k = k_pages[tbl].double().permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    v = v_pages[tbl].double().permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    qg = q.double().reshape(B, G, H // G, d)  # consecutive heads share a group
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    out = torch.einsum("bgrt,bgtd->bgrd", p, v).reshape(B, H, d)
    return out.to(q.dtype)


# ===================================================================== chunked_prefill -- wrong
def prefill_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), -math.inf)
        ctx = torch.softmax(sc, -1) @ v
        pieces.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(pieces, 1).to(x.dtype) @ w_o


def prefill_strict_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    v_cache = torch.empty((batch, num_heads, n, d_head), dtype=compute)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        x_c = x[:, start:stop]
        c = stop - start
        q = (x_c @ w_q).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(compute)
        k_cache[:, :, start:stop] = (x_c @ w_k).reshape(batch, c, num_heads, d_head) \
            .transpose(1, 2).to(compute)
        v_cache[:, :, start:stop] = (x_c @ w_v).reshape(batch, c, num_heads, d_head) \
            .transpose(1, 2).to(compute)
        scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        q_pos = torch.arange(start, stop)[:, None]
        k_pos = torch.arange(stop)[None, :]
        scores = scores.masked_fill(~(k_pos < q_pos), -math.inf)
        ctx = torch.nan_to_num(torch.softmax(scores, dim=-1)) @ v_cache[:, :, :stop]
        outputs.append(ctx.transpose(1, 2).reshape(batch, c, d_model))
    return torch.cat(outputs, dim=1).to(x.dtype) @ w_o


def prefill_chunk_size_in_reshape(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q).view(B, C, H, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).view(B, C, H, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).view(B, C, H, dh).transpose(1, 2).to(ct))
        K, V = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        T = K.shape[2]
        s = q @ K.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(C, T, dtype=torch.bool).tril(T - C), -math.inf)
        ctx = torch.softmax(s, dim=-1) @ V
        outs.append(ctx.transpose(1, 2).reshape(B, chunk_size, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    hd = dm // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    kc = torch.zeros((b, num_heads, n, hd), dtype=f)
    vc = torch.zeros((b, num_heads, n, hd), dtype=f)
    res = []
    for lo in range(0, n, chunk_size):
        hi = min(lo + chunk_size, n)
        m = hi - lo
        xc = x[:, lo:hi]
        q = (xc @ w_q).reshape(b, num_heads, m, hd).to(f)
        kc[:, :, lo:hi] = (xc @ w_k).reshape(b, num_heads, m, hd).to(f)
        vc[:, :, lo:hi] = (xc @ w_v).reshape(b, num_heads, m, hd).to(f)
        s = q @ kc[:, :, :hi].transpose(-1, -2) / math.sqrt(hd)
        keep = torch.ones(m, hi, dtype=torch.bool).tril(hi - m)
        s = s.masked_fill(~keep, -math.inf)
        o = torch.softmax(s, dim=-1) @ vc[:, :, :hi]
        res.append(o.reshape(b, m, dm))
    return torch.cat(res, dim=1).to(x.dtype) @ w_o


def prefill_no_mask_inside_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)

    def heads(t):
        return t.reshape(B, t.shape[1], num_heads, dh).transpose(1, 2).to(ct)

    k_cache = torch.zeros((B, num_heads, 0, dh), dtype=ct)
    v_cache = torch.zeros((B, num_heads, 0, dh), dtype=ct)
    out = []
    for s in range(0, N, chunk_size):
        xc = x[:, s:s + chunk_size]
        k_cache = torch.cat([k_cache, heads(xc @ w_k)], dim=2)
        v_cache = torch.cat([v_cache, heads(xc @ w_v)], dim=2)
        q = heads(xc @ w_q)
        scores = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)  # earlier keys are all past
        ctx = torch.softmax(scores, dim=-1) @ v_cache
        out.append(ctx.transpose(1, 2).reshape(B, xc.shape[1], D))
    return torch.cat(out, dim=1).to(x.dtype) @ w_o


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    k_all = torch.empty(B, H, N, dh, dtype=ct)
    v_all = torch.empty(B, H, N, dh, dtype=ct)
    chunks = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = (xc @ w_q).unflatten(-1, (H, dh)).transpose(1, 2).to(ct)
        k_all[:, :, a:z] = (xc @ w_k).unflatten(-1, (H, dh)).transpose(1, 2).to(ct)
        v_all[:, :, a:z] = (xc @ w_v).unflatten(-1, (H, dh)).transpose(1, 2).to(ct)
        ctx = F.scaled_dot_product_attention(q, k_all[:, :, :z], v_all[:, :, :z],
                                             is_causal=True)
        chunks.append(ctx.transpose(1, 2).flatten(-2))
    return torch.cat(chunks, dim=1).to(x.dtype) @ w_o


# ===================================================================== chunked_prefill -- right
def prefill_sdpa_explicit_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    cache_k, cache_v, outs = [], [], []
    pos = 0
    while pos < N:
        end = min(pos + chunk_size, N)
        xc = xd[:, pos:end]
        split = lambda t: t.unflatten(-1, (num_heads, dh)).transpose(1, 2)  # noqa: E731
        cache_k.append(split(xc @ w_k.double()))
        cache_v.append(split(xc @ w_v.double()))
        keys, vals = torch.cat(cache_k, 2), torch.cat(cache_v, 2)
        allowed = torch.arange(end)[None, :] <= torch.arange(pos, end)[:, None]  # absolute
        ctx = F.scaled_dot_product_attention(split(xc @ w_q.double()), keys, vals,
                                             attn_mask=allowed)
        outs.append(ctx.transpose(1, 2).flatten(-2))
        pos = end
    return (torch.cat(outs, 1) @ w_o.double()).to(x.dtype)


def prefill_head_loop_einsum(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    keys = xd @ w_k.double()  # (B, N, D): the whole cache, filled as the prompt is read
    vals = xd @ w_v.double()
    result = torch.zeros(B, N, D, dtype=torch.float64)
    for c0 in range(0, N, chunk_size):
        c1 = min(c0 + chunk_size, N)
        qc = xd[:, c0:c1] @ w_q.double()
        for h in range(num_heads):
            f = slice(h * dh, (h + 1) * dh)
            s = torch.einsum("bqd,bkd->bqk", qc[..., f], keys[:, :c1, f]) / math.sqrt(dh)
            rel = torch.arange(c1)[None, :] - torch.arange(c0, c1)[:, None]
            s = s.masked_fill(rel > 0, -math.inf)
            p = torch.softmax(s, dim=-1)
            result[:, c0:c1, f] = torch.einsum("bqk,bkd->bqd", p, vals[:, :c1, f])
    return (result @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "bytes-keys-only",
          "counts only the cached keys in the bytes read, forgetting that V is read from the "
          "cache too",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "query-heads-in-bytes",
          "counts the cache bytes with num_heads instead of num_kv_heads, as if every query "
          "head had its own K and V (ignores the GQA sharing)",
          intensity_query_heads_in_bytes),
    Entry("decode_attention_intensity", "wrong", "floor-division",
          "divides FLOPs by bytes with //, returning a truncated int (0 instead of 0.5) "
          "instead of a float",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "mac-as-one-flop",
          "counts one FLOP per multiply-add instead of 2, halving the intensity",
          intensity_macs_as_flops),
    Entry("decode_attention_intensity", "wrong", "precedence-in-division",
          "writes flops / 2 * B * G * N * d * bytes, which divides by 2 and then multiplies "
          "by the rest: the denominator needs parentheses",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "cache-read-once-per-batch",
          "leaves batch_size out of the bytes, as if the sequences shared one cache, while "
          "the FLOPs do scale with the batch",
          intensity_cache_shared_by_batch),
    Entry("decode_attention_intensity", "right", "closed-form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction", None, intensity_fraction),

    Entry("paged_attention", "wrong", "reads-whole-last-page",
          "keeps every slot of the sequence's pages instead of only the first seq_lens[b] "
          "keys, so stale slots at the end of the last page are attended",
          paged_whole_last_page),
    Entry("paged_attention", "wrong", "repeat-not-repeat-interleave",
          "expands the K/V heads with .repeat (head h reads group h % G) instead of "
          "repeat_interleave (group h // (H // G))",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "reshape-without-moving-groups",
          "reshapes the gathered (pages, G, page_size, d) straight to (G, pages*page_size, d) "
          "without moving the group axis first, which mixes groups and pages",
          paged_reshape_without_group_move),
    Entry("paged_attention", "wrong", "floor-page-count",
          "takes n // page_size pages instead of ceil(n / page_size), dropping the partly "
          "filled last page (and all of a sequence shorter than a page)",
          paged_floor_page_count),
    Entry("paged_attention", "wrong", "block-table-column",
          "reads sequence b's pages from column block_table[:, b] instead of row "
          "block_table[b]",
          paged_table_column),
    Entry("paged_attention", "wrong", "no-scale",
          "never scales the scores by 1/sqrt(d)",
          paged_no_scale),
    Entry("paged_attention", "right", "token-loop-float64", None, paged_token_loop_f64),
    Entry("paged_attention", "right", "padded-gather-masked", None, paged_padded_masked),

    Entry("chunked_prefill", "wrong", "own-chunk-only",
          "each chunk attends only to its own keys and values: the earlier chunks' keys are "
          "never kept in a cache",
          prefill_own_chunk_only),
    Entry("chunked_prefill", "wrong", "strict-causal-mask",
          "masks with key < query instead of key <= query, so no query sees itself (and "
          "query 0, seeing nothing, gets a zero row)",
          prefill_strict_mask),
    Entry("chunked_prefill", "wrong", "chunk-size-in-reshape",
          "reshapes each chunk's output to chunk_size rows instead of its real length, so a "
          "shorter last chunk raises a reshape error",
          prefill_chunk_size_in_reshape),
    Entry("chunked_prefill", "wrong", "split-without-transpose",
          "splits heads with reshape(B, H, C, d_head) directly instead of reshape(B, C, H, "
          "d_head).transpose(1, 2) (and merges back the same way), scrambling tokens and "
          "features",
          prefill_split_without_transpose),
    Entry("chunked_prefill", "wrong", "no-mask-inside-chunk",
          "applies no mask at all, as if the cache made it causal: queries see the later keys "
          "of their own chunk",
          prefill_no_mask_inside_chunk),
    Entry("chunked_prefill", "wrong", "sdpa-is-causal-top-left",
          "calls SDPA with is_causal=True on a (C, stop) block; SDPA aligns that mask "
          "top-left, so later chunks see only the first keys instead of all earlier ones",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "right", "sdpa-explicit-mask-float64", None,
          prefill_sdpa_explicit_mask),
    Entry("chunked_prefill", "right", "head-loop-einsum", None, prefill_head_loop_einsum),
]
