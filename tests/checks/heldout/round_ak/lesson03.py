"""Held-out catalogue, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

import math

import numpy as np
import scipy.special
import scipy.stats

from entry import Entry


# ============================================================================ dot_product_variance
def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=-1) / np.sqrt(d_k)
    return float(dots.var())


def dpv_products_not_summed(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    q = gen.standard_normal(size=(n_samples, d_k))
    k = gen.standard_normal(size=(n_samples, d_k))
    return float(np.var(q * k))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qs = rng.standard_normal((n_samples, d_k))
    ks = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("nd,nd->n", qs, ks)))


def dpv_moments_by_hand(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1)
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / (n_samples - 1))


def dpv_stacked_pairs(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    pairs = gen.standard_normal(size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pairs[0], pairs[1])
    return float(np.var(dots, ddof=1))


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.zeros_like(p)
    pos = p > 0
    terms[pos] = p[pos] * np.log(p[pos])
    return -terms.sum(axis=-1)


def entropy_no_minus(weights, axis=-1):
    w = np.asarray(weights)
    plogp = np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0)
    return np.sum(plogp, axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -np.mean(p * np.log(safe), axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=axis, keepdims=True)


def entropy_scipy_stats(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights), axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_python_loop(weights, axis=-1):
    arr = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    result = np.zeros(arr.shape[:-1])
    for idx in np.ndindex(arr.shape[:-1]):
        h = 0.0
        for pi in arr[idx]:
            if pi > 0:
                h -= pi * math.log(pi)
        result[idx] = h
    return result[()]


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p


def jac_broadcast_square(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_sigmoid_diagonal(p):
    p = np.asarray(p)
    return np.diag(p * (1 - p))


def jac_identity_for_diag(p):
    p = np.asarray(p)
    n = p.shape[0]
    return np.eye(n) - np.outer(p, p)


def jac_lower_triangle_only(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] = p[i] - p[i] * p[i]
        for j in range(i):
            J[i, j] = -p[i] * p[j]
    return J


def jac_kronecker_loop(p):
    vals = [float(v) for v in p]
    n = len(vals)
    rows = [[vals[i] * ((1.0 if i == j else 0.0) - vals[j]) for j in range(n)]
            for i in range(n)]
    return np.array(rows, dtype=np.float64)


def jac_factored(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size, dtype=p.dtype) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "rng_not_seeded",
          "creates np.random.default_rng() without the seed, so two calls with the same seed "
          "return different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance d_k", dpv_scaled),
    Entry("dot_product_variance", "wrong", "variance_of_products",
          "takes the variance of the elementwise products q*k without summing them into dot "
          "products, so it returns about 1 whatever d_k is", dpv_products_not_summed),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "sums q*k over axis 0 (the samples) instead of axis 1 (the d_k components), so it "
          "returns the variance of just d_k sums of n_samples terms each (0 for d_k=1, of the "
          "order of n_samples otherwise)",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "uniform_not_normal",
          "draws q and k with rng.random, uniform on [0, 1), instead of standard normals, so "
          "the variance is about 7 d_k / 144", dpv_uniform_draws),
    Entry("dot_product_variance", "wrong", "std_not_variance",
          "returns the standard deviation (np.std) of the dot products, about sqrt(d_k), "
          "instead of their variance", dpv_std),
    Entry("dot_product_variance", "right", "moments_by_hand_ddof1", None, dpv_moments_by_hand),
    Entry("dot_product_variance", "right", "stacked_pairs_einsum", None, dpv_stacked_pairs),

    Entry("softmax_entropy", "wrong", "log_base_2",
          "uses np.log2, so the entropy is in bits instead of nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "sum_over_last_axis",
          "ignores `axis` and always sums over the last axis", entropy_last_axis),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "forgets the minus sign: returns sum p log p, which is minus the entropy",
          entropy_no_minus),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "averages -p log p over the axis (np.mean) instead of summing it", entropy_mean),
    Entry("softmax_entropy", "wrong", "keepdims_true",
          "sums with keepdims=True, so the reduced axis is kept with length 1 instead of "
          "removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "scipy_stats_renormalises",
          "uses scipy.stats.entropy, which renormalises each distribution first, so an "
          "all-zero weight row (a fully masked row) gives NaN instead of 0", entropy_scipy_stats),
    Entry("softmax_entropy", "right", "scipy_special_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python_loop_moveaxis", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "p_at_p_is_inner_product",
          "writes p @ p for the outer product, but @ on two vectors is the inner product, so a "
          "scalar sum p_i^2 is subtracted from every entry", jac_inner_product),
    Entry("softmax_jacobian", "wrong", "p_times_p_broadcast",
          "writes p * p for p p^T, which is the elementwise square (n,), broadcast along the "
          "rows, so entry (i, j) subtracts p_j^2 instead of p_i p_j", jac_broadcast_square),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "sigmoid_style_diagonal",
          "treats softmax like an elementwise sigmoid: returns only the diagonal p(1-p) and "
          "leaves out the off-diagonal -p_i p_j", jac_sigmoid_diagonal),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag_p",
          "uses the identity matrix where diag(p) belongs: I - p p^T", jac_identity_for_diag),
    Entry("softmax_jacobian", "wrong", "lower_triangle_only",
          "fills only the diagonal and the entries j < i, forgetting the matrix is symmetric, so "
          "the upper triangle stays 0", jac_lower_triangle_only),
    Entry("softmax_jacobian", "right", "kronecker_loop", None, jac_kronecker_loop),
    Entry("softmax_jacobian", "right", "factored_p_times_I_minus_p", None, jac_factored),
]
