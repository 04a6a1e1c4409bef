"""Lesson 11 pictures and measurements: decode and prefill on a roofline (an H100's published
peaks and this CPU's measured ones), a paged KV cache and its block table, memory waste with and
without paging, and a scheduler that interleaves decodes with the chunks of a long prompt.
"""

from __future__ import annotations

import math
import time

import numpy as np

from mhalib.accounting.models import MODELS
from mhalib.accounting.roofline import (
    H100_SXM,
    Machine,
    mla_decode_intensity,
    prefill_attention_intensity,
)
from mhalib.viz.explorer import figure_explorer

# DeepSeek-V3's attention (inference/configs/config_671B.json of github.com/deepseek-ai/
# DeepSeek-V3): 128 heads, latent kv_lora_rank 512, one shared RoPE key of 64 per token.
DEEPSEEK_V3_MLA = {"num_heads": 128, "kv_lora_rank": 512, "rope_head_dim": 64}

# Figure 2 of Kwon et al., "Efficient Memory Management for Large Language Model Serving with
# PagedAttention" (SOSP 2023, arXiv:2309.06180): average share of the KV-cache memory, in %.
VLLM_FIGURE_2 = {
    "Orca (Max)": {"token states": 20.4, "reservation": 13.3, "internal fragmentation": 57.3,
                   "external fragmentation & others": 8.9},
    "Orca (Pow2)": {"token states": 26.8, "reservation": 17.9, "internal fragmentation": 13.6,
                    "external fragmentation & others": 41.6},
    "Orca (Oracle)": {"token states": 38.2, "reservation": 25.2, "internal fragmentation": 0.0,
                      "external fragmentation & others": 36.6},
    # the paper's vLLM bar shows 96.3% token states only and does not say what the other 3.7%
    # is (paging leaves no external fragmentation; the partly filled last block of each
    # sequence is the likely bulk): drawn as a neutral remainder, not as any of Orca's parts
    "vLLM": {"token states": 96.3, "reservation": 0.0, "internal fragmentation": 0.0,
             "external fragmentation & others": 0.0, "remainder (not broken down)": 3.7},
}
_WASTE_COLOURS = {"token states": "#2e7d32", "reservation": "#f2b134",
                  "internal fragmentation": "#e07b39", "external fragmentation & others": "#9e9e9e",
                  "remainder (not broken down)": "#e4e4e4"}


# -- this CPU's roofline, measured -------------------------------------------------------------

def measure_cpu(matmul_size: int = 512, copy_mib: int = 64, repeats: int = 3) -> Machine:
    """This CPU's matmul FLOP/s (float32, torch's current thread count) and memory bandwidth
    (a tensor copy that reads and writes ``copy_mib`` MiB each), best of ``repeats``. Takes
    well under a second; numbers vary with the machine's load."""
    import torch

    a = torch.randn(matmul_size, matmul_size)
    b = torch.randn(matmul_size, matmul_size)
    a @ b  # warm up
    best_mm = min(_timed(lambda: a @ b) for _ in range(repeats))
    flops = 2 * matmul_size**3 / best_mm
    n = copy_mib * 2**20 // 4
    src, dst = torch.ones(n), torch.empty(n)
    dst.copy_(src)  # touch the pages once
    best_copy = min(_timed(lambda: dst.copy_(src)) for _ in range(repeats))
    bandwidth = 2 * n * 4 / best_copy  # bytes read + bytes written
    return Machine(f"this CPU ({torch.get_num_threads()} thread(s), float32, measured)",
                   peak_flops=flops, bandwidth=bandwidth,
                   source=f"{matmul_size}^2 matmul and a {copy_mib} MiB copy, best of {repeats}")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# -- decode and prefill intensities of real models ---------------------------------------------

def decode_points(bytes_per_element: int = 2) -> dict[str, float]:
    """FLOPs per byte of one decode step's attention for published configs: MHA, GQA, MQA, MLA.

    GQA-style models use 2 H / (G * bytes) (the lesson's exercise, written out here as the
    formula); DeepSeek-V3's MLA reads one latent and one RoPE key per token for all 128 heads.
    """
    points = {}
    for name, label in (("GPT-3 175B", "MHA"), ("Llama-3.1 70B", "GQA"),
                        ("Llama-3.1 8B", "GQA"), ("Falcon 7B", "MQA")):
        model = MODELS[name]
        points[f"{name} ({label}, {model.num_heads}/{model.num_kv_heads})"] = (
            2 * model.num_heads / (model.num_kv_heads * bytes_per_element))
    points["DeepSeek-V3 (MLA, 128 heads, latent 512 + 64)"] = mla_decode_intensity(
        **DEEPSEEK_V3_MLA, bytes_per_element=bytes_per_element)
    return points


