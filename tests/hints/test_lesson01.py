"""Every hint of lesson 01 is true: its numbers and shapes recomputed, its last step followed."""

from __future__ import annotations

import warnings

import numpy as np

from mhalib.checks.lesson01 import EXERCISES
from mhalib.reference import softmax as reference_softmax
from tests.hints.claims import passes, says


def test_softmax_overflow_is_as_the_nudge_says():
    says("softmax", 1, "np.exp(710.0)", "inf / inf", "nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isinf(np.exp(710.0)) and np.isfinite(np.exp(709.0))
        assert np.isnan(np.float64(np.inf) / np.float64(np.inf))


def test_a_shift_leaves_the_softmax_alone_and_keeps_exponents_at_most_zero():
    says("softmax", 2, "largest term is exactly 1", "e^(-inf) = 0")
    x = np.array([[3.0, -np.inf, 1e4, 2.0], [0.5, 0.1, -np.inf, 0.0]])
    shifted = x - x.max(axis=1, keepdims=True)
    assert (shifted <= 0).all() and (shifted.max(axis=1) == 0).all()
    small = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(reference_softmax(small - 7.5), reference_softmax(small))
    assert reference_softmax(x)[0, 1] == 0 and reference_softmax(x)[1, 2] == 0


def test_keepdims_shapes_are_as_stated():
    says("softmax", 3, "never a fixed -1", "the test also asks for `axis=0`", "(2,)", "(2, 1)",
         "does not even broadcast")
    visible = EXERCISES["softmax"].visible_cases(np.random.default_rng(0))
    assert any(case.kwargs.get("axis") == 0 for case in visible)
    x = np.zeros((2, 3))
    assert np.max(x, axis=1).shape == (2,) and np.max(x, axis=1, keepdims=True).shape == (2, 1)
    try:
        x - np.max(x, axis=1)
    except ValueError:
        pass
    else:
        raise AssertionError("(2, 3) - (2,) broadcast after all")


def test_the_last_softmax_hint_passes():
    says("softmax", -1, "shifted = x - np.max(x, axis=axis, keepdims=True)",
         "e = np.exp(shifted)", "return e / np.sum(e, axis=axis, keepdims=True)")

    def softmax(x, axis=-1):
        shifted = x - np.max(x, axis=axis, keepdims=True)
        e = np.exp(shifted)
        return e / np.sum(e, axis=axis, keepdims=True)

    passes("softmax", softmax)


def test_k_transposed_shapes_are_as_stated():
    says("attention", 2, "(2, 5, 3)", "(3, 5, 2)", "(2, 3, 5)")
    k = np.zeros((2, 5, 3))
    assert k.T.shape == (3, 5, 2) and np.swapaxes(k, -1, -2).shape == (2, 3, 5)


def test_scale_and_axis_hint_matches_the_shapes():
    says("attention", 3, "q.shape[-1]", "(..., N_q, N_k)", "(..., N_q, d_v)")
    weights, v = np.ones((4, 2, 3)) / 3, np.zeros((4, 3, 5))
    assert (weights @ v).shape == (4, 2, 5)


def test_the_last_attention_hint_passes():
    says("attention", -1, "scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])",
         "weights = softmax(scores, axis=-1)", "return weights @ v, weights")

    def attention(q, k, v):
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        weights = reference_softmax(scores, axis=-1)
        return weights @ v, weights

    passes("attention", attention)
