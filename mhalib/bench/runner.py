"""Run the benchmark: build inputs, check every implementation's output, measure, compare.

For each case: one call per implementation checks its output against ``torch SDPA`` (and
warms it up), one more call measures peak memory, then ``repeats`` rounds time all of
them in turn. Ratios are to the torch built-ins measured in the same run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mhalib.accounting.flops import gqa_flops, visible_pairs
from mhalib.bench.cases import CoreCase, LayerCase
from mhalib.bench.implementations import (
    BASELINE,
    TORCH_MODULE,
    core_implementations,
    layer_implementations,
    make_layer_inputs,
)
from mhalib.bench.measure import median_times, peak_memory_bytes
from mhalib.bench.sdpa_backend import call_recording_sdpa_backend

TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-3, torch.float16: 2e-2, torch.bfloat16: 6e-2}


@dataclass
class Row:
    """One implementation on one case. ``seconds`` is None when it was skipped."""

    suite: str
    case: LayerCase | CoreCase
    impl: str
    seconds: float | None = None
    peak_bytes: int | None = None
    flops: int = 0
    max_abs_diff: float | None = None
    ok: bool = True
    vs_sdpa: float | None = None
    vs_torch_module: float | None = None
    note: str = ""

    @property
    def tflops_per_s(self) -> float | None:
        return None if not self.seconds else self.flops / self.seconds / 1e12


def run_benchmark(
    layer_cases,
    core_cases,
    device: torch.device,
    dtype: torch.dtype,
    repeats: int,
    only: set[str] | None = None,
    progress: bool = True,
    on_case=None,
) -> list[Row]:
    """Measure every implementation (or those named in ``only``) on every case.

    ``on_case(rows)``, if given, is called with each case's rows as soon as it is done.
    """
    from tqdm.auto import tqdm

    jobs = [("layer", case) for case in layer_cases] + [("core", case) for case in core_cases]
    rows: list[Row] = []
    with (
        torch.inference_mode(),
        tqdm(total=0, desc="bench", unit="call", disable=not progress) as bar,
    ):
        for number, (suite, case) in enumerate(jobs, start=1):
            bar.set_postfix_str(f"case {number}/{len(jobs)}: {suite} {case.describe()}")
            with torch.inference_mode(False):  # plain tensors: SDPA's backend stays visible
                impls, flops = _build(suite, case, device, dtype)
            if only is not None:
                impls = {name: fn for name, fn in impls.items() if name in only or name == BASELINE}
            runnable = sum(not isinstance(fn, str) for fn in impls.values())
            bar.total += 1 + runnable * (repeats + 2)  # reference, check, memory, timed calls
            bar.refresh()
            done = _measure_case(
                suite, case, impls, flops, device, dtype, repeats, lambda: bar.update()
            )
            rows.extend(done)
            if on_case is not None:
                on_case(done)
    return rows


def _build(suite, case, device, dtype):
    if suite == "layer":
        inputs = make_layer_inputs(case, device, dtype)
        flops = gqa_flops(
            case.seq_len,
            case.d_model,
            case.num_heads,
            case.num_heads,
            batch_size=case.batch,
            causal=case.causal,
        )["total"]
        return layer_implementations(case, inputs), flops
    generator = torch.Generator(device="cpu").manual_seed(0)
    shape = (case.batch, case.num_heads, case.seq_len, case.head_dim)
    q, k, v = (torch.randn(shape, generator=generator).to(device, dtype) for _ in range(3))
    pairs = visible_pairs(case.seq_len, case.seq_len) if case.causal else case.seq_len**2
    flops = 4 * case.batch * case.num_heads * pairs * case.head_dim
    return core_implementations(case, q, k, v), flops


def _measure_case(suite, case, impls, flops, device, dtype, repeats, tick) -> list[Row]:
    rows = {name: Row(suite, case, name, flops=flops) for name in impls}
    runnable = {}
    reference, backends = call_recording_sdpa_backend(impls[BASELINE])
    rows[BASELINE].note = "SDPA ran " + ", ".join(backends)
    tick()
    for name, fn in impls.items():
        if isinstance(fn, str):
            rows[name].note = f"skipped: {fn}"
            continue
        out = fn()  # also the warm-up call
        diff = (out.to(device=reference.device, dtype=torch.float32) - reference.float()).abs()
        rows[name].max_abs_diff = float(diff.max())
        rows[name].ok = rows[name].max_abs_diff <= TOLERANCE.get(dtype, 1e-3) * max(
            1.0, float(reference.abs().max())
        )
        del out, diff
        tick()
        rows[name].peak_bytes = peak_memory_bytes(fn, device)
        tick()
        runnable[name] = fn
    del reference
    for name, seconds in median_times(runnable, device, repeats, on_call=tick).items():
        rows[name].seconds = seconds
    baseline = rows[BASELINE].seconds
    module = rows[TORCH_MODULE].seconds if TORCH_MODULE in rows else None
    for row in rows.values():
        if row.seconds is not None:
            row.vs_sdpa = row.seconds / baseline if baseline else None
            row.vs_torch_module = row.seconds / module if module else None
    return list(rows.values())
