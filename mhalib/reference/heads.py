"""Lesson 08 answer key: scores that find previous-token and induction heads (torch).

Both scores read a stack of attention patterns ``weights (H, N, N)`` (row ``i`` is the
distribution of query ``i`` over the keys) and average one diagonal of it:

- previous-token score: the weight query ``i`` puts on key ``i - 1``, over queries ``i >= 1``;
- induction score: on a sequence whose second half repeats its first (``N = 2 * period``),
  the weight query ``i`` (``i >= period``) puts on key ``i - period + 1``, the token that
  followed the earlier copy of token ``i``.

A head that does the job perfectly scores 1, a head that never does scores 0.
"""

from __future__ import annotations

import torch

from mhalib import validate


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """(H, N, N) attention weights -> (H,) mean weight on key ``i - 1`` over queries ``i >= 1``."""
    heads, n = _check_weights(weights)
    if n < 2:
        raise ValueError(f"weights must cover at least 2 positions, got weights.shape="
                         f"{tuple(weights.shape)}")
    on_previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # (H, N - 1): w[h, i, i-1]
    return on_previous.to(_accumulate_dtype(weights)).mean(dim=-1).to(weights.dtype)  # (H,)


def induction_score(weights: torch.Tensor, period: int) -> torch.Tensor:
    """(H, N, N) weights on a sequence that repeats after ``period`` tokens -> (H,).

    Mean over queries ``i`` in ``[period, 2 * period)`` of ``weights[h, i, i - period + 1]``.
    """
    heads, n = _check_weights(weights)
    period = validate.positive_int("period", period)
    if n != 2 * period:
        raise ValueError(f"weights must cover N = 2 * period positions: period={period} needs "
                         f"N={2 * period}, got weights.shape={tuple(weights.shape)}")
    # w[h, i, i - period + 1] lies on the diagonal at offset 1 - period; its entry number i'
    # belongs to query i' + period - 1, so queries i >= period are entries 1 .. period.
    diagonal = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)  # (H, period + 1)
    on_next_of_copy = diagonal[:, 1:]  # (H, period): queries period .. 2 * period - 1
    return on_next_of_copy.to(_accumulate_dtype(weights)).mean(dim=-1).to(weights.dtype)  # (H,)


def _check_weights(weights) -> tuple[int, int]:
    validate.tensor("weights", weights, 3, "(H, N, N)")
    heads, n_q, n_k = weights.shape
    if n_q != n_k:
        raise ValueError(f"weights must be square (H, N, N), got weights.shape="
                         f"{tuple(weights.shape)}")
    return heads, n_q


def _accumulate_dtype(weights: torch.Tensor) -> torch.dtype:
    """Average half-precision weights in float32; keep float32 and float64 as they are."""
    return torch.promote_types(weights.dtype, torch.float32)
