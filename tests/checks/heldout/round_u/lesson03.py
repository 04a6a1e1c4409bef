"""Held-out catalogue, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy,
softmax_jacobian."""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry


# ---------------------------------------------------------------- dot_product_variance, wrong
def variance_of_scaled_dots(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    scores = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(scores.var())


def variance_unseeded_rng(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng()
    q = gen.normal(size=(n_samples, d_k))
    k = gen.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def variance_q_reused_as_k(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    dots = np.sum(q * k, axis=-1)
    return float(np.var(dots))


def variance_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(dots.var())


def variance_returns_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n_samples, d_k))
    return float(np.std((q * k).sum(-1)))


def variance_precedence(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qs = rng.standard_normal(size=(n_samples, d_k))
    ks = rng.standard_normal(size=(n_samples, d_k))
    dots = np.einsum("nd,nd->n", qs, ks)
    return float(np.mean(dots - dots.mean() ** 2))


# ---------------------------------------------------------------- dot_product_variance, right
def variance_two_pass_ddof1(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.einsum("sd,sd->s", q, k)
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / (n_samples - 1))


def variance_torch_generator(d_k, n_samples=100_000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    return (q * k).sum(dim=1).var(unbiased=False).item()


# --------------------------------------------------------------------- softmax_entropy, wrong
def entropy_nan_on_zeros(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_in_bits(weights, axis=-1):
    p = np.asarray(weights)
    logp = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=axis)


def entropy_axis_ignored(weights, axis=-1):
    w = np.asarray(weights)
    terms = np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis, keepdims=True)


def entropy_sign(weights, axis=-1):
    p = np.asarray(weights)
    plogp = scipy.special.xlogy(p, p)
    return np.sum(plogp, axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.mean(p * logs, axis=axis)


# --------------------------------------------------------------------- softmax_entropy, right
def entropy_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def entropy_row_loop(weights, axis=-1):
    w = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = w.reshape(-1, w.shape[-1])
    result = []
    for row in flat:
        h = 0.0
        for p in row:
            if p > 0:
                h -= p * math.log(p)
        result.append(h)
    return np.array(result).reshape(w.shape[:-1])[()]


# -------------------------------------------------------------------- softmax_jacobian, wrong
def jacobian_dot_T(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T


def jacobian_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jacobian_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jacobian_identity(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    return np.eye(n) - np.outer(p, p)


def jacobian_loop_brackets(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * (i == j) - p[j]
    return J


def jacobian_diag_of_column(p):
    col = np.asarray(p, dtype=float).reshape(-1, 1)
    return np.diag(col) - col @ col.T


# -------------------------------------------------------------------- softmax_jacobian, right
def jacobian_double_loop(p):
    vals = [float(t) for t in np.asarray(p).ravel()]
    n = len(vals)
    rows = []
    for i in range(n):
        row = []
        for j in range(n):
            row.append(vals[i] * (1.0 - vals[i]) if i == j else -vals[i] * vals[j])
        rows.append(row)
    return np.array(rows, dtype=np.float64)


def jacobian_einsum_factor(p):
    p = np.asarray(p, dtype=np.float64)
    n = p.size
    return np.einsum("i,ij->ij", p, np.eye(n) - p[None, :])


E = Entry
ENTRIES = [
    E(exercise="dot_product_variance", kind="wrong", label="scaled_by_sqrt_dk",
      mistake="Divides the dot products by sqrt(d_k) before taking the variance, so it "
              "returns about 1 instead of the unscaled variance d_k.",
      func=variance_of_scaled_dots),
    E(exercise="dot_product_variance", kind="wrong", label="rng_ignores_seed",
      mistake="Creates the generator with `np.random.default_rng()` without the seed, so two "
              "calls with the same seed give different numbers.",
      func=variance_unseeded_rng),
    E(exercise="dot_product_variance", kind="wrong", label="k_is_q",
      mistake="Reuses q as k (`k = q`), so it measures the variance of |q|^2, about 2 d_k, "
              "not of the dot product of two independent vectors.",
      func=variance_q_reused_as_k),
    E(exercise="dot_product_variance", kind="wrong", label="sum_over_samples_axis",
      mistake="Sums q*k over axis 0 (the samples) instead of over the d_k features, so it "
              "takes the variance of only d_k sums of n_samples products (0 for d_k=1, about "
              "n_samples otherwise).",
      func=variance_sum_over_samples),
    E(exercise="dot_product_variance", kind="wrong", label="returns_std",
      mistake="Returns `np.std` of the dot products, the standard deviation sqrt(d_k), "
              "instead of their variance.",
      func=variance_returns_std),
    E(exercise="dot_product_variance", kind="wrong", label="mean_square_precedence",
      mistake="Writes `np.mean(dots - dots.mean() ** 2)`: the square applies to the mean "
              "only, so it returns about mean - mean^2 (near 0) instead of the variance.",
      func=variance_precedence),
    E(exercise="dot_product_variance", kind="right", label="two_pass_sample_variance",
      mistake=None, func=variance_two_pass_ddof1),
    E(exercise="dot_product_variance", kind="right", label="torch_generator_float64",
      mistake=None, func=variance_torch_generator),

    E(exercise="softmax_entropy", kind="wrong", label="log_of_zero_nan",
      mistake="Computes p * log(p) with no guard, so zero weights give 0 * (-inf) = NaN "
              "instead of contributing 0.",
      func=entropy_nan_on_zeros),
    E(exercise="softmax_entropy", kind="wrong", label="bits_not_nats",
      mistake="Uses `np.log2`, giving the entropy in bits instead of nats (too large by "
              "1/ln 2).",
      func=entropy_in_bits),
    E(exercise="softmax_entropy", kind="wrong", label="sums_last_axis",
      mistake="Sums over the last axis whatever `axis` is, so for `axis=0` or `axis=1` the "
              "entropies are taken across the wrong distributions.",
      func=entropy_axis_ignored),
    E(exercise="softmax_entropy", kind="wrong", label="keepdims_result",
      mistake="Sums with `keepdims=True`, so the result keeps the reduced axis (length 1) "
              "instead of having it removed.",
      func=entropy_keepdims),
    E(exercise="softmax_entropy", kind="wrong", label="missing_minus_sign",
      mistake="Returns sum p log p without the minus sign: the entropy comes out negative.",
      func=entropy_sign),
    E(exercise="softmax_entropy", kind="wrong", label="mean_not_sum",
      mistake="Averages -p log p over the axis (`np.mean`) instead of summing, dividing the "
              "entropy by the number of outcomes.",
      func=entropy_mean),
    E(exercise="softmax_entropy", kind="right", label="scipy_entr", mistake=None,
      func=entropy_entr),
    E(exercise="softmax_entropy", kind="right", label="moveaxis_python_loop", mistake=None,
      func=entropy_row_loop),

    E(exercise="softmax_jacobian", kind="wrong", label="p_at_p_T",
      mistake="Writes `p @ p.T` for the outer product, but `.T` of a 1-D array is the same "
              "array, so it subtracts the scalar p.p from every entry.",
      func=jacobian_dot_T),
    E(exercise="softmax_jacobian", kind="wrong", label="elementwise_p_times_p",
      mistake="Subtracts `p * p` (the elementwise squares, broadcast along every row) "
              "instead of the outer product p p^T.",
      func=jacobian_elementwise_square),
    E(exercise="softmax_jacobian", kind="wrong", label="sign_flipped",
      mistake="Returns p p^T - diag(p), the negative of the Jacobian.",
      func=jacobian_sign_flipped),
    E(exercise="softmax_jacobian", kind="wrong", label="identity_for_diag",
      mistake="Uses the identity matrix where diag(p) belongs (I - p p^T), mixing up the "
              "softmax Jacobian with another formula.",
      func=jacobian_identity),
    E(exercise="softmax_jacobian", kind="wrong", label="loop_missing_brackets",
      mistake="Writes `p[i] * (i == j) - p[j]` without the brackets around "
              "`(i == j) - p[j]`, so entry (i, j) is p_i delta_ij - p_j instead of "
              "p_i (delta_ij - p_j).",
      func=jacobian_loop_brackets),
    E(exercise="softmax_jacobian", kind="wrong", label="diag_of_column",
      mistake="Calls `np.diag` on p reshaped to an (n, 1) column: on a 2-D array np.diag "
              "extracts the diagonal (just p_0) instead of building diag(p).",
      func=jacobian_diag_of_column),
    E(exercise="softmax_jacobian", kind="right", label="python_double_loop", mistake=None,
      func=jacobian_double_loop),
    E(exercise="softmax_jacobian", kind="right", label="einsum_p_times_I_minus_p", mistake=None,
      func=jacobian_einsum_factor),
]
