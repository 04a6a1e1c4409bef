"""FLOPs and saved bytes of attention's backward pass (lesson 12 answer key and its numbers).

Conventions as in :mod:`mhalib.accounting.flops`: one multiply-add counts as 2 FLOPs, only
matrix products count, attention is dense (no causal saving). One head, one sequence of
``N`` queries and ``N`` keys of width ``d``:

- forward: ``s = q k^T`` and ``out = p v``, two products, 4 N^2 d;
- backward: ``grad_v = p^T grad_out``, ``grad_p = grad_out v^T``, ``grad_q = grad_s k`` and
  ``grad_k = grad_s^T q``, four products, 8 N^2 d (2x the forward);
- FlashAttention stores no ``p`` and recomputes ``s = q k^T`` in the backward: 2 N^2 d more,
  10 N^2 d (2.5x the forward, the ratio FlashAttention-2's paper gives).

What the backward needs from the forward (the attention core alone, beyond q, k and v, which
both keep): the naive path keeps the probabilities ``p`` (B, H, N_q, N_k); FlashAttention keeps
``out`` (B, H, N_q, d) and the log-sum-exp (B, H, N_q), stored in float32 whatever the inputs'
dtype. Plain ints in and out; the measurements that check these numbers are in
:mod:`mhalib.accounting.saved_tensors` and the tests.
"""

from __future__ import annotations

from mhalib.validate import boolean, positive_int

LSE_BYTES = 4  # the log-sum-exp is kept in float32 (FlashAttention-2, PyTorch's CPU kernel)


def attention_forward_flops(seq_len: int, head_dim: int) -> int:
    """FLOPs of one head's attention forward for one sequence: q k^T and p v, 4 N^2 d."""
    n = positive_int("seq_len", seq_len)
    d = positive_int("head_dim", head_dim)
    return 2 * (2 * n * n * d)


def attention_backward_flops(seq_len: int, head_dim: int, recompute: bool = True) -> int:
    """FLOPs of one head's attention backward for one sequence of ``seq_len`` queries and keys.

    Four products of 2 N^2 d each (grad_v, grad_p, grad_q, grad_k): 8 N^2 d; with
    ``recompute=True`` (FlashAttention keeps no p) the scores q k^T are computed again,
    2 N^2 d more: 10 N^2 d. Against the forward's 4 N^2 d: 2x, or 2.5x with recompute.
    """
    n = positive_int("seq_len", seq_len)
    d = positive_int("head_dim", head_dim)
    boolean("recompute", recompute)
    products = 4 + (1 if recompute else 0)  # each an (N, N, d) product of 2 N^2 d FLOPs
    return products * 2 * n * n * d


def naive_core_saved_bytes(seq_len: int, num_heads: int, batch_size: int = 1,
                           bytes_per_element: int = 2) -> int:
    """Bytes the naive attention core keeps for backward beyond q, k and v: the
    probabilities p, B x H x N x N values."""
    n = positive_int("seq_len", seq_len)
    heads = positive_int("num_heads", num_heads)
    b = positive_int("batch_size", batch_size)
    size = positive_int("bytes_per_element", bytes_per_element)
    return b * heads * n * n * size


def flash_core_saved_bytes(seq_len: int, num_heads: int, head_dim: int, batch_size: int = 1,
                           bytes_per_element: int = 2) -> int:
    """Bytes a FlashAttention core keeps for backward beyond q, k and v: out (B, H, N, d) in
    the inputs' dtype and the log-sum-exp (B, H, N) in float32."""
    n = positive_int("seq_len", seq_len)
    heads = positive_int("num_heads", num_heads)
    d = positive_int("head_dim", head_dim)
    b = positive_int("batch_size", batch_size)
    size = positive_int("bytes_per_element", bytes_per_element)
    return b * heads * n * (d * size + LSE_BYTES)
