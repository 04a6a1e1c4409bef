"""Round d, lesson 03 (numpy): dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- dot_product_variance
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1) / np.sqrt(d_k)))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    q = np.random.randn(n_samples, d_k)
    k = np.random.randn(n_samples, d_k)
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.einsum("sd,sd->s", q, k)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("sd,sd->s", q, k)))


def dpv_products_not_summed(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var(np.sum(q * k, axis=1)))


def dpv_ddof1(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    k = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    return float(np.var((q * k).sum(axis=1), ddof=1))


def dpv_chunked_randomstate(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    total = total_sq = 0.0
    done = 0
    while done < n_samples:
        m = min(10_000, n_samples - done)
        q = rs.standard_normal((m, d_k))
        k = rs.standard_normal((m, d_k))
        dots = np.einsum("ij,ij->i", q, k)
        total += dots.sum()
        total_sq += (dots ** 2).sum()
        done += m
    mean = total / n_samples
    return float(total_sq / n_samples - mean * mean)


# ----------------------------------------------------------------------------- softmax_entropy
def ent_log2(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def ent_nan_on_zero(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(p * np.log(p), axis=axis)


def ent_ignores_axis(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logs, axis=-1)


def ent_no_minus(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(np.where(p > 0, p, 1.0))
    return np.sum(p * logs, axis=axis)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.mean(p * logs, axis=axis)


def ent_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def ent_xlogy_float64(weights, axis=-1):
    p = np.asarray(weights)
    return (-scipy.special.xlogy(p.astype(np.float64), p.astype(np.float64))
            .sum(axis=axis)).astype(p.dtype)


# ----------------------------------------------------------------------------- softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_forgets_p_i(p):
    p = np.asarray(p)
    return np.eye(p.size) - p[None, :]


def jac_broadcast_wrong_side(p):
    p = np.asarray(p)
    return p * (np.eye(p.size) - p)


def jac_diagonal_only(p):
    p = np.asarray(p)
    return p - p ** 2


def jac_softmax_again(p):
    p = np.asarray(p, dtype=float)
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_einsum(p):
    p = np.asarray(p)
    n = p.shape[0]
    return np.einsum("i,ij->ij", p, np.eye(n, dtype=p.dtype)) - np.einsum("i,j->ij", p, p)


def jac_loops(p):
    p = np.asarray(p)
    n = len(p)
    out = np.zeros((n, n), dtype=p.dtype)
    for i in range(n):
        for j in range(n):
            out[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return out


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dot_product",
          "Divides the dot products by sqrt(d_k) before taking the variance, so the result is about 1, not d_k.",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "ignores_seed",
          "Draws from the global np.random state instead of a generator seeded with seed, so results are not reproducible.",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "uniform_samples",
          "Draws q and k from a uniform distribution (rand) instead of a standard normal (randn).",
          dpv_uniform),
    Entry("dot_product_variance", "wrong", "standard_deviation",
          "Returns the standard deviation of the dot products instead of their variance.",
          dpv_std),
    Entry("dot_product_variance", "wrong", "products_not_summed",
          "Takes the variance of the element-wise products q_i k_i instead of their sum over d_k.",
          dpv_products_not_summed),
    Entry("dot_product_variance", "wrong", "k_equals_q",
          "Reuses the same sample for q and k, measuring the variance of |q|^2 instead of q . k.",
          dpv_same_vector),
    Entry("dot_product_variance", "right", "sample_variance_ddof1", None, dpv_ddof1),
    Entry("dot_product_variance", "right", "chunked_randomstate", None, dpv_chunked_randomstate),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "Uses log base 2 (bits) instead of the natural log (nats).",
          ent_log2),
    Entry("softmax_entropy", "wrong", "nan_on_zero_weights",
          "Computes p * log(p) directly, so zero weights give 0 * -inf = NaN.",
          ent_nan_on_zero),
    Entry("softmax_entropy", "wrong", "ignores_axis",
          "Always sums over the last axis and ignores the axis argument.",
          ent_ignores_axis),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "Forgets the minus sign, returning sum p log p (negative) instead of the entropy.",
          ent_no_minus),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "Averages -p log p over the axis instead of summing it.",
          ent_mean),
    Entry("softmax_entropy", "right", "scipy_entr", None, ent_scipy_entr),
    Entry("softmax_entropy", "right", "xlogy_float64", None, ent_xlogy_float64),

    Entry("softmax_jacobian", "wrong", "inner_instead_of_outer",
          "Uses the scalar p @ p instead of the outer product p p^T.",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "Returns p p^T - diag(p), the negative of the Jacobian.",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "forgets_p_i_factor",
          "Writes delta_ij - p_j, forgetting the leading factor p_i.",
          jac_forgets_p_i),
    Entry("softmax_jacobian", "wrong", "broadcast_on_wrong_side",
          "Multiplies by p along the columns (p_j) instead of the rows (p_i), missing p[:, None].",
          jac_broadcast_wrong_side),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "Returns only the diagonal terms p - p^2 as a vector instead of the full (n, n) matrix.",
          jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "applies_softmax_to_p",
          "Treats p as logits and applies softmax to it first, although p is already a probability vector.",
          jac_softmax_again),
    Entry("softmax_jacobian", "right", "einsum", None, jac_einsum),
    Entry("softmax_jacobian", "right", "double_loop", None, jac_loops),
]
