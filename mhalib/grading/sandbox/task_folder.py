"""The task folder between the zygote and one notebook's process.

Inputs (the submission's other files) go in before the fork; the notebook's process appends
its step log and writes records; the zygote reads them back afterwards without
trusting them: regular files only, links never followed, sizes capped.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat

from mhalib.grading.sandbox.warden import OUTCOME_FILE, SEALED_DIR


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


def learner_outcome(task_dir: str) -> dict | None:
    """How the learner's process ended, as the warden sealed it (None when it did not)."""
    text, _ = read_capped(os.path.join(task_dir, SEALED_DIR, OUTCOME_FILE), 4096)
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("exit_code"), int):
        return None
    return {"exit_code": data["exit_code"], "timed_out": bool(data.get("timed_out"))}


def collect(task_dir: str, limits: dict) -> dict:
    """Step log, sealed records and setup error of a finished notebook, as capped text (a
    record or a class-cache entry larger than ``limits["record_bytes"]`` comes back as None).

    ``records`` maps each seal's name (``<exercise>.<session>``) to its text: only what the
    warden wrote counts; the learner's process could not write there."""
    steps_cap = 3 * int(limits.get("output_bytes", 1_000_000)) + (1 << 20)
    steps, truncated = read_capped(os.path.join(task_dir, "steps.jsonl"), steps_cap)
    setup_error, _ = read_capped(os.path.join(task_dir, "setup_error.txt"), 2000)
    out = {"steps": steps or "", "steps_truncated": truncated, "records": {},
           "cache": {}, "setup_error": setup_error}
    for kind, folder in (("records", SEALED_DIR), ("cache", "cache")):  # cache: a class run's
        folder = os.path.join(task_dir, folder)                           # exported cells
        names = sorted(os.listdir(folder))[:64] if os.path.isdir(folder) else []
        for name in names:
            if name.endswith(".json") and name != OUTCOME_FILE:
                text, cut = read_capped(os.path.join(folder, name), int(limits["record_bytes"]))
                if text is not None:
                    out[kind][name[:-5]] = None if cut else text
    return out
