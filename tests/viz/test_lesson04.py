"""Lesson 04 pictures: the example masks are the ones the lesson describes; the picker redraws."""

import numpy as np
import pytest

from mhalib.reference import causal_mask, padding_mask
from mhalib.viz.lesson04 import MASKS, example_weights, mask_explorer, mask_figure, plot_mask


def test_example_masks_agree_with_the_answer_key():
    assert np.array_equal(MASKS["causal"], causal_mask(8))
    assert np.array_equal(MASKS["causal, 3 new queries over 8 keys"],
                          causal_mask(3, 8))
    padding = padding_mask([5], 8)[0, 0]  # (1, 8)
    assert np.array_equal(MASKS["padding (a sequence of length 5 padded to 8)"],
                          np.broadcast_to(padding, (8, 8)))
    window = MASKS["sliding window of 3, causal"]
    assert window.sum(axis=-1).tolist() == [1, 2, 3, 3, 3, 3, 3, 3]
    assert (window <= MASKS["causal"]).all()


@pytest.mark.parametrize("kind", list(MASKS))
def test_example_weights_respect_the_mask(kind):
    weights = example_weights(MASKS[kind])
    assert (weights[~MASKS[kind]] == 0).all()
    assert np.allclose(weights.sum(-1), 1)


def test_plot_mask_shows_queries_at_their_positions():
    ax = plot_mask(MASKS["causal, 3 new queries over 8 keys"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["5", "6", "7"]
    with pytest.raises(ValueError, match="mask must have shape"):
        plot_mask(np.ones((2, 2, 2)))


def test_picker_redraws_the_chosen_mask():
    box = mask_explorer()
    assert box.picker.description == "mask" and set(box.picker.options) == set(MASKS)
    before = box.redraws
    box.picker.value = "causal + padding"
    assert box.redraws == before + 1
    assert len(mask_figure("no mask").axes) == 3  # mask, weights and its colour bar
