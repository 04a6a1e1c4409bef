"""Held-out catalogue, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

import math

import numpy as np
import torch
from scipy.special import xlogy
from scipy.stats import entropy as scipy_entropy

from entry import Entry


# ============================================================================ variance, wrong
def var_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def var_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n_samples, d_k))
    k = q
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def var_unseeded(d_k, n_samples=100_000, seed=0):
    np.random.seed(seed)
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def var_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def var_of_products(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def var_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


# ============================================================================ variance, right
def var_two_pass_unbiased(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    k = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    dots = np.einsum("ij,ij->i", q, k)
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / (n_samples - 1))


def var_torch_generator(d_k, n_samples=100_000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    return torch.var(torch.linalg.vecdot(q, k), correction=0).item()


# ============================================================================ entropy, wrong
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -(p * logs).sum(axis=axis)


def entropy_no_zero_guard(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=axis, keepdims=True)


def entropy_sign(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    lp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return np.sum(p * lp, axis=axis)


def entropy_scipy(weights, axis=-1):
    return scipy_entropy(weights, axis=axis)


# ============================================================================ entropy, right
def entropy_xlogy(weights, axis=-1):
    return -np.sum(xlogy(weights, weights), axis=axis)


def entropy_nansum(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = p * np.log(p)  # 0 * -inf = nan for the zero weights
    return -np.nansum(plogp, axis=axis)


# ============================================================================ jacobian, wrong
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_elementwise(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jac_sign(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_identity(p):
    n = p.shape[0]
    return np.eye(n) - np.outer(p, p)


def jac_softmax_of_p(p):
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_lower_triangle(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return J


# ============================================================================ jacobian, right
def jac_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.shape[0])
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


def jac_autograd(p):
    pt = torch.as_tensor(np.asarray(p, dtype=np.float64))
    with np.errstate(divide="ignore"):
        logits = torch.log(pt)  # softmax(log p) = p; zero entries become -inf
    jac = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, dim=0), logits)
    return jac.numpy()


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k), so it measures the scaled variance (about 1) "
          "instead of the unscaled one (about d_k)", var_scaled),
    Entry("dot_product_variance", "wrong", "k_is_q",
          "reuses q as k, so it measures the variance of |q|^2 (about 2 d_k) instead of two "
          "independent vectors' dot product", var_same_vector),
    Entry("dot_product_variance", "wrong", "generator_not_seeded",
          "seeds the legacy global np.random but builds default_rng() without the seed, so "
          "two calls with the same seed give different numbers", var_unseeded),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "sums q*k over axis 0 (the samples) instead of over the d_k features, so it returns "
          "the variance of d_k sums of n_samples products", var_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "variance_of_products",
          "takes the variance of the elementwise products q_i k_i (about 1) instead of their "
          "sum over the features", var_of_products),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws with rng.random, which is uniform on [0, 1), instead of the standard normal",
          var_uniform),
    Entry("dot_product_variance", "right", "two_pass_unbiased", None, var_two_pass_unbiased),
    Entry("dot_product_variance", "right", "torch_generator", None, var_torch_generator),
    Entry("softmax_entropy", "wrong", "log_base_2",
          "uses log2, giving the entropy in bits instead of nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "no_zero_guard",
          "computes p * log(p) with no guard, so a zero weight gives 0 * -inf = NaN",
          entropy_no_zero_guard),
    Entry("softmax_entropy", "wrong", "sum_over_last_axis",
          "sums over the last axis whatever `axis` is", entropy_last_axis),
    Entry("softmax_entropy", "wrong", "keepdims_true",
          "keeps the reduced axis (keepdims=True), so the result has an extra axis of length 1",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "drops the minus sign, returning sum p log p (<= 0) instead of the entropy",
          entropy_sign),
    Entry("softmax_entropy", "wrong", "scipy_entropy_normalises",
          "calls scipy.stats.entropy, which renormalises each slice, so an all-zero row gives "
          "NaN instead of 0", entropy_scipy),
    Entry("softmax_entropy", "right", "scipy_xlogy", None, entropy_xlogy),
    Entry("softmax_entropy", "right", "nansum", None, entropy_nansum),
    Entry("softmax_jacobian", "wrong", "p_at_p_T",
          "writes p @ p.T for a 1-D p, which is the scalar p.p (.T does nothing on a vector), "
          "not the outer product", jac_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p, a row vector broadcast over the rows, instead of the outer "
          "product p p^T", jac_elementwise),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jac_sign),
    Entry("softmax_jacobian", "wrong", "identity_not_diag",
          "uses the identity matrix instead of diag(p)", jac_identity),
    Entry("softmax_jacobian", "wrong", "softmax_of_p",
          "treats p as logits and applies softmax to it first, although p is already the "
          "probability vector", jac_softmax_of_p),
    Entry("softmax_jacobian", "wrong", "lower_triangle_only",
          "the inner loop runs j in range(i + 1), so only the lower triangle is filled and the "
          "upper triangle stays 0", jac_lower_triangle),
    Entry("softmax_jacobian", "right", "einsum", None, jac_einsum),
    Entry("softmax_jacobian", "right", "autograd_of_softmax", None, jac_autograd),
]
