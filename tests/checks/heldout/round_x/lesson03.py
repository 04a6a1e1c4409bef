"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math
import statistics

import numpy as np
import scipy.special

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
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def dpv_sum_axis0(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    queries = gen.normal(size=(n_samples, d_k))
    keys = gen.normal(size=(n_samples, d_k))
    products = np.sum(queries * keys, axis=0)
    return float(np.var(products))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.einsum("sd,sd->s", q, k)
    return float(np.std(dots))


def dpv_precedence(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(-1)
    return float(np.mean(dots - dots.mean()) ** 2)


def dpv_products_not_summed(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pair = rng.standard_normal((2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pair[0], pair[1])
    centred = dots - dots.mean()
    return float(np.dot(centred, centred) / n_samples)


def dpv_statistics_module(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    k = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    dots = (q * k).sum(axis=1).tolist()
    return statistics.variance(dots)


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_boolean_index(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    nz = p[p > 0]
    return -np.sum(nz * np.log(nz), axis=axis)


def entropy_ignores_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights, dtype=np.float64)
    safe = np.where(w > 0, w, 1.0)
    return -np.sum(w * np.log(safe), axis=axis, keepdims=True)


def entropy_normalised(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    n = p.shape[axis]
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    h = -plogp.sum(axis=axis)
    return h / np.log(n) if n > 1 else h


def entropy_renormalised(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    p = p / p.sum(axis=axis, keepdims=True)  # make sure each distribution sums to 1
    logp = np.log(np.where(p > 0, p, 1.0))
    return -(p * logp).sum(axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_loops(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    res = np.zeros(flat.shape[0])
    for i, row in enumerate(flat):
        h = 0.0
        for w in row:
            if w > 0:
                h -= w * math.log(w)
        res[i] = h
    return res.reshape(p.shape[:-1])[()]


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_diag_one_minus_p(p):
    p = np.asarray(p, dtype=np.float64)
    J = -np.outer(p, p)
    idx = np.arange(len(p))
    J[idx, idx] = 1.0 - p
    return J


def jac_int_matrix(p):
    n = len(p)
    J = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return J


def jac_column_times_column(p):
    p = np.asarray(p, dtype=np.float64)
    col = p.reshape(-1, 1)
    return np.diag(p) - col * p.reshape(-1, 1)


def jac_softmax_of_p(p):
    z = np.asarray(p, dtype=np.float64)
    s = np.exp(z - z.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_kronecker_loops(p):
    p = [float(v) for v in np.asarray(p)]
    n = len(p)
    return np.array([[p[i] * ((i == j) - p[j]) for j in range(n)] for i in range(n)])


def jac_row_scaled_identity(p):
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    return p[:, None] * (np.eye(n) - p[None, :])


ENTRIES = [
    # dot_product_variance
    Entry("dot_product_variance", "wrong", "divides_by_sqrt_dk",
          "divides the dot products by sqrt(d_k) as attention does, so it measures the scaled "
          "variance (about 1) instead of the unscaled one (about d_k)",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "rng_not_seeded",
          "creates np.random.default_rng() without passing seed, so two calls with the same "
          "seed give different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "sums_over_samples",
          "sums q*k over axis 0 (the samples) instead of axis 1 (the d_k coordinates), so it "
          "takes the variance of d_k sums of n_samples products",
          dpv_sum_axis0),
    Entry("dot_product_variance", "wrong", "std_instead_of_var",
          "returns np.std (about sqrt(d_k)) instead of np.var (about d_k)",
          dpv_std),
    Entry("dot_product_variance", "wrong", "square_outside_mean",
          "`np.mean(dots - dots.mean()) ** 2` squares the mean of the deviations (about 0) "
          "instead of taking the mean of the squared deviations",
          dpv_precedence),
    Entry("dot_product_variance", "wrong", "variance_of_products",
          "takes the variance of all the products q_i k_i (about 1) without first summing them "
          "into one dot product per sample",
          dpv_products_not_summed),
    Entry("dot_product_variance", "right", "centred_dot_product", None, dpv_manual_moments),
    Entry("dot_product_variance", "right", "statistics_variance", None, dpv_statistics_module),
    # softmax_entropy
    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses np.log2, so the entropy comes out in bits instead of nats",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "boolean_index_flattens",
          "drops the zero weights with p[p > 0], which flattens the array, so all the "
          "distributions are summed into one number (or axis is out of range)",
          entropy_boolean_index),
    Entry("softmax_entropy", "wrong", "sums_last_axis_always",
          "sums over axis -1 whatever `axis` says",
          entropy_ignores_axis),
    Entry("softmax_entropy", "wrong", "keeps_reduced_axis",
          "sums with keepdims=True, so the result keeps the reduced axis with length 1 instead "
          "of removing it",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "divides_by_log_n",
          "divides by log(n), returning the normalised entropy (between 0 and 1) instead of "
          "the entropy in nats",
          entropy_normalised),
    Entry("softmax_entropy", "wrong", "renormalises_rows",
          "renormalises each distribution by its sum first, so an all-zero row becomes 0/0 = "
          "NaN instead of entropy 0",
          entropy_renormalised),
    Entry("softmax_entropy", "right", "scipy_special_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python_loops", None, entropy_loops),
    # softmax_jacobian
    Entry("softmax_jacobian", "wrong", "p_at_p_T_is_a_scalar",
          "`p @ p.T` on a 1-D array is the inner product (a scalar), since .T does nothing to "
          "a vector; np.outer(p, p) belongs there",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "diagonal_one_minus_p",
          "sets the diagonal to 1 - p_i instead of p_i (1 - p_i): the factor p_i is missing",
          jac_diag_one_minus_p),
    Entry("softmax_jacobian", "wrong", "integer_matrix",
          "fills a matrix created with dtype=int, so every entry is truncated towards 0",
          jac_int_matrix),
    Entry("softmax_jacobian", "wrong", "column_times_column",
          "multiplies two column vectors, (n, 1) * (n, 1), which gives p_i^2 in every column "
          "instead of the outer product p_i p_j",
          jac_column_times_column),
    Entry("softmax_jacobian", "wrong", "softmax_of_p_first",
          "treats p as logits and applies softmax to it first, although p is already the "
          "probability vector at which the Jacobian is taken",
          jac_softmax_of_p),
    Entry("softmax_jacobian", "right", "kronecker_loops", None, jac_kronecker_loops),
    Entry("softmax_jacobian", "right", "row_scaled_identity", None, jac_row_scaled_identity),
]
