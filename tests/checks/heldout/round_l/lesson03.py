"""Round l, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy, softmax_jacobian."""

from __future__ import annotations

import math

import numpy as np
import scipy.special
import scipy.stats
import torch

from entry import Entry

# ============================================================================ dot_product_variance


def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def dpv_two_generators(d_k, n_samples=100_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    k = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    return float(np.var(np.einsum("sd,sd->s", q, k)))


def dpv_global_seed(d_k, n_samples=100_000, seed=0):
    np.random.seed(seed)
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("sd,sd->s", q, k)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return (q * k).sum(dim=1).var(unbiased=False).item()


def dpv_streaming(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    total = 0.0
    total_sq = 0.0
    done = 0
    while done < n_samples:
        m = min(8192, n_samples - done)
        pair = rng.standard_normal((m, 2, d_k))
        dots = np.einsum("md,md->m", pair[:, 0], pair[:, 1])
        total += math.fsum(dots)
        total_sq += math.fsum(dots * dots)
        done += m
    mean = total / n_samples
    return total_sq / n_samples - mean * mean


# ============================================================================ softmax_entropy


def _xlogx(p):
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return p * logs


def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_scipy_stats(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights), axis=axis)


def entropy_missing_minus(weights, axis=-1):
    p = np.asarray(weights)
    return np.sum(_xlogx(p), axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(_xlogx(p), axis=axis, keepdims=True)


def entropy_torch_last_dim(weights, axis=-1):
    t = torch.from_numpy(np.asarray(weights))
    return torch.special.entr(t).sum(dim=-1).numpy()


def entropy_normalised(weights, axis=-1):
    p = np.asarray(weights)
    n = p.shape[axis]
    return -np.sum(_xlogx(p), axis=axis) / np.log(n) if n > 1 else -np.sum(_xlogx(p), axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_torch_xlogy(weights, axis=-1):
    t = torch.as_tensor(np.asarray(weights))
    return (-torch.special.xlogy(t, t)).sum(dim=axis).numpy()[()]


# ============================================================================ softmax_jacobian


def jacobian_transpose_1d(p):
    p = np.asarray(p)
    return np.diag(p) - p * p.T


def jacobian_diag_paren(p):
    p = np.asarray(p)
    return np.diag(p - np.outer(p, p))


def jacobian_identity(p):
    p = np.asarray(p)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jacobian_row_broadcast(p):
    p = np.asarray(p)
    n = p.shape[0]
    return p[:, None] * (np.eye(n) - p[:, None])


def jacobian_loop_overwrite(p):
    n = len(p)
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = -p[i] * p[j]
        J[i, i] = p[i]
    return J


def jacobian_autograd_at_p(p):
    t = torch.as_tensor(np.asarray(p, dtype=np.float64))
    J = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, dim=0), t)
    return J.numpy()


def jacobian_broadcast(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size, dtype=p.dtype) - p[None, :])


def jacobian_loops(p):
    vals = [float(v) for v in np.asarray(p)]
    rows = [[vi * ((1.0 if i == j else 0.0) - vj) for j, vj in enumerate(vals)]
            for i, vi in enumerate(vals)]
    return np.array(rows, dtype=np.asarray(p).dtype)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled",
          "Returns the variance of the scaled dot product q.k/sqrt(d_k) (about 1) instead of "
          "the unscaled q.k (about d_k).",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "two_generators",
          "Builds two generators with the same seed, so k is an exact copy of q and it "
          "measures the variance of q.q (about 2 d_k).",
          dpv_two_generators),
    Entry("dot_product_variance", "wrong", "global_seed",
          "Seeds numpy's global generator with np.random.seed, which np.random.default_rng() "
          "ignores, so the result is not reproducible for a given seed.",
          dpv_global_seed),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "Sums q*k over axis 0 (the samples) instead of the feature axis, so it takes the "
          "variance of only d_k sums over all samples (0 when d_k=1), not of n_samples dot "
          "products.",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "std",
          "Returns the standard deviation of the dot products (about sqrt(d_k)) instead of "
          "their variance.",
          dpv_std),
    Entry("dot_product_variance", "wrong", "uniform",
          "Draws q and k with rng.random, which is uniform on [0, 1), instead of standard "
          "normal samples.",
          dpv_uniform),
    Entry("dot_product_variance", "right", "torch_generator", None, dpv_torch_generator),
    Entry("dot_product_variance", "right", "streaming", None, dpv_streaming),

    Entry("softmax_entropy", "wrong", "bits",
          "Uses log2, giving the entropy in bits instead of nats.",
          entropy_bits),
    Entry("softmax_entropy", "wrong", "scipy_stats",
          "Uses scipy.stats.entropy, which renormalises each slice and so returns NaN for an "
          "all-zero row instead of 0.",
          entropy_scipy_stats),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "Forgets the minus sign: returns sum p log p, which is minus the entropy.",
          entropy_missing_minus),
    Entry("softmax_entropy", "wrong", "keepdims",
          "Sums with keepdims=True, so the reduced axis stays as a size-1 axis instead of "
          "being dropped.",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "torch_last_dim",
          "Always sums over the last dimension and ignores the axis argument.",
          entropy_torch_last_dim),
    Entry("softmax_entropy", "wrong", "normalised",
          "Divides by log(n), returning the normalised entropy (between 0 and 1) instead of "
          "the entropy in nats.",
          entropy_normalised),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "torch_xlogy", None, entropy_torch_xlogy),

    Entry("softmax_jacobian", "wrong", "transpose_1d",
          "Writes p * p.T for the outer product, but .T does nothing to a 1-D array, so it "
          "subtracts p**2 from every row instead of p p^T.",
          jacobian_transpose_1d),
    Entry("softmax_jacobian", "wrong", "diag_paren",
          "Closes np.diag( after the outer product, so np.diag extracts the diagonal of the "
          "2-D array (returning a vector) instead of building diag(p).",
          jacobian_diag_paren),
    Entry("softmax_jacobian", "wrong", "identity",
          "Uses the identity matrix instead of diag(p), i.e. delta_ij instead of p_i delta_ij.",
          jacobian_identity),
    Entry("softmax_jacobian", "wrong", "row_broadcast",
          "Broadcasts p as a column in both factors, giving p_i (delta_ij - p_i) instead of "
          "p_i (delta_ij - p_j).",
          jacobian_row_broadcast),
    Entry("softmax_jacobian", "wrong", "loop_overwrite",
          "Overwrites each diagonal entry with p_i instead of adding p_i to -p_i**2.",
          jacobian_loop_overwrite),
    Entry("softmax_jacobian", "wrong", "autograd_at_p",
          "Differentiates softmax at p itself, treating the probabilities as the logits, "
          "instead of at logits whose softmax is p.",
          jacobian_autograd_at_p),
    Entry("softmax_jacobian", "right", "broadcast", None, jacobian_broadcast),
    Entry("softmax_jacobian", "right", "loops", None, jacobian_loops),
]
