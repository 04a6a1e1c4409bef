"""A copy of the mhalib package without any answer, for the sandbox's import path.

Inside the sandbox ``mhalib.checks`` must import (test cells call ``check``; the grader's
recording step calls ``record_exercises``), but nothing that computes an answer may be
reachable: ``mhalib.reference`` is replaced by a package whose import raises an ImportError
saying why, and the rest is rewritten by the rules of :mod:`mhalib.grading.stubbing` (function
bodies replaced by a ``raise``; names, signatures and docstrings kept, so the lessons' set-up
cells still import what they name).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from mhalib.grading import stubbing

_STUB = '''"""Not available while grading."""

raise ImportError(
    "{module} holds the course's answer key and is not available while grading; "
    "write the computation yourself."
)
'''


def answer_key_functions() -> dict[str, set[str]]:
    """Module -> names of the answer-key functions it defines (mhalib.reference: all)."""
    from mhalib import course

    found: dict[str, set[str]] = {"mhalib.reference": set()}
    for name, module in course.answer_key_modules().items():
        found.setdefault(module, set()).add(name)
    return found


def write_answer_free_copy(destination: Path, assignment: str | None = None) -> Path:
    """Copy the installed mhalib into ``destination/mhalib`` minus every answer.

    ``mhalib.reference`` (the answer key) is replaced by a package that refuses to import; the
    rest follows :mod:`mhalib.grading.stubbing`: computing packages keep their modules but
    not their function bodies, the checkers keep their probe half only, and any function named
    like an exercise of ``assignment`` (every assignment's when None) is removed wherever it
    is. Returns ``destination`` (the folder to put on the sandbox's ``PYTHONPATH``).
    """
    import mhalib
    from mhalib import course

    source = Path(mhalib.__file__).resolve().parent
    target = Path(destination) / "mhalib"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", ".ipynb_checkpoints"))
    reference = target / "reference"
    if reference.is_dir():
        shutil.rmtree(reference)
        reference.mkdir()
        (reference / "__init__.py").write_text(_STUB.format(module="mhalib.reference"),
                                               encoding="utf-8")
    graded = set(course.lesson(assignment).exercises if assignment else course.exercise_names())
    files = {path.relative_to(target).as_posix(): path for path in sorted(target.rglob("*.py"))
             if path.relative_to(target).parts[0] != "reference"}
    kept = _probe_half(files)
    for relative, path in files.items():
        module = _module_name(relative)
        text = path.read_text(encoding="utf-8")
        if stubbing.is_computing(relative, assignment):
            text = stubbing.stub_everything(text, module)
        elif module in kept:
            text = stubbing.stub_unreached(text, module, kept[module])
        text = stubbing.stub_names(text, module, graded)
        path.write_text(text, encoding="utf-8")
    return Path(destination)


def _module_name(relative: str) -> str:
    parts = relative[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["mhalib", *parts])


def _probe_half(files: dict[str, Path]) -> dict[str, set[str]]:
    """Per judge-side checker module, the functions and methods the probe reaches: from the
    names other (kept) modules import from it, the probe methods of its classes and what its
    import runs."""
    trees, imports, roots = {}, {}, {}
    for relative, path in files.items():
        if not stubbing.is_judge_side(relative):
            continue
        module = _module_name(relative)
        trees[module] = ast.parse(path.read_text(encoding="utf-8"))
        imports[module] = stubbing.imported_from(trees[module], "mhalib.checks")
        roots[module] = set(stubbing.PROBE_FUNCTIONS)
    for relative, path in files.items():
        if stubbing.is_judge_side(relative) or stubbing.is_computing(relative):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, origin in stubbing.imported_from(tree, "mhalib.checks").items():
            if origin in roots:
                roots[origin].add(name)
    return stubbing.reachable_names(trees, imports, roots)
