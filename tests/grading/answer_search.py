"""Search the sandbox's copy of mhalib for code that computes an exercise's answer.

Runs in a fresh interpreter whose only mhalib is the copy (``python -m tests.grading.answer_search
COPY_DIR CASES_FILE``): every function of every module (module-level functions, private ones
included, and functions a module exposes as attributes of its classes) whose signature accepts an
exercise's arguments is called on that exercise's visible cases through the exercise's own probe
(``Exercise.call``), with a time limit; the outputs are written back for the grader's full
checker to judge. The packages that hold no numeric code and whose functions act on files and
processes (the grading pipeline, the commands) are not called.

``python answer_search.py --serve`` runs the same search for many copies at the cost of one
interpreter start: it imports the third-party libraries mhalib uses (never mhalib itself) once,
then for each request read from stdin (one JSON line: ``pythonpath``, ``cases``, ``out``,
``cwd``, ``log``) forks a child that is what a fresh ``python answer_search.py - CASES OUT``
with that PYTHONPATH would be (the copy at the same place on ``sys.path``, no mhalib module
loaded, the same working directory and argv), runs :func:`search` there and exits; the
child's exit status is written back as one JSON line. Every copy is searched from the same
untouched parent, so nothing one search imports or changes is seen by the next.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pickle
import pkgutil
import signal
import sys
import traceback

# Imported once by the server before it forks: the libraries mhalib's modules import (their
# import is most of a fresh interpreter's start). One that is missing is imported, or not, by
# the search itself, as in a fresh interpreter.
SERVER_PREIMPORT = ("numpy", "torch", "torch.utils.flop_counter", "matplotlib", "triton",
                    "triton.language")

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


def main(cases_file: str, out_file: str) -> None:
    result = search(cases_file)
    with open(out_file, "wb") as handle:
        pickle.dump(result, handle)


def _search_in_child(request: dict) -> int:
    """In a forked child: become a fresh ``answer_search.py - CASES OUT`` run with the
    request's PYTHONPATH, search, and return the exit status it would have had."""
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(request["cwd"])
    entries = [e for e in (request["pythonpath"] or "").split(os.pathsep) if e]
    sys.path[1:1] = entries  # where PYTHONPATH puts them: after the script's folder
    importlib.invalidate_caches()
    if request["pythonpath"] is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = request["pythonpath"]
    sys.argv = [sys.argv[0], "-", request["cases"], request["out"]]
    try:
        main(request["cases"], request["out"])
    except SystemExit as stop:  # as the interpreter would exit
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - reported as a fresh interpreter would
        traceback.print_exc()
        return 1
    return 0


def serve() -> None:
    """Answer search requests from stdin until it closes (see the module's docstring)."""
    assert not any(name == "mhalib" or name.startswith("mhalib.") for name in sys.modules)
    for name in SERVER_PREIMPORT:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _search_in_child(request)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(sys.argv[2], sys.argv[3])
