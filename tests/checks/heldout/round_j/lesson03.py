"""Lesson 03 (numpy): dot_product_variance, softmax_entropy, softmax_jacobian; round j."""

import math

import numpy as np
import torch
from scipy.special import entr

from entry import Entry

# --------------------------------------------------------------------- dot_product_variance


def dpv_scaled_dot(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1) / np.sqrt(d_k)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("sd,sd->s", q, k)))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_k_is_q(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var(np.sum(q * k, axis=1)))


def dpv_var_of_products(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_manual_centering(d_k, n_samples=100_000, seed=0):
    rng = np.random.Generator(np.random.PCG64(seed))
    both = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = (both[0] * both[1]).sum(-1)
    centred = dots - dots.mean()
    return float((centred @ centred) / n_samples)


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return torch.var((q * k).sum(-1), unbiased=False).item()


# --------------------------------------------------------------------------- softmax_entropy


def ent_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(axis=axis)


def ent_nan_on_zero(weights, axis=-1):
    p = np.asarray(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(p * np.log(p), axis=axis)


def ent_axis_ignored(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logs, axis=-1)


def ent_sign(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(np.where(p > 0, p, 1.0))
    return np.sum(p * logs, axis=axis)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.mean(p * logs, axis=axis)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logs, axis=axis, keepdims=True)


def ent_scipy_entr(weights, axis=-1):
    return np.sum(entr(np.asarray(weights)), axis=axis)


def ent_masked_array(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    logs = np.ma.log(np.ma.masked_less_equal(p, 0.0)).filled(0.0)
    return -np.add.reduce(p * logs, axis=axis)


# -------------------------------------------------------------------------- softmax_jacobian


def jac_plus_outer(p):
    p = np.asarray(p)
    return np.diag(p) + np.outer(p, p)


def jac_matmul_1d(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T  # p.T of a vector is p: a scalar dot product


def jac_identity(p):
    p = np.asarray(p)
    return np.eye(len(p)) - np.outer(p, p)


def jac_sigmoid_diagonal(p):
    p = np.asarray(p)
    return np.diag(p * (1 - p))


def jac_softmax_reapplied(p):
    p = np.asarray(p, dtype=float)
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_int_buffer(p):
    p = np.asarray(p)
    n = p.shape[0]
    jac = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            jac[i, j] = p[i] * ((i == j) - p[j])
    return jac


def jac_python_loops(p):
    vals = [float(v) for v in np.asarray(p)]
    n = len(vals)
    rows = [[vals[i] * ((1.0 if i == j else 0.0) - vals[j]) for j in range(n)]
            for i in range(n)]
    return np.array(rows, dtype=np.asarray(p).dtype)


def jac_einsum(p):
    p = np.asarray(p)
    eye = np.eye(p.shape[0], dtype=p.dtype)
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "dot_divided_by_sqrt_d_k",
          "Divides each dot product by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled d_k.", dpv_scaled_dot),
    Entry("dot_product_variance", "wrong", "standard_deviation",
          "Returns np.std of the dot products, about sqrt(d_k), instead of their variance.",
          dpv_std),
    Entry("dot_product_variance", "wrong", "seed_not_used",
          "Creates np.random.default_rng() without the seed, so two calls with the same seed "
          "give different values.", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "k_reuses_q",
          "Sets k = q instead of drawing a second vector, so it measures the variance of "
          "|q|^2, about 2 d_k.", dpv_k_is_q),
    Entry("dot_product_variance", "wrong", "variance_of_elementwise_products",
          "Takes the variance of the elementwise products q_i k_i (about 1) instead of the "
          "variance of their sum over d_k.", dpv_var_of_products),
    Entry("dot_product_variance", "wrong", "uniform_samples",
          "Draws q and k with rng.random, uniform on [0, 1), instead of standard normals, so "
          "the variance is about 7 d_k / 144.", dpv_uniform),
    Entry("dot_product_variance", "right", "pcg64_manual_centering", None, dpv_manual_centering),
    Entry("dot_product_variance", "right", "torch_generator_float64", None, dpv_torch_generator),

    Entry("softmax_entropy", "wrong", "log_base_2",
          "Uses log2, giving the entropy in bits instead of nats.", ent_bits),
    Entry("softmax_entropy", "wrong", "zero_weights_give_nan",
          "Computes p * log(p) directly, so zero weights give 0 * -inf = NaN instead of "
          "contributing 0.", ent_nan_on_zero),
    Entry("softmax_entropy", "wrong", "axis_argument_ignored",
          "Always sums over the last axis, ignoring the axis argument.", ent_axis_ignored),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "Returns sum(p log p) without the minus sign, so entropies come out negative.",
          ent_sign),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "Averages -p log p over the axis instead of summing it, dividing the entropy by the "
          "number of outcomes.", ent_mean),
    Entry("softmax_entropy", "wrong", "keepdims_left_on",
          "Sums with keepdims=True, so the reduced axis stays as a length-1 axis and the "
          "result has the wrong shape.", ent_keepdims),
    Entry("softmax_entropy", "right", "scipy_entr", None, ent_scipy_entr),
    Entry("softmax_entropy", "right", "numpy_masked_log", None, ent_masked_array),

    Entry("softmax_jacobian", "wrong", "plus_outer_product",
          "Adds the outer product p p^T instead of subtracting it.", jac_plus_outer),
    Entry("softmax_jacobian", "wrong", "p_matmul_p_transpose_is_scalar",
          "Writes p @ p.T for the outer product, but .T does nothing to a 1-D array, so it "
          "subtracts the scalar p.p from every entry.", jac_matmul_1d),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag_p",
          "Uses the identity matrix instead of diag(p) for the first term.", jac_identity),
    Entry("softmax_jacobian", "wrong", "sigmoid_derivative_diagonal",
          "Carries over the sigmoid derivative p(1-p) and returns diag(p(1-p)), dropping the "
          "off-diagonal terms -p_i p_j.", jac_sigmoid_diagonal),
    Entry("softmax_jacobian", "wrong", "softmax_applied_to_p",
          "Treats p as logits and applies softmax to it before forming diag(s) - s s^T, "
          "although p is already the probability vector.", jac_softmax_reapplied),
    Entry("softmax_jacobian", "wrong", "integer_buffer",
          "Fills a Jacobian created with np.zeros(..., dtype=int), so every entry is "
          "truncated to an integer (mostly 0).", jac_int_buffer),
    Entry("softmax_jacobian", "right", "python_kronecker_loops", None, jac_python_loops),
    Entry("softmax_jacobian", "right", "einsum_eye", None, jac_einsum),
]
