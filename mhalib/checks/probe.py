"""The probe: calls the learner's function on the checker's cases and records what comes back."""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from contextlib import contextmanager, nullcontext

from mhalib.checks.encoding import EncodingError, encode, to_plain
from mhalib.checks.integrity import AnswerKeyWatch

MAX_OUTPUT_BYTES = 16 * 1024 * 1024  # per exercise, encoded
REPAIR_BUDGET_S = 2.0  # the search for a repair of a failing answer
VISIBLE_REPAIR_BUDGET_S = 0.06  # ... in the visible suite, where the learner waits for the check
REPAIR_BUDGET_VARIABLE = "MHALIB_REPAIR_BUDGET_S"  # seconds instead (0: no search), at most 10


class CallTimeout(Exception):
    """One call of the learner's function ran out of time."""


class MetaOutput(Exception):
    """The learner's function returned a tensor on torch's 'meta' device (no values)."""


META_OUTPUT = ("returned a tensor on device 'meta': it has a shape but no values (made with "
               "device='meta' or moved there); compute the output from the inputs' values, on "
               "the inputs' device (device=x.device)")


def _on_meta_device(output) -> bool:
    """True when ``output`` (or a tensor inside a tuple, list or dict) is on device 'meta'."""
    if isinstance(output, (tuple, list)):
        return any(_on_meta_device(item) for item in output)
    if isinstance(output, dict):
        return any(_on_meta_device(item) for item in output.values())
    device = getattr(output, "device", None)
    return getattr(device, "type", None) == "meta"


@contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`CallTimeout` after ``seconds`` (main thread only; elsewhere no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _alarm(signum, frame):
        raise CallTimeout(f"call took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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
            os.environ.get("MHALIB_GRADING") != "1":  # (the grader's sandbox has no answer key)
        try:
            from mhalib.checks.repairs import find_repair

            repair = find_repair(exercise, func, cases, record["cases"], timeout, budget,
                                 slowest)
        except Exception:  # a repair is a hint: its search must never cost the record
            repair = None
        if repair is not None:
            record["repair"] = repair
    return record


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


def run_case(exercise, func, case, timeout: float | None, watching=nullcontext) -> dict:
    """Call ``func`` on one case: the record's entry (``status``, encoded ``output``,
    ``error``, ``meta``). The learner's exception is the result for the case."""
    entry = {"status": "ok", "output": None, "error": None, "meta": {}}
    try:
        with watching(), time_limit(timeout):
            output, meta = exercise.call(func, case)
        if _on_meta_device(output):
            raise MetaOutput(META_OUTPUT)
        entry["output"] = _encoded(output)
        entry["meta"] = meta
    except CallTimeout:
        entry["status"] = "timeout"
    except MetaOutput as error:
        entry.update(status="error", error=str(error))
    except EncodingError as error:
        entry.update(status="error", error=f"an unusable return value ({error})")
    except Exception as error:  # the learner's exception is the result for this case
        if getattr(case, "must_raise", ""):  # refusing the arguments is the right answer
            entry["output"] = encode(f"raised {type(error).__name__}: {error}"[:300])
        else:
            entry.update(status="error", error=_short_error(error))
    return entry


def _encoded(output):
    """The output as the record carries it; an output whose values cannot be read (a tensor on
    the meta device has none) is an unusable return value, not an error the function raised
    (a NotImplementedError here is not the release's stub)."""
    try:
        return encode(to_plain(output))
    except EncodingError:
        raise
    except Exception as error:
        raise EncodingError(f"its values cannot be read: {_short_error(error)[:200]}") from None


def _short_error(error: BaseException) -> str:
    """The exception's last line, then the learner's line that raised it (``in your line
    `...```: the innermost frame outside numpy, torch, the standard library and mhalib)."""
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    line = _learner_line(error)
    if not line:
        return text[:300]
    return f"{text[:290 - min(len(line), 100)]} in your line `{line[:100]}`"


_LIBRARY_PARTS = ("site-packages", "dist-packages", "/lib/python", "/mhalib/", "<frozen")


def _learner_line(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        name = frame.filename.replace("\\", "/")
        if not any(part in name for part in _LIBRARY_PARTS) and frame.line:
            return frame.line.strip()
    return ""
