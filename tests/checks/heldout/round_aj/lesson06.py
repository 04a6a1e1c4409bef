"""Held-out learners' answers, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache)."""

import math

import torch

from entry import Entry


# =============================================================================== repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_token_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_no_dim(x, n_rep):
    b, g, n, d = x.shape
    return torch.repeat_interleave(x, n_rep)


def repeat_kv_n_rep_as_heads(x, n_rep):
    groups = x.shape[1]
    return x.repeat_interleave(n_rep // groups, dim=1)


def repeat_kv_unsqueeze_last(x, n_rep):
    B, G, N, D = x.shape
    y = x.unsqueeze(-1).expand(B, G, N, D, n_rep)
    return y.reshape(B, G * n_rep, N, D)


def repeat_kv_loop_wrong_divisor(x, n_rep):
    G = x.shape[1]
    heads = [x[:, h // G] for h in range(G * n_rep)]
    return torch.stack(heads, dim=1)


def repeat_kv_interleave(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


# =============================================================================== grouped_query_attention
def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2).repeat_interleave(n_rep, dim=1)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2).repeat_interleave(n_rep, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    ctx = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_triu_diagonal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, seq, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, seq, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, seq, num_kv_heads, d_head).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=0)
        scores = scores.masked_fill(future, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = (weights @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(batch, seq, d_model) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).view(B, N, num_heads, hd).transpose(1, 2).to(ct)
    k = (x @ w_k).view(B, N, num_kv_heads, hd).transpose(1, 2).to(ct)
    v = (x @ w_v).view(B, N, num_kv_heads, hd).transpose(1, 2).to(ct)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(hd))
    if causal is not None:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device))
        scores = scores.masked_fill(~allowed, float("-inf"))
    ctx = torch.softmax(scores, dim=-1) @ v
    return ctx.to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    g = num_heads // num_kv_heads
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = torch.matmul(q.float(), k.float().transpose(2, 3)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.matmul(s.softmax(-1), v.float()).to(x.dtype)  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def gqa_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).permute(0, 2, 1, 3)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).permute(0, 2, 1, 3)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    att = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        att = att.masked_fill(torch.ones(N, N).tril() == 0, float("-inf"))
    att = att.softmax(dim=-2)
    y = (att @ v.float()).to(x.dtype)
    return y.permute(0, 2, 1, 3).reshape(B, N, D) @ w_o


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    k = torch.cat([k] * n_rep, dim=1)
    v = torch.cat([v] * n_rep, dim=1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    o = (s.softmax(-1) @ v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    dh = D // num_heads
    ct = torch.float64
    q = (x @ w_q).to(ct).view(B, N, G, R, dh)  # head h = g * R + r
    k = (x @ w_k).to(ct).view(B, N, G, dh)
    v = (x @ w_v).to(ct).view(B, N, G, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(N).view(N, 1)
        j = torch.arange(N).view(1, N)
        s = torch.where(j <= i, s, torch.tensor(float("-inf"), dtype=ct))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(B, N, D)
    return ctx.to(x.dtype) @ w_o


def gqa_head_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    per_group = num_heads // num_kv_heads
    xq, xk, xv = (x @ w_q).float(), (x @ w_k).float(), (x @ w_v).float()
    outs = []
    for h in range(num_heads):
        g = h // per_group
        qh = xq[..., h * dh:(h + 1) * dh]
        kh = xk[..., g * dh:(g + 1) * dh]
        vh = xv[..., g * dh:(g + 1) * dh]
        s = torch.bmm(qh, kh.transpose(1, 2)) / math.sqrt(dh)
        if causal:
            s = s + torch.full((N, N), float("-inf")).triu(1)
        outs.append(torch.bmm(torch.softmax(s, dim=-1), vh))
    return torch.cat(outs, dim=-1).to(x.dtype) @ w_o


# =============================================================================== kv_cache_bytes
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
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


def kv_bytes_fixed_two_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16


def kv_bytes_extra_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    tokens = seq_len + 1  # the prompt plus the new token
    return 2 * num_layers * num_kv_heads * head_dim * tokens * batch_size * bytes_per_element


def kv_bytes_double_kv_factor(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    per_layer_token = 2 * num_kv_heads * head_dim * bytes_per_element  # K and V
    return 2 * num_layers * per_layer_token * seq_len * batch_size


def kv_bytes_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return math.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element])


def kv_bytes_tensor_shapes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    one_cache = (batch_size, num_kv_heads, seq_len, head_dim)
    elements_per_layer = sum(math.prod(one_cache) for _ in ("k", "v"))
    return int(num_layers * elements_per_layer * bytes_per_element)


# =============================================================================== decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q = (x[:, t:t + 1] @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k = (x[:, :t + 1] @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (x[:, :t + 1] @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        p = torch.softmax(q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (p @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_attends_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2).float()
        ks = k_cache[:, :, :t].repeat_interleave(rep, 1).float()
        vs = v_cache[:, :, :t].repeat_interleave(rep, 1).float()
        w = torch.softmax(q @ ks.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (w @ vs).to(x.dtype)
        k_cache[:, :, t:t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    out = []
    for t in range(N):
        tok = x[:, t]  # (B, D)
        q = (tok @ w_q).view(B, num_heads, 1, hd)
        k_cache = (tok @ w_k).view(B, num_kv_heads, 1, hd)
        v_cache = (tok @ w_v).view(B, num_kv_heads, 1, hd)
        k = k_cache.repeat_interleave(n_rep, dim=1).float()
        v = v_cache.repeat_interleave(n_rep, dim=1).float()
        att = torch.softmax(q.float() @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
        ctx = (att @ v).to(x.dtype).reshape(B, D)
        out.append((ctx @ w_o).unsqueeze(1))
    return torch.cat(out, dim=1)


def decode_cat_on_batch(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(N):
        x_t = x[:, t:t + 1, :]
        q_t = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        s = q_t.float() @ K.float().transpose(-2, -1) / math.sqrt(dh)
        ctx = (s.softmax(-1) @ V.float()).to(x.dtype)
        outputs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=0)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    result = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, 1).float()
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, 1).float()
        s = q.float() @ k.transpose(-2, -1) / math.sqrt(dh)
        mask = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal, as in lesson 04
        s = s.masked_fill(~mask, float("-inf"))
        ctx = (s.softmax(-1) @ v).to(x.dtype)
        result.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(result, dim=1)


def decode_cache_default_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t] = (x_t @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).view(B, num_kv_heads, dh)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outs.append((w @ v).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_list_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        tok = x[:, t]  # (B, D): only the new token is projected
        q = (tok @ w_q).view(B, num_heads, dh).double()
        ks.append((tok @ w_k).view(B, num_kv_heads, dh).double())
        vs.append((tok @ w_v).view(B, num_kv_heads, dh).double())
        K = torch.stack(ks, dim=2)  # (B, G, t+1, dh)
        V = torch.stack(vs, dim=2)
        Kh = K.repeat_interleave(rep, dim=1)  # (B, H, t+1, dh)
        Vh = V.repeat_interleave(rep, dim=1)
        scores = (Kh * q.unsqueeze(2)).sum(-1) / math.sqrt(dh)  # (B, H, t+1)
        p = torch.softmax(scores, dim=-1)
        ctx = (p.unsqueeze(-1) * Vh).sum(2)  # (B, H, dh)
        outs.append(ctx.reshape(B, D).to(x.dtype) @ w_o)
    return torch.stack(outs, dim=1)


def decode_grouped_prealloc(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    dh = D // num_heads
    acc = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(B, N, G, dh, dtype=acc)
    v_cache = torch.zeros(B, N, G, dh, dtype=acc)
    out = torch.empty(B, N, D, dtype=x.dtype)
    for t in range(N):
        x_t = x[:, t, :]
        q = (x_t @ w_q).to(acc).view(B, G, R, dh)
        k_cache[:, t] = (x_t @ w_k).to(acc).view(B, G, dh)
        v_cache[:, t] = (x_t @ w_v).to(acc).view(B, G, dh)
        s = torch.einsum("bgrd,bjgd->bgrj", q, k_cache[:, :t + 1]) * dh ** -0.5
        p = s.softmax(dim=-1)
        ctx = torch.einsum("bgrj,bjgd->bgrd", p, v_cache[:, :t + 1]).reshape(B, D)
        out[:, t] = ctx.to(x.dtype) @ w_o
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1) instead of "
          "repeating each group in place (0, 0, 1, 1), so head h does not read group "
          "h // n_rep", repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_token_dim",
          "repeat_interleave's along dim=2 (the tokens) instead of dim=1 (the groups)",
          repeat_kv_token_dim),
    Entry("repeat_kv", "wrong", "interleave_without_dim",
          "calls torch.repeat_interleave without dim, which flattens the tensor and returns a "
          "1-D vector", repeat_kv_no_dim),
    Entry("repeat_kv", "wrong", "n_rep_read_as_head_count",
          "reads n_rep as the number of query heads and repeats each group n_rep // G times",
          repeat_kv_n_rep_as_heads),
    Entry("repeat_kv", "wrong", "unsqueeze_last_axis",
          "adds the copy axis at the end (after d) instead of right after the group axis, so "
          "the reshape mixes copies, tokens and features", repeat_kv_unsqueeze_last),
    Entry("repeat_kv", "wrong", "loop_divides_by_groups",
          "the loop picks group h // G (number of groups) instead of h // n_rep",
          repeat_kv_loop_wrong_divisor),
    Entry("repeat_kv", "right", "repeat_interleave_dim1", None, repeat_kv_interleave),
    Entry("repeat_kv", "right", "index_select", None, repeat_kv_index_select),
    Entry("grouped_query_attention", "wrong", "no_multiple_check",
          "never checks that num_kv_heads divides num_heads, so a bad pair fails later with a "
          "RuntimeError from the matmul instead of a ValueError", gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "triu_diagonal_zero",
          "masks torch.triu(..., diagonal=0), which includes the diagonal, so each query is "
          "kept from itself and the first row has no key left (NaN)", gqa_triu_diagonal),
    Entry("grouped_query_attention", "wrong", "causal_is_not_none",
          "tests `if causal is not None`, which is true for causal=False too, so the causal "
          "mask is always applied", gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) "
          "without transpose(1, 2), scrambling tokens and heads",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of over the keys",
          gqa_softmax_over_queries),
    Entry("grouped_query_attention", "wrong", "groups_tiled",
          "repeats the K/V heads with torch.cat([k] * n_rep, dim=1), which tiles the groups, "
          "so query head h reads group h % G instead of h // n_rep", gqa_tiled_groups),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None,
          gqa_grouped_einsum),
    Entry("grouped_query_attention", "right", "per_head_loop", None, gqa_head_loop),
    Entry("kv_cache_bytes", "wrong", "keys_only",
          "forgets the factor 2: counts only the key cache, not keys and values",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "gib_float",
          "divides by 2**30 and returns GiB as a float instead of a plain int of bytes",
          kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "batch_ignored",
          "never multiplies by batch_size, so it counts one sequence only",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "hardcoded_fp16",
          "multiplies by a hard-coded 2 bytes (fp16) instead of bytes_per_element",
          kv_bytes_fixed_two_bytes),
    Entry("kv_cache_bytes", "wrong", "seq_len_plus_one",
          "counts seq_len + 1 tokens (adds a 'new token') instead of seq_len",
          kv_bytes_extra_token),
    Entry("kv_cache_bytes", "wrong", "k_and_v_counted_twice",
          "puts the factor 2 for K and V both in the per-layer size and in the total, so the "
          "cache is counted twice", kv_bytes_double_kv_factor),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_bytes_prod),
    Entry("kv_cache_bytes", "right", "tensor_shapes", None, kv_bytes_tensor_shapes),
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "caching: the right values, but quadratic projection work",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attends_before_appending",
          "attends over the cache before writing the new token's key and value, so each token "
          "misses itself (and the first token gets zeros)", decode_attends_before_append),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "replaces the cache with the new token's key and value at each step instead of "
          "appending, so every token attends only to itself", decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "outputs_cat_on_batch",
          "concatenates the per-step outputs along dim=0 (the batch) instead of dim=1 (the "
          "tokens), returning (B*N, 1, d_model)", decode_cat_on_batch),
    Entry("decode_with_cache", "wrong", "top_left_mask_per_step",
          "applies a top-left causal mask torch.ones(1, t+1).tril() to the single new query, "
          "which lets it see only key 0 instead of all t+1 cached keys",
          decode_top_left_mask),
    Entry("decode_with_cache", "wrong", "cache_default_dtype",
          "allocates the cache with torch.zeros(...) without dtype=x.dtype, so the cache is "
          "float32 and the matmul with float64 or half-precision queries raises a dtype error",
          decode_cache_default_dtype),
    Entry("decode_with_cache", "right", "list_cache_float64", None, decode_list_cache),
    Entry("decode_with_cache", "right", "grouped_prealloc_einsum", None,
          decode_grouped_prealloc),
]
