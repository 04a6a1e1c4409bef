"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math

import numpy as np
import scipy.special
import scipy.stats
import torch

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
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.normal(0.0, 1.0, size=(n_samples, d_k))
    ks = gen.normal(0.0, 1.0, size=(n_samples, d_k))
    return float(np.std(np.einsum("ij,ij->i", qs, ks)))


def dpv_same_draw(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = k = rng.standard_normal((n_samples, d_k))
    products = np.sum(q * k, axis=1)
    return float(products.var())


def dpv_legacy_randomstate(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    pairs = rs.standard_normal((2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pairs[0], pairs[1])
    mean = dots.mean()
    return float(np.mean((dots - mean) ** 2))


def dpv_torch_unbiased(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return torch.var((q * k).sum(dim=1), unbiased=True).item()


# ============================================================================ softmax_entropy
def ent_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -np.sum(p * logs, axis=axis)


def ent_boolean_index(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    nz = p[p > 0]
    return -np.sum(nz * np.log(nz), axis=axis)


def ent_no_minus(weights, axis=-1):
    p = np.asarray(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return np.sum(terms, axis=axis)


def ent_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log(safe)).sum(axis=-1)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis, keepdims=True)


def ent_scipy_stats(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights), axis=axis)


def ent_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def ent_python_loops(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    rows = p.reshape(-1, p.shape[-1])
    result = []
    for row in rows:
        h = 0.0
        for value in row:
            if value > 0:
                h -= value * math.log(value)
        result.append(h)
    return np.array(result).reshape(p.shape[:-1])[()]  # [()] gives a scalar for one row


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T


def jac_elementwise(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_no_delta(p):
    p = np.asarray(p, dtype=float)
    return p[:, None] * (1.0 - p[None, :])


def jac_fill_diagonal(p):
    p = np.asarray(p, dtype=float)
    J = -np.outer(p, p)
    J = np.fill_diagonal(J, p - p ** 2)
    return J


def jac_softmax_of_p(p):
    p = np.asarray(p, dtype=float)
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_eye_broadcast(p):
    p = np.asarray(p)
    return np.eye(p.shape[0]) * p - np.einsum("i,j->ij", p, p)


def jac_double_loop(p):
    vals = [float(t) for t in np.asarray(p)]
    n = len(vals)
    J = [[(vals[i] if i == j else 0.0) - vals[i] * vals[j] for j in range(n)] for i in range(n)]
    return np.array(J)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k), so it returns about 1 instead of the "
          "unscaled variance d_k the exercise asks for",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "unseeded_rng",
          "creates np.random.default_rng() without the seed, so two calls with the same seed "
          "give different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "uniform_samples",
          "draws with rng.random (uniform on [0, 1)) instead of a standard normal, so the "
          "variance is about 0.05 d_k, not d_k",
          dpv_uniform),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "sums the products over axis 0 (the samples) instead of over the d_k features, so it "
          "measures the spread of d_k sums of n_samples terms, not of the dot products",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products, the standard deviation sqrt(d_k), instead of "
          "the variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "same_draw_for_q_and_k",
          "uses one random array for both q and k, so each dot product is |q|^2, whose "
          "variance is 2 d_k",
          dpv_same_draw),
    Entry("dot_product_variance", "right", "legacy_randomstate", None, dpv_legacy_randomstate),
    Entry("dot_product_variance", "right", "torch_unbiased", None, dpv_torch_unbiased),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses log2, so the entropy comes out in bits instead of nats",
          ent_log2),
    Entry("softmax_entropy", "wrong", "boolean_index_flattens",
          "drops the zero weights with p[p > 0], which flattens the array, so it sums every "
          "distribution together (or fails for axis > 0) instead of one entropy per slice",
          ent_boolean_index),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "forgets the minus sign and returns sum p log p, a negative number, instead of "
          "-sum p log p",
          ent_no_minus),
    Entry("softmax_entropy", "wrong", "sum_last_axis",
          "always sums over the last axis, ignoring the axis argument",
          ent_last_axis),
    Entry("softmax_entropy", "wrong", "keepdims",
          "sums with keepdims=True, so the reduced axis stays as length 1 instead of being "
          "removed",
          ent_keepdims),
    Entry("softmax_entropy", "wrong", "scipy_stats_renormalises",
          "calls scipy.stats.entropy, which first rescales each slice to sum 1, so an "
          "all-zero slice becomes 0/0 and gives NaN instead of 0",
          ent_scipy_stats),
    Entry("softmax_entropy", "right", "scipy_entr", None, ent_entr),
    Entry("softmax_entropy", "right", "python_loops", None, ent_python_loops),

    Entry("softmax_jacobian", "wrong", "inner_product",
          "writes p @ p.T for the outer product, but .T does nothing to a 1-D array, so it "
          "subtracts the scalar p . p from every entry",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p, a vector that broadcasts along the rows, instead of the outer "
          "product p p^T",
          jac_elementwise),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "computes p p^T - diag(p), the negative of the Jacobian",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "missing_kronecker_delta",
          "uses p_i (1 - p_j) for every entry, forgetting that the 1 only appears on the "
          "diagonal (the Kronecker delta): off-diagonal entries must be -p_i p_j",
          jac_no_delta),
    Entry("softmax_jacobian", "wrong", "fill_diagonal_returns_none",
          "assigns the result of np.fill_diagonal, which works in place and returns None, so "
          "the function returns None",
          jac_fill_diagonal),
    Entry("softmax_jacobian", "wrong", "softmax_of_p",
          "applies softmax to p first, treating the probabilities as logits, so the Jacobian is "
          "taken at softmax(p) instead of at p",
          jac_softmax_of_p),
    Entry("softmax_jacobian", "right", "eye_broadcast_einsum", None, jac_eye_broadcast),
    Entry("softmax_jacobian", "right", "double_loop", None, jac_double_loop),
]