def decode_rows(machine: Machine = H100_SXM, seq_len: int = 32768) -> list[dict]:
    """One row per model: intensity, the share of peak the roof allows, and one layer's
    attention time per decode step at ``seq_len`` tokens of context (bf16, batch 1)."""
    rows = []
    for label, intensity in decode_points().items():
        bytes_per_token = _cache_bytes_per_token_layer(label)
        seconds = bytes_per_token * seq_len / machine.bandwidth
        rows.append({"model": label, "FLOPs per byte": round(intensity, 1),
                     "% of peak FLOP/s": round(100 * machine.attainable_flops(intensity)
                                               / machine.peak_flops, 2),
                     f"us per layer at {seq_len} tokens": round(seconds * 1e6, 2)})
    return rows


def _cache_bytes_per_token_layer(label: str) -> int:
    """bf16 bytes one token adds to one layer's cache, for the rows of :func:`decode_rows`."""
    if label.startswith("DeepSeek-V3"):
        return (DEEPSEEK_V3_MLA["kv_lora_rank"] + DEEPSEEK_V3_MLA["rope_head_dim"]) * 2
    model = MODELS[label.split(" (")[0]]
    return 2 * model.num_kv_heads * model.head_dim * 2


def roofline_figure(machines: list[Machine], points: dict[str, float],
                    prefill: dict[str, float] | None = None, highlight: str | None = None):
    """Attainable FLOP/s against intensity (log-log) for each machine, with vertical marks at
    the decode intensities ``points`` (and prefill ones, dashed)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.4), layout="constrained")
    x = np.logspace(-1, 4.3, 300)
    for machine, colour in zip(machines, ("#1f5fa8", "#b3261e", "#2e7d32")):
        roof = np.minimum(machine.peak_flops, x * machine.bandwidth)
        ax.loglog(x, roof, color=colour, lw=2, label=f"{machine.name}: ridge "
                  f"{machine.ridge_point:,.0f} FLOPs/byte")
        ax.axvline(machine.ridge_point, color=colour, ls=":", lw=1)
    top = machines[0]
    palette = plt.get_cmap("viridis")
    for i, (label, intensity) in enumerate(points.items()):
        colour = palette(i / max(1, len(points) - 1) * 0.85)
        width = 3 if label == highlight else 1.5
        ax.plot([intensity], [top.attainable_flops(intensity)], "o", color=colour, ms=4 + width)
        ax.axvline(intensity, color=colour, lw=width, alpha=0.8, label=f"decode: {label} "
                   f"({intensity:,.1f})")
    for label, intensity in (prefill or {}).items():
        ax.axvline(intensity, color="black", ls="--", lw=1.2,
                   label=f"prefill: {label} ({intensity:,.0f})")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
    ax.set_ylabel("attainable FLOP/s")
    # the decode points are placed on the first machine's roof; another machine's ridge (this
    # CPU's, measured, is a few FLOPs per byte) may put some of them on its compute roof instead
    short = top.name.split(" (")[0]
    left_of_ridge = all(intensity < top.ridge_point for intensity in points.values())
    decode = f"sits on the {short}'s memory roof" if left_of_ridge else f"on the {short}'s roofline"
    ax.set_title(f"Decode attention {decode}; prefill attention moves right as the prompt grows",
                 fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def roofline_explorer(num_heads: int = 64, seq_len: int = 32768):
    """A dropdown of K/V head counts and one of cache element sizes, redrawing the H100 roofline
    with the decode point of that configuration and its time to read one layer's cache."""
    import ipywidgets as widgets

    groups = [g for g in (64, 32, 16, 8, 4, 2, 1) if num_heads % g == 0]
    kv_heads = widgets.Dropdown(options=groups, value=groups[0], description="K/V heads")
    size = widgets.Dropdown(options=[("float32", 4), ("bf16", 2), ("fp8", 1)], value=2,
                            description="cache dtype")

    def draw():
        import matplotlib.pyplot as plt

        intensity = 2 * num_heads / (kv_heads.value * size.value)
        cache = 2 * kv_heads.value * 128 * seq_len * size.value  # one layer, head_dim 128
        fig = roofline_figure([H100_SXM], {f"{num_heads} heads / {kv_heads.value} K/V heads":
                                           intensity})
        ax = fig.axes[0]
        ax.set_title(f"H100: {intensity:g} FLOPs/byte -> "
                     f"{100 * H100_SXM.attainable_flops(intensity) / H100_SXM.peak_flops:.2f}% "
                     f"of peak; one layer's cache at {seq_len:,} tokens is {cache / 2**20:,.0f} "
                     f"MiB, {cache / H100_SXM.bandwidth * 1e6:,.1f} us to read", fontsize=9)
        plt.close(fig)
        return fig

    return figure_explorer(draw, kv_heads=kv_heads, size=size)


