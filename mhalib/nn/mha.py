"""Multi-head attention: grouped-query attention with one K/V head per query head.

Loads the weights of a ``torch.nn.MultiheadAttention`` (same ``in_proj_weight`` layout)
and then returns the same output. Two differences in convention, both deliberate:
inputs are always batch first (B, N, d_model), and masks are boolean with True = may
attend (the course and SDPA convention; ``nn.MultiheadAttention`` uses True = blocked).
"""

from __future__ import annotations

import torch
from torch import nn

from mhalib import validate
from mhalib.nn.gqa import GroupedQueryAttention


class MultiHeadAttention(GroupedQueryAttention):
    """Standard MHA: ``num_heads`` heads of size ``d_model // num_heads``, bias by default;
    rotary position embeddings with ``rope_base`` (off by default).

    (B, N_q, d_model) -> (B, N_q, d_model); see :class:`GroupedQueryAttention.forward`
    for masks, causal attention and the KV cache.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        bias: bool = True,
        device=None,
        dtype: torch.dtype | None = None,
        rope_base: float | None = None,
    ) -> None:
        super().__init__(d_model, num_heads, num_heads, bias=bias, device=device, dtype=dtype,
                         rope_base=rope_base)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """A new layer with the weights (and device and dtype) of ``module``."""
        _check_torch_module(module)
        weight = module.in_proj_weight
        layer = cls(
            module.embed_dim,
            module.num_heads,
            bias=module.in_proj_bias is not None,
            device=weight.device,
            dtype=weight.dtype,
        )
        layer.load_torch_weights(module)
        return layer

    @torch.no_grad()
    def load_torch_weights(self, module: nn.MultiheadAttention) -> None:
        """Copy ``module``'s projections into this layer (shapes must match)."""
        _check_torch_module(module)
        if module.embed_dim != self.d_model or module.num_heads != self.num_heads:
            raise ValueError(
                f"module has embed_dim={module.embed_dim}, num_heads={module.num_heads}; "
                f"this layer has d_model={self.d_model}, num_heads={self.num_heads}"
            )
        has_bias = module.in_proj_bias is not None
        if has_bias != (self.qkv_proj.bias is not None):
            raise ValueError(f"module has bias={has_bias} but this layer has bias={not has_bias}")
        self.qkv_proj.weight.copy_(module.in_proj_weight)  # (3 d_model, d_model)
        self.out_proj.weight.copy_(module.out_proj.weight)  # (d_model, d_model)
        if has_bias:
            self.qkv_proj.bias.copy_(module.in_proj_bias)  # (3 d_model,)
            self.out_proj.bias.copy_(module.out_proj.bias)  # (d_model,)


def _check_torch_module(module) -> None:
    """Reject the ``nn.MultiheadAttention`` options this layer does not model."""
    if not isinstance(module, nn.MultiheadAttention):
        raise TypeError(
            f"module must be a torch.nn.MultiheadAttention, got type {type(module).__name__}"
        )
    if not module._qkv_same_embed_dim:
        raise ValueError(
            f"module has kdim={module.kdim}, vdim={module.vdim}, embed_dim={module.embed_dim}; "
            "only kdim == vdim == embed_dim is supported"
        )
    if module.bias_k is not None or module.add_zero_attn:
        raise ValueError(
            "module uses add_bias_kv=True or add_zero_attn=True, which this layer does not model"
        )
    validate.positive_int("module.num_heads", module.num_heads)
