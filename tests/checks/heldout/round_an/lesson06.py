"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache.

Each function is one learner's answer; wrong ones carry exactly one slip.
"""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_sequence_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_modulo_index(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep) % n_rep
    return x[:, idx]


def repeat_kv_axis_at_end(x, n_rep):
    B, G, N, d = x.shape
    return x[..., None].expand(B, G, N, d, n_rep).reshape(B, G * n_rep, N, d)


def repeat_kv_expand_no_axis(x, n_rep):
    B, G, N, d = x.shape
    return x.expand(B, G * n_rep, N, d)


def repeat_kv_total_heads(x, n_rep):
    per_group = n_rep // x.shape[1]  # n_rep query heads shared among the G groups
    return x.repeat_interleave(per_group, dim=1)


def repeat_kv_right_gather(x, n_rep):
    heads = torch.arange(x.shape[1] * n_rep, device=x.device)
    return x.index_select(1, heads // n_rep)


def repeat_kv_right_stack(x, n_rep):
    copies = []
    for g in range(x.shape[1]):
        for _ in range(n_rep):
            copies.append(x[:, g])
    return torch.stack(copies, dim=1)


# ============================================================================ grouped_query_attention
def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(D)
    if causal:
        allowed = torch.ones(N, N, dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    w = scores.softmax(dim=-1).to(x.dtype)
    return (w @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat(1, n_rep, 1, 1)
    v = v.repeat(1, n_rep, 1, 1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_diagonal_masked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, d_model = x.shape
    hd = d_model // num_heads
    Q = (x @ w_q).view(B, N, num_heads, hd).transpose(1, 2)
    K = (x @ w_k).view(B, N, num_kv_heads, hd).transpose(1, 2)
    V = (x @ w_v).view(B, N, num_kv_heads, hd).transpose(1, 2)
    g = num_heads // num_kv_heads
    K = torch.repeat_interleave(K, g, dim=1)
    V = torch.repeat_interleave(V, g, dim=1)
    S = torch.matmul(Q, K.transpose(2, 3)).float() / hd ** 0.5
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=0)
        S = S.masked_fill(future, float("-inf"))
    A = torch.softmax(S, dim=-1).to(V.dtype)
    out = torch.matmul(A, V).transpose(1, 2).reshape(B, N, d_model)
    return out @ w_o


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    r = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, r, N, d_head).reshape(B, -1, N, d_head)
    v = v[:, :, None].expand(B, num_kv_heads, r, N, d_head).reshape(B, -1, N, d_head)
    scores = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = scores.softmax(-1)
    ctx = torch.einsum("bhqk,bhkd->bhqd", weights, v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, d_model) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    dh = d // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, dh).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    att = (q @ k.transpose(-1, -2)).float() * (1.0 / math.sqrt(dh))
    if causal is not None:
        mask = torch.ones(n, n, dtype=torch.bool).tril_()
        att = att.masked_fill(~mask, -math.inf)
    att = att.softmax(dim=-1).to(v.dtype)
    y = (att @ v).transpose(1, 2).contiguous().view(b, n, d)
    return y @ w_o


def gqa_view_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, num_heads, N, d_head)
    k = (x @ w_k).reshape(B, num_kv_heads, N, d_head)
    v = (x @ w_v).reshape(B, num_kv_heads, N, d_head)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(d_head)
    if causal:
        s = s + torch.full((N, N), float("-inf")).triu(1)
    p = s.softmax(-1)
    out = (p @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_right_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2).float()
    k = (x @ w_k).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).float()
    v = (x @ w_v).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).float()
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_right_per_head_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    xd = x.double()
    n = x.shape[1]
    d_head = x.shape[-1] // num_heads
    group_size = num_heads // num_kv_heads
    q_all = xd @ w_q.double()
    k_all = xd @ w_k.double()
    v_all = xd @ w_v.double()
    heads = []
    for h in range(num_heads):
        g = h // group_size
        qh = q_all[..., h * d_head:(h + 1) * d_head]
        kh = k_all[..., g * d_head:(g + 1) * d_head]
        vh = v_all[..., g * d_head:(g + 1) * d_head]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(d_head)
        if causal:
            i = torch.arange(n)[:, None]
            j = torch.arange(n)[None, :]
            s = torch.where(j <= i, s, torch.tensor(-math.inf, dtype=s.dtype))
        heads.append(torch.softmax(s, dim=-1) @ vh)
    return (torch.cat(heads, dim=-1) @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_kib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len * batch_size // 1024


def kv_bytes_bits_over_eight(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    bits = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8
    return bits / 8


def kv_bytes_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len
    return elements * bytes_per_element


def kv_bytes_caches_queries(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    tensors = 3  # q, k and v
    return tensors * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_fixed_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    fp16 = 2
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * fp16


def kv_bytes_right_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    one_vector = head_dim * bytes_per_element
    per_token_per_layer = {"k": num_kv_heads * one_vector, "v": num_kv_heads * one_vector}
    return sum(per_token_per_layer.values()) * num_layers * seq_len * batch_size


def kv_bytes_right_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q = (x[:, t:t + 1] @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k = (x[:, :t + 1] @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (x[:, :t + 1] @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        ctx = (s.softmax(-1) @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    outputs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        keys = k_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        vals = v_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(dh)
        ctx = (torch.softmax(s, dim=-1) @ vals.float()).to(x.dtype)
        k_cache[:, :, t:t + 1] = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        outputs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    group = num_heads // num_kv_heads
    k_cache = v_cache = None
    result = []
    for t in range(n):
        tok = x[:, t:t + 1, :]
        q_t = (tok @ w_q).view(batch, 1, num_heads, d_head).transpose(1, 2)
        k_t = (tok @ w_k).view(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        v_t = (tok @ w_v).view(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        k_cache = k_t
        v_cache = v_t
        kk = torch.repeat_interleave(k_cache, group, dim=1).float()
        vv = torch.repeat_interleave(v_cache, group, dim=1).float()
        w = torch.softmax(q_t.float() @ kk.transpose(-1, -2) / math.sqrt(d_head), dim=-1)
        ctx = (w @ vv).to(x.dtype)
        result.append(ctx.transpose(1, 2).reshape(batch, 1, d_model) @ w_o)
    return torch.cat(result, dim=1)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, out = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, hd).transpose(1, 2)
        ks.append((xt @ w_k).view(B, 1, num_kv_heads, hd).transpose(1, 2))
        vs.append((xt @ w_v).view(B, 1, num_kv_heads, hd).transpose(1, 2))
        K = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1).float()
        V = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1).float()
        s = q.float() @ K.transpose(-2, -1) / math.sqrt(hd)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        ctx = (s.softmax(-1) @ V).to(x.dtype)
        out.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_scale_by_cache_length(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2).float()
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, dh)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])
        ctx = (s.softmax(-1) @ v).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cat_batch_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, steps = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.repeat_interleave(torch.cat(keys, dim=2), rep, dim=1)
        V = torch.repeat_interleave(torch.cat(values, dim=2), rep, dim=1)
        a = torch.softmax((q.float() @ K.float().transpose(-2, -1)) / math.sqrt(dh), dim=-1)
        ctx = (a @ V.float()).to(x.dtype)
        steps.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=0)


def decode_right_sdpa_prealloc(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    k_cache = x.new_zeros(B, num_kv_heads, N, hd)
    v_cache = x.new_zeros(B, num_kv_heads, N, hd)
    out = x.new_empty(B, N, D)
    for t in range(N):
        tok = x[:, t]  # (B, D)
        q = (tok @ w_q).view(B, num_heads, 1, hd)
        k_cache[:, :, t] = (tok @ w_k).view(B, num_kv_heads, hd)
        v_cache[:, :, t] = (tok @ w_v).view(B, num_kv_heads, hd)
        ctx = F.scaled_dot_product_attention(
            q.float(), k_cache[:, :, :t + 1].float(), v_cache[:, :, :t + 1].float(),
            enable_gqa=True)  # one query sees every cached key: no mask
        out[:, t] = ctx.to(x.dtype).reshape(B, D) @ w_o
    return out


def decode_right_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    r = num_heads // num_kv_heads
    k_seen = x.new_zeros(B, num_kv_heads, 0, hd, dtype=torch.float64)
    v_seen = x.new_zeros(B, num_kv_heads, 0, hd, dtype=torch.float64)
    rows = []
    for t in range(N):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).double().reshape(B, num_kv_heads, r, hd)  # query heads grouped
        k_new = (tok @ w_k).double().reshape(B, num_kv_heads, 1, hd)
        v_new = (tok @ w_v).double().reshape(B, num_kv_heads, 1, hd)
        k_seen = torch.cat([k_seen, k_new], dim=2)
        v_seen = torch.cat([v_seen, v_new], dim=2)
        s = torch.einsum("bgrd,bgtd->bgrt", q, k_seen) / math.sqrt(hd)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, v_seen).reshape(B, 1, D)
        rows.append(ctx.to(x.dtype) @ w_o)
    return torch.cat(rows, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled-repeat",
          "x.repeat tiles the groups (0, 1, 2, 0, 1, 2, ...) instead of repeating each group "
          "n_rep times in a row, so query head h reads group h % G instead of h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave-sequence-axis",
          "repeat_interleave runs along dim=2, the sequence axis, instead of dim=1, the group "
          "axis, so the tokens are repeated and the head count stays G",
          repeat_kv_sequence_axis),
    Entry("repeat_kv", "wrong", "modulo-index",
          "the head-to-group index is built with `% n_rep` where `// n_rep` belongs, so the "
          "heads read the wrong groups (or an index out of range when n_rep > G)",
          repeat_kv_modulo_index),
    Entry("repeat_kv", "wrong", "new-axis-at-end",
          "the copy axis is added after d (x[..., None]) instead of after G, so the reshape "
          "interleaves copies of features and scrambles the heads",
          repeat_kv_axis_at_end),
    Entry("repeat_kv", "wrong", "expand-without-new-axis",
          "Tensor.expand can only stretch axes of size 1, so expanding the G axis to G*n_rep "
          "raises a RuntimeError whenever G > 1 and n_rep > 1 (a new axis is needed first)",
          repeat_kv_expand_no_axis),
    Entry("repeat_kv", "wrong", "n_rep-as-total-heads",
          "it treats n_rep as the total number of query heads and repeats each group "
          "n_rep // G times, so the head count is wrong (even zero)",
          repeat_kv_total_heads),
    Entry("repeat_kv", "right", "index-select", None, repeat_kv_right_gather),
    Entry("repeat_kv", "right", "stack-copies", None, repeat_kv_right_stack),

    Entry("grouped_query_attention", "wrong", "scale-by-d_model",
          "the scores are divided by sqrt(d_model) instead of sqrt(d_head)",
          gqa_scale_d_model),
    Entry("grouped_query_attention", "wrong", "tiled-kv-repeat",
          "the K/V heads are repeated with Tensor.repeat, which tiles the groups, so query "
          "head h reads group h % G instead of h // n_rep",
          gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "diagonal-masked",
          "the causal mask masks torch.triu(..., diagonal=0), which includes the diagonal: no "
          "query may attend itself and the first row has no key at all (NaN)",
          gqa_diagonal_masked),
    Entry("grouped_query_attention", "wrong", "no-divisibility-check",
          "there is no check that num_kv_heads divides num_heads, so such arguments fail "
          "later with a RuntimeError from the matrix product instead of a ValueError naming "
          "both numbers",
          gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "causal-is-not-none",
          "the flag is tested with `causal is not None`, which is true for causal=False too, "
          "so the mask is always applied",
          gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "reshape-to-heads-without-transpose",
          "the projections are reshaped straight to (B, heads, N, d_head) instead of "
          "(B, N, heads, d_head) followed by transpose(1, 2), which mixes tokens and heads",
          gqa_view_without_transpose),
    Entry("grouped_query_attention", "right", "sdpa-enable-gqa", None, gqa_right_sdpa),
    Entry("grouped_query_attention", "right", "per-head-float64", None,
          gqa_right_per_head_float64),

    Entry("kv_cache_bytes", "wrong", "no-factor-two",
          "it counts one cache tensor instead of two: the factor 2 for keys AND values is "
          "missing",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "kibibytes",
          "it divides by 1024 and returns KiB (rounded down) instead of bytes",
          kv_bytes_kib),
    Entry("kv_cache_bytes", "wrong", "bits-over-eight-float",
          "it counts bits and divides by 8 with `/`, so it returns a float instead of a plain "
          "int",
          kv_bytes_bits_over_eight),
    Entry("kv_cache_bytes", "wrong", "ignores-batch",
          "batch_size never enters the product, so the result is the cache of one sequence "
          "whatever the batch",
          kv_bytes_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "caches-queries-too",
          "it counts three tensors (q, k and v) per token, but only keys and values are "
          "cached: the queries are used once",
          kv_bytes_caches_queries),
    Entry("kv_cache_bytes", "wrong", "fixed-fp16",
          "it hard-codes 2 bytes per element (fp16) and ignores bytes_per_element",
          kv_bytes_fixed_fp16),
    Entry("kv_cache_bytes", "right", "per-token-dict", None, kv_bytes_right_per_token),
    Entry("kv_cache_bytes", "right", "math-prod", None, kv_bytes_right_prod),

    Entry("decode_with_cache", "wrong", "reprojects-prefix",
          "every step projects the whole prefix x[:, :t+1] with w_k and w_v again instead of "
          "only the new token: the values are right but the projection work is quadratic in N "
          "(there is no cache)",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attend-before-append",
          "the new token's key and value are written into the cache after the attention step, "
          "so each token attends only to the earlier ones and never to itself (the first "
          "output is all zeros)",
          decode_attend_before_append),
    Entry("decode_with_cache", "wrong", "cache-overwritten",
          "the cache is replaced by the new token's key and value at every step instead of "
          "appended to, so each token attends only to itself",
          decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "top-left-mask-on-one-query",
          "it adds a top-left causal mask tril(ones(1, t+1)) to the single new query, which "
          "allows only key 0, although the new token may attend the whole cache",
          decode_top_left_mask),
    Entry("decode_with_cache", "wrong", "scale-by-cache-length",
          "the scores are divided by sqrt(k.shape[-2]), the number of cached tokens, instead "
          "of sqrt(k.shape[-1]) = sqrt(d_head)",
          decode_scale_by_cache_length),
    Entry("decode_with_cache", "wrong", "cat-on-batch-axis",
          "the per-step outputs are concatenated along dim=0 (the batch axis) instead of "
          "dim=1, so the result is (N*B, 1, d_model) instead of (B, N, d_model)",
          decode_cat_batch_axis),
    Entry("decode_with_cache", "right", "prealloc-sdpa", None, decode_right_sdpa_prealloc),
    Entry("decode_with_cache", "right", "grouped-einsum-float64", None,
          decode_right_grouped_einsum),
]
