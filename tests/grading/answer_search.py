"""Search the sandbox's copy of mhalib for code that computes an exercise's answer.

Runs in a fresh interpreter whose only mhalib is the copy (``python -m tests.grading.answer_search
COPY_DIR CASES_FILE``): every function of every module (module-level functions, private ones
included, and functions a module exposes as attributes of its classes) whose signature accepts an
exercise's arguments is called on that exercise's visible cases through the exercise's own probe
(``Exercise.call``), with a time limit; the outputs are written back for the grader's full
checker to judge. The packages that hold no numeric code and whose functions act on files and
processes (the grading pipeline, the commands) are not called.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import signal
import sys

SKIPPED = ("mhalib.reference", "mhalib.grading", "mhalib.commands", "mhalib.cli",
           "mhalib.classroom", "mhalib.__main__", "mhalib.bench.runner")


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow


def candidates():
    """(dotted name, function) of every function of the copy that may be called."""
    import mhalib

    seen = set()
    for info in pkgutil.walk_packages(mhalib.__path__, "mhalib."):
        if info.name.startswith(SKIPPED):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - a module that does not import offers nothing
            continue
        for name, value in list(vars(module).items()):
            functions = [(name, value)] if inspect.isfunction(value) else []
            if inspect.isclass(value) and value.__module__ == module.__name__:
                functions += [(f"{name}.{k}", v) for k, v in vars(value).items()
                              if inspect.isfunction(v)]
            for label, function in functions:
                if function.__module__ != module.__name__ or id(function) in seen:
                    continue
                seen.add(id(function))
                yield f"{module.__name__}.{label}", function


def search(cases_file: str) -> dict:
    """{exercise: {function: [encoded output, or None where it raised, per case]}} for every
    function that accepted the exercise's arguments and returned on at least one case."""
    from mhalib.checks.encoding import encode, to_plain
    from mhalib.checks.registry import get_exercise

    with open(cases_file, "rb") as handle:
        wanted = pickle.load(handle)  # {exercise: [Case, ...]}
    signal.signal(signal.SIGALRM, _alarm)
    found: dict = {name: {} for name in wanted}
    for label, function in list(candidates()):
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            continue
        for exercise, cases in wanted.items():
            checker = get_exercise(exercise)
            outputs = []
            for case in cases:
                try:
                    signature.bind(*case.args, **case.kwargs)
                except TypeError:
                    outputs.append(None)
                    continue
                signal.setitimer(signal.ITIMER_REAL, 2.0)
                try:
                    output, _ = checker.call(function, case)
                    outputs.append(encode(to_plain(output)))
                except BaseException:  # noqa: BLE001 - stubbed, wrong arguments, too slow
                    outputs.append(None)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            if any(output is not None for output in outputs):
                found[exercise][label] = outputs
    return found


if __name__ == "__main__":
    result = search(sys.argv[2])
    with open(sys.argv[3], "wb") as handle:
        pickle.dump(result, handle)
