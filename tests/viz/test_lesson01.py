"""Lesson 01 pictures: the toy sentence and the d_k slider that redraws the saturation plot."""

import numpy as np

from mhalib.viz.lesson01 import scale_explorer, scale_figure, scale_scores, toy_sentence


def bar_heights(ax) -> np.ndarray:
    return np.array([patch.get_height() for patch in ax.patches])


def test_toy_sentence_repeats_vectors_for_equal_words():
    tokens, x = toy_sentence(d_model=8)
    assert x.shape == (len(tokens), 8)
    first, second = [i for i, t in enumerate(tokens) if t == "the"]
    assert np.array_equal(x[first], x[second])
    assert not np.array_equal(x[0], x[1])


def test_unscaled_scores_grow_like_sqrt_d_k():
    small = np.std(np.concatenate([scale_scores(4, 12, seed) for seed in range(200)]))
    large = np.std(np.concatenate([scale_scores(400, 12, seed) for seed in range(200)]))
    assert 8 < large / small < 12  # sqrt(400 / 4) = 10


def test_scale_figure_shows_saturation_only_without_the_scale():
    unscaled, scaled = scale_figure(512).axes
    assert np.isclose(bar_heights(unscaled).sum(), 1) and np.isclose(bar_heights(scaled).sum(), 1)
    assert bar_heights(unscaled).max() > 0.99
    assert bar_heights(scaled).max() < 0.9
    small_unscaled, small_scaled = scale_figure(1).axes
    assert np.allclose(bar_heights(small_unscaled), bar_heights(small_scaled))


def test_slider_is_labelled_d_k_and_redraws_on_change():
    box = scale_explorer(d_k=4)
    assert box.slider.description == "d_k" and box.slider.value == 4
    assert "mhalib-dk-slider" in box.slider._dom_classes
    before = box.redraws
    box.slider.value = 300
    assert box.redraws == before + 1
    box.slider.value = 300  # no change, no redraw
    assert box.redraws == before + 1
