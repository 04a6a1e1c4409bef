"""Lesson 09 pictures: q.k depends on the distance only (the widget's two curves coincide), the
wavelengths follow 2 pi base^(2i/d) and Llama 3.1's scaling, and the layout diagram."""

import math

import numpy as np

from mhalib.viz.lesson09 import (
    inv_frequencies,
    llama3_inv_frequencies,
    pair_layout_figure,
    query_key_pair,
    relative_score_explorer,
    relative_score_figure,
    scores_by_distance,
    wavelength_figure,
)


def test_scores_depend_on_the_distance_only():
    q, k = query_key_pair(16)
    distances = np.arange(50)
    at_zero = scores_by_distance(q, k, distances, 10000.0)
    np.testing.assert_allclose(scores_by_distance(q, k, distances, 10000.0, shift=70_000),
                               at_zero, atol=1e-9)
    assert np.isclose(at_zero[0], q @ k)  # the same position: no rotation left


def test_explorer_redraws_on_both_controls():
    box = relative_score_explorer(head_dim=16, max_distance=32)
    assert box.redraws == 1
    box.shift.value = 5000
    box.base.value = 500000.0
    assert box.redraws == 3
    fig = relative_score_figure(100.0, 3000, head_dim=16, max_distance=32)
    assert "base 100" in fig.axes[0].get_title()


def test_wavelengths_and_llama3_scaling():
    inv = inv_frequencies(128, 10000.0)
    assert inv[0] == 1.0 and math.isclose(2 * math.pi / inv[-1], 54410.14, rel_tol=1e-6)
    scaled = llama3_inv_frequencies(128, 500000.0)
    plain = inv_frequencies(128, 500000.0)
    wavelength = 2 * math.pi / plain
    assert np.allclose(scaled[wavelength < 2048], plain[wavelength < 2048])
    assert np.allclose(scaled[wavelength > 8192], plain[wavelength > 8192] / 8)
    between = (wavelength >= 2048) & (wavelength <= 8192)
    assert between.any()
    assert np.all((scaled[between] <= plain[between]) & (scaled[between] >= plain[between] / 8))


def test_static_figures_draw():
    assert len(wavelength_figure().axes[0].lines) >= 6
    assert len(pair_layout_figure(8).axes) == 2
