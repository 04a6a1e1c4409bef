"""Lesson 11 helpers: the CPU measurement is quick and positive, the published figures add up,
the paged pool holds each sequence's tokens where the block table says, the widgets redraw."""

import math
import time

import numpy as np
import pytest
import torch

from mhalib.accounting.roofline import H100_SXM
from mhalib.viz.lesson11 import (
    VLLM_FIGURE_2,
    block_table_figure,
    chunk_explorer,
    decode_points,
    decode_rows,
    fragmentation_figure,
    longest_decode_gap,
    measure_cpu,
    paged_pool,
    prefill_points,
    random_paging,
    roofline_explorer,
    roofline_figure,
    schedule,
    schedule_figure,
    waste_fractions,
)


def test_cpu_measurement_is_quick_and_sane():
    start = time.perf_counter()
    cpu = measure_cpu(matmul_size=256, copy_mib=16)
    assert time.perf_counter() - start < 2.0
    assert 1e8 < cpu.peak_flops < 1e14 and 1e8 < cpu.bandwidth < 1e12
    assert cpu.ridge_point == cpu.peak_flops / cpu.bandwidth


def test_published_waste_shares_add_up_to_100():
    for system, parts in VLLM_FIGURE_2.items():
        assert math.isclose(sum(parts.values()), 100, abs_tol=0.15), system
    assert VLLM_FIGURE_2["Orca (Max)"]["token states"] == 20.4
    assert VLLM_FIGURE_2["Orca (Oracle)"]["token states"] == 38.2
    assert VLLM_FIGURE_2["vLLM"]["token states"] == 96.3


def test_decode_points_follow_2h_over_g_and_sit_left_of_the_h100_ridge():
    points = decode_points()
    assert points["GPT-3 175B (MHA, 96/96)"] == 1.0
    assert points["Llama-3.1 70B (GQA, 64/8)"] == 8.0
    assert all(value < H100_SXM.ridge_point for value in points.values())
    short, long = prefill_points().values()  # causal prefill at 512 and 8,192 tokens
    assert short == pytest.approx(409.6 * 513 / 1024) and short < H100_SXM.ridge_point < long
    rows = decode_rows(seq_len=32768)
    assert rows[0]["FLOPs per byte"] == 1.0 and len(rows) == len(points)


def test_paged_pool_places_token_t_at_its_page_and_slot():
    (q, k_pages, v_pages, table, lens), dense = paged_pool((13, 0, 7), 4, 2, 8, 4, seed=1)
    for b, (k, v) in enumerate(dense):
        for t in range(int(lens[b])):
            page = table[b, t // 4]
            assert torch.equal(k_pages[page, :, t % 4], k[:, t])
            assert torch.equal(v_pages[page, :, t % 4], v[:, t])
    owner, pages = random_paging((13, 0, 7), 4, seed=1)
    assert [len(p) for p in pages] == [4, 0, 2] and (owner == -1).sum() == 3


def test_waste_fractions_paged_beats_contiguous():
    fractions = waste_fractions([100, 16, 1], max_len=128, page_size=16)
    assert math.isclose(fractions["contiguous (reserve max_len)"], 117 / 384)
    assert math.isclose(fractions["paged"], 117 / 144)


def test_schedule_chunks_the_prompt_and_bounds_the_wait():
    whole = schedule(8192, 32, None, 1024)
    chunked = schedule(8192, 32, 512, 1024)
    assert sum(p for p, _ in chunked) == sum(p for p, _ in whole) == 8192
    assert longest_decode_gap(whole) == 8192 + 32
    assert longest_decode_gap(chunked) == 512 + 32
    capped = schedule(1000, 30, 5000, 256)  # the budget caps the chunk
    assert max(p for p, _ in capped) == 256 - 30


def test_figures_draw():
    assert len(block_table_figure().axes) == 2
    assert len(fragmentation_figure(lengths=np.array([10, 2000]), max_len=2048).axes) == 2
    assert "8,192" in schedule_figure().axes[0].get_title()
    fig = roofline_figure([H100_SXM], {"x": 4.0}, {"p": 1000.0})
    assert fig.axes[0].get_xscale() == "log"


def test_widgets_redraw():
    box = roofline_explorer(num_heads=64)
    box.kv_heads.value = 8
    box.size.value = 1
    assert box.redraws == 3
    slider = chunk_explorer()
    slider.slider.value = 128
    assert slider.redraws == 2
