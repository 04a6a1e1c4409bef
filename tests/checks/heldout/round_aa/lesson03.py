"""Held-out catalogue, lesson 03 (scaling): dot_product_variance, softmax_entropy,
softmax_jacobian."""

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
    dots = np.sum(q * k, axis=1) / np.sqrt(d_k)
    return float(np.var(dots))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float((q * k).sum(axis=-1).var())


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(dots.var())


def dpv_q_times_q(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    products = np.sum(q * q, axis=1)
    return float(np.var(products))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.einsum("nd,nd->n", q, k).var())


def dpv_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.standard_normal((n_samples, d_k))
    ks = gen.standard_normal((n_samples, d_k))
    return float(np.std((qs * ks).sum(axis=1)))


def dpv_chunked_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    total = 0.0
    total_sq = 0.0
    done = 0
    while done < n_samples:
        m = min(10_000, n_samples - done)
        q = rng.standard_normal((m, d_k))
        k = rng.standard_normal((m, d_k))
        dots = np.einsum("ij,ij->i", q, k)
        total += float(dots.sum())
        total_sq += float((dots * dots).sum())
        done += m
    mean = total / n_samples
    return (total_sq - n_samples * mean * mean) / (n_samples - 1)


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return (q * k).sum(dim=1).var().item()


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    logs = np.zeros_like(p)
    np.log2(p, out=logs, where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_boolean_index(weights, axis=-1):
    p = np.asarray(weights)
    nz = p[p > 0]
    return -np.sum(nz * np.log(nz), axis=axis)


def entropy_last_axis_only(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights)
    safe = np.where(w > 0, w, 1.0)
    return -np.sum(w * np.log(safe), axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    plogp = np.zeros_like(p)
    pos = p > 0
    plogp[pos] = p[pos] * np.log(p[pos])
    return -np.mean(plogp, axis=axis)


def entropy_resoftmax(weights, axis=-1):
    z = np.asarray(weights, dtype=np.float64)
    z = z - z.max(axis=axis, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(axis=axis, keepdims=True)
    return -(probs * np.log(probs)).sum(axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights)), axis=axis)


def entropy_python_loop(weights, axis=-1):
    arr = np.asarray(weights)
    moved = np.moveaxis(arr, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    result = np.empty(rows.shape[0], dtype=np.float64)
    for i, row in enumerate(rows):
        h = 0.0
        for value in row:
            value = float(value)
            if value > 0.0:
                h -= value * math.log(value)
        result[i] = h
    return result.reshape(moved.shape[:-1])[()]


# ============================================================================ softmax_jacobian
def jacobian_p_at_pT(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T


def jacobian_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jacobian_identity(p):
    p = np.asarray(p)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jacobian_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jacobian_np_diagonal(p):
    p = np.asarray(p)
    return np.diagonal(p) - np.outer(p, p)


def jacobian_diagonal_only(p):
    p = np.asarray(p)
    return np.diag(p * (1 - p))


def jacobian_double_loop(p):
    vals = [float(a) for a in np.asarray(p)]
    n = len(vals)
    jac = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            delta = 1.0 if i == j else 0.0
            jac[i, j] = vals[i] * (delta - vals[j])
    return jac


def jacobian_row_scaled(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_by_sqrt_dk",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1; the exercise asks for the unscaled q.k, whose variance is d_k", dpv_scaled),
    Entry("dot_product_variance", "wrong", "generator_not_seeded",
          "creates the generator with np.random.default_rng() without passing seed, so two "
          "calls with the same seed give different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "sums q*k over axis 0 (the samples) instead of axis 1 (the d_k components), so it "
          "takes the variance of only d_k numbers, each a sum over all samples (0 for d_k=1, "
          "about n_samples otherwise)",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "q_times_q",
          "multiplies q by itself (q * q) instead of q * k, so it measures the variance of "
          "|q|^2, about 2 d_k", dpv_q_times_q),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws q and k with rng.random (uniform on [0, 1), mean 1/2) instead of "
          "rng.standard_normal, so the variance is far from d_k", dpv_uniform),
    Entry("dot_product_variance", "wrong", "returns_std",
          "returns np.std, the standard deviation (about sqrt(d_k)), instead of the variance",
          dpv_std),
    Entry("dot_product_variance", "right", "chunked_moments", None, dpv_chunked_moments),
    Entry("dot_product_variance", "right", "torch_generator", None, dpv_torch_generator),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses np.log2, so the entropy comes out in bits instead of nats", entropy_log2),
    Entry("softmax_entropy", "wrong", "boolean_index_flattens",
          "selects the non-zero weights with p[p > 0], which flattens the array, so it returns "
          "one total over all distributions (a scalar; axis=1 or -2 even raises) instead of "
          "one entropy per distribution", entropy_boolean_index),
    Entry("softmax_entropy", "wrong", "sum_over_last_axis",
          "sums over the last axis whatever `axis` says, so axis=0/1/-2 give the wrong "
          "distributions' entropies", entropy_last_axis_only),
    Entry("softmax_entropy", "wrong", "keepdims_true",
          "keeps the reduced axis (keepdims=True); the result must have that axis removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "averages -p log p over the axis (np.mean) instead of summing it, dividing the "
          "entropy by the number of entries", entropy_mean),
    Entry("softmax_entropy", "wrong", "softmax_applied_again",
          "treats the weights as logits and applies a softmax again before taking the entropy, "
          "so it measures the entropy of softmax(p), not of p", entropy_resoftmax),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python_loop_math_log", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "p_matmul_p_T",
          "p @ p.T on a 1-D array is the scalar inner product (.T does nothing to a vector), "
          "not the outer product p p^T", jacobian_p_at_pT),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p, the elementwise square (a vector broadcast across the rows), "
          "instead of the outer product np.outer(p, p)", jacobian_elementwise_square),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag",
          "uses the identity matrix where diag(p) belongs", jacobian_identity),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "subtracts the wrong way round: p p^T - diag(p) is minus the Jacobian",
          jacobian_sign_flipped),
    Entry("softmax_jacobian", "wrong", "np_diagonal",
          "calls np.diagonal (which reads the diagonal of a 2-D array and raises on a 1-D one) "
          "where np.diag (which builds a diagonal matrix from a vector) belongs",
          jacobian_np_diagonal),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "keeps only the diagonal p_i (1 - p_i), dropping the off-diagonal -p_i p_j terms",
          jacobian_diagonal_only),
    Entry("softmax_jacobian", "right", "double_loop_kronecker", None, jacobian_double_loop),
    Entry("softmax_jacobian", "right", "row_scaled_closed_form", None, jacobian_row_scaled),
]
