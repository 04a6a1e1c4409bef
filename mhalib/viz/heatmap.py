"""The attention heatmap every lesson uses: queries down the side, keys along the top."""

from __future__ import annotations

import numpy as np


def as_matrix(weights) -> np.ndarray:
    """A 2-D float numpy array from a numpy array or a torch tensor of shape (N_q, N_k)."""
    if hasattr(weights, "detach"):  # torch.Tensor, without importing torch
        weights = weights.detach().cpu().float().numpy()
    array = np.asarray(weights, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"weights must have shape (N_q, N_k), got shape {array.shape}; "
                         "pick one batch element and head first, e.g. weights[0, h]")
    return array


def _labels(tokens, n_q: int, n_k: int) -> tuple[list[str] | None, list[str] | None]:
    """Query and key labels. ``tokens`` is one list (keys; the queries are its last n_q
    entries, as with a KV cache) or a pair (query_tokens, key_tokens)."""
    if tokens is None:
        return None, None
    if isinstance(tokens, tuple) and len(tokens) == 2 and not isinstance(tokens[0], str):
        query_tokens, key_tokens = (list(map(str, t)) for t in tokens)
    else:
        key_tokens = list(map(str, tokens))
        query_tokens = key_tokens[len(key_tokens) - n_q:]
    if len(key_tokens) != n_k or len(query_tokens) != n_q:
        raise ValueError(f"tokens give {len(query_tokens)} query and {len(key_tokens)} key "
                         f"labels for weights of shape ({n_q}, {n_k})")
    return query_tokens, key_tokens


def plot_attention(weights, ax=None, title=None, tokens=None, annotate=None, vmax=None):
    """Draw attention weights ``(N_q, N_k)`` as a heatmap and return the matplotlib Axes.

    Row ``i`` is query ``i``, column ``j`` is key ``j``, so each row of a softmax sums to 1.
    ``tokens`` labels the axes: one list for the keys (queries are its last N_q entries) or a
    pair ``(query_tokens, key_tokens)``. Cells are annotated with their value when the matrix is
    small (``annotate=None``: at most 12 x 12). The colour scale runs from 0 to ``vmax``
    (default 1, or the largest weight if it exceeds 1).
    """
    import matplotlib.pyplot as plt

    matrix = as_matrix(weights)  # (N_q, N_k)
    n_q, n_k = matrix.shape
    query_tokens, key_tokens = _labels(tokens, n_q, n_k)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 + 0.45 * n_k, 1.0 + 0.45 * n_q), layout="constrained")
    finite = matrix[np.isfinite(matrix)]
    top = vmax if vmax is not None else max(1.0, float(finite.max()) if finite.size else 1.0)
    image = ax.imshow(matrix, cmap="Blues", vmin=0.0, vmax=top, aspect="auto")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
    ax.set_xticks(range(n_k), key_tokens if key_tokens else range(n_k),
                  rotation=90 if key_tokens else 0)
    ax.set_yticks(range(n_q), query_tokens if query_tokens else range(n_q))
    if annotate is None:
        annotate = n_q <= 12 and n_k <= 12
    if annotate:
        for (i, j), value in np.ndenumerate(matrix):
            colour = "white" if value > 0.6 * top else "black"
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color=colour)
    if title:
        ax.set_title(title)
    return ax
