"""Running a notebook's cells in the learner's sandboxed process, the way a Jupyter kernel would.

This replaces a Jupyter kernel for grading: an IPython shell created once in the warm zygote
(before the fork, so each notebook starts from the same clean, pre-imported state) runs the
cells, collects their outputs under a byte budget, and, where the grader's plan says so, records
what the learner's functions return on inputs the warden draws then
(``mhalib.checks.record_exercises``, :mod:`mhalib.grading.sandbox.warden`).
Quick-check answers are read from the submitted file, outside the sandbox. Everything goes to
files in the exchange folder, written as soon as each step ends, so a notebook that crashes or
hangs later keeps what it already produced.

Nothing here decides a score: records are judged in a clean process outside the sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from IPython.core.interactiveshell import InteractiveShell
from traitlets import Type
from traitlets.config import Config

from mhalib.grading.sandbox.capture import (
    CappedStream,
    CollectingDisplayHook,
    CollectingPublisher,
    OutputBudget,
)
from mhalib.grading.sandbox.limits import Limits

_dumps = json.dumps  # bound now: a learner replacing json.dumps later does not reach us
_write = os.write
_monotonic = time.monotonic
# shell methods a notebook can replace on the instance to hide errors or skip cells
_SHELL_METHODS = ("showtraceback", "_showtraceback", "run_cell", "run_ast_nodes", "run_code",
                  "transform_cell")


class CellTimeout(Exception):
    """A cell ran longer than the grader allows for one cell."""


class GraderShell(InteractiveShell):
    """IPython shell whose outputs go to the grader's budget instead of a terminal."""

    display_pub_class = Type(CollectingPublisher)
    displayhook_class = Type(CollectingDisplayHook)

    def _showtraceback(self, etype, evalue, stb):
        budget = self.display_pub.budget
        if budget is not None:
            budget.add_error(getattr(etype, "__name__", "Error"), str(evalue), list(stb))


def make_shell() -> GraderShell:
    """The shell every graded notebook starts from (created once, before forking)."""
    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"
    config.InteractiveShell.autocall = 0
    shell = GraderShell.instance(config=config)
    try:
        shell.enable_matplotlib("inline")  # figures become display_data, as in Jupyter
    except Exception as error:  # matplotlib missing or broken: cells that plot will say so
        print(f"mhalib grader: inline matplotlib unavailable ({error})", file=sys.__stderr__)
    warm_up_shell(shell)
    return shell


def warm_up_shell(shell: GraderShell) -> None:
    """Run a cell, an expression and a failing cell once, so that everything IPython imports
    lazily on those paths (the debugger, traceback formatting) is imported before forking: a
    physical check's measured process may not open a file."""
    for source in ("_mhalib_warm = 1", "_mhalib_warm", "raise ValueError('warm-up')",
                   "def _mhalib_f(:\n    pass", "del _mhalib_warm"):
        shell.run_cell(source, store_history=False, silent=True)
    shell.user_ns.pop("_mhalib_warm", None)


def _alarm(signum, frame):
    raise CellTimeout("this cell ran longer than the time allowed for one cell")


class _StepLog:
    """Appends one JSON line per finished step to ``steps.jsonl`` (raw fd, append-only)."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def write(self, entry: dict) -> None:
        try:
            _write(self.fd, (_dumps(entry) + "\n").encode("utf-8", "replace"))
        except Exception:  # a full scratch disk loses display only; records are separate files
            pass


def run_cell(shell: GraderShell, source: str, budget: OutputBudget, seconds: float) -> str:
    """Run one cell; returns its status: ``ok``, ``error`` or ``timeout``."""
    budget.start_cell()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        result = shell.run_cell(source, store_history=True)
    except CellTimeout:  # raised outside the learner's code, while IPython tidied up
        budget.add_error("CellTimeout", "this cell ran longer than the time allowed", [])
        return "timeout"
    except BaseException as error:  # noqa: BLE001 - the shell itself was broken by the cell
        budget.add_error(type(error).__name__, str(error)[:500], [])
        return "error"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
    if isinstance(error, CellTimeout):
        return "timeout"
    return "error" if error is not None else "ok"


def tampering(shell: GraderShell) -> list[str]:
    """What the notebook changed in its kernel (only reported; it never changes a score)."""
    found = []
    try:
        from mhalib.checks.integrity import tampering as checker_tampering

        found += checker_tampering()
    except Exception as error:  # the learner may have broken the checker itself
        found.append(f"the checker's tamper check failed ({type(error).__name__})")
    found += [f"IPython's {name} was replaced" for name in _SHELL_METHODS if name in vars(shell)]
    if sys.excepthook is not sys.__excepthook__ and "excepthook" in vars(sys):
        found.append("sys.excepthook was replaced")
    return sorted(set(found))


def _replay(shell: GraderShell, entry: dict, budget: OutputBudget) -> str:
    """Stand in for a cell with the class run's results (see mhalib.grading.sandbox.class_cache)."""
    from mhalib.grading.sandbox.class_cache import replay_values

    budget.start_cell()
    replay_values(entry, shell.user_ns)
    for output in entry.get("outputs", []):
        if output.get("output_type") == "stream":
            budget.add_text(output.get("name", "stdout"), str(output.get("text", "")))
        elif output.get("output_type") in ("display_data", "execute_result"):
            budget.add_rich(output["output_type"], output.get("data", {}), None)
    shell.execution_count += 1
    return "ok"


