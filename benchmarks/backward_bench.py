"""Attention's backward pass on this machine: time and peak memory of each implementation in the
same run, against autograd through ``F.scaled_dot_product_attention``.

Implementations (one head count, lengths as given, float32):

- ``autograd, SDPA``: the backward of PyTorch's fused kernel (on a CPU its flash kernel, which
  keeps out and the log-sum-exp);
- ``autograd, explicit``: the backward of softmax(q k^T / sqrt(d)) v, which kept p;
- ``mhalib tiled``: :func:`mhalib.kernels.tiled_backward.tiled_attention_backward`, from out
  and lse;
- ``lesson 12 answer key``: :func:`mhalib.reference.flash_attention_backward` (key blocks of 64,
  all queries at once, a Python loop).

Each row gives the backward call's median time over interleaved repeats, its ratio to SDPA's,
the memory the call adds at its peak (``mhalib.bench.measure.peak_memory_bytes``: the rise of
the process's resident set on Linux), what the forward kept for it (measured with
``saved_tensors_hooks``; the tiled rows keep out and lse), and the largest difference from
SDPA's gradients. Prints Markdown; ``--write-docs`` replaces the section in docs/benchmarks.md::

    .venv/bin/python benchmarks/backward_bench.py --write-docs
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from mhalib.accounting.saved_tensors import saved_for_backward
from mhalib.bench.measure import median_times, peak_memory_bytes
from mhalib.kernels.tiled_backward import tiled_attention_backward
from mhalib.reference import flash_attention_backward
from mhalib.viz.lesson12 import attention_with_lse

REPO = Path(__file__).resolve().parent.parent
SECTION = "## Attention backward (lesson 12)"
EXPLICIT_MAX_N = 4096  # the explicit formula keeps and builds several (H, N, N) tensors


def _explicit(q, k, v, causal):
    n = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(scores, dim=-1) @ v


def case_rows(heads: int, n: int, d: int, causal: bool, repeats: int) -> list[dict]:
    device = torch.device("cpu")
    gen = torch.Generator().manual_seed(n)
    q, k, v, grad_out = (torch.randn(1, heads, n, d, generator=gen) for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    sdpa_out, sdpa_kept = saved_for_backward(
        F.scaled_dot_product_attention, *leaves, is_causal=causal, exclude=leaves)
    with torch.no_grad():
        out, lse = attention_with_lse(q, k, v, causal)
    fns = {"autograd, SDPA": lambda: torch.autograd.grad(sdpa_out, leaves, grad_out,
                                                        retain_graph=True),
           "mhalib tiled": lambda: tiled_attention_backward(q, k, v, out, lse, grad_out,
                                                            causal=causal),
           "lesson 12 answer key": lambda: flash_attention_backward(
               q, k, v, out, lse, grad_out, 64, causal)}
    kept = {"autograd, SDPA": sdpa_kept.total_bytes,
            "mhalib tiled": out.numel() * 4 + lse.numel() * 4,
            "lesson 12 answer key": out.numel() * 4 + lse.numel() * 4}
    if n <= EXPLICIT_MAX_N:
        explicit_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        explicit_out, explicit_kept = saved_for_backward(_explicit, *explicit_leaves, causal,
                                                         exclude=explicit_leaves)
        fns["autograd, explicit"] = lambda: torch.autograd.grad(
            explicit_out, explicit_leaves, grad_out, retain_graph=True)
        kept["autograd, explicit"] = explicit_kept.total_bytes
    reference = fns["autograd, SDPA"]()
    times = median_times(fns, device, repeats)
    rows = []
    for name, fn in fns.items():
        grads = fn()
        gap = max(float((g - r).abs().max()) for g, r in zip(grads, reference))
        peak = peak_memory_bytes(fn, device)
        rows.append({"case": f"H={heads} N={n} d={d} {'causal' if causal else 'full'}",
                     "name": name, "ms": times[name] * 1e3,
                     "ratio": times[name] / times["autograd, SDPA"],
                     "peak": None if peak is None else peak / 2**20,
                     "kept": kept[name] / 2**20, "gap": gap})
    return rows


def render(rows: list[dict], threads: int, repeats: int) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [SECTION, "",
             f"Measured by `benchmarks/backward_bench.py` on {platform.system()} "
             f"{platform.machine()} ({os.cpu_count()} cores, no GPU), torch {torch.__version__}, "
             f"{threads} thread(s), float32, batch 1, median of {repeats} interleaved calls; "
             f"load average {load:.2f} at the end (other work on the machine included). "
             "Backward call only: the forward ran before; `peak MiB` is the memory the call "
             "adds at its peak (resident set), `kept MiB` what the forward kept for it "
             "(saved_tensors_hooks; for the tiled rows out and lse), `max |diff|` the largest "
             "difference from SDPA's gradients.", "",
             "| case | implementation | time | x SDPA | peak MiB | kept MiB | max diff |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        peak = "" if row["peak"] is None else f"{row['peak']:.0f}"
        lines.append(f"| {row['case']} | {row['name']} | {row['ms']:.0f} ms | "
                     f"{row['ratio']:.2f} | {peak} | {row['kept']:.0f} | {row['gap']:.1e} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for n in args.seq_lens:
        for causal in (False, True):
            print(f"N={n} causal={causal} ...", file=sys.stderr, flush=True)
            rows += case_rows(args.heads, n, args.head_dim, causal, args.repeats)
    section = render(rows, args.threads, args.repeats)
    print(section)
    if args.write_docs:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from lesson_times import write_docs

        write_docs(section, REPO / "docs" / "benchmarks.md", SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
