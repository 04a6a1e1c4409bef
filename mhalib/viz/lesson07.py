"""Lesson 07 pictures and measurements: two partial attention states merging, the online softmax
one block at a time, the memory of naive and tiled attention, the Triton kernel's source, and
the benchmark table.

``peak_tensor_bytes`` measures memory by watching every tensor PyTorch allocates (a
TorchDispatchMode), so it works on any machine and counts exactly the tensors a function
creates, not the noise of the process around it.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np

from mhalib.checks.work import watch_tensors
from mhalib.viz.explorer import figure_explorer
from mhalib.viz.lesson05 import single_thread

KERNEL_FILE = Path(__file__).resolve().parent.parent / "kernels" / "triton_flash.py"


# -- two partial states merging (one query row, 2-D values so outputs are points) -------------

def merge_problem(n_keys: int = 12, seed: int = 4):
    """Scores (n_keys,) of one query and 2-D values (n_keys, 2), a few scores large."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n_keys) * 1.5
    scores[rng.choice(n_keys, size=2, replace=False)] += 2.5
    values = rng.normal(size=(n_keys, 2))
    return scores, values


def row_state(scores, values) -> tuple[np.ndarray, float]:
    """(out, lse) of one query over some keys: the normalised output (2,) and the log-sum-exp
    of its scores; no keys gives zeros and -inf."""
    if len(scores) == 0:
        return np.zeros(values.shape[-1]), -math.inf
    top = float(np.max(scores))
    weights = np.exp(scores - top)
    return weights @ values / weights.sum(), top + math.log(weights.sum())


def merged_row(out_a, lse_a: float, out_b, lse_b: float) -> dict:
    """The merge of two row states, with its shares: ``w_a``, ``w_b`` (summing to 1 unless both
    sides are empty), ``out`` and ``lse``."""
    top = max(lse_a, lse_b)
    shift = 0.0 if math.isinf(top) else top
    e_a, e_b = math.exp(lse_a - shift), math.exp(lse_b - shift)
    total = e_a + e_b
    w_a, w_b = (e_a / total, e_b / total) if total > 0 else (0.0, 0.0)
    lse = shift + math.log(total) if total > 0 else -math.inf
    return {"w_a": w_a, "w_b": w_b, "out": w_a * np.asarray(out_a) + w_b * np.asarray(out_b),
            "lse": lse}


def merge_figure(scores, values, split: int):
    """Keys 0..split-1 form set A, the rest set B. Left: the scores by set, with each set's
    lse. Right: the values as points (size = weight in full attention), each set's output,
    and the merge on the segment between them, on top of attention over all keys."""
    import matplotlib.pyplot as plt

    split = max(0, min(split, len(scores)))
    out_a, lse_a = row_state(scores[:split], values[:split])
    out_b, lse_b = row_state(scores[split:], values[split:])
    merged = merged_row(out_a, lse_a, out_b, lse_b)
    exact, lse_all = row_state(scores, values)
    in_a = np.arange(len(scores)) < split
    colours = np.where(in_a, "#1f5fa8", "#e08a00")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained",
                                      gridspec_kw={"width_ratios": [3, 2]})
    left.bar(np.arange(len(scores)), scores, color=colours)
    left.axvline(split - 0.5, color="black", lw=1)
    for lse, name, colour in ((lse_a, "A", "#1f5fa8"), (lse_b, "B", "#e08a00")):
        if math.isfinite(lse):
            left.axhline(lse, color=colour, ls="--", lw=1, label=f"lse_{name} = {lse:.2f}")
    left.axhline(merged["lse"], color="black", ls=":", lw=1.5,
                 label=f"merged lse = {merged['lse']:.2f} (all keys: {lse_all:.2f})")
    left.set_xlabel("key j (blue: set A, orange: set B)")
    left.set_ylabel("score s_j")
    left.legend(fontsize=8, loc="best")
    left.set_title(f"A = keys 0..{split - 1}" if split else "A is empty (lse_A = -inf)",
                   fontsize=10)
    full_weights = np.exp(scores - lse_all)
    right.scatter(values[:, 0], values[:, 1], s=20 + 400 * full_weights, c=colours, alpha=0.45)
    for out, lse, name, colour in ((out_a, lse_a, "A", "#1f5fa8"), (out_b, lse_b, "B", "#e08a00")):
        if math.isfinite(lse):
            right.plot(*out, "s", color=colour, ms=9, label=f"out_{name}")
    if math.isfinite(lse_a) and math.isfinite(lse_b):
        right.plot([out_a[0], out_b[0]], [out_a[1], out_b[1]], color="grey", lw=1)
    right.plot(*exact, "o", ms=16, mfc="none", mec="#1b7f3b", mew=2, label="all keys at once")
    right.plot(*merged["out"], "*", color="black", ms=12, label="merged")
    right.set_title(f"w_A = {merged['w_a']:.3f}, w_B = {merged['w_b']:.3f}", fontsize=10)
    right.set_xlabel("value, feature 0")
    right.set_ylabel("value, feature 1")
    right.legend(fontsize=8, loc="best")
    return fig


