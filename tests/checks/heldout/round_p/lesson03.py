"""Held-out catalogue, lesson 03 (numpy): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math

import numpy as np
import scipy.special
import scipy.stats

from entry import Entry

# ============================================================================ dot_product_variance


def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=1) / np.sqrt(d_k)
    return float(np.var(dots))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(dots.var())


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.std((q * k).sum(-1)))


def dpv_reseeded_twice(d_k, n_samples=100_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    k = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    return float(np.var(np.einsum("sd,sd->s", q, k)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_one_draw_manual_var(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.sum(pairs[0] * pairs[1], axis=-1)
    centred = dots - dots.mean()
    return float(centred @ centred / n_samples)


def dpv_welford_chunks(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    count, mean, m2 = 0, 0.0, 0.0
    chunk = 8192
    done = 0
    while done < n_samples:
        m = min(chunk, n_samples - done)
        q = rng.standard_normal((m, d_k))
        k = rng.standard_normal((m, d_k))
        dots = np.einsum("ij,ij->i", q, k)
        c_mean = dots.mean()
        c_m2 = float(((dots - c_mean) ** 2).sum())
        delta = c_mean - mean
        total = count + m
        mean += delta * m / total
        m2 += c_m2 + delta * delta * count * m / total
        count = total
        done += m
    return m2 / count


# ============================================================================ softmax_entropy


def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_sum_last_axis(weights, axis=-1):
    p = np.asarray(weights)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return np.sum(p * np.log(safe), axis=axis)


def entropy_boolean_mask(weights, axis=-1):
    p = np.asarray(weights)
    nz = p > 0
    return -np.sum(p[nz] * np.log(p[nz]), axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=axis, keepdims=True)


def entropy_scipy_stats(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights), axis=axis)


def entropy_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def entropy_python_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        out[idx] = -math.fsum(w * math.log(w) for w in p[idx] if w > 0)
    return out[()]  # a 0-d result comes back as a scalar


# ============================================================================ softmax_jacobian


def jac_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p


def jac_broadcast_square(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jac_diagonal_only(p):
    p = np.asarray(p)
    return np.diag(p * (1 - p))


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_loop_pi_twice(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[i])
    return J


def jac_softmax_first(p):
    z = np.asarray(p, dtype=float)
    s = np.exp(z - z.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.shape[0])
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


def jac_factored(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k) before taking the variance, so it measures the "
          "scaled scores (variance about 1) instead of the unscaled q . k (about d_k)",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "creates the generator with np.random.default_rng() and never passes `seed`, so two "
          "calls with the same seed give different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "sums q*k over axis 0 (the samples) instead of axis 1 (the features), so it returns the "
          "variance of d_k sums of n_samples products, not of n_samples dot products",
          dpv_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products (about sqrt(d_k)) instead of their variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "reseeded_twice",
          "builds a fresh generator with the same seed for q and for k, so k equals q and the "
          "dots are squared norms (variance about 2 d_k)",
          dpv_reseeded_twice),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws q and k with rng.random, which is uniform on [0, 1), instead of the standard "
          "normal, so the variance is about 0.05 d_k",
          dpv_uniform),
    Entry("dot_product_variance", "right", "one_draw_manual_variance", None,
          dpv_one_draw_manual_var),
    Entry("dot_product_variance", "right", "welford_chunks", None, dpv_welford_chunks),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses np.log2, so the entropy comes out in bits instead of nats",
          entropy_bits),
    Entry("softmax_entropy", "wrong", "sum_last_axis",
          "sums the terms over the last axis (axis=-1 written in) instead of `axis`",
          entropy_sum_last_axis),
    Entry("softmax_entropy", "wrong", "no_minus_sign",
          "forgets the minus sign: returns sum p log p, which is minus the entropy",
          entropy_no_minus),
    Entry("softmax_entropy", "wrong", "boolean_mask_flattens",
          "drops zero weights with boolean indexing p[p > 0], which flattens the array, so the "
          "sum runs over all distributions at once (a scalar, or an axis error)",
          entropy_boolean_mask),
    Entry("softmax_entropy", "wrong", "keepdims",
          "sums with keepdims=True, so the distribution axis stays (length 1) instead of being "
          "removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "scipy_stats_renormalises",
          "calls scipy.stats.entropy, which renormalises each distribution first, so an all-zero "
          "row gives 0/0 = NaN instead of 0",
          entropy_scipy_stats),
    Entry("softmax_entropy", "right", "scipy_special_entr", None, entropy_entr),
    Entry("softmax_entropy", "right", "python_loop_fsum", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "inner_product",
          "writes p @ p, which for a vector is the scalar dot product, instead of the outer "
          "product p p^T",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "broadcast_square",
          "subtracts p * p (a vector broadcast along the rows, p_j^2 in column j) instead of the "
          "outer product p_i p_j",
          jac_broadcast_square),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "returns only the diagonal p_i (1 - p_i) and leaves out the off-diagonal -p_i p_j terms",
          jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "computes p p^T - diag(p), the negative of the Jacobian",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "loop_uses_p_i_twice",
          "in the double loop writes p[i] * (delta_ij - p[i]), reusing p[i] where p[j] belongs",
          jac_loop_pi_twice),
    Entry("softmax_jacobian", "wrong", "softmax_applied_first",
          "treats p as logits and applies softmax to it first, although p is already the "
          "probability vector",
          jac_softmax_first),
    Entry("softmax_jacobian", "right", "einsum_float64", None, jac_einsum),
    Entry("softmax_jacobian", "right", "factored_p_times_eye_minus_p", None, jac_factored),
]
