"""Registers, spills, shared memory and occupancy of the Triton flash kernel on sm_80 and sm_90.

No GPU needed: every specialization the wrapper can launch is compiled with Triton for each
architecture (the launch parameters of mhalib/kernels/triton_config.py) and measured with
the ``ptxas -v`` of the triton wheel. Prints Markdown tables for docs/benchmarks.md.

Usage:
    .venv/bin/python benchmarks/triton_compile_report.py [--tutorial PATH] [--search] [--jobs 2]

``--tutorial PATH``: also compile the forward kernel ``_attn_fwd`` of Triton's fused-attention
tutorial, ``python/tutorials/06-fused-attention.py`` in https://github.com/triton-lang/triton
(its tensor-descriptor version, Triton 3.3 and later; use the tag of the installed triton),
with our launch parameters and with each candidate of its own autotuning list, and print its
numbers beside ours. Only numbers are printed; the tutorial's code is never copied.

``--search``: compile our kernel (fp16, the ragged shape, causal and not) for every
BLOCK_M x BLOCK_N x warps x stages in SEARCH_SPACE and print the config the rule in
mhalib/kernels/triton_config.py picks per architecture and head dim (minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mhalib.kernels.flash_compile_check import (  # noqa: E402
    Specialization,
    all_specializations,
    compile_all,
)
from mhalib.kernels.gpu_resources import ARCH_LIMITS  # noqa: E402
from mhalib.kernels.triton_compile import map_in_processes  # noqa: E402
from mhalib.kernels.triton_config import (  # noqa: E402
    CHECKED_ARCHS,
    SUPPORTED_HEAD_DIMS,
    LaunchConfig,
    launch_config,
)

COLUMNS = (
    "| arch | dtype | d | mask | shape | BLOCK_M x N, warps, stages | registers | spill st/ld B "
    "| stack B | shared KiB | blocks/SM | occupancy | tensor-core ops |"
)
SEARCH_SPACE = [
    LaunchConfig(block_m, block_n, warps, stages)
    for block_m in (64, 128)
    for block_n in (32, 64, 128)
    for warps in (4, 8)
    for stages in (2, 3)
]
MAX_REGISTERS = 240  # headroom below 255, so a small compiler change does not start spilling


def markdown_header(first_columns: str = "") -> str:
    columns = first_columns + COLUMNS
    return columns + "\n" + "|---" * (columns.count("|") - 1) + "|"


def table_row(spec: Specialization, config: LaunchConfig, compiled, dtype: str = "") -> str:
    res = compiled.resources
    mask = "causal" if spec.causal else "full"
    return (
        f"| sm_{spec.arch} | {dtype or spec.dtype} | {spec.head_dim} | {mask} | {spec.shape} | "
        f"{config.block_m} x {config.block_n}, {config.num_warps}, {config.num_stages} | "
        f"{res.registers} | {res.spill_store_bytes}/{res.spill_load_bytes} | {res.stack_bytes} | "
        f"{res.shared_bytes / 1024:.0f} | {compiled.blocks_per_sm} | {compiled.occupancy:.1%} | "
        f"{compiled.tensor_core_instructions} |"
    )


def print_our_table(jobs: int) -> None:
    """Every specialization, both stand-in shapes; fp16 and bf16 share a row when equal."""
    ragged = all_specializations()
    specs = ragged + [replace(spec, shape="aligned") for spec in ragged]
    results = dict(zip(specs, compile_all(specs, jobs)))
    print("### mhalib kernel, every specialization the wrapper launches\n")
    print(markdown_header())
    for spec, compiled in results.items():
        if spec.dtype != "float16":
            continue
        config = launch_config(spec.arch, spec.head_dim)
        twin = results[replace(spec, dtype="bfloat16")]
        if twin == compiled:
            print(table_row(spec, config, compiled, dtype="fp16, bf16"))
        else:
            print(table_row(spec, config, compiled))
            print(table_row(replace(spec, dtype="bfloat16"), config, twin))


def print_tutorial_tables(path: Path, jobs: int) -> None:
    """Ours and the tutorial's, fp16, same launch parameters; then its autotuning candidates."""
    from mhalib.kernels.tutorial_compile import compile_tutorial, tutorial_candidates

    specs = [
        Specialization(arch, "float16", d, causal, "aligned")
        for arch in CHECKED_ARCHS
        for d in (64, 128)  # the tutorial asserts BLOCK_N <= HEAD_DIM and takes d >= 64 here
        for causal in (False, True)
    ]
    configs = [launch_config(spec.arch, spec.head_dim) for spec in specs]
    # the tutorial's kernel asserts BLOCK_N <= HEAD_DIM: cap it there
    capped = [replace(c, block_n=min(c.block_n, s.head_dim)) for s, c in zip(specs, configs)]
    ours = compile_all(specs, jobs)
    items = [(path, spec, config) for spec, config in zip(specs, capped)]
    theirs = map_in_processes(compile_tutorial, items, jobs)
    print("\n### Beside the tutorial's kernel (fp16, B=2, H=16, N=1024, our launch parameters,")
    print("BLOCK_N capped at d for the tutorial, whose kernel asserts BLOCK_N <= HEAD_DIM)\n")
    print(markdown_header("| kernel "))
    rows = zip(specs, configs, capped, ours, theirs)
    for spec, config, tutorial_config, mine, tutorial in rows:
        print("| mhalib " + table_row(spec, config, mine))
        print("| tutorial " + table_row(spec, tutorial_config, tutorial))
    print("\n### The tutorial's own autotuning candidates (fp16, same shape)\n")
    print("| arch | d | mask | candidates | spill-free | best spill-free occupancy |")
    print("|---|---:|---|---:|---:|---:|")
    for spec in specs:
        candidates = tutorial_candidates(path, spec)
        results = map_in_processes(compile_tutorial, [(path, spec, c) for c in candidates], jobs)
        clean = [r for r in results if not r.resources.spills]
        best = max((r.occupancy for r in clean), default=0.0)
        mask = "causal" if spec.causal else "full"
        print(f"| sm_{spec.arch} | {spec.head_dim} | {mask} | {len(candidates)} | {len(clean)} "
              f"| {best:.1%} |")


