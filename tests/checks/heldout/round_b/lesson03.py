"""Lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ dot_product_variance
def dpv_w_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(-1) / math.sqrt(d_k)))


def dpv_w_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()  # the seed argument is never used
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def dpv_w_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std((q * k).sum(-1)))


def dpv_w_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def dpv_w_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=0)))


def dpv_w_elementwise_var(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))  # variance of the products, not of their sums


def dpv_w_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * q).sum(-1)))  # q . q: k drawn as the same vector


def dpv_r_legacy_seed(d_k, n_samples=100_000, seed=0):
    np.random.seed(seed)
    q = np.random.randn(n_samples, d_k)
    k = np.random.randn(n_samples, d_k)
    return float(np.einsum("nd,nd->n", q, k).var())


def dpv_r_float32_ddof(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k), dtype=np.float32)
    k = rng.standard_normal((n_samples, d_k), dtype=np.float32)
    dots = (q.astype(np.float64) * k).sum(axis=1)
    mean = dots.mean()
    return float(((dots - mean) ** 2).sum() / (n_samples - 1))


# ============================================================================ softmax_entropy
def se_w_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    return -np.sum(np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0), axis=axis)


def se_w_nan_zero(weights, axis=-1):
    return -np.sum(weights * np.log(weights), axis=axis)


def se_w_axis_ignored(weights, axis=-1):
    logs = np.log(np.where(weights > 0, weights, 1.0))
    return -np.sum(weights * logs, axis=-1)


def se_w_no_minus(weights, axis=-1):
    logs = np.log(np.where(weights > 0, weights, 1.0))
    return np.sum(weights * logs, axis=axis)


def se_w_mean(weights, axis=-1):
    logs = np.log(np.where(weights > 0, weights, 1.0))
    return -np.mean(weights * logs, axis=axis)


def se_w_keepdims(weights, axis=-1):
    logs = np.log(np.where(weights > 0, weights, 1.0))
    return -np.sum(weights * logs, axis=axis, keepdims=True)


def se_w_eps_everywhere(weights, axis=-1):
    # adds eps to every weight, including the nonzero ones, with a large eps "for safety"
    return -np.sum(weights * np.log(weights + 1e-2), axis=axis)


def se_r_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(weights), axis=axis)


def se_r_xlogy(weights, axis=-1):
    return -np.sum(scipy.special.xlogy(weights, weights), axis=axis)


def se_r_where(weights, axis=-1):
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(weights > 0, weights * np.log(weights), 0.0)
    return -terms.sum(axis=axis)


# ============================================================================ softmax_jacobian
def sj_w_plus(p):
    return np.diag(p) + np.outer(p, p)


def sj_w_diag_only(p):
    return np.diag(p * (1 - p))


def sj_w_np_dot(p):
    return np.diag(p) - np.dot(p, p)  # inner product, broadcast as a scalar


def sj_w_elementwise_square(p):
    return np.diag(p) - p * p  # a vector broadcast along rows


def sj_w_identity(p):
    return np.eye(len(p)) - np.outer(p, p)


def sj_w_diag_minus_p(p):
    return np.diag(p) - p  # p p^T written as p


def sj_w_matrix_T_1d(p):
    return np.diag(p) - p @ p.T  # .T does nothing on a 1-D array


def sj_r_loops(p):
    n = len(p)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            out[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return out


def sj_r_broadcast(p):
    return p[:, None] * (np.eye(p.shape[0]) - p[None, :])


def sj_r_diagflat_einsum(p):
    return np.diagflat(p) - np.einsum("i,j->ij", p, p)


E = Entry
ENTRIES = [
    E("dot_product_variance", "wrong", "scaled_dot",
      "Divides the dot products by sqrt(d_k) before taking the variance, giving about 1.",
      dpv_w_scaled),
    E("dot_product_variance", "wrong", "seed_unused",
      "Creates the generator without the seed, so two calls give different numbers.",
      dpv_w_unseeded),
    E("dot_product_variance", "wrong", "std_not_variance",
      "Returns the standard deviation (about sqrt(d_k)) instead of the variance.", dpv_w_std),
    E("dot_product_variance", "wrong", "uniform_samples",
      "Draws q and k uniformly in [0, 1) instead of from a standard normal.", dpv_w_uniform),
    E("dot_product_variance", "wrong", "sums_over_samples",
      "Sums q*k over the sample axis instead of the feature axis.", dpv_w_sum_wrong_axis),
    E("dot_product_variance", "wrong", "variance_of_products",
      "Takes the variance of the individual products q_i k_i rather than of their sum.",
      dpv_w_elementwise_var),
    E("dot_product_variance", "wrong", "k_is_q",
      "Reuses the same sample for q and k, measuring q . q instead of two independent "
      "vectors.", dpv_w_same_vector),
    E("dot_product_variance", "right", "legacy_np_random_seed", None, dpv_r_legacy_seed),
    E("dot_product_variance", "right", "float32_samples_ddof1", None, dpv_r_float32_ddof),
    E("softmax_entropy", "wrong", "log2_bits",
      "Uses log2, giving the entropy in bits instead of nats.", se_w_bits),
    E("softmax_entropy", "wrong", "nan_on_zero_weights",
      "Computes p * log(p) directly, so zero weights give 0 * -inf = NaN.", se_w_nan_zero),
    E("softmax_entropy", "wrong", "axis_ignored",
      "Always sums along the last axis, ignoring the axis argument.", se_w_axis_ignored),
    E("softmax_entropy", "wrong", "missing_minus",
      "Forgets the minus sign, returning negative entropies.", se_w_no_minus),
    E("softmax_entropy", "wrong", "mean_not_sum",
      "Averages -p log p along the axis instead of summing it.", se_w_mean),
    E("softmax_entropy", "wrong", "keepdims_left_on",
      "Sums with keepdims=True, returning an extra axis of size 1.", se_w_keepdims),
    E("softmax_entropy", "wrong", "large_epsilon_in_log",
      "Adds 1e-2 inside the log to avoid log(0), which biases every term.",
      se_w_eps_everywhere),
    E("softmax_entropy", "right", "scipy_entr", None, se_r_entr),
    E("softmax_entropy", "right", "scipy_xlogy", None, se_r_xlogy),
    E("softmax_entropy", "right", "np_where_guard", None, se_r_where),
    E("softmax_jacobian", "wrong", "plus_outer",
      "Adds the outer product instead of subtracting it.", sj_w_plus),
    E("softmax_jacobian", "wrong", "diagonal_only",
      "Returns only the diagonal p(1-p) and zero off-diagonal entries.", sj_w_diag_only),
    E("softmax_jacobian", "wrong", "np_dot_is_inner",
      "Uses np.dot(p, p), which for vectors is the inner product, not the outer product.",
      sj_w_np_dot),
    E("softmax_jacobian", "wrong", "elementwise_square",
      "Subtracts p * p (a vector broadcast along the rows) instead of the outer product.",
      sj_w_elementwise_square),
    E("softmax_jacobian", "wrong", "identity_for_diag",
      "Uses the identity matrix where diag(p) belongs.", sj_w_identity),
    E("softmax_jacobian", "wrong", "subtracts_p",
      "Subtracts p (broadcast along the rows) instead of p p^T.", sj_w_diag_minus_p),
    E("softmax_jacobian", "wrong", "transpose_of_1d",
      "Writes p @ p.T as for column vectors; on a 1-D array it is the inner product.",
      sj_w_matrix_T_1d),
    E("softmax_jacobian", "right", "double_loop", None, sj_r_loops),
    E("softmax_jacobian", "right", "broadcast_identity", None, sj_r_broadcast),
    E("softmax_jacobian", "right", "diagflat_einsum", None, sj_r_diagflat_einsum),
]
