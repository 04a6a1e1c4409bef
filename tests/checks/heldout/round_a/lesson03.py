"""Lesson 03 (numpy): dot_product_variance, softmax_entropy, softmax_jacobian, as learners write
them."""

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------- dot_product_variance: wrong
def variance_of_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=1) / np.sqrt(d_k)
    return float(np.var(dots))


def variance_returns_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.sum(q * k, axis=1)))


def variance_ignores_seed(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


def variance_sums_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=0)))


def variance_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


def variance_of_products_not_dots(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def variance_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q  # "k is drawn the same way"
    return float(np.var(np.einsum("sd,sd->s", q, k)))


# ----------------------------------------------------------------------- dot_product_variance: right
def variance_float32_ddof1(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k), dtype=np.float32)
    k = rng.standard_normal((n_samples, d_k), dtype=np.float32)
    dots = np.einsum("sd,sd->s", q, k).astype(np.float64)
    return float(dots.var(ddof=1))


def variance_chunked_merge(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    count, mean, m2 = 0, 0.0, 0.0
    for start in range(0, n_samples, 8192):
        size = min(8192, n_samples - start)
        dots = (rng.normal(0.0, 1.0, (size, d_k)) * rng.normal(0.0, 1.0, (size, d_k))).sum(1)
        # merge this chunk's mean and sum of squared deviations into the running ones (Chan)
        c_mean, c_m2 = float(dots.mean()), float(((dots - dots.mean()) ** 2).sum())
        delta = c_mean - mean
        total = count + size
        mean += delta * size / total
        m2 += c_m2 + delta * delta * count * size / total
        count = total
    return m2 / count


# ----------------------------------------------------------------------- softmax_entropy: wrong
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log2(safe), axis=axis)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return np.sum(p * np.log(safe), axis=axis)


def entropy_nan_on_zeros(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_ignores_axis(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=-1)


def entropy_mean_not_sum(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -np.mean(p * np.log(safe), axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis, keepdims=True)


def entropy_log_of_sum(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(np.log(safe), axis=axis)  # forgot to weight the logs by p


# ----------------------------------------------------------------------- softmax_entropy: right
def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_where_after_log(weights, axis=-1):
    p = np.asarray(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)  # 0 * log 0 computed, then replaced
    return -terms.sum(axis=axis)


# ----------------------------------------------------------------------- softmax_jacobian: wrong
def jacobian_missing_diag(p):
    p = np.asarray(p)
    return -np.outer(p, p)


def jacobian_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p


def jacobian_only_diagonal(p):
    p = np.asarray(p)
    return np.diag(p * (1 - p))


def jacobian_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jacobian_elementwise_square(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jacobian_identity_instead_of_diag(p):
    p = np.asarray(p)
    return np.eye(len(p)) - np.outer(p, p)


# ----------------------------------------------------------------------- softmax_jacobian: right
def jacobian_double_loop(p):
    p = np.asarray(p)
    n = p.shape[0]
    jac = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            jac[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return jac


def jacobian_broadcast(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.shape[0], dtype=p.dtype) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "variance_of_scaled",
          "Divides the dot products by sqrt(d_k) before taking the variance, so it measures the "
          "scaled score (about 1), not the raw q . k.", variance_of_scaled),
    Entry("dot_product_variance", "wrong", "returns_std",
          "Returns the standard deviation (np.std) instead of the variance.",
          variance_returns_std),
    Entry("dot_product_variance", "wrong", "ignores_seed",
          "Creates the generator without the seed, so two calls with the same seed give "
          "different numbers.", variance_ignores_seed),
    Entry("dot_product_variance", "wrong", "sums_over_samples",
          "Sums q * k over the sample axis (axis=0) instead of the feature axis, so it takes "
          "the variance of d_k sums of n_samples products.", variance_sums_wrong_axis),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "Draws q and k with rng.random (uniform on [0, 1)) instead of standard normals.",
          variance_uniform_draws),
    Entry("dot_product_variance", "wrong", "variance_of_products",
          "Takes the variance of the element-wise products q * k without summing them into dot "
          "products.", variance_of_products_not_dots),
    Entry("dot_product_variance", "wrong", "same_vector_for_q_and_k",
          "Uses the same draws for q and k, so it measures the variance of |q|^2 (about 2 d_k) "
          "instead of that of q . k for independent vectors.", variance_same_vector),
    Entry("dot_product_variance", "right", "float32_ddof1", None, variance_float32_ddof1),
    Entry("dot_product_variance", "right", "chunked_merge", None, variance_chunked_merge),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "Uses log2, giving the entropy in bits instead of nats.", entropy_log2),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "Forgets the minus sign: returns sum p log p, which is negative.", entropy_no_minus),
    Entry("softmax_entropy", "wrong", "nan_on_zero_weights",
          "Computes p * log(p) directly, so a zero weight gives 0 * -inf = NaN instead of 0.",
          entropy_nan_on_zeros),
    Entry("softmax_entropy", "wrong", "ignores_axis",
          "Ignores the axis argument and always sums over the last axis.", entropy_ignores_axis),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "Averages -p log p over the axis instead of summing it.", entropy_mean_not_sum),
    Entry("softmax_entropy", "wrong", "keepdims",
          "Sums with keepdims=True, so the reduced axis is kept with length 1 instead of "
          "removed.", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "unweighted_logs",
          "Sums -log p without weighting each term by p.", entropy_log_of_sum),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "where_after_log", None, entropy_where_after_log),

    Entry("softmax_jacobian", "wrong", "missing_diag",
          "Leaves out diag(p) and returns only -p p^T.", jacobian_missing_diag),
    Entry("softmax_jacobian", "wrong", "inner_product",
          "Subtracts the scalar p . p instead of the outer product p p^T.",
          jacobian_inner_product),
    Entry("softmax_jacobian", "wrong", "only_diagonal",
          "Keeps only the diagonal p_i (1 - p_i) and drops the off-diagonal -p_i p_j terms.",
          jacobian_only_diagonal),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "Returns p p^T - diag(p), the negative of the Jacobian.", jacobian_sign_flipped),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "Writes p * p (element-wise, a vector broadcast over the rows) for p p^T.",
          jacobian_elementwise_square),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag",
          "Uses the identity matrix instead of diag(p).", jacobian_identity_instead_of_diag),
    Entry("softmax_jacobian", "right", "double_loop", None, jacobian_double_loop),
    Entry("softmax_jacobian", "right", "broadcast", None, jacobian_broadcast),
]
