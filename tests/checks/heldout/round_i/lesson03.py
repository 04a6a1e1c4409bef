"""Lesson 03 (scaling): dot_product_variance, softmax_entropy, softmax_jacobian, numpy."""

import math

import numpy as np
import scipy.special
import scipy.stats

from entry import Entry


# ---------------------------------------------------------------- dot_product_variance
def _qk(d_k, n_samples, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_samples, d_k)), rng.standard_normal((n_samples, d_k))


def dpv_scaled(d_k, n_samples=100_000, seed=0):
    q, k = _qk(d_k, n_samples, seed)
    return float(np.var((q * k).sum(axis=1) / math.sqrt(d_k)))


def dpv_ignores_seed(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.einsum("sd,sd->s", q, k)))


def dpv_sums_samples(d_k, n_samples=100_000, seed=0):
    q, k = _qk(d_k, n_samples, seed)
    return float(np.var((q * k).sum(axis=0)))


def dpv_k_is_q(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var((q * k).sum(axis=-1)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    q, k = _qk(d_k, n_samples, seed)
    return float(np.std((q * k).sum(axis=-1)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=-1)))


def dpv_second_moment(d_k, n_samples=100_000, seed=0):
    q, k = _qk(d_k, n_samples, seed)
    dots = np.einsum("ij,ij->i", q, k)
    return float(np.mean(dots ** 2))


def dpv_ddof1_loop(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    k = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    dots = np.zeros(n_samples)
    for j in range(d_k):
        dots += q[:, j] * k[:, j]
    return float(np.var(dots, ddof=1))


# ---------------------------------------------------------------- softmax_entropy
def ent_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def ent_ignores_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=-1)


def ent_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return np.sum(p * logs, axis=axis)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis, keepdims=True)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.mean(p * logs, axis=axis)


def ent_scipy_stats(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights, dtype=float), axis=axis)


def ent_special_entr(weights, axis=-1):
    p = np.asarray(weights)
    return scipy.special.entr(p).sum(axis=axis)


def ent_nansum(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = p * np.log(p)
    return (-np.nansum(terms, axis=axis)).astype(np.asarray(weights).dtype)


# ---------------------------------------------------------------- softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_fill_diagonal(p):
    p = np.asarray(p, dtype=float)
    J = -np.outer(p, p)
    np.fill_diagonal(J, p)
    return J


def jac_lower_triangle(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] = p[i] * (1 - p[i])
        for j in range(i):
            J[i, j] = -p[i] * p[j]
    return J


def jac_loop(p):
    p = np.asarray(p)
    n = len(p)
    J = np.empty((n, n), dtype=p.dtype)
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return J


def jac_factored(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size, dtype=p.dtype) - p[None, :])


E = "dot_product_variance"
ENTRIES = [
    Entry(E, "wrong", "variance_of_scaled_dot", "It measures the variance of q.k/sqrt(d_k), "
          "which is about 1, instead of the unscaled q.k.", dpv_scaled),
    Entry(E, "wrong", "ignores_seed", "It creates default_rng() without the seed, so two calls "
          "with the same seed give different values.", dpv_ignores_seed),
    Entry(E, "wrong", "sums_over_samples", "The products are summed over the sample axis "
          "instead of the feature axis, so it measures the variance of d_k huge sums.",
          dpv_sums_samples),
    Entry(E, "wrong", "k_reuses_q", "k is set to q instead of an independent draw, so it "
          "measures the variance of |q|^2 (about 2 d_k).", dpv_k_is_q),
    Entry(E, "wrong", "std_not_var", "It returns the standard deviation (about sqrt(d_k)) "
          "instead of the variance.", dpv_std),
    Entry(E, "wrong", "uniform_samples", "It draws q and k with rng.random (uniform on [0, 1)) "
          "instead of standard normals.", dpv_uniform),
    Entry(E, "right", "mean_square_of_dots", None, dpv_second_moment),
    Entry(E, "right", "feature_loop_ddof1", None, dpv_ddof1_loop),
]

E = "softmax_entropy"
ENTRIES += [
    Entry(E, "wrong", "bits_not_nats", "It uses log2, giving the entropy in bits instead of "
          "nats.", ent_bits),
    Entry(E, "wrong", "ignores_axis", "The sum is taken over the last axis whatever axis is "
          "passed.", ent_ignores_axis),
    Entry(E, "wrong", "missing_minus", "The minus sign is dropped, so it returns sum p log p, "
          "the negative of the entropy.", ent_no_minus),
    Entry(E, "wrong", "keepdims_true", "The sum keeps the reduced axis (keepdims=True), so the "
          "result has an extra length-1 axis.", ent_keepdims),
    Entry(E, "wrong", "mean_not_sum", "It averages p log p over the axis instead of summing.",
          ent_mean),
    Entry(E, "wrong", "scipy_stats_entropy", "scipy.stats.entropy renormalises each slice, so "
          "the all-zero row becomes 0/0 and gives NaN instead of 0.", ent_scipy_stats),
    Entry(E, "right", "scipy_special_entr", None, ent_special_entr),
    Entry(E, "right", "nansum_float64", None, ent_nansum),
]

E = "softmax_jacobian"
ENTRIES += [
    Entry(E, "wrong", "inner_product", "p @ p is the scalar sum of squares, not the outer "
          "product p p^T, so the same number is subtracted everywhere.", jac_inner_product),
    Entry(E, "wrong", "elementwise_square", "p * p is elementwise, so the vector p_j^2 is "
          "broadcast down the rows instead of subtracting p_i p_j.", jac_elementwise_square),
    Entry(E, "wrong", "sign_flipped", "It computes p p^T - diag(p), the negative of the "
          "Jacobian.", jac_sign_flipped),
    Entry(E, "wrong", "identity_for_diag", "It uses the identity matrix where diag(p) belongs.",
          jac_identity),
    Entry(E, "wrong", "fill_diagonal_overwrites", "np.fill_diagonal overwrites the diagonal "
          "with p, losing the -p_i^2 term there (it should be p_i - p_i^2).", jac_fill_diagonal),
    Entry(E, "wrong", "lower_triangle_only", "The inner loop only fills j < i and never mirrors "
          "it, so the upper triangle stays zero.", jac_lower_triangle),
    Entry(E, "right", "double_loop_kronecker", None, jac_loop),
    Entry(E, "right", "factored_p_times_I_minus_p", None, jac_factored),
]
