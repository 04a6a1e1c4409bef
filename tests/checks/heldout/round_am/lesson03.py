"""Held-out catalogue, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

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
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    queries = rng.normal(size=(n_samples, d_k))
    keys = rng.normal(size=(n_samples, d_k))
    products = np.sum(queries * queries, axis=-1)
    return float(np.var(products))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.standard_normal((2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pairs[0], pairs[1])
    return float(np.std(dots))


def dpv_legacy_global_seed(d_k, n_samples=100_000, seed=0):
    np.random.seed(seed)
    q = np.random.randn(n_samples, d_k)
    k = np.random.randn(n_samples, d_k)
    dots = (q * k).sum(axis=1)
    return float(np.var(dots, ddof=1))


def dpv_moments(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    draws = gen.normal(0.0, 1.0, size=(n_samples, 2, d_k))
    dots = np.einsum("si,si->s", draws[:, 0], draws[:, 1])
    mean = dots.mean()
    return float(np.mean(dots ** 2) - mean ** 2)


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logp = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logp, axis=axis)


def entropy_no_zero_guard(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=axis)


def entropy_last_axis(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    safe = np.where(w > 0, w, 1.0)
    return -(w * np.log(safe)).sum(-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis, keepdims=True)


def entropy_scipy_stats(weights, axis=-1):
    return stats.entropy(np.asarray(weights, dtype=float), axis=axis)


def entropy_entr(weights, axis=-1):
    return special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_python_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        out[idx] = -sum(v * math.log(v) for v in p[idx] if v > 0)
    return out[()]  # a plain scalar for a single distribution


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_elementwise(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_no_diag(p):
    p = np.asarray(p, dtype=float)
    return p - np.outer(p, p)


def jac_sign(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_row_factor_twice(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    return p[:, None] * (np.eye(n) - p[:, None])


def jac_loop_skips_diagonal(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] = p[i]
        for j in range(i):
            J[i, j] = J[j, i] = -p[i] * p[j]
    return J


def jac_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.shape[0])
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


def jac_kronecker_loops(p):
    vals = [float(v) for v in np.asarray(p)]
    n = len(vals)
    rows = [[vals[i] * ((1.0 if i == j else 0.0) - vals[j]) for j in range(n)] for i in range(n)]
    return np.array(rows, dtype=np.float64).reshape(n, n)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k) before taking the variance, so it measures the "
          "scaled scores (about 1) instead of the unscaled q . k (about d_k)", dpv_scaled),
    Entry("dot_product_variance", "wrong", "seed_not_used",
          "creates np.random.default_rng() without the seed, so two calls with the same seed "
          "give different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "query_dotted_with_itself",
          "draws keys but then multiplies the queries by themselves (q . q), whose variance is "
          "2*d_k, not d_k", dpv_same_vector),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "sums the products over axis 0 (the samples) instead of axis 1 (the d_k features), so "
          "it returns the variance of d_k sums of n_samples products", dpv_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "uses rng.random, which draws uniform [0, 1) numbers, instead of standard normal "
          "ones, so the products have the wrong mean and variance", dpv_uniform),
    Entry("dot_product_variance", "wrong", "returns_std",
          "returns the standard deviation (about sqrt(d_k)) instead of the variance", dpv_std),
    Entry("dot_product_variance", "right", "legacy_global_seed_ddof1", None,
          dpv_legacy_global_seed),
    Entry("dot_product_variance", "right", "second_moment_minus_mean_sq", None, dpv_moments),

    Entry("softmax_entropy", "wrong", "log_base_2",
          "uses log2, so the entropy comes out in bits instead of nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "zero_weights_give_nan",
          "computes p * log(p) with no guard, so a zero weight gives 0 * -inf = NaN instead of 0",
          entropy_no_zero_guard),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "forgets the minus sign: returns sum p log p, which is minus the entropy",
          entropy_no_minus),
    Entry("softmax_entropy", "wrong", "axis_ignored",
          "always sums over the last axis, ignoring the `axis` argument", entropy_last_axis),
    Entry("softmax_entropy", "wrong", "keepdims_true",
          "sums with keepdims=True, so the reduced axis stays in the result's shape instead of "
          "being removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "scipy_stats_renormalises",
          "scipy.stats.entropy renormalises each distribution first, so an all-zero row becomes "
          "0/0 and gives NaN instead of 0", entropy_scipy_stats),
    Entry("softmax_entropy", "right", "scipy_special_entr", None, entropy_entr),
    Entry("softmax_entropy", "right", "python_loop_skip_zeros", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "inner_product_not_outer",
          "p @ p.T of a 1-D vector is the scalar sum p_i^2, not the outer product, so the same "
          "number is subtracted from every entry", jac_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p (the vector of squares, broadcast along the rows) instead of the "
          "outer product p p^T", jac_elementwise),
    Entry("softmax_jacobian", "wrong", "vector_instead_of_diag",
          "subtracts from the vector p broadcast along the rows instead of from diag(p)",
          jac_no_diag),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jac_sign),
    Entry("softmax_jacobian", "wrong", "column_index_uses_p_i",
          "in p_i (delta_ij - p_j) the second p is broadcast as a column, giving "
          "p_i (delta_ij - p_i)", jac_row_factor_twice),
    Entry("softmax_jacobian", "wrong", "loop_skips_diagonal_term",
          "the loop over j < i never reaches j = i, so the diagonal keeps p_i instead of "
          "p_i - p_i^2", jac_loop_skips_diagonal),
    Entry("softmax_jacobian", "right", "einsum_diag_minus_outer", None, jac_einsum),
    Entry("softmax_jacobian", "right", "kronecker_delta_lists", None, jac_kronecker_loops),
]
