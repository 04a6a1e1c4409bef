"""Lesson 06 pictures: which K/V head each query head reads, the KV cache of real models against
context length, and what decoding costs with and without a cache.

Plotting functions take the learner's ``kv_cache_bytes`` as an argument, so the curves are
the learner's own numbers.
"""

from __future__ import annotations

import numpy as np

from mhalib.viz.explorer import figure_explorer

GIB = 2**30
CACHE_MODELS = ("GPT-2 small", "Llama-3.1 8B", "Llama-3.1 70B", "Llama-3.1 405B", "Mistral 7B",
                "Qwen2 7B", "Falcon 7B")


def group_map_figure(num_heads: int, num_kv_heads: int):
    """Two (num_kv_heads, num_heads) grids: the K/V head each query head reads, interleaved
    (h // n_rep, right) and tiled (h % G, what x.repeat gives)."""
    import matplotlib.pyplot as plt

    n_rep = num_heads // num_kv_heads
    heads = np.arange(num_heads)
    layouts = [("interleaved: head h reads group h // n_rep", heads // n_rep, "#1f5fa8"),
               ("tiled (x.repeat): head h reads group h % G", heads % num_kv_heads, "#b3261e")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 1.2 + 0.35 * num_kv_heads),
                             layout="constrained")
    for ax, (title, groups, colour) in zip(axes, layouts):
        grid = np.zeros((num_kv_heads, num_heads))
        grid[groups, heads] = 1
        ax.imshow(grid, cmap=_two_colour(colour), vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(heads)
        ax.set_yticks(range(num_kv_heads))
        ax.set_xlabel("query head h")
        ax.set_ylabel("K/V head")
        ax.set_title(title, fontsize=10)
    fig.suptitle(f"{num_heads} query heads, {num_kv_heads} K/V heads (n_rep = {n_rep})")
    return fig


def _two_colour(colour):
    from matplotlib.colors import ListedColormap

    return ListedColormap(["#f2f2f2", colour])


def cache_variants(config) -> list[tuple[str, int]]:
    """(label, num_kv_heads) for MHA, the model's own attention and MQA, without repeats."""
    variants = [("MHA", config.num_heads)]
    if 1 < config.num_kv_heads < config.num_heads:
        variants.append((f"GQA ({config.num_kv_heads} K/V heads, as published)",
                         config.num_kv_heads))
    variants.append(("MQA", 1))
    return variants


def kv_cache_figure(kv_cache_bytes, config, batch_size: int = 1, max_len: int = 131072):
    """The cache of ``config`` (a ModelConfig) in GiB against context length, for MHA, GQA and
    MQA versions of it, next to the size of its weights in bfloat16."""
    import matplotlib.pyplot as plt

    lengths = np.unique(np.geomspace(512, max_len, 40).astype(int))
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    colours = {"MHA": "#b3261e", "MQA": "#2e7d32"}
    for label, kv_heads in cache_variants(config):
        sizes = [kv_cache_bytes(config.num_layers, kv_heads, config.head_dim, int(n),
                                batch_size, 2) / GIB for n in lengths]
        ax.loglog(lengths, sizes, label=label, color=colours.get(label, "#1f5fa8"), lw=2)
    weights = config.published_params * 2 / GIB
    ax.axhline(weights, color="black", ls=":", lw=1)
    ax.annotate(f"weights in bf16: {weights:,.0f} GiB", (lengths[0], weights), va="bottom",
                fontsize=9)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("KV cache (GiB, bf16)")
    ax.set_title(f"{config.name}: {config.num_layers} layers, {config.num_heads} query heads "
                 f"of {config.head_dim}, batch {batch_size}", fontsize=10)
    ax.legend(fontsize=9)
    return fig


def kv_cache_explorer(kv_cache_bytes, models: dict, model: str = "Llama-3.1 70B"):
    """A "model" dropdown and a "batch" slider that redraw :func:`kv_cache_figure`.

    ``models`` maps names to ModelConfig. ``box.model``, ``box.batch``, ``box.output`` and
    ``box.redraws`` are there for tests.
    """
    import ipywidgets as widgets

    names = [name for name in CACHE_MODELS if name in models] or sorted(models)
    choose = widgets.Dropdown(options=names, value=model if model in names else names[0],
                              description="model")
    batch = widgets.IntSlider(value=1, min=1, max=64, description="batch",
                              continuous_update=False)
    kv_cache_bytes(1, 1, 1, 1)  # an unfinished exercise raises here, in the cell, not in the widget
    return figure_explorer(
        lambda: kv_cache_figure(kv_cache_bytes, models[choose.value], batch.value),
        model=choose, batch=batch)


def decode_cost_figure(costs: dict):
    """Two log-log panels against N: FLOPs and seconds of decoding with and without a cache.

    ``costs`` has lists ``seq_len``, ``cached_flops``, ``recompute_flops``, ``cached_s``,
    ``recompute_s``. Dotted guides show slopes 2 and 3 through the first points.
    """
    import matplotlib.pyplot as plt

    n = np.array(costs["seq_len"], dtype=float)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    panels = [("FLOPs (FlopCounterMode)", "cached_flops", "recompute_flops"),
              ("seconds (best of repeats)", "cached_s", "recompute_s")]
    for ax, (label, cached, recompute) in zip(axes, panels):
        ax.loglog(n, costs[cached], "o-", color="#1f5fa8", label="KV cache")
        ax.loglog(n, costs[recompute], "o-", color="#b3261e", label="re-run the prefix")
        for power, style in ((2, ":"), (3, "--")):
            start = costs[recompute][0] if power == 3 else costs[cached][0]
            ax.loglog(n, start * (n / n[0]) ** power, color="grey", ls=style, lw=1,
                      label=f"slope {power} (N^{power})")
        ax.set_xlabel("tokens generated N")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle("Generating N tokens one at a time")
    return fig


def growth_exponent(n, values) -> float:
    """Slope of log(values) against log(n) over the last half of the points."""
    n = np.log(np.asarray(n, dtype=float))
    values = np.log(np.asarray(values, dtype=float))
    half = len(n) // 2
    return float(np.polyfit(n[half:], values[half:], 1)[0])


def random_layer(d_model: int, num_heads: int, num_kv_heads: int, seed: int = 0):
    """Random GQA weights ``(w_q, w_k, w_v, w_o)``, applied as ``x @ W``, of scale 1/sqrt(d_model).

    ``w_q, w_o``: ``(d_model, d_model)``; ``w_k, w_v``: ``(d_model, num_kv_heads * d_head)``.
    The same ``seed`` gives the same weights.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    kv_width = num_kv_heads * (d_model // num_heads)
    scale = d_model ** -0.5

    def draw(width):
        return torch.randn(d_model, width, generator=generator) * scale

    return draw(d_model), draw(kv_width), draw(kv_width), draw(d_model)


def random_tokens(batch: int, n: int, d_model: int, seed: int = 0):
    """Seeded activations ``x`` of shape ``(batch, n, d_model)``."""
    import torch

    return torch.randn(batch, n, d_model, generator=torch.Generator().manual_seed(seed))


def sdpa_gqa(x, w_q, w_k, w_v, w_o, num_heads: int, num_kv_heads: int, causal: bool = False):
    """Grouped-query attention through ``F.scaled_dot_product_attention(enable_gqa=True)``: the
    oracle the lesson compares ``grouped_query_attention`` with."""
    import torch.nn.functional as F

    batch, n, d_model = x.shape
    d_head = d_model // num_heads

    def split(t, heads):  # (B, N, heads * d_head) -> (B, heads, N, d_head)
        return t.reshape(batch, n, heads, d_head).transpose(1, 2)

    out = F.scaled_dot_product_attention(split(x @ w_q, num_heads), split(x @ w_k, num_kv_heads),
                                         split(x @ w_v, num_kv_heads), is_causal=causal,
                                         enable_gqa=True)  # (B, H, N, d_head)
    return out.transpose(1, 2).reshape(batch, n, d_model) @ w_o
