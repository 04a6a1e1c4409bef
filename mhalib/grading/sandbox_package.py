"""A copy of the mhalib package without the answer key, for the sandbox's import path.

Inside the sandbox ``mhalib.checks`` must import (test cells call ``check``; the grader's
recording step calls ``record_exercises``), but the answer key must be out of reach:

* ``mhalib.reference`` is replaced by a package whose import raises an ImportError saying why;
* answer-key functions that live elsewhere (``mhalib.accounting.flops.mha_flops``...) keep
  their name, signature and docstring, but their body is replaced by a ``raise``, so the
  modules around them (and the lessons that import those modules) still import.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

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


def without_function_bodies(source: str, names: set[str], module: str) -> str:
    """``source`` with the bodies of top-level functions ``names`` replaced by a raise."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            message = (f"{module}.{node.name} is the course's answer key and is not available "
                       "while grading; write the computation yourself.")
            keep = node.body[:1] if ast.get_docstring(node) is not None else []
            node.body = keep + [ast.Raise(exc=ast.Call(
                func=ast.Name("NotImplementedError", ast.Load()),
                args=[ast.Constant(message)], keywords=[]), cause=None)]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _relative_file(package_root: Path, module: str) -> Path | None:
    parts = module.split(".")[1:]
    if not parts:
        return None
    as_package = package_root.joinpath(*parts, "__init__.py")
    if as_package.is_file():
        return as_package.parent.relative_to(package_root)
    as_module = package_root.joinpath(*parts[:-1], parts[-1] + ".py")
    return as_module.relative_to(package_root) if as_module.is_file() else None


def write_answer_free_copy(destination: Path) -> Path:
    """Copy the installed mhalib into ``destination/mhalib`` minus the answer key.

    Returns ``destination`` (the folder to put on the sandbox's ``PYTHONPATH``).
    """
    import mhalib

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
    for module, names in answer_key_functions().items():
        if module == "mhalib.reference" or module.startswith("mhalib.reference."):
            continue
        relative = _relative_file(source, module)
        copied = target / relative if relative is not None else None
        if copied is not None and copied.is_file():
            copied.write_text(without_function_bodies(copied.read_text(encoding="utf-8"), names,
                                                      module), encoding="utf-8")
    return Path(destination)
