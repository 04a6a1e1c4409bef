"""Held-out catalogue, lesson 03 (dot_product_variance, softmax_entropy, softmax_jacobian)."""

import math

import numpy as np
import torch
from scipy.special import entr

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
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.standard_normal((n_samples, d_k))
    ks = gen.standard_normal((n_samples, d_k))
    dots = (qs * ks).sum(axis=0)
    return float(np.var(dots))


def dpv_q_dot_q(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))  # noqa: F841
    products = np.einsum("nd,nd->n", q, q)
    return float(np.var(products))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std((q * k).sum(-1)))


def dpv_one_draw_manual_var(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.standard_normal((2, n_samples, d_k))
    dots = np.sum(pairs[0] * pairs[1], axis=1)
    centred = dots - dots.mean()
    return float(np.sum(centred ** 2) / (n_samples - 1))


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return torch.var((q * k).sum(dim=1), unbiased=False).item()


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_boolean_filter(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    p = p[p > 0]  # drop zeros so log is defined
    return -np.sum(p * np.log(p), axis=axis)


def entropy_sum_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis, keepdims=True)


def entropy_no_minus(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    logw = np.log(w, out=np.zeros_like(w), where=w > 0)
    return np.sum(w * logw, axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = p * np.log(np.where(p == 0, 1.0, p))
    return -np.mean(plogp, axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return entr(np.asarray(weights)).sum(axis=axis)


def entropy_python_loop(weights, axis=-1):
    arr = np.asarray(weights, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    res = np.empty(flat.shape[0])
    for i, row in enumerate(flat):
        h = 0.0
        for pi in row:
            if pi > 0:
                h -= pi * math.log(pi)
        res[i] = h
    return res.reshape(moved.shape[:-1])[()]


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_diag_parentheses(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p - np.outer(p, p))


def jac_sign(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_softmax_first(p):
    z = np.asarray(p, dtype=float)
    s = np.exp(z - z.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_row_scaled(p):
    p = np.asarray(p)
    n = p.shape[0]
    return p[:, None] * (np.eye(n) - p[None, :])


def jac_double_loop(p):
    vals = [float(v) for v in np.asarray(p).ravel()]
    n = len(vals)
    J = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            J[i, j] = vals[i] * ((1.0 if i == j else 0.0) - vals[j])
    return J


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k) before taking the variance, so it measures the "
          "scaled scores (about 1), not the unscaled q . k (about d_k)",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "creates the generator with np.random.default_rng() and never passes `seed`, so two "
          "calls with the same seed give different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "uniform_samples",
          "draws q and k with rng.random (uniform on [0, 1)) instead of standard normals, so the "
          "variance is about 7 d_k / 144, not d_k",
          dpv_uniform),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "sums q * k over axis 0 (the samples) instead of axis 1 (the features), so it gets d_k "
          "sums of n_samples products, whose variance is about n_samples (and 0 for d_k=1)",
          dpv_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "q_dot_q",
          "takes the dot product of q with itself (q reused where k belongs), a chi-square whose "
          "variance is 2 d_k",
          dpv_q_dot_q),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products (about sqrt(d_k)) instead of np.var",
          dpv_std),
    Entry("dot_product_variance", "right", "one_draw_manual_variance", None,
          dpv_one_draw_manual_var),
    Entry("dot_product_variance", "right", "torch_generator", None, dpv_torch_generator),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses log2, so the entropy is in bits instead of nats",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "boolean_filter_flattens",
          "drops the zero weights with p[p > 0], which flattens the array, so all distributions "
          "are summed into one number (or the axis no longer exists and it raises)",
          entropy_boolean_filter),
    Entry("softmax_entropy", "wrong", "sum_hardcoded_last_axis",
          "sums over axis -1 whatever `axis` is, so for axis=0 or 1 it adds up the wrong entries",
          entropy_sum_last_axis),
    Entry("softmax_entropy", "wrong", "keepdims",
          "sums with keepdims=True, so the reduced axis stays as length 1 instead of being removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "forgets the minus sign: returns sum p log p, which is minus the entropy",
          entropy_no_minus),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "averages -p log p over the axis instead of summing it, so the entropy is divided by "
          "the number of entries",
          entropy_mean),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python_loop_math_log", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "inner_product",
          "writes p @ p, which for 1-D vectors is the scalar inner product, so it subtracts "
          "sum(p^2) from every entry instead of the outer product p p^T",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square_broadcast",
          "writes p * p (element-wise, shape (n,)), which broadcasts along the rows and subtracts "
          "p_j^2 in column j instead of p_i p_j",
          jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "identity_for_diag",
          "uses the identity matrix where diag(p) belongs: I - p p^T",
          jac_identity),
    Entry("softmax_jacobian", "wrong", "diag_of_whole_expression",
          "the parenthesis closes too late: np.diag(p - outer(p, p)) of a 2-D array extracts a "
          "diagonal vector (n,) instead of building an (n, n) matrix",
          jac_diag_parentheses),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian",
          jac_sign),
    Entry("softmax_jacobian", "wrong", "treats_p_as_logits",
          "applies softmax to p first, as if p were logits, although p is already the probability "
          "vector at which the Jacobian is taken",
          jac_softmax_first),
    Entry("softmax_jacobian", "right", "row_scaled_identity", None, jac_row_scaled),
    Entry("softmax_jacobian", "right", "double_loop", None, jac_double_loop),
]
