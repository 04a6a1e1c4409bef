"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------- decode_attention_intensity
def dai_kv_heads_ignored(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / k_bytes


def dai_mac_as_one(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    score = batch_size * num_heads * seq_len * head_dim
    mix = batch_size * num_heads * seq_len * head_dim
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return (score + mix) / read


def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(flops // nbytes)


def dai_batch_one_side(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache_bytes = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / cache_bytes


def dai_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def dai_right_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: 4 B H N d / (2 B G N d bytes)
    return float(2 * num_heads) / float(num_kv_heads * bytes_per_element)


def dai_right_fraction_loop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 0
    for _b in range(batch_size):
        for _h in range(num_heads):
            flops += 2 * seq_len * head_dim  # q . k_t for every cached t
            flops += 2 * seq_len * head_dim  # sum_t w_t v_t
    moved = 0
    for _b in range(batch_size):
        for _g in range(num_kv_heads):
            moved += 2 * seq_len * head_dim * bytes_per_element  # K and V
    return float(Fraction(flops, moved))


# ----------------------------------------------------------------- paged_attention
def paged_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-1, -2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_head_modulo(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat(H // G, 1, 1)  # (H, n, d)
        v = v.repeat(H // G, 1, 1)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        res[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, -1), v)
    return res.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        n_pages = n // P
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        if k.shape[1] == 0:
            continue
        k = k.repeat_interleave(rep, 0)
        v = v.repeat_interleave(rep, 0)
        s = (q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_reshape_no_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)  # (p, G, P, d) -> (G, p*P, d)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-1, -2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
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
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-1, -2)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_longest_length(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    n = int(seq_lens.max())
    n_pages = math.ceil(n / P)
    for b in range(B):
        if int(seq_lens[b]) == 0:
            continue
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-1, -2)) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_right_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, dim = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    per_group = heads // groups
    result = torch.zeros(batch, heads, dim, dtype=torch.float64)
    for b in range(batch):
        length = int(seq_lens[b])
        if length == 0:
            continue
        keys, vals = [], []
        for t in range(length):
            page = int(block_table[b, t // page_size])
            slot = t % page_size
            keys.append(k_pages[page, :, slot].double())  # (G, d)
            vals.append(v_pages[page, :, slot].double())
        K = torch.stack(keys, dim=1)  # (G, n, d)
        V = torch.stack(vals, dim=1)
        for h in range(heads):
            g = h // per_group
            logits = K[g] @ q[b, h].double() / math.sqrt(dim)  # (n,)
            logits = logits - logits.max()
            w = torch.exp(logits)
            result[b, h] = (w / w.sum()) @ V[g]
    return result.to(q.dtype)


def paged_right_vector_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    t = torch.arange(T)
    page_ids = block_table.long()[:, t // P]  # (B, T)
    slots = (t % P).expand(B, T)
    K = k_pages[page_ids, :, slots].double()  # (B, T, G, d)
    V = v_pages[page_ids, :, slots].double()
    K = K.repeat_interleave(H // G, dim=2)  # (B, T, H, d)
    V = V.repeat_interleave(H // G, dim=2)
    s = torch.einsum("bhd,bthd->bht", q.double(), K) / math.sqrt(d)
    valid = t[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return torch.einsum("bht,bthd->bhd", w, V).to(q.dtype)


# ----------------------------------------------------------------- chunked_prefill
def cp_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(C, s1, dtype=torch.bool).tril()
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    outs = []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k_cache = (xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        v_cache = (xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        n_k = k_cache.shape[2]
        sc = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(C, n_k, dtype=torch.bool).tril(n_k - C)
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ v_cache
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    v_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for c in range(N // chunk_size):
        s0, s1 = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, s0:s1]
        q = (xc @ w_q).reshape(B, chunk_size, num_heads, dh).transpose(1, 2).to(ct)
        k_cache[:, :, s0:s1] = (xc @ w_k).reshape(B, chunk_size, num_heads, dh).transpose(1, 2)
        v_cache[:, :, s0:s1] = (xc @ w_v).reshape(B, chunk_size, num_heads, dh).transpose(1, 2)
        sc = q @ k_cache[:, :, :s1].transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(chunk_size, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ v_cache[:, :, :s1]
        outs.append(ctx.transpose(1, 2).reshape(B, chunk_size, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(D)
        allowed = torch.ones(C, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(C, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ v  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_keys_with_w_q(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        s1 = min(s0 + chunk_size, N)
        xc = x[:, s0:s1]
        C = s1 - s0
        q = (xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_q).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).reshape(B, C, num_heads, dh).transpose(1, 2).to(ct))
        k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        sc = q @ k.transpose(-2, -1) / math.sqrt(dh)
        allowed = torch.ones(C, s1, dtype=torch.bool).tril(s0)
        sc = sc.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(sc, dim=-1) @ v
        outs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_right_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, width = x.shape
    hd = width // num_heads
    xd = x.double()
    wq, wk, wv = w_q.double(), w_k.double(), w_v.double()

    def heads(t):
        return t.view(batch, t.shape[1], num_heads, hd).permute(0, 2, 1, 3)

    cache_k = []
    cache_v = []
    pieces = []
    start = 0
    while start < n:
        stop = min(n, start + chunk_size)
        part = xd[:, start:stop]
        cache_k.append(heads(part @ wk))
        cache_v.append(heads(part @ wv))
        keys = torch.cat(cache_k, dim=2)
        vals = torch.cat(cache_v, dim=2)
        qi = torch.arange(start, stop)[:, None]
        kj = torch.arange(stop)[None, :]
        ctx = F.scaled_dot_product_attention(heads(part @ wq), keys, vals, attn_mask=kj <= qi)
        pieces.append(ctx.permute(0, 2, 1, 3).reshape(batch, stop - start, width))
        start = stop
    return (torch.cat(pieces, dim=1) @ w_o.double()).to(x.dtype)


def cp_right_einsum_online(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    h = num_heads
    dh = dm // h
    x64 = x.to(torch.float64)
    proj = [w.to(torch.float64) for w in (w_q, w_k, w_v)]
    K = torch.zeros(b, h, n, dh, dtype=torch.float64)
    V = torch.zeros(b, h, n, dh, dtype=torch.float64)
    out = torch.zeros(b, n, dm, dtype=torch.float64)
    for c0 in range(0, n, chunk_size):
        c1 = min(c0 + chunk_size, n)
        qc, kc, vc = (torch.einsum("bnm,mk->bnk", x64[:, c0:c1], w)
                      .view(b, c1 - c0, h, dh) for w in proj)
        K[:, :, c0:c1] = kc.permute(0, 2, 1, 3)
        V[:, :, c0:c1] = vc.permute(0, 2, 1, 3)
        s = torch.einsum("bqhd,bhkd->bhqk", qc, K[:, :, :c1]) * dh ** -0.5
        future = torch.arange(c1)[None, :] > torch.arange(c0, c1)[:, None]
        s = s.masked_fill(future, float("-inf"))
        s = s - s.amax(dim=-1, keepdim=True)
        e = s.exp()
        ctx = torch.einsum("bhqk,bhkd->bqhd", e / e.sum(-1, keepdim=True), V[:, :, :c1])
        out[:, c0:c1] = ctx.reshape(b, c1 - c0, dm)
    return (out @ w_o.to(torch.float64)).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "kv_heads_ignored",
          "counts the cache bytes with num_heads K/V heads instead of num_kv_heads, as if "
          "every query head had its own keys and values (GQA sharing lost)",
          dai_kv_heads_ignored),
    Entry("decode_attention_intensity", "wrong", "keys_only_bytes",
          "counts the bytes of the cached keys only and forgets the values, which are read "
          "too", dai_keys_only),
    Entry("decode_attention_intensity", "wrong", "multiply_add_one_flop",
          "counts one FLOP per multiply-add instead of two, halving the FLOPs",
          dai_mac_as_one),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with //, so a ratio below 1 (or any fraction) is floored "
          "to a whole number", dai_floor_division),
    Entry("decode_attention_intensity", "wrong", "batch_in_flops_only",
          "multiplies the FLOPs by batch_size but counts the cache of one sequence only, as if "
          "the sequences shared one cache", dai_batch_one_side),
    Entry("decode_attention_intensity", "wrong", "division_precedence",
          "writes flops / 2 * batch_size * num_kv_heads * ..., which divides by 2 only and "
          "then multiplies by the byte factors: the denominator needs parentheses",
          dai_precedence),
    Entry("decode_attention_intensity", "right", "closed_form_ratio", None,
          dai_right_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_loops", None,
          dai_right_fraction_loop),

    Entry("paged_attention", "wrong", "reads_whole_last_page",
          "keeps every slot of the sequence's pages and never cuts them to seq_lens[b], so "
          "the stale slots after the last token of the last page are attended to",
          paged_whole_last_page),
    Entry("paged_attention", "wrong", "kv_head_modulo",
          "expands the K/V heads with repeat (head h reads group h % G) instead of "
          "repeat_interleave (group h // (H // G))", paged_head_modulo),
    Entry("paged_attention", "wrong", "floor_page_count",
          "takes n // page_size pages instead of ceil(n / page_size), dropping the partly "
          "filled last page and its keys", paged_floor_page_count),
    Entry("paged_attention", "wrong", "pages_reshaped_without_transpose",
          "reshapes the gathered (pages, G, page_size, d) straight to (G, pages*page_size, d) "
          "without moving G first, which interleaves the groups' keys",
          paged_reshape_no_transpose),
    Entry("paged_attention", "wrong", "no_scale",
          "forgets the 1/sqrt(d) scale on the scores", paged_no_scale),
    Entry("paged_attention", "wrong", "longest_length_for_all",
          "uses the longest seq_len (and its page count) for every sequence, so shorter "
          "sequences attend to stale slots and table entries past their length",
          paged_longest_length),
    Entry("paged_attention", "right", "token_by_token_loop", None, paged_right_token_loop),
    Entry("paged_attention", "right", "vector_gather_masked", None, paged_right_vector_gather),

    Entry("chunked_prefill", "wrong", "mask_top_left",
          "builds each chunk's mask as tril over (C, stop) aligned top-left, so chunk queries "
          "see only the first keys of the cache instead of every key up to their own position",
          cp_top_left_mask),
    Entry("chunked_prefill", "wrong", "cache_overwritten",
          "replaces the K/V cache with the current chunk's keys and values instead of "
          "appending to it, so each chunk attends only to itself", cp_cache_overwritten),
    Entry("chunked_prefill", "wrong", "drops_ragged_last_chunk",
          "loops over N // chunk_size full chunks only, so a shorter last chunk is never "
          "computed and the output has fewer than N rows", cp_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)", cp_scale_d_model),
    Entry("chunked_prefill", "wrong", "heads_merged_without_transpose",
          "reshapes the (B, H, C, d_head) context straight to (B, C, d_model) without "
          "transposing the head axis back, mixing heads and positions",
          cp_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "keys_projected_with_w_q",
          "projects the cached keys with w_q (copied from the query line) instead of w_k",
          cp_keys_with_w_q),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_float64", None, cp_right_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "einsum_preallocated_cache", None,
          cp_right_einsum_online),
]
