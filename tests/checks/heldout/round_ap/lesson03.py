"""Held-out catalogue, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy,
softmax_jacobian. Each function is one learner's own answer; wrong ones carry one slip."""

import math

import numpy as np
from scipy.special import entr

from entry import Entry


# ============================================================== dot_product_variance: wrong
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
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.standard_normal((n_samples, d_k))
    ks = gen.standard_normal((n_samples, d_k))
    products = np.einsum("ij,ij->i", qs, ks)
    return float(np.std(products))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


# ============================================================== dot_product_variance: right
def dpv_manual_unbiased(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pairs[0], pairs[1])
    centred = dots - dots.mean()
    return float(centred @ centred / (n_samples - 1))


def dpv_chunks_cov(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    dots = np.empty(n_samples)
    start = 0
    while start < n_samples:
        stop = min(start + 4096, n_samples)
        q = rng.standard_normal((stop - start, d_k))
        k = rng.standard_normal((stop - start, d_k))
        dots[start:stop] = np.matmul(q[:, None, :], k[:, :, None])[:, 0, 0]
        start = stop
    return float(np.cov(dots))


# ============================================================== softmax_entropy: wrong
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return plogp.sum(axis=axis)


def entropy_renormalised(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    w = w / w.sum(axis=axis, keepdims=True)  # make sure it is a distribution
    safe = np.where(w > 0, w, 1.0)
    return -(w * np.log(safe)).sum(axis=axis)


def entropy_ignores_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.zeros_like(p)
    nz = p > 0
    terms[nz] = p[nz] * np.log(p[nz])
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.nan_to_num(p * np.log(p))
    return -np.mean(t, axis=axis)


# ============================================================== softmax_entropy: right
def entropy_scipy_entr(weights, axis=-1):
    return entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_python_loops(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        h = 0.0
        for w in p[idx]:
            if w > 0:
                h -= w * math.log(w)
        out[idx] = h
    return out if out.ndim else float(out)  # one distribution: a plain number


# ============================================================== softmax_jacobian: wrong
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_loop_lower_only(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] = p[i] * (1 - p[i])
        for j in range(i):
            J[i, j] = -p[i] * p[j]
    return J


def jac_int_buffer(p):
    n = p.shape[0]
    J = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            J[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return J


def jac_kron(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - np.kron(p, p)


# ============================================================== softmax_jacobian: right
def jac_factorised(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


def jac_kronecker_delta_loops(p):
    vals = [float(v) for v in p]
    n = len(vals)
    rows = [[vals[i] * ((1.0 if i == j else 0.0) - vals[j]) for j in range(n)] for i in range(n)]
    return np.array(rows, dtype=np.float64).reshape(n, n)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dot_products",
          "divides the dot products by sqrt(d_k), so it measures the variance of the scaled "
          "scores (about 1), not the unscaled q . k (about d_k)",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "seed_not_used",
          "creates the generator without the seed, so two calls with the same seed give "
          "different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "k_is_q",
          "reuses the query draws as the keys (k = q), so it measures the variance of |q|^2 "
          "(about 2 d_k) instead of independent q . k",
          dpv_same_vector),
    Entry("dot_product_variance", "wrong", "standard_deviation",
          "returns the standard deviation (np.std, about sqrt(d_k)) instead of the variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "dot_summed_over_samples",
          "sums q * k over the samples axis (axis=0) instead of the feature axis, so it takes "
          "the variance of d_k sums of n_samples products",
          dpv_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws q and k with rng.random, which is uniform on [0, 1), not standard normal",
          dpv_uniform),
    Entry("dot_product_variance", "right", "manual_unbiased_variance", None, dpv_manual_unbiased),
    Entry("dot_product_variance", "right", "chunked_batched_matmul_cov", None, dpv_chunks_cov),

    Entry("softmax_entropy", "wrong", "log_base_2",
          "uses np.log2, giving the entropy in bits instead of nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "returns sum p log p without the minus sign, so every entropy is negative",
          entropy_no_minus),
    Entry("softmax_entropy", "wrong", "renormalises_weights",
          "renormalises the weights first, so an all-zero distribution becomes 0/0 = NaN "
          "instead of entropy 0",
          entropy_renormalised),
    Entry("softmax_entropy", "wrong", "always_last_axis",
          "sums over the last axis whatever `axis` is", entropy_ignores_axis),
    Entry("softmax_entropy", "wrong", "keepdims_true",
          "sums with keepdims=True, so the reduced axis is kept with length 1 instead of removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "averages -p log p over the axis (np.mean) instead of summing, dividing the entropy "
          "by the number of outcomes",
          entropy_mean),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python_loops_math_log", None, entropy_python_loops),

    Entry("softmax_jacobian", "wrong", "p_at_p_T_is_a_scalar",
          "writes p @ p.T for the outer product, but .T does nothing to a 1-D array, so it "
          "subtracts the scalar p . p from every entry",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "identity_for_diag_p",
          "uses the identity matrix where diag(p) belongs", jac_identity),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "computes p p^T - diag(p), the negative of the Jacobian", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "loop_fills_lower_triangle_only",
          "the inner loop runs over range(i), so only the entries below the diagonal are "
          "filled and the upper triangle stays 0",
          jac_loop_lower_only),
    Entry("softmax_jacobian", "wrong", "integer_buffer",
          "fills a buffer created with dtype=int, so every entry is truncated towards 0",
          jac_int_buffer),
    Entry("softmax_jacobian", "wrong", "np_kron_for_outer",
          "uses np.kron for the outer product, but for two vectors it returns a flat (n*n,) "
          "vector, which does not broadcast against the (n, n) diag(p)",
          jac_kron),
    Entry("softmax_jacobian", "right", "factorised_closed_form", None, jac_factorised),
    Entry("softmax_jacobian", "right", "kronecker_delta_lists", None, jac_kronecker_delta_loops),
]
