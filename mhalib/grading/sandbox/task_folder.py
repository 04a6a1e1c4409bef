"""The task folder between the zygote and one notebook's process.

Inputs (the submission's other files) go in before the fork; the notebook's process appends
its step log and writes records; the zygote reads them back afterwards without
trusting them: regular files only, links never followed, sizes capped.
"""

from __future__ import annotations

import base64
import os
import shutil
import stat


def wipe(folder: str) -> None:
    """Empty ``folder`` (links are removed, never followed)."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def write_inputs(files: dict, target: str) -> None:
    """Write ``{relative path: base64}`` under ``target``, skipping unsafe paths."""
    for relative, encoded in files.items():
        parts = relative.split("/")
        if relative.startswith("/") or any(p in ("", ".", "..") for p in parts):
            continue
        path = os.path.join(target, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(encoded))


def read_capped(path: str, cap: int) -> tuple[str | None, bool]:
    """(text, truncated) of a regular file, never following links; (None, False) if absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None, False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, False
        data = os.read(fd, cap + 1)
        chunks = [data]
        while data and sum(map(len, chunks)) <= cap:
            data = os.read(fd, cap + 1 - sum(map(len, chunks)))
            chunks.append(data)
    finally:
        os.close(fd)
    blob = b"".join(chunks)
    return blob[:cap].decode("utf-8", "replace"), len(blob) > cap


def collect(task_dir: str, limits: dict) -> dict:
    """Step log, records and setup error of a finished notebook, as capped text (a record or a
    class-cache entry larger than ``limits["record_bytes"]`` comes back as None)."""
    steps_cap = 3 * int(limits.get("output_bytes", 1_000_000)) + (1 << 20)
    steps, truncated = read_capped(os.path.join(task_dir, "steps.jsonl"), steps_cap)
    setup_error, _ = read_capped(os.path.join(task_dir, "setup_error.txt"), 2000)
    out = {"steps": steps or "", "steps_truncated": truncated, "records": {},
           "cache": {}, "setup_error": setup_error}
    for kind in ("records", "cache"):  # cache: a class run's exported cells
        folder = os.path.join(task_dir, kind)
        names = sorted(os.listdir(folder))[:64] if os.path.isdir(folder) else []
        for name in names:
            if name.endswith(".json"):
                text, cut = read_capped(os.path.join(folder, name), int(limits["record_bytes"]))
                if text is not None:
                    out[kind][name[:-5]] = None if cut else text
    return out
