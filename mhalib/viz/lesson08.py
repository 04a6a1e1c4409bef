"""Lesson 08 pictures: the training curve, every head's attention pattern (with a layer/head
selector), the head scores, and what pruning heads does to the loss.

Patterns are ``(L, H, N, N)`` arrays or tensors (layer, head, query, key); scores and loss
changes are ``(L, H)``. Heads are labelled ``L{layer}H{head}``.
"""

from __future__ import annotations

import numpy as np

from mhalib.viz.explorer import figure_explorer
from mhalib.viz.heatmap import as_matrix, plot_attention


def _array(values) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch.Tensor, without importing torch
        values = values.detach().cpu().float().numpy()
    return np.asarray(values, dtype=float)


def head_label(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def loss_figure(history: dict):
    """Training loss on all targets and on the targets an earlier copy determines."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
    ax.plot(history["step"], history["loss"], label="all next-token targets", color="grey")
    ax.plot(history["step"], history["copy_loss"], label="targets inside a repeat",
            color="#b3261e", lw=2)
    vocab = history.get("config", {}).get("vocab_size")
    if vocab:
        ax.axhline(np.log(vocab), color="black", ls=":", lw=1)
        ax.annotate(f"guessing: log({vocab}) = {np.log(vocab):.2f}", (0, np.log(vocab)),
                    va="bottom", fontsize=9)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.legend(fontsize=9)
    ax.set_title("The copy loss drops once induction heads form")
    return fig


def head_grid_figure(patterns, tokens=None, scores: dict | None = None):
    """A grid of small heatmaps: one row per layer, one column per head."""
    import matplotlib.pyplot as plt

    patterns = _array(patterns)  # (L, H, N, N)
    layers, heads = patterns.shape[:2]
    fig, axes = plt.subplots(layers, heads, figsize=(2.3 * heads, 2.3 * layers),
                             layout="constrained", squeeze=False)
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer, head]
            ax.imshow(patterns[layer, head], cmap="Blues", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            title = head_label(layer, head)
            for name, values in (scores or {}).items():
                title += f"\n{name} {_array(values)[layer, head]:.2f}"
            ax.set_title(title, fontsize=8)
    fig.suptitle("Attention patterns (rows: queries, columns: keys)")
    return fig


def head_explorer(patterns, tokens=None, scores: dict | None = None):
    """Two dropdowns, "layer" and "head", that redraw one head's heatmap with plot_attention.

    ``scores`` (name -> (L, H)) are shown in the title. ``box.layer``, ``box.head``,
    ``box.output`` and ``box.redraws`` are there for tests.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    patterns = _array(patterns)  # (L, H, N, N)
    layers, heads, n, _ = patterns.shape
    layer = widgets.Dropdown(options=list(range(layers)), value=layers - 1, description="layer")
    head = widgets.Dropdown(options=list(range(heads)), value=0, description="head")

    def draw():
        fig, ax = plt.subplots(figsize=(6.5, 5.5), layout="constrained")
        title = head_label(layer.value, head.value)
        for name, values in (scores or {}).items():
            title += f"   {name} {_array(values)[layer.value, head.value]:.2f}"
        plot_attention(as_matrix(patterns[layer.value, head.value]), ax=ax, title=title,
                       tokens=tokens, annotate=False)
        return fig

    return figure_explorer(draw, layer=layer, head=head)


def score_layers(score, patterns, *args):
    """``(L, H)``: ``score(patterns[layer], *args)`` stacked over the layers of ``(L, H, N, N)``
    patterns (``score`` maps one layer's ``(H, N, N)`` weights to ``(H,)``)."""
    import torch

    return torch.stack([torch.as_tensor(score(layer, *args)) for layer in patterns])


def score_figure(previous, induction, sink=None):
    """Bars of the previous-token and induction scores of every head (and, given ``sink``, the
    weight each head puts on the first token)."""
    import matplotlib.pyplot as plt

    previous, induction = _array(previous), _array(induction)  # (L, H) each
    layers, heads = previous.shape
    labels = [head_label(layer, h) for layer in range(layers) for h in range(heads)]
    x = np.arange(len(labels))
    series = [(previous, "previous-token score", "#1f5fa8"), (induction, "induction score",
                                                             "#b3261e")]
    if sink is not None:
        series.append((_array(sink), "weight on the first token (sink)", "#7a7a7a"))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(labels)), 3.5), layout="constrained")
    for index, (values, label, colour) in enumerate(series):
        offset = (index - (len(series) - 1) / 2) * width
        ax.bar(x + offset, values.ravel(), width=width, label=label, color=colour)
    ax.set_xticks(x, labels)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean weight on the target key")
    ax.legend(fontsize=9)
    return fig


def ablation_figure(rise):
    """Heatmap of the loss increase when each head alone is switched off."""
    import matplotlib.pyplot as plt

    rise = _array(rise)  # (L, H)
    layers, heads = rise.shape
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * heads, 1.0 + 0.9 * layers), layout="constrained")
    top = max(float(np.abs(rise).max()), 1e-6)
    image = ax.imshow(rise, cmap="Reds", vmin=min(0.0, float(rise.min())), vmax=top)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    for (layer, head), value in np.ndenumerate(rise):
        ax.text(head, layer, f"{value:+.2f}", ha="center", va="center", fontsize=9,
                color="white" if value > 0.6 * top else "black")
    ax.set_xticks(range(heads), [f"head {h}" for h in range(heads)])
    ax.set_yticks(range(layers), [f"layer {layer}" for layer in range(layers)])
    ax.set_title("Loss increase with one head switched off")
    return fig


def pruning_figure(curve, order):
    """Loss after removing 0, 1, ... heads in ``order`` ((layer, head) pairs)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
    ax.plot(range(len(curve)), curve, "o-", color="#b3261e")
    ax.set_xticks(range(len(curve)), ["none"] + [head_label(*pair) for pair in order],
                  rotation=45)
    ax.set_xlabel("heads removed so far (least important first)")
    ax.set_ylabel("copy loss (nats)")
    ax.set_title("Pruning heads one after another")
    return fig
