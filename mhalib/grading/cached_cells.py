"""Which instructor cells run once per class: the cell metadata the instructor sets.

A code cell of the source notebook marked ``{"mhalib": {"class_cache": true}}`` runs once for
the whole class (:mod:`mhalib.grading.class_run`), and a learner's unchanged copy of it is
replayed from that run inside the sandbox (:mod:`mhalib.grading.sandbox.class_cache`, where the
mechanism is described). ``"memo": ["package.module.NAME", ...]`` names the process-level dicts
the cell fills, whose new entries travel with it.
"""

from __future__ import annotations

METADATA_KEY = "mhalib"


def is_cacheable(cell: dict) -> bool:
    """True for a code cell the instructor marked ``{"mhalib": {"class_cache": true}}``."""
    meta = cell.get("metadata", {}).get(METADATA_KEY) if isinstance(cell, dict) else None
    return (cell.get("cell_type") == "code" and isinstance(meta, dict)
            and meta.get("class_cache") is True)


def cell_source(cell: dict) -> str:
    """A cell's source as one string (nbformat allows a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def memo_paths(cell: dict) -> list[str]:
    """The dotted names of the memo dicts a cacheable cell fills (cell metadata ``memo``)."""
    meta = cell.get("metadata", {}).get(METADATA_KEY, {})
    paths = meta.get("memo", []) if isinstance(meta, dict) else []
    return [str(p) for p in paths] if isinstance(paths, list) else []
