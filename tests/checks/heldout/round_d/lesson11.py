"""Round d, lesson 11 (torch): decode_attention_intensity, paged_attention, chunked_prefill."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- intensity
def dai_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_flops_with_kv_heads(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    flops = 4 * batch_size * num_kv_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_scores_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_floor_division(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops // (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_elements_not_bytes(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_kv_heads * seq_len * head_dim)


def dai_one_flop_per_mac(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    flops = 2 * batch_size * num_heads * seq_len * head_dim
    return flops / (2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element)


def dai_closed_form(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2 * num_heads / (num_kv_heads * bytes_per_element)


def dai_step_by_step(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    queries = batch_size * num_heads
    score_flops = queries * seq_len * 2 * head_dim
    sum_flops = queries * seq_len * 2 * head_dim
    kv_elements = 2 * batch_size * num_kv_heads * seq_len * head_dim
    return float(score_flops + sum_flops) / float(kv_elements * bytes_per_element)


# ----------------------------------------------------------------------------- paged_attention
def _gather(k_pages, pages, n, groups, d):
    return k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n]


def _paged(q, k_pages, v_pages, block_table, seq_lens, *, full_pages=False, ignore_table=False,
           modulo_heads=False, no_transpose=False, floor_pages=False):
    b, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    c = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros((b, h, d), dtype=c)
    for i in range(b):
        n = int(seq_lens[i])
        if n == 0:
            continue
        n_pages = n // ps if floor_pages else math.ceil(n / ps)
        if ignore_table:
            pages = torch.arange(n_pages)
        else:
            pages = block_table[i, :n_pages].long()
        keep = n_pages * ps if full_pages else n
        if no_transpose:
            k = k_pages[pages].reshape(g, -1, d)[:, :keep]
            v = v_pages[pages].reshape(g, -1, d)[:, :keep]
        else:
            k = _gather(k_pages, pages, keep, g, d)
            v = _gather(v_pages, pages, keep, g, d)
        heads = torch.arange(h) % g if modulo_heads else torch.arange(h) // rep
        k, v = k[heads].to(c), v[heads].to(c)
        s = (q[i].to(c)[:, None, :] @ k.transpose(-2, -1)) / math.sqrt(d)
        if s.shape[-1] == 0:
            continue
        out[i] = (torch.softmax(s, -1) @ v)[:, 0]
    return out.to(q.dtype)


def pa_whole_pages(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, full_pages=True)


def pa_ignores_block_table(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, ignore_table=True)


def pa_heads_modulo(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, modulo_heads=True)


def pa_reshape_without_transpose(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, no_transpose=True)


def pa_floor_page_count(q, k_pages, v_pages, block_table, seq_lens):
    return _paged(q, k_pages, v_pages, block_table, seq_lens, floor_pages=True)


def pa_token_loop(q, k_pages, v_pages, block_table, seq_lens):
    b, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    rep = h // g
    out = torch.zeros((b, h, d), dtype=torch.float64, device=q.device)
    for i in range(b):
        n = int(seq_lens[i])
        if n == 0:
            continue
        keys = torch.stack([k_pages[int(block_table[i, t // ps]), :, t % ps] for t in range(n)], 1)
        vals = torch.stack([v_pages[int(block_table[i, t // ps]), :, t % ps] for t in range(n)], 1)
        for head in range(h):
            kv = head // rep
            s = keys[kv].double() @ q[i, head].double() / math.sqrt(d)  # (n,)
            out[i, head] = torch.softmax(s, 0) @ vals[kv].double()
    return out.to(q.dtype)


def pa_masked_batch(q, k_pages, v_pages, block_table, seq_lens):
    """Gathers every sequence's max_pages pages at once and masks keys past its length."""
    b, h, d = q.shape
    g, ps = k_pages.shape[1], k_pages.shape[2]
    c = torch.promote_types(q.dtype, torch.float32)
    max_pages = block_table.shape[1]
    table = block_table.long().clamp(0, k_pages.shape[0] - 1)  # entries past a length: any page
    k = k_pages[table].permute(0, 2, 1, 3, 4).reshape(b, g, max_pages * ps, d).to(c)
    v = v_pages[table].permute(0, 2, 1, 3, 4).reshape(b, g, max_pages * ps, d).to(c)
    qg = q.to(c).reshape(b, g, h // g, d)
    s = torch.einsum("bgrd,bgtd->bgrt", qg, k) / math.sqrt(d)
    valid = torch.arange(max_pages * ps, device=q.device)[None, :] < seq_lens.to(q.device)[:, None]
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    out = torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(b, h, d)
    return out.to(q.dtype)


# ----------------------------------------------------------------------------- chunked_prefill
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, own_only=False, no_mask=False,
             top_left=False, drop_tail=False, scale_d_model=False):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    c = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    last = (n // chunk_size) * chunk_size if drop_tail else n
    for s0 in range(0, last, chunk_size):
        s1 = min(s0 + chunk_size, n)
        xc = x[:, s0:s1]
        q = _split(xc @ w_q, num_heads).to(c)
        ks.append(_split(xc @ w_k, num_heads).to(c))
        vs.append(_split(xc @ w_v, num_heads).to(c))
        k = ks[-1] if own_only else torch.cat(ks, 2)
        v = vs[-1] if own_only else torch.cat(vs, 2)
        scale = 1 / math.sqrt(d_model if scale_d_model else dh)
        s = q @ k.transpose(-2, -1) * scale
        if not no_mask:
            nq, nk = s.shape[-2], s.shape[-1]
            allowed = torch.ones(nq, nk, dtype=torch.bool).tril(0 if top_left else nk - nq)
            s = s.masked_fill(~allowed, -math.inf)
        ctx = torch.softmax(s, -1) @ v
        outs.append(ctx.transpose(1, 2).reshape(b, s1 - s0, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def cp_own_chunk_only(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, own_only=True)


def cp_no_mask_in_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, no_mask=True)


def cp_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, top_left=True)


def cp_drops_ragged_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, drop_tail=True)


