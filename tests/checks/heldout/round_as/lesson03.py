"""Held-out catalogue, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ------------------------------------------------------------------ dot_product_variance, wrong
def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    scores = (q * k).sum(axis=-1) / np.sqrt(d_k)
    return float(scores.var())


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    dots = np.einsum("nd,nd->n", q, k)
    return float(np.var(dots))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(dots.var())


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qs = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    ks = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    return float(np.std((qs * ks).sum(axis=1)))


def dpv_precedence(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=1)
    return float(np.mean((dots - dots.mean())) ** 2)


# ------------------------------------------------------------------ dot_product_variance, right
def dpv_manual_unbiased(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    q = gen.standard_normal(size=(n_samples, d_k))
    k = gen.standard_normal(size=(n_samples, d_k))
    dots = np.einsum("ij,ij->i", q, k)
    centred = dots - dots.sum() / n_samples
    return float((centred @ centred) / (n_samples - 1))


def dpv_one_draw(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.normal(size=(2, n_samples, d_k))
    dots = (pairs[0] * pairs[1]).sum(-1)
    second_moment = float(np.mean(dots ** 2))
    first_moment = float(np.mean(dots))
    return second_moment - first_moment ** 2


# ---------------------------------------------------------------------- softmax_entropy, wrong
def entropy_nan_on_zeros(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logp = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=axis)


def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return np.sum(p * np.log(safe), axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log(p, out=logs, where=p > 0)
    return -np.mean(p * logs, axis=axis)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    h = np.zeros_like(w)
    pos = w > 0
    h[pos] = -w[pos] * np.log(w[pos])
    return h.sum(axis=axis, keepdims=True)


# ---------------------------------------------------------------------- softmax_entropy, right
def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_python_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    out = []
    for row in flat:
        h = 0.0
        for value in row:
            if value > 0:
                h -= value * math.log(value)
        out.append(h)
    return np.array(out).reshape(p.shape[:-1])[()]


# --------------------------------------------------------------------- softmax_jacobian, wrong
def jac_matmul_1d(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_upper_only(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            J[i, j] = p[i] * (1.0 - p[i]) if i == j else -p[i] * p[j]
    return J


def jac_wrong_index(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    jac = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                jac[i, j] = p[i] - p[i] ** 2
            else:
                jac[i, j] = -p[i] * p[i]
    return jac


def jac_int_buffer(p):
    p = np.asarray(p, dtype=float)
    n = p.size
    out = np.zeros((n, n), dtype=int)
    for i in range(n):
        out[i, :] = -p[i] * p
        out[i, i] += p[i]
    return out


# --------------------------------------------------------------------- softmax_jacobian, right
def jac_diagflat_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    return np.diagflat(p) - np.einsum("i,j->ij", p, p)


def jac_kronecker_loop(p):
    vec = [float(t) for t in np.asarray(p).ravel()]
    n = len(vec)
    rows = [[vec[i] * ((1.0 if i == j else 0.0) - vec[j]) for j in range(n)] for i in range(n)]
    return np.array(rows, dtype=np.float64).reshape(n, n)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "generator-not-seeded",
          "creates the generator with np.random.default_rng() and never passes `seed`, so two "
          "calls with the same seed give different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "measures-scaled-scores",
          "divides the dot products by sqrt(d_k) before taking the variance, so it measures the "
          "scaled scores (about 1), not the raw q . k (about d_k)", dpv_scaled),
    Entry("dot_product_variance", "wrong", "uniform-draws",
          "draws q and k with rng.random, which is uniform on [0, 1), not standard normal",
          dpv_uniform),
    Entry("dot_product_variance", "wrong", "sums-over-samples",
          "sums q * k over axis 0 (the samples) instead of axis 1 (the d_k features), so it "
          "takes the variance of d_k sums of n_samples products", dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "returns-std",
          "returns the standard deviation (np.std, about sqrt(d_k)) instead of the variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "square-outside-mean",
          "misplaces the parentheses: squares the mean of the deviations (about 0) instead of "
          "taking the mean of the squared deviations", dpv_precedence),
    Entry("dot_product_variance", "right", "unbiased-manual-variance", None, dpv_manual_unbiased),
    Entry("dot_product_variance", "right", "one-draw-moments", None, dpv_one_draw),
    Entry("softmax_entropy", "wrong", "zero-times-log-zero",
          "computes p * log(p) without handling p = 0: 0 * log 0 = 0 * -inf gives NaN",
          entropy_nan_on_zeros),
    Entry("softmax_entropy", "wrong", "log2-bits",
          "uses np.log2, giving the entropy in bits instead of nats", entropy_bits),
    Entry("softmax_entropy", "wrong", "sums-last-axis",
          "sums over the last axis whatever `axis` says", entropy_last_axis),
    Entry("softmax_entropy", "wrong", "missing-minus-sign",
          "returns sum p log p without the minus sign, a negative entropy", entropy_no_minus),
    Entry("softmax_entropy", "wrong", "mean-not-sum",
          "averages -p log p over the axis (np.mean) instead of summing it", entropy_mean),
    Entry("softmax_entropy", "wrong", "keepdims-true",
          "reduces with keepdims=True, so the distribution axis stays as length 1 instead of "
          "being removed", entropy_keepdims),
    Entry("softmax_entropy", "right", "scipy-entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python-loop-moveaxis", None, entropy_python_loop),
    Entry("softmax_jacobian", "wrong", "matmul-gives-scalar",
          "writes p @ p for p p^T: on 1-D arrays @ is the inner product, a scalar that is "
          "subtracted from every entry", jac_matmul_1d),
    Entry("softmax_jacobian", "wrong", "sign-flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "identity-for-diag",
          "uses the identity where diag(p) belongs (the Kronecker delta without its p_i factor)",
          jac_identity),
    Entry("softmax_jacobian", "wrong", "upper-triangle-only",
          "the inner loop starts at j = i, so only the upper triangle is filled and the lower "
          "off-diagonal entries stay 0 (the matrix is symmetric, but it still has to be filled)",
          jac_upper_only),
    Entry("softmax_jacobian", "wrong", "off-diagonal-p_i-squared",
          "off the diagonal it writes -p[i] * p[i] instead of -p[i] * p[j]", jac_wrong_index),
    Entry("softmax_jacobian", "wrong", "int-buffer",
          "fills an array created with dtype=int, so every entry is truncated toward 0",
          jac_int_buffer),
    Entry("softmax_jacobian", "right", "diagflat-einsum", None, jac_diagflat_einsum),
    Entry("softmax_jacobian", "right", "kronecker-delta-loops", None, jac_kronecker_loop),
]
