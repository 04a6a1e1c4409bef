"""Lesson 05 pictures: the FLOP plot draws the learner's numbers, the d_model slider redraws,
the timing helper measures both parts and leaves the thread count as it was."""

import numpy as np
import torch

from mhalib.viz.lesson05 import (
    crossover_explorer,
    flops_figure,
    html_table,
    matmul_flop_rate,
    measured_crossover,
    single_thread,
    time_layer_parts,
)


def flops(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d**2, "scores": 2 * n**2 * d,
             "weighted_sum": 2 * n**2 * d, "output_projection": 2 * n * d**2}
    parts["total"] = sum(parts.values())
    return parts


def test_flops_figure_lines_cross_at_the_crossover():
    fig = flops_figure(flops, lambda d: 2 * d, 64)
    projections, quadratic = fig.axes[0].lines[:2]
    n = projections.get_xdata()
    gap = np.log(projections.get_ydata()) - np.log(quadratic.get_ydata())
    crossing = n[np.argmin(np.abs(gap))]
    assert 100 <= crossing <= 160  # 2 * 64 = 128 on a log grid
    assert "128" in fig.axes[0].get_title()


def test_explorer_slider_redraws():
    box = crossover_explorer(flops, lambda d: 2 * d, d_model=768)
    assert box.slider.description == "d_model" and box.redraws == 1
    box.slider.value = 4096
    assert box.redraws == 2


def test_layer_timing_has_both_parts_and_restores_threads():
    before = torch.get_num_threads()
    times = time_layer_parts([16, 32], d_model=16, num_heads=2, repeats=2)
    assert torch.get_num_threads() == before
    assert times["seq_len"] == [16, 32]
    assert all(t > 0 for t in times["projections"] + times["attention"])
    assert matmul_flop_rate(sizes=(64,), repeats=2) > 0
    with single_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_measured_crossover_is_the_first_slower_n():
    times = {"seq_len": [8, 16, 32], "projections": [1, 1, 1], "attention": [0.5, 2, 3]}
    assert measured_crossover(times) == 16
    assert measured_crossover({**times, "attention": [0, 0, 0]}) is None


def test_html_table_formats_and_escapes():
    html = html_table([{"model": "<b>x</b>", "params": 1234567, "share": 0.25, "big": 12345.6}],
                      "caption & more")
    assert "&lt;b&gt;" in html and "1,234,567" in html and "0.25" in html
    assert "12,346" in html and "caption &amp; more" in html
    assert html_table([]) == "<p>(no rows)</p>"
