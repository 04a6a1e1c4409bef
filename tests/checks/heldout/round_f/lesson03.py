"""Lesson 03 (numpy): dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ---------------------------------------------------------------- dot_product_variance, wrong
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1) / math.sqrt(d_k)))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std((q * k).sum(axis=1)))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q  # meant to draw a second vector
    return float(np.var((q * k).sum(axis=1)))


def dpv_mean_over_dims(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).mean(axis=1)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


# ---------------------------------------------------------------- dot_product_variance, right
def dpv_legacy_rng_ddof1(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    qk = rs.normal(size=(2, n_samples, d_k))
    dots = np.einsum("nd,nd->n", qk[0], qk[1])
    return float(np.var(dots, ddof=1))


def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    total = 0.0
    total_sq = 0.0
    chunk = 10_000
    done = 0
    while done < n_samples:
        m = min(chunk, n_samples - done)
        q = rng.normal(0.0, 1.0, size=(m, d_k))
        k = rng.normal(0.0, 1.0, size=(m, d_k))
        dots = np.sum(q * k, axis=1)
        total += dots.sum()
        total_sq += (dots ** 2).sum()
        done += m
    mean = total / n_samples
    return total_sq / n_samples - mean ** 2


# ---------------------------------------------------------------- softmax_entropy, wrong
def _safe_log(p, log=np.log):
    out = np.zeros_like(p, dtype=float)
    np.copyto(out, log(np.where(p > 0, p, 1.0)))
    return out


def ent_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * _safe_log(p, np.log2), axis=axis)


def ent_nan_zero(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(p * np.log(p), axis=axis)


def ent_axis_ignored(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * _safe_log(p), axis=-1)


def ent_missing_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return np.sum(p * _safe_log(p), axis=axis)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * _safe_log(p), axis=axis, keepdims=True)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.mean(p * _safe_log(p), axis=axis)


# ---------------------------------------------------------------- softmax_entropy, right
def ent_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def ent_masked_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        h = 0.0
        for w in p[idx]:
            if w > 0:
                h -= w * math.log(w)
        out[idx] = h
    return out[()]  # a 0-d result comes back as a scalar


# ---------------------------------------------------------------- softmax_jacobian, wrong
def jac_plus(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) + np.outer(p, p)


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_diag_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_inner(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_elementwise(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_index_slip(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[i])
    return J


# ---------------------------------------------------------------- softmax_jacobian, right
def jac_loops(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * (i == j) - p[i] * p[j]
    return J


def jac_column_form(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size, dtype=p.dtype) - p[None, :])


E = Entry
ENTRIES = [
    E("dot_product_variance", "wrong", "variance_of_scaled_score",
      "Divides the dot products by sqrt(d_k) before taking the variance, so it returns about "
      "1 instead of the unscaled d_k.", dpv_scaled),
    E("dot_product_variance", "wrong", "seed_ignored",
      "Creates the generator without the seed argument, so two calls with the same seed give "
      "different values.", dpv_unseeded),
    E("dot_product_variance", "wrong", "standard_deviation",
      "Returns the standard deviation (about sqrt(d_k)) instead of the variance.", dpv_std),
    E("dot_product_variance", "wrong", "q_reused_as_k",
      "Uses the same sample for q and k, so it measures var(|q|^2), about 2 d_k.",
      dpv_same_vector),
    E("dot_product_variance", "wrong", "mean_over_coordinates",
      "Averages the coordinate products (mean) instead of summing them, so the variance comes "
      "out about 1/d_k.", dpv_mean_over_dims),
    E("dot_product_variance", "wrong", "uniform_samples",
      "Draws q and k with rng.random (uniform on [0, 1)) instead of standard normals.",
      dpv_uniform),
    E("dot_product_variance", "right", "legacy_randomstate_ddof1", None, dpv_legacy_rng_ddof1),
    E("dot_product_variance", "right", "chunked_running_moments", None, dpv_manual_moments),

    E("softmax_entropy", "wrong", "log_base_2",
      "Uses log2, giving the entropy in bits instead of nats.", ent_log2),
    E("softmax_entropy", "wrong", "zero_weights_give_nan",
      "Computes p * log(p) directly, so zero weights give 0 * -inf = NaN.", ent_nan_zero),
    E("softmax_entropy", "wrong", "axis_argument_ignored",
      "Ignores `axis` and always sums over the last axis.", ent_axis_ignored),
    E("softmax_entropy", "wrong", "missing_minus_sign",
      "Forgets the minus sign, returning sum p log p (negative entropy).", ent_missing_minus),
    E("softmax_entropy", "wrong", "keepdims_true",
      "Sums with keepdims=True, leaving a length-1 axis where the distribution axis was.",
      ent_keepdims),
    E("softmax_entropy", "wrong", "mean_instead_of_sum",
      "Averages -p log p over the distribution axis instead of summing it.", ent_mean),
    E("softmax_entropy", "right", "scipy_entr", None, ent_scipy_entr),
    E("softmax_entropy", "right", "python_loop_skip_zeros", None, ent_masked_loop),

    E("softmax_jacobian", "wrong", "plus_outer_product",
      "Adds the outer product instead of subtracting it: diag(p) + p p^T.", jac_plus),
    E("softmax_jacobian", "wrong", "identity_instead_of_diag",
      "Uses the identity matrix where diag(p) belongs: I - p p^T.", jac_identity),
    E("softmax_jacobian", "wrong", "diagonal_only",
      "Keeps only the diagonal entries p_i (1 - p_i) and leaves the off-diagonal -p_i p_j "
      "entries at zero.", jac_diag_only),
    E("softmax_jacobian", "wrong", "inner_product_for_1d",
      "Writes p @ p.T for a 1-D p, which is the scalar inner product, so the same number is "
      "subtracted from every entry.", jac_inner),
    E("softmax_jacobian", "wrong", "elementwise_square",
      "Subtracts the elementwise square p * p (broadcast along rows) instead of the outer "
      "product p p^T.", jac_elementwise),
    E("softmax_jacobian", "wrong", "index_slip_p_i_twice",
      "In the double loop writes p[i] * (delta_ij - p[i]) instead of p[i] * (delta_ij - p[j]).",
      jac_index_slip),
    E("softmax_jacobian", "right", "double_loop", None, jac_loops),
    E("softmax_jacobian", "right", "column_times_eye_minus_row", None, jac_column_form),
]
