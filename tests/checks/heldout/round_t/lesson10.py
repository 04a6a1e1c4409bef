"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

EX_BYTES = "mla_kv_cache_bytes"
EX_MLA = "mla_attention"
EX_ABSORB = "absorb_mla_weights"


# ============================================================================ mla_kv_cache_bytes
def bytes_right_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    # math.prod over the factors (plain ints in, plain int out)
    return math.prod((num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element))


def bytes_right_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    # one layer at a time: the latents and the shared RoPE keys counted separately
    total = 0
    tokens = seq_len * batch_size
    for _layer in range(num_layers):
        total += tokens * kv_lora_rank * bytes_per_element  # latents c
        total += tokens * rope_head_dim * bytes_per_element  # shared rotated keys
    return total


def bytes_wrong_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element  # K and V
    return num_layers * per_token * seq_len * batch_size


def bytes_wrong_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def bytes_wrong_np_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def bytes_wrong_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def bytes_wrong_batch_ignored(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    per_layer = (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element
    return num_layers * per_layer


def bytes_wrong_rope_shared_across_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len,
                                          batch_size=1, bytes_per_element=2):
    values_per_token = num_layers * kv_lora_rank + rope_head_dim
    return values_per_token * seq_len * batch_size * bytes_per_element


# ============================================================================ mla_attention
def _heads(t, h):
    b, n, w = t.shape
    return t.view(b, n, h, w // h).transpose(1, 2)


def mla_right_absorbed_loop(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    # attention from the latents alone, head by head in float64 (the absorbed form)
    f = torch.float64
    xd = x.to(f)
    c = xd @ w_dkv.to(f)  # (B, N, d_c)
    width = w_q.shape[1]
    dh = width // num_heads
    n = x.shape[1]
    out = torch.zeros(x.shape, dtype=f, device=x.device)
    allowed = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q[:, cols].to(f) @ w_uk[:, cols].to(f).T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].to(f) @ w_o[cols, :].to(f)  # (d_c, d_model)
        s = (xd @ wq_lat) @ c.transpose(1, 2) / math.sqrt(dh)  # (B, N, N)
        if causal:
            s = s.masked_fill(~allowed, -math.inf)
        out += torch.softmax(s, dim=-1) @ c @ wo_lat
    return out.to(x.dtype)


def mla_right_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    # expand keys / values, fused SDPA (scale 1/sqrt(d_head) by default) in at least float32
    ct = torch.promote_types(x.dtype, torch.float32)
    xs = x.to(ct)
    latent = xs @ w_dkv.to(ct)
    q = _heads(xs @ w_q.to(ct), num_heads)
    k = _heads(latent @ w_uk.to(ct), num_heads)
    v = _heads(latent @ w_uv.to(ct), num_heads)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    b, h, n, dh = ctx.shape
    merged = ctx.transpose(1, 2).reshape(b, n, h * dh)
    return (merged @ w_o.to(ct)).to(x.dtype)


def _mla_template(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, *, scale_width=None,
                  mask_diag_out=False, split="ok", values_from=None, d_head_from_model=False,
                  softmax_dim=-1):
    ct = torch.promote_types(x.dtype, torch.float32)
    B, N, d_model = x.shape
    width = w_q.shape[1]
    d_head = d_model // num_heads if d_head_from_model else width // num_heads
    c = x @ w_dkv

    def split_heads(t):
        if split == "no_transpose":
            return t.reshape(B, num_heads, N, d_head)
        return t.reshape(B, N, num_heads, d_head).transpose(1, 2)

    q = split_heads(x @ w_q)
    k = split_heads(c @ w_uk)
    v = split_heads(c @ (values_from if values_from is not None else w_uv))
    s = (q @ k.transpose(-2, -1)).to(ct) / math.sqrt(scale_width or d_head)
    if causal:
        if mask_diag_out:
            blocked = torch.triu(torch.ones(N, N, dtype=torch.bool, device=x.device), diagonal=0)
        else:
            blocked = torch.triu(torch.ones(N, N, dtype=torch.bool, device=x.device), diagonal=1)
        s = s.masked_fill(blocked, -math.inf)
    p = torch.softmax(s, dim=softmax_dim)
    p = torch.nan_to_num(p, nan=0.0)
    ctx = (p @ v.to(ct)).to(x.dtype)
    merged = ctx.transpose(1, 2).reshape(B, N, num_heads * d_head)
    return merged @ w_o


def mla_wrong_scale_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla_template(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal,
                         scale_width=x.shape[-1])


def mla_wrong_mask_hides_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla_template(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, mask_diag_out=True)


def mla_wrong_reshape_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads,
                                        causal=True):
    return _mla_template(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal,
                         split="no_transpose")


def mla_wrong_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla_template(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, values_from=w_uk)


def mla_wrong_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla_template(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal,
                         d_head_from_model=True)


def mla_wrong_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla_template(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, softmax_dim=-2)


# ============================================================================ absorb_mla_weights
def absorb_right_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    # view the head axis out of the columns / rows and contract with einsum
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q3 = w_q.view(d_model, num_heads, dh)
    k3 = w_uk.view(d_c, num_heads, dh)
    v3 = w_uv.view(d_c, num_heads, dh)
    o3 = w_o.view(num_heads, dh, d_model)
    wq_lat = torch.einsum("mhe,che->hmc", q3, k3)
    wo_lat = torch.einsum("che,hem->hcm", v3, o3)
    return wq_lat, wo_lat


def absorb_right_head_loop(w_uk, w_uv, w_q, w_o, num_heads):
    # one head at a time in float64, stacked and cast back
    dh = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        lo, hi = h * dh, (h + 1) * dh
        qs.append(w_q[:, lo:hi].double() @ w_uk[:, lo:hi].double().t())
        os_.append(w_uv[:, lo:hi].double() @ w_o[lo:hi, :].double())
    return torch.stack(qs).to(w_q.dtype), torch.stack(os_).to(w_o.dtype)


def _absorb_loop(w_uk, w_uv, w_q, w_o, num_heads, *, dh=None, start=None, scale=False,
                 transpose_q=False, swap=False):
    dh = dh or w_q.shape[1] // num_heads
    start = start or (lambda h: h * dh)
    a_k, a_v = (w_uv, w_uk) if swap else (w_uk, w_uv)
    q_lat, o_lat = [], []
    for h in range(num_heads):
        cols = slice(start(h), start(h) + dh)
        wq_h, wk_h = w_q[:, cols], a_k[:, cols]
        m = wk_h @ wq_h.T if transpose_q else wq_h @ wk_h.T
        if scale:
            m = m / math.sqrt(dh)
        q_lat.append(m)
        o_lat.append(a_v[:, cols] @ w_o[cols, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_wrong_d_head_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    return _absorb_loop(w_uk, w_uv, w_q, w_o, num_heads, dh=w_q.shape[0] // num_heads)


def absorb_wrong_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    return _absorb_loop(w_uk, w_uv, w_q, w_o, num_heads, scale=True)


def absorb_wrong_transposed_product(w_uk, w_uv, w_q, w_o, num_heads):
    return _absorb_loop(w_uk, w_uv, w_q, w_o, num_heads, transpose_q=True)


def absorb_wrong_uk_uv_swapped(w_uk, w_uv, w_q, w_o, num_heads):
    return _absorb_loop(w_uk, w_uv, w_q, w_o, num_heads, swap=True)


def absorb_wrong_reshape_no_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(num_heads, d_model, dh)
    wk = w_uk.reshape(num_heads, d_c, dh)
    wv = w_uv.reshape(num_heads, d_c, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wk.transpose(-2, -1), wv @ wo


def absorb_wrong_slice_start_h(w_uk, w_uv, w_q, w_o, num_heads):
    return _absorb_loop(w_uk, w_uv, w_q, w_o, num_heads, start=lambda h: h)


ENTRIES = [
    Entry(EX_BYTES, "right", "math_prod", None, bytes_right_prod),
    Entry(EX_BYTES, "right", "layer_loop_two_parts", None, bytes_right_layer_loop),
    Entry(EX_BYTES, "wrong", "k_and_v_factor_two",
          "Carries lesson 06's factor 2 for K and V over to MLA: one latent per token serves "
          "as both, so the cache is counted twice.",
          bytes_wrong_k_and_v),
    Entry(EX_BYTES, "wrong", "rope_key_left_out",
          "Counts only the kv_lora_rank latent per token and layer and leaves out the shared "
          "RoPE key of rope_head_dim values.",
          bytes_wrong_no_rope),
    Entry(EX_BYTES, "wrong", "numpy_prod_int64",
          "Multiplies with np.prod, which returns a numpy int64, not the plain Python int the "
          "contract asks for.",
          bytes_wrong_np_prod),
    Entry(EX_BYTES, "wrong", "missing_parentheses",
          "Writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ... without parentheses "
          "around (kv_lora_rank + rope_head_dim), so only the RoPE part is multiplied by the "
          "tokens and bytes.",
          bytes_wrong_precedence),
    Entry(EX_BYTES, "wrong", "batch_size_ignored",
          "Never multiplies by batch_size: the cache of one sequence is returned for any batch.",
          bytes_wrong_batch_ignored),
    Entry(EX_BYTES, "wrong", "rope_key_shared_across_layers",
          "Treats the shared RoPE key as shared across layers too (num_layers * kv_lora_rank + "
          "rope_head_dim per token): it is shared by the heads, but every layer keeps its own.",
          bytes_wrong_rope_shared_across_layers),
    Entry(EX_MLA, "right", "absorbed_latent_loop_float64", None, mla_right_absorbed_loop),
    Entry(EX_MLA, "right", "sdpa_is_causal", None, mla_right_sdpa),
    Entry(EX_MLA, "wrong", "scale_by_d_model",
          "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).",
          mla_wrong_scale_d_model),
    Entry(EX_MLA, "wrong", "mask_hides_diagonal",
          "Blocks keys with triu(diagonal=0), which hides the diagonal too: a query may not see "
          "its own key (query 0 sees nothing and gets zeros).",
          mla_wrong_mask_hides_diagonal),
    Entry(EX_MLA, "wrong", "split_heads_reshape_only",
          "Splits heads with reshape(B, H, N, d_head) straight from (B, N, H * d_head), without "
          "reshape to (B, N, H, d_head) and transpose(1, 2): tokens and heads get scrambled.",
          mla_wrong_reshape_without_transpose),
    Entry(EX_MLA, "wrong", "values_from_w_uk",
          "Builds the values with c @ w_uk (the key up-projection) instead of c @ w_uv.",
          mla_wrong_values_from_w_uk),
    Entry(EX_MLA, "wrong", "d_head_from_d_model",
          "Takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model: wrong "
          "(a reshape error) when the heads' total width differs from d_model.",
          mla_wrong_d_head_from_d_model),
    Entry(EX_MLA, "wrong", "softmax_over_queries",
          "Applies the softmax along dim=-2 (over the queries) instead of dim=-1 (over the keys).",
          mla_wrong_softmax_over_queries),
    Entry(EX_ABSORB, "right", "einsum_views", None, absorb_right_einsum),
    Entry(EX_ABSORB, "right", "head_loop_float64", None, absorb_right_head_loop),
    Entry(EX_ABSORB, "wrong", "d_head_from_w_q_rows",
          "Computes d_head from w_q.shape[0] (d_model) instead of w_q.shape[1] (H * d_head), so "
          "the heads' column slices have the wrong width whenever the two differ.",
          absorb_wrong_d_head_from_rows),
    Entry(EX_ABSORB, "wrong", "scale_folded_in",
          "Folds 1/sqrt(d_head) into w_q_latent although the contract keeps the scale out (the "
          "scores divide by sqrt(d_head) afterwards), so the scale is applied twice.",
          absorb_wrong_scale_folded_in),
    Entry(EX_ABSORB, "wrong", "product_order_transposed",
          "Computes w_uk_h @ w_q_h.T instead of w_q_h @ w_uk_h.T: w_q_latent comes out "
          "transposed, (H, d_c, d_model).",
          absorb_wrong_transposed_product),
    Entry(EX_ABSORB, "wrong", "w_uk_w_uv_swapped",
          "Swaps the up-projections: pairs w_q with w_uv and w_o with w_uk.",
          absorb_wrong_uk_uv_swapped),
    Entry(EX_ABSORB, "wrong", "reshape_without_permute",
          "Reshapes w_q (d_model, H * d_head) straight to (H, d_model, d_head) (and w_uk, w_uv "
          "likewise) instead of to (d_model, H, d_head) and permuting: each 'head' gets "
          "scrambled rows and columns.",
          absorb_wrong_reshape_no_permute),
    Entry(EX_ABSORB, "wrong", "slice_starts_at_h",
          "Slices head h's columns as h : h + d_head instead of h * d_head : (h + 1) * d_head, "
          "so the heads overlap.",
          absorb_wrong_slice_start_h),
]
