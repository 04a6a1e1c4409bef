"""Hints of lesson 03 (why divide by sqrt(d_k)): ``dot_product_variance``,
``softmax_entropy`` and ``softmax_jacobian``."""

HINTS: dict[str, tuple[str, ...]] = {
    "dot_product_variance": (
        "Draw every number from the generator `rng` itself (its methods, such as "
        "`rng.standard_normal` or `rng.normal`), never from `np.random.randn` or "
        "`np.random.normal`: those ignore `seed`, and the graded test checks that the same "
        "seed gives the same number. Then one dot product per pair, and the variance of those "
        "`n_samples` numbers.",

        "Draw all the pairs at once, as two arrays of shape (n_samples, d_k). The dot product "
        "of row i with row i is the sum over the last axis of their elementwise product: "
        "`n_samples` numbers. (`q @ k.T` would compute every row against every row, an "
        "(n_samples, n_samples) matrix: far too big.)",

        "Return the variance, not the standard deviation, of the unscaled dot products, as a "
        "float. It should come out close to d_k: about 64 for d_k = 64.",

        "`rng = np.random.default_rng(seed)`; `q = rng.standard_normal((n_samples, d_k))` and "
        "`k` the same way; `return float(np.var(np.sum(q * k, axis=1)))`.",
    ),
    "softmax_entropy": (
        "Each weight p contributes -p log p with the natural log, and the contributions are "
        "added up along `axis` (a sum, not a mean), which removes that axis. Check: a uniform "
        "row of 4 weights has entropy log 4 = 1.386...",

        "The one trap is p = 0: `np.log(0.0)` is `-inf` (with a warning) and `0 * -inf` is "
        "`nan`. A zero weight must contribute 0, so take the log of a harmless stand-in where "
        "p is 0: any positive number works, since its log is then multiplied by p = 0.",

        "`safe = np.where(p > 0, p, 1.0)` (log 1 = 0), then "
        "`return -np.sum(p * np.log(safe), axis=axis)`, with `p = np.asarray(weights)`.",
    ),
    "softmax_jacobian": (
        "The result is one n x n matrix minus another: the first has p on its diagonal and "
        "zeros elsewhere, the second has p_i * p_j in row i, column j.",

        "For a 1-D `p`, `p.T` is `p` itself, so `p @ p.T` is a number (the dot product), not "
        "a matrix. Check on p = [0.5, 0.3, 0.2]: the Jacobian is [[0.25, -0.15, -0.1], "
        "[-0.15, 0.21, -0.06], [-0.1, -0.06, 0.16]]. In general the matrix is symmetric and "
        "each of its rows sums to 0 (the weights always sum to 1, so moving the scores cannot "
        "change their total).",

        "`np.diag(p)` builds the diagonal matrix from a vector and `np.outer(p, p)` the matrix "
        "of products: `return np.diag(p) - np.outer(p, p)`.",
    ),
}
