"""Counting FLOPs of real forward passes with ``torch.utils.flop_counter.FlopCounterMode``.

FlopCounterMode only knows the ops it has formulas for. In torch 2.13 two attention ops on
the CPU have none, so they silently count 0:

- ``aten._scaled_dot_product_flash_attention_for_cpu`` (what SDPA runs on a CPU), and
- ``aten._native_multi_head_attention`` (the fused fast path of ``nn.MultiheadAttention``
  in eval mode, which hides even the projections from the counter).

:func:`count_flops` registers formulas for both through ``custom_mapping``. Like torch's
own SDPA formulas they count dense attention (a causal call is not halved).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils.flop_counter import FlopCounterMode

aten = torch.ops.aten


def sdpa_cpu_flash_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    """q @ k^T and weights @ v: 2 B H N_q N_k d + 2 B H N_q N_k d_v (dense)."""
    batch, heads, n_q, d = query_shape
    n_k, d_v = key_shape[-2], value_shape[-1]
    return 2 * batch * heads * n_q * n_k * d + 2 * batch * heads * n_q * n_k * d_v


def native_mha_flop(
    query_shape, key_shape, value_shape, embed_dim, num_head, *args, out_shape=None, **kwargs
):
    """The fused ``nn.MultiheadAttention`` fast path (batch first, (B, N, E) inputs):
    q, k, v projections, scores, weighted sum and output projection."""
    batch, n_q, e = query_shape
    n_k = key_shape[1]
    projections = 2 * batch * n_q * e * e + 2 * 2 * batch * n_k * e * e  # q; k and v
    attention = 4 * batch * n_q * n_k * e  # scores + weighted sum over all heads
    output = 2 * batch * n_q * e * e
    return projections + attention + output


def custom_flop_formulas() -> dict:
    """The ``custom_mapping`` for FlopCounterMode that fills the two CPU gaps."""
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: sdpa_cpu_flash_flop,
        aten._native_multi_head_attention: native_mha_flop,
    }


@dataclass
class FlopCount:
    """Result of :func:`count_flops`: total FLOPs, FLOPs per aten op, and fn's return value."""

    total: int
    by_op: dict[str, int] = field(default_factory=dict)
    result: object = None


def count_flops(fn, *args, use_custom_formulas: bool = True, **kwargs) -> FlopCount:
    """Run ``fn(*args, **kwargs)`` under FlopCounterMode and return what it counted.

    ``use_custom_formulas=False`` shows the raw counter (with its zeros on CPU attention).
    """
    mapping = custom_flop_formulas() if use_custom_formulas else {}
    counter = FlopCounterMode(display=False, custom_mapping=mapping)
    with counter:
        result = fn(*args, **kwargs)
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return FlopCount(total=int(counter.get_total_flops()), by_op=by_op, result=result)
