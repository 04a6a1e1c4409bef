"""The task folder: what a finished notebook left there comes back capped, links never followed."""

from __future__ import annotations

import os

from mhalib.grading.sandbox.limits import Limits
from mhalib.grading.sandbox.task_folder import SEALED_DIR, collect

LIMITS = Limits(record_bytes=1000).to_dict()


def test_records_and_class_cache_entries_come_back_up_to_the_record_limit(tmp_path):
    for folder in (SEALED_DIR, "cache"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "small.json").write_text("{}" + " " * 900)
        (tmp_path / folder / "large.json").write_text("{}" + " " * 1000)
    out = collect(str(tmp_path), LIMITS)
    for kind in ("records", "cache"):
        assert out[kind]["small"].startswith("{}"), kind
        assert out[kind]["large"] is None, kind  # present, but cut: the grader says bad_record


def test_a_record_that_is_a_link_is_not_followed(tmp_path):
    (tmp_path / SEALED_DIR).mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("solutions")
    os.symlink(secret, tmp_path / SEALED_DIR / "softmax.json")
    assert collect(str(tmp_path), LIMITS)["records"] == {}
