"""Smoke tests of `mhalib bench --quick` and `mhalib info` (through their command modules)."""

from __future__ import annotations

import argparse
import json

import torch

from mhalib.commands import bench, info


def _run(module, argv):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


def test_bench_quick_prints_tables(capsys):
    threads = torch.get_num_threads()
    try:
        code = _run(bench, ["--quick", "--no-progress"])
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("# mhalib bench: torch 2.13")
    assert "### layer: B=2 N=32 d_model=32 H=4 full" in out
    assert "### layer: B=2 N=32 d_model=32 H=4 causal" in out
    assert "### core: B=1 H=2 N=64 d_head=16 causal" in out
    for name in ("numpy", "torch explicit", "torch SDPA", "nn.MultiheadAttention", "mhalib tiled"):
        assert f"| {name} " in out
    assert "MISMATCH" not in out


def test_bench_suite_and_only_filters(capsys):
    threads = torch.get_num_threads()
    try:
        _run(
            bench,
            [
                "--quick",
                "--no-progress",
                "--suite",
                "core",
                "--causal",
                "no",
                "--only",
                "mhalib tiled",
            ],
        )
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "### layer" not in out and out.count("### core") == 1
    assert "| mhalib tiled" in out and "| torch SDPA" in out and "| torch explicit" not in out


def test_bench_cuda_request_without_gpu_is_an_error(capsys):
    if torch.cuda.is_available():
        return
    assert _run(bench, ["--quick", "--device", "cuda"]) == 2
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err


def test_info_reports_versions(capsys):
    assert _run(info, ["--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["torch"] == torch.__version__.split("+")[0] or facts["torch"] == torch.__version__
    assert facts["cuda available"] == str(torch.cuda.is_available())
    assert "flash_attention backend (float16, d=64)" in facts
    assert _run(info, []) == 0
    assert "python" in capsys.readouterr().out
