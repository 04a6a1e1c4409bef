"""Held-out learners' answers, lesson 03 (dot_product_variance, softmax_entropy,
softmax_jacobian)."""

import math

import numpy as np
import torch
from scipy.special import entr

from entry import Entry


# ============================================================================ dot_product_variance
def variance_scaled_dots(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def variance_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    queries = gen.normal(size=(n_samples, d_k))
    keys = gen.normal(size=(n_samples, d_k))
    return float(np.std(np.einsum("nd,nd->n", queries, keys)))


def variance_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def variance_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var((q * k).sum(axis=1)))


def variance_wrong_sum_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def variance_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def variance_randomstate_moments(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    q = rs.randn(n_samples, d_k)
    k = rs.randn(n_samples, d_k)
    dots = (q * k).sum(axis=1)
    mean = dots.sum() / n_samples
    return float((dots ** 2).sum() / n_samples - mean ** 2)


def variance_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    pairs = torch.randn(2, n_samples, d_k, generator=g, dtype=torch.float64)
    dots = (pairs[0] * pairs[1]).sum(dim=-1)
    return dots.var(unbiased=True).item()


# ============================================================================ softmax_entropy
def entropy_no_zero_guard(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_in_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -(p * logs).sum(axis=axis)


def entropy_last_axis_only(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=-1)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    terms = np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0)
    return -terms.sum(axis=axis, keepdims=True)


def entropy_renormalised(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    p = p / p.sum(axis=axis, keepdims=True)
    log_p = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * log_p, axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = np.zeros_like(p)
    nz = p > 0
    plogp[nz] = p[nz] * np.log(p[nz])
    return -np.mean(plogp, axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return entr(np.asarray(weights)).sum(axis=axis)


def entropy_row_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    rows = p.reshape(-1, p.shape[-1])
    h = np.empty(rows.shape[0])
    for i, row in enumerate(rows):
        acc = 0.0
        for w in row:
            if w > 0:
                acc -= w * math.log(w)
        h[i] = acc
    if p.ndim == 1:
        return float(h[0])
    return h.reshape(p.shape[:-1])


# ============================================================================ softmax_jacobian
def jacobian_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jacobian_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jacobian_identity(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    return np.eye(n) - np.outer(p, p)


def jacobian_column_vector(p):
    col = np.asarray(p, dtype=float).reshape(-1, 1)
    return np.diag(col) - col @ col.T


def jacobian_int_buffer(p):
    n = len(p)
    J = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            J[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return J


def jacobian_resoftmax(p):
    z = np.asarray(p, dtype=float)
    s = np.exp(z - z.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jacobian_double_loop(p):
    vals = [float(v) for v in p]
    n = len(vals)
    J = np.empty((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            delta = 1.0 if i == j else 0.0
            J[i, j] = vals[i] * (delta - vals[j])
    return J


def jacobian_factored(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size, dtype=p.dtype) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled-dots",
          "it divides the dot products by sqrt(d_k), so it measures the variance after the "
          "scaling (about 1) instead of the unscaled variance (about d_k)",
          variance_scaled_dots),
    Entry("dot_product_variance", "wrong", "std-not-var",
          "it returns np.std of the dot products, the standard deviation sqrt(d_k), instead "
          "of their variance", variance_std),
    Entry("dot_product_variance", "wrong", "seed-ignored",
          "the generator is created with np.random.default_rng() without the seed, so two "
          "calls with the same seed give different numbers", variance_unseeded),
    Entry("dot_product_variance", "wrong", "k-is-q",
          "k = q reuses the query draw instead of drawing an independent key, so it measures "
          "the variance of |q|^2 (about 2 d_k) instead of q . k", variance_same_vector),
    Entry("dot_product_variance", "wrong", "sum-over-samples",
          "the products are summed over axis 0 (the samples) instead of axis 1 (the d_k "
          "features), so it takes the variance of d_k sums of n_samples products",
          variance_wrong_sum_axis),
    Entry("dot_product_variance", "wrong", "uniform-draws",
          "rng.random draws uniform [0, 1) numbers, not standard normal ones, so the "
          "variance is about 7 d_k / 144 instead of d_k", variance_uniform_draws),
    Entry("dot_product_variance", "right", "randomstate-moments", None,
          variance_randomstate_moments),
    Entry("dot_product_variance", "right", "torch-generator-unbiased", None,
          variance_torch_generator),

    Entry("softmax_entropy", "wrong", "zero-times-log-zero",
          "it computes p * log(p) without guarding zero weights, so 0 * log 0 = 0 * (-inf) "
          "gives NaN instead of 0", entropy_no_zero_guard),
    Entry("softmax_entropy", "wrong", "log2-bits",
          "it uses log2, giving the entropy in bits instead of nats", entropy_in_bits),
    Entry("softmax_entropy", "wrong", "axis-ignored",
          "it always sums over the last axis and ignores the axis argument",
          entropy_last_axis_only),
    Entry("softmax_entropy", "wrong", "keepdims-left-on",
          "it sums with keepdims=True, so the reduced axis is kept with length 1 instead of "
          "removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "renormalise-first",
          "it first divides each distribution by its sum, which turns an all-zero row into "
          "0/0 = NaN where the entropy should be 0", entropy_renormalised),
    Entry("softmax_entropy", "wrong", "mean-not-sum",
          "it averages -p log p over the axis (np.mean) instead of summing it, so the "
          "entropy is divided by the number of outcomes", entropy_mean),
    Entry("softmax_entropy", "right", "scipy-entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python-loops-math-log", None, entropy_row_loop),

    Entry("softmax_jacobian", "wrong", "inner-product-not-outer",
          "p @ p on two vectors is the scalar sum p_i^2, not the outer product p p^T, so the "
          "same number is subtracted from every entry", jacobian_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise-square-broadcast",
          "p * p is the elementwise square (n,), which broadcasts along the rows, so entry "
          "(i, j) gets p_j^2 subtracted instead of p_i p_j", jacobian_elementwise_square),
    Entry("softmax_jacobian", "wrong", "identity-not-diag-p",
          "it subtracts p p^T from the identity matrix instead of from diag(p)",
          jacobian_identity),
    Entry("softmax_jacobian", "wrong", "diag-of-column",
          "p is reshaped to a column (n, 1) and np.diag of a 2-D array extracts its diagonal "
          "(one value) instead of building diag(p), so p_0 - p p^T is returned",
          jacobian_column_vector),
    Entry("softmax_jacobian", "wrong", "int-buffer",
          "the result matrix is allocated with dtype=int, so every entry (a fraction) is "
          "truncated to an integer, mostly 0", jacobian_int_buffer),
    Entry("softmax_jacobian", "wrong", "softmax-of-p",
          "it treats p as logits and applies softmax to it again before forming "
          "diag - outer, although p is already the probability vector", jacobian_resoftmax),
    Entry("softmax_jacobian", "right", "kronecker-double-loop", None, jacobian_double_loop),
    Entry("softmax_jacobian", "right", "factored-p-times-I-minus-p", None, jacobian_factored),
]
