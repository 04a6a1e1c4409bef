"""The FlopCounterMode gaps on CPU attention, and the formulas that fill them."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import sdpa_flop_count

from mhalib.accounting.flop_counter import count_flops, sdpa_cpu_flash_flop


def test_raw_counter_misses_cpu_sdpa_and_custom_formula_fixes_it():
    q, k, v = (torch.randn(2, 3, 17, 8) for _ in range(3))
    raw = count_flops(F.scaled_dot_product_attention, q, k, v, use_custom_formulas=False)
    assert raw.total == 0  # torch 2.13 has no formula for the CPU flash op
    fixed = count_flops(F.scaled_dot_product_attention, q, k, v)
    assert fixed.by_op == {"aten._scaled_dot_product_flash_attention_for_cpu": fixed.total}
    # torch's own formula for its CUDA SDPA ops is the independent oracle
    assert fixed.total == sdpa_flop_count(q.shape, k.shape, v.shape)


def test_formula_equals_explicit_matmuls():
    q, k, v = (torch.randn(1, 2, 9, 4) for _ in range(3))
    explicit = count_flops(lambda: torch.softmax(q @ k.transpose(-2, -1), -1) @ v)
    assert sdpa_cpu_flash_flop(q.shape, k.shape, v.shape) == explicit.total


def test_cross_attention_shapes():
    q, k, v = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 11, 4), torch.randn(1, 2, 11, 6)
    assert sdpa_cpu_flash_flop(q.shape, k.shape, v.shape) == 2 * 2 * 5 * 11 * 4 + 2 * 2 * 5 * 11 * 6


def test_raw_counter_sees_nothing_of_nn_multihead_attention_in_eval_mode():
    module = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        raw = count_flops(module, x, x, x, need_weights=False, use_custom_formulas=False)
        fixed = count_flops(module, x, x, x, need_weights=False)
        module.train()
        training = count_flops(module, x, x, x, need_weights=False)  # decomposed ops
    assert raw.total == 0
    assert fixed.total == training.total > 0
    assert "aten._native_multi_head_attention" in fixed.by_op
    assert torch.equal(fixed.result[0], raw.result[0])  # the result passes through
