"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian. numpy."""

import math

import numpy as np
import scipy.special
import scipy.stats

from entry import Entry


# ====================================================================== dot_product_variance
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1) / np.sqrt(d_k)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    dots = np.einsum("nd,nd->n", q, k)
    return float(np.std(dots))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    qs = rng.standard_normal((n_samples, d_k))
    ks = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(qs * ks, axis=-1)))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q  # meant to draw a second, independent sample
    return float(np.var(np.sum(q * k, axis=1)))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=0)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_centered_moment(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1)
    return float(np.mean((dots - dots.mean()) ** 2))


def dpv_one_draw_ddof1(d_k, n_samples=100_000, seed=0):
    pairs = np.random.default_rng(seed).normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pairs[0], pairs[1])
    return float(np.var(dots, ddof=1))


# =========================================================================== softmax_entropy
def ent_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def ent_nan_on_zero(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -(p * np.log(p)).sum(axis=axis)


def ent_axis_hardcoded(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=-1)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=axis, keepdims=True)


def ent_scipy_stats(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights, dtype=float), axis=axis)


def ent_softmax_first(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    e = np.exp(w - w.max(axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)
    return -(p * np.log(p)).sum(axis=axis)


def ent_xlogy(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(scipy.special.xlogy(p, p), axis=axis)


def ent_moveaxis_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    out = np.array([-math.fsum(v * math.log(v) for v in row if v > 0) for row in flat])
    return out.reshape(p.shape[:-1])[()]  # a 0-d result comes back as a scalar


# ========================================================================= softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_offdiag_sign(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                J[i, j] = p[i] * (1 - p[i])
            else:
                J[i, j] = p[i] * p[j]
    return J


def jac_lower_triangle_only(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] = p[i] - p[i] ** 2
        for j in range(i):
            J[i, j] = -p[i] * p[j]
    return J


def jac_int_buffer(p):
    p = np.asarray(p, dtype=float)
    n = p.size
    J = np.zeros((n, n), dtype=int)
    J[:] = np.diag(p) - np.outer(p, p)
    return J


def jac_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_kronecker_loops(p):
    p = [float(v) for v in np.asarray(p).ravel()]
    n = len(p)
    return np.array([[p[i] * ((1.0 if i == j else 0.0) - p[j]) for j in range(n)]
                     for i in range(n)])


def jac_column_times_eye_minus_row(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.shape[0]) - p[None, :])


E = Entry
ENTRIES = [
    E("dot_product_variance", "wrong", "variance_of_scaled_dot",
      "it divides the dot products by sqrt(d_k) before taking the variance, so it measures the "
      "scaled scores' variance (about 1) instead of the unscaled q . k (about d_k)",
      dpv_scaled),
    E("dot_product_variance", "wrong", "std_instead_of_var",
      "np.std returns the standard deviation (about sqrt(d_k)), not the variance",
      dpv_std),
    E("dot_product_variance", "wrong", "rng_not_seeded",
      "the generator is created with np.random.default_rng() without the seed, so two calls "
      "with the same seed give different numbers",
      dpv_unseeded),
    E("dot_product_variance", "wrong", "k_is_q",
      "k is the same array as q instead of a second independent draw, so it measures q . q "
      "(variance about 2 d_k)",
      dpv_same_vector),
    E("dot_product_variance", "wrong", "sum_over_samples_axis",
      "the products are summed over axis 0 (the samples) instead of over the d_k features, so "
      "it takes the variance of d_k sums of n_samples terms (about n_samples; exactly 0 "
      "when d_k=1)",
      dpv_sum_wrong_axis),
    E("dot_product_variance", "wrong", "rng_random_is_uniform",
      "rng.random draws uniform numbers in [0, 1), not standard normals, so the variance is "
      "7 d_k / 144 instead of d_k",
      dpv_uniform),
    E("dot_product_variance", "right", "explicit_centered_second_moment", None,
      dpv_centered_moment),
    E("dot_product_variance", "right", "single_draw_split_ddof1", None, dpv_one_draw_ddof1),

    E("softmax_entropy", "wrong", "log2_bits",
      "it uses np.log2, so the entropy is in bits instead of nats",
      ent_log2),
    E("softmax_entropy", "wrong", "nan_for_zero_weights",
      "zero weights give 0 * log(0) = 0 * -inf = NaN; they must contribute 0",
      ent_nan_on_zero),
    E("softmax_entropy", "wrong", "sum_axis_hardcoded",
      "the sum runs over axis -1 whatever `axis` is passed, so entropies along other axes "
      "are wrong (and have the wrong shape)",
      ent_axis_hardcoded),
    E("softmax_entropy", "wrong", "keepdims_true",
      "the sum keeps the reduced axis (keepdims=True), so the result has an extra length-1 "
      "axis instead of having `axis` removed",
      ent_keepdims),
    E("softmax_entropy", "wrong", "scipy_stats_entropy_renormalises",
      "scipy.stats.entropy renormalises each distribution first, so an all-zero row becomes "
      "0/0 and gives NaN instead of 0",
      ent_scipy_stats),
    E("softmax_entropy", "wrong", "softmax_applied_to_weights",
      "it applies a softmax to the weights before taking the entropy, although the weights "
      "are already probabilities",
      ent_softmax_first),
    E("softmax_entropy", "right", "scipy_xlogy", None, ent_xlogy),
    E("softmax_entropy", "right", "moveaxis_fsum_rows", None, ent_moveaxis_loop),

    E("softmax_jacobian", "wrong", "inner_product_not_outer",
      "p @ p of two vectors is their inner product (a scalar), not the outer product p p^T, so "
      "the same number is subtracted from every entry",
      jac_inner_product),
    E("softmax_jacobian", "wrong", "elementwise_square",
      "p * p is the elementwise square (n,), which broadcasts as a row: entry (i, j) gets "
      "p_j^2 subtracted instead of p_i p_j",
      jac_elementwise_square),
    E("softmax_jacobian", "wrong", "offdiagonal_sign",
      "the off-diagonal entries are +p_i p_j instead of -p_i p_j",
      jac_offdiag_sign),
    E("softmax_jacobian", "wrong", "lower_triangle_only",
      "the inner loop runs over range(i), so only the lower triangle is filled and the upper "
      "off-diagonal entries stay 0 although the Jacobian is symmetric",
      jac_lower_triangle_only),
    E("softmax_jacobian", "wrong", "int_buffer_truncates",
      "the result is preallocated with dtype=int, so every entry is truncated towards 0 "
      "(all zeros for a non-degenerate p)",
      jac_int_buffer),
    E("softmax_jacobian", "wrong", "diagonal_only",
      "it returns only the diagonal p_i (1 - p_i) and forgets the off-diagonal -p_i p_j terms",
      jac_diagonal_only),
    E("softmax_jacobian", "right", "kronecker_delta_loops", None, jac_kronecker_loops),
    E("softmax_jacobian", "right", "column_times_eye_minus_row", None,
      jac_column_times_eye_minus_row),
]
