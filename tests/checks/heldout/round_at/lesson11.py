"""Held-out learners' answers, lesson 11 (serving): decode_attention_intensity,
paged_attention, chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity
def intensity_k_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_ignores_gqa(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def intensity_mac_as_one(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    macs = batch_size * num_heads * seq_len * head_dim  # q . k
    macs += batch_size * num_heads * seq_len * head_dim  # p @ v
    moved = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / moved


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


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
    # B, N and d cancel: 4 B H N d / (2 B G N d bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    score = 2 * head_dim * seq_len
    mix = 2 * head_dim * seq_len
    per_query = score + mix
    total_flops = per_query * num_heads * batch_size
    per_kv_head = seq_len * head_dim * bytes_per_element * 2
    total_bytes = per_kv_head * num_kv_heads * batch_size
    return float(Fraction(total_flops, total_bytes))


# ============================================================ paged_attention
def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].double()
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].double()
        k = k.repeat(H // G, 1, 1)
        v = v.repeat(H // G, 1, 1)
        s = (q[b].double().unsqueeze(1) @ k.transpose(1, 2)).squeeze(1) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", s.softmax(-1), v)
    return out.to(q.dtype)


def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    res = torch.zeros(batch, heads, d, dtype=torch.float32)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, :(n + page - 1) // page].long()
        keys = k_pages[used].permute(1, 0, 2, 3).reshape(groups, -1, d).float()
        vals = v_pages[used].permute(1, 0, 2, 3).reshape(groups, -1, d).float()
        keys = keys.repeat_interleave(rep, 0)
        vals = vals.repeat_interleave(rep, 0)
        sc = torch.einsum("hd,hnd->hn", q[b].float(), keys) / math.sqrt(d)
        res[b] = torch.einsum("hn,hnd->hd", torch.softmax(sc, -1), vals)
    return res.to(q.dtype)


def paged_floor_pages(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        pages = block_table[b, : n // P].long()
        if len(pages) == 0:
            continue
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].double()
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].double()
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        w = torch.softmax(torch.einsum("hd,hnd->hn", q[b].double(), k) / math.sqrt(d), dim=-1)
        out[b] = torch.einsum("hn,hnd->hd", w, v)
    return out.to(q.dtype)


def paged_masked_no_guard(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    max_pages = block_table.shape[1]
    tbl = block_table.long()
    # gather every listed page, then mask the slots past each length
    k = k_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).double()
    v = v_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).double()
    k = k.repeat_interleave(H // G, dim=1)
    v = v.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.double(), k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bht,bhtd->bhd", p, v).to(q.dtype)


def paged_scale_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    dk = k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        P = k_pages.shape[2]
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].double()
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].double()
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b].double(), k) / math.sqrt(dk)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    n_rep = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].double()
        v = v_pages[pages].reshape(G, -1, d)[:, :n].double()
        k = k.repeat_interleave(n_rep, dim=0)
        v = v.repeat_interleave(n_rep, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b].double(), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return out.to(q.dtype)


def paged_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    group_size = H // G
    out = torch.zeros(B, H, d, dtype=q.dtype)
    for b in range(B):
        n = int(seq_lens[b].item())
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)], 1)
        vals = torch.stack([v_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)], 1)
        for h in range(H):
            g = h // group_size
            s = keys[g].double() @ q[b, h].double() / math.sqrt(d)  # (n,)
            w = torch.exp(s - s.max())
            w = w / w.sum()
            out[b, h] = (w @ vals[g].double()).to(q.dtype)
    return out


def paged_flat_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    num_pages, G, P, _ = k_pages.shape
    T = block_table.shape[1] * P
    t = torch.arange(T)
    slot_ids = block_table.long()[:, t // P] * P + (t % P)  # (B, T) rows of the flat pool
    flat_k = k_pages.double().permute(1, 0, 2, 3).reshape(G, num_pages * P, d)
    flat_v = v_pages.double().permute(1, 0, 2, 3).reshape(G, num_pages * P, d)
    k = flat_k[:, slot_ids]  # (G, B, T, d)
    v = flat_v[:, slot_ids]
    head_group = torch.arange(H) // (H // G)
    k = k[head_group].permute(1, 0, 2, 3)  # (B, H, T, d)
    v = v[head_group].permute(1, 0, 2, 3)
    s = torch.einsum("bhd,bhtd->bht", q.double(), k) / math.sqrt(d)
    keep = (t[None, :] < seq_lens.long()[:, None])[:, None, :]
    s = torch.where(keep, s, torch.tensor(-math.inf, dtype=torch.float64))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    return torch.einsum("bht,bhtd->bhd", p, v).to(q.dtype)


# ============================================================ chunked_prefill
def prefill_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
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
        sc = q @ k.transpose(-1, -2) / math.sqrt(dh)
        mask = torch.ones(e - s, e, dtype=torch.bool).tril()
        sc = sc.masked_fill(~mask, -math.inf)
        o = torch.softmax(sc, -1) @ v
        outs.append(o.transpose(1, 2).reshape(B, e - s, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    xd = x.double()
    pieces = []
    for start in range(0, N, chunk_size):
        xc = xd[:, start:start + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q.double()).reshape(B, C, H, dh).transpose(1, 2)
        k = (xc @ w_k.double()).reshape(B, C, H, dh).transpose(1, 2)
        v = (xc @ w_v.double()).reshape(B, C, H, dh).transpose(1, 2)
        sc = q @ k.transpose(-1, -2) / math.sqrt(dh)
        sc = sc.masked_fill(torch.triu(torch.ones(C, C, dtype=torch.bool), 1), -math.inf)
        ctx = torch.softmax(sc, -1) @ v
        pieces.append(ctx.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(pieces, 1) @ w_o.double()).to(x.dtype)


def prefill_drops_last_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    k_cache = torch.zeros(B, num_heads, 0, dh, dtype=torch.float64)
    v_cache = torch.zeros(B, num_heads, 0, dh, dtype=torch.float64)
    outs = []
    n_chunks = max(N // chunk_size, 1)
    for c in range(n_chunks):
        s, e = c * chunk_size, min((c + 1) * chunk_size, N)
        xc = x[:, s:e].double()
        C = e - s
        split = lambda t: t.reshape(B, C, num_heads, dh).permute(0, 2, 1, 3)  # noqa: E731
        q = split(xc @ w_q.double())
        k_cache = torch.cat([k_cache, split(xc @ w_k.double())], dim=2)
        v_cache = torch.cat([v_cache, split(xc @ w_v.double())], dim=2)
        sc = q @ k_cache.transpose(-1, -2) / math.sqrt(dh)
        allowed = torch.ones(C, e, dtype=torch.bool).tril(diagonal=s)
        sc = sc.masked_fill(~allowed, -math.inf)
        outs.append((torch.softmax(sc, -1) @ v_cache).permute(0, 2, 1, 3).reshape(B, C, D))
    return (torch.cat(outs, dim=1) @ w_o.double()).to(x.dtype)


def prefill_v_from_w_k(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(batch, num_heads, n, d_head, dtype=ct)
    V = torch.empty(batch, num_heads, n, d_head, dtype=ct)
    chunks = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop].to(ct)
        C = stop - start
        q = (xc @ w_q.to(ct)).view(batch, C, num_heads, d_head).transpose(1, 2)
        K[:, :, start:stop] = (xc @ w_k.to(ct)).view(batch, C, num_heads, d_head).transpose(1, 2)
        V[:, :, start:stop] = (xc @ w_k.to(ct)).view(batch, C, num_heads, d_head).transpose(1, 2)
        sc = q @ K[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        sc = sc.masked_fill(~torch.ones(C, stop, dtype=torch.bool).tril(start), -math.inf)
        ctx = torch.softmax(sc, -1) @ V[:, :, :stop]
        chunks.append(ctx.transpose(1, 2).reshape(batch, C, d_model))
    return (torch.cat(chunks, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    kc, vc, outs = [], [], []
    for s in range(0, N, chunk_size):
        xc = xd[:, s:s + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q.double()).view(B, C, num_heads, dh).transpose(1, 2)
        kc.append((xc @ w_k.double()).view(B, C, num_heads, dh).transpose(1, 2))
        vc.append((xc @ w_v.double()).view(B, C, num_heads, dh).transpose(1, 2))
        k, v = torch.cat(kc, 2), torch.cat(vc, 2)
        T = k.shape[2]
        sc = q @ k.transpose(-1, -2) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(C, T, dtype=torch.bool).tril(T - C), -math.inf)
        ctx = torch.softmax(sc, -1) @ v  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return (torch.cat(outs, 1) @ w_o.double()).to(x.dtype)


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    kc, vc, outs = [], [], []
    for s in range(0, N, chunk_size):
        xc = xd[:, s:s + chunk_size]
        C = xc.shape[1]
        q = (xc @ w_q.double()).view(B, C, num_heads, dh).transpose(1, 2)
        kc.append((xc @ w_k.double()).view(B, C, num_heads, dh).transpose(1, 2))
        vc.append((xc @ w_v.double()).view(B, C, num_heads, dh).transpose(1, 2))
        k, v = torch.cat(kc, 2), torch.cat(vc, 2)
        T = k.shape[2]
        sc = q @ k.transpose(-1, -2) / math.sqrt(D)
        sc = sc.masked_fill(~torch.ones(C, T, dtype=torch.bool).tril(T - C), -math.inf)
        ctx = torch.softmax(sc, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(outs, 1) @ w_o.double()).to(x.dtype)


def prefill_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.double()
    k_all = torch.zeros(B, num_heads, N, dh, dtype=torch.float64)
    v_all = torch.zeros(B, num_heads, N, dh, dtype=torch.float64)
    out = torch.zeros(B, N, D, dtype=torch.float64)
    start = 0
    while start < N:
        stop = min(N, start + chunk_size)
        xc = xd[:, start:stop]
        to_heads = lambda t: t.unflatten(-1, (num_heads, dh)).transpose(1, 2)  # noqa: E731
        q = to_heads(xc @ w_q.double())
        k_all[:, :, start:stop] = to_heads(xc @ w_k.double())
        v_all[:, :, start:stop] = to_heads(xc @ w_v.double())
        qpos = torch.arange(start, stop)[:, None]
        kpos = torch.arange(stop)[None, :]
        ctx = F.scaled_dot_product_attention(q, k_all[:, :, :stop], v_all[:, :, :stop],
                                             attn_mask=kpos <= qpos)
        out[:, start:stop] = ctx.transpose(1, 2).flatten(2)
        start = stop
    return (out @ w_o.double()).to(x.dtype)


def prefill_head_loop_online(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    xd = x.to(torch.float64)
    Q = xd @ w_q.double()  # (B, N, D): projections are per token, no N x N
    K = xd @ w_k.double()
    V = xd @ w_v.double()
    ctx = torch.zeros(B, N, D, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        for c0 in range(0, N, chunk_size):
            c1 = min(c0 + chunk_size, N)
            s = torch.einsum("bqe,bke->bqk", Q[:, c0:c1, cols], K[:, :c1, cols]) / dh ** 0.5
            future = torch.arange(c1)[None, :] > torch.arange(c0, c1)[:, None]
            s[:, future] = -float("inf")
            p = torch.exp(s - s.max(dim=-1, keepdim=True).values)
            p = p / p.sum(dim=-1, keepdim=True)
            ctx[:, c0:c1, cols] = torch.einsum("bqk,bke->bqe", p, V[:, :c1, cols])
    return (ctx @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "reads_only_k",
          "counts only the bytes of K read from the cache and forgets V, doubling the intensity",
          intensity_k_only),
    Entry("decode_attention_intensity", "wrong", "kv_bytes_per_query_head",
          "counts K and V bytes for num_heads heads instead of num_kv_heads: ignores that "
          "query heads share K/V heads under GQA",
          intensity_ignores_gqa),
    Entry("decode_attention_intensity", "wrong", "mac_as_one_flop",
          "counts each multiply-add as one FLOP instead of two, halving the intensity",
          intensity_mac_as_one),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, truncating a fractional intensity (0.5 becomes 0) "
          "and returning an int",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "missing_parentheses",
          "operator precedence: flops / 2 * batch * ... multiplies by the byte factors instead "
          "of dividing by their product",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "counts_q_and_output_bytes",
          "adds the bytes of the query and the output vectors to the denominator; the contract "
          "divides by the bytes of K and V read from the cache only",
          intensity_counts_q_and_out),
    Entry("decode_attention_intensity", "right", "closed_form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "exact_fraction", None, intensity_fraction),
    Entry("paged_attention", "wrong", "repeat_instead_of_repeat_interleave",
          "expands K/V heads with .repeat, so query head h reads KV head h % G instead of "
          "h // (H // G)",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "keeps_whole_last_page",
          "never truncates to seq_lens[b]: the stale slots at the end of a partly filled last "
          "page are attended too",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "floor_page_count",
          "takes n // page_size pages instead of ceil(n / page_size), dropping the partly "
          "filled last page (a sequence shorter than a page gets zeros)",
          paged_floor_pages),
    Entry("paged_attention", "wrong", "length_zero_nan",
          "masks the slots past each length with -inf but has no guard for seq_lens[b] = 0: "
          "the softmax of an all -inf row gives NaN instead of zeros",
          paged_masked_no_guard),
    Entry("paged_attention", "wrong", "scale_by_page_size",
          "reads d from k_pages.shape[2], which is page_size, so scores are scaled by "
          "1/sqrt(page_size) instead of 1/sqrt(d)",
          paged_scale_page_size),
    Entry("paged_attention", "wrong", "reshape_without_transpose",
          "reshapes the gathered (p, G, page_size, d) pages straight to (G, p*page_size, d) "
          "without moving G first, mixing the KV heads' slots",
          paged_reshape_without_transpose),
    Entry("paged_attention", "right", "token_by_token_gather", None, paged_token_loop),
    Entry("paged_attention", "right", "flat_pool_gather", None, paged_flat_gather),
    Entry("chunked_prefill", "wrong", "mask_top_left",
          "masks each chunk with tril() of a (C, stop) block without the diagonal offset start, "
          "so chunk queries cannot see the earlier chunks' later keys",
          prefill_top_left_mask),
    Entry("chunked_prefill", "wrong", "no_cache_of_earlier_chunks",
          "each chunk attends only to its own keys and values: the earlier chunks are never "
          "kept in a cache",
          prefill_no_cache),
    Entry("chunked_prefill", "wrong", "drops_ragged_last_chunk",
          "counts chunks with N // chunk_size, so the ragged last chunk is never processed "
          "(output too short)",
          prefill_drops_last_chunk),
    Entry("chunked_prefill", "wrong", "values_from_w_k",
          "copy-paste slip: the value cache is filled with x @ w_k instead of x @ w_v",
          prefill_v_from_w_k),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transposing heads and tokens back",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_float64", None, prefill_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "head_loop_einsum", None, prefill_head_loop_online),
]
