"""Lesson 12 pictures, widgets and helpers: the softmax gradient of one row as the softmax
sharpens, where the gradient of the scores lives, FLOPs measured against the formulas, what a
layer keeps for the backward pass at real model sizes, the tiled backward block by block, and
the loss curves and generations of the training runs.

``attention_with_lse`` is the forward pass the lesson's backward needs (out and the
log-sum-exp); it lives here, not in the answer key, so the lesson runs where the answer key is
absent (the grader's sandbox).
"""

from __future__ import annotations

import math

import numpy as np

from mhalib.viz.explorer import figure_explorer

NAIVE_COLOUR, FLASH_COLOUR, GRAD_COLOUR = "#b3261e", "#1f5fa8", "#2e7d32"


def attention_with_lse(q, k, v, causal=False):
    """``(out (..., N_q, d_v), lse (..., N_q))``: attention and the natural log-sum-exp of each
    row's scaled scores; a row with no visible key (bottom-right causal mask) gets zeros and
    -inf. Builds the scores: a forward for demos, in q's dtype (computed in float32 or more)."""
    import torch

    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    scores = q.to(compute) @ k.to(compute).transpose(-2, -1) / math.sqrt(d)  # (..., N_q, N_k)
    if causal:
        sees = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q)
        scores = scores.masked_fill(~sees, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)  # (..., N_q), -inf where no key is visible
    shift = lse.masked_fill(torch.isneginf(lse), 0.0)[..., None]  # (..., N_q, 1)
    out = torch.exp(scores - shift) @ v.to(compute)  # (..., N_q, d_v), empty rows 0
    return out.to(q.dtype), lse.to(q.dtype)


# -- 1 · the softmax gradient of one row --------------------------------------------------------

def row_problem(n_keys: int = 8, seed: int = 3):
    """Logits (n_keys,) with one clear winner, and an upstream gradient grad_p (n_keys,)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=n_keys)
    logits[2] = logits.max() + 1.0  # the winner, one unit ahead of the runner-up
    return logits, rng.normal(size=n_keys)


def row_gradient(logits, grad_p, sharpness: float) -> dict:
    """p = softmax(sharpness * logits) and grad_s = p * (grad_p - <grad_p, p>), in numpy."""
    scaled = sharpness * np.asarray(logits, dtype=float)
    p = np.exp(scaled - scaled.max())
    p /= p.sum()
    row = float(grad_p @ p)
    return {"p": p, "row_term": row, "grad_s": p * (grad_p - row)}


def softmax_gradient_figure(logits, grad_p, sharpness: float):
    """Three bar charts of one row: p, the upstream gradient grad_p with the row term, and
    grad_s; the title gives |grad_s|, which vanishes as the softmax saturates."""
    import matplotlib.pyplot as plt

    found = row_gradient(logits, grad_p, sharpness)
    keys = np.arange(len(logits))
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), layout="constrained", sharex=True)
    axes[0].bar(keys, found["p"], color=FLASH_COLOUR)
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title(f"p = softmax({sharpness:g} x logits)", fontsize=10)
    axes[1].bar(keys, grad_p, color="#777777")
    axes[1].axhline(found["row_term"], color="black", ls="--", lw=1,
                    label=f"row term <grad_p, p> = {found['row_term']:.2f}")
    axes[1].set_title("grad_p (dL/dp)", fontsize=10)
    axes[1].legend(fontsize=8, loc="lower left")
    axes[2].bar(keys, found["grad_s"], color=GRAD_COLOUR)
    limit = max(0.05, float(np.abs(found["grad_s"]).max()) * 1.2)
    axes[2].set_ylim(-limit, limit)
    axes[2].set_title(f"grad_s, |grad_s| = {np.linalg.norm(found['grad_s']):.3f}",
                      fontsize=10)
    for ax in axes:
        ax.set_xlabel("key j")
    return fig


def softmax_gradient_explorer(n_keys: int = 8, seed: int = 3):
    """A ``FloatSlider`` "sharpness" (the factor on the logits, like 1/sqrt(d) made smaller or
    larger) redrawing :func:`softmax_gradient_figure`. ``box.slider``, ``box.output`` and
    ``box.redraws`` are there for tests."""
    import ipywidgets as widgets

    logits, grad_p = row_problem(n_keys, seed)
    slider = widgets.FloatSlider(value=1.0, min=0.0, max=12.0, step=0.5,
                                 description="sharpness", continuous_update=False)
    return figure_explorer(lambda: softmax_gradient_figure(logits, grad_p, slider.value),
                           slider=slider)


# -- 2 · where the gradient of the scores lives ------------------------------------------------

def gradient_heatmaps(p, grad_s, title: str = ""):
    """One head's probabilities p (N_q, N_k) and grad_s (N_q, N_k) side by side (grad_s on a
    diverging scale centred on 0)."""
    import matplotlib.pyplot as plt

    from mhalib.viz.heatmap import as_matrix

    p, grad_s = as_matrix(p), as_matrix(grad_s)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    image = left.imshow(p, cmap="Blues", vmin=0.0, vmax=max(1e-9, float(p.max())))
    fig.colorbar(image, ax=left, fraction=0.046)
    left.set_title("p: the forward's weights", fontsize=10)
    top = max(1e-12, float(np.abs(grad_s).max()))
    image = right.imshow(grad_s, cmap="RdBu_r", vmin=-top, vmax=top)
    fig.colorbar(image, ax=right, fraction=0.046)
    right.set_title("grad_s = p * (grad_p - delta): zero wherever p is", fontsize=10)
    for ax in (left, right):
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


# -- 3 · FLOPs ------------------------------------------------------------------------------------

def flops_figure(rows: list[dict]):
    """Bars of FLOPs in units of N^2 d per head: ``rows`` of {"what", "measured", "formula"}."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.4), layout="constrained")
    names = [row["what"] for row in rows]
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [row["measured"] for row in rows], height=0.4, color=FLASH_COLOUR,
            label="counted by FlopCounterMode")
    ax.barh(y + 0.2, [row["formula"] for row in rows], height=0.4, color="#cccccc",
            label="formula")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel("FLOPs / (N^2 d) per head")
    ax.legend(fontsize=8, loc="lower right")
    return fig


