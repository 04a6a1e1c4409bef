"""FLOPs of an attention layer's forward pass (lesson 05 answer key and GQA/decoding variants).

Conventions: one multiply-add counts as 2 FLOPs; only matrix products are counted
(softmax, scaling and bias adds are lower order); attention is dense (a causal kernel can
skip about half of the two N^2 terms, see ``causal=True`` in :func:`gqa_flops`).
All functions take and return plain Python ints.
"""

from __future__ import annotations

from mhalib.validate import boolean, divisible, positive_int

KEYS = ("qkv_projections", "scores", "weighted_sum", "output_projection", "total")


def mha_flops(seq_len: int, d_model: int) -> dict[str, int]:
    """FLOPs of one multi-head attention forward pass over one sequence of ``seq_len`` tokens.

    qkv_projections 6 N d^2, scores 2 N^2 d, weighted_sum 2 N^2 d, output_projection
    2 N d^2, total 8 N d^2 + 4 N^2 d. The number of heads does not appear: H heads of
    size d/H do the same work as one head of size d.
    """
    n = positive_int("seq_len", seq_len)
    d = positive_int("d_model", d_model)
    parts = {
        "qkv_projections": 3 * 2 * n * d * d,  # three (N, d) @ (d, d) products
        "scores": 2 * n * n * d,  # H heads of (N, d/H) @ (d/H, N)
        "weighted_sum": 2 * n * n * d,  # H heads of (N, N) @ (N, d/H)
        "output_projection": 2 * n * d * d,  # (N, d) @ (d, d)
    }
    parts["total"] = sum(parts.values())
    return parts


def crossover_seq_len(d_model: int) -> int:
    """The N where the N^2 terms (4 N^2 d) equal the projections (8 N d^2): N = 2 d_model."""
    return 2 * positive_int("d_model", d_model)


def gqa_flops(
    seq_len: int,
    d_model: int,
    num_heads: int,
    num_kv_heads: int,
    kv_len: int | None = None,
    batch_size: int = 1,
    causal: bool = False,
) -> dict[str, int]:
    """FLOPs of a grouped-query attention forward pass, keys as in :func:`mha_flops`.

    ``seq_len`` new queries attend ``kv_len`` keys (default ``seq_len``; with a KV cache
    kv_len counts the cached tokens too, while only the ``seq_len`` new tokens are
    projected). ``causal=True`` counts only the visible (query, key) pairs, as a kernel
    that skips masked work would do.
    """
    n = positive_int("seq_len", seq_len)
    d = positive_int("d_model", d_model)
    heads = positive_int("num_heads", num_heads)
    kv_heads = positive_int("num_kv_heads", num_kv_heads)
    n_k = n if kv_len is None else positive_int("kv_len", kv_len)
    b = positive_int("batch_size", batch_size)
    boolean("causal", causal)
    divisible("d_model", d, "num_heads", heads)
    divisible("num_heads", heads, "num_kv_heads", kv_heads)
    if n_k < n:
        raise ValueError(f"kv_len={n_k} must be at least seq_len={n} (keys include the new tokens)")
    kv_width = kv_heads * (d // heads)
    pairs = visible_pairs(n, n_k) if causal else n * n_k  # (query, key) products computed
    parts = {
        "qkv_projections": b * 2 * n * d * (d + 2 * kv_width),
        "scores": b * 2 * pairs * d,
        "weighted_sum": b * 2 * pairs * d,
        "output_projection": b * 2 * n * d * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def visible_pairs(n_q: int, n_k: int) -> int:
    """(query, key) pairs a bottom-right causal mask allows: sum over i of (i + n_k - n_q + 1)."""
    n_q = positive_int("n_q", n_q)
    n_k = positive_int("n_k", n_k)
    if n_k >= n_q:  # query i sees i + (n_k - n_q) + 1 keys
        return n_q * (n_k - n_q + 1) + n_q * (n_q - 1) // 2
    return n_k * (n_k + 1) // 2  # the first n_q - n_k queries see nothing, then 1, 2, ...


def decode_flops(
    seq_len: int, d_model: int, num_heads: int, num_kv_heads: int, batch_size: int = 1
) -> dict[str, int]:
    """FLOPs of generating ``seq_len`` tokens one at a time with a KV cache.

    Step t (1-based) projects one token and attends t cached keys, so the projections are
    linear in N and the attention terms total 2 d N (N + 1) each.
    """
    n = positive_int("seq_len", seq_len)
    totals = dict.fromkeys(KEYS, 0)
    for step in range(1, n + 1):
        one = gqa_flops(1, d_model, num_heads, num_kv_heads, kv_len=step, batch_size=batch_size)
        for key in KEYS:
            totals[key] += one[key]
    return totals


def recompute_decode_flops(
    seq_len: int, d_model: int, num_heads: int, num_kv_heads: int, batch_size: int = 1
) -> dict[str, int]:
    """FLOPs of generating ``seq_len`` tokens without a cache: step t reruns the causal
    layer on all t tokens (only the last output is kept). Projections grow as N^2 and the
    attention terms as N^3: the reason every decoder keeps a KV cache."""
    n = positive_int("seq_len", seq_len)
    totals = dict.fromkeys(KEYS, 0)
    for step in range(1, n + 1):
        one = gqa_flops(step, d_model, num_heads, num_kv_heads, batch_size=batch_size)
        for key in KEYS:
            totals[key] += one[key]
    return totals
