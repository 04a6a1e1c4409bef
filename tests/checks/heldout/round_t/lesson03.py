"""Held-out catalogue, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy,
softmax_jacobian. Each wrong answer carries exactly one slip."""

import math

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


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("ij,ij->i", q, k)))


def dpv_same_draw(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_sum_axis0(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(dots.var())


def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    gen = np.random.Generator(np.random.PCG64(seed))
    q = gen.standard_normal((n_samples, d_k))
    k = gen.standard_normal((n_samples, d_k))
    dots = np.zeros(n_samples)
    for j in range(d_k):  # accumulate one coordinate at a time
        dots += q[:, j] * k[:, j]
    mean = math.fsum(dots) / n_samples
    return math.fsum((dots - mean) ** 2) / n_samples


def dpv_legacy_randomstate(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    pairs = rs.randn(2, d_k, n_samples)  # coordinates along axis 1, samples along axis 2
    dots = np.einsum("ds,ds->s", pairs[0], pairs[1])
    return float(np.mean(dots ** 2) - np.mean(dots) ** 2)


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_axis_fixed(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = p * np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.mean(plogp, axis=axis)


def entropy_softmax_again(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    e = np.exp(w - w.max(axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=axis)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return np.sum(p * logp, axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_xlogy_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, 0)
    total = np.zeros(p.shape[1:])
    for slab in p:  # one position along `axis` at a time
        total -= scipy.special.xlogy(slab, slab)
    return total[()]  # a numpy scalar, not a 0-d array, for a single distribution


# ============================================================================ softmax_jacobian
def jac_transpose_1d(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p.T @ p


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_loop_from_one(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    jac = np.zeros((n, n))
    for i in range(1, n):
        for j in range(n):
            jac[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return jac


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_double_loop(p):
    p = [float(v) for v in np.asarray(p)]
    n = len(p)
    rows = [[p[i] * ((i == j) - p[j]) for j in range(n)] for i in range(n)]
    return np.array(rows, dtype=np.float64).reshape(n, n)


def jac_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * np.eye(p.size) - np.einsum("i,j->ij", p, p)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance d_k",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products, the standard deviation sqrt(d_k), not the "
          "variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "k_is_q",
          "reuses the query draw as the key (k = q), so it measures q . q, whose variance is "
          "2 d_k, instead of two independent vectors",
          dpv_same_draw),
    Entry("dot_product_variance", "wrong", "rng_not_seeded",
          "creates np.random.default_rng() without passing `seed`, so two calls with the same "
          "seed give different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws q and k with rng.random, which is uniform on [0, 1), not standard normal, so "
          "the variance is about 0.05 d_k",
          dpv_uniform),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "sums the products over axis 0 (the samples) instead of axis 1 (the coordinates), so "
          "it takes the variance of d_k sums of n_samples products",
          dpv_sum_axis0),
    Entry("dot_product_variance", "right", "coordinate_loop_fsum", None, dpv_manual_moments),
    Entry("dot_product_variance", "right", "legacy_randomstate_moments", None,
          dpv_legacy_randomstate),

    Entry("softmax_entropy", "wrong", "log_base_2",
          "uses np.log2, giving the entropy in bits instead of nats",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "axis_hard_coded",
          "sums over axis=-1 whatever `axis` is, so distributions laid along axis 0 or -2 are "
          "summed across the wrong axis",
          entropy_axis_fixed),
    Entry("softmax_entropy", "wrong", "keepdims",
          "sums with keepdims=True, so the reduced axis stays (length 1) instead of being "
          "removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "averages -p log p over the axis instead of summing it, dividing the entropy by the "
          "number of outcomes",
          entropy_mean),
    Entry("softmax_entropy", "wrong", "softmax_applied_again",
          "treats the weights as logits and applies a softmax to them first, so it measures "
          "the entropy of softmax(weights) rather than of the given distributions",
          entropy_softmax_again),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "returns sum p log p without the minus sign, a negative number",
          entropy_no_minus),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "xlogy_loop_over_axis", None, entropy_xlogy_loop),

    Entry("softmax_jacobian", "wrong", "transpose_of_1d",
          "writes p.T @ p for the outer product, but .T does nothing to a 1-D array, so it is "
          "the scalar p . p subtracted from every entry",
          jac_transpose_1d),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p (elementwise, shape (n,)), which broadcasts as p_j^2 down every "
          "column, instead of the outer product p p^T",
          jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "returns only the diagonal p_i (1 - p_i), forgetting the off-diagonal terms "
          "-p_i p_j (each output depends on every input)",
          jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "identity_not_diag_p",
          "uses the identity matrix where diag(p) belongs",
          jac_identity),
    Entry("softmax_jacobian", "wrong", "row_loop_from_one",
          "the row loop starts at 1 (range(1, n)), so row 0 of the Jacobian stays zero",
          jac_loop_from_one),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian",
          jac_sign_flipped),
    Entry("softmax_jacobian", "right", "python_double_loop", None, jac_double_loop),
    Entry("softmax_jacobian", "right", "einsum_outer", None, jac_einsum),
]
