"""Held-out catalogue, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy,
softmax_jacobian. Each function is one learner's answer; wrong ones carry one slip."""

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
    scores = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(scores.var())


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    dots = np.sum(q * k, axis=-1)
    return float(np.var(dots))


def dpv_sum_axis0(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.einsum("ij,ij->i", q, k)
    return float(np.std(dots))


def dpv_entry_std_sqrt_dk(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, np.sqrt(d_k), size=(n_samples, d_k))
    k = rng.normal(0.0, np.sqrt(d_k), size=(n_samples, d_k))
    return float(np.var((q * k).sum(axis=-1)))


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    dots = (q * k).sum(dim=1)
    return dots.var(unbiased=False).item()


def dpv_transposed_manual(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qs = rng.standard_normal((d_k, n_samples))
    ks = rng.standard_normal((d_k, n_samples))
    dots = np.einsum("ds,ds->s", qs, ks)
    centred = dots - dots.mean()
    return float(np.dot(centred, centred) / (n_samples - 1))


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_log1p(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -(p * np.log1p(p)).sum(axis=axis)  # log1p stays finite at p = 0


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    safe = np.where(p > 0, p, 1.0)
    return np.sum(p * np.log(safe), axis=axis)


def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    lp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * lp, axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    lp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.mean(p * lp, axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        h = 0.0
        for w in p[idx]:
            if w > 0:
                h -= w * math.log(w)
        out[idx] = h
    return out[()]


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_transpose_noop(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p.T


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_index_reused(p):
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                J[i, j] = p[i] * (1 - p[i])
            else:
                J[i, j] = -p[i] * p[i]
    return J


def jac_softmax_again(p):
    z = np.asarray(p, dtype=np.float64)
    s = np.exp(z - z.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_autograd(p):
    p64 = torch.as_tensor(np.asarray(p), dtype=torch.float64)
    logits = torch.log(p64)  # softmax(log p) = p
    jac = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, dim=0), logits)
    return jac.numpy()


def jac_kronecker_loops(p):
    vec = [float(v) for v in np.asarray(p)]
    n = len(vec)
    rows = [[vec[i] * ((1.0 if i == j else 0.0) - vec[j]) for j in range(n)] for i in range(n)]
    return np.array(rows, dtype=np.float64)


ENTRIES = [
    Entry(exercise="dot_product_variance", kind="wrong", label="scaled_scores",
          mistake="divides the dot products by sqrt(d_k) before taking the variance, so it measures "
          "the scaled score (about 1), not the unscaled q . k (about d_k)", func=dpv_scaled),
    Entry(exercise="dot_product_variance", kind="wrong", label="seed_ignored",
          mistake="creates `np.random.default_rng()` without passing `seed`, so two calls with the same "
          "seed give different numbers", func=dpv_unseeded),
    Entry(exercise="dot_product_variance", kind="wrong", label="rng_random_is_uniform",
          mistake="`rng.random` draws uniform [0, 1) numbers, not standard normals, so the variance is "
          "far from d_k", func=dpv_uniform),
    Entry(exercise="dot_product_variance", kind="wrong", label="sum_over_samples_axis",
          mistake="sums the products over axis 0 (the samples) instead of over the d_k features, so it "
          "takes the variance of d_k sums of n_samples terms", func=dpv_sum_axis0),
    Entry(exercise="dot_product_variance", kind="wrong", label="returns_std",
          mistake="returns `np.std` of the dot products, the standard deviation sqrt(d_k), instead of "
          "the variance", func=dpv_std),
    Entry(exercise="dot_product_variance", kind="wrong", label="entries_std_sqrt_dk",
          mistake="draws q and k with standard deviation sqrt(d_k) instead of 1 (I_{d_k} is the "
          "covariance), so the variance comes out as d_k**3", func=dpv_entry_std_sqrt_dk),
    Entry(exercise="dot_product_variance", kind="right", label="torch_generator_float64", mistake=None, func=dpv_torch_generator),
    Entry(exercise="dot_product_variance", kind="right", label="feature_major_unbiased", mistake=None,
          func=dpv_transposed_manual),

    Entry(exercise="softmax_entropy", kind="wrong", label="log2_bits",
          mistake="uses `np.log2`, giving the entropy in bits instead of nats", func=entropy_log2),
    Entry(exercise="softmax_entropy", kind="wrong", label="log1p_as_safe_log",
          mistake="uses `np.log1p(p)` as a 'safe log', but log1p(p) is log(1 + p), not log(p)",
          func=entropy_log1p),
    Entry(exercise="softmax_entropy", kind="wrong", label="missing_minus_sign",
          mistake="returns sum p log p without the minus sign, a negative number",
          func=entropy_no_minus),
    Entry(exercise="softmax_entropy", kind="wrong", label="sum_over_last_axis",
          mistake="sums over the last axis whatever `axis` is asked", func=entropy_last_axis),
    Entry(exercise="softmax_entropy", kind="wrong", label="keepdims_kept",
          mistake="sums with `keepdims=True`, so the reduced axis stays with length 1 instead of being "
          "removed", func=entropy_keepdims),
    Entry(exercise="softmax_entropy", kind="wrong", label="mean_instead_of_sum",
          mistake="averages -p log p over the outcomes (`np.mean`) instead of summing, dividing the "
          "entropy by the number of outcomes", func=entropy_mean),
    Entry(exercise="softmax_entropy", kind="right", label="scipy_special_entr", mistake=None, func=entropy_scipy_entr),
    Entry(exercise="softmax_entropy", kind="right", label="moveaxis_scalar_loop", mistake=None, func=entropy_loop),

    Entry(exercise="softmax_jacobian", kind="wrong", label="at_is_inner_product",
          mistake="`p @ p` of two 1-D arrays is their inner product (a scalar), not the outer product "
          "p p^T, so the same number is subtracted from every entry", func=jac_inner_product),
    Entry(exercise="softmax_jacobian", kind="wrong", label="transpose_of_vector_is_noop",
          mistake="`p * p.T` on a 1-D array is the elementwise square (`.T` does nothing), so the "
          "vector p**2 is broadcast along rows instead of subtracting p p^T",
          func=jac_transpose_noop),
    Entry(exercise="softmax_jacobian", kind="wrong", label="identity_instead_of_diag",
          mistake="uses the identity `np.eye(n)` where `diag(p)` belongs", func=jac_identity),
    Entry(exercise="softmax_jacobian", kind="wrong", label="sign_flipped",
          mistake="returns p p^T - diag(p), the negative of the Jacobian", func=jac_sign_flipped),
    Entry(exercise="softmax_jacobian", kind="wrong", label="off_diagonal_index_reused",
          mistake="the off-diagonal entries are written `-p[i] * p[i]` where `-p[i] * p[j]` belongs",
          func=jac_index_reused),
    Entry(exercise="softmax_jacobian", kind="wrong", label="softmax_applied_to_p",
          mistake="applies softmax to p first, treating the probability vector as logits, so the "
          "Jacobian is taken at softmax(p) instead of at p", func=jac_softmax_again),
    Entry(exercise="softmax_jacobian", kind="right", label="autograd_at_log_p", mistake=None, func=jac_autograd),
    Entry(exercise="softmax_jacobian", kind="right", label="kronecker_delta_lists", mistake=None, func=jac_kronecker_loops),
]
