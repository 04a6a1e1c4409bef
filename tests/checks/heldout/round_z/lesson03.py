"""Held-out catalogue, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry


# -------------------------------------------------------------------- dot_product_variance (wrong)
def var_scaled_scores(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    scores = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(scores.var())


def var_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def var_q_with_itself(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))  # noqa: F841
    dots = np.sum(q * q, axis=-1)
    return float(np.var(dots))


def var_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(dots.var())


def var_of_products(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def var_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


# -------------------------------------------------------------------- dot_product_variance (right)
def var_moments_by_hand(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    pairs = gen.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pairs[0], pairs[1])
    mean = math.fsum(dots) / n_samples
    return math.fsum((dots - mean) ** 2) / n_samples


def var_unbiased_torch(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = torch.from_numpy(rng.standard_normal((n_samples, d_k)))
    k = torch.from_numpy(rng.standard_normal((n_samples, d_k)))
    dots = torch.linalg.vecdot(q, k)
    return float(torch.var(dots))  # unbiased (n - 1): well inside the standard error


# ------------------------------------------------------------------------ softmax_entropy (wrong)
def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis, keepdims=True)


def entropy_nan_at_zero(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -(p * np.log(p)).sum(axis=axis)


def entropy_mean(weights, axis=-1):
    w = np.asarray(weights, dtype=np.float64)
    plogp = scipy.special.xlogy(w, w)
    return -np.mean(plogp, axis=axis)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logp = np.zeros_like(p)
    nz = p > 0
    logp[nz] = np.log(p[nz])
    return np.sum(p * logp, axis=axis)


# ------------------------------------------------------------------------ softmax_entropy (right)
def entropy_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def entropy_apply_along(weights, axis=-1):
    def h(row):
        return -math.fsum(w * math.log(w) for w in row if w > 0)

    out = np.apply_along_axis(h, axis, np.asarray(weights, dtype=np.float64))
    return out[()]  # a 0-d result comes back as a scalar


# ----------------------------------------------------------------------- softmax_jacobian (wrong)
def jac_dot_not_outer(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T


def jac_sign_swapped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_loop_short(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n - 1):
        for j in range(n):
            J[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return J


def jac_wrong_index(p):
    n = p.shape[0]
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * (1.0 if i == j else 0.0) - p[i] * p[i]
    return J


# ----------------------------------------------------------------------- softmax_jacobian (right)
def jac_autograd(p):
    z = torch.log(torch.as_tensor(np.asarray(p, dtype=np.float64)))
    J = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, dim=0), z)
    return J.numpy()


def jac_einsum_eye(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.size)
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "measures_scaled_scores", "divides the dot products "
          "by sqrt(d_k) before taking the variance, so it returns about 1, not d_k",
          var_scaled_scores),
    Entry("dot_product_variance", "wrong", "seed_ignored", "creates default_rng() without the "
          "seed, so two calls with the same seed return different numbers", var_unseeded),
    Entry("dot_product_variance", "wrong", "q_dot_q", "dots q with itself instead of with k, "
          "so it measures the variance of |q|^2 (about 2 d_k)", var_q_with_itself),
    Entry("dot_product_variance", "wrong", "sum_over_samples", "sums q*k over axis 0 (the "
          "samples) instead of the features, so it returns the spread of d_k sums over "
          "the samples (0 for d_k = 1, about n_samples otherwise)", var_sum_over_samples),
    Entry("dot_product_variance", "wrong", "variance_of_products", "takes the variance of "
          "the single products q_i k_i (about 1) instead of their sums, the dot products",
          var_of_products),
    Entry("dot_product_variance", "wrong", "uniform_draws", "draws with rng.random, which is "
          "uniform on [0, 1), not standard normal", var_uniform_draws),
    Entry("dot_product_variance", "right", "fsum_moments", None, var_moments_by_hand),
    Entry("dot_product_variance", "right", "torch_unbiased_var", None, var_unbiased_torch),
    Entry("softmax_entropy", "wrong", "log2_bits", "uses log2, so the entropy is in bits, not "
          "nats", entropy_bits),
    Entry("softmax_entropy", "wrong", "sums_last_axis", "sums over the last axis whatever "
          "`axis` is", entropy_last_axis),
    Entry("softmax_entropy", "wrong", "keepdims", "keeps the reduced axis (keepdims=True), so "
          "the result has a length-1 axis where the contract removes it", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "nan_at_zero_weight", "computes p * log(p) directly, so "
          "a zero weight gives 0 * -inf = NaN instead of contributing 0", entropy_nan_at_zero),
    Entry("softmax_entropy", "wrong", "mean_not_sum", "averages -p log p over the axis "
          "(np.mean) instead of summing it, so the entropy is divided by n", entropy_mean),
    Entry("softmax_entropy", "wrong", "missing_minus", "drops the minus sign: returns "
          "sum p log p, a negative number", entropy_no_minus),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_entr),
    Entry("softmax_entropy", "right", "apply_along_axis_fsum", None, entropy_apply_along),
    Entry("softmax_jacobian", "wrong", "dot_instead_of_outer", "p @ p.T on a 1-D array is the "
          "scalar p.p, not the outer product, so one number is subtracted from every entry",
          jac_dot_not_outer),
    Entry("softmax_jacobian", "wrong", "sign_swapped", "returns p p^T - diag(p), the "
          "negative of the Jacobian", jac_sign_swapped),
    Entry("softmax_jacobian", "wrong", "diagonal_only", "keeps only the diagonal p_i(1 - p_i) "
          "and leaves out the off-diagonal -p_i p_j terms", jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "elementwise_square", "subtracts p * p (element-wise, "
          "shape (n,)), which broadcasts p_j^2 into every row instead of p_i p_j",
          jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "loop_misses_last_row", "the row loop runs over "
          "range(n - 1), so the last row stays zero", jac_loop_short),
    Entry("softmax_jacobian", "wrong", "p_i_twice", "writes p[i] * p[i] where p[i] * p[j] "
          "belongs, so every off-diagonal entry of row i is -p_i^2", jac_wrong_index),
    Entry("softmax_jacobian", "right", "torch_autograd_jacobian", None, jac_autograd),
    Entry("softmax_jacobian", "right", "einsum_eye", None, jac_einsum_eye),
]
