"""Every rule of the attack catalogue holds when ``mhalib grade`` grades it (slow: the whole
catalogue is graded once per session, 10 to 16 minutes on 2 shared cores).

Each entry is one test: an attack passes when the grader refused its credit or flagged it as
its rules allow; a control passes when it kept every point with no review flag. Set
``MHALIB_ATTACKS_ONLY`` (space-separated name parts, as ``--only``) to grade part of it, and
``MHALIB_ATTACKS_REPORT`` to a past run's report.json to check that run without grading.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.grading.attacks.catalogue import CATALOGUE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def attack_report():
    past = os.environ.get("MHALIB_ATTACKS_REPORT")
    if past:
        return json.loads(Path(past).read_text(encoding="utf-8"))
    from mhalib.grading.sandbox_host import bwrap_problem

    problem = bwrap_problem()
    if problem:
        pytest.skip(f"the catalogue is graded in bubblewrap: {problem}")
    from tests.grading.attacks.runner import run_catalogue

    only = os.environ.get("MHALIB_ATTACKS_ONLY", "").split() or None
    out = Path(tempfile.mkdtemp(prefix="mhalib-attacks-test-"))
    return run_catalogue(out, only)


@pytest.mark.parametrize("entry", CATALOGUE, ids=[entry.name for entry in CATALOGUE])
def test_entry(attack_report, entry):
    rows = {row["name"]: row for row in attack_report["rows"]}
    if entry.name not in rows:
        pytest.skip("not in this run (MHALIB_ATTACKS_ONLY)")
    row = rows[entry.name]
    failed = [f"{r['rule']}: got {r['seen']}" for r in row["rules"] if not r["held"]]
    what = "control lost credit or was flagged" if entry.kind == "control" else "got through"
    assert not failed, f"{entry.name} ({entry.mechanism}) {what}: " + "; ".join(failed)
