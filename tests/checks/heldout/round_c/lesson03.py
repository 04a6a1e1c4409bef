"""Round c, lesson 03: dot_product_variance, softmax_entropy, softmax_jacobian (numpy)."""

import numpy as np
import scipy.special

from entry import Entry


# ------------------------------------------------------------------ dot_product_variance
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1) / np.sqrt(d_k)))


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_elementwise(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std((q * k).sum(axis=1)))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var((q * k).sum(axis=1)))


def dpv_mean_square(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    k = rng.normal(0.0, 1.0, size=(n_samples, d_k))
    dots = np.einsum("ij,ij->i", q, k)
    return float(np.mean(dots ** 2))


def dpv_chunked_ddof1(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    dots = []
    done = 0
    while done < n_samples:
        m = min(10_000, n_samples - done)
        q = rng.standard_normal((m, d_k))
        k = rng.standard_normal((m, d_k))
        dots.append(np.sum(q * k, axis=1))
        done += m
    return float(np.var(np.concatenate(dots), ddof=1))


# ------------------------------------------------------------------ softmax_entropy
def entropy_bits(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_nan_on_zeros(weights, axis=-1):
    p = np.asarray(weights)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_no_minus(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return np.sum(p * logs, axis=axis)


def entropy_ignores_axis(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=-1)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis, keepdims=True)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.mean(p * logs, axis=axis)


def entropy_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights)).sum(axis=axis)


def entropy_xlogy(weights, axis=-1):
    p = np.asarray(weights, dtype=np.float64)
    return -np.add.reduce(scipy.special.xlogy(p, p), axis=axis)


# ------------------------------------------------------------------ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - np.dot(p, p)


def jac_identity(p):
    p = np.asarray(p)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_diag_only(p):
    p = np.asarray(p)
    return np.diag(p * (1 - p))


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_squares_row(p):
    p = np.asarray(p)
    return np.diag(p) - p * p


def jac_softmax_again(p):
    p = np.asarray(p)
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_double_loop(p):
    p = np.asarray(p)
    n = p.shape[0]
    jac = np.zeros((n, n), dtype=p.dtype)
    for i in range(n):
        for j in range(n):
            jac[i, j] = p[i] * ((1.0 if i == j else 0.0) - p[j])
    return jac


def jac_einsum(p):
    p = np.asarray(p)
    eye = np.eye(p.shape[0], dtype=p.dtype)
    return np.einsum("i,ij->ij", p, eye - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_dots", "Divides the dot products by sqrt(d_k) before taking the variance, so it measures the scaled scores (about 1) instead of the raw ones (about d_k).", dpv_scaled),
    Entry("dot_product_variance", "wrong", "ignores_seed", "Creates the generator without the seed, so the estimate is not reproducible.", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "uniform_samples", "Draws q and k uniformly in [0, 1) instead of from a standard normal distribution.", dpv_uniform),
    Entry("dot_product_variance", "wrong", "elementwise_variance", "Takes the variance of the elementwise products q_i k_i instead of the variance of the summed dot products.", dpv_elementwise),
    Entry("dot_product_variance", "wrong", "standard_deviation", "Returns the standard deviation of the dot products instead of their variance.", dpv_std),
    Entry("dot_product_variance", "wrong", "k_is_q", "Uses the same sample for k as for q, so it computes the variance of |q|^2 rather than of a product of two independent vectors.", dpv_same_vector),
    Entry("dot_product_variance", "right", "mean_of_squares", None, dpv_mean_square),
    Entry("dot_product_variance", "right", "chunked_ddof1", None, dpv_chunked_ddof1),
    Entry("softmax_entropy", "wrong", "log_base_2", "Uses log2, giving the entropy in bits instead of nats.", entropy_bits),
    Entry("softmax_entropy", "wrong", "zero_weights_nan", "Takes np.log of zero weights, so 0 * log(0) gives NaN instead of contributing 0.", entropy_nan_on_zeros),
    Entry("softmax_entropy", "wrong", "missing_minus", "Forgets the minus sign, returning sum p log p (negative) instead of the entropy.", entropy_no_minus),
    Entry("softmax_entropy", "wrong", "ignores_axis", "Always sums over the last axis and ignores the axis argument.", entropy_ignores_axis),
    Entry("softmax_entropy", "wrong", "keepdims", "Keeps the reduced axis (keepdims=True), so the result has an extra axis of length 1.", entropy_keepdims),
    Entry("softmax_entropy", "wrong", "mean_not_sum", "Averages -p log p over the axis instead of summing it.", entropy_mean),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_entr),
    Entry("softmax_entropy", "right", "xlogy_reduce", None, entropy_xlogy),
    Entry("softmax_jacobian", "wrong", "inner_product", "Uses np.dot(p, p), a scalar, instead of the outer product p p^T.", jac_inner_product),
    Entry("softmax_jacobian", "wrong", "identity_not_diag", "Uses the identity matrix instead of diag(p).", jac_identity),
    Entry("softmax_jacobian", "wrong", "diagonal_only", "Keeps only the diagonal p_i(1 - p_i) and drops the off-diagonal terms -p_i p_j.", jac_diag_only),
    Entry("softmax_jacobian", "wrong", "sign_flipped", "Returns p p^T - diag(p), the negative of the Jacobian.", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "elementwise_square", "Subtracts p * p (broadcast over rows) instead of the outer product, so entry (i, j) gets p_j^2.", jac_squares_row),
    Entry("softmax_jacobian", "wrong", "softmax_of_p", "Treats p as logits and applies softmax to it again before forming the Jacobian.", jac_softmax_again),
    Entry("softmax_jacobian", "right", "double_loop", None, jac_double_loop),
    Entry("softmax_jacobian", "right", "einsum", None, jac_einsum),
]