# -- 4 · what a layer keeps for the backward pass ----------------------------------------------

def saved_rows(config, seq_len: int, batch_size: int = 1) -> list[dict]:
    """One table row per tensor a layer of ``config`` saves for backward, naive and flash,
    measured on the meta device (``mhalib.accounting.saved_tensors``)."""
    from mhalib.accounting.saved_tensors import layer_saved_tensors

    rows = []
    for core in ("naive", "flash"):
        saved = layer_saved_tensors(config, seq_len, batch_size, core=core)
        for shape, dtype, size in sorted(saved.tensors, key=lambda t: -t[2]):
            rows.append({"core": core, "shape": str(shape), "dtype": dtype,
                         "MiB": size / 2**20})
        rows.append({"core": core, "shape": "total per layer", "dtype": "",
                     "MiB": saved.total_bytes / 2**20})
    return rows


def saved_memory_figure(config, batch_size: int = 1, seq_lens=(512, 1024, 2048, 4096, 8192,
                                                                16384, 32768)):
    """GiB a whole model keeps for backward in its attention layers (all layers, measured on
    one layer with the meta device, times the layer count), naive and flash, against N."""
    import matplotlib.pyplot as plt

    from mhalib.accounting.saved_tensors import layer_saved_tensors

    n = np.asarray(seq_lens, dtype=float)
    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    for core, colour in (("naive", NAIVE_COLOUR), ("flash", FLASH_COLOUR)):
        gib = [config.num_layers * layer_saved_tensors(config, int(length), batch_size,
                                                       core=core).total_bytes / 2**30
               for length in seq_lens]
        label = "textbook core (keeps p)" if core == "naive" else "FlashAttention (out, lse)"
        ax.loglog(n, gib, "o-", color=colour, label=label)
        ax.annotate(f"{gib[-1]:,.0f} GiB", (n[-1], gib[-1]), fontsize=8, ha="right",
                    va="bottom")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("GiB kept for backward, all attention layers")
    ax.set_title(f"{config.name}, {config.num_layers} layers, batch {batch_size}, bfloat16",
                 fontsize=10)
    ax.legend(fontsize=9)
    return fig


def saved_memory_explorer(models=("GPT-2 small", "Llama-3.1 8B", "Llama-3.1 70B")):
    """A model ``Dropdown`` and a batch ``IntSlider`` redrawing :func:`saved_memory_figure`.
    ``box.model``, ``box.batch``, ``box.output`` and ``box.redraws`` are there for tests."""
    import ipywidgets as widgets

    from mhalib.accounting.models import MODELS

    model = widgets.Dropdown(options=list(models), value=models[0], description="model")
    batch = widgets.IntSlider(value=1, min=1, max=16, description="batch",
                              continuous_update=False)
    return figure_explorer(lambda: saved_memory_figure(MODELS[model.value], batch.value),
                           model=model, batch=batch)


# -- 5 · the tiled backward, block by block -----------------------------------------------------

