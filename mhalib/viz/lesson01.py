"""Lesson 01 pictures: a toy sentence to attend over and the d_k slider that shows why we scale.

The small softmax here serves the pictures only (one row of scores at a time); the lesson's
exercise is the learner's own.
"""

from __future__ import annotations

import numpy as np

from mhalib.viz.explorer import figure_explorer

TOY_TOKENS = ("the", "cat", "sat", "on", "the", "mat")


def toy_sentence(d_model: int = 16, seed: int = 3) -> tuple[list[str], np.ndarray]:
    """Tokens of a six-word sentence and made-up embeddings x of shape (N, d_model).

    Equal words share one vector, so in self-attention (q = k = v = x) the two "the" tokens
    find each other; every other token mostly attends to itself.
    """
    rng = np.random.default_rng(seed)
    vocabulary = sorted(set(TOY_TOKENS))
    table = {word: rng.normal(size=d_model) for word in vocabulary}  # word -> (d_model,)
    x = np.stack([table[word] for word in TOY_TOKENS])  # (N, d_model)
    return list(TOY_TOKENS), x


def _row_weights(scores: np.ndarray) -> np.ndarray:
    """Weights of one row of scores (N_k,)."""
    e = np.exp(scores - scores.max())
    return e / e.sum()


def scale_scores(d_k: int, n_keys: int = 12, seed: int = 0) -> np.ndarray:
    """q . k_j for one query and ``n_keys`` keys with N(0, 1) entries in d_k dimensions."""
    rng = np.random.default_rng([seed, d_k])
    q = rng.normal(size=d_k)  # (d_k,)
    keys = rng.normal(size=(n_keys, d_k))  # (n_keys, d_k)
    return keys @ q  # (n_keys,)


def scale_figure(d_k: int, n_keys: int = 12, seed: int = 0):
    """Two bar charts of one query's weights over ``n_keys`` keys: unscaled and 1/sqrt(d_k)."""
    import matplotlib.pyplot as plt

    scores = scale_scores(d_k, n_keys, seed)  # (n_keys,)
    panels = [("softmax(q . k)", _row_weights(scores), "#b3261e"),
              ("softmax(q . k / sqrt(d_k))", _row_weights(scores / np.sqrt(d_k)), "#1f5fa8")]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3), sharey=True, layout="constrained")
    for ax, (label, weights, colour) in zip(axes, panels):
        ax.bar(range(n_keys), weights, color=colour)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("key j")
        ax.set_title(f"{label}\nlargest weight {weights.max():.2f}", fontsize=10)
    axes[0].set_ylabel("weight")
    # one query's scores are a small sample: their std wanders around sqrt(d_k) and 1
    fig.suptitle(f"d_k = {d_k}: these {n_keys} scores have std {scores.std():.2f} before scaling, "
                 f"{(scores / np.sqrt(d_k)).std():.2f} after\n(over many draws: "
                 f"sqrt(d_k) = {np.sqrt(d_k):.1f} before, 1 after)", fontsize=11)
    return fig


def scale_explorer(d_k: int = 4, max_d_k: int = 512, seed: int = 0):
    """An ``IntSlider`` labelled "d_k" that redraws :func:`scale_figure` when it moves.

    Returns the widget box; ``box.slider`` and ``box.output`` are its parts and ``box.redraws``
    counts the drawings (for tests).
    """
    import ipywidgets as widgets

    slider = widgets.IntSlider(value=d_k, min=1, max=max_d_k, step=1, description="d_k",
                               continuous_update=False)
    slider.add_class("mhalib-dk-slider")
    return figure_explorer(lambda: scale_figure(slider.value, seed=seed), slider=slider)
