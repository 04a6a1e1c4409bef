"""Held-out catalogue, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math

import numpy as np
import torch
from scipy import special, stats

from entry import Entry


# ============================================================================ dot_product_variance
def dpv_scaled_dots(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_uniform_draws(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    q = gen.random((n_samples, d_k))
    k = gen.random((n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def dpv_std_not_var(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qs = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    ks = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    dots = np.einsum("nd,nd->n", qs, ks)
    return float(np.std(dots))


def dpv_variance_precedence(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    s = (q * k).sum(-1)
    return float(np.mean(s - s.mean() ** 2))


def dpv_reseeded_generators(d_k, n_samples=100_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    k = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    products = q * k
    return float(products.sum(axis=1).var())


def dpv_right_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.zeros(n_samples)
    for j in range(d_k):  # accumulate the dot products one coordinate at a time
        dots += q[:, j] * k[:, j]
    centred = dots - dots.sum() / n_samples
    return float((centred @ centred) / n_samples)


def dpv_right_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return torch.var((q * k).sum(dim=1), unbiased=False).item()


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logp = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logp, axis=axis)


def entropy_axis_hardcoded(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights, dtype=np.float64)
    safe = np.where(w > 0, w, 1.0)
    return -np.sum(w * np.log(safe), axis=axis, keepdims=True)


def entropy_missing_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = np.zeros_like(p)
    nz = p > 0
    plogp[nz] = p[nz] * np.log(p[nz])
    return plogp.sum(axis=axis)


def entropy_scipy_stats(weights, axis=-1):
    return stats.entropy(np.asarray(weights, dtype=float), axis=axis)


def entropy_mean_not_sum(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        contrib = np.nan_to_num(p * np.log(p))
    return -np.mean(contrib, axis=axis)


def entropy_right_entr(weights, axis=-1):
    return special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_right_row_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    rows = p.reshape(-1, p.shape[-1])
    h = np.zeros(rows.shape[0])
    for r in range(rows.shape[0]):
        h[r] = -math.fsum(x * math.log(x) for x in rows[r] if x > 0)
    return h.reshape(p.shape[:-1])[()]  # a plain scalar for a single distribution


# ============================================================================ softmax_jacobian
def jac_dot_transpose(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_elementwise_square(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=np.float64)
    return np.outer(p, p) - np.diag(p)


def jac_fill_diagonal_overwrite(p):
    p = np.asarray(p, dtype=float)
    J = -np.outer(p, p)
    np.fill_diagonal(J, p)
    return J


def jac_loop_skips_first_diag(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                J[i, j] = -p[i] * p[j]
    for i in range(1, n):
        J[i, i] = p[i] * (1 - p[i])
    return J


def jac_softmax_first(p):
    p = np.asarray(p, dtype=float)
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_right_closed_form(p):
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    return p[:, None] * (np.eye(n) - p[None, :])


def jac_right_double_loop(p):
    vals = [float(v) for v in p]
    n = len(vals)
    rows = [[(vals[i] if i == j else 0.0) - vals[i] * vals[j] for j in range(n)]
            for i in range(n)]
    return np.array(rows, dtype=np.float64).reshape(n, n)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "divides-by-sqrt-dk",
          "it divides the dot products by sqrt(d_k) as attention does, so it measures the "
          "variance of the scaled score (about 1) instead of the unscaled q . k (about d_k)",
          dpv_scaled_dots),
    Entry("dot_product_variance", "wrong", "sum-over-samples-axis",
          "the products are summed along axis 0 (over the samples) instead of axis 1 (over the "
          "d_k coordinates), so it takes the variance of d_k sums of n_samples products",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "rng-random-uniform",
          "rng.random draws uniform numbers in [0, 1), not standard normals, so q and k are not "
          "N(0, I) and the variance is far below d_k", dpv_uniform_draws),
    Entry("dot_product_variance", "wrong", "std-instead-of-var",
          "it returns np.std of the dot products, the standard deviation (about sqrt(d_k)), not "
          "their variance", dpv_std_not_var),
    Entry("dot_product_variance", "wrong", "variance-precedence",
          "the variance is written mean(s - s.mean() ** 2): by precedence only the mean is "
          "squared, so it returns mean(s) - mean(s)^2 (about 0) instead of "
          "mean((s - mean(s))^2)", dpv_variance_precedence),
    Entry("dot_product_variance", "wrong", "same-seed-two-generators",
          "it makes a fresh generator with the same seed for q and for k, so k is an exact "
          "copy of q and it measures the variance of |q|^2 (about 2 d_k)",
          dpv_reseeded_generators),
    Entry("dot_product_variance", "right", "coordinate-loop-manual-moment", None,
          dpv_right_manual_moments),
    Entry("dot_product_variance", "right", "torch-generator-float64", None,
          dpv_right_torch_generator),

    Entry("softmax_entropy", "wrong", "log2-bits",
          "it uses np.log2, so the entropy is in bits, not in nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "sum-hardcoded-last-axis",
          "the sum ignores `axis` and always runs over the last axis, so for axis=0 or other "
          "axes it adds up the wrong entries", entropy_axis_hardcoded),
    Entry("softmax_entropy", "wrong", "keepdims-true",
          "the sum uses keepdims=True, so the reduced axis is kept with length 1 instead of "
          "being removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "missing-minus-sign",
          "it returns sum p log p without the minus sign, so every entropy is negative",
          entropy_missing_minus),
    Entry("softmax_entropy", "wrong", "scipy-stats-entropy-renormalises",
          "scipy.stats.entropy renormalises each distribution by its sum, so an all-zero row "
          "becomes 0/0 and gives NaN instead of 0", entropy_scipy_stats),
    Entry("softmax_entropy", "wrong", "mean-instead-of-sum",
          "it averages the -p log p terms with np.mean instead of summing them, dividing the "
          "entropy by the length of the axis", entropy_mean_not_sum),
    Entry("softmax_entropy", "right", "scipy-special-entr", None, entropy_right_entr),
    Entry("softmax_entropy", "right", "moveaxis-fsum-rows", None, entropy_right_row_loop),

    Entry("softmax_jacobian", "wrong", "p-at-p-T-is-a-scalar",
          "p @ p.T on a 1-D vector is the scalar dot product (.T does nothing to a 1-D array), "
          "not the outer product, so the same number is subtracted from every entry",
          jac_dot_transpose),
    Entry("softmax_jacobian", "wrong", "elementwise-square-broadcast",
          "p * p is the elementwise square, which broadcasts along the rows, so entry (i, j) "
          "gets p_j^2 subtracted instead of p_i p_j", jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "sign-flipped",
          "it returns p p^T - diag(p), the negative of the Jacobian", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "fill-diagonal-overwrites",
          "np.fill_diagonal overwrites the diagonal of -p p^T with p, losing the -p_i^2 term: "
          "the diagonal is p_i instead of p_i - p_i^2", jac_fill_diagonal_overwrite),
    Entry("softmax_jacobian", "wrong", "diagonal-loop-starts-at-1",
          "the loop that fills the diagonal starts at 1, so entry (0, 0) stays 0 instead of "
          "p_0 (1 - p_0)", jac_loop_skips_first_diag),
    Entry("softmax_jacobian", "wrong", "softmax-of-p-first",
          "it treats p as logits and applies softmax to it before forming diag(s) - s s^T, but "
          "p is already the probability vector", jac_softmax_first),
    Entry("softmax_jacobian", "right", "p-times-eye-minus-p", None, jac_right_closed_form),
    Entry("softmax_jacobian", "right", "python-double-loop", None, jac_right_double_loop),
]
