"""Held-out catalogue (round y), lesson 03: dot_product_variance, softmax_entropy,
softmax_jacobian (numpy)."""

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


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(size=(n_samples, d_k))
    k = q
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.standard_normal((n_samples, d_k))
    ks = gen.standard_normal((n_samples, d_k))
    return float(np.std((qs * ks).sum(-1)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_chunked_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    total = 0.0
    total_sq = 0.0
    done = 0
    chunk = 8192
    while done < n_samples:
        m = min(chunk, n_samples - done)
        q = rng.standard_normal((m, d_k))
        k = rng.standard_normal((m, d_k))
        s = np.einsum("ij,ij->i", q, k)
        total += float(s.sum())
        total_sq += float((s * s).sum())
        done += m
    mean = total / n_samples
    return total_sq / n_samples - mean * mean


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(int(seed))
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    dots = (q * k).sum(dim=1)
    return dots.var(unbiased=False).item()


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -(p * logs).sum(axis=axis)


def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -np.sum(terms, axis=-1)


def entropy_sign(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    safe = np.where(w > 0, w, 1.0)
    return np.sum(w * np.log(safe), axis=axis)


def entropy_no_zero_guard(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = p * np.log(p, out=np.zeros_like(p), where=p > 0)
    return -plogp.sum(axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    log_p = np.log(np.clip(p, 1e-300, None))
    contrib = np.where(p > 0, p * log_p, 0.0)
    return -np.mean(contrib, axis=axis)


def entropy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_python_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    result = np.empty(flat.shape[0])
    for i, row in enumerate(flat):
        h = 0.0
        for value in row:
            if value > 0:
                h -= value * math.log(value)
        result[i] = h
    if p.ndim == 1:
        return float(result[0])
    return result.reshape(p.shape[:-1])


# ============================================================================ softmax_jacobian
def jac_matmul_1d(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_broadcast_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    return np.eye(n) - np.outer(p, p)


def jac_sign(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_loop_misses_last(p):
    p = np.asarray(p, dtype=float)
    J = -np.outer(p, p)
    for i in range(len(p) - 1):
        J[i, i] += p[i]
    return J


def jac_fill_diagonal(p):
    p = np.asarray(p, dtype=float)
    jac = -np.outer(p, p)
    np.fill_diagonal(jac, p)
    return jac


def jac_kronecker_loop(p):
    vals = [float(t) for t in np.asarray(p)]
    n = len(vals)
    jac = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            delta = 1.0 if i == j else 0.0
            jac[i, j] = vals[i] * (delta - vals[j])
    return jac


def jac_factored(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled-dot",
          "the dot products are divided by sqrt(d_k) before the variance is taken, so it returns "
          "about 1 instead of the unscaled variance d_k", dpv_scaled),
    Entry("dot_product_variance", "wrong", "k-is-q",
          "k is set to the same samples as q, so it measures the variance of q . q (about 2 d_k) "
          "instead of two independent vectors", dpv_same_vector),
    Entry("dot_product_variance", "wrong", "rng-ignores-seed",
          "default_rng() is called without the seed, so two calls with the same seed give different "
          "numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "sum-over-samples",
          "the products are summed over axis 0 (the samples) instead of over the d_k features, so "
          "it takes the variance of only d_k sums of n_samples products (0 for d_k=1, about "
          "n_samples otherwise)",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "std-not-var",
          "np.std is returned instead of np.var, so the result is about sqrt(d_k), not d_k",
          dpv_std),
    Entry("dot_product_variance", "wrong", "uniform-samples",
          "rng.random draws uniform [0, 1) numbers instead of standard normals, so the variance of "
          "the dot product is about 0.049 d_k, not d_k", dpv_uniform),
    Entry("dot_product_variance", "right", "chunked-moments", None, dpv_chunked_moments),
    Entry("dot_product_variance", "right", "torch-generator", None, dpv_torch_generator),

    Entry("softmax_entropy", "wrong", "log2-bits",
          "the logarithm is np.log2, so the entropy is in bits instead of nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "sum-over-last-axis",
          "the sum is over axis=-1 whatever axis was asked for, so axis=0/1/-2 give the wrong "
          "values (and shape)", entropy_last_axis),
    Entry("softmax_entropy", "wrong", "missing-minus",
          "the minus sign is missing: it returns sum p log p, the negative of the entropy",
          entropy_sign),
    Entry("softmax_entropy", "wrong", "no-zero-guard",
          "zero weights are not handled, so 0 * log(0) = 0 * -inf gives NaN instead of contributing 0",
          entropy_no_zero_guard),
    Entry("softmax_entropy", "wrong", "keepdims",
          "the sum uses keepdims=True, so the reduced axis stays with length 1 instead of being removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean-instead-of-sum",
          "the terms -p log p are averaged (np.mean) instead of summed, so the entropy is divided by "
          "the number of entries along axis", entropy_mean),
    Entry("softmax_entropy", "right", "scipy-entr", None, entropy_entr),
    Entry("softmax_entropy", "right", "python-loop", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "matmul-of-vectors",
          "p @ p of two 1-D arrays is the scalar sum p_i^2, not the outer product, so a constant is "
          "subtracted from every entry", jac_matmul_1d),
    Entry("softmax_jacobian", "wrong", "elementwise-square",
          "p * p is the element-wise square (n,), which broadcasts across rows, instead of the "
          "outer product p p^T", jac_broadcast_square),
    Entry("softmax_jacobian", "wrong", "identity-for-diag",
          "np.eye(n) is used where diag(p) belongs, so the diagonal is 1 - p_i^2 instead of "
          "p_i - p_i^2", jac_identity),
    Entry("softmax_jacobian", "wrong", "sign-flipped",
          "it returns p p^T - diag(p), the negative of the Jacobian", jac_sign),
    Entry("softmax_jacobian", "wrong", "loop-skips-last-diagonal",
          "the loop adding p_i to the diagonal runs over range(len(p) - 1), so the last diagonal "
          "entry misses its + p_n", jac_loop_misses_last),
    Entry("softmax_jacobian", "wrong", "fill-diagonal-overwrites",
          "np.fill_diagonal overwrites the diagonal with p instead of adding p to -p_i^2, so the "
          "diagonal is p_i instead of p_i - p_i^2", jac_fill_diagonal),
    Entry("softmax_jacobian", "right", "kronecker-loop", None, jac_kronecker_loop),
    Entry("softmax_jacobian", "right", "factored-closed-form", None, jac_factored),
]
