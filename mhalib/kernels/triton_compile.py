"""Compile a Triton kernel for a CUDA architecture on a machine without a GPU, and measure it.

``triton.compile(ASTSource(...), target=GPUTarget("cuda", arch, 32))`` runs Triton's whole
pipeline (TTIR -> TTGIR -> LLVM -> PTX -> cubin with the ``ptxas`` shipped in the triton
wheel) for any architecture. The kernel is specialized by Triton's own launch-time binder
on CPU tensors of the right dtype, strides and alignment, so unit strides become constants
and 16-byte-divisible ones get divisibility hints exactly as in a launch on a GPU.

The resources come from running that ``ptxas -v`` again on the PTX (also correct when the
kernel came from Triton's cache). Imports triton: use it only where triton is installed.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from triton.runtime.jit import create_function_from_signature

from mhalib.kernels.gpu_resources import (
    ARCH_LIMITS,
    KernelResources,
    blocks_per_sm,
    occupancy,
    parse_ptxas_verbose,
)

# PTX instructions that run on tensor cores: warp-group MMA on Hopper, warp MMA before it
TENSOR_CORE_PTX = {90: "wgmma.mma_async", 80: "mma.sync.aligned"}


@dataclass(frozen=True)
class CompiledKernel:
    """One specialization compiled for one architecture, with what ptxas reports."""

    arch: int
    num_warps: int
    num_stages: int
    resources: KernelResources
    tensor_core_instructions: int  # count of TENSOR_CORE_PTX[arch] in the PTX

    @property
    def blocks_per_sm(self) -> int:
        return blocks_per_sm(self.resources, self.num_warps, ARCH_LIMITS[self.arch])

    @property
    def occupancy(self) -> float:
        return occupancy(self.resources, self.num_warps, ARCH_LIMITS[self.arch])


def compile_kernel(
    kernel, args: tuple, constexprs: dict, arch: int, num_warps: int, num_stages: int
) -> CompiledKernel:
    """Compile ``kernel`` (a ``@triton.jit`` function) for compute capability ``arch``.

    ``args``: the runtime arguments in order (CPU tensors stand in for the GPU ones);
    ``constexprs``: the ``tl.constexpr`` arguments by name.
    """
    if arch not in ARCH_LIMITS:
        raise ValueError(f"arch={arch} is not a checked architecture {tuple(ARCH_LIMITS)}")
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    options = {"num_warps": num_warps, "num_stages": num_stages}
    bound, specialization, _ = binder(*args, **constexprs, **options)
    with warnings.catch_warnings():
        # triton 3.9 warns that TRITON_DEFAULT_FP_FUSION is unset; a launch uses the same default
        warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
        parsed, signature, constants, attrs = kernel._pack_args(
            backend, options, bound, specialization, None
        )
        source = ASTSource(kernel, signature, constants, attrs)
        compiled = triton.compile(source, target=target, options=parsed.__dict__)
    ptx = compiled.asm["ptx"]
    return CompiledKernel(
        arch=arch,
        num_warps=num_warps,
        num_stages=num_stages,
        resources=parse_ptxas_verbose(ptxas_verbose(ptx, arch), compiled.metadata.shared),
        tensor_core_instructions=ptx.count(TENSOR_CORE_PTX[arch]),
    )


def ptxas_verbose(ptx: str, arch: int) -> str:
    """The ``ptxas -v`` report of ``ptx`` from the ptxas Triton itself uses for ``arch``."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run(
            [
                get_ptxas(arch).path, "-v", "--regAllocOptLevel=2",
                f"--gpu-name={sm_arch_from_capability(arch)}",
                str(source), "-o", str(Path(tmp) / "kernel.cubin"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"ptxas failed for arch={arch}:\n{done.stderr}")
    return done.stdout + done.stderr


def map_in_processes(function, items, jobs: int = 2) -> list:
    """``[function(item) for item in items]`` in ``jobs`` worker processes (1: in this one).

    Workers are spawned, not forked: a fork of a process whose torch thread pools already
    ran can hang. ``function`` must be importable (defined at module level).
    """
    items = list(items)
    if jobs < 1:
        raise ValueError(f"jobs={jobs} must be at least 1")
    if jobs == 1 or len(items) < 2:
        return [function(item) for item in items]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=context) as pool:
        return list(pool.map(function, items))
