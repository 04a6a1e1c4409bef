"""The notebook's definitions, run again in the measured process (sandbox side).

A physical check (:mod:`mhalib.checks.physical`) calls the learner's function in a fresh process
that never ran the notebook, so nothing the notebook did before (a buffer kept alive, a thread
left running, a patched module) is there. What the function needs is rebuilt from the
notebook's own source: the release's set-up cell (its imports), then, from every other code cell
before the exercise's test, the statements that define something: imports, ``def``, ``class``, and
assignments whose value calls nothing (``EPS = 1e-9``, ``F = torch.nn.functional``). Calls,
plots, experiments and prints are left out, so the replay is cheap and runs no demo; default
values of parameters do run, under the same limits as the call.

A function that reads a global which only a demo cell computed (``mask = causal_mask(8)``) does
not find it here; the physical check then says so.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys

_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _calls_nothing(node: ast.AST) -> bool:
    return not any(isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr))
                   for n in ast.walk(node))


def definitions(source: str) -> str:
    """The defining statements of a cell's ``source`` (empty if it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ""
    kept = [node for node in tree.body if isinstance(node, _DEFINITIONS) or (
        isinstance(node, (ast.Assign, ast.AnnAssign)) and _calls_nothing(node))]
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) if kept else ""


def replay_sources(steps: list[dict], until_exercise: str) -> list[str]:
    """Sources to run again before ``until_exercise`` is measured: the first code cell whole
    (the release's set-up cell), then the definitions of every later cell before the step that
    records ``until_exercise``."""
    sources: list[str] = []
    first = True
    for step in steps:
        if step.get("kind") == "record" and until_exercise in step.get("exercises", ()):
            break
        if step.get("kind") != "cell":
            continue
        source = str(step.get("source") or "")
        if first and step.get("setup"):
            sources.append(source)
        else:
            kept = definitions(source)
            if kept:
                sources.append(kept)
        first = False
    return sources


def imported_modules(sources: list[str]) -> list[str]:
    """Top-level modules the sources import that live in the Python installation (never one
    from the notebook's own folder): these can be imported before the measured process locks
    itself down, since importing them runs no learner code."""
    names: list[str] = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
    installed = []
    for name in dict.fromkeys(names):
        if name in sys.modules or _installed(name):
            installed.append(name)
    return installed


def _trusted_locations() -> tuple[str, ...]:
    """Where installed code lives: the Python installation(s), the grader's package folder
    (``PYTHONPATH``) and the system's ``/usr``; never the notebook's own folder."""
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, "/usr"}
    places |= {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    return tuple(os.path.join(os.path.abspath(p), "") for p in places)


def _installed(name: str) -> bool:
    """True when top-level module ``name`` is found only in trusted locations."""
    try:
        spec = importlib.util.find_spec(name.split(".")[0])
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    where = [spec.origin] if spec.origin not in (None, "built-in", "frozen") else []
    where += list(spec.submodule_search_locations or [])
    trusted = _trusted_locations()
    return all(os.path.abspath(str(w)).startswith(trusted) for w in where)
