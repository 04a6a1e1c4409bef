"""Held-out catalogue, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

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


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.std((q * k).sum(axis=1)))


def dpv_fsum(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pair = rng.normal(size=(2, n_samples, d_k))
    dots = np.sum(pair[0] * pair[1], axis=-1)
    mean = math.fsum(dots) / n_samples
    return math.fsum((dots - mean) ** 2) / (n_samples - 1)


def dpv_torch(d_k, n_samples=100_000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    return torch.var((q * k).sum(dim=1), unbiased=False).item()


# ============================================================================ softmax_entropy
def ent_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log2(safe), axis=axis)


def ent_last_axis(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(-1)


def ent_no_minus(weights, axis=-1):
    p = np.asarray(weights)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return np.sum(terms, axis=axis)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    logp = np.log(np.clip(p, 1e-300, None))
    return -np.sum(p * logp, axis=axis, keepdims=True)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights)
    plogp = np.zeros_like(p)
    nz = p > 0
    plogp[nz] = p[nz] * np.log(p[nz])
    return -np.mean(plogp, axis=axis)


def ent_nan_to_num_after_sum(weights, axis=-1):
    p = np.asarray(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.sum(p * np.log(p), axis=axis)
    return np.nan_to_num(h)


def ent_scipy_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def ent_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    res = np.empty(flat.shape[0])
    for i, row in enumerate(flat):
        res[i] = -math.fsum(w * math.log(w) for w in row if w > 0)
    return res.reshape(p.shape[:-1])[()]


# ============================================================================ softmax_jacobian
def jac_matmul_T(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T


def jac_elementwise(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jac_identity(p):
    p = np.asarray(p)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_sign(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_loop_pi_twice(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                J[i, j] = p[i] * (1 - p[i])
            else:
                J[i, j] = -p[i] * p[i]
    return J


def jac_rows_off_by_one(p):
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n - 1):
        J[i] = -p[i] * p
        J[i, i] += p[i]
    return J


def jac_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    return np.einsum("i,ij->ij", p, np.eye(n)) - np.einsum("i,j->ij", p, p)


def jac_lists(p):
    vals = [float(a) for a in p]
    rows = [[a * ((1.0 if i == j else 0.0) - b) for j, b in enumerate(vals)]
            for i, a in enumerate(vals)]
    return np.array(rows)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dot",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance d_k", dpv_scaled),
    Entry("dot_product_variance", "wrong", "ignores_seed",
          "builds np.random.default_rng() without the seed, so two calls with the same seed "
          "give different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "k_is_q",
          "reuses q as k, so it measures the variance of |q|^2 (about 2 d_k) instead of the "
          "dot product of two independent vectors", dpv_same_vector),
    Entry("dot_product_variance", "wrong", "sum_over_sample_axis",
          "sums q*k over axis 0 (the samples) instead of the feature axis, giving d_k sums of "
          "n_samples products: their variance is 0 for d_k=1 and about n_samples otherwise",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws q and k with rng.random (uniform on [0, 1)) instead of standard normal "
          "vectors", dpv_uniform_draws),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products (about sqrt(d_k)) instead of their variance",
          dpv_std),
    Entry("dot_product_variance", "right", "fsum_unbiased", None, dpv_fsum),
    Entry("dot_product_variance", "right", "torch_generator", None, dpv_torch),
    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses np.log2, giving the entropy in bits instead of nats", ent_log2),
    Entry("softmax_entropy", "wrong", "sums_last_axis",
          "sums over the last axis whatever `axis` says", ent_last_axis),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "returns sum p log p without the minus sign, a negative entropy", ent_no_minus),
    Entry("softmax_entropy", "wrong", "keepdims_kept",
          "sums with keepdims=True, so the result keeps the reduced axis with length 1 instead "
          "of removing it", ent_keepdims),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "averages -p log p over the axis instead of summing it", ent_mean),
    Entry("softmax_entropy", "wrong", "nan_to_num_after_sum",
          "lets 0 * log 0 become NaN and only cleans up after summing, so a distribution with "
          "any zero weight gets entropy 0 instead of the entropy of its non-zero weights",
          ent_nan_to_num_after_sum),
    Entry("softmax_entropy", "right", "scipy_entr", None, ent_scipy_entr),
    Entry("softmax_entropy", "right", "python_loop", None, ent_loop),
    Entry("softmax_jacobian", "wrong", "matmul_with_T",
          "writes p @ p.T for the outer product; on a 1-D array .T does nothing, so this is "
          "the scalar p . p subtracted from every entry", jac_matmul_T),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p (element-wise, broadcast along the rows) instead of the outer "
          "product p p^T", jac_elementwise),
    Entry("softmax_jacobian", "wrong", "identity_not_diag_p",
          "uses the identity matrix where diag(p) belongs", jac_identity),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jac_sign),
    Entry("softmax_jacobian", "wrong", "off_diagonal_p_i_squared",
          "fills the off-diagonal entries with -p_i * p_i (p[i] reused) instead of -p_i * p_j",
          jac_loop_pi_twice),
    Entry("softmax_jacobian", "wrong", "last_row_skipped",
          "loops over range(n - 1), so the last row of the Jacobian stays zero", jac_rows_off_by_one),
    Entry("softmax_jacobian", "right", "einsum_float64", None, jac_einsum),
    Entry("softmax_jacobian", "right", "nested_lists", None, jac_lists),
]
