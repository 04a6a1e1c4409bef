"""Round m catalogue, lesson 03 (scaling, numpy):
dot_product_variance, softmax_entropy, softmax_jacobian."""

import math

import numpy as np
from scipy.special import entr

from entry import Entry


# ============================================================================ dot_product_variance
def var_scaled_dots(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=1) / np.sqrt(d_k)
    return float(dots.var())


def var_std_instead(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.std(np.einsum("sd,sd->s", q, k)))


def var_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal(size=(n_samples, d_k))
    k = rng.standard_normal(size=(n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=-1)))


def var_uniform_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))
    k = rng.random((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


def var_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)
    return float(np.var(dots))


def var_one_query(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(d_k)  # one query ...
    keys = rng.standard_normal((n_samples, d_k))  # ... against many keys
    return float(np.var(keys @ q))


def var_single_draw_unbiased(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    pairs = rng.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("nd,nd->n", pairs[0], pairs[1])
    return float(np.var(dots, ddof=1))


def var_manual_moments(d_k, n_samples=100_000, seed=0):
    gen = np.random.Generator(np.random.PCG64(seed))
    q = gen.standard_normal((n_samples, d_k), dtype=np.float64)
    k = gen.standard_normal((n_samples, d_k), dtype=np.float64)
    dots = np.sum(q * k, axis=1)
    mean = math.fsum(dots) / n_samples
    return math.fsum((dots - mean) ** 2) / n_samples


# ============================================================================ softmax_entropy
def entropy_log2(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_last_axis_always(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log(safe)).sum(-1)


def entropy_mean(weights, axis=-1):
    p = np.asarray(weights)
    safe = np.where(p > 0, p, 1.0)
    return -np.mean(p * np.log(safe), axis=axis)


def entropy_renormalise(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    p = p / p.sum(axis=axis, keepdims=True)  # make sure each row sums to 1
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def entropy_missing_minus(weights, axis=-1):
    p = np.asarray(weights)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return np.sum(plogp, axis=axis)


def entropy_keepdims(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis, keepdims=True)


def entropy_scipy_entr(weights, axis=-1):
    return entr(np.asarray(weights, dtype=np.float64)).sum(axis=axis)


def entropy_row_loops(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    out = np.empty(flat.shape[0])
    for r, row in enumerate(flat):
        out[r] = -math.fsum(w * math.log(w) for w in row if w > 0)
    return out.reshape(p.shape[:-1])[()]


# ============================================================================ softmax_jacobian
def jac_inner_product(p):
    p = np.asarray(p)
    return np.diag(p) - p @ p.T


def jac_plus_sign(p):
    p = np.asarray(p)
    return np.diag(p) + np.outer(p, p)


def jac_identity_diagonal(p):
    p = np.asarray(p)
    return np.eye(p.shape[0]) - np.outer(p, p)


def jac_broadcast_row(p):
    p = np.asarray(p)
    return np.diag(p) - p[None, :] * p[None, :]


def jac_softmax_of_p(p):
    p = np.asarray(p, dtype=float)
    s = np.exp(p - p.max())
    s = s / s.sum()
    return np.diag(s) - np.outer(s, s)


def jac_diag_bracket(p):
    p = np.asarray(p)
    return np.diag(p - np.outer(p, p))


def jac_loops(p):
    p = [float(v) for v in np.asarray(p)]
    n = len(p)
    rows = [[(p[i] if i == j else 0.0) - p[i] * p[j] for j in range(n)] for i in range(n)]
    return np.array(rows, dtype=np.float64).reshape(n, n)


def jac_factored(p):
    p = np.asarray(p)
    return p[:, None] * (np.eye(p.size, dtype=p.dtype) - p[None, :])


ENTRIES = [
    # dot_product_variance -------------------------------------------------------
    Entry("dot_product_variance", "wrong", "scaled_dot_products",
          "It divides each dot product by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance d_k.",
          var_scaled_dots),
    Entry("dot_product_variance", "wrong", "std_not_variance",
          "It returns np.std of the dot products, about sqrt(d_k), instead of their variance.",
          var_std_instead),
    Entry("dot_product_variance", "wrong", "generator_not_seeded",
          "It creates np.random.default_rng() without the seed, so two calls with the same "
          "seed return different numbers.",
          var_unseeded),
    Entry("dot_product_variance", "wrong", "uniform_draws",
          "rng.random draws uniform numbers in [0, 1), not standard normals, so the variance "
          "is about 7 d_k / 144 instead of d_k.",
          var_uniform_draws),
    Entry("dot_product_variance", "wrong", "sum_over_samples_axis",
          "It sums q*k over axis 0 (the samples) instead of axis 1 (the features), so it "
          "takes the variance of only d_k column sums of n_samples products (0 when d_k=1, "
          "about n_samples otherwise), not d_k.",
          var_sum_wrong_axis),
    Entry("dot_product_variance", "wrong", "one_query_many_keys",
          "It draws a single query and dots it with n_samples keys, which measures the "
          "conditional variance |q|^2 of that one query (off from d_k by about sqrt(2 d_k)) "
          "rather than the variance over independent pairs.",
          var_one_query),
    Entry("dot_product_variance", "right", "normal_pairs_ddof1", None, var_single_draw_unbiased),
    Entry("dot_product_variance", "right", "pcg64_fsum_moments", None, var_manual_moments),
    # softmax_entropy ------------------------------------------------------------
    Entry("softmax_entropy", "wrong", "bits_not_nats",
          "It uses np.log2, so the entropy is in bits instead of nats (too large by 1/ln 2).",
          entropy_log2),
    Entry("softmax_entropy", "wrong", "sum_over_last_axis_always",
          "It ignores `axis` and always sums over the last axis, so for axis=0 or -2 it "
          "returns the wrong values (and shape).",
          entropy_last_axis_always),
    Entry("softmax_entropy", "wrong", "mean_instead_of_sum",
          "It averages -p log p over the axis with np.mean instead of summing it, so the "
          "entropy is divided by the number of entries.",
          entropy_mean),
    Entry("softmax_entropy", "wrong", "renormalises_rows",
          "It renormalises each distribution by its sum first, so an all-zero row becomes "
          "0/0 = NaN instead of entropy 0.",
          entropy_renormalise),
    Entry("softmax_entropy", "wrong", "missing_minus_sign",
          "It returns sum p log p without the minus sign, so every entropy comes out negative.",
          entropy_missing_minus),
    Entry("softmax_entropy", "wrong", "keepdims_keeps_axis",
          "It sums with keepdims=True, so the reduced axis stays as length 1 instead of being "
          "removed from the result's shape.",
          entropy_keepdims),
    Entry("softmax_entropy", "right", "scipy_special_entr", None, entropy_scipy_entr),
    Entry("softmax_entropy", "right", "row_loops_fsum", None, entropy_row_loops),
    # softmax_jacobian -----------------------------------------------------------
    Entry("softmax_jacobian", "wrong", "p_at_p_T_is_inner_product",
          "For a 1-D array p.T is p itself, so p @ p.T is the scalar sum of p_i^2 and it is "
          "subtracted from every entry instead of the outer product p p^T.",
          jac_inner_product),
    Entry("softmax_jacobian", "wrong", "plus_outer_product",
          "It adds the outer product instead of subtracting it: diag(p) + p p^T.",
          jac_plus_sign),
    Entry("softmax_jacobian", "wrong", "identity_instead_of_diag_p",
          "It uses the identity matrix in place of diag(p), computing I - p p^T.",
          jac_identity_diagonal),
    Entry("softmax_jacobian", "wrong", "row_vector_squares",
          "p[None, :] * p[None, :] is a (1, n) row of squares p_j^2, broadcast down every row, "
          "instead of the outer product p_i p_j.",
          jac_broadcast_row),
    Entry("softmax_jacobian", "wrong", "softmax_applied_to_p",
          "It treats p as logits and applies softmax to it first, so the Jacobian is taken at "
          "softmax(p) instead of at the given probability vector p.",
          jac_softmax_of_p),
    Entry("softmax_jacobian", "wrong", "diag_bracket_misplaced",
          "The bracket is misplaced: np.diag(p - np.outer(p, p)) extracts the diagonal of a "
          "matrix, so it returns the vector p_i - p_i p_i of shape (n,) instead of an (n, n) "
          "matrix.",
          jac_diag_bracket),
    Entry("softmax_jacobian", "right", "nested_list_loops", None, jac_loops),
    Entry("softmax_jacobian", "right", "p_times_eye_minus_p", None, jac_factored),
]
