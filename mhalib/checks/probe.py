"""The probe: calls the learner's function on the checker's cases and records what comes back."""

from __future__ import annotations

import os
import time

from mhalib.checks.calls import (  # noqa: F401 (CallTimeout and time_limit: the probe's API)
    CallTimeout,
    run_case,
    time_limit,
)
from mhalib.checks.integrity import AnswerKeyWatch

MAX_OUTPUT_BYTES = 16 * 1024 * 1024  # per exercise, encoded
REPAIR_BUDGET_S = 2.0  # the search for a repair of a failing answer
VISIBLE_REPAIR_BUDGET_S = 0.06  # ... in the visible suite, where the learner waits for the check
REPAIR_BUDGET_VARIABLE = "MHALIB_REPAIR_BUDGET_S"  # seconds instead (0: no search), at most 10


def probe(exercise, func, seed: int, suite: str, call_timeout: float | None = None,
          repair_budget_s: float | None = None) -> dict:
    """Run ``func`` on every case of ``exercise``; returns a record for
    :func:`mhalib.checks.judge.judge_record`.

    The record holds per-case ``status`` (ok, error, timeout, too_large), the encoded ``output``,
    the ``error`` text and measured work in ``meta``. If the function reaches mhalib's own answer
    for this exercise, the whole record gets status ``called_answer_key``. A record with a
    failing case also holds the ``repair`` of the learner's code that makes every case right,
    when one small change does (:mod:`mhalib.checks.repairs`, within ``repair_budget_s``
    seconds, by default :func:`_repair_budget`'s; never in the grader's sandbox, which has no
    answer key to judge a try by).
    """
    timeout = exercise.call_timeout if call_timeout is None else call_timeout
    record = {"format": "mhalib-record/1", "exercise": exercise.name, "seed": seed,
              "suite": suite, "status": "ok", "cases": []}
    names = set(exercise.answer_key_names) | {exercise.name}
    watch = AnswerKeyWatch(names)
    budget = MAX_OUTPUT_BYTES
    cases = exercise.cases(seed, suite)
    slowest = 0.0  # seconds of the slowest call (what a try of a repair may take)
    for case in cases:
        started = time.perf_counter()
        entry = run_case(exercise, func, case, timeout, watch.watching)
        slowest = max(slowest, time.perf_counter() - started)
        size = len(str(entry["output"]))
        if size > budget:
            entry.update(status="too_large", output=None)
        budget -= min(size, budget)
        record["cases"].append(entry)
        if watch.reached:
            return {**record, "status": "called_answer_key", "cases": [],
                    "reason": f"your function calls mhalib's own answer ({watch.reached}); "
                              "write the computation yourself, this exercise scores 0."}
    budget = _repair_budget(suite) if repair_budget_s is None else repair_budget_s
    if budget > 0 and getattr(exercise, "repairable", True) and \
            not grading_mode():  # (the grader's sandbox has no answer key to judge a try by)
        try:
            from mhalib.checks.repairs import find_repair

            repair = find_repair(exercise, func, cases, record["cases"], timeout, budget,
                                 slowest, spare=lambda: exercise.spare_cases(seed, suite))
        except Exception:  # a repair is a hint: its search must never cost the record
            repair = None
        if repair is not None:
            record["repair"] = repair
    return record


def grading_mode() -> bool:
    """True inside the grader's sandbox, where checks record instead of judging."""
    return os.environ.get("MHALIB_GRADING") == "1"


def _repair_budget(suite: str) -> float:
    """Seconds for the repair search: the environment's :data:`REPAIR_BUDGET_VARIABLE` (at most
    10), else :data:`REPAIR_BUDGET_S`; in the visible suite (the learner waits) at most
    :data:`VISIBLE_REPAIR_BUDGET_S`."""
    try:
        budget = min(10.0, max(0.0, float(os.environ.get(REPAIR_BUDGET_VARIABLE,
                                                         REPAIR_BUDGET_S))))
    except ValueError:
        budget = REPAIR_BUDGET_S
    return min(budget, VISIBLE_REPAIR_BUDGET_S) if suite == "visible" else budget