def prefill_points() -> dict[str, float]:
    """Causal prefill attention intensity of Llama-3.1 8B at two prompt lengths (fused kernel).

    :func:`prefill_attention_intensity` counts all N^2 (query, key) pairs; a causal kernel that
    skips the masked ones computes N (N + 1) / 2 of them for the same bytes.
    """
    model = MODELS["Llama-3.1 8B"]
    return {f"Llama-3.1 8B causal, {n:,} tokens": prefill_attention_intensity(
        model.num_heads, model.num_kv_heads, model.head_dim, n) * (n + 1) / (2 * n)
        for n in (512, 8192)}


# -- the paged KV cache ----------------------------------------------------------------------------

def random_paging(seq_lens, page_size: int, free_pages: int = 3, seed: int = 0):
    """A shuffled pool for ``seq_lens``: returns ``(owner, block_table)`` where ``owner[p]`` is
    the sequence owning physical page p (-1 when free) and ``block_table[b]`` lists sequence
    b's pages in order."""
    rng = np.random.default_rng(seed)
    owned = [math.ceil(n / page_size) for n in seq_lens]
    num_pages = sum(owned) + free_pages
    order = rng.permutation(num_pages)
    owner = np.full(num_pages, -1)
    table, used = [], 0
    for b, count in enumerate(owned):
        pages = [int(p) for p in order[used:used + count]]
        used += count
        owner[pages] = b
        table.append(pages)
    return owner, table


