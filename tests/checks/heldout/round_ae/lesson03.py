"""Held-out catalogue, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ dot_product_variance
def dpv_scaled_dots(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / math.sqrt(d_k)
    return float(dots.var())


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_same_stream_twice(d_k, n_samples=100_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    k = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def dpv_std_not_var(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.standard_normal(size=(n_samples, d_k))
    ks = gen.standard_normal(size=(n_samples, d_k))
    products = np.einsum("nd,nd->n", qs, ks)
    return float(np.std(products))


def dpv_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def dpv_unseeded_generator(d_k, n_samples=100_000, seed=0):
    np.random.seed(seed)
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_right_chunked_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    total = 0.0
    total_sq = 0.0
    done = 0
    while done < n_samples:
        m = min(8192, n_samples - done)
        q = rng.standard_normal((m, d_k))
        k = rng.standard_normal((m, d_k))
        dots = np.einsum("md,md->m", q, k)
        total += math.fsum(dots)
        total_sq += math.fsum(dots * dots)
        done += m
    mean = total / n_samples
    return total_sq / n_samples - mean * mean


def dpv_right_single_draw(d_k, n_samples=100_000, seed=0):
    z = np.random.Generator(np.random.PCG64(seed)).standard_normal((2, n_samples, d_k))
    dots = np.sum(z[0] * z[1], axis=1)
    centred = dots - dots.mean()
    return float(centred @ centred / n_samples)


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -(p * logs).sum(axis=axis)


def entropy_sum_last_axis(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=-1)


def entropy_sign_dropped(weights, axis=-1):
    w = np.asarray(weights, dtype=np.float64)
    terms = scipy.special.xlogy(w, w)
    return np.sum(terms, axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0.0)
    return -plogp.sum(axis=axis, keepdims=True)


def entropy_mean_not_sum(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    contrib = np.zeros_like(p)
    nz = p > 0
    contrib[nz] = -p[nz] * np.log(p[nz])
    return contrib.mean(axis=axis)


def entropy_no_zero_guard(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_right_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def entropy_right_python_loop(weights, axis=-1):
    arr = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = arr.reshape(-1, arr.shape[-1])
    res = []
    for row in flat:
        h = 0.0
        for pi in row:
            if pi > 0:
                h -= pi * math.log(pi)
        res.append(h)
    if arr.ndim == 1:
        return res[0]
    return np.array(res).reshape(arr.shape[:-1])


# ============================================================================ softmax_jacobian
def jac_matmul_is_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_elementwise_square(p):
    p = np.asarray(p)
    n = p.shape[0]
    return np.eye(n) * p - p * p


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_int_matrix(p):
    n = len(p)
    jac = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            if i == j:
                jac[i, j] = p[i] * (1 - p[j])
            else:
                jac[i, j] = -p[i] * p[j]
    return jac


def jac_diag_of_column(p):
    col = np.asarray(p, dtype=float).reshape(-1, 1)
    return np.diag(col) - col @ col.T


def jac_right_einsum(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.shape[0])
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


def jac_right_kronecker_loop(p):
    vals = [float(v) for v in np.asarray(p)]
    n = len(vals)
    return np.array([[vals[i] * ((1.0 if i == j else 0.0) - vals[j]) for j in range(n)]
                     for i in range(n)])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dot_products",
          "divides the dot products by sqrt(d_k) although the exercise measures the unscaled "
          "q . k, so it returns about 1 instead of about d_k", dpv_scaled_dots),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "sums q * k over axis 0 (the samples) instead of axis 1 (the d_k features), so it "
          "takes the variance of d_k huge sums instead of n_samples dot products",
          dpv_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "same_seed_for_q_and_k",
          "builds a fresh default_rng(seed) for q and again for k, so k is an exact copy of q and "
          "the 'dot products' are squared norms, with variance about 2 d_k",
          dpv_same_stream_twice),
    Entry("dot_product_variance", "wrong", "std_instead_of_var",
          "returns np.std of the dot products (about sqrt(d_k)) instead of their variance",
          dpv_std_not_var),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws q and k with rng.random, uniform on [0, 1), instead of standard normals, so the "
          "products have a non-zero mean and the wrong variance", dpv_uniform_draws),
    Entry("dot_product_variance", "wrong", "seed_not_passed_to_generator",
          "seeds the legacy global np.random.seed(seed) but draws from default_rng() with no "
          "seed, so two calls with the same seed give different numbers",
          dpv_unseeded_generator),
    Entry("dot_product_variance", "right", "chunked_running_moments", None,
          dpv_right_chunked_moments),
    Entry("dot_product_variance", "right", "pcg64_single_draw", None, dpv_right_single_draw),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses log2, so the entropy comes out in bits instead of nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "sum_hardcoded_last_axis",
          "always sums over the last axis, ignoring `axis`", entropy_sum_last_axis),
    Entry("softmax_entropy", "wrong", "minus_sign_dropped",
          "sums p log p without the minus sign, so every entropy comes out negative",
          entropy_sign_dropped),
    Entry("softmax_entropy", "wrong", "keepdims_kept",
          "sums with keepdims=True, so the reduced axis stays as length 1 instead of being "
          "removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "averages the -p log p terms over the axis instead of summing them, dividing the "
          "entropy by the number of outcomes", entropy_mean_not_sum),
    Entry("softmax_entropy", "wrong", "zero_weights_give_nan",
          "computes p * log(p) with no guard for zero weights, so 0 * log 0 = 0 * -inf gives "
          "NaN instead of 0", entropy_no_zero_guard),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_right_entr),
    Entry("softmax_entropy", "right", "moveaxis_python_loop", None, entropy_right_python_loop),

    Entry("softmax_jacobian", "wrong", "matmul_inner_product",
          "writes p p^T as `p @ p`, which for 1-D arrays is the scalar inner product, so it "
          "subtracts sum(p^2) from every entry instead of the outer product",
          jac_matmul_is_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square_broadcast",
          "subtracts `p * p`, the element-wise square (n,), which broadcasts along the rows "
          "instead of the (n, n) outer product", jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "keeps only the diagonal p_i (1 - p_i) and forgets the off-diagonal terms -p_i p_j",
          jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "int_matrix_truncates",
          "allocates the matrix with dtype=int, so every entry written into it is truncated "
          "toward zero", jac_int_matrix),
    Entry("softmax_jacobian", "wrong", "np_diag_of_column",
          "reshapes p into a column first, and np.diag of a 2-D array extracts its diagonal "
          "(just p[0]) instead of building diag(p)", jac_diag_of_column),
    Entry("softmax_jacobian", "right", "einsum_identity_and_outer", None, jac_right_einsum),
    Entry("softmax_jacobian", "right", "kronecker_delta_lists", None, jac_right_kronecker_loop),
]
