"""Parameter counts of attention layers (lesson 05 answer key and the GQA/MQA variants).

Plain Python ints in and out. Whole-model counts live in :mod:`mhalib.accounting.models`.
"""

from __future__ import annotations

from mhalib.validate import boolean, divisible, positive_int


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