def block_table_figure(seq_lens=(11, 6, 14), page_size: int = 4, seed: int = 0):
    """Left: each sequence's logical pages and the block table that maps them; right: the
    physical pool, coloured by owner, with unfilled slots hatched."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    owner, table = random_paging(seq_lens, page_size, seed=seed)
    colours = plt.get_cmap("tab10")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained",
                                      gridspec_kw={"width_ratios": [1.1, 1]})
    for b, (n, pages) in enumerate(zip(seq_lens, table)):
        y = (len(seq_lens) - 1 - b) * 1.5
        for j, page in enumerate(pages):
            filled = min(page_size, n - j * page_size)
            for s in range(page_size):
                left.add_patch(Rectangle((j * page_size + s, y), 1, 0.8,
                                         facecolor=colours(b) if s < filled else "white",
                                         edgecolor="white" if s < filled else colours(b),
                                         hatch=None if s < filled else "//"))
            left.add_patch(Rectangle((j * page_size, y), page_size, 0.8, fill=False,
                                     edgecolor="black", lw=1.5))
            left.text(j * page_size + page_size / 2, y + 0.95, f"-> page {page}",
                      ha="center", fontsize=8)
        left.text(-0.5, y + 0.4, f"seq {b} ({n} tokens)  table {pages}", ha="right",
                  va="center", fontsize=9)
    left.set_xlim(-0.5, max(len(p) for p in table) * page_size + 0.5)
    left.set_ylim(-0.3, (len(seq_lens) - 1) * 1.5 + 1.3)
    left.set_xlabel("token position t within the sequence (page t // page_size, slot t % "
                    "page_size)")
    left.set_yticks([])
    left.set_title("logical view: each sequence's tokens, cut into pages", fontsize=10)
    counts = {b: n for b, n in enumerate(seq_lens)}
    for p, b in enumerate(owner):
        x0 = p % 6 * (page_size + 1)
        y0 = -(p // 6) * 1.3
        filled = 0
        if b >= 0:
            j = table[b].index(p)
            filled = min(page_size, counts[b] - j * page_size)
        for s in range(page_size):
            colour = colours(b) if b >= 0 and s < filled else "#eeeeee"
            right.add_patch(Rectangle((x0 + s, y0), 0.95, 0.9, facecolor=colour,
                                      edgecolor="grey", hatch=None if colour != "#eeeeee"
                                      else "..."))
        right.text(x0 + page_size / 2, y0 + 1.0, f"page {p}" + ("" if b >= 0 else " (free)"),
                   ha="center", fontsize=7)
    rows = math.ceil(len(owner) / 6)
    right.set_xlim(-0.5, 6 * (page_size + 1))
    right.set_ylim(-(rows - 1) * 1.3 - 0.3, 1.4)
    right.set_axis_off()
    right.set_title("physical pool, pages in any order (dotted: stale data)", fontsize=10)
    return fig


def waste_fractions(lengths, max_len: int, page_size: int) -> dict[str, float]:
    """Share of reserved KV slots that hold tokens, for sequences of ``lengths``: contiguous
    reservation of ``max_len`` slots each, against pages of ``page_size`` on demand."""
    lengths = np.asarray(lengths)
    used = lengths.sum()
    contiguous = len(lengths) * max_len
    paged = (np.ceil(lengths / page_size) * page_size).sum()
    return {"contiguous (reserve max_len)": used / contiguous, "paged": used / paged}


def fragmentation_figure(lengths=None, max_len: int = 2048, page_size: int = 16):
    """Left: vLLM's published Figure 2 (share of KV memory by use). Right: the same accounting
    on ``lengths`` (default: 200 lengths drawn between 50 and 2048) with and without pages."""
    import matplotlib.pyplot as plt

    if lengths is None:
        lengths = np.random.default_rng(0).integers(50, max_len + 1, size=200)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained",
                                      gridspec_kw={"width_ratios": [1.4, 1]})
    systems = list(VLLM_FIGURE_2)
    bottom = np.zeros(len(systems))
    for part, colour in _WASTE_COLOURS.items():
        values = np.array([VLLM_FIGURE_2[s].get(part, 0.0) for s in systems])
        left.bar(systems, values, bottom=bottom, color=colour, label=part)
        for i, v in enumerate(values):
            if v >= 5:
                left.text(i, bottom[i] + v / 2, f"{v:.1f}", ha="center", va="center", fontsize=8)
        bottom += values
    left.set_ylabel("KV cache memory (%)")
    left.set_title("Kwon et al. 2023, Figure 2 (published)", fontsize=10)
    left.legend(fontsize=7, loc="upper left")
    fractions = waste_fractions(lengths, max_len, page_size)
    names = list(fractions)
    right.bar(names, [100 * f for f in fractions.values()], color=["#e07b39", "#2e7d32"])
    for i, f in enumerate(fractions.values()):
        right.text(i, 100 * f + 1, f"{100 * f:.1f}% holds tokens", ha="center", fontsize=9)
    right.set_ylim(0, 110)
    right.set_title(f"our count: {len(lengths)} sequences, max_len {max_len}, pages of "
                    f"{page_size}", fontsize=10)
    return fig


# -- chunked prefill: interleaving decodes with a long prompt ------------------------------------

def schedule(prompt_len: int, num_decoding: int, chunk_size: int | None, token_budget: int,
             idle_steps: int = 2) -> list[tuple[int, int]]:
    """Engine steps while a ``prompt_len`` prompt arrives among ``num_decoding`` sequences that
    each produce one token per step, as ``(prompt_tokens, decode_tokens)`` per step, with
    ``idle_steps`` decode-only steps before and after the prompt.

    Without chunks (``chunk_size=None``) the whole prompt is one step and the decodes wait for
    it; with chunks every step runs all the decodes plus at most ``min(chunk_size,
    token_budget - num_decoding)`` prompt tokens.
    """
    before = [(0, num_decoding)] * idle_steps
    if chunk_size is None:
        return before + [(prompt_len, 0)] + before
    room = max(1, min(chunk_size, token_budget - num_decoding))
    steps, left = [], prompt_len
    while left > 0:
        take = min(room, left)
        steps.append((take, num_decoding))
        left -= take
    return before + steps + before


def longest_decode_gap(steps) -> int:
    """The most work (tokens processed) between two consecutive tokens of a decoding
    sequence: a stand-in for its worst inter-token latency when steps are compute-bound."""
    ends, clock = [], 0
    for prompt, decode in steps:
        clock += prompt + decode
        if decode:
            ends.append(clock)
    return max(b - a for a, b in zip(ends, ends[1:]))


def schedule_figure(prompt_len: int = 8192, num_decoding: int = 32, chunk_size: int = 512,
                    token_budget: int = 1024):
    """Two timelines of engine steps (width = tokens processed, so roughly time when the steps
    are compute-bound): the whole prompt at once, and chunked. Ticks mark the steps where the
    decoding sequences get a token."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 2.8), layout="constrained")
    rows = (("whole prompt", None), (f"chunks of {chunk_size}", chunk_size))
    for y, (_, chunk) in enumerate(rows):
        steps = schedule(prompt_len, num_decoding, chunk, token_budget)
        clock = 0
        for prompt, decode in steps:
            if prompt:
                ax.broken_barh([(clock, prompt)], (y - 0.35, 0.7), facecolors="#1f5fa8",
                               edgecolors="white")
            if decode:
                ax.broken_barh([(clock + prompt, decode)], (y - 0.35, 0.7),
                               facecolors="#e08a00", edgecolors="white")
                ax.plot(clock + prompt + decode, y + 0.45, "v", color="#e08a00", ms=5)
            clock += prompt + decode
        ax.text(clock + 100, y, f"longest wait for a token: {longest_decode_gap(steps):,} "
                f"tokens of work", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.set_xlabel("tokens processed (time, when steps are compute-bound); blue: prompt, "
                  "orange: one decode token for each of the running sequences")
    ax.set_xlim(0, prompt_len * 1.45)
    ax.set_title(f"A {prompt_len:,}-token prompt arrives while {num_decoding} sequences decode "
                 f"(token budget {token_budget} per step)", fontsize=10)
    return fig


def chunk_explorer(prompt_len: int = 8192, num_decoding: int = 32, token_budget: int = 1024):
    """A slider of chunk sizes redrawing :func:`schedule_figure`."""
    import ipywidgets as widgets

    slider = widgets.SelectionSlider(options=[64, 128, 256, 512, 992], value=512,
                                     description="chunk size", continuous_update=False)
    return figure_explorer(lambda: schedule_figure(prompt_len, num_decoding, slider.value,
                                                   token_budget), slider=slider)


# -- a fragmented pool for the paged_attention demo ---------------------------------------------

def paged_pool(seq_lens, num_heads: int, num_kv_heads: int, head_dim: int, page_size: int,
               free_pages: int = 4, stale: float = 50.0, seed: int = 0):
    """Random K/V for each sequence written into a shuffled page pool whose other slots hold
    large stale values. Returns ``(args, dense)``: ``args = (q, k_pages, v_pages, block_table,
    seq_lens)`` for ``paged_attention`` and ``dense[b] = (k, v)``, sequence b's keys and values
    as contiguous (G, n, d) tensors (the same numbers, for a dense oracle)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    owner, table = random_paging(seq_lens, page_size, free_pages, seed)
    num_pages = len(owner)
    shape = (num_pages, num_kv_heads, page_size, head_dim)
    k_pages = (torch.rand(shape, generator=gen) * 2 - 1) * stale
    v_pages = (torch.rand(shape, generator=gen) * 2 - 1) * stale
    max_pages = max(len(pages) for pages in table) + 1
    block_table = torch.randint(0, num_pages, (len(seq_lens), max_pages), generator=gen)
    dense = []
    for b, (n, pages) in enumerate(zip(seq_lens, table)):
        block_table[b, :len(pages)] = torch.tensor(pages, dtype=torch.long)
        k = torch.randn(num_kv_heads, n, head_dim, generator=gen)  # (G, n, d)
        v = torch.randn(num_kv_heads, n, head_dim, generator=gen)
        for t in range(n):
            k_pages[pages[t // page_size], :, t % page_size] = k[:, t]
            v_pages[pages[t // page_size], :, t % page_size] = v[:, t]
        dense.append((k, v))
    q = torch.randn(len(seq_lens), num_heads, head_dim, generator=gen)
    return (q, k_pages, v_pages, block_table, torch.tensor(list(seq_lens))), dense
