"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian. Learners' answers."""

import math

import numpy as np
import scipy.special
import torch

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
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_same_seed_twice(d_k, n_samples=100_000, seed=0):
    rng_q = np.random.default_rng(seed)
    rng_k = np.random.default_rng(seed)
    q = rng_q.standard_normal((n_samples, d_k))
    k = rng_k.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_sum_axis0(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    products = q * k
    return float(np.std(products.sum(axis=1)))


def dpv_var_of_products(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    q = gen.standard_normal((n_samples, d_k))
    k = gen.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def dpv_randomstate_moments(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    pairs = rs.randn(n_samples, 2, d_k)
    dots = np.einsum("nd,nd->n", pairs[:, 0], pairs[:, 1])
    mean = math.fsum(dots) / n_samples
    return math.fsum((dots - mean) ** 2) / n_samples


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    dots = (q * k).sum(dim=1)
    return dots.var(unbiased=False).item()


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_no_zero_guard(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    return -(p * np.log(p)).sum(axis=axis)


def entropy_last_axis_only(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    plogp = np.zeros_like(p)
    nz = p > 0
    plogp[nz] = p[nz] * np.log(p[nz])
    return -np.sum(plogp, axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    safe = np.where(p > 0, p, 1.0)
    return -np.mean(p * np.log(safe), axis=axis)


def entropy_softmax_first(weights, axis=-1):
    w = np.asarray(weights, dtype=np.float64)
    e = np.exp(w - w.max(axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_row_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    h = np.array([-math.fsum(x * math.log(x) for x in row if x > 0) for row in flat])
    h = h.reshape(p.shape[:-1])
    return h if h.ndim else float(h)


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=np.float64)
    return np.diag(p) - p @ p


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_delta_dropped(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * (1 - p[j])
    return J


def jac_identity_not_diag(p):
    p = np.asarray(p, dtype=np.float64)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_loop_misses_last_row(p):
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n - 1):
        for j in range(n):
            J[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return J


def jac_diag_of_column(p):
    col = np.asarray(p, dtype=np.float64).reshape(-1, 1)
    return np.diag(col) - col @ col.T


def jac_kronecker_form(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


def jac_autograd(p):
    p64 = torch.as_tensor(np.asarray(p, dtype=np.float64))
    z = torch.log(p64)  # softmax(log p) = p; zero entries become -inf
    J = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, dim=0), z)
    return J.numpy()


ENTRIES = [
    # dot_product_variance
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns about "
          "1 instead of the unscaled variance d_k",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "generator_not_seeded",
          "creates np.random.default_rng() without the seed, so two calls with the same seed "
          "give different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "two_generators_same_seed",
          "draws q and k from two generators seeded with the same seed, so k is an exact copy "
          "of q and it measures the variance of q.q, about 2*d_k instead of d_k",
          dpv_same_seed_twice),
    Entry("dot_product_variance", "wrong", "dot_summed_over_samples",
          "sums q*k over axis 0 (the samples) instead of over the d_k features, so it takes the "
          "variance of only d_k sums of n_samples products (0 when d_k=1, about n_samples "
          "otherwise)",
          dpv_sum_axis0),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products (about sqrt(d_k)) instead of their variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "variance_of_elementwise_products",
          "takes the variance of the elementwise products q_i*k_i (about 1) without summing "
          "them into dot products first",
          dpv_var_of_products),
    Entry("dot_product_variance", "right", "randomstate_fsum_moments", None,
          dpv_randomstate_moments),
    Entry("dot_product_variance", "right", "torch_generator_float64", None, dpv_torch_generator),
    # softmax_entropy
    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses log2, so the entropy comes out in bits instead of nats",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "no_zero_guard",
          "computes p * log(p) without guarding zero weights, so 0 * log(0) = 0 * -inf gives NaN",
          entropy_no_zero_guard),
    Entry("softmax_entropy", "wrong", "sum_over_last_axis_only",
          "sums over the last axis whatever `axis` is passed",
          entropy_last_axis_only),
    Entry("softmax_entropy", "wrong", "keepdims_true",
          "sums with keepdims=True, so the reduced axis is kept with length 1 instead of removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "averages -p log p over the axis (np.mean) instead of summing it, dividing the entropy "
          "by the number of entries",
          entropy_mean),
    Entry("softmax_entropy", "wrong", "applies_softmax_first",
          "runs a softmax over the weights before taking the entropy, so it measures "
          "softmax(weights) instead of the given distribution",
          entropy_softmax_first),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "moveaxis_row_loop", None, entropy_row_loop),
    # softmax_jacobian
    Entry("softmax_jacobian", "wrong", "inner_product_not_outer",
          "writes p @ p, which for two 1-D arrays is the scalar dot product, instead of the "
          "outer product p p^T",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "kronecker_delta_dropped",
          "uses p_i (1 - p_j) for every entry, as if every entry were on the diagonal, instead "
          "of p_i (delta_ij - p_j)",
          jac_delta_dropped),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag_p",
          "subtracts p p^T from the identity matrix instead of from diag(p)",
          jac_identity_not_diag),
    Entry("softmax_jacobian", "wrong", "loop_misses_last_row",
          "the row loop runs over range(n - 1), so the last row of the Jacobian stays zero",
          jac_loop_misses_last_row),
    Entry("softmax_jacobian", "wrong", "np_diag_of_column_vector",
          "reshapes p into a column before calling np.diag, which on a 2-D array extracts a "
          "diagonal (one number) instead of building diag(p)",
          jac_diag_of_column),
    Entry("softmax_jacobian", "right", "p_times_eye_minus_p", None, jac_kronecker_form),
    Entry("softmax_jacobian", "right", "torch_autograd_jacobian", None, jac_autograd),
]
