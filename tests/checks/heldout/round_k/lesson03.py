"""Round k, lesson 03 (numpy): dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
import scipy.special
import scipy.stats
import torch

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


# ============================================================================ dot_product_variance
@add("dot_product_variance", "wrong", "scaled_dots",
     "It measures the variance of the scaled product q.k / sqrt(d_k), which is about 1, "
     "instead of the unscaled q.k, which is about d_k.")
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1) / np.sqrt(d_k)))


@add("dot_product_variance", "wrong", "legacy_seed_not_generator",
     "It seeds numpy's legacy global generator with np.random.seed, which does not seed the "
     "np.random.default_rng() generator it then draws from, so repeated calls differ.")
def dpv_legacy_seed(d_k, n_samples=100_000, seed=0):
    np.random.seed(seed)
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.einsum("nd,nd->n", q, k).var())


@add("dot_product_variance", "wrong", "returns_std",
     "It returns the standard deviation of q.k (about sqrt(d_k)) instead of its variance.")
def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.sum(q * k, axis=-1)))


@add("dot_product_variance", "wrong", "sum_over_samples",
     "It sums q*k over the sample axis instead of the feature axis, so it takes the variance "
     "of d_k huge sums rather than of n_samples dot products.")
def dpv_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(dots.var())


@add("dot_product_variance", "wrong", "uniform_instead_of_normal",
     "It draws q and k with rng.random, which is uniform on [0, 1), instead of from a standard "
     "normal, so the variance is far below d_k.")
def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


@add("dot_product_variance", "wrong", "same_sample_for_q_and_k",
     "It draws one matrix and uses it for both q and k, so it measures the variance of |q|^2 "
     "(about 2 d_k) instead of that of q.k.")
def dpv_same_sample(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


@add("dot_product_variance", "right", "torch_generator")
def dpv_torch(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return float(torch.var((q * k).sum(dim=1)))


@add("dot_product_variance", "right", "randomstate_unbiased")
def dpv_randomstate(d_k, n_samples=100_000, seed=0):
    rs = np.random.RandomState(seed)
    dots = np.einsum("sd,sd->s", rs.randn(n_samples, d_k), rs.randn(n_samples, d_k))
    mean = dots.mean()
    return float(((dots - mean) ** 2).sum() / (n_samples - 1))


# ============================================================================ softmax_entropy
def _plogp(p):
    return p * np.log(p, out=np.zeros_like(p), where=p > 0)


@add("softmax_entropy", "wrong", "log2_bits",
     "It uses log2, giving the entropy in bits instead of nats.")
def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


@add("softmax_entropy", "wrong", "missing_minus_sign",
     "It returns sum(p log p) without the minus sign, so every entropy comes out negative.")
def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights)
    return np.sum(_plogp(p), axis=axis)


@add("softmax_entropy", "wrong", "hardcoded_last_axis",
     "It always sums over the last axis, ignoring the axis argument.")
def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights)
    return -_plogp(p).sum(-1)


@add("softmax_entropy", "wrong", "keepdims_true",
     "It sums with keepdims=True, so the reduced axis stays as a size-1 axis and the result "
     "has the wrong shape.")
def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(_plogp(p), axis=axis, keepdims=True)


@add("softmax_entropy", "wrong", "scipy_stats_renormalises",
     "scipy.stats.entropy renormalises each slice by its sum, so an all-zero row gives NaN "
     "(0/0) instead of entropy 0.")
def entropy_scipy_stats(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights), axis=axis)


@add("softmax_entropy", "wrong", "guard_includes_zero",
     "The guard keeps entries with p >= 0 instead of p > 0, so zero weights still go through "
     "0 * log 0 and give NaN.")
def entropy_bad_guard(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p >= 0, p * np.log(p), 0.0)
    return -terms.sum(axis=axis)


@add("softmax_entropy", "right", "scipy_special_entr")
def entropy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


@add("softmax_entropy", "right", "moveaxis_python_loop")
def entropy_loops(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        out[idx] = -sum(w * math.log(w) for w in p[idx] if w > 0)
    return out[()]


# ============================================================================ softmax_jacobian
@add("softmax_jacobian", "wrong", "at_on_1d_is_dot",
     "For a 1-D p, p @ p.T is the scalar p.p, not the outer product, so it subtracts one "
     "number from diag(p).")
def jac_dot(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T


@add("softmax_jacobian", "wrong", "elementwise_square_broadcast",
     "It subtracts p * p, which broadcasts as a row, instead of the outer product p p^T.")
def jac_square(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


@add("softmax_jacobian", "wrong", "sign_flipped",
     "It returns p p^T - diag(p), the negative of the Jacobian.")
def jac_sign(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


@add("softmax_jacobian", "wrong", "p_i_for_p_j",
     "In the loop it uses p[i] where p[j] belongs, so off-diagonal entries are -p_i^2 instead "
     "of -p_i p_j.")
def jac_loop_wrong_index(p):
    n = len(p)
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[i])
    return J


@add("softmax_jacobian", "wrong", "softmax_applied_again",
     "It treats p as logits and applies softmax to it again before building the Jacobian, "
     "although p is already the probability vector.")
def jac_resoftmax(p):
    s = scipy.special.softmax(np.asarray(p, dtype=float))
    return np.diag(s) - np.outer(s, s)


@add("softmax_jacobian", "wrong", "upper_triangle_only",
     "It fills only the upper triangle (j >= i) and never mirrors it, so the entries below the "
     "diagonal stay zero.")
def jac_upper(p):
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] = p[i] * (1 - p[i])
        for j in range(i + 1, n):
            J[i, j] = -p[i] * p[j]
    return J


@add("softmax_jacobian", "right", "einsum_identity")
def jac_einsum(p):
    p = np.asarray(p)
    eye = np.eye(p.shape[0], dtype=p.dtype)
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


@add("softmax_jacobian", "right", "torch_diag_embed")
def jac_torch(p):
    arr = np.asarray(p)
    t = torch.from_numpy(arr.astype(np.float64))
    J = torch.diag_embed(t) - t[:, None] * t[None, :]
    return J.numpy().astype(arr.dtype)
