"""Learner-style answers to lesson 03 (see answers/lesson01.py for the layout)."""

import numpy as np
import scipy.special
import scipy.stats
import torch


# -- dot_product_variance: wrong ---------------------------------------------------------------
def _samples(d_k, n_samples, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_samples, d_k)), rng.standard_normal((n_samples, d_k))


def variance_of_scaled(d_k, n_samples=100_000, seed=0):
    q, k = _samples(d_k, n_samples, seed)
    return float(np.var(np.sum(q * k, axis=1) / np.sqrt(d_k)))


def variance_std(d_k, n_samples=100_000, seed=0):
    q, k = _samples(d_k, n_samples, seed)
    return float(np.std(np.einsum("nd,nd->n", q, k)))


def variance_divided_by_d_k(d_k, n_samples=100_000, seed=0):
    q, k = _samples(d_k, n_samples, seed)
    return float(np.var(np.sum(q * k, axis=1) / d_k))


def variance_same_vector(d_k, n_samples=100_000, seed=0):
    q, _ = _samples(d_k, n_samples, seed)
    return float(np.var(np.sum(q * q, axis=1)))


def variance_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q, k = rng.random((n_samples, d_k)), rng.random((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


def variance_without_last_feature(d_k, n_samples=100_000, seed=0):
    q, k = _samples(d_k, n_samples, seed)
    return float(np.var(np.sum(q[:, :-1] * k[:, :-1], axis=1)))  # d_k - 1 products


def variance_of_products(d_k, n_samples=100_000, seed=0):
    q, k = _samples(d_k, n_samples, seed)
    return float(np.var(q * k))  # single products, not their sum


def variance_global_rng(d_k, n_samples=100_000, seed=0):
    q = np.random.randn(n_samples, d_k)
    k = np.random.randn(n_samples, d_k)
    return float(np.var(np.sum(q * k, axis=1)))


def variance_theory(d_k, n_samples=100_000, seed=0):
    return float(d_k) + seed * 1e-12


def variance_fixed_seed(d_k, n_samples=100_000, seed=0):
    q, k = _samples(d_k, n_samples, 1234)
    return float(np.var(np.sum(q * k, axis=1)))


# -- dot_product_variance: right ---------------------------------------------------------------
def variance_numpy(d_k, n_samples=100_000, seed=0):
    q, k = _samples(d_k, n_samples, seed)
    return float(np.var(np.sum(q * k, axis=1)))


def variance_mean_square(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qk = rng.normal(size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", qk[0], qk[1])
    return float(np.mean(dots**2))  # the mean is 0, so E[s^2] is the variance


def variance_ddof(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.matmul(q[:, None, :], k[:, :, None]).ravel(), ddof=1))


def variance_torch(d_k, n_samples=100_000, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=generator, dtype=torch.float64)
    return (q * k).sum(-1).var().item()


def variance_float32(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k), dtype=np.float32)
    k = rng.standard_normal((n_samples, d_k), dtype=np.float32)
    return np.var((q * k).sum(axis=1))  # a numpy float32 scalar


def variance_legacy_seed(d_k, n_samples=100_000, seed=0):
    state = np.random.RandomState(seed)
    dots = (state.randn(n_samples, d_k) * state.randn(n_samples, d_k)).sum(axis=1)
    return np.array(dots.var())  # a 0-d array


# -- softmax_entropy ---------------------------------------------------------------------------
def _terms(p):
    return np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)


def entropy_bits(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0), axis=axis)


