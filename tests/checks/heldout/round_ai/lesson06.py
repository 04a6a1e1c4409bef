"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math
import operator
from functools import reduce

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_n_rep_as_total(x, n_rep):
    groups = x.shape[1]
    return x.repeat_interleave(n_rep // groups, dim=1)


def repeat_numpy(x, n_rep):
    arr = x.detach().cpu().numpy()
    return np.repeat(arr, n_rep, axis=1)


def repeat_new_axis_after_tokens(x, n_rep):
    B, G, N, d = x.shape
    return x.unsqueeze(3).expand(B, G, N, n_rep, d).reshape(B, G * n_rep, N, d)


def repeat_loop_divides_by_groups(x, n_rep):
    b, g, n, d = x.shape
    out = torch.empty(b, g * n_rep, n, d, dtype=x.dtype, device=x.device)
    for h in range(g * n_rep):
        out[:, h] = x[:, h // g]
    return out


def repeat_index_select(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def repeat_stack_copies(x, n_rep):
    heads = []
    for g in range(x.shape[1]):
        for _ in range(n_rep):
            heads.append(x[:, g])
    return torch.stack(heads, dim=1)


# ============================================================================ grouped_query_attention
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    k = k.repeat(1, rep, 1, 1)
    v = v.repeat(1, rep, 1, 1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        allowed = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    attn = scores.softmax(dim=-1)
    ctx = (attn @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_strict_tril(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2).to(ct)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2).to(ct)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2).to(ct)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    s = q @ k.transpose(-2, -1) * d_head ** -0.5
    if causal:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=-1)
        s = s.masked_fill(~keep, -math.inf)
    p = torch.softmax(s, dim=-1)
    out = (p @ v).transpose(1, 2).reshape(batch, n, d_model).to(x.dtype)
    return out @ w_o


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d = x.shape
    hd = d // num_heads
    groups = num_heads // num_kv_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).permute(0, 2, 1, 3).float()
    k = (x @ w_k).reshape(b, n, num_kv_heads, hd).permute(0, 2, 1, 3).float()
    v = (x @ w_v).reshape(b, n, num_kv_heads, hd).permute(0, 2, 1, 3).float()
    k = torch.repeat_interleave(k, groups, dim=1)
    v = torch.repeat_interleave(v, groups, dim=1)
    logits = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
        logits = logits.masked_fill(future, float("-inf"))
    w = torch.softmax(logits, dim=-1)
    ctx = torch.matmul(w, v).permute(0, 2, 1, 3).reshape(b, n, d)
    return ctx.to(x.dtype) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    Dh = D // num_heads
    r = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, Dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, Dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, Dh).transpose(1, 2)
    k = k[:, :, None].expand(B, num_kv_heads, r, N, Dh).reshape(B, num_heads, N, Dh)
    v = v[:, :, None].expand(B, num_kv_heads, r, N, Dh).reshape(B, num_heads, N, Dh)
    scores = (q.float() / math.sqrt(Dh)) @ k.float().transpose(-1, -2)
    if causal:
        mask = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    ctx = torch.softmax(scores, -1) @ v.float()
    return ctx.to(x.dtype).reshape(B, N, D) @ w_o


def gqa_mask_fill_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, seq, dm = x.shape
    hd = dm // num_heads

    def heads(t, count):
        return t.view(bsz, seq, count, hd).transpose(1, 2)

    q = heads(x @ w_q, num_heads).float()
    k = heads(x @ w_k, num_kv_heads).float().repeat_interleave(num_heads // num_kv_heads, 1)
    v = heads(x @ w_v, num_kv_heads).float().repeat_interleave(num_heads // num_kv_heads, 1)
    att = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if causal:
        causal_mask = torch.tril(torch.ones(seq, seq, device=x.device)).bool()
        att = att.masked_fill(causal_mask, float("-inf"))
    att = att.softmax(-1)
    y = (att @ v).transpose(1, 2).reshape(bsz, seq, dm).to(x.dtype)
    return y @ w_o


def gqa_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).to(ct).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).to(ct).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).to(ct).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh)
    if causal:
        blocked = torch.ones(N, N, dtype=torch.bool, device=x.device).triu(1)
        s = s.masked_fill(blocked, float("-inf"))
    w = torch.softmax(s, dim=-2)
    ctx = torch.einsum("bhqk,bhkd->bhqd", w, v)
    return ctx.transpose(1, 2).reshape(B, N, D).to(x.dtype) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).to(ct).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (x @ w_k).to(ct).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (x @ w_v).to(ct).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, rep, dim=1)
    v = torch.repeat_interleave(v, rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o


def gqa_grouped_einsum64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    dh = D // num_heads
    xd = x.double()
    q = (xd @ w_q.double()).view(B, N, G, R, dh)  # head h = g * R + r
    k = (xd @ w_k.double()).view(B, N, G, dh)
    v = (xd @ w_v.double()).view(B, N, G, dh)
    s = torch.einsum("bqgrd,bkgd->bgrqk", q, k) / math.sqrt(dh)
    if causal:
        later = torch.arange(N, device=x.device)[None, :] > torch.arange(N, device=x.device)[:, None]
        s = s.masked_fill(later, float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrqk,bkgd->bqgrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_mebibytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 20


def kv_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element
    return num_layers * seq_len * per_token


def kv_hardcoded_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16: 2 bytes


def kv_torch_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    sizes = torch.tensor([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                          bytes_per_element], dtype=torch.int64)
    return torch.prod(sizes)


def kv_seq_plus_one(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    positions = seq_len + 1  # the cached tokens plus the one being generated
    return 2 * num_layers * num_kv_heads * head_dim * positions * batch_size * bytes_per_element


def kv_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element])


def kv_per_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    tensor_bytes = reduce(operator.mul, (batch_size, num_kv_heads, seq_len, head_dim), 1)
    tensor_bytes *= bytes_per_element
    total = 0
    for _layer in range(num_layers):
        total += tensor_bytes  # K
        total += tensor_bytes  # V
    return total


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q = (x[:, t:t + 1] @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        prefix = x[:, :t + 1]
        k = (prefix @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (prefix @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        ctx = (s.softmax(-1) @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_new_token_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    cache_k, cache_v = [], []
    steps = []
    for t in range(N):
        xt = x[:, t]
        q_t = (xt @ w_q).view(B, num_heads, 1, dh)
        k_t = (xt @ w_k).view(B, num_kv_heads, 1, dh)
        v_t = (xt @ w_v).view(B, num_kv_heads, 1, dh)
        cache_k.append(k_t)
        cache_v.append(v_t)
        keys = k_t.repeat_interleave(rep, dim=1).float()
        vals = v_t.repeat_interleave(rep, dim=1).float()
        att = torch.softmax(q_t.float() @ keys.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        steps.append((att @ vals).to(x.dtype).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=1)


def decode_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(batch, num_kv_heads, 0, d_head)
    v_cache = x.new_zeros(batch, num_kv_heads, 0, d_head)
    out = []
    for t in range(n):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(batch, 1, num_heads, d_head).transpose(1, 2).float()
        k_seen = k_cache.repeat_interleave(n_rep, dim=1).float()
        v_seen = v_cache.repeat_interleave(n_rep, dim=1).float()
        w = torch.softmax(q @ k_seen.transpose(-2, -1) / math.sqrt(d_head), dim=-1)
        ctx = (w @ v_seen).to(x.dtype)
        out.append(ctx.transpose(1, 2).reshape(batch, 1, d_model) @ w_o)
        k_new = (tok @ w_k).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        v_new = (tok @ w_v).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(out, dim=1)


def decode_scale_by_cache_length(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    r = num_heads // num_kv_heads
    K = torch.empty(B, num_kv_heads, N, hd, dtype=x.dtype, device=x.device)
    V = torch.empty_like(K)
    results = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        K[:, :, t] = (x_t @ w_k).reshape(B, num_kv_heads, hd)
        V[:, :, t] = (x_t @ w_v).reshape(B, num_kv_heads, hd)
        keys = K[:, :, :t + 1].repeat_interleave(r, dim=1)
        vals = V[:, :, :t + 1].repeat_interleave(r, dim=1)
        scale = 1.0 / math.sqrt(keys.shape[-2])
        s = (q_t.float() @ keys.float().transpose(-2, -1)) * scale
        ctx = (s.softmax(dim=-1) @ vals.float()).to(x.dtype)
        results.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(results, dim=1)


def decode_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    outputs = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        ks = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        vs = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        attn = torch.softmax(q_t @ ks.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outputs.append((attn @ vs).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, ys = [], [], []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2).float()
        ks.append((x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        vs.append((x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1).float()
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1).float()
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(1, t + 1, dtype=torch.bool, device=x.device).tril()  # causal
        s = s.masked_fill(~mask, float("-inf"))
        y = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
        ys.append(y.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(ys, dim=1)


def decode_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G, R = num_kv_heads, num_heads // num_kv_heads
    dh = D // num_heads
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    k_cache = torch.empty(B, N, G, dh, dtype=x.dtype, device=x.device)
    v_cache = torch.empty(B, N, G, dh, dtype=x.dtype, device=x.device)
    out = torch.empty(B, N, D, dtype=x.dtype, device=x.device)
    for t in range(N):
        x_t = x[:, t, :]  # (B, D)
        q = (x_t @ w_q).view(B, G, R, dh).to(ct)
        k_cache[:, t] = (x_t @ w_k).view(B, G, dh)
        v_cache[:, t] = (x_t @ w_v).view(B, G, dh)
        keys = k_cache[:, :t + 1].to(ct)
        vals = v_cache[:, :t + 1].to(ct)
        s = torch.einsum("bgrd,bkgd->bgrk", q, keys) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrk,bkgd->bgrd", p, vals).reshape(B, D).to(x.dtype)
        out[:, t] = ctx @ w_o
    return out


def decode_lists_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    group = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for pos in range(n):
        token = x[:, pos]  # (B, d_model)
        q = (token @ w_q).float().view(batch, num_heads, 1, d_head)
        keys.append((token @ w_k).float().view(batch, num_kv_heads, 1, d_head))
        values.append((token @ w_v).float().view(batch, num_kv_heads, 1, d_head))
        k_all = torch.cat(keys, dim=2).repeat_interleave(group, dim=1)
        v_all = torch.cat(values, dim=2).repeat_interleave(group, dim=1)
        ctx = F.scaled_dot_product_attention(q, k_all, v_all)  # one query: no mask needed
        outputs.append(ctx.reshape(batch, 1, d_model).to(x.dtype) @ w_o)
    return torch.cat(outputs, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 0, 1, ...) instead of repeating "
          "each in place (0, 0, 1, 1, ...), so head h gets group h % G instead of h // n_rep.",
          repeat_tiled),
    Entry("repeat_kv", "wrong", "interleave_on_tokens_axis",
          "repeat_interleave is applied on dim=2 (the tokens) instead of dim=1 (the groups), "
          "giving (B, G, N*n_rep, d).", repeat_interleave_tokens),
    Entry("repeat_kv", "wrong", "n_rep_read_as_total_heads",
          "n_rep is read as the total number of query heads and divided by G, so each group "
          "is repeated n_rep // G times instead of n_rep times.", repeat_n_rep_as_total),
    Entry("repeat_kv", "wrong", "returns_numpy_array",
          "It goes through np.repeat and returns a numpy array instead of a torch.Tensor (and "
          ".numpy() fails for bfloat16).", repeat_numpy),
    Entry("repeat_kv", "wrong", "copies_axis_after_tokens",
          "The copies axis is inserted after the tokens axis (unsqueeze(3)), so the reshape "
          "mixes tokens and copies instead of placing the copies next to their group.",
          repeat_new_axis_after_tokens),
    Entry("repeat_kv", "wrong", "head_index_divided_by_groups",
          "Query head h is given group h // G (the number of groups) instead of h // n_rep.",
          repeat_loop_divides_by_groups),
    Entry("repeat_kv", "right", "index_select_arange", None, repeat_index_select),
    Entry("repeat_kv", "right", "stack_of_copies", None, repeat_stack_copies),
    Entry("grouped_query_attention", "wrong", "tiled_kv_groups",
          "K and V are expanded with .repeat(1, n_rep, 1, 1), which tiles the groups, so query "
          "head h reads group h % G instead of h // n_rep.", gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "causal_mask_strict",
          "tril(..., diagonal=-1) keeps the diagonal out of the causal mask, so each token "
          "cannot attend to itself and the first row has no key at all (NaN).",
          gqa_strict_tril),
    Entry("grouped_query_attention", "wrong", "no_divisibility_guard",
          "There is no check that num_heads is a multiple of num_kv_heads, so 4 heads over 3 "
          "groups fails later with a RuntimeError in the matmul instead of a ValueError "
          "naming both numbers.", gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "The (B, H, N, d_head) context is reshaped to (B, N, d_model) without transposing "
          "heads and tokens back, scrambling them before w_o.", gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "masked_fill_with_allowed_mask",
          "masked_fill fills where the mask is True, and the tril mask is True where "
          "attending is allowed, so the past is blocked instead of the future (and the last "
          "row is all -inf: NaN).", gqa_mask_fill_inverted),
    Entry("grouped_query_attention", "wrong", "softmax_over_queries",
          "torch.softmax(s, dim=-2) normalises over the queries instead of over the keys.",
          gqa_softmax_over_queries),
    Entry("grouped_query_attention", "right", "sdpa_repeat_interleave", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None,
          gqa_grouped_einsum64),
    Entry("kv_cache_bytes", "wrong", "keys_only",
          "Only one tensor is counted: the factor 2 for keys and values is missing.",
          kv_keys_only),
    Entry("kv_cache_bytes", "wrong", "returns_mebibytes",
          "It divides by 2**20 and returns MiB (a float) instead of bytes.", kv_mebibytes),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored",
          "batch_size is never multiplied in, so the cache of a batch is counted as one "
          "sequence's.", kv_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "hardcoded_two_bytes",
          "Two bytes per element (fp16) are hard-coded instead of using bytes_per_element.",
          kv_hardcoded_fp16),
    Entry("kv_cache_bytes", "wrong", "torch_prod_tensor",
          "torch.prod returns a 0-d tensor, not the plain Python int the contract asks for.",
          kv_torch_prod),
    Entry("kv_cache_bytes", "wrong", "seq_len_plus_one",
          "It counts seq_len + 1 positions (adding the token being generated) instead of "
          "seq_len.", kv_seq_plus_one),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_math_prod),
    Entry("kv_cache_bytes", "right", "per_layer_loop", None, kv_per_layer_loop),
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "Each step projects the whole prefix x[:, :t+1] with w_k and w_v again instead of "
          "only the new token and a cache, so the projection work is quadratic in N.",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attends_new_token_only",
          "The new key and value are appended to the cache but the step attends over k_t and "
          "v_t alone, so each token only sees itself.", decode_new_token_only),
    Entry("decode_with_cache", "wrong", "cache_updated_after_attention",
          "The cache is extended after the attention step instead of before it, so each token "
          "attends only to earlier tokens, never to itself (the first gets zeros).",
          decode_excludes_current),
    Entry("decode_with_cache", "wrong", "scaled_by_cache_length",
          "The scores are scaled by 1/sqrt(number of cached keys), keys.shape[-2], instead of "
          "1/sqrt(d_head).", decode_scale_by_cache_length),
    Entry("decode_with_cache", "wrong", "float32_default_cache",
          "torch.zeros without dtype= makes a float32 cache, so with float64 or half inputs "
          "q_t @ k_cache mixes dtypes and raises a RuntimeError.", decode_float32_cache),
    Entry("decode_with_cache", "wrong", "top_left_mask_in_step",
          "A top-left tril mask of shape (1, t+1) is applied to the single new query, so it "
          "only sees key 0 instead of the whole cache (the mask must be bottom-right aligned, "
          "or not needed at all).", decode_top_left_step_mask),
    Entry("decode_with_cache", "right", "grouped_einsum_preallocated", None,
          decode_grouped_einsum),
    Entry("decode_with_cache", "right", "lists_and_sdpa", None, decode_lists_sdpa),
]
