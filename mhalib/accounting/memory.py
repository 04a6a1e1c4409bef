"""Memory of the attention score matrix, the tensor that flash attention never stores.

Plain ints in and out. A naive implementation keeps the scores and the softmax weights
(two B x H x N_q x N_k tensors); a tiled one keeps one block of scores at a time.
"""

from __future__ import annotations

from mhalib.validate import positive_int


def score_matrix_bytes(
    seq_len: int,
    num_heads: int,
    batch_size: int = 1,
    bytes_per_element: int = 4,
    kv_len: int | None = None,
) -> int:
    """Bytes of one (B, H, N_q, N_k) score tensor; ``kv_len`` defaults to ``seq_len``."""
    n = positive_int("seq_len", seq_len)
    heads = positive_int("num_heads", num_heads)
    b = positive_int("batch_size", batch_size)
    size = positive_int("bytes_per_element", bytes_per_element)
    n_k = n if kv_len is None else positive_int("kv_len", kv_len)
    return b * heads * n * n_k * size


def naive_attention_extra_bytes(
    seq_len: int, num_heads: int, batch_size: int = 1, bytes_per_element: int = 4
) -> int:
    """Scores plus softmax weights, both materialised by ``softmax(q @ k.T) @ v``."""
    return 2 * score_matrix_bytes(seq_len, num_heads, batch_size, bytes_per_element)


def tiled_block_bytes(
    block_q: int,
    block_k: int,
    num_heads: int,
    batch_size: int = 1,
    bytes_per_element: int = 4,
) -> int:
    """Bytes of one block of scores in a tiled (flash) implementation; independent of N."""
    bq = positive_int("block_q", block_q)
    bk = positive_int("block_k", block_k)
    heads = positive_int("num_heads", num_heads)
    b = positive_int("batch_size", batch_size)
    size = positive_int("bytes_per_element", bytes_per_element)
    return b * heads * bq * bk * size
