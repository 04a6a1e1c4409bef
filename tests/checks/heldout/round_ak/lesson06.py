"""Held-out catalogue, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache): torch."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_sequence_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_expand_directly(x, n_rep):
    B, G, N, d = x.shape
    return x.expand(B, G * n_rep, N, d)


def repeat_kv_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_kv_numpy(x, n_rep):
    return np.repeat(x.detach().cpu().numpy(), n_rep, axis=1)


def repeat_kv_n_rep_as_heads(x, n_rep):
    groups = x.shape[1]
    return x.repeat_interleave(n_rep // groups, dim=1)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


def repeat_kv_stack_flatten(x, n_rep):
    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)


# ============================================================================ grouped_query_attention
def gqa_kv_split_with_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(1, 2)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device))
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_triu_not_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).view(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).view(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).view(batch, n, num_kv_heads, d_head).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-1, -2)).float() / math.sqrt(d_head)
    if causal:
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    weights = torch.nan_to_num(weights)
    ctx = weights.to(v.dtype) @ v
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_no_divisibility_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    hd = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2).repeat_interleave(n_rep, 1)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2).repeat_interleave(n_rep, 1)
    att = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(hd)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~keep, float("-inf"))
    att = att.softmax(-1)
    out = (att @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_groups_tiled(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat(1, num_heads // num_kv_heads, 1, 1)
    v = v.repeat(1, num_heads // num_kv_heads, 1, 1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = (p @ v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_float_weights_not_cast_back(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                    causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        causal_ok = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device))
        scores = scores.masked_fill(~causal_ok, float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1)
    ctx = weights @ v
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, dm = x.shape
    hd = dm // num_heads
    rep = num_heads // num_kv_heads
    Q = (x @ w_q).reshape(b, n, num_heads, hd).permute(0, 2, 1, 3)
    K = (x @ w_k).reshape(b, n, num_kv_heads, hd).permute(0, 2, 1, 3)
    V = (x @ w_v).reshape(b, n, num_kv_heads, hd).permute(0, 2, 1, 3)
    K = K[:, :, None].expand(b, num_kv_heads, rep, n, hd).reshape(b, num_heads, n, hd)
    V = V[:, :, None].expand(b, num_kv_heads, rep, n, hd).reshape(b, num_heads, n, hd)
    S = (Q.float() @ K.float().transpose(-2, -1)) / math.sqrt(hd)
    if causal:
        S = S.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    A = torch.softmax(S, dim=-2)
    O = (A @ V.float()).to(x.dtype)
    return O.permute(0, 2, 1, 3).reshape(b, n, dm) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, d_head)).transpose(1, 2)
    k = (x @ w_k).unflatten(-1, (num_kv_heads, d_head)).transpose(1, 2)
    v = (x @ w_v).unflatten(-1, (num_kv_heads, d_head)).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    ctx = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    return ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    G, R = num_kv_heads, num_heads // num_kv_heads
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(B, N, G, R, dh)  # head h = g * R + r
    k = (x64 @ w_k.double()).reshape(B, N, G, dh)
    v = (x64 @ w_v.double()).reshape(B, N, G, dh)
    s = torch.einsum("bqgrd,bkgd->bgrqk", q, k) / math.sqrt(dh)
    if causal:
        pos = torch.arange(N, device=x.device)
        s = s.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrqk,bkgd->bqgrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 30


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_extra_position(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    positions = seq_len + 1  # room for the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * positions * batch_size * bytes_per_element


def kv_bytes_assign_plus_typo(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        layer_bytes = 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
        total =+ layer_bytes  # noqa: E225
    return total


def kv_bytes_per_tensor_sum(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    shape = (batch_size, num_kv_heads, seq_len, head_dim)
    one_tensor = math.prod(shape) * bytes_per_element
    return sum(one_tensor for _ in range(num_layers) for _kv in ("k", "v"))


def kv_bytes_from_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits = 8 * bytes_per_element * head_dim * num_kv_heads * 2
    bits *= seq_len * batch_size * num_layers
    return bits // 8


# ============================================================================ decode_with_cache
def decode_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = k_cache[:, :, :t].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t].repeat_interleave(rep, dim=1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        o = (p @ v.float()).to(x.dtype)
        outs.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outputs = []
    for t in range(n):
        tok = x[:, t]  # (B, d_model)
        q_t = (tok @ w_q).view(batch, num_heads, 1, d_head)
        k_new = (tok @ w_k).view(batch, num_kv_heads, 1, d_head)
        v_new = (tok @ w_v).view(batch, num_kv_heads, 1, d_head)
        k_cache = k_new
        v_cache = v_new
        k_all = k_cache.repeat_interleave(n_rep, dim=1)
        v_all = v_cache.repeat_interleave(n_rep, dim=1)
        scores = q_t.float() @ k_all.float().transpose(-1, -2) / math.sqrt(d_head)
        attn = scores.softmax(dim=-1)
        ctx = (attn @ v_all.float()).to(x.dtype).reshape(batch, d_model)
        outputs.append(ctx @ w_o)
    return torch.stack(outputs, dim=1)


def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        prefix = x[:, :t + 1]
        q = (x[:, t:t + 1] @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k = (prefix @ w_k).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (prefix @ w_v).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        w = torch.softmax(q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (w @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1, :]
        q = (xt @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        keys.append((xt @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2))
        values.append((xt @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        s = q.float() @ K.float().transpose(-2, -1) / math.sqrt(hd)
        step_mask = torch.tril(torch.ones(1, t + 1, dtype=torch.bool))  # causal, as usual
        s = s.masked_fill(~step_mask, float("-inf"))
        a = torch.softmax(s, dim=-1)
        ctx = (a @ V.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    d_head = D // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, d_head)
    v_cache = torch.zeros(B, num_kv_heads, N, d_head)
    result = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).reshape(B, 1, num_heads, d_head).transpose(1, 2)
        k_cache[:, :, t] = (x_t @ w_k).reshape(B, num_kv_heads, d_head)
        v_cache[:, :, t] = (x_t @ w_v).reshape(B, num_kv_heads, d_head)
        k = k_cache[:, :, :t + 1].repeat_interleave(n_rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(n_rep, dim=1)
        scores = q_t @ k.transpose(-2, -1) / math.sqrt(d_head)
        probs = torch.softmax(scores, dim=-1)
        ctx = probs @ v
        result.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(result, dim=1)


def decode_cat_wrong_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, pieces = [], [], []
    for t in range(N):
        cur = x[:, t:t + 1]
        q = (cur @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        ks.append((cur @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        vs.append((cur @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1).float()
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (p @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        pieces.append(ctx @ w_o)
    return torch.cat(pieces, dim=0)


def decode_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    cache_k = x.new_zeros(batch, num_kv_heads, 0, d_head)
    cache_v = x.new_zeros(batch, num_kv_heads, 0, d_head)
    steps = []
    for t in range(n):
        token = x[:, t]  # (B, d_model)
        q = (token @ w_q).view(batch, num_heads, 1, d_head)
        cache_k = torch.cat([cache_k, (token @ w_k).view(batch, num_kv_heads, 1, d_head)], 2)
        cache_v = torch.cat([cache_v, (token @ w_v).view(batch, num_kv_heads, 1, d_head)], 2)
        k = cache_k.repeat_interleave(rep, dim=1)
        v = cache_v.repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
        steps.append(ctx.to(x.dtype).reshape(batch, d_model) @ w_o)
    return torch.stack(steps, dim=1)


def decode_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    G, R = num_kv_heads, num_heads // num_kv_heads
    K = torch.empty(B, N, G, hd, dtype=torch.float64, device=x.device)
    V = torch.empty(B, N, G, hd, dtype=torch.float64, device=x.device)
    out = torch.empty(B, N, D, dtype=x.dtype, device=x.device)
    for t in range(N):
        xt = x[:, t, :]
        q = torch.einsum("bd,de->be", xt, w_q).double().reshape(B, G, R, hd)
        K[:, t] = torch.einsum("bd,de->be", xt, w_k).double().reshape(B, G, hd)
        V[:, t] = torch.einsum("bd,de->be", xt, w_v).double().reshape(B, G, hd)
        s = torch.einsum("bgrd,bkgd->bgrk", q, K[:, :t + 1]) / math.sqrt(hd)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrk,bkgd->bgrd", p, V[:, :t + 1]).reshape(B, D)
        out[:, t] = ctx.to(x.dtype) @ w_o
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor_repeat_tiles",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) so head h "
          "gets group h % G instead of h // n_rep", repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_sequence_dim",
          "repeat_interleave along dim=2, the sequence axis, instead of dim=1, the group axis, "
          "so tokens are duplicated instead of heads", repeat_kv_sequence_dim),
    Entry("repeat_kv", "wrong", "expand_without_new_axis",
          "calls x.expand(B, G*n_rep, N, d) directly; expand can only grow length-1 axes, so it "
          "raises whenever G > 1 and n_rep > 1", repeat_kv_expand_directly),
    Entry("repeat_kv", "wrong", "repeat_interleave_no_dim",
          "calls repeat_interleave without dim, which flattens the tensor and returns a 1-D "
          "result", repeat_kv_no_dim),
    Entry("repeat_kv", "wrong", "returns_numpy",
          "goes through np.repeat and returns a numpy array instead of a torch tensor (and "
          "bfloat16 cannot even be converted)", repeat_kv_numpy),
    Entry("repeat_kv", "wrong", "n_rep_read_as_total_heads",
          "reads n_rep as the total number of query heads and repeats each group "
          "n_rep // G times, so with G > 1 the result has the wrong number of heads",
          repeat_kv_n_rep_as_heads),
    Entry("repeat_kv", "right", "index_select_floor_div", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "stack_then_flatten", None, repeat_kv_stack_flatten),

    Entry("grouped_query_attention", "wrong", "kv_split_with_num_heads",
          "splits the keys and values into num_heads heads instead of num_kv_heads, so the "
          "reshape raises whenever num_kv_heads < num_heads", gqa_kv_split_with_num_heads),
    Entry("grouped_query_attention", "wrong", "triu_mask_not_inverted",
          "builds torch.triu(..., diagonal=1), the positions to block, but uses it as the "
          "'may attend' mask, so each query sees only the future keys (the last query none)",
          gqa_triu_not_inverted),
    Entry("grouped_query_attention", "wrong", "no_divisibility_check",
          "never checks num_heads % num_kv_heads: with 4 heads and 3 groups the repeat count "
          "floors to 1 and the matmul raises RuntimeError instead of a ValueError",
          gqa_no_divisibility_check),
    Entry("grouped_query_attention", "wrong", "groups_tiled_with_repeat",
          "repeats the K/V heads with .repeat, which tiles the groups, so query head h reads "
          "group h % num_kv_heads instead of h // n_rep", gqa_groups_tiled),
    Entry("grouped_query_attention", "wrong", "softmax_float32_not_cast_back",
          "does the softmax in float32 with scores.float() but multiplies the float32 weights "
          "with v in its own dtype, which raises a dtype mismatch for every input that is not "
          "float32", gqa_float_weights_not_cast_back),
    Entry("grouped_query_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          gqa_softmax_over_queries),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None, gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "no_factor_two",
          "forgets the factor 2: counts the keys but not the values", kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "divides by 2**30 and returns GiB as a float instead of bytes as an int",
          kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "ignores_batch_size",
          "multiplies the per-token bytes by seq_len only and never by batch_size",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "numpy_prod",
          "multiplies with np.prod, so the result is a numpy integer instead of a plain Python "
          "int", kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "extra_position",
          "reserves seq_len + 1 positions 'for the token being generated', one more than the "
          "seq_len tokens cached", kv_bytes_extra_position),
    Entry("kv_cache_bytes", "wrong", "assign_plus_typo",
          "writes `total =+ layer_bytes` (assigns +layer_bytes) instead of `total += "
          "layer_bytes`, so only one layer is counted", kv_bytes_assign_plus_typo),
    Entry("kv_cache_bytes", "right", "sum_over_k_and_v_tensors", None, kv_bytes_per_tensor_sum),
    Entry("kv_cache_bytes", "right", "via_bits", None, kv_bytes_from_bits),

    Entry("decode_with_cache", "wrong", "attends_before_current",
          "attends to cache[:t], the keys before the current token, instead of cache[:t+1]: "
          "each token never sees itself and the first step has no key at all (zeros)",
          decode_excludes_current),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns the new key and value to the cache instead of appending them, so each step "
          "attends only to its own token", decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of only "
          "the new token: right values, but quadratic projection work and no real cache",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "top_left_step_mask",
          "applies a causal mask inside each step, torch.tril(ones(1, t+1)), which is aligned "
          "top-left and lets the single new query see only key 0", decode_top_left_step_mask),
    Entry("decode_with_cache", "wrong", "float32_cache",
          "allocates the caches with torch.zeros and no dtype, so they are float32 and the "
          "scores mix dtypes: raises for float64, float16 and bfloat16 inputs",
          decode_float32_cache),
    Entry("decode_with_cache", "wrong", "concatenate_steps_on_batch",
          "concatenates the per-step outputs along dim=0 (batch) instead of dim=1 (sequence), "
          "returning (N*B, 1, d_model)", decode_cat_wrong_dim),
    Entry("decode_with_cache", "right", "growing_cache_sdpa", None, decode_list_cache_sdpa),
    Entry("decode_with_cache", "right", "grouped_einsum_float64_cache", None,
          decode_grouped_einsum),
]
