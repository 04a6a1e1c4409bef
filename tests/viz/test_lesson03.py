"""Lesson 03 pictures: the sampled quantities behave as the lesson says, the slider redraws."""

import numpy as np

from mhalib.viz.lesson03 import (
    attention_rows,
    dot_products,
    gradient_size,
    plot_curves,
    plot_variance,
    saturation_explorer,
    saturation_figure,
    score_histograms,
)


def test_dot_products_have_variance_d_k():
    for d_k in (1, 16, 256):
        assert abs(dot_products(d_k, 20_000).var() / d_k - 1) < 0.06


def test_attention_rows_are_distributions_and_saturate_without_scale():
    scaled = attention_rows(256, n_rows=64, scaled=True)
    raw = attention_rows(256, n_rows=64, scaled=False)
    assert scaled.shape == (64, 16) and np.allclose(scaled.sum(-1), 1)
    assert raw.max(-1).mean() > 0.9 > scaled.max(-1).mean()


def test_gradient_size_matches_the_frobenius_norm_of_the_jacobian():
    rows = attention_rows(8, n_rows=10)
    explicit = [np.linalg.norm(np.diag(p) - np.outer(p, p)) for p in rows]
    assert np.allclose(gradient_size(rows), explicit)


def test_figures_draw():
    assert len(score_histograms(d_ks=(4, 16), n=500).axes) == 2
    ax = plot_variance([1, 2, 4], [1.0, 2.1, 3.9])
    assert len(ax.lines) == 3
    ax = plot_curves([1, 2], [1.0, 0.5], [1.0, 1.0], "y", ceiling=2.0)
    assert ax.get_ylabel() == "y"
    bars, curve = saturation_figure(64).axes
    assert len(bars.patches) == 32


def test_slider_is_labelled_d_k_and_redraws_on_change():
    box = saturation_explorer(d_k=8)
    assert box.slider.description == "d_k"
    before = box.redraws
    box.slider.value = 128
    assert box.redraws == before + 1
