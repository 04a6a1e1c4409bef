"""Every hint of lesson 05 is true: its counts recomputed, its last step followed."""

from __future__ import annotations

import torch

from mhalib.accounting import crossover_seq_len as reference_crossover
from mhalib.accounting import mha_flops as reference_flops
from mhalib.accounting import mha_param_count as reference_params
from tests.hints.claims import passes, says


def test_the_counts_for_n_4_d_8():
    says("mha_flops", 2, "2 * m * k * n", "1536", "256", "512", "2560")
    flops = reference_flops(4, 8)
    assert (flops["qkv_projections"], flops["scores"], flops["output_projection"],
            flops["total"]) == (1536, 256, 512, 2560)
    assert 3 * 2 * 4 * 8 * 8 == 1536  # three (N, d) @ (d, d), each 2 m k n


def test_the_heads_do_not_change_the_product_count():
    says("mha_flops", 2, "H heads of width d / H")
    n, d = 16, 32
    for heads in (1, 2, 8):
        per_head = 2 * n * (d // heads) * n  # (N, d_head) @ (d_head, N)
        assert heads * per_head == 2 * n * n * d


def test_the_last_flops_hint_passes():
    says("mha_flops", -1, '"qkv_projections": 6 * n * d * d', '"scores": 2 * n * n * d',
         '"weighted_sum": 2 * n * n * d', '"output_projection": 2 * n * d * d')

    def mha_flops(seq_len, d_model):
        n, d = seq_len, d_model
        flops = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
                 "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
        flops["total"] = sum(flops.values())
        return flops

    passes("mha_flops", mha_flops)


def test_the_crossover_algebra():
    says("crossover_seq_len", 1, "4 * N^2 * d", "8 * N * d^2")
    says("crossover_seq_len", 2, "4 * N * d")
    for d in (64, 768, 4096):
        n = reference_crossover(d)
        assert 4 * n * n * d == 8 * n * d * d
        assert (4 * n * n * d) // (4 * n * d) == n and (8 * n * d * d) // (4 * n * d) == 2 * d


def test_the_last_crossover_hint_passes():
    says("crossover_seq_len", -1, "return 2 * d_model", "1536 for d_model = 768")
    assert reference_crossover(768) == 1536
    passes("crossover_seq_len", lambda d_model: 2 * d_model)


def test_torch_counts_as_the_hint_says():
    says("mha_param_count", 2, "torch.nn.MultiheadAttention(8, 2)", "288", "256 without bias")
    counted = [sum(p.numel() for p in torch.nn.MultiheadAttention(8, 2, bias=bias).parameters())
               for bias in (True, False)]
    assert counted == [288, 256] == [reference_params(8, True), reference_params(8, False)]


def test_the_last_param_hint_passes():
    says("mha_param_count", -1, "return 4 * d_model * d_model + (4 * d_model if bias else 0)")
    passes("mha_param_count",
           lambda d_model, bias=True: 4 * d_model * d_model + (4 * d_model if bias else 0))
