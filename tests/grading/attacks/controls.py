"""Honest controls: correct submissions written in unusual but legitimate ways.

The contract (../shared/curriculum.md) accepts any implementation with the right behaviour:
loops, einsum, built-ins (``F.scaled_dot_product_attention`` included), float32 or float64
arithmetic. The work checks ask only that decoding projects one token per step, that online
softmax and chunked prefill never hold N x N. Each control here does that, in its own way, and
must keep every point with no review flag: a defence that costs an honest learner credit, or
an instructor's time, fails here.

Quick checks: controls answer them right (the instructor's keys stand in for a learner who
knew), some with fill-in expressions written differently from the key, under the variant a
form records (``student:<id>`` on a hub, a fresh ``seed:`` elsewhere).
"""

from __future__ import annotations

from tests.grading.attacks.spec import Full, NoReview, Submission

HONEST = [Full(), NoReview()]

LOOPS_06 = {
    "repeat_kv": '''import torch


def repeat_kv(x, n_rep):
    heads = []
    for group in range(x.shape[1]):
        for _ in range(n_rep):
            heads.append(x[:, group:group + 1])
    return torch.cat(heads, dim=1)
''',
    "grouped_query_attention": '''import math
import torch


def grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """One head at a time."""
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    q_all, k_all, v_all = (x.to(compute) @ w.to(compute) for w in (w_q, w_k, w_v))
    heads = []
    for h in range(num_heads):
        g = h // rep
        q = q_all[..., h * d_head:(h + 1) * d_head]
        k = k_all[..., g * d_head:(g + 1) * d_head]
        v = v_all[..., g * d_head:(g + 1) * d_head]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        if causal:
            scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1),
                                        float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v)
    return (torch.cat(heads, dim=-1) @ w_o.to(compute)).to(x.dtype)
''',
    "kv_cache_bytes": '''\
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        per_layer = 2 * num_kv_heads * head_dim  # a key and a value per K/V head
        total += per_layer * seq_len * batch_size * bytes_per_element
    return total
''',
    "decode_with_cache": '''import math
import torch


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """A preallocated cache tensor filled one token per step."""
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=compute)
    v_cache = torch.zeros_like(k_cache)
    out = torch.zeros(batch, n, d_model, dtype=compute)
    for t in range(n):
        x_t = x[:, t].to(compute)  # (B, d_model): the new token only
        q = (x_t @ w_q.to(compute)).reshape(batch, num_heads, 1, d_head)
        k_cache[:, :, t] = (x_t @ w_k.to(compute)).reshape(batch, num_kv_heads, d_head)
        v_cache[:, :, t] = (x_t @ w_v.to(compute)).reshape(batch, num_kv_heads, d_head)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head), dim=-1)
        out[:, t] = (weights @ v).reshape(batch, d_model) @ w_o.to(compute)
    return out.to(x.dtype)
''',
}

EINSUM_06 = {
    "repeat_kv": '''import torch


def repeat_kv(x, n_rep):
    batch, groups, n, d = x.shape
    copies = torch.einsum("bgnd,r->bgrnd", x, torch.ones(n_rep, dtype=x.dtype))
    return copies.reshape(batch, groups * n_rep, n, d)
''',
    "grouped_query_attention": '''import math
import torch


def grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:  # the lesson asks for this refusal
        raise ValueError(f"num_heads={num_heads} and num_kv_heads={num_kv_heads} do not divide")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute)
    q = torch.einsum("bnm,mhd->bhnd", xc, w_q.to(compute).reshape(d_model, num_heads, d_head))
    k = torch.einsum("bnm,mgd->bgnd", xc, w_k.to(compute).reshape(d_model, num_kv_heads, d_head))
    v = torch.einsum("bnm,mgd->bgnd", xc, w_v.to(compute).reshape(d_model, num_kv_heads, d_head))
    q = q.reshape(batch, num_kv_heads, rep, n, d_head)  # head h = group h // rep
    scores = torch.einsum("bgrqd,bgkd->bgrqk", q, k) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    context = torch.einsum("bgrqk,bgkd->bqgrd", torch.softmax(scores, dim=-1), v)
    return torch.einsum("bnm,mo->bno", context.reshape(batch, n, d_model),
                        w_o.to(compute)).to(x.dtype)
''',
    "kv_cache_bytes": '''import math


def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return math.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element])
''',
    "decode_with_cache": '''import math
import torch


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    w_q3 = w_q.to(compute).reshape(d_model, num_heads, d_head)
    w_k3 = w_k.to(compute).reshape(d_model, num_kv_heads, d_head)
    w_v3 = w_v.to(compute).reshape(d_model, num_kv_heads, d_head)
    keys, values, outputs = [], [], []
    for t in range(n):
        x_t = x[:, t].to(compute)
        q = torch.einsum("bm,mhd->bhd", x_t, w_q3).reshape(batch, num_kv_heads, rep, d_head)
        keys.append(torch.einsum("bm,mgd->bgd", x_t, w_k3))
        values.append(torch.einsum("bm,mgd->bgd", x_t, w_v3))
        k, v = torch.stack(keys, dim=2), torch.stack(values, dim=2)  # (B, G, t + 1, d)
        scores = torch.einsum("bgrd,bgkd->bgrk", q, k) / math.sqrt(d_head)
        context = torch.einsum("bgrk,bgkd->bgrd", torch.softmax(scores, dim=-1), v)
        outputs.append(context.reshape(batch, d_model) @ w_o.to(compute))
    return torch.stack(outputs, dim=1).to(x.dtype)
''',
}

