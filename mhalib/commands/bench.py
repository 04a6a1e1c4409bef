"""``mhalib bench``: time and size every attention implementation on the same inputs."""

from __future__ import annotations

import argparse
import sys

HELP = "Benchmark the attention implementations (time, peak memory, TFLOP/s, ratios)."

IMPLEMENTATIONS = (
    "numpy",
    "torch explicit",
    "torch SDPA",
    "nn.MultiheadAttention",
    "mhalib MultiHeadAttention",
    "reference online softmax",
    "mhalib tiled",
    "mhalib triton",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds")
    parser.add_argument(
        "--suite",
        choices=("all", "layer", "core"),
        default="all",
        help="layer: whole MHA layer; core: attention alone (default: both)",
    )
    parser.add_argument("--seq-lens", type=int, nargs="+", help="layer suite sequence lengths")
    parser.add_argument("--core-seq-lens", type=int, nargs="+", help="core suite lengths")
    parser.add_argument("--batch", type=int, help="layer suite batch size")
    parser.add_argument("--d-model", type=int, help="layer suite d_model")
    parser.add_argument("--heads", type=int, help="layer suite number of heads")
    parser.add_argument(
        "--causal", choices=("both", "yes", "no"), default="both", help="which masks to run"
    )
    parser.add_argument("--repeats", type=int, help="timed calls per implementation")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument(
        "--dtype",
        choices=("auto", "float32", "float16", "bfloat16", "float64"),
        default="auto",
        help="auto: float32 on CPU, float16 on CUDA",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=IMPLEMENTATIONS,
        metavar="IMPL",
        help=f"run only these (torch SDPA always runs): {', '.join(IMPLEMENTATIONS)}",
    )
    parser.add_argument(
        "--threads", type=int, help="torch.set_num_threads before running (--quick: 1)"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    import torch

    from mhalib.bench.cases import FULL, QUICK, core_cases, layer_cases
    from mhalib.bench.report import format_rows
    from mhalib.bench.runner import run_benchmark

    preset = QUICK if args.quick else FULL
    device = _device(args.device)
    if device is None:
        print("error: --device cuda but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    dtype = _dtype(args.dtype, device)
    threads = args.threads or (1 if args.quick else None)
    if threads:
        torch.set_num_threads(threads)
    causal_modes = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    layer = preset["layer"]
    core = preset["core"]
    layers = layer_cases(
        args.batch or layer["batch"],
        tuple(args.seq_lens or layer["seq_lens"]),
        args.d_model or layer["d_model"],
        args.heads or layer["num_heads"],
        causal_modes,
    )
    cores = core_cases(
        core["batch"],
        core["num_heads"],
        tuple(args.core_seq_lens or core["seq_lens"]),
        core["head_dim"],
        causal_modes,
    )
    if args.suite == "layer":
        cores = ()
    elif args.suite == "core":
        layers = ()
    repeats = args.repeats or preset["repeats"]
    print(_header(device, dtype, repeats))
    from tqdm.auto import tqdm

    def print_case(case_rows) -> None:  # each table as soon as its case is done
        tqdm.write(format_rows(case_rows), file=sys.stdout)
        sys.stdout.flush()

    rows = run_benchmark(
        layers,
        cores,
        device,
        dtype,
        repeats,
        only=set(args.only) if args.only else None,
        progress=not args.no_progress,
        on_case=print_case,
    )
    if any(row.impl == "mhalib triton" and row.seconds is None for row in rows):
        from mhalib.bench.gpu_status import triton_gpu_note

        print(triton_gpu_note())  # what is and is not known about its GPU speed
    bad = [row for row in rows if not row.ok]
    for row in bad:
        print(
            f"MISMATCH: {row.impl} on {row.case.describe()}: max |diff| {row.max_abs_diff:.3g}",
            file=sys.stderr,
        )
    return 1 if bad else 0


def _device(choice: str):
    import torch

    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        return None
    return torch.device(choice)


def _dtype(choice: str, device):
    import torch

    if choice == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    return getattr(torch, choice)


def _header(device, dtype, repeats: int) -> str:
    import torch

    where = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()
    return (
        f"# mhalib bench: torch {torch.__version__}, {device} ({where}), "
        f"{torch.get_num_threads()} threads, {dtype}, median of {repeats}\n"
        "# x SDPA / x nn.MHA: time divided by the torch built-in's time in this run; "
        "peak MiB: memory added at the peak of one call\n"
    )


def _cpu_name() -> str:
    import platform

    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
