"""Recording mode: what the grader runs at the end of a learner's notebook, in the sandbox."""

from __future__ import annotations

import json
import os

from mhalib.checks.probe import probe
from mhalib.checks.registry import get_exercise


def grading_mode() -> bool:
    """True inside the grader's sandbox, where checks record instead of judging."""
    return os.environ.get("MHALIB_GRADING") == "1"


def record_exercises(namespace: dict, exercises: list[str], seed: int, out_dir: str,
                     call_timeout: float = 10.0) -> None:
    """Probe each exercise's function found in ``namespace``; write ``out_dir/<exercise>.json``."""
    os.makedirs(out_dir, exist_ok=True)
    for name in exercises:
        exercise = get_exercise(name)
        func = namespace.get(name)
        if not callable(func):
            record = {"format": "mhalib-record/1", "exercise": name, "seed": seed,
                      "suite": "grading", "status": "missing", "cases": []}
        else:
            record = probe(exercise, func, seed, "grading", call_timeout=call_timeout)
        path = os.path.join(out_dir, f"{name}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.replace(path + ".tmp", path)
