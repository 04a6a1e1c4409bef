"""Held-out catalogue, lesson 03 (scaling, numpy):
dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
from scipy import special, stats

from entry import Entry


# ============================================================================ dot_product_variance
# ---- wrong ----------------------------------------------------------------------------------
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    scores = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(scores.var())


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
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("sd,sd->s", q, k)))


def dpv_q_reused(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q  # meant a second draw
    return float(np.var((q * k).sum(-1)))


def dpv_products_not_summed(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


# ---- right ----------------------------------------------------------------------------------
def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pair = rng.standard_normal((2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pair[0], pair[1])
    centred = dots - dots.sum() / n_samples
    return float(np.dot(centred, centred) / n_samples)


def dpv_welford_loop(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    k = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    dots = (q * k).sum(axis=1).tolist()
    mean, m2 = 0.0, 0.0
    for count, value in enumerate(dots, start=1):
        delta = value - mean
        mean += delta / count
        m2 += delta * (value - mean)
    return m2 / (n_samples - 1)


# ============================================================================ softmax_entropy
# ---- wrong ----------------------------------------------------------------------------------
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.mean(p * np.log(safe), axis=axis)


def entropy_ge_guard(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p >= 0, p * np.log(p), 0.0)
    return -terms.sum(axis=axis)


def entropy_scipy_stats(weights, axis=-1):
    return stats.entropy(np.asarray(weights, dtype=float), axis=axis)


# ---- right ----------------------------------------------------------------------------------
def entropy_special_entr(weights, axis=-1):
    return special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_nansum(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.nansum(p * np.log(p), axis=axis)


# ============================================================================ softmax_jacobian
# ---- wrong ----------------------------------------------------------------------------------
def jac_p_at_pT(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_softmax_again(p):
    p = np.asarray(p, dtype=float)
    s = np.exp(p - p.max())
    s /= s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_loop_wrong_index(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    jac = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            jac[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[i])
    return jac


def jac_int_buffer(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    jac = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            jac[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return jac


# ---- right ----------------------------------------------------------------------------------
def jac_factorised(p):
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    return np.diag(p) @ (np.eye(n) - p)  # diag(p)(I - 1 p^T) = diag(p) - p p^T


def jac_kronecker_loops(p):
    vals = [float(t) for t in np.asarray(p).ravel()]
    n = len(vals)
    rows = [[vals[i] * ((i == j) - vals[j]) for j in range(n)] for i in range(n)]
    return np.array(rows, dtype=np.float64)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_by_sqrt_dk",
          "The dot products are divided by sqrt(d_k) before taking the variance, so it "
          "returns about 1 instead of the unscaled variance d_k.",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "seed_not_used",
          "The generator is created with np.random.default_rng() without the seed, so two "
          "calls with the same seed give different numbers.",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "The products are summed over axis 0 (the samples) instead of axis 1 (the "
          "d_k components), so it measures the variance of d_k sums of n_samples products.",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "std_instead_of_var",
          "It returns np.std of the dot products, the standard deviation sqrt(d_k), "
          "not their variance d_k.",
          dpv_std),
    Entry("dot_product_variance", "wrong", "k_is_q",
          "k is the same array as q instead of a second independent draw, so it measures the "
          "variance of |q|^2 (about 2 d_k).",
          dpv_q_reused),
    Entry("dot_product_variance", "wrong", "products_not_summed",
          "It takes the variance of the individual products q_i k_i (about 1) instead of the "
          "variance of their sum over the d_k components.",
          dpv_products_not_summed),
    Entry("dot_product_variance", "right", "centred_dot_product", None, dpv_manual_moments),
    Entry("dot_product_variance", "right", "welford_python_loop", None, dpv_welford_loop),
    Entry("softmax_entropy", "wrong", "log2_bits",
          "It uses np.log2, giving the entropy in bits instead of nats.",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "sum_over_last_axis",
          "The sum is hard-coded over the last axis and ignores `axis`.",
          entropy_last_axis),
    Entry("softmax_entropy", "wrong", "keepdims_true",
          "The sum keeps the reduced axis (keepdims=True), so the result has a length-1 axis "
          "where the contract removes it.",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "It averages -p log p over the axis (np.mean) instead of summing, dividing the "
          "entropy by the number of outcomes.",
          entropy_mean),
    Entry("softmax_entropy", "wrong", "guard_ge_zero",
          "The zero-weight guard tests p >= 0 instead of p > 0, so it keeps 0 * log(0) = NaN "
          "wherever a weight is zero.",
          entropy_ge_guard),
    Entry("softmax_entropy", "wrong", "scipy_stats_normalises",
          "scipy.stats.entropy renormalises each distribution first, so an all-zero row "
          "becomes 0/0 and gives NaN instead of 0.",
          entropy_scipy_stats),
    Entry("softmax_entropy", "right", "scipy_special_entr", None, entropy_special_entr),
    Entry("softmax_entropy", "right", "nansum_of_p_log_p", None, entropy_nansum),
    Entry("softmax_jacobian", "wrong", "p_at_p_T_is_inner",
          "For a 1-D p, p @ p.T is the inner product (a scalar; .T does nothing on a vector), "
          "so it subtracts sum(p^2) everywhere instead of the outer product p p^T.",
          jac_p_at_pT),
    Entry("softmax_jacobian", "wrong", "elementwise_square_broadcast",
          "p * p is the element-wise square (n,), which broadcasts along the rows: entry "
          "(i, j) gets p_j^2 subtracted instead of p_i p_j.",
          jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "The two terms are subtracted the wrong way round: p p^T - diag(p), the negated "
          "Jacobian.",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "softmax_applied_again",
          "It treats p as logits and applies softmax before building diag(s) - s s^T, but p is "
          "already the probability vector.",
          jac_softmax_again),
    Entry("softmax_jacobian", "wrong", "loop_uses_p_i_twice",
          "In the loop the off-diagonal term uses p[i] where p[j] belongs, giving "
          "p_i (delta_ij - p_i) (not symmetric) instead of p_i (delta_ij - p_j).",
          jac_loop_wrong_index),
    Entry("softmax_jacobian", "wrong", "integer_buffer",
          "The result is preallocated with np.zeros(..., dtype=int), so every entry assigned "
          "into it is truncated to an integer (mostly 0).",
          jac_int_buffer),
    Entry("softmax_jacobian", "right", "factorised_diag_times_I_minus_p", None, jac_factorised),
    Entry("softmax_jacobian", "right", "kronecker_delta_loops", None, jac_kronecker_loops),
]