LINEAR_SDPA_DECODE = '''import torch
import torch.nn.functional as F


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """F.linear for the projections, SDPA (enable_gqa) over the cache at each step."""
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    w_q_t, w_k_t, w_v_t, w_o_t = (w.to(compute).T.contiguous() for w in (w_q, w_k, w_v, w_o))
    keys = values = None
    outputs = []
    for t in range(n):
        x_t = x[:, t:t + 1].to(compute)
        q = F.linear(x_t, w_q_t).view(batch, 1, num_heads, d_head).transpose(1, 2)
        k = F.linear(x_t, w_k_t).view(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        v = F.linear(x_t, w_v_t).view(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        keys = k if keys is None else torch.cat([keys, k], dim=2)
        values = v if values is None else torch.cat([values, v], dim=2)
        context = F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
        outputs.append(F.linear(context.transpose(1, 2).reshape(batch, 1, d_model), w_o_t))
    return torch.cat(outputs, dim=1).to(x.dtype)
'''

FLOAT64_07 = {
    "merge_attention_states": '''import torch


def merge_attention_states(out_a, lse_a, out_b, lse_b):
    """torch.logaddexp, in float64."""
    la, lb = lse_a.double(), lse_b.double()
    lse = torch.logaddexp(la, lb)
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    out = (torch.exp(la - safe)[..., None] * out_a.double()
           + torch.exp(lb - safe)[..., None] * out_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)
''',
    "online_softmax_attention": '''import math
import torch


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """Running max, sum and output kept in float64."""
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q64 = q.double() / math.sqrt(d)
    running_max = torch.full(q.shape[:-1], -math.inf, dtype=torch.float64)
    running_sum = torch.zeros(q.shape[:-1], dtype=torch.float64)
    acc = torch.zeros(q.shape, dtype=torch.float64)
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        scores = q64 @ k[..., start:stop, :].double().transpose(-2, -1)
        if causal:
            scores = scores.masked_fill(torch.arange(start, stop)[None, :] > rows, -math.inf)
        new_max = torch.maximum(running_max, scores.amax(dim=-1))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        weights = torch.exp(scores - shift[..., None])
        rescale = torch.exp(running_max - shift)
        running_sum = running_sum * rescale + weights.sum(dim=-1)
        acc = acc * rescale[..., None] + weights @ v[..., start:stop, :].double()
        running_max = new_max
    total = torch.where(running_sum == 0, torch.ones_like(running_sum), running_sum)
    return (acc / total[..., None]).to(q.dtype)
''',
}

SDPA_BLOCKS_ONLINE = '''import math
import torch
import torch.nn.functional as F


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """F.scaled_dot_product_attention on each block of keys, the blocks combined with my
    merge_attention_states."""
    compute = torch.promote_types(q.dtype, torch.float32)
    qc = q.to(compute)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    out = lse = None
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk, v_blk = k[..., start:stop, :].to(compute), v[..., start:stop, :].to(compute)
        visible = torch.arange(start, stop)[None, :] <= rows if causal else None
        scores = qc @ k_blk.transpose(-2, -1) / math.sqrt(d)
        if visible is not None:
            scores = scores.masked_fill(~visible, -math.inf)
        lse_blk = torch.logsumexp(scores, dim=-1)  # -inf where the block shows no key
        out_blk = F.scaled_dot_product_attention(qc, k_blk, v_blk, attn_mask=visible)
        out_blk = torch.where(torch.isinf(lse_blk)[..., None], torch.zeros_like(out_blk), out_blk)
        if out is None:
            out, lse = out_blk, lse_blk
        else:
            out, lse = merge_attention_states(out, lse, out_blk, lse_blk)
    return out.to(q.dtype)
'''

