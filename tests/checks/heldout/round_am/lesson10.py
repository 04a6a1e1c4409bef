"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ================================================================== mla_kv_cache_bytes -- wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # a key and a value
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element * 8
    return bits / 8


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    elements = num_layers * kv_lora_rank * seq_len * batch_size
    return elements * bytes_per_element


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token_all_layers = num_layers * kv_lora_rank + rope_head_dim
    return per_token_all_layers * seq_len * batch_size * bytes_per_element


def mla_bytes_hardcoded_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    numbers = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return numbers * 2  # bf16


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_layer = (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element
    return num_layers * per_layer


# ================================================================== mla_kv_cache_bytes -- right
def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mla_bytes_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return int(math.prod([num_layers, seq_len, batch_size, bytes_per_element])
               * sum((kv_lora_rank, rope_head_dim)))


# ======================================================================= mla_attention -- wrong
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v.to(ct)
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_merge_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    latent = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).permute(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uv)
    f = torch.promote_types(x.dtype, torch.float32)
    scores = q.to(f) @ k.to(f).transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        scores = scores + torch.triu(torch.full((n, n), -math.inf, dtype=f), diagonal=1)
    att = scores.softmax(dim=-1)
    ctx = (att @ v.to(f)).to(x.dtype)  # (b, H, n, d_head)
    return ctx.reshape(b, n, width) @ w_o


def mla_mask_convention_flipped(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    f32 = torch.promote_types(x.dtype, torch.float32)

    def split(t):
        return t.view(B, N, num_heads, dh).transpose(1, 2).to(f32)

    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    mask = None
    if causal:
        mask = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)  # future keys
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ctx = torch.nan_to_num(ctx)
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_always_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    f32 = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).to(f32)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(f32)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2).to(f32)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(batch, n, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uk).reshape(batch, n, num_heads, d_head).transpose(1, 2).to(ct)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(batch, n, -1).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    ct = torch.promote_types(x.dtype, torch.float32)
    c = (x @ w_dkv).to(ct)
    q = (x.to(ct) @ w_q.to(ct)).reshape(B, N, H, dh).transpose(1, 2)
    k = (c @ w_uk.to(ct)).reshape(B, N, H, dh).transpose(1, 2)
    v = (c @ w_uv.to(ct)).reshape(B, N, H, dh).transpose(1, 2)
    s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.arange(N)[None, :] > torch.arange(N)[:, None], -math.inf)
    p = torch.softmax(s, dim=2)
    ctx = torch.einsum("bhij,bhjd->bhid", p, v)
    return ctx.transpose(1, 2).reshape(B, N, H * dh).to(x.dtype) @ w_o


# ======================================================================= mla_attention -- right
def mla_head_loop_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    c = xd @ w_dkv.double()
    width = w_q.shape[1]
    dh = width // num_heads
    n = x.shape[1]
    out = torch.zeros(x.shape, dtype=torch.float64)
    allowed = torch.tril(torch.ones(n, n, dtype=torch.bool)) if causal else \
        torch.ones(n, n, dtype=torch.bool)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_h = xd @ w_q[:, cols].double()
        k_h = c @ w_uk[:, cols].double()
        v_h = c @ w_uv[:, cols].double()
        s = q_h @ k_h.transpose(1, 2) / math.sqrt(dh)
        s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
        p = torch.softmax(s, dim=-1)
        out = out + (p @ v_h) @ w_o[cols, :].double()  # each head's share of the output
    return out.to(x.dtype)


def mla_sdpa_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    c = torch.einsum("bnm,mc->bnc", x.double(), w_dkv.double())
    q = torch.einsum("bnm,mw->bnw", x.double(), w_q.double()).unflatten(-1, (H, dh))
    k = torch.einsum("bnc,cw->bnw", c, w_uk.double()).unflatten(-1, (H, dh))
    v = torch.einsum("bnc,cw->bnw", c, w_uv.double()).unflatten(-1, (H, dh))
    ctx = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), is_causal=bool(causal))
    merged = ctx.transpose(1, 2).flatten(-2)
    return torch.einsum("bnw,wm->bnm", merged, w_o.double()).to(x.dtype)


# ================================================================== absorb_mla_weights -- wrong
def absorb_reshape_no_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(num_heads, d_model, dh)
    uk_h = w_uk.reshape(num_heads, d_c, dh)
    uv_h = w_uv.reshape(num_heads, d_c, dh)
    o_h = w_o.reshape(num_heads, dh, d_model)
    return q_h @ uk_h.transpose(1, 2), uv_h @ o_h


