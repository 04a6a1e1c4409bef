"""Lesson 05 pictures: where an attention layer's FLOPs go, the N = 2 d_model crossover, measured
CPU time against N, and a table of real models.

The plots take the learner's own counting functions as arguments (``mha_flops``,
``crossover_seq_len``), so what they draw is what the learner wrote.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from mhalib.viz.explorer import figure_explorer

D_MODELS = (64, 128, 256, 512, 768, 1024, 2048, 4096, 8192, 12288, 16384)


def flops_figure(mha_flops, crossover_seq_len, d_model: int, n_points: int = 60):
    """Log-log plot of the projection FLOPs and the N^2 FLOPs of one layer against N."""
    import matplotlib.pyplot as plt

    crossover = crossover_seq_len(d_model)
    lengths = np.unique(np.geomspace(16, max(64 * d_model, 4096), n_points).astype(int))
    parts = [mha_flops(int(n), d_model) for n in lengths]
    projections = np.array([p["qkv_projections"] + p["output_projection"] for p in parts], float)
    quadratic = np.array([p["scores"] + p["weighted_sum"] for p in parts], float)
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.loglog(lengths, projections, label="projections  8 N d$^2$", color="#1f5fa8")
    ax.loglog(lengths, quadratic, label="scores + weighted sum  4 N$^2$ d", color="#b3261e")
    ax.loglog(lengths, projections + quadratic, label="total", color="black", lw=1, ls="--")
    ax.axvline(crossover, color="grey", ls=":")
    ax.annotate(f"crossover N = {crossover:,}", (crossover, ax.get_ylim()[0] * 10),
                rotation=90, ha="right", va="bottom", fontsize=9)
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("FLOPs of one layer, one sequence")
    ax.set_title(f"d_model = {d_model}: the N$^2$ terms win beyond N = {crossover:,}")
    ax.legend(loc="upper left", fontsize=9)
    return fig


def crossover_explorer(mha_flops, crossover_seq_len, d_model: int = 768):
    """A ``SelectionSlider`` labelled "d_model" that redraws :func:`flops_figure`.

    Returns the widget box; ``box.slider``, ``box.output`` and ``box.redraws`` are for tests.
    """
    import ipywidgets as widgets

    slider = widgets.SelectionSlider(options=list(D_MODELS), value=d_model,
                                     description="d_model", continuous_update=False)
    # call the learner's functions once out here: an unfinished one raises in the cell (where
    # ``needs`` reports it in one line), not inside the widget's output
    mha_flops(2 * d_model, d_model)
    crossover_seq_len(d_model)
    return figure_explorer(lambda: flops_figure(mha_flops, crossover_seq_len, slider.value),
                           slider=slider)


def layer_weights(d_model: int, seed: int = 0):
    """The four (d_model, d_model) torch weights of one attention layer, applied as x @ W."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(d_model, d_model, generator=generator) / d_model ** 0.5
            for _ in range(4)]


def time_layer_parts(seq_lens, d_model: int = 64, num_heads: int = 4, repeats: int = 5,
                     seed: int = 0) -> dict:
    """Best-of-``repeats`` CPU seconds of the projections and of the N^2 part of one layer.

    The layer is written out in torch (no fused kernel), so the two parts can be timed
    separately: ``projections`` (x @ W_q, W_k, W_v and the output projection) and
    ``attention`` (scores, softmax and weighted sum). Timed on one thread, keeping the
    fastest run, so that other programs on the machine disturb the numbers least.
    Returns lists keyed by part. Measured once per set of arguments in a session: calling it
    again with the same ones returns (a copy of) the same numbers, so that every cell that needs
    them can ask for them without timing again.
    """
    key = (tuple(int(n) for n in seq_lens), d_model, num_heads, repeats, seed)
    if key not in _TIMES:
        with single_thread():
            _TIMES[key] = _time_layer_parts(seq_lens, d_model, num_heads, repeats, seed)
    return {part: list(values) for part, values in _TIMES[key].items()}


_TIMES: dict = {}  # time_layer_parts' measurements, by arguments


class single_thread:
    """Context manager: torch runs on one CPU thread inside, as before outside."""

    def __enter__(self):
        import torch

        self.previous = torch.get_num_threads()
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.previous)
        return False


def _time_layer_parts(seq_lens, d_model, num_heads, repeats, seed) -> dict:
    import torch

    weights = layer_weights(d_model, seed)
    generator = torch.Generator().manual_seed(seed + 1)
    result = {"seq_len": [], "projections": [], "attention": []}
    for n in seq_lens:
        x = torch.randn(1, n, d_model, generator=generator)  # (1, N, d_model)
        q, k, v = (_split_heads(x @ w, num_heads) for w in weights[:3])  # (1, H, N, d_head)
        result["seq_len"].append(int(n))
        result["projections"].append(best_seconds(partial(_projections, x, weights), repeats))
        result["attention"].append(best_seconds(partial(_attention_core, q, k, v), repeats))
    return result


def _split_heads(t, num_heads):
    """(1, N, d_model) -> (1, H, N, d_head)."""
    batch, n, width = t.shape
    return t.view(batch, n, num_heads, width // num_heads).transpose(1, 2)


def _projections(x, weights):
    return [x @ w for w in weights]  # four (N, d) @ (d, d) products


def _attention_core(q, k, v):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (1, H, N, N)
    return scores.softmax(dim=-1) @ v  # (1, H, N, d_head)


def best_seconds(fn, repeats: int) -> float:
    """The fastest of ``repeats`` timed calls (after one warm-up call)."""
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return float(min(samples))


def timing_figure(times: dict, crossover: int | None = None):
    """Measured seconds of the two parts against N (log-log), from :func:`time_layer_parts`."""
    import matplotlib.pyplot as plt

    n = np.array(times["seq_len"])
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.loglog(n, times["projections"], "o-", color="#1f5fa8", label="projections (measured)")
    ax.loglog(n, times["attention"], "o-", color="#b3261e",
              label="scores, softmax, weighted sum (measured)")
    if crossover:
        ax.axvline(crossover, color="grey", ls=":", label=f"FLOP crossover N = {crossover}")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("seconds (best of repeats, one thread)")
    ax.set_title("CPU time of one layer's parts")
    ax.legend(fontsize=9)
    return fig


def measured_crossover(times: dict) -> int | None:
    """The first measured N where the N^2 part took longer than the projections."""
    for n, proj, attn in zip(times["seq_len"], times["projections"], times["attention"]):
        if attn > proj:
            return n
    return None


def html_table(rows: list[dict], caption: str = "") -> str:
    """A small HTML table from a list of dicts (same keys), numbers with thousands commas."""
    import html

    if not rows:
        return "<p>(no rows)</p>"
    columns = list(rows[0])

    def cell(value):
        if isinstance(value, float):
            text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
        elif isinstance(value, int):
            text = f"{value:,}"
        else:
            text = str(value)
        return f"<td style='text-align:right'>{html.escape(text)}</td>"

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(cell(r[c]) for c in columns) + "</tr>" for r in rows)
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def matmul_flop_rate(sizes=(256, 512, 1024), repeats: int = 7) -> float:
    """The best FLOP/s of float32 square matrix products on one CPU thread: a practical peak to
    compare the layer's rate with (same thread count as :func:`time_layer_parts`)."""
    import torch

    best = 0.0
    with single_thread():
        for size in sizes:
            product = partial(torch.matmul, torch.randn(size, size), torch.randn(size, size))
            best = max(best, 2 * size ** 3 / best_seconds(product, repeats))
    return best
