"""Learner-style answers to lesson 06 (see answers/lesson01.py for the layout).

Written independently of the checker's mistake models (mhalib/checks/attention_variants.py).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F


# -- repeat_kv -----------------------------------------------------------------------------------
def repeat_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_along_sequence(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)


def repeat_along_features(x, n_rep):
    return torch.cat([x] * n_rep, dim=-1)


def repeat_along_batch(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=0)


def repeat_expand_only(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d)


def repeat_without_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_broadcast_later(x, n_rep):
    return x  # "broadcasting will take care of it"


def repeat_interleave(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)


def repeat_expand(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d).reshape(b, g * n_rep, n, d)


def repeat_index(x, n_rep):
    groups = torch.arange(x.shape[1] * n_rep) // n_rep
    return x[:, groups]


def repeat_stack_loop(x, n_rep):
    return torch.stack([x[:, h // n_rep] for h in range(x.shape[1] * n_rep)], dim=1)


def repeat_numpy(x, n_rep):
    return np.repeat(x.numpy(), n_rep, axis=1)


# -- grouped_query_attention ---------------------------------------------------------------------
def _split(t, heads):
    b, n, width = t.shape
    return t.reshape(b, n, heads, width // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    out = F.scaled_dot_product_attention(_split(x @ w_q, num_heads), _split(x @ w_k, num_kv_heads),
                                         _split(x @ w_v, num_kv_heads), is_causal=causal,
                                         enable_gqa=True)
    return _merge(out) @ w_o


def gqa_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).view(b, n, num_kv_heads, rep, dh)  # heads grouped: (group, member)
    k = (x @ w_k).view(b, n, num_kv_heads, dh)
    v = (x @ w_v).view(b, n, num_kv_heads, dh)
    scores = torch.einsum("bigrd,bjgd->bgrij", q.double(), k.double()) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
    weights = scores.softmax(-1)
    out = torch.einsum("bgrij,bjgd->bigrd", weights, v.double()).reshape(b, n, d)
    return (out.to(x.dtype)) @ w_o


def gqa_head_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    xf = x.float()
    outs = []
    for h in range(num_heads):
        g = h // rep
        q = xf @ w_q.float()[:, h * dh:(h + 1) * dh]
        k = xf @ w_k.float()[:, g * dh:(g + 1) * dh]
        v = xf @ w_v.float()[:, g * dh:(g + 1) * dh]
        s = q @ k.transpose(1, 2) / dh ** 0.5
        if causal:
            s = s + torch.full((n, n), float("-inf")).triu(1)
        outs.append(torch.softmax(s, -1) @ v)
    return (torch.cat(outs, dim=-1) @ w_o.float()).to(x.dtype)


def gqa_tiled(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _split(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    return _merge(F.scaled_dot_product_attention(q, k, v, is_causal=causal)) @ w_o


def _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, scale=None, mask=None, out=True):
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads).float()
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1).float()
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1).float()
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    merged = _merge(torch.softmax(s, -1).nan_to_num(0.0) @ v).to(x.dtype)
    return merged @ w_o if out else merged


def gqa_no_scale(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, scale=1.0, mask=mask)


def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                   scale=1 / math.sqrt(x.shape[-1]), mask=mask)


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                   scale=w_k.shape[-1] ** -0.5, mask=mask)


def gqa_forgot_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)


def gqa_always_masked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    return _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                   mask=torch.ones(n, n, dtype=torch.bool).tril())


def gqa_strict_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril(-1) if causal else None
    return _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, mask=mask)


def gqa_mask_one_ahead(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril(1) if causal else None
    return _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, mask=mask)


def gqa_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _manual(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, mask=mask, out=False)


def gqa_reshape_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d = x.shape
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(b, num_heads, n, dh)
    k = (x @ w_k).reshape(b, num_kv_heads, n, dh).repeat_interleave(rep, 1)
    v = (x @ w_v).reshape(b, num_kv_heads, n, dh).repeat_interleave(rep, 1)
    out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    return out.to(x.dtype).reshape(b, n, d) @ w_o


def gqa_values_reshaped_plainly(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """q and k split right; v by a plain reshape to (B, G, N, d_head)."""
    b, n, d = x.shape
    v = (x @ w_v).reshape(b, num_kv_heads, n, d // num_heads)
    out = F.scaled_dot_product_attention(_split(x @ w_q, num_heads), _split(x @ w_k, num_kv_heads),
                                         v, is_causal=causal, enable_gqa=True)
    return _merge(out) @ w_o


def gqa_values_as_keys(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    out = F.scaled_dot_product_attention(_split(x @ w_q, num_heads), _split(x @ w_v, num_kv_heads),
                                         _split(x @ w_k, num_kv_heads), is_causal=causal,
                                         enable_gqa=True)
    return _merge(out) @ w_o


def gqa_softmax_dim_minus_2(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads).float()
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1).float()
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1).float()
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return _merge((torch.softmax(s, dim=-2) @ v).to(x.dtype)) @ w_o


def gqa_merge_reshape(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d = x.shape
    out = F.scaled_dot_product_attention(_split(x @ w_q, num_heads), _split(x @ w_k, num_kv_heads),
                                         _split(x @ w_v, num_kv_heads), is_causal=causal,
                                         enable_gqa=True)
    return out.reshape(b, n, d) @ w_o


def gqa_with_weights(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(s, dim=-1).to(x.dtype)
    return _merge(weights @ v) @ w_o, weights


def gqa_keys_from_w_v(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return gqa_sdpa(x, w_q, w_v, w_v, w_o, num_heads, num_kv_heads, causal)


def gqa_group_zero(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads)[:, [0] * num_heads]
    v = _split(x @ w_v, num_kv_heads)[:, [0] * num_heads]
    return _merge(F.scaled_dot_product_attention(q, k, v, is_causal=causal)) @ w_o


# -- kv_cache_bytes ------------------------------------------------------------------------------
def cache_right(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def cache_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    per_token_per_layer = 2 * num_kv_heads * head_dim * bytes_per_element  # K and V
    return per_token_per_layer * num_layers * seq_len * batch_size


def cache_numpy(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    shape = (num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim)
    return int(np.prod(shape, dtype=np.int64)) * bytes_per_element


def cache_no_factor_2(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def cache_one_layer(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def cache_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def cache_elements(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size


def cache_always_bf16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2


def cache_one_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    per_layer = 2 * num_kv_heads * head_dim * bytes_per_element
    return per_layer * num_layers


def cache_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element / 1024 ** 3


def cache_bytes_from_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    bits = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return bits // 8


def cache_one_head(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return 2 * num_layers * head_dim * seq_len * batch_size * bytes_per_element


def cache_no_head_dim(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * bytes_per_element
    return per_token * seq_len * batch_size


def cache_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


# -- decode_with_cache ---------------------------------------------------------------------------
def decode_preallocated(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    dh = d // num_heads
    k_cache = x.new_zeros(b, num_kv_heads, n, dh)
    v_cache = x.new_zeros(b, num_kv_heads, n, dh)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _split(xt @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _split(xt @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _split(xt @ w_v, num_kv_heads)
        out = F.scaled_dot_product_attention(q, k_cache[:, :, :t + 1], v_cache[:, :, :t + 1],
                                             enable_gqa=True)
        outs.append(_merge(out) @ w_o)
    return torch.cat(outs, dim=1)


def decode_output_projection_after_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Each step projects its own token into q, k, v; every step's output goes through w_o at
    once after the loop (still each token once: the contract's linear projection work)."""
    b, n, d = x.shape
    dh = d // num_heads
    k_cache = x.new_zeros(b, num_kv_heads, 0, dh)
    v_cache = x.new_zeros(b, num_kv_heads, 0, dh)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        k_cache = torch.cat([k_cache, _split(xt @ w_k, num_kv_heads)], dim=2)
        v_cache = torch.cat([v_cache, _split(xt @ w_v, num_kv_heads)], dim=2)
        out = F.scaled_dot_product_attention(_split(xt @ w_q, num_heads), k_cache, v_cache,
                                             enable_gqa=True)
        outs.append(_merge(out))
    return torch.cat(outs, dim=1) @ w_o


