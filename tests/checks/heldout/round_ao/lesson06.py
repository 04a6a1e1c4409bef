"""Held-out catalogue, lesson 06 (GQA and KV cache, torch): repeat_kv, grouped_query_attention,
kv_cache_bytes, decode_with_cache. Learners' answers."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_wrong_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_expand_no_new_axis(x, n_rep):
    B, G, N, d = x.shape
    return x.expand(B, G * n_rep, N, d).contiguous()


def repeat_kv_n_rep_as_heads(x, n_rep):
    groups = x.shape[1]
    return x.repeat_interleave(n_rep // groups, dim=1)


def repeat_kv_view(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def repeat_kv_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


def repeat_kv_stack_loop(x, n_rep):
    heads = []
    for h in range(x.shape[1] * n_rep):
        heads.append(x[:, h // n_rep])
    return torch.stack(heads, dim=1)


# ============================================================================ grouped_query_attention
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    a = torch.softmax(s, dim=-1).to(x.dtype)
    return (a @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_diagonal_masked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).view(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).view(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).view(batch, n, num_kv_heads, d_head).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=0)
        scores = scores.masked_fill(future, float("-inf"))
    probs = scores.softmax(dim=-1)
    ctx = (probs @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    K = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    V = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    r = num_heads // num_kv_heads
    K = K.repeat_interleave(r, dim=1)
    V = V.repeat_interleave(r, dim=1)
    scores = (Q.float() @ K.float().transpose(-2, -1)) / math.sqrt(w_k.shape[1])
    if causal:
        scores = scores.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    W = torch.softmax(scores, dim=-1)
    out = (W @ V.float()).to(x.dtype).transpose(1, 2).reshape(B, N, D)
    return out @ w_o


def gqa_mask_convention_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    hd = d // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, hd).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    att = (q @ k.transpose(-2, -1)).float() * (1.0 / math.sqrt(hd))
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))  # True = may attend
        att = att.masked_fill(allowed, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = (att @ v.float()).to(x.dtype)
    return y.transpose(1, 2).reshape(b, n, d) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, n_rep, N, dh).reshape(B, -1, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, n_rep, N, dh).reshape(B, -1, N, dh)
    s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = (p @ v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = (s.softmax(-1) @ v.float()).to(x.dtype)  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).float()
    k = (x @ w_k).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2).float()
    v = (x @ w_v).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2).float()
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    x64 = x.to(torch.float64)
    d_head = x.shape[-1] // num_heads
    per_group = num_heads // num_kv_heads
    Q = x64 @ w_q.to(torch.float64)
    K = x64 @ w_k.to(torch.float64)
    V = x64 @ w_v.to(torch.float64)
    n = x.shape[1]
    future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
    heads = []
    for h in range(num_heads):
        g = h // per_group
        qh = Q[..., h * d_head:(h + 1) * d_head]
        kh = K[..., g * d_head:(g + 1) * d_head]
        vh = V[..., g * d_head:(g + 1) * d_head]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(d_head)
        if causal:
            s = s.masked_fill(future, -math.inf)
        heads.append(torch.einsum("bij,bjd->bid", torch.softmax(s, dim=-1), vh))
    out = torch.cat(heads, dim=-1) @ w_o.to(torch.float64)
    return out.to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element * 8


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_hardcoded_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * 2  # K and V, fp16
    return per_token * seq_len * batch_size


def kv_bytes_extra_position(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    positions = seq_len + 1  # the prompt plus the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * positions * batch_size * bytes_per_element


def kv_bytes_head_dim_split(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    per_head = head_dim // num_kv_heads
    return 2 * num_layers * num_kv_heads * per_head * seq_len * batch_size * bytes_per_element


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kv_bytes_cache_shape(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    cache_shape = (num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim)
    return math.prod(cache_shape) * bytes_per_element


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        seen = x[:, : t + 1]  # every token so far
        q = (seen[:, -1:] @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k = (seen @ w_k).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (seen @ w_v).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1).float()
        v = v.repeat_interleave(rep, dim=1).float()
        w = torch.softmax(q.float() @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        ctx = (w @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        outs.append(ctx @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_slice_before_write(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=x.dtype)
    v_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=x.dtype)
    out = []
    for t in range(n):
        xt = x[:, t]  # (B, d_model)
        q = (xt @ w_q).view(batch, num_heads, 1, d_head)
        k_seen = k_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        v_seen = v_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        k_cache[:, :, t] = (xt @ w_k).view(batch, num_kv_heads, d_head)
        v_cache[:, :, t] = (xt @ w_v).view(batch, num_kv_heads, d_head)
        s = q.float() @ k_seen.float().transpose(-1, -2) / math.sqrt(d_head)
        ctx = (s.softmax(-1) @ v_seen.float()).to(x.dtype)
        out.append(ctx.reshape(batch, 1, d_model) @ w_o)
    return torch.cat(out, dim=1)


def decode_cache_reset_in_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    groups = num_heads // num_kv_heads
    results = []
    for t in range(N):
        keys, values = [], []
        xt = x[:, t : t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(groups, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(groups, dim=1)
        a = torch.softmax(q.float() @ K.float().transpose(-1, -2) / math.sqrt(dh), dim=-1)
        o = (a @ V.float()).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        results.append(o @ w_o)
    return torch.cat(results, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_list, v_list, outs = [], [], []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_list.append((xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        v_list.append((xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(k_list, dim=2).repeat_interleave(rep, dim=1).float()
        V = torch.cat(v_list, dim=2).repeat_interleave(rep, dim=1).float()
        s = q.float() @ K.transpose(-1, -2) / math.sqrt(dh)  # (B, H, 1, t+1)
        mask = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal mask for this step
        s = s.masked_fill(~mask, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ V).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_value_cache_holds_keys(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache, v_cache, outs = [], [], []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_new = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_new = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        k_cache.append(k_new)
        v_cache.append(k_new)
        K = torch.cat(k_cache, dim=2).repeat_interleave(rep, dim=1).float()
        V = torch.cat(v_cache, dim=2).repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ K.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        outs.append((p @ V).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    outputs = []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t : t + 1] = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t : t + 1] = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        K = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        V = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        w = torch.softmax(q @ K.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        outputs.append((w @ V).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_prealloc_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    kc = x.new_empty(B, num_kv_heads, N, dh)
    vc = x.new_empty(B, num_kv_heads, N, dh)
    out = x.new_empty(B, N, D)
    for t in range(N):
        tok = x[:, t]  # (B, D)
        q = (tok @ w_q).unflatten(-1, (num_heads, dh)).unsqueeze(2)  # (B, H, 1, dh)
        kc[:, :, t] = (tok @ w_k).unflatten(-1, (num_kv_heads, dh))
        vc[:, :, t] = (tok @ w_v).unflatten(-1, (num_kv_heads, dh))
        ctx = F.scaled_dot_product_attention(q.float(), kc[:, :, : t + 1].float(),
                                             vc[:, :, : t + 1].float(), enable_gqa=True)
        out[:, t] = ctx.to(x.dtype).reshape(B, D) @ w_o
    return out


def decode_lists_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    f64 = torch.float64
    wq, wk, wv, wo = (w.to(f64) for w in (w_q, w_k, w_v, w_o))
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    share = num_heads // num_kv_heads
    keys, vals, steps = [], [], []
    for t in range(n):
        token = x[:, t].to(f64)  # (B, d_model)
        q = torch.einsum("bd,de->be", token, wq)
        keys.append(torch.einsum("bd,de->be", token, wk))
        vals.append(torch.einsum("bd,de->be", token, wv))
        K = torch.stack(keys, dim=1)  # (B, t+1, G*d_head)
        V = torch.stack(vals, dim=1)
        per_head = []
        for h in range(num_heads):
            g = h // share
            qh = q[:, h * d_head:(h + 1) * d_head]
            kh = K[:, :, g * d_head:(g + 1) * d_head]
            vh = V[:, :, g * d_head:(g + 1) * d_head]
            w = torch.softmax(torch.einsum("bd,btd->bt", qh, kh) / math.sqrt(d_head), dim=-1)
            per_head.append(torch.einsum("bt,btd->bd", w, vh))
        steps.append(torch.cat(per_head, dim=-1) @ wo)
    return torch.stack(steps, dim=1).to(x.dtype)


ENTRIES = [
    # repeat_kv
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 2, 0, 1, 2, ...) so "
          "head h reads group h % G instead of h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_on_token_axis",
          "repeats along dim=2 (the tokens) instead of dim=1 (the groups), giving "
          "(B, G, N*n_rep, d)",
          repeat_kv_wrong_dim),
    Entry("repeat_kv", "wrong", "expand_without_new_axis",
          "calls x.expand(B, G*n_rep, N, d) without inserting a new axis; expand can only "
          "stretch size-1 axes, so it raises whenever G > 1",
          repeat_kv_expand_no_new_axis),
    Entry("repeat_kv", "wrong", "n_rep_read_as_head_count",
          "treats n_rep as the total number of query heads and repeats each group "
          "n_rep // G times, so the head count is wrong (even zero)",
          repeat_kv_n_rep_as_heads),
    Entry("repeat_kv", "wrong", "view_after_expand",
          "uses .view instead of .reshape after expand; the expanded tensor is not contiguous, "
          "so view raises a RuntimeError whenever G > 1 and n_rep > 1",
          repeat_kv_view),
    Entry("repeat_kv", "wrong", "repeat_interleave_without_dim",
          "calls repeat_interleave without dim, which flattens the tensor and returns a 1-D "
          "result",
          repeat_kv_no_dim),
    Entry("repeat_kv", "right", "index_select_h_div_n_rep", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "stack_loop", None, repeat_kv_stack_loop),
    # grouped_query_attention
    Entry("grouped_query_attention", "wrong", "tiled_group_mapping",
          "repeats the K/V heads with .repeat (tiled), so query head h uses group h % G "
          "instead of h // (num_heads // num_kv_heads)",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "diagonal_masked",
          "masks with triu(diagonal=0), which also hides the diagonal: no query may attend to "
          "itself and the first query has no key at all (NaN)",
          gqa_diagonal_masked),
    Entry("grouped_query_attention", "wrong", "scale_by_kv_width",
          "scales the scores by 1/sqrt(w_k.shape[1]) = 1/sqrt(num_kv_heads * d_head) instead "
          "of 1/sqrt(d_head)",
          gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "masked_fill_with_allowed_mask",
          "passes the True = may-attend tril mask straight to masked_fill, which fills where "
          "the mask is True, so the allowed keys are removed and the future ones kept",
          gqa_mask_convention_inverted),
    Entry("grouped_query_attention", "wrong", "no_divisibility_check",
          "never checks that num_kv_heads divides num_heads, so a bad pair fails later with a "
          "RuntimeError from the matmul instead of a ValueError naming both numbers",
          gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "reshapes the (B, H, N, d_head) context straight to (B, N, d_model) without moving "
          "the head axis after the token axis, mixing tokens and heads",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "right", "sdpa_enable_gqa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "per_head_loop_float64", None,
          gqa_head_loop_float64),
    # kv_cache_bytes
    Entry("kv_cache_bytes", "wrong", "keys_only",
          "leaves out the factor 2 for keys and values, counting only one of the two caches",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8, giving the size in bits instead of bytes",
          kv_bytes_in_bits),
    Entry("kv_cache_bytes", "wrong", "np_prod_int64",
          "multiplies with np.prod, which returns a numpy int64 instead of a plain Python int",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "hardcoded_two_bytes",
          "hard-codes 2 bytes per element (fp16) and ignores the bytes_per_element argument",
          kv_bytes_hardcoded_fp16),
    Entry("kv_cache_bytes", "wrong", "one_extra_position",
          "counts seq_len + 1 positions (an extra slot for the token being generated) instead "
          "of seq_len",
          kv_bytes_extra_position),
    Entry("kv_cache_bytes", "wrong", "head_dim_split_across_heads",
          "reads head_dim as the width of all K/V heads together and divides it by "
          "num_kv_heads, so the heads cancel out of the size",
          kv_bytes_head_dim_split),
    Entry("kv_cache_bytes", "right", "layer_and_tensor_loop", None, kv_bytes_layer_loop),
    Entry("kv_cache_bytes", "right", "cache_shape_prod", None, kv_bytes_cache_shape),
    # decode_with_cache
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects keys and values of the whole prefix x[:, :t+1] again at every step instead "
          "of caching them: right values, but quadratic projection work",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "reads_cache_before_writing",
          "slices the cache (:t) before writing the new token's key and value, so each query "
          "misses its own key and the first token attends to nothing (a zero output row)",
          decode_cache_slice_before_write),
    Entry("decode_with_cache", "wrong", "cache_reset_each_step",
          "creates the key/value lists inside the loop, so the cache is emptied at every step "
          "and each token attends only to itself",
          decode_cache_reset_in_loop),
    Entry("decode_with_cache", "wrong", "top_left_mask_in_step",
          "masks each step's scores with tril(ones(1, t+1)), a top-left aligned mask, so the "
          "new query may only attend the first key instead of the whole cache",
          decode_top_left_step_mask),
    Entry("decode_with_cache", "wrong", "value_cache_holds_keys",
          "appends the new key (not the new value) to the value cache, so the weighted sum "
          "runs over keys",
          decode_value_cache_holds_keys),
    Entry("decode_with_cache", "wrong", "cache_default_float32",
          "preallocates the caches with torch.zeros without dtype, so they are float32 "
          "whatever x's dtype; float64 or half inputs then fail with a dtype mismatch in the "
          "matmul",
          decode_float32_cache),
    Entry("decode_with_cache", "right", "preallocated_sdpa_enable_gqa", None,
          decode_prealloc_sdpa),
    Entry("decode_with_cache", "right", "list_cache_head_loop_float64", None,
          decode_lists_head_loop_float64),
]
