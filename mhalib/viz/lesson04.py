"""Lesson 04 pictures: masks (True = may attend) and what they do to the attention weights.

The example masks are fixed pictures over eight keys, built here so that the mask picker works
before the learner's exercises do.
"""

from __future__ import annotations

import numpy as np

from mhalib.viz.explorer import figure_explorer
from mhalib.viz.heatmap import plot_attention

N = 8


def _example_masks() -> dict[str, np.ndarray]:
    causal = np.tri(N, N, dtype=bool)  # (8, 8): key j <= query i
    cache = np.tri(3, N, k=N - 3, dtype=bool)  # (3, 8): the last 3 positions, bottom-right
    padding = np.broadcast_to(np.arange(N) < 5, (N, N))  # (8, 8): keys 5, 6, 7 are padding
    positions = np.arange(N)
    window = causal & (positions[None, :] > positions[:, None] - 3)  # the last 3 keys
    return {
        "causal": causal,
        "causal, 3 new queries over 8 keys": cache,
        "padding (a sequence of length 5 padded to 8)": padding,
        "causal + padding": causal & padding,
        "sliding window of 3, causal": window,
        "no mask": np.ones((N, N), dtype=bool),
    }


MASKS = _example_masks()


def plot_mask(mask, ax=None, title=None, tokens=None):
    """Draw a boolean mask (N_q, N_k): dark cells may attend, pale cells are masked."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 2:
        raise ValueError(f"mask must have shape (N_q, N_k), got shape {mask.shape}")
    n_q, n_k = mask.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(1 + 0.4 * n_k, 0.8 + 0.4 * n_q), layout="constrained")
    ax.imshow(mask, cmap=ListedColormap(["#f1efe8", "#1f5fa8"]), vmin=0, vmax=1)
    ax.set_xticks(range(n_k), tokens if tokens else range(n_k))
    first = n_k - n_q  # queries are the last n_q positions
    ax.set_yticks(range(n_q), tokens[first:] if tokens else range(first, n_k))
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def example_weights(mask: np.ndarray, seed: int = 0) -> np.ndarray:
    """Weights of random scores under ``mask`` (rows with no allowed key are 0)."""
    rng = np.random.default_rng(seed)
    scores = np.where(mask, rng.normal(size=mask.shape), -np.inf)  # (N_q, N_k)
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def mask_figure(kind: str):
    """A mask next to the attention weights it allows."""
    import matplotlib.pyplot as plt

    mask = MASKS[kind]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    plot_mask(mask, ax=left, title=f"mask: {kind}")
    plot_attention(example_weights(mask), ax=right, title="weights of random scores",
                   annotate=False)
    first = mask.shape[1] - mask.shape[0]
    right.set_yticks(range(mask.shape[0]), range(first, mask.shape[1]))
    return fig


def mask_explorer(kind: str = "causal"):
    """A "mask" picker (Dropdown) that redraws :func:`mask_figure`.

    Returns the widget box with ``box.picker``, ``box.output`` and ``box.redraws``.
    """
    import ipywidgets as widgets

    picker = widgets.Dropdown(options=list(MASKS), value=kind, description="mask",
                              layout=widgets.Layout(width="480px"))
    picker.add_class("mhalib-mask-picker")
    return figure_explorer(lambda: mask_figure(picker.value), picker=picker)
