"""Lesson 03 answer key: why scores are divided by sqrt(d_k) (numpy)."""

from __future__ import annotations

import numpy as np

from mhalib.validate import as_float_array, positive_int


def dot_product_variance(d_k, n_samples=100_000, seed=0):
    """Empirical variance of q . k for q, k ~ N(0, I_{d_k}), unscaled (about ``d_k``)."""
    d_k = positive_int("d_k", d_k)
    n_samples = positive_int("n_samples", n_samples)
    if n_samples < 2:
        raise ValueError(f"n_samples must be at least 2 to estimate a variance, got {n_samples}")
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))  # (n_samples, d_k)
    k = rng.standard_normal((n_samples, d_k))  # (n_samples, d_k)
    dots = np.einsum("sd,sd->s", q, k)  # (n_samples,)
    return float(np.var(dots))


def softmax_entropy(weights, axis=-1):
    """Entropy in nats of each distribution along ``axis``; zero weights contribute 0."""
    p = as_float_array("weights", weights)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def softmax_jacobian(p):
    """Jacobian of softmax at the probability vector ``p`` (n,): ``diag(p) - p p^T``, (n, n)."""
    p = as_float_array("p", p)
    if p.ndim != 1:
        raise ValueError(f"p must be a vector of shape (n,), got shape {p.shape}")
    return np.diag(p) - np.outer(p, p)  # (n, n)
