"""Held-out learners' answers, lesson 03 (dot_product_variance, softmax_entropy,
softmax_jacobian). Numpy; no mhalib."""

import math

import numpy as np

from entry import Entry

# ============================================================================ dot_product_variance


def dpv_scaled_dots(d_k, n_samples=100_000, seed=0):
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


def dpv_std(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    qs = gen.standard_normal(size=(n_samples, d_k))
    ks = gen.standard_normal(size=(n_samples, d_k))
    products = np.sum(qs * ks, axis=-1)
    return float(np.std(products))


def dpv_q_dot_q(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.einsum("sd,sd->s", q, q)
    return float(np.var(dots))


def dpv_sum_over_samples(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=0)
    return float(np.var(dots))


def dpv_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_one_draw_manual_var(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.standard_normal((2, n_samples, d_k))
    dots = (pairs[0] * pairs[1]).sum(axis=1)
    centred = dots - dots.mean()
    return float(centred @ centred / (n_samples - 1))


def dpv_torch_generator(d_k, n_samples=100_000, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, generator=g, dtype=torch.float64)
    return torch.var((q * k).sum(dim=1), unbiased=False).item()


# ============================================================================ softmax_entropy


def entropy_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log2(safe), axis=axis)


def entropy_sum_last_axis(weights, axis=-1):
    p = np.asarray(weights)
    terms = np.zeros_like(p)
    pos = p > 0
    terms[pos] = p[pos] * np.log(p[pos])
    return -terms.sum(axis=-1)


def entropy_sign_dropped(weights, axis=-1):
    w = np.asarray(weights)
    logw = np.log(w, out=np.zeros_like(w), where=w > 0)
    return np.sum(w * logw, axis=axis)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    return -np.mean(plogp, axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    ln = np.log(np.where(p > 0, p, 1))
    return -(p * ln).sum(axis=axis, keepdims=True)


def entropy_softmax_first(weights, axis=-1):
    w = np.asarray(weights)
    e = np.exp(w - w.max(axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)
    return -np.sum(p * np.log(p), axis=axis)


def entropy_scipy_entr(weights, axis=-1):
    from scipy.special import entr

    return np.sum(entr(np.asarray(weights)), axis=axis)


def entropy_python_loop(weights, axis=-1):
    arr = np.asarray(weights)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    vals = []
    for row in flat:
        h = 0.0
        for pi in row:
            pi = float(pi)
            if pi > 0.0:
                h -= pi * math.log(pi)
        vals.append(h)
    out = np.array(vals).reshape(moved.shape[:-1])
    if out.ndim == 0:
        return float(out)
    return out


# ============================================================================ softmax_jacobian


def jac_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p


def jac_sign_flipped(p):
    p = np.asarray(p)
    return np.outer(p, p) - np.diag(p)


def jac_identity(p):
    p = np.asarray(p)
    n = p.shape[0]
    return np.eye(n) - np.outer(p, p)


def jac_diagonal_only(p):
    p = np.asarray(p)
    return np.diag(p * (1 - p))


def jac_lower_triangle_loop(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] = p[i] - p[i] * p[i]
        for j in range(i):
            J[i, j] = -p[i] * p[j]
    return J


def jac_factored(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size, dtype=p.dtype) - p[None, :])


def jac_kronecker_loops(p):
    vals = [float(v) for v in np.asarray(p)]
    n = len(vals)
    rows = [[vals[i] * ((1.0 if i == j else 0.0) - vals[j]) for j in range(n)]
            for i in range(n)]
    return np.array(rows, dtype=np.float64)


ENTRIES = [
    Entry("dot_product_variance", "wrong", "scaled_by_sqrt_dk",
          "divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance d_k",
          dpv_scaled_dots),
    Entry("dot_product_variance", "wrong", "seed_ignored",
          "the generator is created without the seed, so two calls with the same seed give "
          "different numbers",
          dpv_unseeded),
    Entry("dot_product_variance", "wrong", "std_not_var",
          "returns np.std of the dot products (about sqrt(d_k)) instead of their variance",
          dpv_std),
    Entry("dot_product_variance", "wrong", "q_dot_q",
          "takes the dot product of q with itself (q . q, variance 2 d_k) instead of q . k",
          dpv_q_dot_q),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "sums q * k over axis 0 (the samples) instead of axis 1 (the features), so it "
          "returns the variance of only d_k numbers (0 when d_k = 1, about n_samples otherwise)",
          dpv_sum_over_samples),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "rng.random draws uniform numbers on [0, 1), not N(0, 1), so the variance is about "
          "7 d_k / 144 instead of d_k",
          dpv_uniform_draws),
    Entry("dot_product_variance", "right", "single_draw_manual_variance", None,
          dpv_one_draw_manual_var),
    Entry("dot_product_variance", "right", "torch_generator", None, dpv_torch_generator),

    Entry("softmax_entropy", "wrong", "log2_bits",
          "uses np.log2, so the entropy is in bits instead of nats",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "sum_over_last_axis",
          "always sums over the last axis instead of `axis`",
          entropy_sum_last_axis),
    Entry("softmax_entropy", "wrong", "minus_sign_dropped",
          "drops the minus sign: returns sum p log p, which is <= 0, instead of the entropy",
          entropy_sign_dropped),
    Entry("softmax_entropy", "wrong", "mean_not_sum",
          "averages p log p over the axis (np.mean) instead of summing, so the entropy is "
          "divided by the number of entries",
          entropy_mean),
    Entry("softmax_entropy", "wrong", "keepdims_kept",
          "sums with keepdims=True, so the reduced axis stays as length 1 instead of being "
          "removed",
          entropy_keepdims),
    Entry("softmax_entropy", "wrong", "softmax_applied_to_weights",
          "treats the weights as logits and takes a softmax of them first, so it returns the "
          "entropy of a different distribution",
          entropy_softmax_first),
    Entry("softmax_entropy", "right", "scipy_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "python_loop_math_log", None, entropy_python_loop),

    Entry("softmax_jacobian", "wrong", "inner_product",
          "`p @ p` is the scalar inner product, not the outer product p p^T, so the same "
          "number is subtracted from every entry",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "elementwise_square_broadcast",
          "subtracts `p * p` (a vector, broadcast along the rows) instead of the outer product "
          "np.outer(p, p)",
          jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "sign_flipped",
          "computes p p^T - diag(p), the negative of the Jacobian",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "identity_for_diag",
          "uses the identity matrix where diag(p) belongs",
          jac_identity),
    Entry("softmax_jacobian", "wrong", "diagonal_only",
          "keeps only the diagonal p_i (1 - p_i), as for a sigmoid, and leaves out the "
          "off-diagonal terms -p_i p_j",
          jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "lower_triangle_only",
          "the inner loop runs over j < i only, so the upper triangle of the symmetric "
          "Jacobian stays 0",
          jac_lower_triangle_loop),
    Entry("softmax_jacobian", "right", "factored_closed_form", None, jac_factored),
    Entry("softmax_jacobian", "right", "kronecker_loops", None, jac_kronecker_loops),
]
