"""Held-out catalogue, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

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


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_self_dot(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    dots = np.einsum("nd,nd->n", q, q)
    return float(np.var(dots))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_moments(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    pairs = gen.normal(0.0, 1.0, size=(n_samples, 2, d_k))
    dots = np.einsum("nd,nd->n", pairs[:, 0], pairs[:, 1])
    return float(np.mean(dots ** 2) - np.mean(dots) ** 2)


def dpv_legacy_randomstate(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    qs = rs.randn(d_k, n_samples)
    ks = rs.randn(d_k, n_samples)
    products = (qs * ks).sum(axis=0)
    return float(np.var(products, ddof=1))


# ============================================================================ softmax_entropy
def _plogp(p):
    return p * np.log(p, out=np.zeros_like(p), where=p > 0)


def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_last_axis_only(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(_plogp(p), axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(_plogp(p), axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.mean(_plogp(p), axis=axis)


def entropy_boolean_filter(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    nz = p[p > 0]  # drop zeros to avoid log(0)
    return -np.sum(nz * np.log(nz), axis=-1)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return np.sum(_plogp(p), axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def entropy_python_loops(weights, axis=-1):
    arr = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    lead = arr.shape[:-1]
    rows = arr.reshape(-1, arr.shape[-1])
    vals = []
    for row in rows:
        h = 0.0
        for w in row:
            if w > 0:
                h -= w * math.log(w)
        vals.append(h)
    return np.array(vals).reshape(lead)[()]  # a scalar for a single distribution


# ============================================================================ softmax_jacobian
def jac_matmul_inner(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_elementwise(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_softmax_of_p(p):
    p = np.asarray(p, dtype=float)
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_loop_diag_missing_square(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] if i == j else -p[i] * p[j]
    return J


def jac_kronecker_loops(p):
    vals = [float(t) for t in np.asarray(p).ravel()]
    n = len(vals)
    return np.array([[vals[i] * ((1.0 if i == j else 0.0) - vals[j]) for j in range(n)]
                     for i in range(n)])


def jac_broadcast_closed_form(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dot",
          "divides the dot products by sqrt(d_k) before taking the variance, so it measures the "
          "scaled scores (about 1) instead of the unscaled q . k (about d_k)", dpv_scaled),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products, the standard deviation sqrt(d_k), not the "
          "variance", dpv_std),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "creates np.random.default_rng() without the seed argument, so two calls with the "
          "same seed give different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "sums q * k over axis 0 (the samples) instead of axis 1 (the d_k features), so it "
          "takes the variance of d_k sums of n_samples products", dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "q_dotted_with_itself",
          "draws only q and computes q . q, a chi-square with variance 2 d_k, instead of the dot "
          "product of two independent vectors", dpv_self_dot),
    Entry("dot_product_variance", "wrong", "uniform_samples",
          "uses rng.random, uniform on [0, 1), instead of standard normal draws, so the "
          "variance is far below d_k", dpv_uniform),
    Entry("dot_product_variance", "right", "second_moment_minus_mean_sq", None, dpv_moments),
    Entry("dot_product_variance", "right", "legacy_randomstate_ddof1", None,
          dpv_legacy_randomstate),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses log2, so the entropy is in bits instead of nats", entropy_bits),
    Entry("softmax_entropy", "wrong", "sum_hardcoded_last_axis",
          "sums over axis=-1 whatever the axis argument says", entropy_last_axis_only),
    Entry("softmax_entropy", "wrong", "keepdims_kept",
          "sums with keepdims=True, so the reduced axis is kept with length 1 instead of "
          "removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "averages -p log p over the axis (np.mean) instead of summing it, dividing each "
          "entropy by the number of entries", entropy_mean),
    Entry("softmax_entropy", "wrong", "boolean_mask_flattens",
          "drops zero weights with p[p > 0], which flattens the array, so it returns one number "
          "for all distributions together", entropy_boolean_filter),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "returns sum p log p without the minus sign, so entropies come out negative",
          entropy_no_minus),
    Entry("softmax_entropy", "right", "scipy_special_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "moveaxis_python_loops", None, entropy_python_loops),

    Entry("softmax_jacobian", "wrong", "matmul_inner_product",
          "p @ p on two 1-D vectors is the inner product (a scalar), not the outer product "
          "p p^T, so one number is subtracted from every entry", jac_matmul_inner),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p (elementwise, broadcast along rows) instead of np.outer(p, p)",
          jac_elementwise),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "computes p p^T - diag(p), the negative of the Jacobian", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag_p",
          "uses the identity I instead of diag(p) (drops the p_i factor of delta_ij p_i)",
          jac_identity),
    Entry("softmax_jacobian", "wrong", "softmax_applied_to_p",
          "applies softmax to p first, treating the probabilities as logits, so the Jacobian "
          "is taken at softmax(p) instead of at p", jac_softmax_of_p),
    Entry("softmax_jacobian", "wrong", "diagonal_missing_p_squared",
          "in the loop the diagonal is set to p_i instead of p_i - p_i^2 (only off-diagonal "
          "entries get the -p_i p_j term)", jac_loop_diag_missing_square),
    Entry("softmax_jacobian", "right", "kronecker_delta_loops", None, jac_kronecker_loops),
    Entry("softmax_jacobian", "right", "broadcast_closed_form", None, jac_broadcast_closed_form),
]
