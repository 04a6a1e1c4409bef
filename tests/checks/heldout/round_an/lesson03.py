"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian.

Each function is one learner's answer; wrong ones carry exactly one slip.
"""

import math

import numpy as np
import torch
from scipy.special import entr

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
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    dots = np.sum(q * k, axis=-1)
    return float(np.var(dots))


def dpv_products_not_summed(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    q = gen.standard_normal((n_samples, d_k))
    k = gen.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qs = rng.standard_normal((n_samples, d_k))
    ks = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("sd,sd->s", qs, ks)))


def dpv_transposed_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((d_k, n_samples))
    k = rng.standard_normal((d_k, n_samples))
    dots = np.sum(q * k, axis=-1)
    return float(np.var(dots))


def dpv_right_two_pass(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("nd,nd->n", pairs[0], pairs[1])
    centred = dots - dots.mean()
    return float(np.mean(centred * centred))


def dpv_right_torch(d_k, n_samples=100_000, seed=0):
    gen = torch.Generator().manual_seed(int(seed))
    q = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    return torch.var((q * k).sum(dim=1), unbiased=True).item()


# ============================================================================ softmax_entropy
def entropy_nan_on_zeros(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log2(safe), axis=axis)


def entropy_missing_minus(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    terms = np.zeros_like(w)
    pos = w > 0
    terms[pos] = w[pos] * np.log(w[pos])
    return np.sum(terms, axis=axis)


def entropy_last_axis_only(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    return -plogp.sum(axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.mean(p * logs, axis=axis)


def entropy_right_scipy_entr(weights, axis=-1):
    return np.sum(entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def entropy_right_loops(weights, axis=-1):
    arr = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    rows = arr.reshape(-1, arr.shape[-1])
    result = np.empty(rows.shape[0])
    for i, row in enumerate(rows):
        h = 0.0
        for p in row:
            if p > 0:
                h -= p * math.log(p)
        result[i] = h
    return result.reshape(arr.shape[:-1])[()]  # a plain scalar for a single distribution


# ============================================================================ softmax_jacobian
def jacobian_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jacobian_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jacobian_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jacobian_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jacobian_lower_triangle(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] = p[i] - p[i] * p[i]
        for j in range(i):
            J[i, j] = -p[i] * p[j]
    return J


def jacobian_softmax_of_p(p):
    p = np.asarray(p, dtype=float)
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jacobian_right_loops(p):
    p = [float(v) for v in np.asarray(p).ravel()]
    n = len(p)
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            delta = 1.0 if i == j else 0.0
            J[i, j] = p[i] * (delta - p[j])
    return J


def jacobian_right_closed_form(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled-dots",
          "the dot products are divided by sqrt(d_k), so it measures the variance after "
          "scaling (about 1) instead of the unscaled variance (about d_k)",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "unseeded-rng",
          "np.random.default_rng() is created without the seed, so two calls with the same "
          "seed return different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "k-is-q",
          "k is the same array as q (only one draw), so it measures the variance of q . q, "
          "about 2 d_k, not that of two independent vectors",
          dpv_same_vector),
    Entry("dot_product_variance", "wrong", "products-not-summed",
          "it takes the variance of the elementwise products q_i k_i (about 1) without "
          "summing them over d_k into dot products",
          dpv_products_not_summed),
    Entry("dot_product_variance", "wrong", "std-not-var",
          "it returns np.std of the dot products, the standard deviation (about sqrt(d_k)), "
          "not the variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "samples-on-wrong-axis",
          "the draws have shape (d_k, n_samples) and the sum runs over the last axis, so it "
          "sums over the samples and takes the variance of only d_k huge numbers",
          dpv_transposed_samples),
    Entry("dot_product_variance", "right", "stacked-draw-two-pass", None, dpv_right_two_pass),
    Entry("dot_product_variance", "right", "torch-generator", None, dpv_right_torch),

    Entry("softmax_entropy", "wrong", "nan-on-zero-weights",
          "it computes p * log(p) without guarding zero weights, so 0 * log(0) = 0 * -inf "
          "gives NaN instead of 0",
          entropy_nan_on_zeros),
    Entry("softmax_entropy", "wrong", "log2-bits",
          "it uses np.log2, so the entropy is in bits instead of nats",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "missing-minus",
          "the minus sign is missing: it returns sum p log p, the negative of the entropy",
          entropy_missing_minus),
    Entry("softmax_entropy", "wrong", "sum-over-last-axis",
          "the sum is hard-coded to axis=-1 and ignores the `axis` argument, so for axis=0 or "
          "-2 it sums over the wrong axis",
          entropy_last_axis_only),
    Entry("softmax_entropy", "wrong", "keepdims",
          "the sum keeps the reduced axis (keepdims=True), so the result has an extra axis of "
          "length 1 instead of having that axis removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean-not-sum",
          "it averages -p log p over the axis (np.mean) instead of summing, so the entropy is "
          "divided by the number of outcomes",
          entropy_mean),
    Entry("softmax_entropy", "right", "scipy-entr", None, entropy_right_scipy_entr),
    Entry("softmax_entropy", "right", "python-loops", None, entropy_right_loops),

    Entry("softmax_jacobian", "wrong", "p-at-p-transpose",
          "for a 1-D p, `p @ p.T` is the scalar p . p (.T does nothing to a vector), so it "
          "subtracts one number everywhere instead of the outer product p p^T",
          jacobian_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise-square",
          "it subtracts p * p, an (n,) vector broadcast along the rows, instead of the outer "
          "product p p^T",
          jacobian_elementwise_square),
    Entry("softmax_jacobian", "wrong", "sign-flipped",
          "the two terms are the wrong way round: it returns p p^T - diag(p), the negative "
          "Jacobian",
          jacobian_sign_flipped),
    Entry("softmax_jacobian", "wrong", "identity-not-diag-p",
          "it uses the identity matrix where diag(p) belongs (delta_ij instead of "
          "delta_ij p_i)",
          jacobian_identity),
    Entry("softmax_jacobian", "wrong", "lower-triangle-only",
          "the inner loop runs j over range(i), so only the diagonal and the entries below it "
          "are filled and the upper triangle stays 0 (the matrix is symmetric)",
          jacobian_lower_triangle),
    Entry("softmax_jacobian", "wrong", "softmax-of-p",
          "it applies softmax to p first, treating the probability vector as logits, and "
          "returns the Jacobian at softmax(p) instead of at p",
          jacobian_softmax_of_p),
    Entry("softmax_jacobian", "right", "double-loop-delta", None, jacobian_right_loops),
    Entry("softmax_jacobian", "right", "closed-form-broadcast", None, jacobian_right_closed_form),
]
