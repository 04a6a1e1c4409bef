"""``flash_attention``: the Triton kernel on CUDA, the tiled PyTorch path everywhere else.

triton is imported only when a CUDA tensor asks for it, so ``import mhalib.kernels`` works
on machines without triton (macOS, CPU-only installs).
"""

from __future__ import annotations

import importlib.util

import torch

from mhalib.kernels.tiled import check_qkv, tiled_attention

TRITON_DTYPES = (torch.float16, torch.bfloat16)
TRITON_HEAD_DIMS = (16, 32, 64, 128)


def triton_installed() -> bool:
    """True if the ``triton`` package can be imported."""
    return importlib.util.find_spec("triton") is not None


def choose_backend(q: torch.Tensor) -> tuple[str, str]:
    """(``"triton"`` or ``"tiled"``, the reason) for a query tensor (B, H, N, d)."""
    return backend_for(q.device, q.dtype, q.shape[-1])


def backend_for(device, dtype: torch.dtype, head_dim: int) -> tuple[str, str]:
    """(``"triton"`` or ``"tiled"``, the reason) for tensors on ``device`` of ``dtype``."""
    device = torch.device(device)
    if device.type != "cuda":
        return "tiled", f"tensors on {device.type}: the Triton kernel needs CUDA"
    if not triton_installed():
        return "tiled", "triton is not installed"
    if dtype not in TRITON_DTYPES:
        return "tiled", f"dtype={dtype}: the Triton kernel takes float16 or bfloat16"
    if head_dim not in TRITON_HEAD_DIMS:
        return "tiled", f"head dim {head_dim} is not one of {TRITON_HEAD_DIMS}"
    return "triton", "CUDA tensors, supported dtype and head dim"


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Exact attention that never stores the (N_q, N_k) scores.

    q: (B, H, N_q, d); k, v: (B, G, N_k, d) with G dividing H (GQA/MQA). ``causal`` is
    aligned bottom-right; rows with no visible key are 0. ``scale`` defaults to
    1/sqrt(d). Returns (B, H, N_q, d) in q's dtype.
    """
    check_qkv(q, k, v)
    backend, _ = choose_backend(q)
    if backend == "triton":
        from mhalib.kernels.triton_flash import triton_flash_attention

        return triton_flash_attention(q, k, v, causal=causal, scale=scale)
    return tiled_attention(q, k, v, causal=causal, scale=scale)
