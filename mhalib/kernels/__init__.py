"""Attention kernels: a Triton flash-attention forward pass and its PyTorch tiled fallback.

``flash_attention(q, k, v, causal=False, scale=None)`` picks the Triton kernel for CUDA
half-precision tensors and the tiled PyTorch path otherwise. triton is never imported
unless the kernel is used.
"""

from mhalib.kernels.dispatch import (
    backend_for,
    choose_backend,
    flash_attention,
    triton_installed,
)
from mhalib.kernels.tiled import tiled_attention

__all__ = [
    "backend_for",
    "choose_backend",
    "flash_attention",
    "tiled_attention",
    "triton_installed",
]