def tiled_states(n: int = 24, d: int = 4, block: int = 6, seed: int = 2) -> list[dict]:
    """The blocked backward of one causal head in numpy float64, state after each key block:
    which keys are done, the relative error of grad_q so far, and of grad_k (done keys only)."""
    rng = np.random.default_rng(seed)
    q, k, v, grad_out = (rng.normal(size=(n, d)) for _ in range(4))
    scores = np.where(np.tril(np.ones((n, n), bool)), q @ k.T / math.sqrt(d), -np.inf)
    lse = np.log(np.exp(scores - scores.max(1, keepdims=True)).sum(1)) + scores.max(1)
    p = np.exp(scores - lse[:, None])
    out = p @ v
    grad_s = p * (grad_out @ v.T - (grad_out * out).sum(1, keepdims=True))
    grad_q_final, grad_k_final = grad_s @ k / math.sqrt(d), grad_s.T @ q / math.sqrt(d)
    grad_q = np.zeros_like(q)
    states = []
    for start in range(0, n, block):
        stop = min(start + block, n)
        grad_q = grad_q + grad_s[:, start:stop] @ k[start:stop] / math.sqrt(d)
        done = np.arange(n) < stop
        states.append({
            "start": start, "stop": stop, "p": p,
            "q_error": np.linalg.norm(grad_q - grad_q_final, axis=1)
            / np.maximum(np.linalg.norm(grad_q_final, axis=1), 1e-12),
            "k_done": done, "k_norm": np.linalg.norm(grad_k_final, axis=1)})
    return states


def tiled_backward_figure(states, blocks_seen: int):
    """Left: p with the key blocks visited so far (each recomputed as exp(s - lse) and then
    dropped). Right: per query, the relative error of grad_q accumulated so far; grad_k of a
    visited block is final."""
    import matplotlib.pyplot as plt

    blocks_seen = max(1, min(blocks_seen, len(states)))
    state = states[blocks_seen - 1]
    n = len(state["q_error"])
    shown = np.where(np.arange(n)[None, :] < state["stop"], state["p"], np.nan)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    left.imshow(shown, cmap="Blues", vmin=0, vmax=1)
    left.axvspan(state["start"] - 0.5, state["stop"] - 0.5, color="#e08a00", alpha=0.25)
    left.set_title(f"key block {blocks_seen} of {len(states)}: keys {state['start']}.."
                   f"{state['stop'] - 1} (p recomputed)", fontsize=10)
    left.set_xlabel("key j")
    left.set_ylabel("query i")
    right.bar(np.arange(n), state["q_error"], color=FLASH_COLOUR)
    right.set_ylim(0, 1.05 * max(1.0, max(float(s["q_error"].max()) for s in states)))
    right.set_xlabel("query i")
    right.set_ylabel("|grad_q so far - final| / |final|")
    right.set_title(f"grad_k, grad_v final for keys 0..{state['stop'] - 1}; grad_q still "
                    "adding up", fontsize=10)
    return fig


def tiled_backward_stepper(n: int = 24, block: int = 6):
    """An ``IntSlider`` "blocks" that redraws :func:`tiled_backward_figure`."""
    import ipywidgets as widgets

    states = tiled_states(n=n, block=block)
    slider = widgets.IntSlider(value=1, min=1, max=len(states), description="blocks",
                               continuous_update=False)
    return figure_explorer(lambda: tiled_backward_figure(states, slider.value), slider=slider)


# -- 6 · training ----------------------------------------------------------------------------------

def loss_curves_figure(histories: dict, floor: float | None = None, key: str = "loss"):
    """Training curves of several runs (``{label: history}``), with the data's floor."""
    import matplotlib.pyplot as plt

    colours = (FLASH_COLOUR, "#e08a00", NAIVE_COLOUR, GRAD_COLOUR)
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    for (label, history), colour in zip(histories.items(), colours):
        ax.plot(history["step"], history[key], "-", color=colour, label=label, lw=2)
    if floor is not None:
        ax.axhline(floor, color="black", ls="--", lw=1,
                   label=f"floor of the data: {floor:.2f} nats")
    ax.set_xlabel("training step")
    ax.set_ylabel("next-token loss (nats)")
    ax.legend(fontsize=9)
    return fig


def generation_rows(prompt, wanted, generated: dict, count: int = 4) -> list[dict]:
    """Table rows: the end of each prompt, the right continuation and each model's."""
    rows = []
    for i in range(count):
        row = {"prompt ends": " ".join(str(int(t)) for t in prompt[i, -8:]),
               "right continuation": " ".join(str(int(t)) for t in wanted[i])}
        for label, tokens in generated.items():
            row[label] = " ".join(str(int(t)) if int(t) == int(w) else f"[{int(t)}]"
                                  for t, w in zip(tokens[i], wanted[i]))
        rows.append(row)
    return rows
