"""Held-out learners' answers, lesson 03 (dot_product_variance, softmax_entropy,
softmax_jacobian)."""

import math

import numpy as np
import scipy.special
import scipy.stats

from entry import Entry


# =============================================================================== dot_product_variance
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
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def dpv_two_generators_same_seed(d_k, n_samples=100_000, seed=0):
    q = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    k = np.random.default_rng(seed).standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=-1)
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    queries = gen.standard_normal((n_samples, d_k))
    keys = gen.standard_normal((n_samples, d_k))
    products = np.einsum("sd,sd->s", queries, keys)
    return float(np.std(products))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=-1)))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(dots.var())


def dpv_generator_pcg_pairs(d_k, n_samples=100_000, seed=0):
    gen = np.random.Generator(np.random.PCG64(seed))
    pairs = gen.standard_normal((n_samples, 2, d_k))
    dots = np.einsum("nd,nd->n", pairs[:, 0], pairs[:, 1])
    centred = dots - dots.mean()
    return float(np.dot(centred, centred) / n_samples)


def dpv_chunks(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    total = 0.0
    total_sq = 0.0
    done = 0
    while done < n_samples:
        m = min(10_000, n_samples - done)
        q = rng.standard_normal((m, d_k))
        k = rng.standard_normal((m, d_k))
        dots = (q * k).sum(axis=1)
        total += float(dots.sum())
        total_sq += float((dots ** 2).sum())
        done += m
    mean = total / n_samples
    return total_sq / n_samples - mean * mean


# =============================================================================== softmax_entropy
def entropy_bits(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_axis_ignored(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log(safe)).sum(axis=axis, keepdims=True)


def entropy_scipy_normalises(weights, axis=-1):
    return scipy.stats.entropy(np.asarray(weights), axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    plogp = np.zeros_like(p)
    nz = p > 0
    plogp[nz] = p[nz] * np.log(p[nz])
    return -plogp.mean(axis=axis)


def entropy_softmax_first(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    e = np.exp(w - w.max(axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_entr(weights, axis=-1):
    return np.sum(scipy.special.entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def entropy_xlogy_moveaxis(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        out[idx] = -sum(scipy.special.xlogy(pi, pi) for pi in p[idx])
    return out[()]  # a plain scalar for a single distribution


# =============================================================================== softmax_jacobian
def jac_matmul_1d(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_identity_diagonal(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    return np.eye(n) - np.outer(p, p)


def jac_loop_short(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n - 1):
        for j in range(n):
            J[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return J


def jac_softmax_of_p(p):
    z = np.asarray(p, dtype=float)
    s = np.exp(z - z.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_kronecker_loops(p):
    p = [float(t) for t in np.asarray(p)]
    n = len(p)
    return np.array([[p[i] * ((i == j) - p[j]) for j in range(n)] for i in range(n)])


def jac_broadcast(p):
    p = np.asarray(p, dtype=np.float64)
    return p[:, None] * (np.eye(p.size) - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_by_sqrt_dk",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance (about d_k)", dpv_scaled),
    Entry("dot_product_variance", "wrong", "seed_not_used",
          "creates the generator with np.random.default_rng() and never passes `seed`, so two "
          "calls with the same seed give different numbers", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "two_generators_same_seed",
          "draws q and k from two generators created with the same seed, so k equals q and the "
          "dot products are |q|^2 with variance about 2*d_k", dpv_two_generators_same_seed),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products (about sqrt(d_k)) instead of np.var",
          dpv_std),
    Entry("dot_product_variance", "wrong", "uniform_samples",
          "draws with rng.random (uniform on [0, 1)) instead of standard normals, so the "
          "entries have mean 1/2 and the variance is not d_k", dpv_uniform),
    Entry("dot_product_variance", "wrong", "sum_over_samples",
          "sums q*k over axis 0 (the samples) instead of over the d_k features, so it returns "
          "the variance of only d_k sums of n_samples products (0 for d_k=1, about "
          "n_samples otherwise), not about d_k",
          dpv_sum_wrong_axis),
    Entry("dot_product_variance", "right", "pcg64_paired_draw", None, dpv_generator_pcg_pairs),
    Entry("dot_product_variance", "right", "streamed_moments", None, dpv_chunks),
    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses np.log2, so the entropy comes out in bits instead of nats", entropy_bits),
    Entry("softmax_entropy", "wrong", "axis_ignored",
          "always sums over the last axis and ignores the `axis` argument", entropy_axis_ignored),
    Entry("softmax_entropy", "wrong", "keepdims_kept",
          "sums with keepdims=True, so the reduced axis stays with length 1 instead of being "
          "removed", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "scipy_entropy_normalises",
          "calls scipy.stats.entropy, which first renormalises each distribution, so an "
          "all-zero distribution gives NaN instead of 0", entropy_scipy_normalises),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "averages -p log p over the axis (mean) instead of summing it, dividing the entropy "
          "by the number of entries", entropy_mean),
    Entry("softmax_entropy", "wrong", "softmax_applied_again",
          "applies a softmax to the weights before taking the entropy, although the weights "
          "are already probabilities", entropy_softmax_first),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_entr),
    Entry("softmax_entropy", "right", "xlogy_loops", None, entropy_xlogy_moveaxis),
    Entry("softmax_jacobian", "wrong", "p_at_p_T_is_scalar",
          "writes p @ p.T for a 1-D p, which is the scalar dot product (p.T of a 1-D array is p), "
          "not the outer product p p^T", jac_matmul_1d),
    Entry("softmax_jacobian", "wrong", "elementwise_square",
          "subtracts p * p (elementwise, broadcast along rows) instead of the outer product "
          "np.outer(p, p)", jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "returns p p^T - diag(p), the negative of the Jacobian", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "identity_diagonal",
          "puts the identity on the diagonal (I - p p^T) instead of diag(p)",
          jac_identity_diagonal),
    Entry("softmax_jacobian", "wrong", "loop_skips_last_row",
          "the row loop runs over range(n - 1), so the last row of the Jacobian stays zero",
          jac_loop_short),
    Entry("softmax_jacobian", "wrong", "softmax_of_p",
          "applies softmax to p first, treating the probabilities as logits, and returns the "
          "Jacobian at softmax(p) instead of at p", jac_softmax_of_p),
    Entry("softmax_jacobian", "right", "kronecker_comprehension", None, jac_kronecker_loops),
    Entry("softmax_jacobian", "right", "broadcast_delta", None, jac_broadcast),
]