def merge_explorer(n_keys: int = 12, seed: int = 4):
    """An ``IntSlider`` labelled "split" (keys before it form set A) that redraws
    :func:`merge_figure`: wherever the keys are split, the merge lands on the exact output.

    ``box.slider``, ``box.output`` and ``box.redraws`` are there for tests.
    """
    import ipywidgets as widgets

    scores, values = merge_problem(n_keys, seed)
    slider = widgets.IntSlider(value=n_keys // 2, min=0, max=n_keys, description="split",
                               continuous_update=False)
    return figure_explorer(lambda: merge_figure(scores, values, slider.value), slider=slider)


# -- the online softmax on one query row -------------------------------------------------------

def one_row_problem(n_keys: int = 24, seed: int = 4):
    """Scores (n_keys,) of one query and scalar values (n_keys,), with a late large score so
    that the running max changes more than once."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n_keys) * 1.5
    scores[n_keys * 2 // 3] += 4.0  # a big score in a later block: the max must move
    values = rng.normal(size=n_keys)
    return scores, values


def online_softmax_states(scores, values, block_size: int) -> list[dict]:
    """The running max, sum and output after each block of keys (one query, scalar values)."""
    running_max, running_sum, acc = -math.inf, 0.0, 0.0
    states = []
    for start in range(0, len(scores), block_size):
        block = scores[start:start + block_size]
        new_max = max(running_max, float(block.max()))
        rescale = math.exp(running_max - new_max)  # exp(-inf) = 0 on the first block
        weights = np.exp(block - new_max)
        running_sum = running_sum * rescale + float(weights.sum())
        acc = acc * rescale + float(weights @ values[start:start + block_size])
        running_max = new_max
        states.append({"start": start, "stop": start + len(block), "max": running_max,
                       "sum": running_sum, "rescale": rescale, "output": acc / running_sum})
    return states


def online_softmax_figure(scores, values, block_size: int, blocks_seen: int):
    """Scores by key with the blocks seen so far, and the running output against the exact one."""
    import matplotlib.pyplot as plt

    states = online_softmax_states(scores, values, block_size)
    blocks_seen = max(1, min(blocks_seen, len(states)))
    state = states[blocks_seen - 1]
    exact = float(np.exp(scores - scores.max()) @ values / np.exp(scores - scores.max()).sum())
    keys = np.arange(len(scores))
    colours = np.where(keys < state["start"], "#1f5fa8",
                       np.where(keys < state["stop"], "#e08a00", "#cccccc"))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained",
                                      gridspec_kw={"width_ratios": [2, 1]})
    left.bar(keys, scores, color=colours)
    left.axhline(state["max"], color="black", ls="--", lw=1)
    left.annotate(f"running max m = {state['max']:.2f}", (0, state["max"]), va="bottom",
                  fontsize=9)
    for start in range(0, len(scores), block_size):
        left.axvline(start - 0.5, color="grey", lw=0.5)
    left.set_xlabel("key j (blue: folded in, orange: this block, grey: not read yet)")
    left.set_ylabel("score s_j")
    left.set_title(f"after block {blocks_seen} of {len(states)}: old totals x "
                   f"exp(m_old - m_new) = {state['rescale']:.3f}", fontsize=10)
    outputs = [s["output"] for s in states[:blocks_seen]]
    right.plot(range(1, blocks_seen + 1), outputs, "o-", color="#e08a00",
               label="running output acc / l")
    right.axhline(exact, color="#1b7f3b", lw=2, label="exact softmax(s) . v")
    right.set_xlim(0.5, len(states) + 0.5)
    right.set_xlabel("blocks folded in")
    right.set_title(f"l = {state['sum']:.3f}", fontsize=10)
    right.legend(fontsize=8, loc="best")
    return fig


def online_softmax_stepper(block_size: int = 6, n_keys: int = 24, seed: int = 4):
    """An ``IntSlider`` labelled "blocks" that redraws :func:`online_softmax_figure`.

    ``box.slider``, ``box.output`` and ``box.redraws`` are there for tests.
    """
    import ipywidgets as widgets

    scores, values = one_row_problem(n_keys, seed)
    count = math.ceil(n_keys / block_size)
    slider = widgets.IntSlider(value=1, min=1, max=count, description="blocks",
                               continuous_update=False)
    return figure_explorer(
        lambda: online_softmax_figure(scores, values, block_size, slider.value), slider=slider)


# -- memory --------------------------------------------------------------------------------------

def peak_tensor_bytes(fn, *args, **kwargs):
    """Run ``fn`` and return ``(result, peak bytes)`` of the tensors it allocated that were
    alive at the same time (inputs and views excluded; freed tensors stop counting)."""
    result, watch = watch_tensors(fn, *args, **kwargs)
    return result, watch.peak_bytes


def memory_figure(seq_lens, measured: dict):
    """Peak bytes against N (log-log) for each named implementation, with N and N^2 guides."""
    import matplotlib.pyplot as plt

    n = np.asarray(seq_lens, dtype=float)
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    for (label, values), colour in zip(measured.items(), ("#b3261e", "#1f5fa8", "#2e7d32")):
        ax.loglog(n, np.asarray(values) / 2**20, "o-", label=label, color=colour)
    first = min(values[0] for values in measured.values()) / 2**20
    ax.loglog(n, first * (n / n[0]), color="grey", ls=":", lw=1, label="slope 1 (N)")
    ax.loglog(n, first * (n / n[0]) ** 2, color="grey", ls="--", lw=1, label="slope 2 (N^2)")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("peak MiB of tensors the call allocated")
    ax.legend(fontsize=9)
    ax.set_title("Memory of one attention call")
    return fig


# -- the Triton kernel and the benchmark -------------------------------------------------------

def kernel_source(name: str, path: Path = KERNEL_FILE) -> str:
    """Source text of function ``name`` in the Triton kernel module, read without importing it
    (importing triton is not needed to read the kernel)."""
    text = Path(path).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(text.splitlines()[start - 1:node.end_lineno])
    raise ValueError(f"name={name!r}: no such function in {path}")


def bench_markdown(seq_lens=(512, 1024), num_heads: int = 4, head_dim: int = 64,
                   repeats: int = 3) -> str:
    """The ``mhalib bench`` table of the attention core on this machine (Markdown), on one CPU
    thread (as ``mhalib bench --quick``: steadier on a shared machine) or on the GPU.

    Where the benchmark cannot run (it needs the course's answer key, which the grading
    sandbox does not ship), returns a sentence saying so instead.
    """
    try:
        import torch

        from mhalib.bench.cases import core_cases
        from mhalib.bench.report import format_rows
        from mhalib.bench.runner import run_benchmark

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.float16 if device.type == "cuda" else torch.float32
        cases = core_cases(1, num_heads, tuple(seq_lens), head_dim, (False,))
        with single_thread():
            rows = run_benchmark((), cases, device, dtype, repeats, progress=False)
    except ImportError as error:
        return f"*The benchmark is not available here ({error}).*"
    return format_rows(rows)
