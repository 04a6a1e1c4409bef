"""Which kernel ``F.scaled_dot_product_attention`` actually ran.

SDPA picks a backend at call time (flash, memory-efficient, cuDNN or the plain math
composition) and the choice changes speed by 2x on the same GPU, so the benchmark records it.
A ``TorchDispatchMode`` sees the backend's own aten op below SDPA's composite entry point.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_BACKEND_OPS = {
    "_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "memory-efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
    "_scaled_dot_product_fused_attention_overrideable": "fused (device-specific)",
}


class _BackendRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.backends: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in _BACKEND_OPS:
            self.backends.append(f"{_BACKEND_OPS[name]} (aten.{name})")
        return func(*args, **(kwargs or {}))


def call_recording_sdpa_backend(fn):
    """Call ``fn()``; returns (its result, the SDPA backends it ran, in order, or ["math"]).

    Under ``torch.inference_mode`` a dispatch mode only sees SDPA's composite entry point, so
    the call runs with inference mode off (and no autograd).
    """
    with torch.inference_mode(False), torch.no_grad(), _BackendRecorder() as recorder:
        out = fn()
    backends = list(dict.fromkeys(recorder.backends)) or ["math (no fused kernel)"]
    return out, backends
