"""Lesson 02 pictures: which features each head owns, and four hand-built heads to look at.

The hand-built layer has H = 4 heads of width 8 (d_model = 32) over an eight-token sentence.
Each head's query and key weights are chosen so that it does one job seen in trained models:
look at the previous token, at other copies of the same word, at the first token, or at
itself. Every head's values are the tokens' positions (one-hot), so with W_O = I block h of the
layer's output is exactly head h's attention weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mhalib.viz.explorer import figure_explorer
from mhalib.viz.heatmap import plot_attention

TOKENS = ("<s>", "the", "cat", "sat", "on", "the", "mat", ".")
HEAD_NAMES = ("previous token", "same word", "first token", "current token")
D_HEAD = 8
SHARPNESS = 12.0  # query weight: score of a match = SHARPNESS / sqrt(d_head)


@dataclass
class DesignedLayer:
    tokens: list[str]
    x: np.ndarray  # (1, N, d_model)
    w_q: np.ndarray  # (d_model, d_model)
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray
    num_heads: int
    head_names: list[str]


def designed_layer() -> DesignedLayer:
    """The hand-built four-head layer described in the module docstring."""
    n, num_heads = len(TOKENS), len(HEAD_NAMES)
    d_model = num_heads * D_HEAD
    vocabulary = sorted(set(TOKENS))
    position = np.arange(n)  # feature i (< 8): "I am at position i"
    word = 8 + np.array([vocabulary.index(t) for t in TOKENS])  # features 8..15: word id
    constant = 16  # feature 16 is always 1
    x = np.zeros((1, n, d_model))  # (1, N, d_model)
    x[0, position, position] = 1.0
    x[0, position, word] = 1.0
    x[0, :, constant] = 1.0

    w_q, w_k, w_v = (np.zeros((d_model, d_model)) for _ in range(3))
    block = [slice(h * D_HEAD, (h + 1) * D_HEAD) for h in range(num_heads)]
    for i in range(n):  # head 0: position i asks for position i - 1 (the first asks for itself)
        w_q[i, block[0].start + max(i - 1, 0)] = SHARPNESS
        w_k[i, block[0].start + i] = 1.0
    for w in range(len(vocabulary)):  # head 1: a word asks for the same word
        w_q[8 + w, block[1].start + w] = SHARPNESS
        w_k[8 + w, block[1].start + w] = 1.0
    w_q[constant, block[2].start] = SHARPNESS  # head 2: everybody asks for position 0
    w_k[0, block[2].start] = 1.0
    for i in range(n):  # head 3: position i asks for itself
        w_q[i, block[3].start + i] = SHARPNESS
        w_k[i, block[3].start + i] = 1.0
        for h in range(num_heads):  # every head hands over the position it was found at
            w_v[i, block[h].start + i] = 1.0
    return DesignedLayer(list(TOKENS), x, w_q, w_k, w_v, np.eye(d_model), num_heads,
                         list(HEAD_NAMES))


def head_weights(layer: DesignedLayer) -> np.ndarray:
    """Attention weights of every head of ``layer``: (H, N, N) for its single sequence."""
    x = layer.x[0]  # (N, d_model)
    q = (x @ layer.w_q).reshape(len(x), layer.num_heads, D_HEAD).transpose(1, 0, 2)  # (H, N, d)
    k = (x @ layer.w_k).reshape(len(x), layer.num_heads, D_HEAD).transpose(1, 0, 2)  # (H, N, d)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(D_HEAD)  # (H, N, N)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)  # (H, N, N)


def heads_figure(weights: np.ndarray, tokens, names):
    """All heads side by side: weights (H, N, N)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(weights), figsize=(4.2 * len(weights), 4),
                             layout="constrained")
    for ax, head, name in zip(np.atleast_1d(axes), weights, names):
        plot_attention(head, ax=ax, tokens=tokens, title=name, annotate=False)
    return fig


def head_explorer(layer: DesignedLayer | None = None):
    """A "head" picker (ToggleButtons) that shows the chosen head's heatmap.

    Returns the widget box; ``box.picker`` and ``box.output`` are its parts and ``box.redraws``
    counts the drawings.
    """
    import ipywidgets as widgets

    layer = designed_layer() if layer is None else layer
    weights = head_weights(layer)  # (H, N, N)
    picker = widgets.ToggleButtons(options=[(f"{h}: {name}", h) for h, name in
                                            enumerate(layer.head_names)],
                                   value=0, description="head")
    picker.add_class("mhalib-head-picker")

    def draw():
        head = picker.value
        return plot_attention(weights[head], tokens=layer.tokens,
                              title=f"head {head}: {layer.head_names[head]}")

    return figure_explorer(draw, picker=picker)


def split_figure(d_model: int = 12, num_heads: int = 3):
    """Which head owns each feature: contiguous blocks (the contract) versus a strided split."""
    import matplotlib.pyplot as plt

    d_head = d_model // num_heads
    features = np.arange(d_model)
    owners = {
        "reshape (B, N, H, d_head): head h owns features h*d_head ... (h+1)*d_head - 1":
            features // d_head,
        "reshape (B, N, d_head, H): head h owns features h, h+H, h+2H, ... (a slip)":
            features % num_heads,
    }
    fig, axes = plt.subplots(2, 1, figsize=(8, 2.6), layout="constrained")
    colours = plt.get_cmap("tab10")
    for ax, (title, owner) in zip(axes, owners.items()):
        for f, h in zip(features, owner):
            ax.add_patch(plt.Rectangle((f, 0), 1, 1, color=colours(h), ec="white"))
            ax.text(f + 0.5, 0.5, f"h{h}", ha="center", va="center", color="white")
        ax.set_xlim(0, d_model)
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.set_xticks(features + 0.5, features)
        ax.set_title(title, fontsize=9)
    axes[-1].set_xlabel(f"feature index of d_model = {d_model} ({num_heads} heads)")
    return fig
