"""Held-out learners' answers, lesson 11 (serving): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity -- wrong
def intensity_bytes_use_num_heads(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    score_flops = 2 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return score_flops / kv_bytes


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / k_bytes


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_counts_query_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q = batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + q)


# ============================================================ decode_attention_intensity -- right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: each K/V element read serves H/G query heads, 2 FLOPs each, twice
    return float(2 * num_heads) / float(num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    macs_per_query = 2 * seq_len * head_dim  # scores + weighted sum
    flops = Fraction(2 * macs_per_query * num_heads * batch_size)
    read = Fraction(num_kv_heads * seq_len * head_dim * 2) * bytes_per_element * batch_size
    return float(flops / read)


# ============================================================ paged_attention -- wrong
def paged_reads_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        s = (q[b].to(ct)[:, None, :] @ k.transpose(-1, -2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_repeat_not_interleave(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    res = []
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            res.append(torch.zeros(heads, d, dtype=ct))
            continue
        ids = block_table[b, :(n + page - 1) // page].long()
        keys = k_pages[ids].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(ct)
        vals = v_pages[ids].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n].to(ct)
        keys = keys.repeat(heads // groups, 1, 1)
        vals = vals.repeat(heads // groups, 1, 1)
        sc = torch.einsum("hd,hnd->hn", q[b].to(ct), keys) / math.sqrt(d)
        res.append(torch.einsum("hn,hnd->hd", torch.softmax(sc, -1), vals))
    return torch.stack(res).to(q.dtype)


def paged_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
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
        K = torch.stack(ks, dim=1).to(ct)  # (G, n, d)
        V = torch.stack(vs, dim=1).to(ct)
        for h in range(H):
            g = h // (H // G)
            s = K[g] @ q[b, h].to(ct) / math.sqrt(d)
            out[b, h] = torch.softmax(s, 0) @ V[g]
    return out.to(q.dtype)


def paged_masked_no_empty_guard(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    M = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    tbl = block_table.long()
    K = k_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, M * P, d).to(ct)
    V = v_pages[tbl].permute(0, 2, 1, 3, 4).reshape(B, G, M * P, d).to(ct)
    K = K.repeat_interleave(H // G, dim=1)
    V = V.repeat_interleave(H // G, dim=1)
    s = torch.einsum("bhd,bhtd->bht", q.to(ct), K) / math.sqrt(d)
    valid = torch.arange(M * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], -math.inf)
    w = torch.softmax(s, dim=-1)
    return torch.einsum("bht,bhtd->bhd", w, V).to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        used = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[used].reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[used].reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = (k @ q[b].to(ct)[:, :, None]).squeeze(-1) / math.sqrt(d)  # (H, n)
        out[b] = (torch.softmax(s, -1)[:, None, :] @ v)[:, 0]
    return out.to(q.dtype)


def paged_batch_max_length(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    n = int(seq_lens.max())
    out = torch.zeros(B, H, d, dtype=ct)
    if n == 0:
        return out.to(q.dtype)
    n_pages = math.ceil(n / P)
    for b in range(B):
        pages = block_table[b, :n_pages].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat_interleave(H // G, dim=0)
        v = v.repeat_interleave(H // G, dim=0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


# ============================================================ paged_attention -- right
def paged_token_loop_f64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    per_group = H // G
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(H):
            g = h // per_group
            if n == 0:
                continue
            keys = torch.stack([k_pages[int(block_table[b, t // P]), g, t % P] for t in range(n)])
            vals = torch.stack([v_pages[int(block_table[b, t // P]), g, t % P] for t in range(n)])
            s = keys.double() @ q[b, h].double() / math.sqrt(d)
            e = torch.exp(s - s.max())
            out[b, h] = (e / e.sum()) @ vals.double()
    return out.to(q.dtype)


def paged_vectorised_gather(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    T = block_table.shape[1] * P
    t = torch.arange(T)
    page_ids = block_table.long()[:, t // P]  # (B, T)
    slots = (t % P).expand(B, T)
    heads_to_group = torch.arange(H) // (H // G)  # (H,)
    K = k_pages[page_ids[:, None, :], heads_to_group[None, :, None], slots[:, None, :]]  # (B,H,T,d)
    V = v_pages[page_ids[:, None, :], heads_to_group[None, :, None], slots[:, None, :]]
    s = torch.einsum("bhd,bhtd->bht", q.double(), K.double()) / math.sqrt(d)
    valid = (t[None, :] < seq_lens.long()[:, None])[:, None, :]  # (B, 1, T)
    s = torch.where(valid, s, torch.tensor(-math.inf, dtype=torch.float64))
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(dim=-1, keepdim=True)
    w = e / torch.where(z == 0, torch.ones_like(z), z)
    return torch.einsum("bht,bhtd->bhd", w, V.double()).to(q.dtype)


# ============================================================ chunked_prefill -- wrong
def prefill_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop]
        C = stop - start
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct))
        K, V = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        s = q @ K.transpose(-2, -1) / math.sqrt(dh)  # earlier chunks and this one
        o = torch.softmax(s, dim=-1) @ V
        outs.append(o.transpose(1, 2).reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, dm = x.shape
    hd = dm // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, num_heads, n, hd, dtype=ct)
    v_cache = torch.zeros(b, num_heads, n, hd, dtype=ct)
    pieces = []
    for s0 in range(0, n, chunk_size):
        s1 = min(s0 + chunk_size, n)
        xc = x[:, s0:s1]
        split = lambda t: t.reshape(b, s1 - s0, num_heads, hd).transpose(1, 2).to(ct)  # noqa
        q = split(xc @ w_q)
        k_cache[:, :, s0:s1] = split(xc @ w_k)
        v_cache[:, :, s0:s1] = split(xc @ w_v)
        o = F.scaled_dot_product_attention(q, k_cache[:, :, :s1], v_cache[:, :, :s1],
                                           is_causal=True)
        pieces.append(o.transpose(1, 2).reshape(b, s1 - s0, dm))
    return torch.cat(pieces, dim=1).to(x.dtype) @ w_o


def prefill_cache_not_kept(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    result = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        C = stop - start
        xc = x[:, start:stop]
        q = (xc @ w_q).reshape(B, C, num_heads, dh).permute(0, 2, 1, 3).to(ct)
        k = (xc @ w_k).reshape(B, C, num_heads, dh).permute(0, 2, 1, 3).to(ct)
        v = (xc @ w_v).reshape(B, C, num_heads, dh).permute(0, 2, 1, 3).to(ct)
        sc = q @ k.transpose(-1, -2) / math.sqrt(dh)
        sc = sc.masked_fill(~torch.ones(C, C, dtype=torch.bool).tril(), -math.inf)
        o = torch.softmax(sc, dim=-1) @ v
        result.append(o.permute(0, 2, 1, 3).reshape(B, C, D))
    return torch.cat(result, dim=1).to(x.dtype) @ w_o


def prefill_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    V_cache = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z]
        q = (xc @ w_q).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        K_cache[:, :, a:z] = (xc @ w_k).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        V_cache[:, :, a:z] = (xc @ w_v).view(B, z - a, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ K_cache[:, :, :z].transpose(-2, -1) / math.sqrt(D)
        allowed = torch.arange(z)[None, :] <= torch.arange(a, z)[:, None]
        s = s.masked_fill(~allowed, -math.inf)
        o = torch.softmax(s, -1) @ V_cache[:, :, :z]
        outs.append(o.transpose(1, 2).reshape(B, z - a, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_drops_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for c in range(N // chunk_size):
        start, stop = c * chunk_size, (c + 1) * chunk_size
        xc = x[:, start:stop]
        q = (xc @ w_q).view(B, chunk_size, num_heads, dh).transpose(1, 2).to(ct)
        ks.append((xc @ w_k).view(B, chunk_size, num_heads, dh).transpose(1, 2).to(ct))
        vs.append((xc @ w_v).view(B, chunk_size, num_heads, dh).transpose(1, 2).to(ct))
        K, V = torch.cat(ks, 2), torch.cat(vs, 2)
        s = q @ K.transpose(-2, -1) / math.sqrt(dh)
        keep = torch.ones(chunk_size, stop, dtype=torch.bool).tril(start)
        s = s.masked_fill(~keep, -math.inf)
        outs.append((torch.softmax(s, -1) @ V).transpose(1, 2).reshape(B, chunk_size, D))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    kc = torch.empty(B, num_heads, N, dh, dtype=ct)
    vc = torch.empty(B, num_heads, N, dh, dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        C = stop - start
        xc = x[:, start:stop]
        q = (xc @ w_q).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        kc[:, :, start:stop] = (xc @ w_k).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        vc[:, :, start:stop] = (xc @ w_v).view(B, C, num_heads, dh).transpose(1, 2).to(ct)
        s = q @ kc[:, :, :stop].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(C, stop, dtype=torch.bool).tril(start), -math.inf)
        ctx = torch.softmax(s, dim=-1) @ vc[:, :, :stop]  # (B, H, C, dh)
        outs.append(ctx.reshape(B, C, D))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


# ============================================================ chunked_prefill -- right
def prefill_sdpa_bottom_right_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    f = torch.float64
    xd = x.to(f)
    keys, values, outs = [], [], []
    pos = 0
    while pos < N:
        end = min(pos + chunk_size, N)
        xc = xd[:, pos:end]
        heads = lambda t: t.unflatten(-1, (num_heads, dh)).transpose(1, 2)  # noqa: E731
        q = heads(xc @ w_q.to(f))
        keys.append(heads(xc @ w_k.to(f)))
        values.append(heads(xc @ w_v.to(f)))
        mask = torch.arange(end)[None, :] <= torch.arange(pos, end)[:, None]  # (C, end)
        o = F.scaled_dot_product_attention(q, torch.cat(keys, 2), torch.cat(values, 2),
                                           attn_mask=mask)
        outs.append(o.transpose(1, 2).flatten(-2))
        pos = end
    return (torch.cat(outs, dim=1) @ w_o.to(f)).to(x.dtype)


def prefill_two_part_merge(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """Each chunk: attention over the past cache (no mask) and over itself (causal), merged
    with their log-sum-exps."""
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    f = torch.float64
    Q = torch.einsum("bnd,de->bne", x.to(f), w_q.to(f)).reshape(B, N, H, dh)
    K = torch.einsum("bnd,de->bne", x.to(f), w_k.to(f)).reshape(B, N, H, dh)
    V = torch.einsum("bnd,de->bne", x.to(f), w_v.to(f)).reshape(B, N, H, dh)
    out = torch.zeros(B, N, H, dh, dtype=f)
    for s in range(0, N, chunk_size):
        e = min(s + chunk_size, N)
        q = Q[:, s:e] / math.sqrt(dh)
        own = torch.einsum("bqhd,bkhd->bhqk", q, K[:, s:e])
        own = own.masked_fill(torch.ones(e - s, e - s, dtype=torch.bool).triu(1), -math.inf)
        lse_own = torch.logsumexp(own, dim=-1)
        o_own = torch.einsum("bhqk,bkhd->bhqd", torch.exp(own - lse_own[..., None]), V[:, s:e])
        if s > 0:
            past = torch.einsum("bqhd,bkhd->bhqk", q, K[:, :s])
            lse_past = torch.logsumexp(past, dim=-1)
            o_past = torch.einsum("bhqk,bkhd->bhqd", torch.exp(past - lse_past[..., None]),
                                  V[:, :s])
            tot = torch.logaddexp(lse_own, lse_past)
            o = torch.exp(lse_own - tot)[..., None] * o_own + \
                torch.exp(lse_past - tot)[..., None] * o_past
        else:
            o = o_own
        out[:, s:e] = o.transpose(1, 2)
    return (out.reshape(B, N, D) @ w_o.to(f)).to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "bytes_with_query_heads",
          "counts the K/V bytes with num_heads instead of num_kv_heads, ignoring that query "
          "heads share K/V heads (GQA/MQA)",
          intensity_bytes_use_num_heads),
    Entry("decode_attention_intensity", "wrong", "scores_flops_only",
          "counts only the score product's FLOPs and forgets the weighted sum over the values "
          "(half the FLOPs)",
          intensity_scores_only),
    Entry("decode_attention_intensity", "wrong", "keys_bytes_only",
          "divides by the bytes of the cached keys only, forgetting that the values are read "
          "from the cache too",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides FLOPs by bytes with `//`, which floors the ratio to an integer (0 instead of "
          "0.5, for example)",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "denominator_precedence",
          "writes flops / 2 * batch * kv_heads * ... without parentheses, so only the 2 divides "
          "and the rest of the byte count multiplies",
          intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "counts_query_bytes",
          "adds the bytes of the new queries to the bytes read, but the contract divides by "
          "the bytes of the cached K and V only",
          intensity_counts_query_bytes),
    Entry("decode_attention_intensity", "right", "closed_form_2H_over_G_bytes", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "exact_fraction", None, intensity_fraction),

    Entry("paged_attention", "wrong", "reads_whole_last_page",
          "attends to every slot of the sequence's pages without trimming to seq_lens[b], so "
          "the stale slots after the last key of a partly filled page are read",
          paged_reads_whole_last_page),
    Entry("paged_attention", "wrong", "repeat_instead_of_repeat_interleave",
          "expands the K/V heads with .repeat, so query head h reads group h % G instead of "
          "h // (H // G) (repeat_interleave)",
          paged_repeat_not_interleave),
    Entry("paged_attention", "wrong", "page_and_slot_swapped",
          "locates key t at page block_table[b, t % page_size], slot t // page_size: the page "
          "and slot formulas are swapped, reading the wrong keys or raising IndexError when "
          "t % page_size runs past the block table's width",
          paged_page_slot_swapped),
    Entry("paged_attention", "wrong", "masked_softmax_nan_on_empty",
          "masks positions >= seq_lens[b] with -inf but never guards a sequence of length 0, "
          "whose softmax over all -inf scores gives NaN instead of zeros",
          paged_masked_no_empty_guard),
    Entry("paged_attention", "wrong", "flatten_pages_without_transpose",
          "reshapes the gathered (pages, G, page_size, d) block straight to (G, -1, d) without "
          "moving the group axis first, mixing pages of different K/V heads",
          paged_reshape_without_transpose),
    Entry("paged_attention", "wrong", "one_length_for_batch",
          "uses the longest seq_len for every sequence, so shorter sequences read table "
          "entries and slots past their length",
          paged_batch_max_length),
    Entry("paged_attention", "right", "token_loop_float64", None, paged_token_loop_f64),
    Entry("paged_attention", "right", "advanced_index_gather_masked", None,
          paged_vectorised_gather),

    Entry("chunked_prefill", "wrong", "no_causal_mask_in_chunk",
          "lets every query of a chunk attend to all keys of its own chunk (no causal mask), so "
          "queries see later tokens of their chunk",
          prefill_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "relies on F.scaled_dot_product_attention(is_causal=True), whose mask is aligned "
          "top-left: for a chunk against the whole cache it hides earlier chunks' keys instead "
          "of aligning bottom-right",
          prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "cache_not_kept",
          "attends each chunk only to its own keys and values, never keeping earlier chunks' "
          "K/V in a cache",
          prefill_cache_not_kept),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_d_model),
    Entry("chunked_prefill", "wrong", "ragged_tail_dropped",
          "loops over N // chunk_size whole chunks, so the tokens of a shorter last chunk are "
          "never computed (output too short, or nothing to concatenate when chunk_size > N)",
          prefill_drops_tail),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges the heads with ctx.reshape(B, C, d_model) straight from (B, H, C, d_head), "
          "without transpose(1, 2), mixing tokens and heads",
          prefill_merge_without_transpose),
    Entry("chunked_prefill", "right", "sdpa_explicit_bottom_right_mask", None,
          prefill_sdpa_bottom_right_mask),
    Entry("chunked_prefill", "right", "past_and_own_lse_merge", None, prefill_two_part_merge),
]
