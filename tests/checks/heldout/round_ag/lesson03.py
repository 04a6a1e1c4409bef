"""Held-out catalogue, lesson 03 (scaling, numpy):
dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ dot_product_variance
def dpv_scaled_dots(d_k, n_samples=100_000, seed=0):
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


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    Q = gen.standard_normal(size=(n_samples, d_k))
    K = gen.standard_normal(size=(n_samples, d_k))
    products = np.sum(Q * K, axis=0)
    return float(np.var(products))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.sum(q * k, axis=-1)))


def dpv_two_generators_same_seed(d_k, n_samples=100_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    k = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    dots = np.einsum("ij,ij->i", q, k)
    return float(dots.var())


def dpv_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_right_one_draw_ddof1(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pairs[0], pairs[1])
    centred = dots - dots.mean()
    return float(centred @ centred / (n_samples - 1))


def dpv_right_per_dimension(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    acc = np.zeros(n_samples)
    for _ in range(d_k):
        acc += rng.standard_normal(n_samples) * rng.standard_normal(n_samples)
    mean = acc.mean()
    return float(np.mean(acc ** 2) - mean ** 2)


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_axis_ignored(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -plogp.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    safe = np.where(w > 0, w, 1.0)
    return -np.sum(w * np.log(safe), axis=axis, keepdims=True)


def entropy_boolean_index_flattens(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    p = p[p > 0]  # drop zeros so log never sees 0
    return -np.sum(p * np.log(p), axis=axis)


def entropy_softmax_first(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    p = scipy.special.softmax(w, axis=axis)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_mean_not_sum(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    terms = np.zeros_like(p)
    pos = p > 0
    terms[pos] = p[pos] * np.log(p[pos])
    return -terms.mean(axis=axis)


def entropy_right_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_right_loops(weights, axis=-1):
    arr = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = arr.reshape(-1, arr.shape[-1])
    result = []
    for row in flat:
        h = 0.0
        for pi in row:
            if pi > 0:
                h -= pi * math.log(pi)
        result.append(h)
    return np.array(result).reshape(arr.shape[:-1])[()]


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    return p * np.eye(n) - p * p


def jac_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_int_buffer(p):
    p = np.asarray(p)
    n = len(p)
    J = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            J[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return J


def jac_loop_off_by_one(p):
    p = np.asarray(p, dtype=float)
    n = p.size
    jac = np.zeros((n, n))
    for i in range(n - 1):
        jac[i] = -p[i] * p
        jac[i, i] += p[i]
    return jac


def jac_right_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.shape[0])
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


def jac_right_factored(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(len(p)) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "divides-by-sqrt-d_k",
          "it divides the dot products by sqrt(d_k) before taking the variance, so it measures "
          "the scaled variance (about 1) instead of the unscaled one (about d_k)",
          dpv_scaled_dots),
    Entry("dot_product_variance", "wrong", "rng-not-seeded",
          "np.random.default_rng() is created without the seed, so two calls with the same "
          "seed give different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "sum-over-samples-axis",
          "the products are summed over axis 0 (the samples) instead of axis 1 (the d_k "
          "coordinates), so it takes the variance of just d_k sums over all samples (0 for "
          "d_k = 1, about n_samples otherwise)", dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "std-not-var",
          "it returns the standard deviation np.std (about sqrt(d_k)) instead of the variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "two-generators-same-seed",
          "q and k come from two fresh generators with the same seed, so k is an exact copy "
          "of q and every 'dot product' is |q|^2 (variance about 2 d_k)",
          dpv_two_generators_same_seed),
    Entry("dot_product_variance", "wrong", "rng-random-is-uniform",
          "rng.random draws uniform numbers in [0, 1), not N(0, 1) samples, so the variance of "
          "the dot products is about 7 d_k / 144 instead of d_k", dpv_uniform_draws),
    Entry("dot_product_variance", "right", "one-draw-ddof1", None, dpv_right_one_draw_ddof1),
    Entry("dot_product_variance", "right", "per-dimension-accumulate", None,
          dpv_right_per_dimension),

    Entry("softmax_entropy", "wrong", "log2-bits",
          "it uses np.log2, so the entropy is in bits instead of nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "axis-argument-ignored",
          "the sum is always over the last axis (axis=-1 hard-coded), ignoring `axis`",
          entropy_axis_ignored),
    Entry("softmax_entropy", "wrong", "keepdims-left-on",
          "the sum keeps the reduced axis (keepdims=True), so the result has an extra "
          "length-1 axis instead of that axis removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "boolean-index-flattens",
          "p[p > 0] drops the zeros but also flattens the array to 1-D, so every distribution "
          "is summed together into one number (or the axis no longer exists)",
          entropy_boolean_index_flattens),
    Entry("softmax_entropy", "wrong", "softmax-of-weights",
          "it passes the weights through softmax again, treating probabilities as logits, and "
          "returns the entropy of that other distribution", entropy_softmax_first),
    Entry("softmax_entropy", "wrong", "mean-not-sum",
          "it averages -p log p over the axis instead of summing it, dividing the entropy by "
          "the number of entries", entropy_mean_not_sum),
    Entry("softmax_entropy", "right", "scipy-entr", None, entropy_right_entr),
    Entry("softmax_entropy", "right", "python-loops", None, entropy_right_loops),

    Entry("softmax_jacobian", "wrong", "p-at-p-T-is-a-scalar",
          "for a 1-D p, p @ p.T is the dot product (a scalar), not the outer product p p^T, "
          "so the same number is subtracted from every entry", jac_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise-p-squared",
          "p * p is the elementwise square, broadcast along the rows, so entry (i, j) gets "
          "p_j^2 instead of p_i p_j", jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "diagonal-only",
          "it returns diag(p (1 - p)) as if softmax acted elementwise like a sigmoid, leaving "
          "out the off-diagonal -p_i p_j terms", jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "sign-flipped",
          "the sign is flipped: it returns p p^T - diag(p)", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "integer-buffer",
          "the result buffer is allocated with dtype=int, so every float entry is truncated "
          "toward zero (all zeros)", jac_int_buffer),
    Entry("softmax_jacobian", "wrong", "loop-skips-last-row",
          "the row loop runs over range(n - 1), so the last row is left as zeros",
          jac_loop_off_by_one),
    Entry("softmax_jacobian", "right", "einsum-with-eye", None, jac_right_einsum),
    Entry("softmax_jacobian", "right", "factored-p-times-eye-minus-p", None, jac_right_factored),
]
