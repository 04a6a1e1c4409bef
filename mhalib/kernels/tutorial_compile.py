"""Compile the forward kernel of Triton's fused-attention tutorial for sm_80/sm_90, for comparison.

The tutorial (``python/tutorials/06-fused-attention.py`` in the triton repository) is read
from a path the caller gives; nothing of it is copied into this project. Its module-level
code asks the CUDA driver for a GPU, so it is imported under :func:`pretend_gpu`, a stand-in
driver that only answers "CUDA, compute capability ``arch``". Its ``_attn_fwd`` is then
compiled as the tutorial's own wrapper launches it: host-side TMA descriptors on sm_90 (its
path without warp specialization, the one its tests run on Hopper), plain tensors before
(the kernel builds device-side descriptors). Imports triton.
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import torch

from mhalib.kernels.flash_compile_check import SHAPES, Specialization
from mhalib.kernels.triton_compile import CompiledKernel, compile_kernel
from mhalib.kernels.triton_config import LaunchConfig

EXPECTED_ARGS = ["sm_scale", "M", "Z", "H", "desc_q", "desc_k", "desc_v", "desc_o", "N_CTX"]


@contextlib.contextmanager
def pretend_gpu(arch: int):
    """Let module-level code that asks for a CUDA GPU of capability ``arch`` run on a CPU."""
    import triton
    from triton.backends.compiler import GPUTarget

    class CompileOnlyDriver:
        def get_current_target(self):
            return GPUTarget("cuda", arch, 32)

        def get_active_torch_device(self):
            return torch.device("cpu")

    saved_capability = torch.cuda.get_device_capability
    saved_driver = triton.runtime.driver._active  # None until a driver was looked up
    triton.runtime.driver.set_active(CompileOnlyDriver())
    torch.cuda.get_device_capability = lambda *args, **kwargs: divmod(arch, 10)
    try:
        yield
    finally:
        torch.cuda.get_device_capability = saved_capability
        triton.runtime.driver.set_active(saved_driver)


def load_tutorial(path: Path, arch: int):
    """The tutorial module at ``path``, imported as on a GPU of compute capability ``arch``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path={path}: no such file (06-fused-attention.py)")
    spec = importlib.util.spec_from_file_location(f"triton_tutorial_06_sm{arch}", path)
    module = importlib.util.module_from_spec(spec)
    with pretend_gpu(arch):
        spec.loader.exec_module(module)
    return module


def forward_kernel(module):
    """(the JIT function ``_attn_fwd``, the autotuner around it) of the tutorial ``module``."""
    tuned = module._attn_fwd
    kernel = getattr(tuned, "fn", tuned)
    if kernel.arg_names[: len(EXPECTED_ARGS)] != EXPECTED_ARGS:
        raise ValueError(
            f"{module.__file__}: _attn_fwd takes {kernel.arg_names}; this reads the "
            f"tensor-descriptor version of the tutorial ({EXPECTED_ARGS}, ...)"
        )
    return kernel, tuned


def compile_tutorial(item) -> CompiledKernel:
    """Compile the tutorial's ``_attn_fwd`` (fp16) for item = (path, spec, config)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    path, spec, config = item
    kernel, _ = forward_kernel(load_tutorial(path, spec.arch))
    size = SHAPES["aligned"]  # the tutorial needs N divisible by BLOCK_M, K/V heads == heads
    batch, heads, n_ctx, d = size["batch"], size["heads"], size["n_q"], spec.head_dim
    tensors = [torch.empty(batch, heads, n_ctx, d, dtype=torch.float16) for _ in range(4)]
    if spec.arch >= 90:
        rows = batch * heads * n_ctx
        blocks = [config.block_m, config.block_n, config.block_n, config.block_m]  # q, k, v, o
        tensors = [
            TensorDescriptor(tensor, shape=[rows, d], strides=[d, 1], block_shape=[block, d])
            for tensor, block in zip(tensors, blocks)
        ]
    stats = torch.empty(batch, heads, n_ctx, dtype=torch.float32)
    args = (d**-0.5, stats, batch, heads, *tensors, n_ctx)
    constexprs = {
        "HEAD_DIM": d, "BLOCK_M": config.block_m, "BLOCK_N": config.block_n,
        "FP8_OUTPUT": False, "STAGE": 3 if spec.causal else 1,
        "warp_specialize": False, "IS_HOPPER": spec.arch == 90,
    }
    return compile_kernel(kernel, args, constexprs, spec.arch, config.num_warps, config.num_stages)


def tutorial_candidates(path: Path, spec: Specialization) -> list[LaunchConfig]:
    """The configs the tutorial's autotuner would time for ``spec`` (after its own pruning)."""
    module = load_tutorial(path, spec.arch)
    _, tuned = forward_kernel(module)
    configs = list(getattr(tuned, "configs", []))
    prune = getattr(module, "prune_invalid_configs", None)
    if prune is not None:
        configs = prune(configs, {}, N_CTX=SHAPES["aligned"]["n_q"], STAGE=3 if spec.causal else 1)
    return [
        LaunchConfig(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)
        for c in configs
        if c.kwargs["BLOCK_N"] <= spec.head_dim  # its kernel asserts BLOCK_N <= HEAD_DIM
    ]