def entropy_log10(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(np.where(p > 0, p * np.log10(np.where(p > 0, p, 1.0)), 0.0), axis=axis)


def entropy_nan(weights, axis=-1):
    return -np.sum(weights * np.log(weights), axis=axis)


def entropy_no_minus(weights, axis=-1):
    return np.sum(_terms(weights), axis=axis)


def entropy_mean(weights, axis=-1):
    return -np.mean(_terms(weights), axis=axis)


def entropy_last_axis(weights, axis=-1):
    return -np.sum(_terms(weights), axis=-1)


def entropy_whole(weights, axis=-1):
    return -np.sum(_terms(weights))


def entropy_per_weight(weights, axis=-1):
    return -scipy.special.xlogy(weights, weights)


def entropy_kept_axis(weights, axis=-1):
    return -_terms(weights).sum(axis=axis, keepdims=True)


def entropy_stats_default(weights, axis=-1):
    return scipy.stats.entropy(weights)


def entropy_over_max_entropy(weights, axis=-1):
    p = np.asarray(weights)
    return -_terms(p).sum(axis=axis) / np.log(p.shape[axis])


def entropy_softmax_first(weights, axis=-1):
    p = torch.softmax(torch.from_numpy(np.asarray(weights, dtype=np.float64)), dim=axis)
    return -(p * torch.log(p)).sum(dim=axis).numpy()


def entropy_where(weights, axis=-1):
    return -np.sum(_terms(weights), axis=axis)


def entropy_xlogy(weights, axis=-1):
    return -np.sum(scipy.special.xlogy(weights, weights), axis=axis)


def entropy_scipy(weights, axis=-1):
    # scipy.special.entr is -p log p with 0 at p = 0 (scipy.stats.entropy would renormalise,
    # and a fully masked row of zeros would give 0 / 0)
    return np.sum(scipy.special.entr(weights), axis=axis)


def entropy_epsilon(weights, axis=-1):
    return -np.sum(weights * np.log(weights + 1e-30), axis=axis)


def entropy_torch(weights, axis=-1):
    p = torch.from_numpy(np.asarray(weights))
    return -(torch.special.xlogy(p, p)).sum(dim=axis).numpy()


def entropy_masked(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    logs = np.zeros_like(p)
    np.log(p, out=logs, where=p > 0)
    return -(p * logs).sum(axis=axis)


# -- softmax_jacobian --------------------------------------------------------------------------
def jacobian_outer_only(p):
    return -np.outer(p, p)


def jacobian_diagonal_only(p):
    return np.diag(p * (1 - p))


def jacobian_diag_p(p):
    return np.diag(p)


def jacobian_sign_flipped(p):
    return np.outer(p, p) - np.diag(p)


def jacobian_outer_positive(p):
    return p[:, None] * p[None, :]


def jacobian_of_softmax_p(p):
    s = np.exp(p) / np.exp(p).sum()
    return np.diag(s) - np.outer(s, s)


def jacobian_dot(p):
    return np.diag(p) - p @ p


def jacobian_eye(p):
    return np.identity(len(p)) - np.outer(p, p)


def jacobian_squares(p):
    return np.diag(p) - p ** 2


def jacobian_log_softmax(p):
    n = len(p)
    return np.eye(n) - np.tile(p, (n, 1))


def jacobian_numpy(p):
    return np.diag(p) - np.outer(p, p)


def jacobian_loops(p):
    n = len(p)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            out[i, j] = p[i] * ((i == j) - p[j])
    return out


def jacobian_broadcast(p):
    return p[:, None] * (np.eye(len(p)) - p[None, :])


def jacobian_autograd(p):
    logits = torch.log(torch.from_numpy(np.asarray(p, dtype=np.float64)))
    return torch.autograd.functional.jacobian(lambda z: torch.softmax(z, dim=0), logits).numpy()


def jacobian_float32(p):
    p = np.asarray(p, dtype=np.float32)
    return np.diagflat(p) - np.einsum("i,j->ij", p, p)


# -- answers that reach mhalib's own answer ----------------------------------------------------
def variance_from_reference(d_k, n_samples=100_000, seed=0):
    from mhalib.reference import dot_product_variance

    return dot_product_variance(d_k, n_samples, seed)


def entropy_from_reference(weights, axis=-1):
    from mhalib.reference import softmax_entropy

    return softmax_entropy(weights, axis)


def jacobian_from_reference(p):
    from mhalib.reference import softmax_jacobian

    return softmax_jacobian(p)


WRONG = {
    "dot_product_variance": {
        "scaled": variance_of_scaled,
        "standard_deviation": variance_std,
        "scaled_by_d_k": variance_divided_by_d_k,
        "same_vector": variance_same_vector,
        "uniform_draws": variance_uniform,
        "one_product_left_out": variance_without_last_feature,
        "exact_value": variance_theory,
        "ignores_seed": variance_global_rng,
    },
    "softmax_entropy": {
        "bits": entropy_bits,
        "log10": entropy_log10,
        "nan_for_zeros": entropy_nan,
        "no_minus_sign": entropy_no_minus,
        "mean_not_sum": entropy_mean,
        "ignores_axis": entropy_last_axis,
        "whole_array": entropy_whole,
        "terms_not_summed": entropy_per_weight,
        "keepdims": entropy_kept_axis,
        "wrong_axis": entropy_stats_default,
        "normalised_by_log_n": entropy_over_max_entropy,
        "softmax_of_weights": entropy_softmax_first,
    },
    "softmax_jacobian": {
        "outer_only": jacobian_outer_only,
        "diagonal_only": jacobian_diagonal_only,
        "diag_p_only": jacobian_diag_p,
        "sign_flipped": jacobian_sign_flipped,
        "outer_positive": jacobian_outer_positive,
        "softmax_of_p": jacobian_of_softmax_p,
        "inner_product": jacobian_dot,
        "identity_not_diag_p": jacobian_eye,
        "elementwise_square": jacobian_squares,
        "log_softmax_jacobian": jacobian_log_softmax,
    },
}

# more wrong answers that must be named (mistake name -> answer), beyond one per mistake
ALSO_WRONG = {
    "dot_product_variance": {"scaled": variance_of_products, "ignores_seed": variance_fixed_seed},
}

RIGHT = {
    "dot_product_variance": [variance_numpy, variance_mean_square, variance_torch,
                             variance_float32, variance_legacy_seed, variance_ddof],
    "softmax_entropy": [entropy_where, entropy_xlogy, entropy_scipy, entropy_epsilon,
                        entropy_torch, entropy_masked],
    "softmax_jacobian": [jacobian_numpy, jacobian_loops, jacobian_broadcast, jacobian_autograd,
                         jacobian_float32],
}

ANSWER_KEY = {
    "dot_product_variance": [variance_from_reference],
    "softmax_entropy": [entropy_from_reference],
    "softmax_jacobian": [jacobian_from_reference],
}


def variance_of_feature_sums(d_k, n_samples=100_000, seed=0):
    """Sums the products over the samples (axis 0): the variance of d_k sums, about n_samples."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=0)))


WRONG["dot_product_variance"]["summed_over_samples"] = variance_of_feature_sums


def variance_mean_of_products(d_k, n_samples=100_000, seed=0):
    """Returns the mean of the dot products (about 0), not their variance."""
    q, k = _samples(d_k, n_samples, seed)
    return float(np.einsum("nd,nd->n", q, k).mean())


WRONG["dot_product_variance"]["about_zero"] = variance_mean_of_products


def variance_of_sqrt_d_k_draws(d_k, n_samples=100_000, seed=0):
    """q drawn with standard deviation sqrt(d_k): the variance grows as d_k^2."""
    q, k = _samples(d_k, n_samples, seed)
    return float(np.var(np.sum(np.sqrt(d_k) * q * k, axis=1)))


def variance_of_products_times_d_k(d_k, n_samples=100_000, seed=0):
    """Each dot product multiplied by d_k: the variance grows as d_k^3."""
    q, k = _samples(d_k, n_samples, seed)
    return float(np.var(d_k * np.einsum("nd,nd->n", q, k)))


WRONG["dot_product_variance"]["grows_as_d_k_2"] = variance_of_sqrt_d_k_draws
WRONG["dot_product_variance"]["grows_as_d_k_3"] = variance_of_products_times_d_k


def jacobian_delta_everywhere(p):
    """Entry (i, j) as p_i (1 - p_j) on every entry: the delta taken as 1 off the diagonal."""
    p = np.asarray(p, dtype=float)
    n = len(p)
    return np.array([[p[i] * (1 - p[j]) for j in range(n)] for i in range(n)])


WRONG["softmax_jacobian"]["delta_everywhere"] = jacobian_delta_everywhere
