"""Timing and peak-memory helpers of the benchmark."""

from __future__ import annotations

import sys
import time

import pytest
import torch

from mhalib.bench.measure import median_times, peak_memory_bytes

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_median_times_interleaves_and_takes_the_median():
    calls = []
    durations = iter([0.001, 0.02, 0.002, 0.02, 0.003, 0.02])

    def make(name):
        def fn():
            calls.append(name)
            time.sleep(next(durations))

        return fn

    result = median_times({"a": make("a"), "b": make("b")}, torch.device("cpu"), repeats=3)
    assert calls == ["a", "b", "a", "b", "a", "b"]  # round-robin, not a-a-a-b-b-b
    assert 0.0015 < result["a"] < 0.015 and result["b"] >= 0.02


@linux_only
def test_peak_memory_sees_a_temporary_of_known_size():
    size = 64 * 2**20

    def temporary():
        buffer = torch.ones(size // 4)  # 64 MiB, freed before returning
        return float(buffer[0])

    peak = peak_memory_bytes(temporary, torch.device("cpu"))
    assert peak is not None and 0.9 * size <= peak <= 1.3 * size
    small = peak_memory_bytes(lambda: torch.ones(16).sum(), torch.device("cpu"))
    assert small < 4 * 2**20


@linux_only
def test_peak_memory_separates_naive_from_sdpa():
    q = torch.randn(1, 4, 1024, 32)
    naive = peak_memory_bytes(lambda: torch.softmax(q @ q.transpose(-2, -1), -1) @ q, q.device)
    sdpa = peak_memory_bytes(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q), q.device
    )
    scores = 4 * 1024 * 1024 * 4  # 16 MiB of float32 scores
    assert naive >= scores and sdpa < scores / 2
