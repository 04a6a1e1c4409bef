"""Parameter counts of attention layers (lesson 05 answer key and the GQA/MQA variants).

Plain Python ints in and out. Whole-model counts live in :mod:`mhalib.accounting.models`.
"""

from __future__ import annotations

from mhalib.validate import boolean, divisible, non_negative_int, positive_int


def mha_param_count(d_model: int, bias: bool = True) -> int:
    """Parameters of one multi-head attention layer: W_q, W_k, W_v, W_o (4 d^2), plus 4 d
    biases when ``bias``. Independent of the number of heads."""
    d = positive_int("d_model", d_model)
    boolean("bias", bias)
    return 4 * d * d + (4 * d if bias else 0)


def gqa_param_count(d_model: int, num_heads: int, num_kv_heads: int, bias: bool = False) -> int:
    """Parameters of a grouped-query attention layer.

    W_q and W_o are (d, d); W_k and W_v are (d, num_kv_heads * d_head). With
    num_kv_heads == num_heads this equals :func:`mha_param_count`.
    """
    d = positive_int("d_model", d_model)
    heads = positive_int("num_heads", num_heads)
    kv_heads = positive_int("num_kv_heads", num_kv_heads)
    boolean("bias", bias)
    divisible("d_model", d, "num_heads", heads)
    divisible("num_heads", heads, "num_kv_heads", kv_heads)
    kv_width = kv_heads * (d // heads)
    weights = 2 * d * d + 2 * d * kv_width
    biases = 2 * d + 2 * kv_width
    return weights + (biases if bias else 0)


def mqa_param_count(d_model: int, num_heads: int, bias: bool = False) -> int:
    """Multi-query attention: grouped-query attention with a single K/V head."""
    return gqa_param_count(d_model, num_heads, 1, bias=bias)


def mla_param_count(
    d_model: int,
    num_heads: int,
    kv_lora_rank: int,
    qk_nope_head_dim: int,
    qk_rope_head_dim: int,
    v_head_dim: int,
    q_lora_rank: int = 0,
) -> int:
    """Parameters of one multi-head latent attention layer as DeepSeek-V2/V3 build it.

    Queries: ``W_q (d_model, H * (nope + rope))``, or with ``q_lora_rank`` a down-projection
    ``(d_model, q_lora_rank)``, an RMSNorm of the query latent and an up-projection
    ``(q_lora_rank, H * (nope + rope))``. Keys and values: ``W_dkv (d_model, kv_lora_rank +
    rope)`` (the latent and the shared RoPE key in one matrix), an RMSNorm of the latent, and
    ``W_ukv (kv_lora_rank, H * (nope + v))``. Output: ``W_o (H * v, d_model)``. No biases.
    """
    d = positive_int("d_model", d_model)
    heads = positive_int("num_heads", num_heads)
    kv_rank = positive_int("kv_lora_rank", kv_lora_rank)
    nope = positive_int("qk_nope_head_dim", qk_nope_head_dim)
    rope = non_negative_int("qk_rope_head_dim", qk_rope_head_dim)
    v = positive_int("v_head_dim", v_head_dim)
    q_rank = non_negative_int("q_lora_rank", q_lora_rank)
    qk_width = heads * (nope + rope)
    queries = d * q_rank + q_rank + q_rank * qk_width if q_rank else d * qk_width
    keys_values = d * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
    return queries + keys_values + heads * v * d
