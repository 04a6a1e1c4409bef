"""Every specialization the flash wrapper can launch, compiled for sm_80 and sm_90 without a GPU.

A specialization is (dtype, head dim, causal): the constexprs that change the kernel's code.
Each is compiled with the launch parameters :func:`mhalib.kernels.triton_config.launch_config`
gives the wrapper on that architecture and with the arguments
:func:`mhalib.kernels.triton_flash.kernel_arguments` passes, so what is checked is what runs.
Imports triton.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mhalib.kernels.triton_compile import CompiledKernel, compile_kernel, map_in_processes
from mhalib.kernels.triton_config import (
    CHECKED_ARCHS,
    SUPPORTED_HEAD_DIMS,
    LaunchConfig,
    launch_config,
)

DTYPES = ("float16", "bfloat16")
# Stand-in shapes. Triton specializes integer arguments equal to 1 (made constants) and
# divisible by 16 (hinted); the strides of contiguous tensors are the same in every launch
# (d is the unit stride, the others are multiples of 16), the sizes are not. "aligned":
# multi-head attention with lengths divisible by 16; "ragged": GQA with odd lengths.
SHAPES = {
    "aligned": {"batch": 2, "heads": 16, "kv_heads": 16, "n_q": 1024, "n_k": 1024},
    "ragged": {"batch": 2, "heads": 6, "kv_heads": 2, "n_q": 1000, "n_k": 999},
}


@dataclass(frozen=True)
class Specialization:
    """One compiled variant of the kernel on one architecture."""

    arch: int
    dtype: str
    head_dim: int
    causal: bool
    shape: str = "ragged"  # a key of SHAPES

    def describe(self) -> str:
        mask = "causal" if self.causal else "full"
        return f"sm_{self.arch} {self.dtype} d={self.head_dim} {mask} ({self.shape})"


def all_specializations(archs=CHECKED_ARCHS) -> list[Specialization]:
    """Every (arch, dtype, head dim, causal) the wrapper can launch on ``archs``."""
    return [
        Specialization(arch, dtype, head_dim, causal)
        for arch in archs
        for dtype in DTYPES
        for head_dim in SUPPORTED_HEAD_DIMS
        for causal in (False, True)
    ]


def compile_flash(spec: Specialization, config: LaunchConfig | None = None) -> CompiledKernel:
    """Compile our flash kernel for ``spec`` with ``config`` (default: the wrapper's)."""
    from mhalib.kernels.triton_flash import _attn_fwd, is_interpreted, kernel_arguments

    if is_interpreted():
        raise RuntimeError("TRITON_INTERPRET=1 is set: the kernel cannot be compiled for a GPU")
    if spec.shape not in SHAPES:
        raise ValueError(f"spec.shape={spec.shape!r} is not one of {tuple(SHAPES)}")
    size = SHAPES[spec.shape]
    dtype = getattr(torch, spec.dtype)
    q = torch.empty(size["batch"], size["heads"], size["n_q"], spec.head_dim, dtype=dtype)
    k, v = (
        torch.empty(size["batch"], size["kv_heads"], size["n_k"], spec.head_dim, dtype=dtype)
        for _ in range(2)
    )
    out = torch.empty_like(q)
    config = launch_config(spec.arch, spec.head_dim) if config is None else config
    constexprs = {
        "HEAD_DIM": spec.head_dim,
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "CAUSAL": spec.causal,
        "UPCAST_DOT": False,
    }
    return compile_kernel(
        _attn_fwd,
        kernel_arguments(q, k, v, out, spec.head_dim**-0.5),
        constexprs,
        spec.arch,
        config.num_warps,
        config.num_stages,
    )


def compile_all(specs, jobs: int = 2, configs=None, keep_errors: bool = False) -> list:
    """compile_flash for each spec (and config, default the wrapper's), in ``jobs`` processes.

    Triton compiles on one core, so two processes halve the wall time on two cores. With
    ``keep_errors`` a specialization that fails to compile gives its error text instead of
    stopping the others.
    """
    specs = list(specs)
    configs = [None] * len(specs) if configs is None else list(configs)
    if len(configs) != len(specs):
        raise ValueError(f"configs: {len(configs)} given for {len(specs)} specs")
    worker = _compile_or_error if keep_errors else _compile_pair
    return map_in_processes(worker, list(zip(specs, configs)), jobs)


def _compile_pair(pair) -> CompiledKernel:
    return compile_flash(*pair)


def _compile_or_error(pair) -> CompiledKernel | str:
    try:
        return compile_flash(*pair)
    except Exception as error:  # reported per specialization by the caller
        return f"{type(error).__name__}: {error}"
