"""The sandbox's half of the class cache: what a cell reads and binds, and reading an entry."""

from __future__ import annotations

import json

from mhalib.grading.sandbox.class_cache import CACHE_DIR, load_entry, read_and_assigned_names

TRAIN = ('import os\ntrained_in = os.getpid()\nweights = np.full(3, 0.5)\n'
         'print("trained in", trained_in, "sum", weights.sum())')


def test_the_cell_reads_and_assigns_what_its_source_says():
    assert read_and_assigned_names(TRAIN) == (["np", "print"], ["os", "trained_in", "weights"])


def _write_entry(task_dir, key: str, padding: int) -> None:
    folder = task_dir / CACHE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"key": key, "values": "", "outputs": [], "padding": "x" * padding}
    (folder / f"{key}.json").write_text(json.dumps(entry), encoding="utf-8")


def test_an_entry_is_read_up_to_the_record_limit_and_no_further(tmp_path):
    _write_entry(tmp_path, "small", 100)
    _write_entry(tmp_path, "large", 5000)
    assert load_entry(str(tmp_path), "small", max_bytes=1000)["key"] == "small"
    assert load_entry(str(tmp_path), "large", max_bytes=1000) is None
    assert load_entry(str(tmp_path), "absent", max_bytes=1000) is None
