"""The package's structure, read from the source: import edges go one way.

Every ``import`` of a mhalib module is an edge, wherever it stands (at the top of a module, in a
function, under ``TYPE_CHECKING``), so an import moved into a function to hide a cycle is still
found. The rules:

- no cycle between modules, and none between subpackages (``commands`` -> ``classroom`` ->
  ``grading`` -> the learner's side, never back);
- nothing the learner's kernel imports (quiz, checks, viz, the reference code...) reaches the
  instructor's side (``classroom``, ``grading``, ``commands``);
- what runs inside the grader's sandbox (``mhalib.grading.sandbox``) imports nothing of the
  grading host;
- a module at the top level of mhalib is shared by several subpackages (the manifest, the
  argument checks...): one that only a single subpackage uses belongs in it. The entry points
  (``__main__``, ``cli``) are the exception.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

import mhalib

PACKAGE = Path(mhalib.__file__).resolve().parent
INSTRUCTOR_SIDE = ("classroom", "grading", "commands", "cli", "__main__")
ENTRY_POINTS = ("__main__", "cli")
SANDBOX = "mhalib.grading.sandbox"


def package_modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package under ``root``."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _module_named(name: str, modules: dict[str, Path]) -> str:
    """The module ``name`` is, or lies in (``mhalib.quiz.keys.KEYS_VARIABLE`` -> its module)."""
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def imports_of(name: str, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports, anywhere in its source."""
    path = modules[name]
    top = name.split(".")[0]
    here = name if _is_package(path) else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {_module_named(a.name, modules) for a in node.names
                      if a.name.split(".")[0] == top}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = here.split(".")[:len(here.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            if base.split(".")[0] != top:
                continue
            for alias in node.names:  # ``from pkg import module`` imports the module
                found.add(_module_named(f"{base}.{alias.name}", modules))
    return found - {name}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imports_of(name, modules) for name in modules}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def part_of(name: str, modules: dict[str, Path]) -> str:
    """The subpackage (or top-level module) of mhalib that module ``name`` belongs to."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


MODULES = package_modules()
GRAPH = import_graph(MODULES)
SUBPACKAGES = {name.split(".")[1] for name, path in MODULES.items()
               if name.count(".") == 1 and _is_package(path)}


def _edges(source, target) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in GRAPH.items() if source(a)
                  for b in targets if target(b))


def test_the_cycle_finder_finds_cycles_and_only_them():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"b"}}) == []


def test_the_graph_sees_imports_inside_functions_and_relative_ones(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import b\n")
    (package / "sub" / "b.py").write_text("def late():\n    from pkg import c\n")
    (package / "c.py").write_text("from pkg.sub.b import late\n")
    graph = import_graph(package_modules(package))
    assert graph["pkg.sub"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.c", "pkg.sub.b"]]


def test_no_import_cycle_between_modules():
    assert cycles(GRAPH) == []


def test_subpackages_import_one_way():
    parts = defaultdict(set)
    for name, targets in GRAPH.items():
        parts[part_of(name, MODULES)] |= {part_of(t, MODULES) for t in targets}
    for part, targets in parts.items():
        targets.discard(part)
    assert cycles(dict(parts)) == []


def test_the_learners_side_never_imports_the_instructors_side():
    learner = [name for name in MODULES if part_of(name, MODULES) not in INSTRUCTOR_SIDE]
    assert "mhalib.quiz.session" in learner and "mhalib.checks.api" in learner
    assert _edges(lambda a: a in learner,
                  lambda b: part_of(b, MODULES) in INSTRUCTOR_SIDE) == []


def _in_sandbox(name: str) -> bool:
    return name == SANDBOX or name.startswith(SANDBOX + ".")


def test_what_runs_in_the_sandbox_imports_nothing_of_the_grading_host():
    assert any(name.startswith(SANDBOX + ".") for name in MODULES)
    assert not _in_sandbox("mhalib.grading.sandbox_package")  # a host module, despite its name
    assert _edges(_in_sandbox,
                  lambda b: part_of(b, MODULES) in INSTRUCTOR_SIDE
                  and not _in_sandbox(b) and b != "mhalib.grading") == []


@pytest.mark.parametrize("name", sorted(
    name for name, path in MODULES.items()
    if name.count(".") == 1 and not _is_package(path)
    and name.rpartition(".")[2] not in ENTRY_POINTS))
def test_a_top_level_module_is_shared_by_several_subpackages(name):
    users = {part_of(user, MODULES) for user, targets in GRAPH.items() if name in targets}
    users &= SUBPACKAGES
    assert len(users) >= 2, (f"{name} is used only by {sorted(users) or 'no subpackage'}: "
                             "move it into that subpackage")
