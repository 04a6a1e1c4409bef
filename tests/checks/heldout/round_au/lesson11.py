"""Lesson 11 (serving): held-out learners' answers for decode_attention_intensity,
paged_attention and chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ decode_attention_intensity: wrong
def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    bytes_read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / bytes_read


def intensity_query_heads_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv_bytes = 2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element
    return flops / kv_bytes


def intensity_mac_as_one(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    macs = 2 * batch_size * num_heads * seq_len * head_dim  # q.k and p.v
    reads = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return macs / reads


def intensity_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    nbytes = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops // nbytes


def intensity_precedence(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim * 2
    return flops / 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element


def intensity_counts_q_and_out(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    cache = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q_and_out = 2 * batch_size * num_heads * head_dim * bytes_per_element
    return flops / (cache + q_and_out)


# ============================================================ decode_attention_intensity: right
def intensity_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    # B, N and d cancel: (4 B H N d) / (2 B G N d s) = 2 H / (G s)
    return float(2 * num_heads) / (num_kv_heads * bytes_per_element)


def intensity_fraction(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_seq_flops = sum(2 * seq_len * head_dim for _product in ("scores", "weighted_sum"))
    flops = Fraction(batch_size * num_heads * per_seq_flops)
    k_bytes = Fraction(batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)
    return float(flops / (k_bytes + k_bytes))


# ============================================================ paged_attention: wrong
def paged_group_modulo(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :(n + P - 1) // P].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k = k.repeat(H // G, 1, 1)  # head h -> group h % G
        v = v.repeat(H // G, 1, 1)
        s = (q[b].to(ct)[:, None] @ k.transpose(1, 2)) / math.sqrt(d)
        out[b] = (s.softmax(-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_all_table_slots(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G = k_pages.shape[1]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        if int(seq_lens[b]) == 0:
            continue
        pages = block_table[b].long()  # every page listed for the sequence
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d).to(ct)
        k = k.repeat_interleave(rep, 0)
        v = v.repeat_interleave(rep, 0)
        s = q[b].to(ct).unsqueeze(1) @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v).squeeze(1)
    return out.to(q.dtype)


def paged_div_mod_swapped(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        page = block_table[b, t % P].long()
        slot = t // P
        k = k_pages[page, :, slot].to(ct)  # (n, G, d)
        v = v_pages[page, :, slot].to(ct)
        k = k.permute(1, 0, 2).repeat_interleave(rep, 0)  # (H, n, d)
        v = v.permute(1, 0, 2).repeat_interleave(rep, 0)
        s = torch.einsum("hd,hnd->hn", q[b].to(ct), k) / math.sqrt(d)
        out[b] = torch.einsum("hn,hnd->hd", s.softmax(-1), v)
    return out.to(q.dtype)


def paged_empty_sequence_crash(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    results = []
    for b in range(B):
        n = int(seq_lens[b])
        pages = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        v = v_pages[pages].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct)
        k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        s = (k @ q[b].to(ct).unsqueeze(-1)).squeeze(-1) / math.sqrt(d)  # (H, n)
        m = s.max(dim=-1, keepdim=True).values
        e = torch.exp(s - m)
        w = e / e.sum(-1, keepdim=True)
        results.append((w.unsqueeze(1) @ v).squeeze(1))
    return torch.stack(results).to(q.dtype)


def paged_scale_by_page_size(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    rep = H // G
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(B, H, d, dtype=ct)
    for b in range(B):
        n = int(seq_lens[b])
        if not n:
            continue
        pg = block_table[b, :math.ceil(n / P)].long()
        k = k_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct).repeat_interleave(rep, 0)
        v = v_pages[pg].transpose(0, 1).reshape(G, -1, d)[:, :n].to(ct).repeat_interleave(rep, 0)
        s = q[b].to(ct)[:, None, :] @ k.transpose(-2, -1) / math.sqrt(k_pages.shape[-2])
        out[b] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out.to(q.dtype)


def paged_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
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
        k = k_pages[pages].reshape(G, -1, d)[:, :n].to(ct)  # (p, G, P, d) -> (G, p*P, d)
        v = v_pages[pages].reshape(G, -1, d)[:, :n].to(ct)
        k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        s = q[b].to(ct)[:, None] @ k.transpose(1, 2) / math.sqrt(d)
        out[b] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


# ============================================================ paged_attention: right
def paged_token_gather_float64(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    G, P = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(B, H, d, dtype=torch.float64)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)])
        vals = torch.stack([v_pages[int(block_table[b, t // P]), :, t % P] for t in range(n)])
        for h in range(H):
            g = h // (H // G)
            s = keys[:, g].double() @ q[b, h].double() / math.sqrt(d)  # (n,)
            w = torch.softmax(s, dim=0)
            out[b, h] = w @ vals[:, g].double()
    return out.to(q.dtype)


def paged_padded_batch_mask(q, k_pages, v_pages, block_table, seq_lens):
    B, H, d = q.shape
    _, G, P, _ = k_pages.shape
    max_pages = block_table.shape[1]
    ct = torch.promote_types(q.dtype, torch.float32)
    idx = block_table.long()  # (B, max_pages)
    k = k_pages[idx].to(ct)  # (B, max_pages, G, P, d)
    v = v_pages[idx].to(ct)
    k = k.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    v = v.permute(0, 2, 1, 3, 4).reshape(B, G, max_pages * P, d)
    qg = q.to(ct).reshape(B, G, H // G, d)  # heads h = g * (H // G) + r
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = torch.arange(max_pages * P)[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    out = torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(B, H, d)
    return out.to(q.dtype)


# ============================================================ chunked_prefill: wrong
def prefill_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, N, chunk_size):
        xc = x[:, s0:s0 + chunk_size].to(ct)
        c = xc.shape[1]
        q = (xc @ w_q.to(ct)).view(B, c, num_heads, dh).transpose(1, 2)
        ks.append((xc @ w_k.to(ct)).view(B, c, num_heads, dh).transpose(1, 2))
        vs.append((xc @ w_v.to(ct)).view(B, c, num_heads, dh).transpose(1, 2))
        K, V = torch.cat(ks, 2), torch.cat(vs, 2)
        o = F.scaled_dot_product_attention(q, K, V, is_causal=True)
        outs.append(o.transpose(1, 2).reshape(B, c, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_no_cache(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    pieces = []
    for start in range(0, N, chunk_size):
        xc = x[:, start:start + chunk_size].to(ct)
        c = xc.shape[1]
        split = lambda t: t.reshape(B, c, num_heads, dh).transpose(1, 2)  # noqa: E731
        q, k, v = split(xc @ w_q.to(ct)), split(xc @ w_k.to(ct)), split(xc @ w_v.to(ct))
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(c, c, dtype=torch.bool).tril(), -math.inf)
        pieces.append((s.softmax(-1) @ v).transpose(1, 2).reshape(B, c, D))
    return (torch.cat(pieces, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_cache_appended_late(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    H = num_heads
    dh = D // H
    ct = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, H, 0, dh, dtype=ct)
    v_cache = torch.zeros(B, H, 0, dh, dtype=ct)
    outs = []
    for start in range(0, N, chunk_size):
        stop = min(start + chunk_size, N)
        xc = x[:, start:stop].to(ct)
        c = stop - start
        q = (xc @ w_q.to(ct)).view(B, c, H, dh).transpose(1, 2)
        k_new = (xc @ w_k.to(ct)).view(B, c, H, dh).transpose(1, 2)
        v_new = (xc @ w_v.to(ct)).view(B, c, H, dh).transpose(1, 2)
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(dh)  # (B, H, c, start)
        w = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
        outs.append((w @ v_cache).transpose(1, 2).reshape(B, c, D))
        k_cache = torch.cat([k_cache, k_new], 2)
        v_cache = torch.cat([v_cache, v_new], 2)
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_drops_last_partial(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    n_chunks = max(1, N // chunk_size)
    kc, vc, outs = [], [], []
    for i in range(n_chunks):
        start, stop = i * chunk_size, min((i + 1) * chunk_size, N)
        xc = x[:, start:stop].to(ct)
        c = stop - start
        q = (xc @ w_q.to(ct)).view(B, c, num_heads, dh).transpose(1, 2)
        kc.append((xc @ w_k.to(ct)).view(B, c, num_heads, dh).transpose(1, 2))
        vc.append((xc @ w_v.to(ct)).view(B, c, num_heads, dh).transpose(1, 2))
        K, V = torch.cat(kc, 2), torch.cat(vc, 2)
        s = q @ K.transpose(-2, -1) / math.sqrt(dh)
        ok = torch.ones(c, stop, dtype=torch.bool).tril(stop - c)
        s = s.masked_fill(~ok, -math.inf)
        outs.append((s.softmax(-1) @ V).transpose(1, 2).reshape(B, c, D))
    return (torch.cat(outs, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_scale_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, num_heads, N, dh, dtype=ct)
    V = torch.empty(B, num_heads, N, dh, dtype=ct)
    res = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        xc = x[:, a:z].to(ct)
        q = (xc @ w_q.to(ct)).view(B, z - a, num_heads, dh).transpose(1, 2)
        K[:, :, a:z] = (xc @ w_k.to(ct)).view(B, z - a, num_heads, dh).transpose(1, 2)
        V[:, :, a:z] = (xc @ w_v.to(ct)).view(B, z - a, num_heads, dh).transpose(1, 2)
        s = q @ K[:, :, :z].transpose(-2, -1) / math.sqrt(D)
        s = s.masked_fill(~torch.ones(z - a, z, dtype=torch.bool).tril(a), -math.inf)
        res.append((s.softmax(-1) @ V[:, :, :z]).transpose(1, 2).reshape(B, z - a, D))
    return (torch.cat(res, 1) @ w_o.to(ct)).to(x.dtype)


def prefill_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    K = torch.empty(B, num_heads, N, dh, dtype=ct)
    V = torch.empty(B, num_heads, N, dh, dtype=ct)
    res = []
    for a in range(0, N, chunk_size):
        z = min(a + chunk_size, N)
        c = z - a
        xc = x[:, a:z].to(ct)
        q = (xc @ w_q.to(ct)).view(B, c, num_heads, dh).transpose(1, 2)
        K[:, :, a:z] = (xc @ w_k.to(ct)).view(B, c, num_heads, dh).transpose(1, 2)
        V[:, :, a:z] = (xc @ w_v.to(ct)).view(B, c, num_heads, dh).transpose(1, 2)
        s = q @ K[:, :, :z].transpose(-2, -1) / math.sqrt(dh)
        s = s.masked_fill(~torch.ones(c, z, dtype=torch.bool).tril(a), -math.inf)
        ctx = s.softmax(-1) @ V[:, :, :z]  # (B, H, c, dh)
        res.append(ctx.reshape(B, c, D))
    return (torch.cat(res, 1) @ w_o.to(ct)).to(x.dtype)


# ============================================================ chunked_prefill: right
def prefill_sdpa_explicit_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xs = x.to(ct)
    wq, wk, wv = w_q.to(ct), w_k.to(ct), w_v.to(ct)
    k_seen = torch.empty(B, num_heads, 0, dh, dtype=ct)
    v_seen = torch.empty(B, num_heads, 0, dh, dtype=ct)
    outs = []
    for chunk in torch.split(xs, chunk_size, dim=1):
        c = chunk.shape[1]

        def heads(t):
            return t.unflatten(-1, (num_heads, dh)).transpose(1, 2)

        k_seen = torch.cat([k_seen, heads(chunk @ wk)], dim=2)
        v_seen = torch.cat([v_seen, heads(chunk @ wv)], dim=2)
        total = k_seen.shape[2]
        # query j of the chunk sits at position total - c + j: it sees keys <= that
        mask = torch.arange(total)[None, :] <= (torch.arange(c)[:, None] + total - c)
        o = F.scaled_dot_product_attention(heads(chunk @ wq), k_seen, v_seen, attn_mask=mask)
        outs.append(o.transpose(1, 2).flatten(2))
    return (torch.cat(outs, dim=1) @ w_o.to(ct)).to(x.dtype)


def prefill_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    B, N, D = x.shape
    dh = D // num_heads
    x64 = x.double()
    out = torch.zeros(B, N, D, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq, wk, wv = w_q.double()[:, cols], w_k.double()[:, cols], w_v.double()[:, cols]
        wo = w_o.double()[cols, :]
        keys, values = [], []
        pos = 0
        while pos < N:
            end = min(pos + chunk_size, N)
            xc = x64[:, pos:end]
            keys.append(xc @ wk)
            values.append(xc @ wv)
            K = torch.cat(keys, dim=1)  # (B, end, dh)
            V = torch.cat(values, dim=1)
            s = torch.einsum("bqe,bke->bqk", xc @ wq, K) / math.sqrt(dh)
            qpos = torch.arange(pos, end)[:, None]
            s = torch.where(torch.arange(end)[None, :] <= qpos, s, torch.tensor(-math.inf, dtype=torch.float64))
            out[:, pos:end] += torch.softmax(s, dim=-1) @ V @ wo
            pos = end
    return out.to(x.dtype)


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "reads_keys_only",
          "counts only the bytes of the cached keys; the values are read from the cache too",
          intensity_keys_only),
    Entry("decode_attention_intensity", "wrong", "kv_bytes_per_query_head",
          "counts the K/V bytes with num_heads instead of num_kv_heads, as if every query head "
          "had its own cache (the GQA sharing is lost)", intensity_query_heads_bytes),
    Entry("decode_attention_intensity", "wrong", "multiply_add_as_one_flop",
          "counts a multiply-add as one FLOP (2 B H N d) instead of two (4 B H N d)",
          intensity_mac_as_one),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "divides with // so the intensity is floored to an int (0.5 becomes 0)",
          intensity_floor_division),
    Entry("decode_attention_intensity", "wrong", "missing_parentheses",
          "flops / 2 * batch * ...: without parentheses around the byte count it divides by 2 "
          "and multiplies by the rest", intensity_precedence),
    Entry("decode_attention_intensity", "wrong", "adds_query_and_output_bytes",
          "adds the bytes of the query and the output to the K/V bytes; the contract counts "
          "only K and V read from the cache", intensity_counts_q_and_out),
    Entry("decode_attention_intensity", "right", "closed_form_2H_over_Gs", None,
          intensity_closed_form),
    Entry("decode_attention_intensity", "right", "fraction_sum", None, intensity_fraction),

    Entry("paged_attention", "wrong", "group_by_modulo",
          "maps query head h to KV head h % G (tensor.repeat) instead of h // (H // G) "
          "(repeat_interleave)", paged_group_modulo),
    Entry("paged_attention", "wrong", "attends_all_table_pages",
          "attends over every slot of every page in the sequence's block-table row instead of "
          "only its first seq_lens[b] keys (stale slots and arbitrary pages get weight)",
          paged_all_table_slots),
    Entry("paged_attention", "wrong", "div_mod_swapped",
          "finds key t's page with t % page_size and its slot with t // page_size, the two "
          "swapped: it reads the wrong slots, and for long sequences the slot index runs "
          "past page_size and raises IndexError", paged_div_mod_swapped),
    Entry("paged_attention", "wrong", "crashes_on_empty_sequence",
          "no special case for seq_lens[b] == 0: the max over an empty score row raises "
          "instead of giving a zero output", paged_empty_sequence_crash),
    Entry("paged_attention", "wrong", "scale_by_page_size",
          "scales the scores by 1/sqrt(k_pages.shape[-2]), the page size, instead of "
          "1/sqrt(d)", paged_scale_by_page_size),
    Entry("paged_attention", "wrong", "pages_reshaped_without_transpose",
          "reshapes the gathered (pages, G, page_size, d) straight to (G, pages*page_size, d) "
          "without moving the group axis first, interleaving groups and pages",
          paged_reshape_without_transpose),
    Entry("paged_attention", "right", "token_gather_float64", None, paged_token_gather_float64),
    Entry("paged_attention", "right", "padded_batch_mask", None, paged_padded_batch_mask),

    Entry("chunked_prefill", "wrong", "sdpa_is_causal_top_left",
          "uses scaled_dot_product_attention(..., is_causal=True) on a chunk of queries "
          "against all cached keys, but is_causal aligns the mask top-left, so later chunks "
          "cannot see most of the earlier keys", prefill_sdpa_is_causal),
    Entry("chunked_prefill", "wrong", "chunks_independent",
          "keeps no cache: each chunk attends only to its own keys and values, not to those "
          "of earlier chunks", prefill_no_cache),
    Entry("chunked_prefill", "wrong", "cache_appended_after_attention",
          "appends the chunk's keys and values to the cache after computing its attention, "
          "so a chunk never sees itself (the first chunk sees nothing)",
          prefill_cache_appended_late),
    Entry("chunked_prefill", "wrong", "drops_ragged_last_chunk",
          "loops over N // chunk_size chunks, so when chunk_size does not divide N the last "
          "tokens are never processed and the output is too short", prefill_drops_last_partial),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          prefill_scale_by_d_model),
    Entry("chunked_prefill", "wrong", "merge_heads_without_transpose",
          "merges heads by reshaping (B, H, C, d_head) straight to (B, C, d_model) without "
          "moving the head axis next to d_head first", prefill_merge_without_transpose),
    Entry("chunked_prefill", "right", "sdpa_explicit_bottom_right_mask", None,
          prefill_sdpa_explicit_mask),
    Entry("chunked_prefill", "right", "head_loop_float64", None, prefill_head_loop_float64),
]
