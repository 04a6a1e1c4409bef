"""What is known, and what is not, about the Triton kernel's speed on GPUs.

``mhalib bench`` prints this where it could not time the kernel (no CUDA device). The facts
come from compiling the kernel for sm_80 and sm_90 without a GPU; the occupancy ranges are
checked against a fresh compile by tests/kernels/test_triton_compile.py.
"""

from __future__ import annotations

# Estimated occupancy (resident warps / 64), lowest and highest over every specialization the
# wrapper launches: docs/benchmarks.md, "Triton kernel compiled for sm_80 and sm_90".
OCCUPANCY_RANGE = {80: (0.125, 0.375), 90: (0.125, 0.5)}


def triton_gpu_note() -> str:
    """Comment lines (``# ...``) on the Triton kernel's GPU speed when it was not timed."""
    occupancy = ", ".join(
        f"{low:.1%}-{high:.1%} on sm_{arch}" for arch, (low, high) in OCCUPANCY_RANGE.items()
    )
    return (
        "# mhalib triton on GPUs: not timed in this run (it needs a CUDA device).\n"
        "# Known without a GPU (tests/kernels/test_triton_compile.py; numbers in "
        "docs/benchmarks.md): every specialization\n"
        "#   (fp16/bf16, d 16-128, causal or not) compiles for sm_80 (A100) and sm_90 (H100) "
        "with the launch parameters\n"
        "#   the wrapper picks, uses tensor-core instructions (mma.sync on sm_80, wgmma "
        "on sm_90), spills no\n"
        "#   registers and fits"
        f" shared memory; estimated occupancy {occupancy}.\n"
        "# Measured once, on an NVIDIA H200 (docs/benchmarks.md, 2026-11-26): 0.75x (full) and "
        "0.76x (causal) of SDPA's\n"
        "#   throughput at B=4, H=16, N=4096, d_head=128, bf16. Other GPUs are not measured, "
        "and occupancy is not a\n"
        "#   speed: `mhalib bench --device cuda` or benchmarks/triton_vs_sdpa.py on your GPU "
        "measures it.\n"
    )
