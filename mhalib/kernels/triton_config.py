"""Launch parameters of the Triton flash kernel, chosen per GPU architecture and head dim.

No triton import: the wrapper, the compile-time checks (tests/kernels/test_triton_compile.py)
and ``benchmarks/triton_compile_report.py`` all read the same table, so what is checked
for spills is what the wrapper launches. Every entry was chosen so that ptxas reports no
register spills for fp16 and bf16, causal or not (docs/benchmarks.md, "Triton kernel").
"""

from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)
CHECKED_ARCHS = (80, 90)  # compute capabilities compiled and checked without a GPU


@dataclass(frozen=True)
class LaunchConfig:
    """Block sizes and Triton compile options of one kernel specialization."""

    block_m: int  # queries per program
    block_n: int  # keys per inner-loop step
    num_warps: int
    num_stages: int  # software-pipelining depth of the key/value loads


# (architecture family, head dim) -> config. Family 90: Hopper and newer (wgmma);
# family 80: Ampere and Ada (mma.sync). Family 90's d = 64 and d = 128 were timed on an H200
# (``benchmarks/triton_tune.py``, docs/benchmarks.md): (64, 64, 4 warps, 3 stages) had the best
# worse-of-two-masks throughput against SDPA at B=4, H=16, N=4096, bf16, 0.74x for d = 128
# (0.69x for the (128, 32, 8, 3) chosen before) and 0.89x for d = 64 (0.85x). The other
# entries were picked by ``benchmarks/triton_compile_report.py --search`` from compile-time
# figures alone (no GPU was at hand): among configs with no spills and at most 240 registers
# (headroom) in every specialization, BLOCK_M = 128 (each K/V tile loaded serves 128 queries),
# then the highest estimated occupancy, then the larger BLOCK_N, then more stages.
LAUNCH_CONFIGS = {
    (80, 16): LaunchConfig(128, 32, 8, 3),
    (80, 32): LaunchConfig(128, 64, 8, 3),
    (80, 64): LaunchConfig(128, 128, 8, 3),
    (80, 128): LaunchConfig(128, 64, 8, 3),
    (90, 16): LaunchConfig(128, 32, 8, 3),
    (90, 32): LaunchConfig(128, 32, 8, 3),
    (90, 64): LaunchConfig(64, 64, 4, 3),
    (90, 128): LaunchConfig(64, 64, 4, 3),
}
INTERPRETER_CONFIG = LaunchConfig(64, 64, 4, 2)  # small blocks: the CPU interpreter is slow


def arch_family(arch: int) -> int:
    """90 for compute capability 9.0 and newer, 80 for 8.x; earlier GPUs are not supported."""
    if not isinstance(arch, int) or isinstance(arch, bool):
        raise TypeError(f"arch={arch!r} must be an int compute capability such as 80 or 90")
    if arch >= 90:
        return 90
    if arch >= 80:
        return 80
    raise ValueError(
        f"arch={arch}: the Triton kernel needs compute capability 8.0 or newer (bf16 tensor cores)"
    )


def launch_config(arch: int, head_dim: int) -> LaunchConfig:
    """The launch parameters the wrapper uses on compute capability ``arch`` (e.g. 80, 90)."""
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head_dim={head_dim} is not one of {SUPPORTED_HEAD_DIMS}")
    return LAUNCH_CONFIGS[(arch_family(arch), head_dim)]
