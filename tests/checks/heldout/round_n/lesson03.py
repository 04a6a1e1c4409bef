"""Held-out catalogue, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math

import numpy as np
from scipy.special import entr

from entry import Entry


# ============================================================================ dot_product_variance
def var_scaled_dots(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def var_global_random_state(d_k, n_samples=100_000, seed=0):
    q = np.random.randn(n_samples, d_k)
    k = np.random.randn(n_samples, d_k)
    return float(np.var(np.sum(q * k, axis=-1)))


def var_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def var_two_generators_same_seed(d_k, n_samples=100_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    k = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def var_returns_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std((q * k).sum(axis=1)))


def var_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def var_one_draw_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    both = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", both[0], both[1])
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / n_samples)


def var_chunked_loop_ddof1(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    dots = np.empty(n_samples)
    chunk = 10_000
    for start in range(0, n_samples, chunk):
        m = min(chunk, n_samples - start)
        q = rng.standard_normal((m, d_k))
        k = rng.standard_normal((m, d_k))
        dots[start:start + m] = np.einsum("ij,ij->i", q, k)
    return float(np.var(dots, ddof=1))


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_last_axis_only(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -plogp.sum(axis=-1)


def entropy_boolean_index(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    nz = p[p > 0]
    return -np.sum(nz * np.log(nz), axis=axis)


def entropy_missing_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return np.sum(p * np.log(safe), axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.mean(p * np.log(safe), axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.zeros_like(p)
    mask = p > 0
    terms[mask] = p[mask] * np.log(p[mask])
    return -terms.sum(axis=axis, keepdims=True)


def entropy_scipy_entr(weights, axis=-1):
    return np.sum(entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def entropy_rows_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    out = np.empty(flat.shape[0])
    for r, row in enumerate(flat):
        h = 0.0
        for w in row:
            if w > 0:
                h -= w * math.log(w)
        out[r] = h
    return out.reshape(p.shape[:-1])[()]  # a scalar for a single distribution


# ============================================================================ softmax_jacobian
def jac_dot_is_scalar(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_identity_diagonal(p):
    p = np.asarray(p, dtype=float)
    return np.eye(len(p)) - np.outer(p, p)


def jac_loop_skips_last_row(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n - 1):
        for j in range(n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return J


def jac_softmax_of_p(p):
    z = np.asarray(p, dtype=float)
    s = np.exp(z - z.max())
    s /= s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_fill_diagonal(p):
    p = np.asarray(p, dtype=float)
    J = -np.outer(p, p)
    np.fill_diagonal(J, p)
    return J


def jac_double_loop(p):
    p = [float(v) for v in np.asarray(p).ravel()]
    n = len(p)
    return np.array([[p[i] * (1.0 - p[i]) if i == j else -p[i] * p[j] for j in range(n)]
                     for i in range(n)])


def jac_factored_broadcast(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "It divides each dot product by sqrt(d_k) before taking the variance, so it measures "
          "the scaled scores (variance about 1) instead of the unscaled q . k (about d_k).",
          var_scaled_dots),
    Entry("dot_product_variance", "wrong", "ignores_seed",
          "It draws with np.random.randn from the global random state and never uses seed, so "
          "two calls with the same seed give different numbers.",
          var_global_random_state),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "rng.random draws uniform numbers on [0, 1), not standard normals, so the variance "
          "of the dot products is about 0.05 d_k instead of d_k.",
          var_uniform_draws),
    Entry("dot_product_variance", "wrong", "same_seed_twice",
          "It builds a fresh default_rng(seed) for k as well as for q, so k is identical to q, "
          "the dots are |q|^2 and their variance is about 2 d_k.",
          var_two_generators_same_seed),
    Entry("dot_product_variance", "wrong", "returns_std",
          "It returns np.std of the dot products (about sqrt(d_k)) instead of their variance.",
          var_returns_std),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "The products are summed over axis 0 (the samples) instead of over the d_k "
          "coordinates, so it takes the variance of d_k sums of n_samples products.",
          var_sum_over_samples),
    Entry("dot_product_variance", "right", "single_draw_manual_moments", None,
          var_one_draw_manual_moments),
    Entry("dot_product_variance", "right", "chunked_loop_ddof1", None, var_chunked_loop_ddof1),

    Entry("softmax_entropy", "wrong", "log_base_2",
          "It uses np.log2, so the entropy is in bits instead of nats.",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "sums_last_axis",
          "The p log p terms are always summed over the last axis, ignoring the axis argument.",
          entropy_last_axis_only),
    Entry("softmax_entropy", "wrong", "boolean_index_flattens",
          "Dropping zeros with p[p > 0] flattens the array to 1-D, so the sum returns a single "
          "number over all distributions (or raises for an axis other than 0 and -1) instead "
          "of one entropy per distribution.",
          entropy_boolean_index),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "The minus sign is missing: it returns sum p log p, the negative of the entropy.",
          entropy_missing_minus),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "It averages the -p log p terms with np.mean instead of summing them, dividing the "
          "entropy by the length of the axis.",
          entropy_mean),
    Entry("softmax_entropy", "wrong", "keepdims_true",
          "The sum uses keepdims=True, so the reduced axis stays with length 1 instead of being "
          "removed.",
          entropy_keepdims),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "moveaxis_python_loop", None, entropy_rows_loop),

    Entry("softmax_jacobian", "wrong", "p_at_p_transpose_is_scalar",
          "For a 1-D p, p @ p.T is the scalar sum p_i^2 (.T does nothing to a vector), so it "
          "subtracts that number from every entry instead of subtracting the outer product.",
          jac_dot_is_scalar),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "It returns p p^T - diag(p), the negative of the Jacobian.",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag_p",
          "It subtracts the outer product from the identity instead of from diag(p).",
          jac_identity_diagonal),
    Entry("softmax_jacobian", "wrong", "loop_skips_last_row",
          "The row loop runs over range(n - 1), so the last row of the Jacobian is left at zero.",
          jac_loop_skips_last_row),
    Entry("softmax_jacobian", "wrong", "softmax_applied_to_p",
          "It treats p as logits and applies softmax to it first, although p is already the "
          "probability vector at which the Jacobian is taken.",
          jac_softmax_of_p),
    Entry("softmax_jacobian", "wrong", "fill_diagonal_overwrites",
          "np.fill_diagonal sets the diagonal to p instead of adding p to -p_i^2, so the "
          "diagonal is p_i rather than p_i - p_i^2.",
          jac_fill_diagonal),
    Entry("softmax_jacobian", "right", "kronecker_double_loop", None, jac_double_loop),
    Entry("softmax_jacobian", "right", "factored_broadcast", None, jac_factored_broadcast),
]
