"""Rotary position embeddings for the attention modules (the "rotate half" layout).

``apply_rotary(x, positions, base)`` turns feature pairs (i, i + d/2) of every head by
``positions[n] * base ** (-2 i / d)``, written the way Hugging Face Llama does it: a cos and a
sin table of width d (each angle twice) and ``rotate_half``. The modules call it on queries and
keys after the head split, before new keys enter the KV cache.
"""

from __future__ import annotations

import torch


def rotary_cos_sin(positions: torch.Tensor, head_dim: int, base: float, dtype: torch.dtype):
    """cos and sin tables (N, head_dim) for ``positions`` (N,), each angle repeated in both
    halves; computed in float64, returned in ``dtype``."""
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd: rotary embeddings need an even head_dim")
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64,
                                      device=positions.device) / head_dim)  # (d/2,)
    angles = torch.outer(positions.to(torch.float64), inv_freq)  # (N, d/2)
    table = torch.cat([angles, angles], dim=-1)  # (N, d)
    return table.cos().to(dtype), table.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the last axis split in two halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """x (..., N, d) rotated at ``positions`` (N,); same shape and dtype (computed in at least
    float32)."""
    compute = torch.promote_types(x.dtype, torch.float32)
    cos, sin = rotary_cos_sin(positions, x.shape[-1], base, compute)  # (N, d) each
    x_c = x.to(compute)
    return (x_c * cos + rotate_half(x_c) * sin).to(x.dtype)