def _run_cell_step(shell: GraderShell, step: dict, budget: OutputBudget, limits: Limits,
                   exchange_dir: str) -> tuple[str, dict]:
    """Run one cell step; a class-cached cell is replayed when allowed, exported in the class
    run. Returns (status, what the step log says about the cache)."""
    from mhalib.grading.sandbox import class_cache

    key, export = step.get("class_cache"), step.get("export_class_cache")
    if key and not export:
        try:
            entry = class_cache.load_entry(exchange_dir, key, limits.record_bytes)
            reason = class_cache.refusal(entry, step["source"], shell.user_ns, tampering(shell))
            if reason is None:
                return _replay(shell, entry, budget), {"class_cache": "replayed"}
        except Exception as error:  # noqa: BLE001 - a broken cache means: run the cell
            reason = f"its cached results could not be used ({type(error).__name__})"
        status = run_cell(shell, step["source"], budget, limits.cell_seconds)
        return status, {"class_cache": "refused", "reason": reason[:300]}
    if not export:
        return run_cell(shell, step["source"], budget, limits.cell_seconds), {}
    try:
        guard = class_cache.guard_of(step["source"], shell.user_ns)
        memo = class_cache.memo_snapshot(step.get("memo", []))
    except Exception as error:  # noqa: BLE001 - e.g. a memo that does not exist
        guard = memo = None
        problem = repr(error)[:300]
    status = run_cell(shell, step["source"], budget, limits.cell_seconds)
    if status == "ok" and guard is not None:
        try:
            class_cache.write_export(exchange_dir, class_cache.export_entry(
                step["source"], guard, shell.user_ns, budget.outputs, memo))
            return status, {}
        except Exception as error:  # noqa: BLE001 - e.g. a value that cannot be pickled
            problem = repr(error)[:300]
    return status, {"class_cache": "not_exported",
                    "reason": problem if guard is None or status == "ok" else status}


def run_plan(shell: GraderShell, plan: dict, exchange_dir: str) -> None:
    """Execute the grader's plan: cells in order, recording steps where the tests were."""
    from mhalib.checks import record_exercises
    from mhalib.grading.sandbox.warden_client import WardenClient

    limits = Limits.from_dict(plan.get("limits", {}))
    budget = OutputBudget(limits.output_bytes, limits.cell_output_bytes)
    shell.display_pub.budget = budget
    shell.displayhook.budget = budget
    log = _StepLog(os.path.join(exchange_dir, "steps.jsonl"))
    sys.stdout = CappedStream(budget, "stdout")
    sys.stderr = CappedStream(budget, "stderr")
    namespace = shell.user_ns
    for number, step in enumerate(plan["steps"]):
        started = _monotonic()
        if step["kind"] == "cell":
            status, cache_note = _run_cell_step(shell, step, budget, limits, exchange_dir)
            log.write({"step": number, "kind": "cell", "index": step["index"],
                       "status": status, "execution_count": shell.execution_count - 1,
                       "outputs": budget.outputs, "dropped_bytes": budget.dropped_bytes,
                       "seconds": round(_monotonic() - started, 4), **cache_note})
            continue
        status = "ok"
        try:
            if step.get("exercises"):
                with WardenClient() as warden:
                    record_exercises(namespace, list(step["exercises"]), warden,
                                     call_timeout=limits.call_seconds)
        except BaseException as error:  # noqa: BLE001 - report, and keep grading later steps
            status = f"error: {type(error).__name__}: {str(error)[:300]}"
        try:
            altered = tampering(shell)
        except BaseException as error:  # noqa: BLE001
            altered = [f"the kernel could not be inspected ({type(error).__name__})"]
        log.write({"step": number, "kind": "record", "exercises": step.get("exercises", []),
                   "status": status,
                   "tampering": altered, "seconds": round(_monotonic() - started, 4)})
    log.write({"step": len(plan["steps"]), "kind": "done"})