def pick_config(results: dict) -> LaunchConfig | None:
    """The rule of triton_config.py: {config: [compiled, ...]} -> the config to launch."""
    def fits(config):
        return all(not r.resources.spills and not r.resources.stack_bytes
                   and r.resources.registers <= MAX_REGISTERS for r in results[config])

    usable = [config for config in results if fits(config)]
    preferred = [config for config in usable if config.block_m == 128] or usable
    return max(
        preferred,
        key=lambda c: (min(r.occupancy for r in results[c]), c.block_n, c.num_stages),
        default=None,
    )


def print_search(jobs: int) -> None:
    """Compile SEARCH_SPACE for every (arch, head dim) and print the pick."""
    print("\n### Search (fp16, ragged shape, causal and not; worst of the two)\n")
    print("| arch | d | picked: BLOCK_M x N, warps, stages | registers | occupancy "
          "| spill-free configs |")
    print("|---|---:|---|---:|---:|---:|")
    for arch in CHECKED_ARCHS:
        for d in SUPPORTED_HEAD_DIMS:
            specs = [Specialization(arch, "float16", d, causal) for causal in (False, True)]
            pairs = [(spec, config) for config in SEARCH_SPACE for spec in specs]
            compiled = compile_all([p[0] for p in pairs], jobs, [p[1] for p in pairs])
            results = {}
            for (_, config), kernel in zip(pairs, compiled):
                results.setdefault(config, []).append(kernel)
            pick = pick_config(results)
            clean = sum(not any(r.resources.spills for r in rs) for rs in results.values())
            if pick is None:
                print(f"| sm_{arch} | {d} | none | - | - | {clean} |")
                continue
            regs = max(r.resources.registers for r in results[pick])
            occ = min(r.occupancy for r in results[pick])
            shown = f"{pick.block_m} x {pick.block_n}, {pick.num_warps}, {pick.num_stages}"
            print(f"| sm_{arch} | {d} | {shown} | {regs} | {occ:.1%} | {clean} of {len(results)} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tutorial", type=Path, help="path of 06-fused-attention.py")
    parser.add_argument("--search", action="store_true", help="search the launch parameters")
    parser.add_argument("--jobs", type=int, default=2, help="compiler processes (default 2)")
    args = parser.parse_args(argv)
    if args.tutorial is not None and not args.tutorial.is_file():
        parser.error(f"--tutorial {args.tutorial}: no such file")
    start = time.perf_counter()
    import torch
    import triton

    limits = "; ".join(
        f"{limit.name}: {limit.shared_per_block // 1024} KiB shared per block"
        for limit in ARCH_LIMITS.values()
    )
    print(f"triton {triton.__version__}, torch {torch.__version__}; {limits}\n")
    print_our_table(args.jobs)
    if args.tutorial:
        print_tutorial_tables(args.tutorial.resolve(), args.jobs)
    if args.search:
        print_search(args.jobs)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
