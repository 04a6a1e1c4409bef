"""Timing (median of repeats, implementations interleaved) and peak memory of one call.

Peak memory on CUDA comes from the caching allocator's statistics. On a Linux CPU it is
the rise of the process's resident set: freed heap memory is first returned to the OS
(``malloc_trim``), the kernel's high-water mark is reset (``/proc/self/clear_refs``), and
after the call the new high-water mark (VmHWM) minus the starting RSS is what the call
needed at its peak. Elsewhere peak memory is reported as unknown (``None``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import statistics
import time
from collections.abc import Callable

import torch


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work so that wall-clock times mean something."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_times(
    fns: dict[str, Callable[[], object]],
    device: torch.device,
    repeats: int,
    on_call: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Median seconds per call of each function, timed round-robin over ``repeats`` rounds.

    Interleaving the implementations means a burst of load on the machine slows all of
    them alike, which keeps the ratios between them honest.
    """
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            samples[name].append(time.perf_counter() - start)
            if on_call is not None:
                on_call()
    return {name: statistics.median(values) for name, values in samples.items()}


def peak_memory_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """Extra bytes at the peak of one call of ``fn`` (its result included), or None."""
    gc.collect()
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        result = fn()
        synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - base
        del result
        return int(peak)
    if not _cpu_peak_supported():
        return None
    _release_free_heap()
    _reset_peak_rss()
    base = _status_kib("VmRSS")
    result = fn()
    peak = _status_kib("VmHWM") - base
    del result
    return max(0, peak) * 1024


def _cpu_peak_supported() -> bool:
    try:
        _reset_peak_rss()
        _status_kib("VmHWM")
    except (OSError, KeyError):
        return False
    return True


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # 5: reset the peak RSS (VmHWM) to the current RSS


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])  # "VmHWM:   123456 kB"
    raise KeyError(field)


def _release_free_heap() -> None:
    """Give freed malloc memory back to the OS so that reusing it shows up as new RSS."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    libc = ctypes.CDLL(name)
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
