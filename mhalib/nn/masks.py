"""Boolean attention masks for the torch modules (True = may attend, SDPA's convention).

Masks broadcast to (B, H, N_q, N_k). Causal masks are aligned bottom-right: with
``n_q`` new queries and ``n_k`` keys, query ``i`` sits at absolute position
``i + n_k - n_q``, which is what decoding with a KV cache needs.
"""

from __future__ import annotations

import torch

from mhalib import validate


def causal_mask(n_q: int, n_k: int | None = None, device=None) -> torch.Tensor:
    """Bool (n_q, n_k): query i may attend key j when j <= i + n_k - n_q."""
    n_q = validate.positive_int("n_q", n_q)
    n_k = n_q if n_k is None else validate.positive_int("n_k", n_k)
    allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=device)  # (n_q, n_k)
    return allowed.tril(diagonal=n_k - n_q)  # (n_q, n_k)


def padding_mask(lengths, n: int, device=None) -> torch.Tensor:
    """lengths (B,) ints -> bool (B, 1, 1, n), True where key position j < lengths[b]."""
    n = validate.positive_int("n", n)
    lengths = torch.as_tensor(lengths, device=device)
    if lengths.dim() != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise TypeError(
            f"lengths must be a 1-D tensor of ints, got lengths.dtype={lengths.dtype} "
            f"lengths.shape={tuple(lengths.shape)}"
        )
    if bool((lengths < 0).any()) or bool((lengths > n).any()):
        raise ValueError(f"lengths must lie in [0, n={n}], got lengths={lengths.tolist()}")
    positions = torch.arange(n, device=lengths.device)  # (n,)
    keep = positions[None, :] < lengths[:, None]  # (B, n)
    return keep[:, None, None, :]  # (B, 1, 1, n)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of the given masks (``None`` entries are skipped); ``None`` if all are."""
    present = [m for m in masks if m is not None]
    if not present:
        return None
    combined = present[0]
    for mask in present[1:]:
        combined = combined & mask  # broadcasts to the union of the shapes
    return combined
