"""Lesson 11 (torch, one plain-Python count): decode_attention_intensity, paged_attention,
chunked_prefill."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry


# ---------------------------------------------------------------- decode_attention_intensity
def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_query_heads_in_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_heads * seq_len * head_dim * bytes_per_element)


def dai_macs(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    macs = 2 * batch_size * num_heads * seq_len * head_dim  # scores + weighted sum
    return macs / (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops // (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_all_traffic(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    kv = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    q_and_out = 2 * batch_size * num_heads * head_dim * bytes_per_element
    return flops / (kv + q_and_out)


def dai_inverted(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element) / flops


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return float(Fraction(2 * num_heads, num_kv_heads * bytes_per_element))


def dai_per_sequence_loop(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    flops = 0
    read = 0
    for _b in range(batch_size):
        for h in range(num_heads):
            flops += 2 * seq_len * head_dim  # q . k for every cached key
            flops += 2 * seq_len * head_dim  # weighted sum of the values
        read += 2 * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / read


# ---------------------------------------------------------------- paged_attention
def _softmax_attend(q, k, v, d):
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    return torch.softmax(s, dim=-1) @ v


def _paged(q, k_pages, v_pages, block_table, seq_lens, *, swap=False, whole_pages=False,
           modulo=False, no_transpose=False, floor_pages=False):
    b_sz, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    c = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((b_sz, h, d), dtype=c)
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        if swap:
            t = torch.arange(n)
            pages = block_table[b].long()[t % ps]
            k = k_pages[pages, :, t // ps].transpose(0, 1)
            v = v_pages[pages, :, t // ps].transpose(0, 1)
        else:
            used = n // ps if floor_pages else math.ceil(n / ps)
            pages = block_table[b, :used].long()
            if no_transpose:
                k = k_pages[pages].reshape(g, -1, d)
                v = v_pages[pages].reshape(g, -1, d)
            else:
                k = k_pages[pages].transpose(0, 1).reshape(g, -1, d)
                v = v_pages[pages].transpose(0, 1).reshape(g, -1, d)
            if not whole_pages:
                k, v = k[:, :n], v[:, :n]
        if modulo:
            k, v = k.repeat(rep, 1, 1), v.repeat(rep, 1, 1)
        else:
            k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        out[b] = _softmax_attend(q[b].to(c)[:, None], k.to(c), v.to(c), d)[:, 0]
    return out.to(q.dtype)


def pa_page_slot_swapped(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, swap=True)


def pa_whole_last_page(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, whole_pages=True)


def pa_modulo_groups(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, modulo=True)


def pa_reshape_mixes_axes(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, no_transpose=True)


def pa_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, floor_pages=True)


def pa_masked_empty_nan(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    table = block_table.long()
    k = k_pages[table].permute(0, 2, 1, 3, 4).reshape(b_sz, g, -1, d).to(c)  # (B, G, T, d)
    v = v_pages[table].permute(0, 2, 1, 3, 4).reshape(b_sz, g, -1, d).to(c)
    k = k.repeat_interleave(h // g, dim=1)
    v = v.repeat_interleave(h // g, dim=1)
    s = (q.to(c)[:, :, None] @ k.transpose(-2, -1))[:, :, 0] / math.sqrt(d)  # (B, H, T)
    valid = torch.arange(s.shape[-1])[None, :] < seq_lens.long()[:, None]  # (B, T)
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    w = torch.softmax(s, dim=-1)
    return (w[:, :, None] @ v)[:, :, 0].to(q.dtype)


def pa_token_gather64(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros((b_sz, h, d), dtype=torch.float64)
    for b in range(b_sz):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        page = block_table[b].long()[t // ps]
        slot = t % ps
        k = k_pages[page, :, slot].double()  # (n, G, d)
        v = v_pages[page, :, slot].double()
        for head in range(h):
            grp = head // (h // g)
            s = k[:, grp] @ q[b, head].double() / math.sqrt(d)  # (n,)
            w = torch.exp(s - s.max())
            out[b, head] = (w / w.sum()) @ v[:, grp]
    return out.to(q.dtype)


def pa_padded_masked(q, k_pages, v_pages, block_table, seq_lens):
    b_sz, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    table = block_table.long()
    k = k_pages[table].double().permute(0, 2, 1, 3, 4).flatten(2, 3)  # (B, G, T, d)
    v = v_pages[table].double().permute(0, 2, 1, 3, 4).flatten(2, 3)
    qg = q.double().view(b_sz, g, rep, d)  # query heads grouped by KV head
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = (torch.arange(s.shape[-1])[None, :] < seq_lens.long()[:, None])[:, None, None, :]
    s = torch.where(valid, s, torch.tensor(-math.inf, dtype=torch.float64))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot > 0, tot, torch.ones_like(tot))
    out = torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(b_sz, h, d)
    return out.to(q.dtype)


# ---------------------------------------------------------------- chunked_prefill
def _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, top_left=False, no_history=False,
        drop_tail=False, no_mask=False, ragged_positions=False):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)

    def split(t):
        return t.reshape(b, t.shape[1], num_heads, dh).transpose(1, 2).to(c)

    k_cache = torch.zeros((b, num_heads, n, dh), dtype=c)
    v_cache = torch.zeros((b, num_heads, n, dh), dtype=c)
    outs = []
    last = (n // chunk_size) * chunk_size if drop_tail else n
    for start in range(0, last, chunk_size):
        stop = min(start + chunk_size, n)
        xc = x[:, start:stop]
        q = split(xc @ w_q)
        k_cache[:, :, start:stop] = split(xc @ w_k)
        v_cache[:, :, start:stop] = split(xc @ w_v)
        first = start if no_history else 0
        k, v = k_cache[:, :, first:stop], v_cache[:, :, first:stop]
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        rows = stop - start
        if not no_mask:
            kpos = torch.arange(first, stop)[None, :]
            if top_left:
                qpos = torch.arange(rows)[:, None]
            elif ragged_positions:
                qpos = stop - chunk_size + torch.arange(rows)[:, None]
            else:
                qpos = start + torch.arange(rows)[:, None]
            s = s.masked_fill(kpos > qpos, float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ v
        outs.append(ctx.transpose(1, 2).reshape(b, rows, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, top_left=True)


def cp_no_history(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, no_history=True)


def cp_drop_tail(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, drop_tail=True)


def cp_no_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, no_mask=True)


def cp_ragged_positions(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _cp(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, ragged_positions=True)


def cp_full_scores(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).reshape(b, n, num_heads, dh).transpose(1, 2).to(c)
    k = (x @ w_k).reshape(b, n, num_heads, dh).transpose(1, 2).to(c)
    v = (x @ w_v).reshape(b, n, num_heads, dh).transpose(1, 2).to(c)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)  # computed once, sliced per chunk
    allowed = torch.ones(n, n, dtype=torch.bool).tril()
    scores = scores.masked_fill(~allowed, float("-inf"))
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        w = torch.softmax(scores[:, :, start:stop, :stop], dim=-1)
        outs.append((w @ v[:, :, :stop]).transpose(1, 2).reshape(b, stop - start, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_sdpa_chunks(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        rows = xc.shape[1]
        heads = lambda t: t.view(b, rows, num_heads, dh).transpose(1, 2).to(c)  # noqa: E731
        q = heads(xc @ w_q)
        keys.append(heads(xc @ w_k))
        values.append(heads(xc @ w_v))
        k = torch.cat(keys, dim=2)
        v = torch.cat(values, dim=2)
        total = k.shape[2]
        mask = torch.arange(total)[None, :] <= torch.arange(total - rows, total)[:, None]
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outs.append(ctx.transpose(1, 2).reshape(b, rows, d_model))
    return torch.cat(outs, dim=1).to(x.dtype) @ w_o


def cp_blockwise_lse64(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    x64 = x.double()
    proj = [(x64 @ w.double()).view(b, n, num_heads, dh).transpose(1, 2)
            for w in (w_q, w_k, w_v)]
    q_all, k_all, v_all = proj
    outs = []
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        q = q_all[:, :, start:stop] / math.sqrt(dh)
        out = torch.zeros_like(q)
        lse = torch.full(q.shape[:-1], -math.inf, dtype=torch.float64)
        for ks in range(0, stop, chunk_size):  # earlier chunks from the cache, then itself
            ke = min(stop, ks + chunk_size)
            s = q @ k_all[:, :, ks:ke].transpose(-2, -1)
            allowed = torch.arange(ks, ke)[None, :] <= torch.arange(start, stop)[:, None]
            s = s.masked_fill(~allowed, -math.inf)
            blk_lse = torch.logsumexp(s, dim=-1)
            blk_out = torch.nan_to_num(torch.exp(s - blk_lse[..., None])) @ v_all[:, :, ks:ke]
            new = torch.logaddexp(lse, blk_lse)
            out = (torch.nan_to_num(torch.exp(lse - new))[..., None] * out
                   + torch.nan_to_num(torch.exp(blk_lse - new))[..., None] * blk_out)
            lse = new
        outs.append(out.transpose(1, 2).reshape(b, stop - start, d_model))
    return (torch.cat(outs, dim=1) @ w_o.double()).to(x.dtype)


E = Entry
ENTRIES = [
    E("decode_attention_intensity", "wrong", "keys_bytes_only",
      "Counts only the bytes of the cached keys, forgetting that the values are read too.",
      dai_keys_only),
    E("decode_attention_intensity", "wrong", "query_heads_in_bytes",
      "Counts the bytes with num_heads instead of num_kv_heads, as if every query head had "
      "its own cached K/V.", dai_query_heads_in_bytes),
    E("decode_attention_intensity", "wrong", "multiply_adds_as_flops",
      "Counts one FLOP per multiply-add instead of 2, halving the intensity.", dai_macs),
    E("decode_attention_intensity", "wrong", "floor_division",
      "Divides FLOPs by bytes with //, truncating a fractional intensity (and returning an "
      "int).", dai_floor_division),
    E("decode_attention_intensity", "wrong", "query_and_output_bytes_added",
      "Adds the bytes of the query and output vectors to the K/V bytes, which the contract's "
      "denominator does not include.", dai_all_traffic),
    E("decode_attention_intensity", "wrong", "ratio_inverted",
      "Returns bytes per FLOP instead of FLOPs per byte.", dai_inverted),
    E("decode_attention_intensity", "right", "closed_form_fraction", None, dai_closed_form),
    E("decode_attention_intensity", "right", "per_sequence_head_loop", None,
      dai_per_sequence_loop),

    E("paged_attention", "wrong", "page_and_slot_swapped",
      "Swaps page and slot: reads page t % page_size at slot t // page_size.",
      pa_page_slot_swapped),
    E("paged_attention", "wrong", "whole_last_page_used",
      "Uses every slot of the sequence's pages, so the stale slots after seq_lens[b] in the "
      "last page are attended too.", pa_whole_last_page),
    E("paged_attention", "wrong", "groups_tiled_modulo",
      "Expands the KV heads with .repeat, so query head h reads KV head h % G instead of "
      "h // (H // G).", pa_modulo_groups),
    E("paged_attention", "wrong", "reshape_mixes_pages_and_heads",
      "Reshapes the gathered (pages, G, page_size, d) block to (G, -1, d) without first "
      "moving the KV-head axis in front, mixing pages and heads.", pa_reshape_mixes_axes),
    E("paged_attention", "wrong", "page_count_floored",
      "Counts the pages with seq_len // page_size instead of rounding up, dropping the keys "
      "of a partly filled last page.", pa_floor_page_count),
    E("paged_attention", "wrong", "empty_sequence_nan",
      "Masks keys past seq_lens with -inf and takes a plain softmax, so a sequence of length "
      "0 gives NaN instead of zeros.", pa_masked_empty_nan),
    E("paged_attention", "right", "per_token_gather_float64", None, pa_token_gather64),
    E("paged_attention", "right", "padded_grouped_einsum_masked", None, pa_padded_masked),

    E("chunked_prefill", "wrong", "chunk_mask_top_left",
      "Builds each chunk's causal mask from the chunk-local query index (top-left), so "
      "queries of later chunks see only the first keys.", cp_top_left_mask),
    E("chunked_prefill", "wrong", "earlier_chunks_ignored",
      "Lets each chunk attend only to its own keys, never to the cached keys of earlier "
      "chunks.", cp_no_history),
    E("chunked_prefill", "wrong", "ragged_last_chunk_dropped",
      "Loops over N // chunk_size full chunks only, dropping the shorter last chunk.",
      cp_drop_tail),
    E("chunked_prefill", "wrong", "no_causal_mask_in_chunk",
      "Applies no mask, so queries inside a chunk also see the later tokens of that chunk.",
      cp_no_mask),
    E("chunked_prefill", "wrong", "query_positions_from_stop",
      "Places the chunk's queries at stop - chunk_size + i instead of start + i, which is "
      "wrong for a shorter last chunk.", cp_ragged_positions),
    E("chunked_prefill", "wrong", "full_score_matrix",
      "Computes the whole N x N score matrix once and slices it per chunk, which the exercise "
      "forbids.", cp_full_scores),
    E("chunked_prefill", "right", "sdpa_per_chunk_explicit_mask", None, cp_sdpa_chunks),
    E("chunked_prefill", "right", "blockwise_logsumexp_float64", None, cp_blockwise_lse64),
]
