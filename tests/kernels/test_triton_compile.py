"""The Triton flash kernel compiled for sm_80 (A100) and sm_90 (H100) on this CPU-only machine.

For every specialization the wrapper can launch, with the launch parameters it picks on that
architecture: it compiles, its PTX uses tensor cores (``mma.sync`` before Hopper, ``wgmma`` on
Hopper), spills no registers, and fits the architecture's shared memory. No GPU needed:
Triton compiles for any target, with the ptxas shipped in the triton wheel.

All 32 (arch, dtype, head dim, causal) are compiled, two at a time (Triton compiles on one
core): about 20 s on two idle cores, longer when the machine is shared. Each uses the
"ragged" stand-in shape (GQA, lengths not divisible by 16), so Triton specializes no size
and the code is the most general; ``benchmarks/triton_compile_report.py`` also compiles the
"aligned" shape (the most specialized code) for docs/benchmarks.md.
"""

from __future__ import annotations

import os

import pytest

from mhalib.kernels.gpu_resources import ARCH_LIMITS
from mhalib.kernels.triton_config import CHECKED_ARCHS, SUPPORTED_HEAD_DIMS

pytest.importorskip("triton", reason="triton is not installed (the kernel needs it)")
pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") == "1",
    reason="TRITON_INTERPRET=1: the kernel is interpreted, not compiled",
)


def _checked_specializations():
    from mhalib.kernels.flash_compile_check import all_specializations

    return all_specializations()


@pytest.fixture(scope="module")
def compiled():
    from mhalib.kernels.flash_compile_check import compile_all

    specs = _checked_specializations()
    return dict(zip(specs, compile_all(specs, jobs=2, keep_errors=True)))


def test_every_launchable_specialization_is_checked():
    specs = _checked_specializations()
    for arch in CHECKED_ARCHS:
        for dtype in ("float16", "bfloat16"):
            for d in SUPPORTED_HEAD_DIMS:
                for causal in (False, True):
                    assert any(
                        (s.arch, s.dtype, s.head_dim, s.causal) == (arch, dtype, d, causal)
                        for s in specs
                    )


def test_compiles_for_sm80_and_sm90(compiled):
    failed = {s.describe(): r for s, r in compiled.items() if isinstance(r, str)}
    assert not failed, failed


def _built(compiled):
    return {s: r for s, r in compiled.items() if not isinstance(r, str)}


def test_uses_tensor_cores(compiled):
    from mhalib.kernels.triton_compile import TENSOR_CORE_PTX

    for spec, kernel in _built(compiled).items():
        assert kernel.tensor_core_instructions > 0, (
            f"{spec.describe()}: no {TENSOR_CORE_PTX[spec.arch]} in the PTX"
        )


def test_no_register_spills(compiled):
    spilling = {
        spec.describe(): kernel.resources
        for spec, kernel in _built(compiled).items()
        if kernel.resources.spills or kernel.resources.stack_bytes
    }
    assert not spilling, spilling


def test_shared_memory_fits_and_a_block_fits_an_sm(compiled):
    for spec, kernel in _built(compiled).items():
        limit = ARCH_LIMITS[spec.arch].shared_per_block
        assert kernel.resources.shared_bytes <= limit, (
            f"{spec.describe()}: {kernel.resources.shared_bytes} B of shared memory > {limit} B"
        )
        assert kernel.blocks_per_sm >= 1, spec.describe()


def test_bench_note_states_the_compiled_occupancy(compiled):
    from mhalib.bench.gpu_status import OCCUPANCY_RANGE

    for spec, kernel in _built(compiled).items():
        low, high = OCCUPANCY_RANGE[spec.arch]
        assert low <= kernel.occupancy <= high, (
            f"{spec.describe()}: occupancy {kernel.occupancy:.1%} is outside the "
            f"{low:.1%}-{high:.1%} that `mhalib bench` states for sm_{spec.arch}"
        )
