"""The benchmark runner: every implementation agrees, and a wrong one is caught."""

from __future__ import annotations

import pytest
import torch

from mhalib.bench import implementations, runner
from mhalib.bench.cases import CoreCase, LayerCase
from mhalib.bench.report import format_rows

LAYER = LayerCase(batch=2, seq_len=12, d_model=16, num_heads=4, causal=True)
CORE = CoreCase(batch=1, num_heads=2, seq_len=40, head_dim=8, causal=False)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny sizes: one thread avoids OpenMP stalls when the test machine is busy."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _run(**kwargs):
    return runner.run_benchmark(
        kwargs.get("layers", [LAYER]),
        kwargs.get("cores", [CORE]),
        torch.device("cpu"),
        torch.float32,
        repeats=1,
        progress=False,
    )


@pytest.fixture(scope="module")
def rows():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run()
    finally:
        torch.set_num_threads(threads)


def test_all_cpu_implementations_agree_and_are_measured(rows):
    names = {(row.suite, row.impl) for row in rows}
    for name in (
        "numpy",
        "torch explicit",
        "torch SDPA",
        "nn.MultiheadAttention",
        "mhalib MultiHeadAttention",
        "mhalib tiled",
    ):
        assert ("layer", name) in names
    for row in rows:
        if row.impl == "mhalib triton":
            assert row.seconds is None and "CUDA" in row.note
            continue
        assert row.ok, (row.impl, row.max_abs_diff)
        assert row.seconds > 0 and row.flops > 0
        assert row.peak_bytes is None or row.peak_bytes >= 0
    sdpa = next(r for r in rows if r.suite == "layer" and r.impl == "torch SDPA")
    assert sdpa.vs_sdpa == 1.0


def test_wrong_implementation_is_flagged(monkeypatch):
    real = implementations.layer_implementations

    def with_a_bug(case, inputs):
        impls = real(case, inputs)
        good = impls["mhalib MultiHeadAttention"]
        impls["mhalib MultiHeadAttention"] = lambda: good() * 1.01
        return impls

    monkeypatch.setattr(runner, "layer_implementations", with_a_bug)
    rows = _run(cores=[])
    bad = [row.impl for row in rows if not row.ok]
    assert bad == ["mhalib MultiHeadAttention"]
    assert "MISMATCH" in format_rows(rows)


def test_report_has_one_table_per_case(rows):
    text = format_rows(rows)
    assert text.count("### layer: B=2 N=12 d_model=16 H=4 causal") == 1
    assert text.count("### core: B=1 H=2 N=40 d_head=8 full") == 1
    assert "| implementation" in text and "x SDPA" in text
    assert "- mhalib triton: skipped:" in text


@pytest.mark.parametrize("causal", [False, True])
def test_numpy_row_keeps_float32(causal):
    """NumPy 2 turns float32 into float64 when divided by a numpy float64 scalar; the numpy
    answer key must not, or the numpy row measures float64 arithmetic."""
    case = LayerCase(batch=1, seq_len=6, d_model=8, num_heads=2, causal=causal)
    inputs = implementations.make_layer_inputs(case, torch.device("cpu"), torch.float32)
    out = implementations.layer_implementations(case, inputs)["numpy"]()
    assert out.dtype == torch.float32
