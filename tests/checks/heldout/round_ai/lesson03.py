"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math

import numpy as np
from scipy import special, stats

from entry import Entry


# ============================================================================ dot_product_variance
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    np.random.seed(seed)
    q = np.random.rand(n_samples, d_k)
    k = np.random.rand(n_samples, d_k)
    products = np.sum(q * k, axis=-1)
    return float(np.var(products))


def dpv_same_seed_for_k(d_k, n_samples=100_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    k = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    dots = np.einsum("nd,nd->n", q, k)
    return float(np.var(dots))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    q = gen.standard_normal(size=(n_samples, d_k))
    k = gen.standard_normal(size=(n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qs = rng.standard_normal((n_samples, d_k))
    ks = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.sum(qs * ks, axis=1)))


def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1)
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / n_samples)


def dpv_one_draw(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    both = rng.normal(0.0, 1.0, size=(n_samples, 2 * d_k))
    q, k = both[:, :d_k], both[:, d_k:]
    dots = np.sum(q * k, axis=1)
    return float(np.mean(dots ** 2) - np.mean(dots) ** 2)


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_missing_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return np.sum(p * np.log(safe), axis=axis)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    terms = np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0)
    return -terms.sum(axis=axis, keepdims=True)


def entropy_boolean_index(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    p = p[p > 0]  # drop the zeros so log never sees 0
    return -np.sum(p * np.log(p), axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    return -np.mean(plogp, axis=axis)


def entropy_scipy_stats(weights, axis=-1):
    return stats.entropy(np.asarray(weights, dtype=float), axis=axis)


def entropy_nansum(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.nansum(p * np.log(p), axis=axis)


def entropy_special_entr(weights, axis=-1):
    return special.entr(np.asarray(weights)).sum(axis=axis)


# ============================================================================ softmax_jacobian
def jac_dot_T(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_p_squared(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p ** 2


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_symmetric_fill(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            J[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return J + J.T  # the matrix is symmetric: mirror the lower triangle


def jac_int_matrix(p):
    n = len(p)
    jac = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            delta = 1.0 if i == j else 0.0
            jac[i, j] = p[i] * (delta - p[j])
    return jac


def jac_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_broadcast_closed_form(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


def jac_einsum(p):
    p = np.asarray(p)
    eye = np.eye(len(p), dtype=p.dtype)
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "variance_of_scaled_dots",
          "It measures the variance of q . k / sqrt(d_k), the scaled score (about 1), instead "
          "of the unscaled dot product (about d_k).", dpv_scaled),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "np.random.default_rng() is created without the seed argument, so two calls with the "
          "same seed give different numbers.", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "uniform_samples",
          "np.random.rand draws uniform numbers in [0, 1), not standard normal ones, so the "
          "variance is about 0.05 d_k instead of d_k.", dpv_uniform),
    Entry("dot_product_variance", "wrong", "same_seed_for_k",
          "k is drawn from a fresh generator with the same seed, so k is an exact copy of q and "
          "the dot product is |q|^2 (variance about 2 d_k).", dpv_same_seed_for_k),
    Entry("dot_product_variance", "wrong", "dot_summed_over_samples",
          "The products are summed over axis=0 (the samples) instead of axis=1 (the d_k "
          "features), so it returns the variance of d_k sums of n_samples terms.",
          dpv_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "std_instead_of_var",
          "np.std returns the standard deviation, about sqrt(d_k), not the variance.", dpv_std),
    Entry("dot_product_variance", "right", "manual_moments", None, dpv_manual_moments),
    Entry("dot_product_variance", "right", "single_draw_split", None, dpv_one_draw),
    Entry("softmax_entropy", "wrong", "log2_bits",
          "np.log2 gives the entropy in bits, not in nats (natural log).", entropy_log2),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "The minus sign is missing: it returns sum p log p, the negative of the entropy.",
          entropy_missing_minus),
    Entry("softmax_entropy", "wrong", "keepdims_kept",
          "The sum keeps the reduced axis (keepdims=True), so the result has a length-1 axis "
          "instead of having that axis removed.", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "boolean_index_flattens",
          "p[p > 0] flattens the array to 1-D, so it returns one number summed over all the "
          "weights at once (or an axis error for axis=1) instead of one entropy per "
          "distribution.",
          entropy_boolean_index),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "np.mean divides by the number of outcomes: the entropy is the sum of -p log p, not "
          "its mean.", entropy_mean),
    Entry("softmax_entropy", "wrong", "scipy_stats_renormalises",
          "scipy.stats.entropy renormalises each distribution first, so an all-zero "
          "distribution becomes 0/0 and gives NaN instead of 0.", entropy_scipy_stats),
    Entry("softmax_entropy", "right", "nansum_log", None, entropy_nansum),
    Entry("softmax_entropy", "right", "scipy_special_entr", None, entropy_special_entr),
    Entry("softmax_jacobian", "wrong", "transpose_of_1d_vector",
          "p.T does nothing to a 1-D array, so p @ p.T is the scalar p . p (inner product) "
          "subtracted from every entry instead of the outer product p p^T.", jac_dot_T),
    Entry("softmax_jacobian", "wrong", "p_squared_row",
          "p ** 2 is an elementwise square (n,), which broadcasts as the same row subtracted "
          "from every row, not the outer product p p^T.", jac_p_squared),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "The terms are the wrong way round: p p^T - diag(p) is the negative of the "
          "Jacobian.", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "mirror_doubles_diagonal",
          "The lower triangle is filled including the diagonal and then J + J.T is returned, "
          "so the diagonal entries are counted twice.", jac_symmetric_fill),
    Entry("softmax_jacobian", "wrong", "integer_matrix",
          "The matrix is allocated with dtype=int, so every float entry is truncated towards 0 "
          "when it is stored.", jac_int_matrix),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "It returns only the diagonal p(1-p), as for an elementwise sigmoid, forgetting the "
          "off-diagonal terms -p_i p_j that couple the outputs of a softmax.",
          jac_diagonal_only),
    Entry("softmax_jacobian", "right", "broadcast_closed_form", None, jac_broadcast_closed_form),
    Entry("softmax_jacobian", "right", "einsum_identity", None, jac_einsum),
]
