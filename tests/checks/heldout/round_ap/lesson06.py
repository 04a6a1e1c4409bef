"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache. Each function is one learner's own
answer; wrong ones carry one slip."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================== repeat_kv: wrong
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_expand_group_axis(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_stack_last(x, n_rep):
    b, g, n, d = x.shape
    copies = torch.stack([x] * n_rep, dim=-1)  # (B, G, N, d, n_rep)
    return copies.reshape(b, g * n_rep, n, d)


def repeat_kv_divide_by_groups(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h // groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


def repeat_kv_no_reshape(x, n_rep):
    B, G, N, D = x.shape
    return x.unsqueeze(2).expand(B, G, n_rep, N, D)


# ============================================================== repeat_kv: right
def repeat_kv_index_select(x, n_rep):
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


def repeat_kv_unsqueeze_repeat_flatten(x, n_rep):
    return x.unsqueeze(2).repeat(1, 1, n_rep, 1, 1).flatten(1, 2)


# ============================================================== grouped_query_attention: wrong
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    def to_heads(t, h):
        b, n, w = t.shape
        return t.view(b, n, h, w // h).transpose(1, 2)

    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = to_heads(x @ w_q, num_heads)
    k = to_heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = to_heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_masked_fill_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(d_head)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(allowed, float("-inf"))
    attn = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    out = attn @ v.float()
    return out.transpose(1, 2).reshape(batch, n, d_model).to(x.dtype) @ w_o


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    def to_heads(t, h):
        b, n, w = t.shape
        return t.view(b, n, h, w // h).transpose(1, 2)

    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    check_heads(num_heads, num_kv_heads)
    B, N, _ = x.shape
    q = to_heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(to_heads(x @ w_k, num_kv_heads), num_heads // num_kv_heads, 1)
    v = torch.repeat_interleave(to_heads(x @ w_v, num_kv_heads), num_heads // num_kv_heads, 1)
    s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(w_k.shape[1])
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)
        s = s.masked_fill(future, float("-inf"))
    w = s.softmax(dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).flatten(2) @ w_o


def gqa_kv_reshape_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, num_kv_heads, N, dh)
    v = (x @ w_v).reshape(B, num_kv_heads, N, dh)
    rep = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, rep, N, dh).reshape(B, num_heads, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, rep, N, dh).reshape(B, num_heads, N, dh)
    s = torch.matmul(q, k.transpose(2, 3)).float() / dh ** 0.5
    if causal:
        s = s + torch.full((N, N), float("-inf")).triu(1)
    p = F.softmax(s, dim=-1).to(x.dtype)
    return torch.matmul(p, v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tril_diagonal_minus_one(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    def to_heads(t, h):
        b, n, w = t.shape
        return t.view(b, n, h, w // h).transpose(1, 2)

    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    d_head = D // num_heads
    q = to_heads(x @ w_q, num_heads)
    k = to_heads(x @ w_k, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = to_heads(x @ w_v, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhqk,bhkd->bhqd", weights, v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_softmax_over_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    def to_heads(t, h):
        b, n, w = t.shape
        return t.view(b, n, h, w // h).transpose(1, 2)

    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = to_heads(x @ w_q, num_heads).float()
    k = to_heads(x @ w_k, num_kv_heads).float().repeat_interleave(n_rep, dim=1)
    v = to_heads(x @ w_v, num_kv_heads).float().repeat_interleave(n_rep, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        mask = torch.ones(N, N, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=1)
    ctx = (probs @ v).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


# ============================================================== grouped_query_attention: right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (x @ w_k).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (x @ w_v).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    return ctx.to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G, dh = num_kv_heads, D // num_heads
    R = num_heads // G
    x64 = x.double()
    # query head h = g * R + r belongs to group g
    q = (x64 @ w_q.double()).view(B, N, G, R, dh)
    k = (x64 @ w_k.double()).view(B, N, G, dh)
    v = (x64 @ w_v.double()).view(B, N, G, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(N)
        s = s.masked_fill(i[None, :] > i[:, None], -math.inf)
    p = torch.exp(s - s.amax(dim=-1, keepdim=True))
    p = p / p.sum(dim=-1, keepdim=True)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================== kv_cache_bytes: wrong
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_in_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element * 8


def kv_bytes_numpy_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_next_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    positions = seq_len + 1  # the prompt plus the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * positions * batch_size * bytes_per_element


def kv_bytes_fp16_hardcoded(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    fp16 = 2
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * fp16


# ============================================================== kv_cache_bytes: right
def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            per_token += num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len * batch_size


# ============================================================== decode_with_cache: wrong
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    def to_heads(t, h):
        b, n, w = t.shape
        return t.view(b, n, h, w // h).transpose(1, 2)

    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    def one_token_heads(t, h):  # (B, 1, h * d) -> (B, h, 1, d)
        b, one, w = t.shape
        return t.reshape(b, one, h, w // h).transpose(1, 2)

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        prefix = x[:, : t + 1]
        q = one_token_heads(x[:, t : t + 1] @ w_q, num_heads)
        k = to_heads(prefix @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
        v = to_heads(prefix @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        ctx = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    def one_token_heads(t, h):  # (B, 1, h * d) -> (B, h, 1, d)
        b, one, w = t.shape
        return t.reshape(b, one, h, w // h).transpose(1, 2)

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    v_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    outs = []
    for t in range(N):
        x_t = x[:, t : t + 1]
        q = one_token_heads(x_t @ w_q, num_heads)
        k_new = one_token_heads(x_t @ w_k, num_kv_heads)
        v_new = one_token_heads(x_t @ w_v, num_kv_heads)
        keys = k_cache.repeat_interleave(rep, dim=1)
        vals = v_cache.repeat_interleave(rep, dim=1)
        s = q.float() @ keys.float().transpose(-2, -1) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = (p @ vals.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(outs, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    def one_token_heads(t, h):  # (B, 1, h * d) -> (B, h, 1, d)
        b, one, w = t.shape
        return t.reshape(b, one, h, w // h).transpose(1, 2)

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        x_t = x[:, t : t + 1]
        q = one_token_heads(x_t @ w_q, num_heads)
        ks.append(one_token_heads(x_t @ w_k, num_kv_heads))
        vs.append(one_token_heads(x_t @ w_v, num_kv_heads))
        K = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        V = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        s = q.float() @ K.float().transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal mask for this step
        s = s.masked_fill(~mask, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ V.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    def one_token_heads(t, h):  # (B, 1, h * d) -> (B, h, 1, d)
        b, one, w = t.shape
        return t.reshape(b, one, h, w // h).transpose(1, 2)

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    out = []
    for t in range(N):
        x_t = x[:, t : t + 1]
        q = one_token_heads(x_t @ w_q, num_heads)
        k_cache[:, :, t : t + 1] = one_token_heads(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t : t + 1] = one_token_heads(x_t @ w_v, num_kv_heads)
        K = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        V = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        s = q @ K.transpose(-2, -1) / math.sqrt(dh)
        ctx = torch.softmax(s, dim=-1) @ V
        out.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_cat_feature_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    def one_token_heads(t, h):  # (B, 1, h * d) -> (B, h, 1, d)
        b, one, w = t.shape
        return t.reshape(b, one, h, w // h).transpose(1, 2)

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(N):
        x_t = x[:, t : t + 1]
        q = one_token_heads(x_t @ w_q, num_heads)
        k_t = one_token_heads(x_t @ w_k, num_kv_heads)
        v_t = one_token_heads(x_t @ w_v, num_kv_heads)
        k_cache = k_t if k_cache is None else torch.cat([k_cache, k_t], dim=-1)
        v_cache = v_t if v_cache is None else torch.cat([v_cache, v_t], dim=-1)
        K = k_cache.repeat_interleave(rep, dim=1)
        V = v_cache.repeat_interleave(rep, dim=1)
        s = q.float() @ K.float().transpose(-2, -1) / math.sqrt(dh)
        ctx = (torch.softmax(s, dim=-1) @ V.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_softmax_query_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    def check_heads(num_heads, num_kv_heads):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")

    def one_token_heads(t, h):  # (B, 1, h * d) -> (B, h, 1, d)
        b, one, w = t.shape
        return t.reshape(b, one, h, w // h).transpose(1, 2)

    check_heads(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.empty_like(k_cache)
    outs = []
    for t in range(N):
        x_t = x[:, t : t + 1]
        q = one_token_heads(x_t @ w_q, num_heads)
        k_cache[:, :, t] = (x_t @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).view(B, num_kv_heads, dh)
        K = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1).float()
        V = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1).float()
        s = q.float() @ K.transpose(-2, -1) / math.sqrt(dh)  # (B, H, 1, t + 1)
        p = torch.softmax(s, dim=-2)
        outs.append((p @ V).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


# ============================================================== decode_with_cache: right
def decode_lists_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(N):
        tok = x[:, t]  # (B, D): one row per sequence
        q = (tok @ w_q).view(B, num_heads, 1, dh)
        keys.append((tok @ w_k).view(B, num_kv_heads, 1, dh))
        values.append((tok @ w_v).view(B, num_kv_heads, 1, dh))
        K = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q.float(), K.float(), V.float())  # all past keys
        outs.append(ctx.to(x.dtype).reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_grouped_einsum_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    dh = D // num_heads
    k_cache = torch.zeros(B, N, G, dh, dtype=torch.float64)
    v_cache = torch.zeros(B, N, G, dh, dtype=torch.float64)
    result = torch.empty(B, N, D, dtype=x.dtype)
    for t in range(N):
        row = x[:, t, :]
        k_cache[:, t] = (row @ w_k).double().view(B, G, dh)
        v_cache[:, t] = (row @ w_v).double().view(B, G, dh)
        q = (row @ w_q).double().view(B, G, R, dh)
        s = torch.einsum("bgrd,bjgd->bgrj", q, k_cache[:, : t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrj,bjgd->bgrd", p, v_cache[:, : t + 1]).reshape(B, D)
        result[:, t] = ctx.to(x.dtype) @ w_o
    return result


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor_repeat_tiles",
          "x.repeat tiles the groups (0, 1, ..., 0, 1, ...) so head h reads group h % G "
          "instead of h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "repeat_interleave_token_axis",
          "repeat_interleave along dim=2 repeats the tokens, not the K/V heads (dim=1)",
          repeat_kv_interleave_tokens),
    Entry("repeat_kv", "wrong", "expand_non_singleton_axis",
          "calls expand on the group axis, but expand can only broadcast axes of size 1, so it "
          "raises whenever G > 1",
          repeat_kv_expand_group_axis),
    Entry("repeat_kv", "wrong", "copies_stacked_last",
          "stacks the copies on a new last axis (B, G, N, d, n_rep) before reshaping, which "
          "mixes features and tokens across heads",
          repeat_kv_stack_last),
    Entry("repeat_kv", "wrong", "head_index_divided_by_groups",
          "maps head h to group h // G (the number of groups) instead of h // n_rep",
          repeat_kv_divide_by_groups),
    Entry("repeat_kv", "wrong", "expand_without_reshape",
          "expands to (B, G, n_rep, N, d) but never reshapes to (B, G * n_rep, N, d)",
          repeat_kv_no_reshape),
    Entry("repeat_kv", "right", "index_select_floor_div", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "unsqueeze_repeat_flatten", None,
          repeat_kv_unsqueeze_repeat_flatten),

    Entry("grouped_query_attention", "wrong", "kv_heads_tiled",
          "repeats the K/V heads with .repeat (tiled), so query head h uses group h % G "
          "instead of h // n_rep",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "masked_fill_with_allowed_mask",
          "passes the allowed (lower-triangular) mask to masked_fill, which fills where the "
          "mask is True, so it blocks the past and keeps the future",
          gqa_masked_fill_allowed),
    Entry("grouped_query_attention", "wrong", "scale_by_kv_width",
          "scales the scores by 1/sqrt(w_k.shape[1]) = 1/sqrt(num_kv_heads * d_head) instead "
          "of 1/sqrt(d_head)",
          gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "kv_reshape_without_transpose",
          "reshapes the keys and values straight to (B, G, N, d_head) without the transpose, "
          "so each K/V head mixes tokens and features",
          gqa_kv_reshape_no_transpose),
    Entry("grouped_query_attention", "wrong", "tril_diagonal_minus_one",
          "builds the causal mask with tril(diagonal=-1), which hides each query's own key "
          "(the first row has no key at all and becomes NaN)",
          gqa_tril_diagonal_minus_one),
    Entry("grouped_query_attention", "wrong", "softmax_over_heads",
          "applies the softmax over dim=1 (the heads) instead of the keys (dim=-1)",
          gqa_softmax_over_heads),
    Entry("grouped_query_attention", "right", "repeat_interleave_sdpa", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None,
          gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "counts only the key cache: the factor 2 for keys and values is missing",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored",
          "leaves batch_size out of the product", kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8, giving bits instead of bytes", kv_bytes_in_bits),
    Entry("kv_cache_bytes", "wrong", "numpy_prod_integer",
          "multiplies the factors with np.prod, returning a numpy integer instead of a plain "
          "Python int",
          kv_bytes_numpy_prod),
    Entry("kv_cache_bytes", "wrong", "seq_len_plus_one",
          "counts seq_len + 1 positions (adding the token being generated) instead of seq_len",
          kv_bytes_next_token),
    Entry("kv_cache_bytes", "wrong", "fp16_hardcoded",
          "hard-codes 2 bytes per element (fp16) and ignores bytes_per_element",
          kv_bytes_fp16_hardcoded),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "per_layer_loop", None, kv_bytes_layer_loop),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "caching them, so the projection work grows quadratically (the values are right)",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attends_before_appending",
          "attends over the cache before appending the new token's key and value, so each "
          "token misses itself (the first step sees no key and gives zeros)",
          decode_attend_before_append),
    Entry("decode_with_cache", "wrong", "top_left_mask_in_step",
          "masks each step with a top-left tril of shape (1, t+1), which lets the single new "
          "query see only the first key; a decoding step needs no mask (or a bottom-right one)",
          decode_top_left_step_mask),
    Entry("decode_with_cache", "wrong", "cache_default_float32",
          "allocates the cache with torch.zeros' default float32 instead of x's dtype, so the "
          "scores mix dtypes and the products raise for float64 / half inputs",
          decode_float32_cache),
    Entry("decode_with_cache", "wrong", "cache_grows_feature_axis",
          "concatenates new keys and values along the last (feature) axis instead of the token "
          "axis (dim=2), so the second step fails with a shape mismatch",
          decode_cat_feature_axis),
    Entry("decode_with_cache", "wrong", "softmax_over_query_axis",
          "applies the softmax over dim=-2, the single query, so every weight is 1 and the "
          "step sums the values instead of averaging them",
          decode_softmax_query_axis),
    Entry("decode_with_cache", "right", "lists_and_sdpa_per_step", None, decode_lists_sdpa),
    Entry("decode_with_cache", "right", "grouped_einsum_float64_cache", None,
          decode_grouped_einsum_cache),
]