def decode_fused_qkv_masked_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """One fused projection per token; attends over the whole preallocated cache with a mask."""
    b, n, d = x.shape
    dh = d // num_heads
    kv = w_k.shape[1]
    w_qkv = torch.cat([w_q, w_k, w_v], dim=1)
    k_cache = x.new_zeros(b, num_kv_heads, n, dh)
    v_cache = x.new_zeros(b, num_kv_heads, n, dh)
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(n):
        q, k, v = (x[:, t:t + 1] @ w_qkv).split([d, kv, kv], dim=-1)
        k_cache[:, :, t] = k.view(b, num_kv_heads, dh)
        v_cache[:, :, t] = v.view(b, num_kv_heads, dh)
        visible = torch.arange(n) <= t
        keys = k_cache.repeat_interleave(rep, 1).float()
        scores = _split(q, num_heads).float() @ keys.transpose(-1, -2)
        scores = scores.masked_fill(~visible, float("-inf")) / math.sqrt(dh)
        out = scores.softmax(-1) @ v_cache.repeat_interleave(rep, 1).float()
        outs.append(_merge(out.to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_project_first(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Projects all tokens once up front (a prefill), then attends token by token: the output
    is right, but step t uses tokens that do not exist yet when decoding."""
    q_all = _split(x @ w_q, num_heads)
    k_all = _split(x @ w_k, num_kv_heads)
    v_all = _split(x @ w_v, num_kv_heads)
    outs = []
    for t in range(x.shape[1]):
        out = F.scaled_dot_product_attention(q_all[:, :, t:t + 1], k_all[:, :, :t + 1],
                                             v_all[:, :, :t + 1], enable_gqa=True)
        outs.append(out)
    return _merge(torch.cat(outs, dim=2)) @ w_o


def decode_growing_cat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """The cache grows by one token per step with torch.cat; attention written out."""
    b, n, d = x.shape
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        k_new, v_new = _split(xt @ w_k, num_kv_heads), _split(xt @ w_v, num_kv_heads)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=2)
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=2)
        q = _split(xt @ w_q, num_heads).float()
        scores = q @ k_cache.repeat_interleave(rep, 1).float().transpose(-1, -2) / math.sqrt(dh)
        out = scores.softmax(-1) @ v_cache.repeat_interleave(rep, 1).float()
        outs.append(_merge(out.to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_single_causal_pass(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Never decodes: one causal pass gives the same output (and no extra FLOPs)."""
    return gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=True)


def decode_numpy_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Recomputes the whole prefix at every step, in numpy, where torch's counters see nothing."""
    xs, wq, wk, wv, wo = (t.detach().double().numpy() for t in (x, w_q, w_k, w_v, w_o))
    b, n, d = xs.shape
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    out = np.zeros((b, n, d))
    for t in range(n):
        prefix = xs[:, :t + 1]
        q = (prefix[:, -1] @ wq).reshape(b, num_heads, dh)
        k = (prefix @ wk).reshape(b, t + 1, num_kv_heads, dh).repeat(rep, axis=2)
        v = (prefix @ wv).reshape(b, t + 1, num_kv_heads, dh).repeat(rep, axis=2)
        scores = np.einsum("bhd,bjhd->bhj", q, k) / math.sqrt(dh)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        out[:, t] = np.einsum("bhj,bjhd->bhd", weights, v).reshape(b, d) @ wo
    return torch.from_numpy(out).to(x.dtype)


def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    outs = []
    for t in range(x.shape[1]):
        prefix = x[:, :t + 1]
        q = _split(prefix[:, -1:] @ w_q, num_heads)
        k = _split(prefix @ w_k, num_kv_heads)  # the whole prefix, again
        v = _split(prefix @ w_v, num_kv_heads)
        outs.append(_merge(F.scaled_dot_product_attention(q, k, v, enable_gqa=True)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_reruns_layer(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return torch.cat([gqa_sdpa(x[:, :t + 1], w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                               causal=True)[:, -1:] for t in range(x.shape[1])], dim=1)


def decode_top_left_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        ks.append(_split(xt @ w_k, num_kv_heads))
        vs.append(_split(xt @ w_v, num_kv_heads))
        out = F.scaled_dot_product_attention(_split(xt @ w_q, num_heads), torch.cat(ks, 2),
                                             torch.cat(vs, 2), is_causal=True, enable_gqa=True)
        outs.append(_merge(out) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_appended_late(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    ks, vs, outs = [], [], []
    for t in range(n):
        xt = x[:, t:t + 1]
        if ks:
            out = F.scaled_dot_product_attention(_split(xt @ w_q, num_heads), torch.cat(ks, 2),
                                                 torch.cat(vs, 2), enable_gqa=True)
            outs.append(_merge(out) @ w_o)
        else:
            outs.append(torch.zeros_like(xt))
        ks.append(_split(xt @ w_k, num_kv_heads))
        vs.append(_split(xt @ w_v, num_kv_heads))
    return torch.cat(outs, dim=1)


def decode_cache_replaced(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    outs = []
    k_cache = v_cache = None
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        k_cache = _split(xt @ w_k, num_kv_heads)  # assigned where it should grow
        v_cache = _split(xt @ w_v, num_kv_heads)
        out = F.scaled_dot_product_attention(_split(xt @ w_q, num_heads), k_cache, v_cache,
                                             enable_gqa=True)
        outs.append(_merge(out) @ w_o)
    return torch.cat(outs, dim=1)


def decode_scaled_by_keys_so_far(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """SDPA's scale= given the cache's length, k.shape[-2], for the head width."""
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        ks.append(_split(xt @ w_k, num_kv_heads))
        vs.append(_split(xt @ w_v, num_kv_heads))
        k, v = torch.cat(ks, 2), torch.cat(vs, 2)
        out = F.scaled_dot_product_attention(_split(xt @ w_q, num_heads), k, v, enable_gqa=True,
                                             scale=1 / math.sqrt(k.shape[-2]))
        outs.append(_merge(out) @ w_o)
    return torch.cat(outs, dim=1)


def decode_scaled_by_model_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Each step's scores divided by sqrt(d_model), the model's width, not the head's."""
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        ks.append(_split(xt @ w_k, num_kv_heads))
        vs.append(_split(xt @ w_v, num_kv_heads))
        out = F.scaled_dot_product_attention(_split(xt @ w_q, num_heads), torch.cat(ks, 2),
                                             torch.cat(vs, 2), enable_gqa=True,
                                             scale=x.shape[-1] ** -0.5)
        outs.append(_merge(out) @ w_o)
    return torch.cat(outs, dim=1)


def decode_prefilled_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    k_all, v_all = _split(x @ w_k, num_kv_heads), _split(x @ w_v, num_kv_heads)
    outs = []
    for t in range(x.shape[1]):
        q = _split(x[:, t:t + 1] @ w_q, num_heads)
        outs.append(_merge(F.scaled_dot_product_attention(q, k_all, v_all, enable_gqa=True)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_query_of_the_newest_token(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    k_cache = v_cache = None
    outs = []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        k_new, v_new = _split(xt @ w_k, num_kv_heads), _split(xt @ w_v, num_kv_heads)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=2)
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=2)
        q = _split(x[:, -1:] @ w_q, num_heads)  # the last token's query at every step
        out = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
        outs.append(_merge(out) @ w_o)
    return torch.cat(outs, dim=1)


# -- calling the answer key ----------------------------------------------------------------------
def repeat_from_reference(x, n_rep):
    from mhalib.reference import repeat_kv

    return repeat_kv(x, n_rep)


def gqa_from_reference(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    from mhalib.reference import grouped_query_attention

    return grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal)


def gqa_from_nn_attend(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    from mhalib.nn import attend

    return _merge(attend(_split(x @ w_q, num_heads), _split(x @ w_k, num_kv_heads),
                         _split(x @ w_v, num_kv_heads), causal=causal)) @ w_o


def cache_from_accounting(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    from mhalib.accounting.kv_cache import kv_cache_bytes_per_token

    return kv_cache_bytes_per_token(num_layers, num_kv_heads, head_dim,
                                    bytes_per_element) * seq_len * batch_size


def decode_from_reference(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    from mhalib.reference.gqa import decode_with_cache

    return decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)


def decode_via_reference_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    from mhalib.reference import grouped_query_attention

    return grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, True)


WRONG = {
    "repeat_kv": {"tiled_groups": repeat_tiled, "sequence_axis": repeat_along_sequence,
                  "feature_axis": repeat_along_features, "batch_axis": repeat_along_batch,
                  "not_flattened": repeat_expand_only, "flattened": repeat_without_dim,
                  "ignores_n_rep": repeat_broadcast_later},
    "grouped_query_attention": {
        "tiled_groups": gqa_tiled, "no_scale": gqa_no_scale, "scale_d_model": gqa_scale_d_model,
        "scale_kv_width": gqa_scale_kv_width,
        "causal_ignored": gqa_forgot_mask, "always_causal": gqa_always_masked,
        "causal_excludes_self": gqa_strict_mask, "causal_sees_next": gqa_mask_one_ahead,
        "split_without_transpose": gqa_reshape_heads,
        "no_output_projection": gqa_no_output_projection,
        "swapped_k_v": gqa_values_as_keys, "softmax_over_queries": gqa_softmax_dim_minus_2,
        "merge_without_transpose": gqa_merge_reshape, "returns_weights_too": gqa_with_weights,
        "projection_weight_reused": gqa_keys_from_w_v, "first_group_only": gqa_group_zero,
        "kv_split_without_transpose": gqa_values_reshaped_plainly,
    },
    "kv_cache_bytes": {
        "no_factor_2": cache_no_factor_2, "no_layers": cache_one_layer,
        "ignores_batch_size": cache_no_batch, "elements_not_bytes": cache_elements,
        "fixed_bytes_per_element": cache_always_bf16, "bits_not_bytes": cache_bits,
        "per_token": cache_one_token, "wrong_unit": cache_in_gib,
        "divided_by_8": cache_bytes_from_bits, "no_kv_heads": cache_one_head,
        "no_head_dim": cache_no_head_dim,
    },
    "decode_with_cache": {
        "recomputes_prefix": decode_reprojects_prefix,
        "top_left_causal": decode_top_left_causal,
        "excludes_current_token": decode_cache_appended_late,
        "replaced_cache": decode_cache_replaced,
        "not_causal": decode_prefilled_cache,
        "projects_all_tokens_at_once": decode_single_causal_pass,
        "leaves_torch": decode_numpy_prefix,
        "reads_a_later_token": decode_query_of_the_newest_token,
        "scale_by_cache_length": decode_scaled_by_keys_so_far,
        "scale_d_model": decode_scaled_by_model_width,
    },
}

# more wrong answers, each named after the mistake it must be diagnosed as
ALSO_WRONG = {
    "decode_with_cache": {"projects_all_tokens_at_once": decode_project_first},
}

RIGHT = {
    "repeat_kv": [repeat_interleave, repeat_expand, repeat_index, repeat_stack_loop],
    "grouped_query_attention": [gqa_sdpa, gqa_einsum, gqa_head_loop],
    "kv_cache_bytes": [cache_right, cache_per_token, cache_numpy],
    "decode_with_cache": [decode_preallocated, decode_fused_qkv_masked_cache,
                          decode_growing_cat, decode_output_projection_after_loop],
}

# answers that fail with an exception (or the wrong kind of output) on some case
BROKEN = {"repeat_kv": [repeat_numpy]}

ANSWER_KEY = {
    "repeat_kv": [repeat_from_reference],
    "grouped_query_attention": [gqa_from_reference, gqa_from_nn_attend],
    "kv_cache_bytes": [cache_from_accounting],
    "decode_with_cache": [decode_from_reference, decode_via_reference_gqa],
}


def gqa_unchecked_group_map(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """Right when num_kv_heads divides num_heads; otherwise head h silently reads group
    h * num_kv_heads // num_heads."""
    b, n, d = x.shape
    dh = d // num_heads
    outs = []
    for h in range(num_heads):
        g = h * num_kv_heads // num_heads
        q = x.double() @ w_q.double()[:, h * dh:(h + 1) * dh]
        k = x.double() @ w_k.double()[:, g * dh:(g + 1) * dh]
        v = x.double() @ w_v.double()[:, g * dh:(g + 1) * dh]
        s = q @ k.transpose(1, 2) / dh ** 0.5
        if causal:
            s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
        outs.append(s.softmax(-1) @ v)
    return (torch.cat(outs, dim=-1) @ w_o.double()).to(x.dtype)


def gqa_sdpa_unchecked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """Right when num_kv_heads divides num_heads; otherwise torch's own error."""
    out = F.scaled_dot_product_attention(_split(x @ w_q, num_heads), _split(x @ w_k, num_kv_heads),
                                         _split(x @ w_v, num_kv_heads), is_causal=causal,
                                         enable_gqa=True)
    return _merge(out) @ w_o


WRONG["grouped_query_attention"]["no_argument_check"] = gqa_unchecked_group_map
WRONG["grouped_query_attention"]["refusal_without_values"] = gqa_sdpa_unchecked


def gqa_sdpa_asserted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """Checks the grouping with an assert (an AssertionError, not the contract's ValueError)."""
    assert num_heads % num_kv_heads == 0
    return gqa_sdpa_unchecked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal)


WRONG["grouped_query_attention"]["refusal_by_assert"] = gqa_sdpa_asserted
