"""Round q, lesson 03 (scaling, numpy): dot_product_variance, softmax_entropy, softmax_jacobian.

Six wrong answers (one slip each) and two right answers (unusual routes) per exercise.
"""

import math

import numpy as np

from entry import Entry


# ============================================================================ dot_product_variance
def dpv_unseeded(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng()  # seed forgotten
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))


def dpv_scaled(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=-1) / np.sqrt(d_k)  # scaled, but the exercise wants raw q . k
    return float(dots.var())


def dpv_k_is_q(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.einsum("nd,nd->n", q, q)  # q with itself: should be q with k
    return float(np.var(dots))


def dpv_std(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    qs = rng.standard_normal((n_samples, d_k))
    ks = rng.standard_normal((n_samples, d_k))
    return float(np.std((qs * ks).sum(axis=1)))  # the standard deviation, not the variance


def dpv_uniform(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((n_samples, d_k))  # uniform on [0, 1), not N(0, 1)
    k = rng.random((n_samples, d_k))
    return float(np.var((q * k).sum(axis=1)))


def dpv_sum_wrong_axis(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = (q * k).sum(axis=0)  # sums over the samples, leaving d_k numbers
    return float(np.var(dots))


def dpv_one_draw_two_halves(d_k, n_samples=100_000, seed=0):
    gen = np.random.default_rng(seed)
    both = gen.normal(0.0, 1.0, size=(2, n_samples, d_k))
    dots = np.einsum("sd,sd->s", both[0], both[1])
    mean = math.fsum(dots) / n_samples
    return math.fsum((dots - mean) ** 2) / (n_samples - 1)  # unbiased estimate


def dpv_loop_over_dims(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((d_k, n_samples))
    k = rng.standard_normal((d_k, n_samples))
    dots = np.zeros(n_samples)
    for j in range(d_k):
        dots += q[j] * k[j]
    return float(np.mean(dots ** 2) - np.mean(dots) ** 2)


# ============================================================================ softmax_entropy
def ent_log2(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)  # bits, not nats
    return -np.sum(p * logs, axis=axis)


def ent_axis_hardcoded(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)  # `axis` argument ignored


def ent_keepdims(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis, keepdims=True)  # keeps the reduced axis


def ent_sum_everything(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs)  # no axis: one number for the whole array


def ent_softmax_again(weights, axis=-1):
    w = np.asarray(weights, dtype=float)
    e = np.exp(w - w.max(axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)  # treats the probabilities as logits
    return -np.sum(p * np.log(p), axis=axis)


def ent_mean(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.mean(p * logs, axis=axis)  # averages over the entries instead of summing


def ent_scipy_xlogy(weights, axis=-1):
    from scipy.special import entr

    return np.sum(entr(np.asarray(weights, dtype=np.float64)), axis=axis)


def ent_moveaxis_loop(weights, axis=-1):
    p = np.moveaxis(np.asarray(weights, dtype=np.float64), axis, -1)
    flat = p.reshape(-1, p.shape[-1])
    out = np.empty(flat.shape[0])
    for r, row in enumerate(flat):
        out[r] = -math.fsum(x * math.log(x) for x in row if x > 0)
    return out.reshape(p.shape[:-1])[()]  # [()] gives a scalar for a single distribution


# ============================================================================ softmax_jacobian
def jac_matmul_1d(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p @ p.T  # on a 1-D array this is the scalar p . p


def jac_elementwise_square(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p) - p * p  # broadcasts p_j^2 across rows instead of p_i p_j


def jac_sign_flipped(p):
    p = np.asarray(p, dtype=float)
    return np.outer(p, p) - np.diag(p)


def jac_diagonal_only(p):
    p = np.asarray(p, dtype=float)
    return np.diag(p * (1 - p))  # off-diagonal -p_i p_j terms dropped


def jac_loop_skips_first_row(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[0]
    jac = np.zeros((n, n))
    for i in range(1, n):  # row 0 never filled
        for j in range(n):
            jac[i, j] = (p[i] if i == j else 0.0) - p[i] * p[j]
    return jac


def jac_softmax_of_p(p):
    z = np.asarray(p, dtype=float)
    s = np.exp(z - z.max())
    s /= s.sum()  # softmax of p: p is already the probability vector
    return np.diag(s) - np.outer(s, s)


def jac_kronecker_loops(p):
    p = [float(v) for v in np.asarray(p)]
    n = len(p)
    return np.array([[p[i] * ((1.0 if i == j else 0.0) - p[j]) for j in range(n)]
                     for i in range(n)])


def jac_einsum_eye(p):
    p = np.asarray(p, dtype=np.float64)
    eye = np.eye(p.shape[0])
    return np.einsum("i,ij->ij", p, eye - p[None, :])


ENTRIES = [
    Entry("dot_product_variance", "wrong", "generator-not-seeded",
          "np.random.default_rng() is called without the seed, so two calls with the same "
          "seed give different numbers.", dpv_unseeded),
    Entry("dot_product_variance", "wrong", "scaled-dot-products",
          "It divides the dot products by sqrt(d_k) before taking the variance, so it returns "
          "about 1 instead of the unscaled variance d_k.", dpv_scaled),
    Entry("dot_product_variance", "wrong", "q-dot-q",
          "The dot product takes q with itself (q . q, a chi-square with variance 2 d_k) "
          "instead of q with k.", dpv_k_is_q),
    Entry("dot_product_variance", "wrong", "std-not-var",
          "It returns np.std, the standard deviation (about sqrt(d_k)), instead of np.var.",
          dpv_std),
    Entry("dot_product_variance", "wrong", "uniform-samples",
          "rng.random draws uniform numbers on [0, 1) instead of standard normals, so the "
          "variance is 7 d_k / 144 instead of d_k.", dpv_uniform),
    Entry("dot_product_variance", "wrong", "sum-over-samples",
          "The products are summed over axis 0, the samples, instead of over the d_k features, "
          "so it takes the variance of d_k huge sums instead of n_samples dot products.",
          dpv_sum_wrong_axis),
    Entry("dot_product_variance", "right", "one-draw-unbiased-fsum", None,
          dpv_one_draw_two_halves),
    Entry("dot_product_variance", "right", "loop-over-dims-moments", None, dpv_loop_over_dims),

    Entry("softmax_entropy", "wrong", "log2-bits",
          "It uses np.log2, so the entropy comes out in bits instead of nats.", ent_log2),
    Entry("softmax_entropy", "wrong", "axis-ignored",
          "The sum is always along the last axis (axis=-1 hard-coded), ignoring the `axis` "
          "argument.", ent_axis_hardcoded),
    Entry("softmax_entropy", "wrong", "keepdims",
          "It sums with keepdims=True, so the reduced axis stays as length 1 instead of being "
          "removed.", ent_keepdims),
    Entry("softmax_entropy", "wrong", "sum-without-axis",
          "np.sum is called without axis, so it adds the entropies of all distributions into "
          "one number.", ent_sum_everything),
    Entry("softmax_entropy", "wrong", "softmax-of-weights",
          "It applies softmax to the weights before taking the entropy, treating the "
          "probabilities as logits.", ent_softmax_again),
    Entry("softmax_entropy", "wrong", "mean-not-sum",
          "It averages -p log p over the entries (np.mean) instead of summing, dividing the "
          "entropy by the length of the axis.", ent_mean),
    Entry("softmax_entropy", "right", "scipy-entr", None, ent_scipy_xlogy),
    Entry("softmax_entropy", "right", "moveaxis-fsum-loop", None, ent_moveaxis_loop),

    Entry("softmax_jacobian", "wrong", "matmul-of-1d-is-scalar",
          "p @ p.T on a 1-D array is the scalar dot product p . p (.T does nothing to a "
          "vector), so it subtracts one number everywhere instead of the outer product.",
          jac_matmul_1d),
    Entry("softmax_jacobian", "wrong", "elementwise-square",
          "p * p is the elementwise square, which broadcasts p_j^2 along every row instead of "
          "the outer product p_i p_j.", jac_elementwise_square),
    Entry("softmax_jacobian", "wrong", "sign-flipped",
          "The two terms are subtracted the wrong way round: p p^T - diag(p).",
          jac_sign_flipped),
    Entry("softmax_jacobian", "wrong", "diagonal-only",
          "Only the diagonal p_i (1 - p_i) is returned; the off-diagonal entries -p_i p_j are "
          "missing.", jac_diagonal_only),
    Entry("softmax_jacobian", "wrong", "loop-skips-row-0",
          "The row loop starts at 1 (range(1, n)), so row 0 of the Jacobian stays zero.",
          jac_loop_skips_first_row),
    Entry("softmax_jacobian", "wrong", "softmax-of-p",
          "It applies softmax to p first, treating the probability vector as logits, and "
          "returns the Jacobian at softmax(p) instead of at p.", jac_softmax_of_p),
    Entry("softmax_jacobian", "right", "kronecker-loops", None, jac_kronecker_loops),
    Entry("softmax_jacobian", "right", "einsum-eye-minus-p", None, jac_einsum_eye),
]
