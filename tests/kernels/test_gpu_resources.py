"""ptxas -v parsing, occupancy arithmetic and the per-architecture launch table (no triton)."""

from __future__ import annotations

import pytest

from mhalib.kernels.gpu_resources import (
    ARCH_LIMITS,
    KernelResources,
    blocks_per_sm,
    occupancy,
    parse_ptxas_verbose,
)
from mhalib.kernels.triton_config import (
    CHECKED_ARCHS,
    SUPPORTED_HEAD_DIMS,
    arch_family,
    launch_config,
)

PTXAS_LOG = """\
ptxas info    : 11 bytes gmem, 8 bytes cmem[4]
ptxas info    : Compiling entry function '_attn_fwd' for 'sm_80'
ptxas info    : Function properties for _attn_fwd
    16 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 16 bytes smem, 464 bytes cmem[0]
"""


def _resources(registers=128, shared=0, spill=0):
    return KernelResources(registers, spill, spill, 0, shared)


def test_parse_ptxas_verbose_reads_every_field():
    res = parse_ptxas_verbose(PTXAS_LOG, dynamic_shared_bytes=32768)
    assert res == KernelResources(
        registers=255, spill_store_bytes=16, spill_load_bytes=12, stack_bytes=16,
        shared_bytes=32768 + 16,
    )
    assert res.spills


def test_parse_ptxas_verbose_names_what_is_missing():
    with pytest.raises(ValueError, match="registers"):
        parse_ptxas_verbose("ptxas info    : 0 bytes stack frame, 0 bytes spill stores, "
                            "0 bytes spill loads", 0)


@pytest.mark.parametrize(
    ("registers", "warps", "shared", "blocks"),
    [
        (255, 4, 0, 2),  # 256 registers/thread * 128 threads = 32768: two blocks
        (128, 8, 0, 2),  # 128 * 256 = 32768
        (130, 8, 0, 1),  # rounded up to 136 per thread: 34816, one block
        (32, 4, 0, 16),  # the 64-warp limit, not registers
        (64, 4, 100 * 1024, 1),  # shared memory: 2 * (100 + 1) KiB > 164 KiB on sm_80
        (64, 4, 200 * 1024, 0),  # more than one block may have: does not launch
    ],
)
def test_blocks_per_sm_on_sm80(registers, warps, shared, blocks):
    res = _resources(registers, shared)
    assert blocks_per_sm(res, warps, ARCH_LIMITS[80]) == blocks
    assert occupancy(res, warps, ARCH_LIMITS[80]) == blocks * warps / 64


def test_sm90_has_more_shared_memory_than_sm80():
    res = _resources(64, 200 * 1024)
    assert blocks_per_sm(res, 4, ARCH_LIMITS[90]) == 1
    assert blocks_per_sm(res, 4, ARCH_LIMITS[80]) == 0


def test_blocks_per_sm_rejects_no_warps():
    with pytest.raises(ValueError, match="num_warps=0"):
        blocks_per_sm(_resources(), 0, ARCH_LIMITS[80])


def test_launch_config_covers_every_arch_and_head_dim():
    for arch in (80, 86, 89, 90, 100):
        for d in SUPPORTED_HEAD_DIMS:
            config = launch_config(arch, d)
            assert config.block_m % 16 == 0 and config.block_n % 16 == 0
            assert config.num_warps in (4, 8) and config.num_stages >= 1
    assert set(map(arch_family, CHECKED_ARCHS)) == {80, 90}


def test_launch_config_errors_name_the_argument():
    with pytest.raises(ValueError, match="head_dim=48"):
        launch_config(90, 48)
    with pytest.raises(ValueError, match="arch=75"):
        launch_config(75, 64)
    with pytest.raises(TypeError, match="arch='sm_90'"):
        launch_config("sm_90", 64)
