"""Lesson 03 (numpy): dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
import scipy.special

from entry import Entry

# ------------------------------------------------------------------ dot_product_variance, wrong
_MODULE_RNG = np.random.default_rng(0)


def dpv_module_level_rng(d_k, n_samples=100_000, seed=0):
    q = _MODULE_RNG.standard_normal((n_samples, d_k))
    k = _MODULE_RNG.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1) / math.sqrt(d_k)))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var((q * k).sum(axis=1)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std((q * k).sum(axis=1)))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=0)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


# ------------------------------------------------------------------ dot_product_variance, right
def dpv_legacy_randomstate_ddof1(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    q = rs.randn(n_samples, d_k)
    k = rs.randn(n_samples, d_k)
    dots = np.einsum("ij,ij->i", q, k)
    return float(np.var(dots, ddof=1))


def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    dots = np.zeros(n_samples)
    for i in range(d_k):  # one coordinate at a time
        dots += rng.normal(size=n_samples) * rng.normal(size=n_samples)
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / n_samples)


# ------------------------------------------------------------------ softmax_entropy, wrong
def ent_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def ent_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=-1)


def ent_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return np.sum(p * logs, axis=axis)


def ent_nan_on_zero(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(p * np.log(p), axis=axis)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.mean(p * logs, axis=axis)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis, keepdims=True)


# ------------------------------------------------------------------ softmax_entropy, right
def ent_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def ent_loop_math(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        out[idx] = -sum(x * math.log(x) for x in p[idx] if x > 0)
    return out[()]


# ------------------------------------------------------------------ softmax_jacobian, wrong
def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_loop_upper_only(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    jac = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):  # meant to use symmetry, forgot to mirror
            jac[i, j] = p[i] * ((i == j) - p[j])
    return jac


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


# ------------------------------------------------------------------ softmax_jacobian, right
def jac_broadcast(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.shape[0], dtype=p.dtype) - p[None, :])


def jac_loops(p):
    n = len(p)
    jac = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            jac[i, j] = p[i] * (1.0 - p[i]) if i == j else -p[i] * p[j]
    return jac


ENTRIES = [
    Entry("dot_product_variance", "wrong", "generator_created_at_import", "Creates the random "
          "generator once at module level instead of from seed inside the function, so two "
          "calls with the same seed give different values.", dpv_module_level_rng),
    Entry("dot_product_variance", "wrong", "scaled_dot_product", "Divides the dot products by "
          "sqrt(d_k) before taking the variance, so it returns about 1 instead of about d_k.",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "k_is_q", "Draws only one matrix and uses it for both "
          "q and k, so it measures the variance of |q|^2 (about 2 d_k).", dpv_same_vector),
    Entry("dot_product_variance", "wrong", "standard_deviation", "Returns the standard deviation "
          "of the dot products instead of their variance.", dpv_std),
    Entry("dot_product_variance", "wrong", "sums_over_samples_axis", "Sums q*k over the samples "
          "axis (axis 0) instead of the feature axis, so it takes the variance of d_k sums of "
          "n_samples products.", dpv_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "uniform_draws", "Draws q and k with rng.random "
          "(uniform on [0, 1)) instead of standard normal.", dpv_uniform),
    Entry("dot_product_variance", "right", "randomstate_einsum_ddof1", None,
          dpv_legacy_randomstate_ddof1),
    Entry("dot_product_variance", "right", "coordinate_loop_manual_variance", None,
          dpv_manual_moments),

    Entry("softmax_entropy", "wrong", "log_base_2", "Uses log2, giving the entropy in bits "
          "instead of nats.", ent_log2),
    Entry("softmax_entropy", "wrong", "sums_last_axis", "Sums over the last axis regardless of "
          "the axis argument.", ent_last_axis),
    Entry("softmax_entropy", "wrong", "missing_minus_sign", "Forgets the minus sign, returning "
          "sum p log p (negative) instead of the entropy.", ent_no_minus),
    Entry("softmax_entropy", "wrong", "nan_for_zero_weights", "Computes p * log(p) directly, so "
          "zero weights give 0 * -inf = NaN instead of contributing 0.", ent_nan_on_zero),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum", "Averages -p log p over the axis "
          "instead of summing it.", ent_mean),
    Entry("softmax_entropy", "wrong", "keepdims_true", "Sums with keepdims=True, so the reduced "
          "axis is kept with size 1 and the shape is wrong.", ent_keepdims),
    Entry("softmax_entropy", "right", "scipy_entr", None, ent_scipy_entr),
    Entry("softmax_entropy", "right", "python_loop_math_log", None, ent_loop_math),

    Entry("softmax_jacobian", "wrong", "sign_flipped", "Returns p p^T - diag(p), the negative of "
          "the Jacobian.", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "elementwise_square", "Subtracts the elementwise square "
          "p * p (broadcast over rows) instead of the outer product p p^T.",
          jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "inner_product", "Subtracts the scalar p @ p (an inner "
          "product) from every entry instead of the outer product.", jac_inner_product),
    Entry("softmax_jacobian", "wrong", "diagonal_only", "Keeps only the diagonal p_i (1 - p_i) "
          "and leaves out the off-diagonal -p_i p_j terms.", jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "loop_fills_upper_triangle", "The double loop starts j "
          "at i to exploit symmetry but never mirrors, leaving the lower triangle zero.",
          jac_loop_upper_only),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag", "Uses the identity matrix "
          "instead of diag(p).", jac_identity),
    Entry("softmax_jacobian", "right", "broadcast_p_times_eye_minus_p", None, jac_broadcast),
    Entry("softmax_jacobian", "right", "double_loop", None, jac_loops),
]
