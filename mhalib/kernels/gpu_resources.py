"""What a compiled GPU kernel costs per thread and per block, and how many blocks fit an SM.

Pure Python (no triton, no GPU): parses the ``ptxas -v`` report of a kernel and estimates
its theoretical occupancy from the per-SM limits of the architecture, the way CUDA's
occupancy calculator does (registers are allocated per warp in units of 256, every block
also reserves 1 KiB of shared memory for the system). Occupancy is an upper bound on the
warps an SM keeps in flight, not a speed: only a run on the GPU measures TFLOP/s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM and per-block limits of one CUDA compute capability (CUDA programming guide)."""

    name: str
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_unit_per_warp: int = 256
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    shared_per_sm: int = 0  # bytes usable by blocks on one SM
    shared_per_block: int = 0  # bytes one block may opt in to
    reserved_shared_per_block: int = 1024  # taken by the system for every resident block


ARCH_LIMITS = {
    80: ArchLimits("sm_80 (A100)", shared_per_sm=164 * 1024, shared_per_block=163 * 1024),
    90: ArchLimits("sm_90 (H100)", shared_per_sm=228 * 1024, shared_per_block=227 * 1024),
}


@dataclass(frozen=True)
class KernelResources:
    """What ``ptxas -v`` reports for one kernel, plus the shared memory Triton allocates."""

    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_bytes: int
    shared_bytes: int  # dynamic (Triton's allocation) + static shared memory per block

    @property
    def spills(self) -> bool:
        """True if the kernel moves registers to local memory and back."""
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


_PTXAS_PATTERNS = {
    "stack_bytes": r"(\d+) bytes stack frame",
    "spill_store_bytes": r"(\d+) bytes spill stores",
    "spill_load_bytes": r"(\d+) bytes spill loads",
    "registers": r"Used (\d+) registers",
}
_STATIC_SHARED = r"(\d+) bytes smem"


def parse_ptxas_verbose(log: str, dynamic_shared_bytes: int) -> KernelResources:
    """KernelResources from the text ``ptxas -v`` writes for a single-kernel module."""
    values = {}
    for field, pattern in _PTXAS_PATTERNS.items():
        found = re.findall(pattern, log)
        if len(found) != 1:
            raise ValueError(
                f"log: expected one match of {pattern!r} in the ptxas -v output, "
                f"found {len(found)}:\n{log}"
            )
        values[field] = int(found[0])
    static_shared = sum(int(n) for n in re.findall(_STATIC_SHARED, log))
    return KernelResources(shared_bytes=dynamic_shared_bytes + static_shared, **values)


def blocks_per_sm(resources: KernelResources, num_warps: int, limits: ArchLimits) -> int:
    """How many blocks of ``num_warps`` warps one SM can hold at once (0: does not fit)."""
    if num_warps < 1:
        raise ValueError(f"num_warps={num_warps} must be at least 1")
    if resources.shared_bytes > limits.shared_per_block:
        return 0
    unit = limits.register_unit_per_warp
    registers_per_warp = -(-resources.registers * 32 // unit) * unit
    by_warps = limits.max_warps_per_sm // num_warps
    by_registers = limits.registers_per_sm // (registers_per_warp * num_warps)
    by_shared = limits.shared_per_sm // (resources.shared_bytes + limits.reserved_shared_per_block)
    return min(limits.max_blocks_per_sm, by_warps, by_registers, by_shared)


def occupancy(resources: KernelResources, num_warps: int, limits: ArchLimits) -> float:
    """Resident warps over the SM's maximum (0 to 1): theoretical occupancy."""
    return blocks_per_sm(resources, num_warps, limits) * num_warps / limits.max_warps_per_sm