HELPER_CELL_07 = '''import math
import torch

# learner cell: helpers for the online softmax, tried out while debugging


def block_scores(q_scaled, k_blk, start, causal, n_q, n_k):
    scores = q_scaled @ k_blk.transpose(-2, -1)
    if causal:
        keys = torch.arange(start, start + k_blk.shape[-2])[None, :]
        scores = scores.masked_fill(keys > torch.arange(n_q)[:, None] + (n_k - n_q), -math.inf)
    return scores


def fold_block(state, scores, v_blk):
    """(running max, running sum, acc) after one more block."""
    running_max, running_sum, acc = state
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    weights = torch.exp(scores - shift)
    rescale = torch.exp(running_max - shift)
    return new_max, running_sum * rescale + weights.sum(-1, keepdim=True), \\
        acc * rescale + weights @ v_blk


print(block_scores(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 2), 0, True, 2, 3))
'''

HELPER_ONLINE = '''import math
import torch


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """Uses block_scores and fold_block from the cell above; prints a line while debugging."""
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, n_k = q.shape[-2], k.shape[-2]
    q_scaled = q.to(compute) / math.sqrt(q.shape[-1])
    state = (torch.full(q.shape[:-1] + (1,), -math.inf, dtype=compute),
             torch.zeros(q.shape[:-1] + (1,), dtype=compute),
             torch.zeros(q.shape, dtype=compute))
    for start in range(0, n_k, block_size):
        k_blk = k[..., start:start + block_size, :].to(compute)
        scores = block_scores(q_scaled, k_blk, start, causal, n_q, n_k)
        state = fold_block(state, scores, v[..., start:start + block_size, :].to(compute))
    running_max, running_sum, acc = state
    print(f"shape {tuple(q.shape)} block {block_size}: largest score {running_max.max():.2f}")
    total = torch.where(running_sum == 0, torch.ones_like(running_sum), running_sum)
    return (acc / total).to(q.dtype)
'''

PRINTS_10 = {
    "mla_kv_cache_bytes": '''\
def mla_kv_cache_bytes(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_layer = 0
    for _token in range(1):  # one latent and one shared RoPE key per token
        per_layer += kv_lora_rank + rope_head_dim
    print("numbers per token and layer:", per_layer)
    return per_layer * num_layers * seq_len * batch_size * bytes_per_element
''',
    "mla_attention": '''import math
import torch


def mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Head by head, printing what it does."""
    compute = torch.promote_types(x.dtype, torch.float32)
    batch, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    xc = x.to(compute)
    c = xc @ w_dkv.to(compute)
    print("latent", tuple(c.shape), "heads", num_heads, "d_head", d_head)
    heads = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q = xc @ w_q[:, cols].to(compute)
        k = c @ w_uk[:, cols].to(compute)
        v = c @ w_uv[:, cols].to(compute)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        if causal:
            scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1),
                                        float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v)
    out = torch.cat(heads, dim=-1) @ w_o.to(compute)
    print(f"output norm {out.norm():.3f}")
    print(out[0, :1, :4])
    return out.to(x.dtype)
''',
    "absorb_mla_weights": '''import torch


def absorb_mla_weights(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    q_latent, o_latent = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q_latent.append(w_q[:, cols] @ w_uk[:, cols].T)
        o_latent.append(w_uv[:, cols] @ w_o[cols, :])
    print("absorbed", tuple(q_latent[0].shape), tuple(o_latent[0].shape))
    return torch.stack(q_latent), torch.stack(o_latent)
''',
}

ABSORBED_MLA = '''import math
import torch


def mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention computed on the latents with absorbed weights, in float64."""
    batch, n, d_model = x.shape
    d_c = w_dkv.shape[1]
    d_head = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    w_q3 = w_q.double().reshape(d_model, num_heads, d_head)
    w_uk3 = w_uk.double().reshape(d_c, num_heads, d_head)
    w_uv3 = w_uv.double().reshape(d_c, num_heads, d_head)
    w_o3 = w_o.double().reshape(num_heads, d_head, d_model)
    q_latent = torch.einsum("bnm,mhi,chi->bhnc", x64, w_q3, w_uk3)
    scores = torch.einsum("bhnc,bkc->bhnk", q_latent, c) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    mixed = torch.einsum("bhnk,bkc->bhnc", torch.softmax(scores, dim=-1), c)
    return torch.einsum("bhnc,chi,him->bnm", mixed, w_uv3, w_o3).to(x.dtype)
'''

