"""Lesson 09 answer key: rotary position embeddings (RoPE), torch.

Pair ``i`` of a head of width ``d`` holds features ``i`` and ``i + d/2`` (the "rotate half"
layout of GPT-NeoX and Hugging Face Llama) and turns by ``positions[n] * base ** (-2 i / d)``
radians at position ``n``. Angles are computed in float64 (a position times a frequency keeps
its precision even at position 10^6) and the rotation runs in at least float32; the result
comes back in x's dtype.
"""

from __future__ import annotations

import numbers

import torch

from mhalib import validate


def rope_angles(positions: torch.Tensor, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Angles (N, head_dim // 2): ``angles[n, i] = positions[n] * base ** (-2 i / head_dim)``.

    positions: (N,) integer tensor. Returns float32 on positions' device. An odd head_dim
    raises ValueError: its last feature would have no partner to rotate with.
    """
    return _angles(positions, head_dim, base, torch.float32)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate each pair (i, i + d/2) of x's last axis by ``rope_angles(positions, d, base)``.

    x: (..., N, d), e.g. (B, H, N, d); positions: (N,). Returns the same shape, dtype and
    device as x:  y_i = x_i cos - x_{i+d/2} sin,  y_{i+d/2} = x_i sin + x_{i+d/2} cos.
    """
    validate.tensor("x", x)
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., N, head_dim), got x.shape={tuple(x.shape)}")
    n, head_dim = x.shape[-2], x.shape[-1]
    if positions.ndim != 1 or positions.shape[0] != n:
        raise ValueError(f"positions.shape={tuple(positions.shape)} must be (N,) with N={n} "
                         f"(x.shape={tuple(x.shape)})")
    compute = torch.promote_types(x.dtype, torch.float32)
    angles = _angles(positions.to(x.device), head_dim, base, compute)  # (N, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)  # (N, d/2) each
    half = head_dim // 2
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)  # (..., N, d/2) each
    y1 = x1 * cos - x2 * sin  # (..., N, d/2): the first feature of each pair
    y2 = x1 * sin + x2 * cos  # (..., N, d/2): its partner, d/2 further on
    return torch.cat([y1, y2], dim=-1).to(x.dtype)  # (..., N, d)


def _angles(positions, head_dim, base, dtype):
    """rope_angles computed in float64 and returned in ``dtype``."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a torch.Tensor of integer positions, got type "
                        f"{type(positions).__name__}")
    if positions.ndim != 1:
        raise ValueError(f"positions must have shape (N,), got positions.shape="
                         f"{tuple(positions.shape)}")
    head_dim = validate.positive_int("head_dim", head_dim)
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE rotates features in pairs, so "
                         "head_dim must be even")
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not base > 1:
        raise ValueError(f"base must be a number > 1, got base={base!r}")
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)  # (d/2,)
    inv_freq = float(base) ** (-2.0 * i / head_dim)  # (d/2,): radians per position
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # (N, d/2)
    return angles.to(dtype)
