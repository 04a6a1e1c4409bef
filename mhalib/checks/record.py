"""Recording mode: what the grader runs at an exercise's test, in the sandbox's learner process.

Each exercise's seed comes from the warden (:mod:`mhalib.grading.sandbox.warden`) at the moment the
exercise is recorded, and the record goes straight back to it; nothing is written where the
notebook could change it later.
"""

from __future__ import annotations

from mhalib.checks.probe import grading_mode, probe  # noqa: F401 (grading_mode: this module's API)
from mhalib.checks.registry import get_exercise


def missing_record(name: str, seed: int) -> dict:
    """The record of an exercise whose function the notebook never defined."""
    return {"format": "mhalib-record/1", "exercise": name, "seed": seed, "suite": "grading",
            "status": "missing", "cases": []}


def record_exercises(namespace: dict, exercises: list[str], warden,
                     call_timeout: float = 10.0) -> None:
    """Probe each exercise's function found in ``namespace`` on the seed ``warden`` issues now,
    and hand the record back to it (``warden``: ``seed(name)`` and ``submit(name, record)``)."""
    for name in exercises:
        seed = warden.seed(name)
        func = namespace.get(name)
        if not callable(func):
            record = missing_record(name, seed)
        else:
            record = probe(get_exercise(name), func, seed, "grading", call_timeout=call_timeout)
        warden.submit(name, record)