def absorb_interleaved_w_o(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    d_model = w_o.shape[1]
    o_split = w_o.reshape(d_head, num_heads, d_model)  # row j -> head j % H
    qs, os_ = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        qs.append(w_q[:, cols] @ w_uk[:, cols].T)
        os_.append(w_uv[:, cols] @ o_split[:, h, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat = torch.einsum("mhd,chd->hmc", w_q.unflatten(1, (num_heads, dh)),
                         w_uk.unflatten(1, (num_heads, dh))) / math.sqrt(dh)
    o_lat = torch.einsum("chd,hdm->hcm", w_uv.unflatten(1, (num_heads, dh)),
                         w_o.unflatten(0, (num_heads, dh)))
    return q_lat, o_lat


def absorb_d_head_from_latent(w_uk, w_uv, w_q, w_o, num_heads):
    d_c = w_uk.shape[0]
    d_head = d_c // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        lo, hi = h * d_head, (h + 1) * d_head
        q_lat.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].transpose(0, 1))
        o_lat.append(w_uv[:, lo:hi] @ w_o[lo:hi, :])
    return torch.stack(q_lat, dim=0), torch.stack(o_lat, dim=0)


def absorb_stack_dim1(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_list, wo_list = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        wq_list.append(w_q[:, s] @ w_uk[:, s].T)
        wo_list.append(w_uv[:, s] @ w_o[s])
    return torch.stack(wq_list, dim=1), torch.stack(wo_list, dim=1)


def absorb_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(-2, -1), wuk @ wo


# ================================================================== absorb_mla_weights -- right
def absorb_numpy_loop(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    uk, uv = w_uk.double().numpy(), w_uv.double().numpy()
    wq, wo = w_q.double().numpy(), w_o.double().numpy()
    q_lat = np.stack([wq[:, h * dh:(h + 1) * dh] @ uk[:, h * dh:(h + 1) * dh].T
                      for h in range(num_heads)])
    o_lat = np.stack([uv[:, h * dh:(h + 1) * dh] @ wo[h * dh:(h + 1) * dh, :]
                      for h in range(num_heads)])
    return (torch.from_numpy(q_lat).to(w_q.dtype), torch.from_numpy(o_lat).to(w_q.dtype))


def absorb_block_diagonal(w_uk, w_uv, w_q, w_o, num_heads):
    """One big product with a head mask instead of a per-head split."""
    width = w_q.shape[1]
    dh = width // num_heads
    head_of = torch.arange(width) // dh  # (width,)
    q_lat = torch.stack([(w_q.double() * (head_of == h)) @ w_uk.double().T
                         for h in range(num_heads)])
    o_lat = torch.stack([w_uv.double() @ (w_o.double() * (head_of == h)[:, None])
                         for h in range(num_heads)])
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor-2-k-and-v",
          "counts the latent and RoPE key twice, as if a key and a value were cached (the "
          "MHA factor 2), though MLA reads keys and values from the same latent",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "float-from-bits",
          "counts bits and divides by 8 with /, so it returns a float instead of the plain "
          "int the contract asks for",
          mla_bytes_via_bits),
    Entry("mla_kv_cache_bytes", "wrong", "forgets-rope-key",
          "caches only the kv_lora_rank latent and leaves out the shared RoPE key of "
          "rope_head_dim values per token and layer",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "precedence-rope-once",
          "writes num_layers * kv_lora_rank + rope_head_dim without parentheses, so the RoPE "
          "key is counted once instead of once per layer",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "hardcoded-bf16",
          "multiplies by 2 bytes (bf16) instead of bytes_per_element",
          mla_bytes_hardcoded_bf16),
    Entry("mla_kv_cache_bytes", "wrong", "ignores-batch",
          "leaves batch_size out: the cache of one sequence, not of the batch",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "right", "layer-loop", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "math-prod", None, mla_bytes_prod),

    Entry("mla_attention", "wrong", "scale-by-latent-width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry("mla_attention", "wrong", "merge-without-transpose",
          "merges the heads with a plain reshape of (B, H, N, d_head) to (B, N, H*d_head), "
          "without moving the head axis back next to d_head first",
          mla_merge_without_transpose),
    Entry("mla_attention", "wrong", "mask-convention-flipped",
          "builds the causal mask True on the future keys and passes it to SDPA, where True "
          "means may attend, so each query sees only the keys after it",
          mla_mask_convention_flipped),
    Entry("mla_attention", "wrong", "always-causal",
          "hard-codes is_causal=True and ignores the causal argument, so causal=False still "
          "masks the future",
          mla_always_causal),
    Entry("mla_attention", "wrong", "values-from-w-uk",
          "makes the values with c @ w_uk (the key up-projection reused) instead of c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "softmax-over-queries",
          "takes the softmax over dim=2, the query axis of (B, H, N, N), instead of the last "
          "(key) axis",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "head-loop-float64", None, mla_head_loop_f64),
    Entry("mla_attention", "right", "einsum-sdpa-float64", None, mla_sdpa_f64),

    Entry("absorb_mla_weights", "wrong", "reshape-without-permute",
          "splits w_q, w_uk and w_uv with reshape(num_heads, d_in, d_head) directly, which "
          "does not select head h's columns h*d_head:(h+1)*d_head",
          absorb_reshape_no_permute),
    Entry("absorb_mla_weights", "wrong", "w_o-rows-interleaved",
          "splits w_o's rows as reshape(d_head, H, d_model)[:, h], i.e. rows h, h+H, ... "
          "(interleaved) instead of the contiguous block h*d_head:(h+1)*d_head",
          absorb_interleaved_w_o),
    Entry("absorb_mla_weights", "wrong", "scale-folded-in",
          "divides w_q_latent by sqrt(d_head), folding the score scale into the weights the "
          "contract keeps unscaled",
          absorb_folds_scale),
    Entry("absorb_mla_weights", "wrong", "d-head-from-latent",
          "takes d_head = d_c // num_heads (w_uk.shape[0]) instead of w_q.shape[1] // "
          "num_heads, so it slices the wrong columns for each head",
          absorb_d_head_from_latent),
    Entry("absorb_mla_weights", "wrong", "stack-on-dim-1",
          "stacks the per-head matrices with torch.stack(..., dim=1), putting the head axis "
          "second ((d_model, H, d_c)) instead of first",
          absorb_stack_dim1),
    Entry("absorb_mla_weights", "wrong", "w_uk-for-output",
          "builds w_o_latent from w_uk_h @ w_o_h, reusing the key up-projection where the "
          "value up-projection w_uv belongs",
          absorb_w_uk_for_output),
    Entry("absorb_mla_weights", "right", "numpy-loop-float64", None, absorb_numpy_loop),
    Entry("absorb_mla_weights", "right", "head-masked-full-products", None,
          absorb_block_diagonal),
]
