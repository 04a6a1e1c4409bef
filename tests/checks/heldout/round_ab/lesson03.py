"""Held-out learners' answers, lesson 03 (dot_product_variance, softmax_entropy,
softmax_jacobian). Numpy lesson."""

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


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    pairs = rng.normal(size=(2, n_samples, d_k))
    dots = np.einsum("nd,nd->n", pairs[0], pairs[1])
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    q = gen.standard_normal((n_samples, d_k))
    k = gen.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("ij,ij->i", q, k)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    dots = (q * k).sum(-1)
    return float(dots.var())


def dpv_same_seed_twice(d_k, n_samples=100_000, seed=0):
    rng_q = np.random.default_rng(seed)
    rng_k = np.random.default_rng(seed)
    q = rng_q.standard_normal((n_samples, d_k))
    k = rng_k.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1)
    return float(np.var(dots))


def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((2, n_samples, d_k))
    dots = (z[0] * z[1]).sum(axis=-1)
    centred = dots - dots.mean()
    return float(np.mean(centred * centred))


def dpv_torch_unbiased(d_k, n_samples=100_000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=gen, dtype=torch.float64)
    dots = torch.einsum("sd,sd->s", q, k)
    return dots.var(unbiased=True).item()


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_last_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log(safe)).sum(axis=-1)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    terms = np.zeros_like(p)
    nz = p > 0
    terms[nz] = p[nz] * np.log(p[nz])
    return terms.sum(axis=axis)


def entropy_keepdims(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    logw = np.log(np.where(w > 0, w, 1.0))
    return -np.sum(w * logw, axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = scipy.special.xlogy(p, p)
    return -np.mean(plogp, axis=axis)


def entropy_guard_ge(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(p, out=np.zeros_like(p), where=p >= 0)
        return -np.sum(p * logs, axis=axis)


def entropy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_python_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    out = np.empty(flat.shape[0])
    for i, row in enumerate(flat):
        out[i] = -math.fsum(w * math.log(w) for w in row if w > 0)
    result = out.reshape(p.shape[:-1])
    return result[()]  # a scalar for a single distribution


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_fill_diag_no_minus(p):
    p = np.asarray(p, dtype=float)
    J = np.outer(p, p)
    np.fill_diagonal(J, p * (1 - p))
    return J


def jac_identity(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    return np.eye(n) - np.outer(p, p)


def jac_upper_triangle(p):
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return J


def jac_softmax_again(p):
    z = np.exp(p - np.max(p))
    s = z / z.sum()
    return np.diag(s) - np.outer(s, s)


def jac_delta_form(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


def jac_autograd(p):
    probs = torch.as_tensor(np.asarray(p, dtype=np.float64))
    logits = torch.log(probs)
    J = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, dim=0), logits)
    return J.numpy()


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance d_k",
          dpv_scaled),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "sums q * k over axis 0, the samples, instead of over the d_k features, so it "
          "takes the variance of d_k sums over samples",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "creates the generator with np.random.default_rng() and never uses seed, so two "
          "calls with the same seed give different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products, the standard deviation (about sqrt(d_k)), "
          "instead of the variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "draws q and k with rng.random, uniform on [0, 1), instead of standard normal "
          "draws",
          dpv_uniform),
    Entry("dot_product_variance", "wrong", "same_seed_for_k",
          "makes a second generator with the same seed for k, so k is a copy of q and it "
          "measures the variance of |q|^2 (about 2 d_k)",
          dpv_same_seed_twice),
    Entry("dot_product_variance", "right", "manual_moments", None, dpv_manual_moments),
    Entry("dot_product_variance", "right", "torch_generator_unbiased", None, dpv_torch_unbiased),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses np.log2, so the entropy comes out in bits instead of nats",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "sums_last_axis",
          "sums over axis=-1 whatever axis is asked, so distributions along another axis "
          "get the wrong entropy",
          entropy_last_axis),
    Entry("softmax_entropy", "wrong", "missing_minus",
          "forgets the minus sign: returns sum p log p, which is the negative of the "
          "entropy",
          entropy_no_minus),
    Entry("softmax_entropy", "wrong", "keepdims",
          "sums with keepdims=True, so the reduced axis stays as a length-1 axis instead of "
          "being removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "averages -p log p over the axis with np.mean instead of summing it, dividing the "
          "entropy by the number of outcomes",
          entropy_mean),
    Entry("softmax_entropy", "wrong", "guard_ge_zero",
          "guards the logarithm with where=p >= 0, which lets zero weights through: "
          "0 * log(0) = NaN for one-hot rows and zero weights",
          entropy_guard_ge),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_entr),
    Entry("softmax_entropy", "right", "python_fsum_loop", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "inner_product",
          "writes p @ p, which for two vectors is the scalar inner product, instead of the "
          "outer product p p^T",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p, the elementwise square broadcast along every row, instead of "
          "the outer product p p^T",
          jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "off_diagonal_sign",
          "fills the diagonal with p(1 - p) but keeps +p_i p_j off the diagonal: the minus "
          "sign of the off-diagonal terms is lost",
          jac_fill_diag_no_minus),
    Entry("softmax_jacobian", "wrong", "identity_for_diag",
          "puts the identity where diag(p) belongs (reads p_i (delta_ij - p_j) as "
          "delta_ij - p_i p_j)",
          jac_identity),
    Entry("softmax_jacobian", "wrong", "upper_triangle_only",
          "fills only j >= i in its double loop (range(i, n)), leaving the lower triangle "
          "at zero although the Jacobian is symmetric",
          jac_upper_triangle),
    Entry("softmax_jacobian", "wrong", "softmax_of_p",
          "treats p as logits and applies softmax to it again before building "
          "diag(s) - s s^T, instead of using the probabilities p as given",
          jac_softmax_again),
    Entry("softmax_jacobian", "right", "delta_form", None, jac_delta_form),
    Entry("softmax_jacobian", "right", "torch_autograd_at_log_p", None, jac_autograd),
]