LOOPS_11 = {
    "decode_attention_intensity": '''\
def decode_attention_intensity(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    flops = 0
    for _product in ("scores", "weighted sum"):
        flops += 2 * batch_size * num_heads * seq_len * head_dim
    read = 2 * batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / read
''',
    "paged_attention": '''import math
import torch


def paged_attention(q, k_pages, v_pages, block_table, seq_lens):
    """Key by key through the block table, head by head."""
    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    rep = heads // groups
    out = torch.zeros(batch, heads, d, dtype=torch.float64)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        slots = [(int(block_table[b, t // page_size]), t % page_size) for t in range(n)]
        keys = torch.stack([k_pages[page, :, slot] for page, slot in slots], dim=1).double()
        values = torch.stack([v_pages[page, :, slot] for page, slot in slots], dim=1).double()
        for h in range(heads):
            scores = keys[h // rep] @ q[b, h].double() / math.sqrt(d)
            out[b, h] = torch.softmax(scores, dim=0) @ values[h // rep]
    return out.to(q.dtype)
''',
    "chunked_prefill": '''import torch
import torch.nn.functional as F


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """F.scaled_dot_product_attention once per chunk, with a (chunk, keys so far) mask."""
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    keys, values, outputs = [], [], []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        x_c = x[:, start:stop].to(compute)

        def split(t):
            return t.reshape(batch, stop - start, num_heads, d_head).transpose(1, 2)

        q = split(x_c @ w_q.to(compute))
        keys.append(split(x_c @ w_k.to(compute)))
        values.append(split(x_c @ w_v.to(compute)))
        visible = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]
        context = F.scaled_dot_product_attention(q, torch.cat(keys, dim=2),
                                                 torch.cat(values, dim=2), attn_mask=visible)
        outputs.append(context.transpose(1, 2).reshape(batch, stop - start, d_model))
    return (torch.cat(outputs, dim=1) @ w_o.to(compute)).to(x.dtype)
''',
}

GATHER_11 = {
    "paged_attention": '''import math
import torch


def paged_attention(q, k_pages, v_pages, block_table, seq_lens):
    """Every table slot gathered at once, the keys past each length masked."""
    batch, heads, d = q.shape
    num_pages, groups, page_size = k_pages.shape[:3]
    t = torch.arange(block_table.shape[1] * page_size)
    pages = block_table[:, t // page_size].long().clamp(0, num_pages - 1)  # (B, T)
    k = k_pages[pages, :, t % page_size].double().repeat_interleave(heads // groups, dim=2)
    v = v_pages[pages, :, t % page_size].double().repeat_interleave(heads // groups, dim=2)
    scores = torch.einsum("bhd,bthd->bht", q.double(), k) / math.sqrt(d)
    owned = t[None, :] < seq_lens[:, None]  # (B, T)
    scores = scores.masked_fill(~owned[:, None, :], float("-inf"))
    top = scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    weights = torch.exp(scores - top)
    total = weights.sum(dim=-1, keepdim=True)
    weights = weights / torch.where(total == 0, torch.ones_like(total), total)
    return torch.einsum("bht,bthd->bhd", weights, v).to(q.dtype)
''',
    "chunked_prefill": '''import math
import torch


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """In float64, with a preallocated cache and output."""
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    x64 = x.double()
    w_q64, w_k64, w_v64, w_o64 = (w.double() for w in (w_q, w_k, w_v, w_o))
    k_cache = torch.zeros(batch, num_heads, n, d_head, dtype=torch.float64)
    v_cache = torch.zeros_like(k_cache)
    out = torch.zeros(batch, n, d_model, dtype=torch.float64)
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        x_c = x64[:, start:stop]
        shape = (batch, stop - start, num_heads, d_head)
        q = (x_c @ w_q64).reshape(shape).transpose(1, 2)
        k_cache[:, :, start:stop] = (x_c @ w_k64).reshape(shape).transpose(1, 2)
        v_cache[:, :, start:stop] = (x_c @ w_v64).reshape(shape).transpose(1, 2)
        scores = q @ k_cache[:, :, :stop].transpose(-2, -1) / math.sqrt(d_head)
        future = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        out[:, start:stop] = (weights @ v_cache[:, :, :stop]).transpose(1, 2).reshape(
            batch, stop - start, d_model)
    return (out @ w_o64).to(x.dtype)
''',
}

