"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry


# ============================================================================ dot_product_variance
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.std(np.einsum("nd,nd->n", q, k)))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    q = gen.standard_normal((n_samples, d_k))
    k = gen.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_dim_loop_from_one(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.zeros(n_samples)
    for i in range(1, d_k):
        dots += q[:, i] * k[:, i]
    return float(dots.var())


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def dpv_one_draw_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    both = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", both[0], both[1])
    mean = dots.mean()
    return float(np.mean(dots * dots) - mean * mean)


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    dots = (q * k).sum(dim=1)
    return torch.var(dots, unbiased=True).item()


# ============================================================================ softmax_entropy
def entropy_nan_on_zero(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_bits(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -(p * logs).sum(axis=axis)


def entropy_last_axis(weights, axis=-1):
    w = np.asarray(weights)
    safe = np.where(w > 0, w, 1.0)
    return -np.sum(w * np.log(safe), axis=-1)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return np.sum(plogp, axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    terms = -p * np.log(np.clip(p, 1e-300, None))
    return terms.sum(axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(p > 0, -p * np.log(p), 0.0)
    return h.mean(axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_python_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        total = 0.0
        for value in p[idx]:
            if value > 0:
                total -= value * math.log(value)
        out[idx] = total
    return out[()]


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T


def jac_elementwise_square(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jac_identity(p):
    p = np.asarray(p)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_diagonal_only(p):
    p = np.asarray(p)
    return np.diag(p * (1 - p))


def jac_kron(p):
    p = np.asarray(p)
    return np.diag(p) - np.kron(p, p)


def jac_double_loop(p):
    p = [float(v) for v in np.asarray(p)]
    n = len(p)
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return J


def jac_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.size)
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance d_k", dpv_scaled),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products (about sqrt(d_k)) instead of np.var",
          dpv_std),
    Entry("dot_product_variance", "wrong", "sums_over_samples",
          "sums q * k over the sample axis (axis=0) instead of the feature axis, so it "
          "measures the variance of d_k sums of n_samples terms", dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "creates the generator without the seed, so two calls with the same seed give "
          "different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "dims_from_one",
          "accumulates the dot product over range(1, d_k), leaving out feature 0 (variance "
          "d_k - 1, and 0 for d_k = 1)", dpv_dim_loop_from_one),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws q and k with rng.random (uniform on [0, 1)) instead of standard normals",
          dpv_uniform),
    Entry("dot_product_variance", "right", "one_draw_moments", None, dpv_one_draw_moments),
    Entry("dot_product_variance", "right", "torch_generator", None, dpv_torch_generator),

    Entry("softmax_entropy", "wrong", "nan_on_zero_weights",
          "computes p * log(p) directly, so zero weights give 0 * -inf = NaN instead of 0",
          entropy_nan_on_zero),
    Entry("softmax_entropy", "wrong", "bits_not_nats",
          "uses log2, giving the entropy in bits instead of nats", entropy_bits),
    Entry("softmax_entropy", "wrong", "ignores_axis",
          "always sums over the last axis, ignoring the `axis` argument", entropy_last_axis),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "forgets the minus sign, returning sum p log p (<= 0) instead of the entropy",
          entropy_no_minus),
    Entry("softmax_entropy", "wrong", "keepdims_kept",
          "sums with keepdims=True, so the reduced axis is kept with length 1 instead of "
          "removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "averages -p log p over the axis instead of summing it", entropy_mean),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python_loop", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "inner_product",
          "writes p @ p.T, which for a 1-D p is the scalar inner product, not the outer "
          "product p p^T", jac_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p (a broadcast row of squares) instead of the outer product "
          "np.outer(p, p)", jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "identity_not_diag_p",
          "uses the identity where diag(p) belongs", jac_identity),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "keeps only the diagonal p_i (1 - p_i) and drops the off-diagonal -p_i p_j terms",
          jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "kron_for_outer",
          "uses np.kron(p, p), which for vectors is a flat (n*n,) vector, not the (n, n) "
          "outer product, so the subtraction raises a broadcasting error for n > 1", jac_kron),
    Entry("softmax_jacobian", "right", "double_loop_kronecker_delta", None, jac_double_loop),
    Entry("softmax_jacobian", "right", "einsum", None, jac_einsum),
]
