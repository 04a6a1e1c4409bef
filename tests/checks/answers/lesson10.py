"""Learner-style answers to lesson 10 (see answers/lesson01.py for the layout).

Written independently of the checker's mistake models (mhalib/checks/lesson10.py).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F


# -- mla_kv_cache_bytes --------------------------------------------------------------------------
def cache_right(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def cache_per_token(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    rope_key = rope_head_dim * bytes_per_element
    return (latent + rope_key) * num_layers * seq_len * batch_size


def cache_numpy_shapes(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    latents = np.prod((num_layers, batch_size, seq_len, kv_lora_rank), dtype=np.int64)
    rope_keys = np.prod((num_layers, batch_size, seq_len, rope_head_dim), dtype=np.int64)
    return int(latents + rope_keys) * bytes_per_element


def cache_latent_only(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def cache_times_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # "K and V", as in lesson 06
    return per_token * num_layers * seq_len * batch_size * bytes_per_element


def cache_latent_for_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    per_token = kv_lora_rank + kv_lora_rank + rope_head_dim  # a latent for K, one for V
    return per_token * num_layers * seq_len * batch_size * bytes_per_element


def cache_one_layer(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def cache_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def cache_elements(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size


def cache_always_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 2


# -- mla_attention -------------------------------------------------------------------------------
def _split(t, heads):
    b, n, width = t.shape
    return t.reshape(b, n, heads, width // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    out = F.scaled_dot_product_attention(_split(x @ w_q, num_heads), _split(c @ w_uk, num_heads),
                                         _split(c @ w_uv, num_heads), is_causal=causal)
    return _merge(out) @ w_o


def mla_einsum(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = (x @ w_dkv).double()
    q = (x @ w_q).double().view(b, n, num_heads, dh)
    k = (c @ w_uk.double()).view(b, n, num_heads, dh)
    v = (c @ w_uv.double()).view(b, n, num_heads, dh)
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    out = torch.einsum("bhij,bjhd->bihd", scores.softmax(-1), v).reshape(b, n, num_heads * dh)
    return out.to(x.dtype) @ w_o


def mla_head_loop(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    xf = x.float()
    c = xf @ w_dkv.float()
    out = 0
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = xf @ w_q.float()[:, cols]
        k = c @ w_uk.float()[:, cols]
        v = c @ w_uv.float()[:, cols]
        s = q @ k.transpose(1, 2) / dh ** 0.5
        if causal:
            s = s + torch.full((n, n), float("-inf")).triu(1)
        out = out + torch.softmax(s, -1) @ v @ w_o.float()[cols, :]  # this head's share of w_o
    return out.to(x.dtype)


def mla_as_mha(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """MLA is MHA whose key and value weights are the products w_dkv @ w_uk, w_dkv @ w_uv."""
    w_k, w_v = w_dkv @ w_uk, w_dkv @ w_uv
    q, k, v = (_split(x @ w, num_heads).float() for w in (w_q, w_k, w_v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(out).to(x.dtype) @ w_o


def _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, scale=None, strict=False,
            mask=True, softmax_dim=-1, out=True):
    c = x @ w_dkv
    q = _split(x @ w_q, num_heads).float()
    k = _split(c @ w_uk, num_heads).float()
    v = _split(c @ w_uv, num_heads).float()
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale
    n = x.shape[1]
    if causal and mask:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(-1 if strict else 0),
                          float("-inf"))
    merged = _merge(torch.softmax(s, softmax_dim).nan_to_num(0.0) @ v).to(x.dtype)
    return merged @ w_o if out else merged


def mla_scale_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal,
                   scale=1 / math.sqrt(w_dkv.shape[1]))


def mla_scale_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal,
                   scale=x.shape[-1] ** -0.5)


def mla_unscaled(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, scale=1.0)


def mla_strided(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    dh = w_q.shape[1] // num_heads

    def split(t):  # (B, N, dh * H): feature i of head h at column i * H + h
        return t.reshape(b, n, dh, num_heads).permute(0, 3, 1, 2)

    c = x @ w_dkv
    out = F.scaled_dot_product_attention(split(x @ w_q).float(), split(c @ w_uk).float(),
                                         split(c @ w_uv).float(), is_causal=causal)
    return out.permute(0, 2, 3, 1).reshape(b, n, dh * num_heads).to(x.dtype) @ w_o


def mla_reshape_heads(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    c = x @ w_dkv
    q, k, v = ((t).reshape(b, num_heads, n, width // num_heads).float()
               for t in (x @ w_q, c @ w_uk, c @ w_uv))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return out.to(x.dtype).reshape(b, n, width) @ w_o


def mla_forgot_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, mask=False)


def mla_always_masked(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, True)


def mla_strict_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, strict=True)


def mla_values_with_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uk, w_q, w_o, num_heads, causal)


def mla_swapped_up(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uv, w_uk, w_q, w_o, num_heads, causal)


def mla_softmax_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, softmax_dim=-2)


def mla_no_w_o(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _manual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, out=False)


def mla_numpy(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal).numpy()


# -- absorb_mla_weights --------------------------------------------------------------------------
def absorb_loop(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, cols] @ w_uk[:, cols].T)
        o_lat.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q = w_q.view(d_model, num_heads, dh)
    uk = w_uk.view(d_c, num_heads, dh)
    uv = w_uv.view(d_c, num_heads, dh)
    o = w_o.view(num_heads, dh, d_model)
    return torch.einsum("mhd,chd->hmc", q, uk), torch.einsum("chd,hdm->hcm", uv, o)


def absorb_bmm_float64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q = w_q.double().reshape(d_model, num_heads, dh).transpose(0, 1)  # (H, d_model, dh)
    uk = w_uk.double().reshape(d_c, num_heads, dh).transpose(0, 1)  # (H, d_c, dh)
    uv = w_uv.double().reshape(d_c, num_heads, dh).transpose(0, 1)
    o = w_o.double().reshape(num_heads, dh, d_model)
    q_lat = torch.bmm(q, uk.transpose(1, 2))
    o_lat = torch.bmm(uv, o)
    return q_lat.to(w_q.dtype), o_lat.to(w_q.dtype)


def _heads(w, num_heads, rows=False):
    dh = (w.shape[0] if rows else w.shape[1]) // num_heads
    if rows:
        return [w[h * dh:(h + 1) * dh, :] for h in range(num_heads)]
    return [w[:, h * dh:(h + 1) * dh] for h in range(num_heads)]


def absorb_no_transpose(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat = [q @ k for q, k in zip(_heads(w_q, num_heads), _heads(w_uk, num_heads))]
    o_lat = [v @ o for v, o in zip(_heads(w_uv, num_heads), _heads(w_o, num_heads, rows=True))]
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_q_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat = [k @ q.T for q, k in zip(_heads(w_q, num_heads), _heads(w_uk, num_heads))]
    o_lat = [v @ o for v, o in zip(_heads(w_uv, num_heads), _heads(w_o, num_heads, rows=True))]
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_o_wrong_order(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat = [q @ k.T for q, k in zip(_heads(w_q, num_heads), _heads(w_uk, num_heads))]
    o_lat = [o.T @ v.T for v, o in zip(_heads(w_uv, num_heads), _heads(w_o, num_heads, rows=True))]
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_swapped(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat, o_lat = absorb_loop(w_uk, w_uv, w_q, w_o, num_heads)
    return o_lat, q_lat


def absorb_strided(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat = [w_q[:, h::num_heads] @ w_uk[:, h::num_heads].T for h in range(num_heads)]
    o_lat = [w_uv[:, h::num_heads] @ w_o[h::num_heads, :] for h in range(num_heads)]
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_all_heads_at_once(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat = (w_q @ w_uk.T).expand(num_heads, -1, -1)
    o_lat = (w_uv @ w_o).expand(num_heads, -1, -1)
    return q_lat, o_lat


def absorb_scaled(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat, o_lat = absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads)
    return q_lat / math.sqrt(w_q.shape[1] // num_heads), o_lat


def absorb_heads_in_middle(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat, o_lat = absorb_loop(w_uk, w_uv, w_q, w_o, num_heads)
    return q_lat.transpose(0, 1), o_lat.transpose(0, 1)


def absorb_numpy(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat, o_lat = absorb_loop(w_uk, w_uv, w_q, w_o, num_heads)
    return q_lat.numpy(), o_lat.numpy()


# -- calling the answer key ----------------------------------------------------------------------
def cache_from_reference(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    from mhalib.reference import mla_kv_cache_bytes

    return mla_kv_cache_bytes(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size,
                              bytes_per_element)


def mla_from_reference(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    from mhalib.reference import mla_attention

    return mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal)


def mla_via_absorbed_reference(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    from mhalib.reference.mla import absorbed_mla_attention

    q_lat, o_lat = absorb_loop(w_uk, w_uv, w_q, w_o, num_heads)
    return absorbed_mla_attention(x, x @ w_dkv, q_lat, o_lat, w_q.shape[1] // num_heads, causal)


def absorb_from_reference(w_uk, w_uv, w_q, w_o, num_heads):
    from mhalib.reference import absorb_mla_weights

    return absorb_mla_weights(w_uk, w_uv, w_q, w_o, num_heads)


WRONG = {
    "mla_kv_cache_bytes": {
        "no_rope_key": cache_latent_only, "k_and_v_doubled": cache_times_two,
        "latent_doubled": cache_latent_for_k_and_v, "no_layers": cache_one_layer,
        "ignores_batch_size": cache_no_batch, "elements_not_bytes": cache_elements,
        "fixed_bytes_per_element": cache_always_bf16,
    },
    "mla_attention": {
        "scale_d_c": mla_scale_latent, "scale_d_model": mla_scale_d_model,
        "no_scale": mla_unscaled, "strided_heads": mla_strided,
        "split_without_transpose": mla_reshape_heads, "causal_ignored": mla_forgot_mask,
        "always_causal": mla_always_masked, "causal_excludes_self": mla_strict_mask,
        "values_from_w_uk": mla_values_with_w_uk, "swapped_up_projections": mla_swapped_up,
        "softmax_over_queries": mla_softmax_queries, "no_output_projection": mla_no_w_o,
    },
    "absorb_mla_weights": {
        "w_uk_not_transposed": absorb_no_transpose, "q_latent_transposed": absorb_q_transposed,
        "o_latent_transposed": absorb_o_wrong_order, "outputs_swapped": absorb_swapped,
        "strided_heads": absorb_strided, "cross_head_sum": absorb_all_heads_at_once,
        "scale_folded_in": absorb_scaled, "heads_not_first": absorb_heads_in_middle,
    },
}

RIGHT = {
    "mla_kv_cache_bytes": [cache_right, cache_per_token, cache_numpy_shapes],
    "mla_attention": [mla_sdpa, mla_einsum, mla_head_loop, mla_as_mha],
    "absorb_mla_weights": [absorb_loop, absorb_einsum, absorb_bmm_float64],
}

# answers that fail with an exception (or the wrong kind of output) on some case
BROKEN = {"mla_attention": [mla_numpy], "absorb_mla_weights": [absorb_numpy]}

ANSWER_KEY = {
    "mla_kv_cache_bytes": [cache_from_reference],
    "mla_attention": [mla_from_reference, mla_via_absorbed_reference],
    "absorb_mla_weights": [absorb_from_reference],
}
