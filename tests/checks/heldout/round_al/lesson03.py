"""Held-out learners' answers, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

import math

import numpy as np
import scipy.stats
import torch
from scipy.special import entr

from entry import Entry


# ----------------------------------------------------------------------------- variance, wrong
def variance_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def variance_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def variance_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var(np.sum(q * k, axis=-1)))


def variance_sum_over_samples(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.standard_normal((n_samples, d_k))
    ks = gen.standard_normal((n_samples, d_k))
    products = (qs * ks).sum(axis=0)
    return float(np.var(products))


def variance_returns_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("ij,ij->i", q, k)))


def variance_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    dots = np.sum(q * k, axis=1)
    return float(np.var(dots))


# ----------------------------------------------------------------------------- variance, right
def variance_by_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    both = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("nd,nd->n", both[0], both[1])
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / n_samples)


def variance_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return torch.var((q * k).sum(dim=1), unbiased=False).item()


# ----------------------------------------------------------------------------- entropy, wrong
def entropy_plain_log(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(p * np.log(p), axis=axis)


def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logp = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=axis)


def entropy_last_axis_only(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=-1)


def entropy_no_minus(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    terms = np.zeros_like(w)
    nz = w > 0
    terms[nz] = w[nz] * np.log(w[nz])
    return terms.sum(axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis, keepdims=True)


def entropy_scipy_stats(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights, dtype=float), axis=axis)


# ----------------------------------------------------------------------------- entropy, right
def entropy_entr(weights, axis=-1):
    return entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_torch_xlogy(weights, axis=-1):
    t = torch.as_tensor(np.asarray(weights, dtype=np.float64))
    h = (-torch.special.xlogy(t, t).sum(dim=axis)).numpy()
    return h[()]  # a 0-d result comes back as a numpy scalar


# ----------------------------------------------------------------------------- jacobian, wrong
def jacobian_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - np.dot(p, p)


def jacobian_broadcast_wrong_side(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    return p * (np.eye(n) - p)


def jacobian_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p - p ** 2)


def jacobian_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jacobian_loop_off_by_one(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n - 1):
        for j in range(n):
            if i == j:
                J[i, j] = p[i] * (1 - p[i])
            else:
                J[i, j] = -p[i] * p[j]
    return J


def jacobian_softmax_first(p):
    z = np.asarray(p, dtype=float)
    s = np.exp(z - z.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


# ----------------------------------------------------------------------------- jacobian, right
def jacobian_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.shape[0])
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


def jacobian_torch(p):
    t = torch.as_tensor(np.asarray(p, dtype=np.float64))
    return (torch.diag_embed(t) - t[:, None] * t[None, :]).numpy()


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_by_sqrt_dk",
          "the dot products are divided by sqrt(d_k), so it returns about 1 instead of the "
          "unscaled variance d_k", variance_scaled),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "the generator is created with np.random.default_rng() without the seed, so two calls "
          "with the same seed give different numbers", variance_unseeded),
    Entry("dot_product_variance", "wrong", "k_is_q",
          "k is set to the same draw as q, so it measures the variance of |q|^2 (about 2 d_k) "
          "instead of that of q . k for independent vectors", variance_same_vector),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "the products are summed over axis 0 (the samples) instead of axis 1 (the d_k "
          "features), so it gets d_k sums of n_samples terms instead of n_samples dot products",
          variance_sum_over_samples),
    Entry("dot_product_variance", "wrong", "returns_std",
          "it returns np.std (about sqrt(d_k)) instead of np.var", variance_returns_std),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "rng.random draws uniform numbers in [0, 1), not standard normals, so the vectors are "
          "not N(0, I)", variance_uniform_draws),
    Entry("dot_product_variance", "right", "by_moments", None, variance_by_moments),
    Entry("dot_product_variance", "right", "torch_generator", None, variance_torch_generator),
    Entry("softmax_entropy", "wrong", "zero_times_log_zero",
          "it computes p * log(p) directly, so zero weights give 0 * (-inf) = NaN instead of "
          "contributing 0", entropy_plain_log),
    Entry("softmax_entropy", "wrong", "log2_bits",
          "it uses np.log2, giving the entropy in bits instead of nats", entropy_bits),
    Entry("softmax_entropy", "wrong", "sums_last_axis",
          "the sum is taken over axis=-1 whatever `axis` is passed", entropy_last_axis_only),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "the leading minus sign is missing, so the entropy comes out negative",
          entropy_no_minus),
    Entry("softmax_entropy", "wrong", "keepdims",
          "the sum keeps the reduced axis (keepdims=True), so the result has a length-1 axis "
          "instead of having that axis removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "scipy_stats_entropy",
          "scipy.stats.entropy renormalises each distribution first, so an all-zero row becomes "
          "0/0 and gives NaN instead of 0", entropy_scipy_stats),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_entr),
    Entry("softmax_entropy", "right", "torch_xlogy", None, entropy_torch_xlogy),
    Entry("softmax_jacobian", "wrong", "dot_is_inner_product",
          "np.dot of two vectors is the inner product p . p (a scalar), not the outer product "
          "p p^T, so the same number is subtracted from every entry", jacobian_inner_product),
    Entry("softmax_jacobian", "wrong", "broadcast_wrong_side",
          "p * (I - p) broadcasts p along the columns, giving p_j (delta_ij - p_j) instead of "
          "p_i (delta_ij - p_j): p needs to be a column, p[:, None]", jacobian_broadcast_wrong_side),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "it returns only the diagonal p_i (1 - p_i) and drops the off-diagonal -p_i p_j terms",
          jacobian_diagonal_only),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "it returns p p^T - diag(p), the negative of the Jacobian", jacobian_sign_flipped),
    Entry("softmax_jacobian", "wrong", "loop_skips_last_row",
          "the outer loop runs over range(n - 1), so the last row of the Jacobian stays zero",
          jacobian_loop_off_by_one),
    Entry("softmax_jacobian", "wrong", "softmax_of_p",
          "it treats p as logits and applies softmax to it first, but p is already the "
          "probability vector", jacobian_softmax_first),
    Entry("softmax_jacobian", "right", "einsum", None, jacobian_einsum),
    Entry("softmax_jacobian", "right", "torch_diag_embed", None, jacobian_torch),
]
