"""mhalib.checks.explain_shapes: an output of the wrong shape read for what made it."""

from __future__ import annotations

import pytest

from mhalib.checks.explain_shapes import shape_reading


@pytest.mark.parametrize("want, got, named, words", [
    # a transpose without its axes reverses every axis of the layout before it
    ((2, 3, 5, 4), (4, 3, 5, 2), {}, "every axis of (2, 5, 3, 4) in reverse order"),
    ((2, 3, 5, 4), (4, 5, 3, 2), {}, "the right axes in reverse order"),
    # size-1 axes inserted after the data axes, not before
    ((3, 1, 1, 5), (3, 5, 1, 1), {}, "axes of size 1 are at the wrong places"),
    # a trailing axis kept from broadcasting
    ((2, 3, 5), (2, 3, 5, 1), {}, "extra axis of size 1 at the end"),
    # an empty slice: 0 is no product one off
    ((2, 1, 3, 6), (2, 1, 3, 0), {"num_heads": 1, "d_model": 6}, "an empty slice or range"),
    # a size the case has, and a product with a count one off: both said
    ((1, 6, 5, 4), (1, 4, 5, 4), {"G": 2, "n_rep": 3, "d": 4},
     "4 is d: another tensor's or axis's size, read where this one's belongs; or 4 = G x "
     "(n_rep - 1)"),
])
def test_a_wrong_shape_is_read_for_what_made_it(want, got, named, words):
    flag, sentence = shape_reading(want, got, "the output", named)
    assert flag == "form:shape" and words in sentence, sentence


@pytest.mark.parametrize("want, got", [
    ((2, 3, 5, 4), (2, 5, 3, 4)),  # two neighbours swapped: a transpose missing, not a reversal
    ((4, 20, 9), (20, 9, 4)),  # in three axes a reversal is a rotation too (a stack on -1)
])
def test_a_reversal_is_not_said_where_a_likelier_slip_fits(want, got):
    _, sentence = shape_reading(want, got, "the output", {})
    assert "reverse order" not in sentence, sentence


def test_a_broadcast_axis_plus_one_is_not_read_as_a_loop_one_step_off():
    # 6 is k's width; 6 = 3 x (1 + 1) with a mask's axis of 1 is a coincidence (round O)
    named = {"k.shape[3]": 6, "v.shape[3]": 3, "mask.shape[1]": 1}
    _, sentence = shape_reading((2, 2, 4, 3), (2, 2, 4, 6), "the output", named)
    assert "step off" not in sentence and "6 is k.shape[3]" in sentence, sentence