def cp_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _chunked(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, scale_d_model=True)


def cp_full_attention_then_slice(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    c = torch.promote_types(x.dtype, torch.float32)
    q, k, v = (_split(x @ w, num_heads).to(c) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(d_model // num_heads)
    s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, -1) @ v
    outs = [ctx[:, :, s0:s0 + chunk_size] for s0 in range(0, n, chunk_size)]
    ctx = torch.cat(outs, 2)
    return ctx.transpose(1, 2).reshape(b, n, d_model).to(x.dtype) @ w_o


def cp_sdpa_per_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    c = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for s0 in range(0, n, chunk_size):
        s1 = min(s0 + chunk_size, n)
        xc = x[:, s0:s1]
        q = _split(xc @ w_q, num_heads).to(c)
        ks.append(_split(xc @ w_k, num_heads).to(c))
        vs.append(_split(xc @ w_v, num_heads).to(c))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        key_pos = torch.arange(s1, device=x.device)[None, :]
        query_pos = torch.arange(s0, s1, device=x.device)[:, None]
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=key_pos <= query_pos)
        outs.append(ctx.transpose(1, 2).reshape(b, s1 - s0, d_model))
    return torch.cat(outs, 1).to(x.dtype) @ w_o


def cp_float64_query_loop_within_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    k_cache = torch.zeros((b, num_heads, 0, dh), dtype=torch.float64, device=x.device)
    v_cache = torch.zeros((b, num_heads, 0, dh), dtype=torch.float64, device=x.device)
    ctx = torch.zeros((b, n, d_model), dtype=torch.float64, device=x.device)
    for s0 in range(0, n, chunk_size):
        s1 = min(s0 + chunk_size, n)
        xc = x[:, s0:s1].double()
        q = _split(xc @ w_q.double(), num_heads)
        k_cache = torch.cat([k_cache, _split(xc @ w_k.double(), num_heads)], 2)
        v_cache = torch.cat([v_cache, _split(xc @ w_v.double(), num_heads)], 2)
        for j in range(s1 - s0):
            pos = s0 + j
            s = torch.einsum("bhd,bhtd->bht", q[:, :, j], k_cache[:, :, : pos + 1]) / math.sqrt(dh)
            w = torch.softmax(s, -1)
            ctx[:, pos] = torch.einsum("bht,bhtd->bhd", w, v_cache[:, :, : pos + 1]).reshape(b, -1)
    return ctx.to(x.dtype) @ w_o


ENTRIES = [
    Entry("decode_attention_intensity", "wrong", "reads_keys_only",
          "Counts only the keys' bytes, forgetting that the values are read from the cache too.",
          dai_keys_only),
    Entry("decode_attention_intensity", "wrong", "flops_with_kv_heads",
          "Counts the FLOPs with num_kv_heads instead of num_heads, as if each query head had its own K/V.",
          dai_flops_with_kv_heads),
    Entry("decode_attention_intensity", "wrong", "scores_only",
          "Counts only the score product q k^T and forgets the weighted sum over the values.",
          dai_scores_only),
    Entry("decode_attention_intensity", "wrong", "floor_division",
          "Uses // so the intensity is truncated to an integer instead of a float ratio.",
          dai_floor_division),
    Entry("decode_attention_intensity", "wrong", "elements_not_bytes",
          "Divides by the number of cached elements, forgetting bytes_per_element.",
          dai_elements_not_bytes),
    Entry("decode_attention_intensity", "wrong", "one_flop_per_multiply_add",
          "Counts one multiply-add as 1 FLOP instead of 2.",
          dai_one_flop_per_mac),
    Entry("decode_attention_intensity", "right", "closed_form", None, dai_closed_form),
    Entry("decode_attention_intensity", "right", "step_by_step", None, dai_step_by_step),

    Entry("paged_attention", "wrong", "whole_pages_no_length_cut",
          "Attends to every slot of the sequence's pages, including the stale slots past seq_lens[b] in the last page.",
          pa_whole_pages),
    Entry("paged_attention", "wrong", "ignores_block_table",
          "Takes page t // page_size directly from the pool instead of looking it up in block_table[b].",
          pa_ignores_block_table),
    Entry("paged_attention", "wrong", "heads_modulo_groups",
          "Maps query head h to KV head h % G instead of h // (H // G).",
          pa_heads_modulo),
    Entry("paged_attention", "wrong", "reshape_pages_without_transpose",
          "Flattens (pages, G, page_size, d) straight to (G, -1, d) without moving the G axis first, mixing heads and tokens.",
          pa_reshape_without_transpose),
    Entry("paged_attention", "wrong", "floor_page_count",
          "Takes seq_len // page_size pages instead of rounding up, dropping the keys of a partly filled last page.",
          pa_floor_page_count),
    Entry("paged_attention", "right", "token_by_token_float64", None, pa_token_loop),
    Entry("paged_attention", "right", "gather_all_pages_and_mask", None, pa_masked_batch),

    Entry("chunked_prefill", "wrong", "own_chunk_only",
          "Attends each chunk only to its own keys and values, forgetting the cache of earlier chunks.",
          cp_own_chunk_only),
    Entry("chunked_prefill", "wrong", "no_mask_inside_chunk",
          "Lets each chunk attend to all of its own keys, without the causal mask inside the chunk.",
          cp_no_mask_in_chunk),
    Entry("chunked_prefill", "wrong", "top_left_mask",
          "Uses a top-left causal mask (tril with offset 0) on the (chunk, keys so far) scores instead of bottom-right.",
          cp_top_left_mask),
    Entry("chunked_prefill", "wrong", "drops_ragged_last_chunk",
          "Loops over N // chunk_size full chunks only, losing the tokens of a ragged last chunk.",
          cp_drops_ragged_chunk),
    Entry("chunked_prefill", "wrong", "scale_by_d_model",
          "Scales the scores by sqrt(d_model) instead of sqrt(d_head).",
          cp_scale_d_model),
    Entry("chunked_prefill", "wrong", "full_attention_then_slice",
          "Computes full causal attention over the whole sequence and only slices the result into chunks, building the N x N scores.",
          cp_full_attention_then_slice),
    Entry("chunked_prefill", "right", "sdpa_per_chunk_with_bool_mask", None, cp_sdpa_per_chunk),
    Entry("chunked_prefill", "right", "float64_growing_cache_query_loop", None,
          cp_float64_query_loop_within_chunk),
]
