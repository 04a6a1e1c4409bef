"""Late access to the answer key, so checker modules import in the grader's sandbox without it."""

from __future__ import annotations

import importlib


def answer_key(name: str):
    """``mhalib.reference.<name>``, imported only when a judge needs it."""
    return getattr(importlib.import_module("mhalib.reference"), name)
