"""Trained models kept on disk, so that lesson 08 trains once per machine, not once per kernel.

A model is stored under a key made of everything that decides it: the config, the torch
version and the source of the code that builds, feeds and trains it (this package's ``data``,
``model`` and ``train`` modules). A change to any of them is a new key, so a stored model is
never stale; a file that cannot be read is trained again.

Where: ``$MHALIB_CACHE_DIR`` (``off`` keeps nothing), else ``$XDG_CACHE_HOME/mhalib``, else
``~/.cache/mhalib``; the files are ``induction-<key>.pt`` (about 100 kB each). A folder that
cannot be written (a read-only home, a grader's sandbox) only means the model is trained each
time, as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

CACHE_VARIABLE = "MHALIB_CACHE_DIR"
_SOURCES = ("data.py", "model.py", "train.py")


def cache_dir() -> Path | None:
    """The folder of stored models, or None when ``$MHALIB_CACHE_DIR`` is ``off``."""
    chosen = os.environ.get(CACHE_VARIABLE, "")
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mhalib"


def model_key(config) -> str:
    """A hex digest of what decides the model trained with ``config``."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode())
    digest.update(torch.__version__.encode())
    for name in _SOURCES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:24]


def stored_path(config) -> Path | None:
    folder = cache_dir()
    return None if folder is None else folder / f"induction-{model_key(config)}.pt"


def load(config, build_model):
    """``(model, history)`` stored for ``config`` (the model made by ``build_model(config)``,
    in eval mode), or None when there is none or it cannot be read."""
    path = stored_path(config)
    if path is None or not path.is_file():
        return None
    try:
        stored = torch.load(path, map_location="cpu", weights_only=True)
        model = build_model(config)
        model.load_state_dict(stored["state_dict"])
        history = stored["history"]
    except Exception:  # a partial or foreign file: train again (and overwrite it)
        return None
    model.eval()
    return model, history


def store(config, model, history) -> Path | None:
    """Write ``model`` and ``history`` for ``config`` (atomically: a reader never sees half a
    file); the path, or None when the folder cannot be written."""
    path = stored_path(config)
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".induction-",
                                             suffix=".part")
    except OSError:
        return None
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save({"state_dict": model.state_dict(), "history": history}, file)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
        return None
    return path
