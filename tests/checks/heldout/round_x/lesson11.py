"""Held-out catalogue, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def intensity_macs_as_flops(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = batch_size * num_heads * seq_len * head_dim * 2  # scores + weighted sum
    bytes_read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_only_keys_read(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_bytes_per_query_head(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                   bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    sum_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return (score_flops + sum_flops) / kv_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return float(flops // nbytes)


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


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # N, B and d cancel: 4 B H N d / (2 B G N d bytes)
    return 2.0 * num_heads / (num_kv_heads * bytes_per_element)


def intensity_fraction_loop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 0
    for _b in range(batch_size):
        for _h in range(num_heads):
            flops += seq_len * 2 * head_dim  # q . k_t for every cached t
            flops += seq_len * 2 * head_dim  # sum_t p_t v_t
    nbytes = batch_size * num_kv_heads * seq_len * (head_dim + head_dim) * bytes_per_element
    return float(Fraction(flops, nbytes))


# ============================================================ paged_attention: wrong
def paged_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
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
        s = (q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    f = torch.promote_types(q.dtype, torch.float32)
    res = torch.zeros((batch, heads, d), dtype=f)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        idx = block_table[b, :(n + page - 1) // page].long()
        keys = k_pages[idx].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(f)
        vals = v_pages[idx].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(f)
        keys = keys.repeat(rep, 1, 1)
        vals = vals.repeat(rep, 1, 1)
        sc = torch.einsum("hd,hnd->hn", q[b].to(f), keys) / math.sqrt(d)
        res[b] = torch.einsum("hn,hnd->hd", sc.softmax(dim=-1), vals)
    return res.to(q.dtype)


def paged_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        n_pages = max(1, n // P)
        if n == 0:
            continue
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        scores = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(d)
        out[b] = (torch.softmax(scores, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_no_scale(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    outs = []
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            outs.append(torch.zeros(H, d, dtype=ct))
            continue
        pg = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, 0)
        v = v.repeat_interleave(H // G, 0)
        w = torch.softmax(torch.einsum("hd,hnd->hn", q[b].to(ct), k), dim=-1)
        outs.append(torch.einsum("hn,hnd->hd", w, v))
    return torch.stack(outs).to(q.dtype)


def paged_masked_pool_nan_on_empty(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    tbl = block_table.long()
    k = k_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    v = v_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d).to(ct)
    qg = q.to(ct).reshape(B, G, H // G, d)
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    w = torch.softmax(s, dim=-1)
    out = torch.einsum("bgrt,bgtd->bgrd", w, v)
    return out.reshape(B, H, d).to(q.dtype)


def paged_reshape_no_transpose(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, psize = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((batch, heads, d), dtype=ct)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, :math.ceil(n / psize)].long()
        k = k_pages[used].reshape(groups, -1, d)[:, :n].to(ct)
        v = v_pages[used].reshape(groups, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(heads // groups, dim=0)
        v = v.repeat_interleave(heads // groups, dim=0)
        s = q[b].to(ct)[:, None] @ k.transpose(-1, -2) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_loop_float64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        ks, vs = [], []
        for t in range(n):
            page = int(block_table[b, t // P])
            ks.append(k_pages[page, :, t % P])
            vs.append(v_pages[page, :, t % P])
        k = torch.stack(ks, dim=1).double()  # (G, n, d)
        v = torch.stack(vs, dim=1).double()
        group_of_head = torch.arange(H) // (H // G)
        k, v = k[group_of_head], v[group_of_head]  # (H, n, d)
        s = torch.einsum("hd,hnd->hn", q[b].double(), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, dim=-1), v)
    return out.to(q.dtype)


def paged_gather_masked_safe(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    T = block_table.shape[1] * P
    tbl = block_table.long()
    k = k_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, T, d).double()
    v = v_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, T, d).double()
    qg = q.double().view(B, G, H // G, d)
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    keep = (torch.arange(T)[None, :] < seq_lens.long()[:, None])[:, None, None, :]
    s = torch.where(keep, s, torch.tensor(-math.inf, dtype=torch.float64))
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(dim=-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    return torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(B, H, d).to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, num_heads, 0, dh, dtype=ct)
    v_cache = torch.zeros(B, num_heads, 0, dh, dtype=ct)
    outs = []
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        xc = x[:, s:e]
        C = e - s
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        k_cache = torch.cat([k_cache, (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)], 2)
        v_cache = torch.cat([v_cache, (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)], 2)
        sc = q @ k_cache.transpose(-2, -1) / math.sqrt(D)
        allowed = torch.ones(C, e, dtype=torch.bool).tril(e - C)
        sc = sc.masked_fill(~allowed, -math.inf)
        outs.append((sc.softmax(-1) @ v_cache).transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_cache_not_kept(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        xc = x[:, start:stop]
        c = stop - start
        q = (xc @ w_q).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(f)
        k_cache = (xc @ w_k).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(f)
        v_cache = (xc @ w_v).reshape(batch, c, num_heads, d_head).transpose(1, 2).to(f)
        L = k_cache.shape[2]
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(d_head)
        mask = torch.ones(c, L, dtype=torch.bool).tril(L - c)
        s = s.masked_fill(~mask, float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v_cache
        pieces.append(ctx.transpose(1, 2).reshape(batch, c, d_model))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_ragged_tail_dropped(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, H, N, dh, dtype=ct)
    V = torch.empty(B, H, N, dh, dtype=ct)
    out = []
    for c in range(N // chunk_size):
        a, b = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, a:b]
        q = (xc @ w_q).reshape(B, -1, H, dh).transpose(1, 2).to(ct)
        K[:, :, a:b] = (xc @ w_k).reshape(B, -1, H, dh).transpose(1, 2).to(ct)
        V[:, :, a:b] = (xc @ w_v).reshape(B, -1, H, dh).transpose(1, 2).to(ct)
        s = q @ K[:, :, :b].transpose(-2, -1) / math.sqrt(dh)
        ok = torch.ones(b - a, b, dtype=torch.bool).tril(a)
        s = s.masked_fill(~ok, -math.inf)
        out.append((s.softmax(-1) @ V[:, :, :b]).transpose(1, 2).reshape(B, b - a, D))
    return torch.cat(out, dim=1).to(x.dtype) @ w_o


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)

    def heads(t):
        return t.reshape(B, t.shape[1], num_heads, dh).transpose(1, 2).to(ct)

    ks, vs, outs = [], [], []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size]
        ks.append(heads(xc @ w_k))
        vs.append(heads(xc @ w_v))
        k_all, v_all = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        ctx = F.scaled_dot_product_attention(heads(xc @ w_q), k_all, v_all, is_causal=True)
        outs.append(ctx.transpose(1, 2).reshape(B, xc.shape[1], D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(batch, num_heads, n, d_head, dtype=f)
    v_cache = torch.empty(batch, num_heads, n, d_head, dtype=f)
    outputs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        c = stop - start
        xc = x[:, start:stop]
        q = (xc @ w_q).view(batch, c, num_heads, d_head).transpose(1, 2).to(f)
        k_cache[:, :, start:stop] = (xc @ w_k).view(batch, c, num_heads, d_head).transpose(1, 2).to(f)
        v_cache[:, :, start:stop] = (xc @ w_v).view(batch, c, num_heads, d_head).transpose(1, 2).to(f)
        s = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        s = s.masked_fill(~torch.ones(c, stop, dtype=torch.bool).tril(start), -math.inf)
        ctx = torch.softmax(s, -1) @ v_cache[:, :, :stop]  # (B, H, C, d_head)
        outputs.append(ctx.reshape(batch, c, d_model))
    return torch.cat(outputs, dim=1).to(x.dtype) @ w_o


def prefill_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    res = []
    for lo in range(0, N, chunk_size):
        hi = min(lo + chunk_size, N)
        xc = x[:, lo:hi]
        q = (xc @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        kc[:, :, lo:hi] = (xc @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        vc[:, :, lo:hi] = (xc @ w_v).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :hi].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(hi - lo, hi, dtype=torch.bool).tril(lo), -math.inf)
        res.append((torch.softmax(s, -1) @ vc[:, :, :hi]).transpose(1, 2).flatten(2))
    return torch.cat(res, 1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill: right
def prefill_sdpa_bool_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    Wq, Wk, Wv, Wo = (w.to(ct) for w in (w_q, w_k, w_v, w_o))
    keys, values, ctxs = None, None, []
    for start in range(0, N, chunk_size):
        stop = min(N, start + chunk_size)
        xc = xf[:, start:stop]
        C = stop - start
        q = (xc @ Wq).view(B, C, num_heads, dh).transpose(1, 2)
        k = (xc @ Wk).view(B, C, num_heads, dh).transpose(1, 2)
        v = (xc @ Wv).view(B, C, num_heads, dh).transpose(1, 2)
        keys = k if keys is None else torch.cat([keys, k], dim=2)
        values = v if values is None else torch.cat([values, v], dim=2)
        qi = torch.arange(start, stop)[:, None]
        kj = torch.arange(stop)[None, :]
        ctx = F.scaled_dot_product_attention(q, keys, values, attn_mask=kj <= qi)
        ctxs.append(ctx.transpose(1, 2).reshape(B, C, D))
    return (torch.cat(ctxs, dim=1) @ Wo).to(x.dtype)


def prefill_lse_merge_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Each chunk: attention over the cached past (no mask) and over itself (causal), merged
    through the two log-sum-exps."""
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    x64 = x.double()
    wq, wk, wv = w_q.double(), w_k.double(), w_v.double()
    past_k = torch.zeros(B, H, 0, dh, dtype=torch.float64)
    past_v = torch.zeros(B, H, 0, dh, dtype=torch.float64)
    chunks = []
    for start in range(0, N, chunk_size):
        xc = x64[:, start:start + chunk_size]
        C = xc.shape[1]
        q = torch.einsum("bcm,mhd->bhcd", xc, wq.view(D, H, dh)) / math.sqrt(dh)
        k = torch.einsum("bcm,mhd->bhcd", xc, wk.view(D, H, dh))
        v = torch.einsum("bcm,mhd->bhcd", xc, wv.view(D, H, dh))
        s_self = q @ k.transpose(-2, -1)
        s_self = s_self.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), -math.inf)
        lse_self = torch.logsumexp(s_self, dim=-1)
        out_self = torch.exp(s_self - lse_self[..., None]) @ v
        if past_k.shape[2] > 0:
            s_past = q @ past_k.transpose(-2, -1)
            lse_past = torch.logsumexp(s_past, dim=-1)
            out_past = torch.exp(s_past - lse_past[..., None]) @ past_v
            lse = torch.logaddexp(lse_self, lse_past)
            ctx = (torch.exp(lse_self - lse)[..., None] * out_self
                   + torch.exp(lse_past - lse)[..., None] * out_past)
        else:
            ctx = out_self
        chunks.append(ctx.permute(0, 2, 1, 3).reshape(B, C, D))
        past_k = torch.cat([past_k, k], dim=2)
        past_v = torch.cat([past_v, v], dim=2)
    return (torch.cat(chunks, dim=1) @ w_o.double()).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "multiply_add_as_one_flop",
          "counts one FLOP per multiply-add (B H N d for both products together) instead of 2, "
          "so the intensity is halved",
          intensity_macs_as_flops),
    Entry("decode_attention_intensity", "wrong", "only_keys_read",
          "counts the bytes of the cached keys only and forgets that the values are read too, "
          "so the intensity is doubled",
          intensity_only_keys_read),
    Entry("decode_attention_intensity", "wrong", "bytes_per_query_head",
          "counts the cache bytes with num_heads instead of num_kv_heads, as if every query "
          "head had its own K and V: GQA's saving disappears",
          intensity_bytes_per_query_head),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides the FLOPs by the bytes with //, so a fractional intensity such as 0.5 is "
          "floored",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "missing_parentheses",
          "writes flops / 2 * B * G * N * d * bytes without parentheses, so it divides by 2 and "
          "then multiplies by the rest of the byte count",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "counts_query_and_output_bytes",
          "adds the bytes of the new query and of the output to the denominator, which should "
          "hold only the K and V read from the cache",
          intensity_counts_q_and_out),
    Entry("decode_attention_intensity", "right", "closed_form", None, intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_loop", None, intensity_fraction_loop),

    Entry("paged_attention", "wrong", "reads_whole_pages",
          "uses every slot of the sequence's pages without trimming to seq_len keys, so the "
          "stale slots at the end of the last page enter the softmax",
          paged_whole_pages),
    Entry("paged_attention", "wrong", "repeat_not_interleave",
          "expands the K/V heads with .repeat, which tiles the groups (head h reads group "
          "h % G), instead of repeat_interleave (head h reads group h // (H // G))",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "floor_page_count",
          "takes max(1, seq_len // page_size) pages instead of ceil(seq_len / page_size), so the "
          "keys on a partly filled last page are dropped once a sequence spans several pages",
          paged_floor_page_count),
    Entry("paged_attention", "wrong", "no_scale",
          "never divides the scores by sqrt(d)",
          paged_no_scale),
    Entry("paged_attention", "wrong", "nan_for_empty_sequence",
          "masks the whole pool with -inf past seq_len and calls softmax, so a sequence of "
          "length 0 (every key masked) gives NaN instead of zeros",
          paged_masked_pool_nan_on_empty),
    Entry("paged_attention", "wrong", "reshape_without_transpose",
          "reshapes the gathered pages (p, G, page_size, d) straight to (G, p * page_size, d) "
          "without moving the group axis first, mixing groups and pages",
          paged_reshape_no_transpose),
    Entry("paged_attention", "right", "token_loop_float64", None, paged_token_loop_float64),
    Entry("paged_attention", "right", "gather_masked_safe_softmax", None,
          paged_gather_masked_safe),

    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "cache_not_kept",
          "overwrites the cache with the current chunk's keys and values, so each chunk "
          "attends only to itself and never to the earlier chunks",
          prefill_cache_not_kept),
    Entry("chunked_prefill", "wrong", "ragged_tail_dropped",
          "loops over N // chunk_size chunks, so the last, shorter chunk is never computed "
          "(and with chunk_size > N there is nothing to concatenate: torch.cat raises)",
          prefill_ragged_tail_dropped),
    Entry("chunked_prefill", "wrong", "sdpa_is_causal",
          "calls F.scaled_dot_product_attention with is_causal=True on a (chunk, cached) "
          "score block: SDPA aligns that mask top-left, so later chunks do not see the past",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "merge_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2) first",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "wrong", "keys_from_w_q",
          "projects the cached keys with w_q instead of w_k (copy-paste of the query line)",
          prefill_keys_from_w_q),
    Entry("chunked_prefill", "right", "sdpa_bool_mask_per_chunk", None, prefill_sdpa_bool_mask),
    Entry("chunked_prefill", "right", "past_and_self_lse_merge", None, prefill_lse_merge_float64),
]
