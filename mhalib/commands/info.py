"""``mhalib info``: the device and library versions the course runs on."""

from __future__ import annotations

import argparse

HELP = "Print the device, thread count and library versions."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def collect() -> dict[str, str]:
    """Versions and device facts as strings (missing packages say 'not installed')."""
    import importlib.metadata
    import os
    import platform
    import sys

    import mhalib

    info = {
        "mhalib": mhalib.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu cores": str(os.cpu_count()),
    }
    for package in ("torch", "numpy", "triton", "matplotlib", "tqdm", "nbgrader", "hypothesis"):
        try:
            info[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            info[package] = "not installed"
    try:
        import torch
    except ImportError:
        return info
    info["torch threads"] = str(torch.get_num_threads())
    info["cuda available"] = str(torch.cuda.is_available())
    if torch.cuda.is_available():
        info["cuda version"] = str(torch.version.cuda)
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            info[f"cuda:{index}"] = f"{props.name}, {props.total_memory / 2**30:.1f} GiB"
    from mhalib.kernels.dispatch import backend_for

    device = "cuda" if torch.cuda.is_available() else "cpu"
    backend, reason = backend_for(device, torch.float16, 64)
    info["flash_attention backend (float16, d=64)"] = f"{backend} ({reason})"
    return info


def run(args: argparse.Namespace) -> int:
    info = collect()
    if args.json:
        import json

        print(json.dumps(info, indent=2))
        return 0
    width = max(len(key) for key in info)
    for key, value in info.items():
        print(f"{key.ljust(width)}  {value}")
    return 0
