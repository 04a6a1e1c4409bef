"""Lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy, softmax_jacobian."""

import numpy as np
import scipy.special
import torch

from entry import Entry


# ----------------------------------------------------------------------------- dot_product_variance
def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)  # scaled as in attention
    return float(dots.var())


def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.normal(size=(n_samples, d_k))
    k = rng.normal(size=(n_samples, d_k))
    return float(np.var(np.einsum("ij,ij->i", q, k)))


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    np.random.seed(seed)
    q = np.random.rand(n_samples, d_k)
    k = np.random.rand(n_samples, d_k)
    return float(np.var(np.sum(q * k, axis=-1)))


def dpv_same_vector(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q  # one draw reused
    return float(np.var((q * k).sum(-1)))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("sd,sd->s", q, k)))


def dpv_elementwise(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(q * k))


def dpv_torch(d_k, n_samples=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    dots = (q * k).sum(dim=1)
    return dots.var(unbiased=True).item()


def dpv_manual_moments(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.standard_normal((2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", pairs[0], pairs[1])
    mean = dots.sum() / n_samples
    return float(((dots - mean) ** 2).sum() / (n_samples - 1))


# ----------------------------------------------------------------------------- softmax_entropy
def ent_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(axis=axis)


def ent_ignores_axis(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=-1)


def ent_no_minus(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    return np.sum(scipy.special.xlogy(p, p), axis=axis)


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logs, axis=axis, keepdims=True)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.zeros_like(p)
    nz = p > 0
    terms[nz] = p[nz] * np.log(p[nz])
    return -terms.mean(axis=axis)


def ent_unweighted(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(logs, axis=axis)  # forgot to weight by p


def ent_normalised(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis) / np.log(p.shape[axis])


def ent_entr(weights, axis=-1):
    return scipy.special.entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def ent_moveaxis_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    out = np.zeros(p.shape[:-1])
    for idx in np.ndindex(*p.shape[:-1]):
        total = 0.0
        for value in p[idx]:
            if value > 0:
                total -= value * np.log(value)
        out[idx] = total
    return out[()]


# ----------------------------------------------------------------------------- softmax_jacobian
def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_inner_product(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - np.dot(p, p)


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_loop_offdiag_sign(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                J[i, j] = p[i] * (1 - p[i])
            else:
                J[i, j] = p[i] * p[j]
    return J


def jac_wrong_order(p):
    p = np.asarray(p, dtype=float)
    n = p.size
    return (np.eye(n) - p) @ np.diag(p)


def jac_diag_times(p):
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    return np.diag(p) @ (np.eye(n) - p[None, :])


def jac_loop_kronecker(p):
    p = np.asarray(p, dtype=np.float64)
    n = len(p)
    return np.array([[p[i] * ((1.0 if i == j else 0.0) - p[j]) for j in range(n)]
                     for i in range(n)])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled-dots", "Divides the dot products by sqrt(d_k) before taking the variance, so it returns about 1 instead of about d_k.", dpv_scaled),
    Entry("dot_product_variance", "wrong", "ignores-seed", "Creates the generator without the seed, so the same seed does not reproduce the same value.", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "uniform-samples", "Draws q and k with np.random.rand (uniform on [0, 1)) instead of standard normals.", dpv_uniform),
    Entry("dot_product_variance", "wrong", "k-equals-q", "Reuses the same draw for q and k, so it measures the variance of |q|^2 (about 2 d_k).", dpv_same_vector),
    Entry("dot_product_variance", "wrong", "std-not-var", "Returns the standard deviation of the dot products instead of their variance.", dpv_std),
    Entry("dot_product_variance", "wrong", "elementwise-variance", "Takes the variance of the element-wise products q_i k_i instead of their sums q . k.", dpv_elementwise),
    Entry("dot_product_variance", "right", "torch-generator", None, dpv_torch),
    Entry("dot_product_variance", "right", "manual-moments", None, dpv_manual_moments),
    Entry("softmax_entropy", "wrong", "log2-bits", "Uses log base 2, giving the entropy in bits instead of nats.", ent_log2),
    Entry("softmax_entropy", "wrong", "ignores-axis", "Ignores the axis argument and always sums over the last axis.", ent_ignores_axis),
    Entry("softmax_entropy", "wrong", "missing-minus", "Forgets the minus sign, returning sum p log p (negative entropy).", ent_no_minus),
    Entry("softmax_entropy", "wrong", "keepdims", "Sums with keepdims=True, so the result keeps a size-1 axis.", ent_keepdims),
    Entry("softmax_entropy", "wrong", "mean-not-sum", "Averages the p log p terms instead of summing them.", ent_mean),
    Entry("softmax_entropy", "wrong", "unweighted-log", "Sums -log p over the nonzero entries without weighting each term by p.", ent_unweighted),
    Entry("softmax_entropy", "wrong", "normalised-by-log-n", "Divides by log(n), returning the normalised entropy instead of the entropy in nats.", ent_normalised),
    Entry("softmax_entropy", "right", "scipy-entr", None, ent_entr),
    Entry("softmax_entropy", "right", "python-loop", None, ent_moveaxis_loop),
    Entry("softmax_jacobian", "wrong", "elementwise-square", "Subtracts p * p (an element-wise square broadcast over rows) instead of the outer product p p^T.", jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "inner-product", "Subtracts the inner product p . p (a scalar) instead of the outer product.", jac_inner_product),
    Entry("softmax_jacobian", "wrong", "sign-flipped", "Returns p p^T - diag(p), the negative of the Jacobian.", jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "offdiag-sign", "In the loop the off-diagonal entries are +p_i p_j instead of -p_i p_j.", jac_loop_offdiag_sign),
    Entry("softmax_jacobian", "wrong", "product-order", "Multiplies (I - 1 p^T) diag(p) in the wrong order, giving delta_ij p_j - p_j^2 instead of diag(p) - p p^T.", jac_wrong_order),
    Entry("softmax_jacobian", "right", "diag-times-projector", None, jac_diag_times),
    Entry("softmax_jacobian", "right", "kronecker-loop", None, jac_loop_kronecker),
]