RIGHT = "@right"  # a quick-check answer the builder replaces with the instructor's key

SUBMISSIONS = [
    Submission("control-solutions-06", "06-gqa", "control", "the instructor's answers, "
               "every demo cell kept", HONEST, kind="control", quick="right", demos=True),
    Submission("control-solutions-07", "07-flash", "control", "the instructor's answers, "
               "every demo cell kept", HONEST, kind="control", quick="right", demos=True),
    Submission("control-solutions-10", "10-mla", "control", "the instructor's answers, "
               "every demo cell kept", HONEST, kind="control", quick="right", demos=True),
    Submission("control-solutions-11", "11-serving", "control", "the instructor's answers",
               HONEST, kind="control", quick="right", variant="student:control-solutions-11"),
    Submission("control-solutions-09", "09-rope", "control", "the instructor's answers",
               HONEST, kind="control", quick="right"),
    Submission("control-loops-06", "06-gqa", "control", "lesson 06 with Python loops: heads "
               "copied one by one, attention head by head, a preallocated cache tensor; "
               "fill-ins written differently from the key", HONEST, kind="control",
               answers=LOOPS_06, quick="right-rewritten", variant="seed:918273645"),
    Submission("control-einsum-06", "06-gqa", "control", "lesson 06 with torch.einsum "
               "everywhere, the decode cache grown with torch.stack", HONEST, kind="control",
               answers=EINSUM_06, quick="right", variant="student:control-einsum-06"),
    Submission("control-linear-sdpa-06", "06-gqa", "control", "decode_with_cache with "
               "F.linear projections and SDPA (enable_gqa) over the cache at each step",
               HONEST, kind="control", answers={"decode_with_cache": LINEAR_SDPA_DECODE},
               quick="right"),
    Submission("control-float64-07", "07-flash", "control", "merge with torch.logaddexp and "
               "the online softmax's running state in float64", HONEST, kind="control",
               answers=FLOAT64_07, quick="right", variant="seed:31337"),
    Submission("control-sdpa-blocks-07", "07-flash", "control", "online softmax: "
               "F.scaled_dot_product_attention per key block, blocks combined with the "
               "learner's own merge_attention_states", HONEST, kind="control",
               answers={"online_softmax_attention": SDPA_BLOCKS_ONLINE}, quick="right"),
    Submission("control-helpers-prints-07", "07-flash", "control", "online softmax built on "
               "helpers defined in an extra learner cell, printing while it runs (an f-string "
               "of a 0-d tensor)", HONEST, kind="control",
               answers={"online_softmax_attention": HELPER_ONLINE},
               after={"merge_attention_states": HELPER_CELL_07}, quick="right-rewritten"),
    Submission("control-prints-10", "10-mla", "control", "lesson 10 head by head with loops, "
               "printing shapes, norms and tensors", HONEST, kind="control", answers=PRINTS_10,
               quick="right"),
    Submission("control-absorbed-10", "10-mla", "control", "mla_attention computed on the "
               "latents with absorbed weights (einsum, float64)", HONEST, kind="control",
               answers={"mla_attention": ABSORBED_MLA}, quick="right-rewritten",
               variant="seed:2718281828"),
    Submission("control-loops-11", "11-serving", "control", "lesson 11 with loops: paged "
               "attention key by key through the block table, chunked prefill with one SDPA "
               "call per chunk", HONEST, kind="control", answers=LOOPS_11, quick="right"),
    Submission("control-gather-11", "11-serving", "control", "paged attention by one gather "
               "and einsum with a length mask; chunked prefill in float64", HONEST,
               kind="control", answers=GATHER_11, quick="right-rewritten"),
    # graded alone, as the baseline of the resource rules
    Submission("control-isolated-06", "06-gqa", "control", "the instructor's answers, "
               "qc_kv_cache_gib answered right (graded alone: the resource baseline)",
               [Full(("repeat_kv", "grouped_query_attention", "kv_cache_bytes",
                      "decode_with_cache", "qc_kv_cache_gib")), NoReview()], kind="control",
               quick={"qc_kv_cache_gib": RIGHT}, isolated=True),
    Submission("control-isolated-07", "07-flash", "control", "the instructor's answers, "
               "qc_kv_reads answered right (graded alone: the resource baseline)",
               [Full(("merge_attention_states", "online_softmax_attention", "qc_kv_reads")),
                NoReview()], kind="control", quick={"qc_kv_reads": RIGHT}, isolated=True),
]
