"""Lesson 07 helpers: two row states merge to attention over all keys wherever the split, the
one-row online softmax is exact, the block slider redraws, the memory
probe counts live tensors, the kernel source is read from the file."""

import math

import numpy as np
import pytest
import torch

from mhalib.viz.lesson07 import (
    bench_markdown,
    kernel_source,
    memory_figure,
    merge_explorer,
    merge_figure,
    merge_problem,
    merged_row,
    one_row_problem,
    online_softmax_figure,
    online_softmax_states,
    online_softmax_stepper,
    peak_tensor_bytes,
    row_state,
)


@pytest.mark.parametrize("block_size", [1, 5, 8, 24, 100])
def test_one_row_states_end_at_the_exact_output(block_size):
    scores, values = one_row_problem(24)
    states = online_softmax_states(scores, values, block_size)
    weights = np.exp(scores - scores.max())
    assert np.isclose(states[-1]["output"], weights @ values / weights.sum())
    assert np.isclose(states[-1]["max"], scores.max())
    assert states[0]["rescale"] == 0.0  # exp(-inf) on the first block
    assert len(states) == math.ceil(24 / block_size)


def test_the_example_row_moves_its_max_after_the_first_block():
    states = online_softmax_states(*one_row_problem(24), 6)
    assert any(s["rescale"] < 1 for s in states[1:])


def test_stepper_redraws_and_figure_clamps_the_step():
    box = online_softmax_stepper(block_size=6)
    assert box.slider.description == "blocks" and box.slider.max == 4
    box.slider.value = 3
    assert box.redraws == 2
    fig = online_softmax_figure(*one_row_problem(24), 6, blocks_seen=99)
    assert "block 4 of 4" in fig.axes[0].get_title()


def test_peak_tensor_bytes_counts_live_allocations_only():
    x = torch.randn(256, 32)

    def naive(t):
        scores = t @ t.T  # 256 x 256 float32: 256 KiB
        return scores.softmax(-1) @ t

    _, peak = peak_tensor_bytes(naive, x)
    assert 2 * 256 * 256 * 4 <= peak < 3 * 256 * 256 * 4  # scores and weights alive together

    def sequential(t):
        for _ in range(5):
            (t @ t.T).sum()  # each temporary dies before the next
        return t

    _, peak = peak_tensor_bytes(sequential, x)
    assert peak < 2 * 256 * 256 * 4
    _, peak = peak_tensor_bytes(lambda t: t.T[:3], x)  # a view allocates nothing
    assert peak == 0


def test_memory_figure_has_both_guides():
    fig = memory_figure([64, 128], {"naive": [4e4, 1.6e5], "online": [2e4, 4e4]})
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert "slope 1 (N)" in labels and "slope 2 (N^2)" in labels


def test_kernel_source_reads_the_inner_loop():
    text = kernel_source("_attn_fwd_inner")
    assert text.startswith("@triton.jit") and "def _attn_fwd_inner" in text
    assert "exp2" in text
    with pytest.raises(ValueError, match="no_such_function"):
        kernel_source("no_such_function")


def test_bench_markdown_gives_a_table():
    text = bench_markdown(seq_lens=(64,), num_heads=2, head_dim=16, repeats=1)
    assert "torch SDPA" in text and "| implementation" in text


@pytest.mark.parametrize("split", [0, 1, 5, 11, 12])
def test_merged_row_is_attention_over_all_keys_wherever_the_split(split):
    scores, values = merge_problem(12)
    out_a, lse_a = row_state(scores[:split], values[:split])
    out_b, lse_b = row_state(scores[split:], values[split:])
    merged = merged_row(out_a, lse_a, out_b, lse_b)
    exact, lse = row_state(scores, values)
    assert np.allclose(merged["out"], exact) and np.isclose(merged["lse"], lse)
    assert np.isclose(merged["w_a"] + merged["w_b"], 1.0)


def test_merged_row_of_two_empty_sides_is_zero_and_minus_inf():
    empty = row_state(np.zeros(0), np.zeros((0, 2)))
    merged = merged_row(*empty, *empty)
    assert merged["lse"] == -math.inf and np.all(merged["out"] == 0)
    assert merged["w_a"] == merged["w_b"] == 0.0
    big = merged_row(np.ones(2), 1e4, np.zeros(2), 1e4 - 1.0)  # no overflow
    assert np.isclose(big["w_a"], 1 / (1 + math.exp(-1.0)))


def test_merge_explorer_redraws_and_marks_an_empty_side():
    box = merge_explorer(12)
    assert box.slider.description == "split" and box.slider.max == 12
    box.slider.value = 0
    assert box.redraws == 2
    fig = merge_figure(*merge_problem(12), 0)
    assert "A is empty" in fig.axes[0].get_title()
