"""Lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ------------------------------------------------------------------ dot_product_variance: wrong
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    scores = (q * k).sum(axis=1) / math.sqrt(d_k)
    return float(scores.var())


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.einsum("sd,sd->s", q, k)))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_elementwise(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("sd,sd->s", q, k)))


def dpv_one_query(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(d_k)
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(k @ q))


# ------------------------------------------------------------------ dot_product_variance: right
def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    gen = np.random.Generator(np.random.PCG64(seed))
    q = gen.normal(0.0, 1.0, size=(n_samples, d_k))
    k = gen.normal(0.0, 1.0, size=(n_samples, d_k))
    dots = np.einsum("ij,ij->i", q, k)
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / (n_samples - 1))


def dpv_chunked(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qk = rng.standard_normal((2, n_samples, d_k))
    dots = (qk[0] * qk[1]).sum(axis=1)
    return float(np.mean(dots ** 2) - np.mean(dots) ** 2)


# ------------------------------------------------------------------ softmax_entropy: wrong
def _plogp(p, log=np.log):
    return np.where(p > 0, p * log(np.where(p > 0, p, 1.0)), 0.0)


def ent_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(_plogp(p, np.log2), axis=axis)


def ent_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -_plogp(p).sum(axis=-1)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.mean(_plogp(p), axis=axis)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(_plogp(p), axis=axis, keepdims=True)


def ent_softmax_again(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    p = np.exp(p - p.max(axis=axis, keepdims=True))
    p = p / p.sum(axis=axis, keepdims=True)
    return -np.sum(p * np.log(p), axis=axis)


def ent_renormalise(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    p = p / p.sum(axis=axis, keepdims=True)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


# ------------------------------------------------------------------ softmax_entropy: right
def ent_scipy_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def ent_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        out[idx] = -sum(x * math.log(x) for x in p[idx] if x > 0)
    return out if out.ndim else float(out)


# ------------------------------------------------------------------ softmax_jacobian: wrong
def jac_inner(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_sign(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_diag_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_lower_only(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    jac = np.zeros((n, n))
    for i in range(n):
        jac[i, i] = p[i] * (1 - p[i])
        for j in range(i):
            jac[i, j] = -p[i] * p[j]
    return jac


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


# ------------------------------------------------------------------ softmax_jacobian: right
def jac_double_loop(p):
    p = [float(a) for a in np.asarray(p)]
    n = len(p)
    return np.array([[p[i] * ((1.0 if i == j else 0.0) - p[j]) for j in range(n)]
                     for i in range(n)])


def jac_broadcast(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled-scores",
          "Returns the variance of the scaled score q.k / sqrt(d_k) (about 1) instead of the "
          "unscaled dot product.", dpv_scaled),
    Entry("dot_product_variance", "wrong", "uniform-samples",
          "Draws q and k uniformly on [0, 1) (rng.random) instead of from a standard normal.",
          dpv_uniform),
    Entry("dot_product_variance", "wrong", "seed-ignored",
          "Creates the generator without the seed argument, so two calls with the same seed "
          "give different values.", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "elementwise-variance",
          "Takes the variance of the element-wise products q_i k_i instead of the summed dot "
          "products.", dpv_elementwise),
    Entry("dot_product_variance", "wrong", "std-not-var",
          "Returns the standard deviation of the dot products instead of their variance.",
          dpv_std),
    Entry("dot_product_variance", "wrong", "single-query",
          "Draws a single q and dots every sampled k with it, so the variance measured is "
          "|q|^2 for that one q rather than over random q and k.", dpv_one_query),
    Entry("dot_product_variance", "right", "manual-unbiased", None, dpv_manual_moments),
    Entry("dot_product_variance", "right", "second-moment", None, dpv_chunked),

    Entry("softmax_entropy", "wrong", "log-base-2",
          "Uses log base 2 (bits) instead of the natural log (nats).", ent_log2),
    Entry("softmax_entropy", "wrong", "sum-last-axis",
          "Sums over the last axis regardless of the axis argument.", ent_last_axis),
    Entry("softmax_entropy", "wrong", "mean-not-sum",
          "Averages -p log p over the axis instead of summing it.", ent_mean),
    Entry("softmax_entropy", "wrong", "keepdims",
          "Keeps the reduced axis (keepdims=True), returning an extra length-1 axis.",
          ent_keepdims),
    Entry("softmax_entropy", "wrong", "softmax-applied-again",
          "Applies a softmax to the given weights before taking the entropy, treating the "
          "probabilities as scores.", ent_softmax_again),
    Entry("softmax_entropy", "wrong", "renormalise-first",
          "Renormalises each distribution first, which divides an all-zero row by zero and "
          "gives NaN.", ent_renormalise),
    Entry("softmax_entropy", "right", "scipy-entr", None, ent_scipy_entr),
    Entry("softmax_entropy", "right", "python-loop", None, ent_loop),

    Entry("softmax_jacobian", "wrong", "inner-product",
          "Subtracts p @ p (a scalar) instead of the outer product p p^T.", jac_inner),
    Entry("softmax_jacobian", "wrong", "sign-flipped",
          "Returns p p^T - diag(p), the negative of the Jacobian.", jac_sign),
    Entry("softmax_jacobian", "wrong", "identity-not-diag",
          "Uses the identity matrix instead of diag(p).", jac_identity),
    Entry("softmax_jacobian", "wrong", "diagonal-only",
          "Keeps only the diagonal p_i (1 - p_i), forgetting the off-diagonal -p_i p_j terms.",
          jac_diag_only),
    Entry("softmax_jacobian", "wrong", "lower-triangle-only",
          "Fills the off-diagonal entries only for j < i, leaving the symmetric upper triangle "
          "zero.", jac_lower_only),
    Entry("softmax_jacobian", "wrong", "elementwise-square",
          "Subtracts p * p (element-wise, broadcast as a row) instead of the outer product "
          "p p^T.", jac_elementwise_square),
    Entry("softmax_jacobian", "right", "kronecker-loops", None, jac_double_loop),
    Entry("softmax_jacobian", "right", "broadcast-factor", None, jac_broadcast),
]
