"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian. numpy in, numpy out."""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry


# ----------------------------------------------------------------------------- variance, wrong
def variance_of_scaled_scores(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    scores = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(scores.var())


def variance_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def variance_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def variance_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var((q * k).sum(-1)))


def variance_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


def variance_returns_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.standard_normal(size=(n_samples, d_k))
    ks = gen.standard_normal(size=(n_samples, d_k))
    dots = np.einsum("ij,ij->i", qs, ks)
    return float(np.std(dots))


# ----------------------------------------------------------------------------- variance, right
def variance_moments_by_hand(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.standard_normal((2, n_samples, d_k))
    dots = (pairs[0] * pairs[1]).sum(axis=1)
    mean = dots.sum() / n_samples
    return float((dots * dots).sum() / n_samples - mean * mean)


def variance_torch_generator(d_k, n_samples=100_000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    return torch.var((q * k).sum(dim=1)).item()


# ----------------------------------------------------------------------------- entropy, wrong
def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -(p * logs).sum(axis=axis)


def entropy_last_axis_only(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_no_zero_guard(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    safe = np.where(w > 0, w, 1.0)
    return -np.sum(w * np.log(safe), axis=axis, keepdims=True)


def entropy_missing_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    plogp = np.zeros_like(p)
    nz = p > 0
    plogp[nz] = p[nz] * np.log(p[nz])
    return plogp.sum(axis=axis)


def entropy_mean_not_sum(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    lg = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.mean(p * lg, axis=axis)


# ----------------------------------------------------------------------------- entropy, right
def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_python_rows(weights, axis=-1):
    arr = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = arr.reshape(-1, arr.shape[-1])
    result = []
    for row in flat:
        h = 0.0
        for pi in row:
            if pi > 0:
                h -= pi * math.log(pi)
        result.append(h)
    return np.array(result).reshape(arr.shape[:-1])[()]


# ----------------------------------------------------------------------------- jacobian, wrong
def jacobian_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jacobian_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jacobian_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jacobian_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jacobian_sign_flipped(p):
    vec = np.asarray(p, dtype=float)
    return np.outer(vec, vec) - np.diag(vec)


def jacobian_int_buffer(p):
    n = len(p)
    jac = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            jac[i, j] = (p[i] if i == j else 0) - p[i] * p[j]
    return jac


# ----------------------------------------------------------------------------- jacobian, right
def jacobian_kronecker_loops(p):
    p = [float(t) for t in np.asarray(p)]
    n = len(p)
    return np.array([[p[i] * ((1.0 if i == j else 0.0) - p[j]) for j in range(n)]
                     for i in range(n)])


def jacobian_factored(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_scores",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 (the scaled score's variance) instead of about d_k",
          variance_of_scaled_scores),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "builds np.random.default_rng() without the seed, so two calls with the same seed "
          "give different numbers", variance_unseeded),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "sums q*k over axis 0 (the samples) instead of over the d_k features, so it takes "
          "the variance of d_k huge sums rather than of n_samples dot products",
          variance_sum_over_samples),
    Entry("dot_product_variance", "wrong", "k_is_q",
          "reuses q as k, so it measures the variance of |q|^2 (about 2 d_k) instead of q . k "
          "for independent vectors", variance_same_vector),
    Entry("dot_product_variance", "wrong", "uniform_not_normal",
          "draws with rng.random, which is uniform on [0, 1), instead of standard normal "
          "vectors", variance_uniform_draws),
    Entry("dot_product_variance", "wrong", "std_not_variance",
          "returns np.std of the dot products (about sqrt(d_k)) instead of their variance",
          variance_returns_std),
    Entry("dot_product_variance", "right", "one_draw_moments_by_hand", None,
          variance_moments_by_hand),
    Entry("dot_product_variance", "right", "torch_generator", None, variance_torch_generator),
    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses np.log2, giving the entropy in bits instead of nats", entropy_bits),
    Entry("softmax_entropy", "wrong", "sums_last_axis",
          "sums over the last axis whatever `axis` says", entropy_last_axis_only),
    Entry("softmax_entropy", "wrong", "no_zero_guard",
          "computes p * log(p) without guarding p = 0, so zero weights give 0 * -inf = NaN",
          entropy_no_zero_guard),
    Entry("softmax_entropy", "wrong", "keepdims_left_on",
          "sums with keepdims=True, so the reduced axis stays in the result (wrong shape)",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "forgets the minus sign: returns sum p log p, which is <= 0",
          entropy_missing_minus),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "averages -p log p over the axis (np.mean) instead of summing it",
          entropy_mean_not_sum),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python_loop_rows", None, entropy_python_rows),
    Entry("softmax_jacobian", "wrong", "inner_product_not_outer",
          "writes p @ p, the scalar inner product, where the outer product p p^T belongs",
          jacobian_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p, an (n,) vector that broadcasts along the rows, instead of the "
          "(n, n) outer product", jacobian_elementwise_square),
    Entry("softmax_jacobian", "wrong", "identity_not_diag",
          "uses the identity matrix where diag(p) belongs", jacobian_identity),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "keeps only the diagonal p_i (1 - p_i) and drops the off-diagonal -p_i p_j",
          jacobian_diagonal_only),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jacobian_sign_flipped),
    Entry("softmax_jacobian", "wrong", "integer_buffer",
          "fills a np.zeros((n, n), dtype=int) buffer, so every entry is truncated to an "
          "integer (mostly 0)", jacobian_int_buffer),
    Entry("softmax_jacobian", "right", "kronecker_loops", None, jacobian_kronecker_loops),
    Entry("softmax_jacobian", "right", "factored_p_times_eye_minus_p", None,
          jacobian_factored),
]
