"""Every hint of lesson 03 is true: its numbers recomputed, its last step followed."""

from __future__ import annotations

import warnings

import numpy as np

from mhalib.reference import dot_product_variance as reference_variance
from mhalib.reference import softmax_entropy as reference_entropy
from mhalib.reference import softmax_jacobian as reference_jacobian
from tests.hints.claims import passes, says


def test_the_global_generator_ignores_the_seed():
    says("dot_product_variance", 1, "`rng.standard_normal`", "`np.random.randn`",
         "those ignore `seed`")

    def with_global(d_k, n_samples=1_000, seed=0):
        q, k = np.random.randn(n_samples, d_k), np.random.normal(size=(n_samples, d_k))
        return float(np.var(np.sum(q * k, axis=1)))

    assert with_global(8, seed=3) != with_global(8, seed=3)
    assert reference_variance(8, 1_000, seed=3) == reference_variance(8, 1_000, seed=3)


def test_rowwise_dot_products_have_one_number_per_pair():
    says("dot_product_variance", 2, "(n_samples, d_k)", "(n_samples, n_samples)")
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((7, 3)), rng.standard_normal((7, 3))
    rowwise = np.sum(q * k, axis=1)
    assert rowwise.shape == (7,) and (q @ k.T).shape == (7, 7)
    np.testing.assert_allclose(rowwise, np.diag(q @ k.T))


def test_the_variance_is_close_to_d_k():
    says("dot_product_variance", 3, "about 64 for d_k = 64")
    assert abs(reference_variance(64) - 64) < 0.05 * 64


def test_the_last_variance_hint_passes():
    says("dot_product_variance", -1, "rng = np.random.default_rng(seed)",
         "q = rng.standard_normal((n_samples, d_k))",
         "return float(np.var(np.sum(q * k, axis=1)))")

    def dot_product_variance(d_k, n_samples=100_000, seed=0):
        rng = np.random.default_rng(seed)
        q = rng.standard_normal((n_samples, d_k))
        k = rng.standard_normal((n_samples, d_k))
        return float(np.var(np.sum(q * k, axis=1)))

    passes("dot_product_variance", dot_product_variance)


def test_a_uniform_row_of_four_has_entropy_log_4():
    says("softmax_entropy", 1, "log 4 = 1.386")
    assert round(float(reference_entropy(np.full(4, 0.25))), 3) == 1.386


def test_zero_weights_give_nan_unless_handled():
    says("softmax_entropy", 2, "np.log(0.0)", "-inf", "0 * -inf", "nan")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert np.log(0.0) == -np.inf and np.isnan(0.0 * np.log(0.0))
    assert caught  # "with a warning"
    for stand_in in (1.0, 0.3, 7.0):
        assert 0.0 * np.log(stand_in) == 0


def test_the_last_entropy_hint_passes():
    says("softmax_entropy", -1, "safe = np.where(p > 0, p, 1.0)",
         "return -np.sum(p * np.log(safe), axis=axis)")

    def softmax_entropy(weights, axis=-1):
        p = np.asarray(weights)
        safe = np.where(p > 0, p, 1.0)
        return -np.sum(p * np.log(safe), axis=axis)

    passes("softmax_entropy", softmax_entropy)


def test_the_jacobian_example_and_its_properties():
    says("softmax_jacobian", 2, "`p @ p.T` is a number", "p = [0.5, 0.3, 0.2]",
         "[[0.25, -0.15, -0.1], [-0.15, 0.21, -0.06], [-0.1, -0.06, 0.16]]", "symmetric",
         "each of its rows sums to 0")
    p = np.array([0.5, 0.3, 0.2])
    assert np.ndim(p @ p.T) == 0
    expected = [[0.25, -0.15, -0.1], [-0.15, 0.21, -0.06], [-0.1, -0.06, 0.16]]
    np.testing.assert_allclose(reference_jacobian(p), expected, atol=1e-15)
    # the example tells the checker's slips from the answer (a uniform p would not: with
    # p = [0.5, 0.5], diag(p) - p * p equals diag(p) - p p^T)
    for slip in (np.diag(p) - p * p, np.diag(p) - p @ p, np.eye(3) - np.outer(p, p),
                 -np.outer(p, p), np.diag(p)):
        assert not np.allclose(slip, expected)
    half = np.array([0.5, 0.5])
    assert np.allclose(np.diag(half) - half * half, reference_jacobian(half))
    p = np.random.default_rng(1).dirichlet(np.ones(6))
    p = np.random.default_rng(1).dirichlet(np.ones(6))
    jacobian = reference_jacobian(p)
    np.testing.assert_allclose(jacobian, jacobian.T)
    np.testing.assert_allclose(jacobian.sum(axis=1), 0, atol=1e-15)


def test_the_last_jacobian_hint_passes():
    says("softmax_jacobian", -1, "return np.diag(p) - np.outer(p, p)")
    passes("softmax_jacobian", lambda p: np.diag(p) - np.outer(p, p))
