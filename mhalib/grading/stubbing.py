"""Which code of mhalib the grader's sandbox keeps, and the source rewrites that remove the rest.

A learner's function must compute its answer itself, so the sandbox's copy of mhalib may hold no
code that computes an exercise's answer, under any name (:mod:`mhalib.grading.sandbox_package`
writes the copy). Three rules, none of them a list of functions someone must keep up to date:

* **Computing packages** (:data:`COMPUTING_PACKAGES`: counts, kernels, layers, the trained toy
  model, benchmarks, plots and widgets): every function and method body becomes a ``raise``.
  The modules still import, so a notebook's set-up cell runs; a demo that calls them fails
  with a message saying why. Tool modules a lesson hands to learners for their answers
  (:data:`TOOL_MODULES`, e.g. lesson 04's causal mask in torch for lesson 11) stay whole.
* **The judge's half of the checkers**: the sandbox only draws inputs and calls the learner's
  function; the reference outputs and the mistake models (which are the reference with one
  thing changed, so with default settings they *are* the answer) are judged outside. In the
  checker modules only what the probe reaches from the :data:`PROBE_METHODS` of the checker
  classes (and what runs when a module is imported) keeps its body.
* **The graded assignment's own names**: a function named like one of the exercises being
  graded is removed wherever it is, tool modules included (lesson 11's ``causal_mask`` tool is
  lesson 04's answer).

``tests/grading/test_answer_paths.py`` searches the copy for any callable that still returns an
exercise's right answer.
"""

from __future__ import annotations

import ast

COMPUTING_PACKAGES = ("accounting", "kernels", "nn", "induction", "bench", "viz")
TOOL_MODULES = ("nn/masks.py",)
# computing packages an assignment's own instructor cells need, where none of its exercises can
# be answered with them (tests/grading/test_answer_paths.py searches them): lesson 08 trains its
# toy model (and draws its loss) in a cell that runs once per class, and its exercises score
# attention maps. A package name spares the package, a path one module.
SPARED_FOR = {"08-heads": ("induction", "viz/lesson08.py")}
# the checkers' infrastructure, kept whole: the probe, records, encoding, comparisons, the
# learner-facing API. Every other module of mhalib/checks (each lesson's checkers and what they
# share) keeps only what the probe reaches: a new checker module is covered by default.
CHECKS_INFRASTRUCTURE = frozenset(f"checks/{name}.py" for name in (
    "__init__", "api", "probe", "record", "registry", "encoding", "integrity", "compare",
    "exercise", "verdict", "judge", "work", "answer_key", "report"))
PROBE_METHODS = frozenset({"cases", "visible_cases", "hidden_cases", "call", "measure", "case",
                           "__init__", "__post_init__", "signature", "arguments"})
# module-level functions the probe and the physical check call by name from elsewhere
PROBE_FUNCTIONS = frozenset({"run_physical", "encode_output", "case_tensors", "to_tensor",
                             "torch_dtype", "one_thread", "output_kind"})

STUB_MESSAGE = ("{where} is not available while grading: the grader's copy of mhalib holds no "
                "code that computes an exercise's answer. Write the computation yourself.")


def is_judge_side(relative: str) -> bool:
    return relative.startswith("checks/") and relative not in CHECKS_INFRASTRUCTURE


def is_computing(relative: str, assignment: str | None = None) -> bool:
    package = relative.split("/")[0]
    spared = SPARED_FOR.get(assignment or "", ())
    return (package in COMPUTING_PACKAGES and relative not in TOOL_MODULES
            and package not in spared and relative not in spared)


def _raise(where: str) -> ast.Raise:
    return ast.Raise(exc=ast.Call(func=ast.Name("RuntimeError", ast.Load()),
                                  args=[ast.Constant(STUB_MESSAGE.format(where=where))],
                                  keywords=[]), cause=None)


def _stub(function: ast.FunctionDef | ast.AsyncFunctionDef, where: str) -> None:
    """Replace ``function``'s body by a raise, keeping its docstring and signature."""
    keep = function.body[:1] if ast.get_docstring(function) is not None else []
    function.body = keep + [_raise(where)]


def _functions(body):
    return [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _special(name: str) -> bool:
    """Python's own hooks (``__init__``, ``__post_init__``, ``__repr__``...), which building and
    showing objects needs; ``__call__`` is not one of them here."""
    return name.startswith("__") and name.endswith("__") and name != "__call__"


def stub_everything(source: str, module: str) -> str:
    """Every function and method of ``source`` stubbed (nested ones go with their parent),
    except what building the module's objects needs: what the module calls when it is imported,
    Python's special methods, and whatever those reach in the module."""
    tree = ast.parse(source)
    functions = {n.name: n for n in _functions(tree.body)}
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    methods = {(c.name, m.name): m for c in classes for m in _functions(c.body)}
    live: set = set(_called_at_import(tree.body)) & set(functions)
    for c in classes:
        spare = _called_at_import(c.body)
        live |= {(c.name, m) for (owner, m) in methods if owner == c.name
                 and (_special(m) or m in spare)}
    pending = list(live)
    while pending:
        key = pending.pop()
        node = functions.get(key) if isinstance(key, str) else methods.get(key)
        for name in _names_in([node]) if node is not None else ():
            reached = {name} & set(functions)
            reached |= {k for k in methods if k[1] == name}
            for item in reached - live:
                live.add(item)
                pending.append(item)
    for name, node in functions.items():
        if name not in live:
            _stub(node, f"{module}.{name}")
    for (owner, name), node in methods.items():
        if (owner, name) not in live:
            _stub(node, f"{module}.{owner}.{name}")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def stub_names(source: str, module: str, names: set[str]) -> str:
    """``source`` with the top-level functions called ``names`` stubbed."""
    tree = ast.parse(source)
    hit = False
    for node in _functions(tree.body):
        if node.name in names:
            _stub(node, f"{module}.{node.name}")
            hit = True
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n" if hit else source


# -- the judge half of the checkers: reachability from the probe ------------------------------

def _names_in(nodes) -> set[str]:
    """Every name and attribute name used in ``nodes``."""
    found: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                found.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                found.add(sub.attr)
    return found


def _called_at_import(statements) -> set[str]:
    """Names called by statements that run when the module (or a class body) executes, not
    counting what is only referenced (a function object handed to a constructor)."""
    called: set[str] = set()
    for statement in statements:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for sub in ast.walk(statement):
            if isinstance(sub, ast.Lambda):
                continue
            if isinstance(sub, ast.Call):
                target = sub.func
                if isinstance(target, ast.Name):
                    called.add(target.id)
                if isinstance(target, ast.Name) and target.id == "PhysicalCheck":
                    called |= _names_in(sub.args[1:2])  # its inputs are built in the sandbox
                    called |= _names_in(k.value for k in sub.keywords if k.arg == "build")
    return called


def reachable_names(trees: dict[str, ast.Module], imports: dict[str, dict[str, str]],
                    roots: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per module, the top-level functions and methods the probe can reach.

    ``trees``: module -> AST; ``imports``: module -> {local name: module it comes from};
    ``roots``: module -> names reached from outside. Methods are ``Class.method``."""
    kept: dict[str, set[str]] = {module: set() for module in trees}
    pending: list[tuple[str, str]] = []

    def reach(module: str, name: str) -> None:
        if module in trees and name not in kept[module]:
            kept[module].add(name)
            pending.append((module, name))

    for module, tree in trees.items():
        for name in roots.get(module, set()) | _called_at_import(tree.body):
            reach(module, name)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                reach(module, node.name)
    while pending:
        module, name = pending.pop()
        tree = trees[module]
        defs = {n.name: n for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        node = defs.get(name)
        if node is None:
            source = imports[module].get(name)
            if source is not None:
                reach(source, name)
            continue
        if isinstance(node, ast.ClassDef):
            used = _called_at_import(node.body) | _names_in(node.bases)
            methods = {m.name: m for m in _functions(node.body)}
            live = [m for m in methods if m in PROBE_METHODS]
            seen: set[str] = set()
            while live:
                method = live.pop()
                if method in seen:
                    continue
                seen.add(method)
                kept[module].add(f"{name}.{method}")
                names = _names_in([methods[method]])
                used |= names
                live += [m for m in names if m in methods and m not in seen]
        else:
            used = _names_in([node])
        for used_name in used:
            if used_name in defs or used_name in imports[module]:
                reach(module, used_name)
    return kept


def stub_unreached(source: str, module: str, kept: set[str]) -> str:
    """``source`` with every top-level function and method not in ``kept`` stubbed."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in kept:
            _stub(node, f"{module}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            for method in _functions(node.body):
                if f"{node.name}.{method.name}" not in kept:
                    _stub(method, f"{module}.{node.name}.{method.name}")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def imported_from(tree: ast.Module, package: str) -> dict[str, str]:
    """{local name: module} of the ``from mhalib.<...> import name`` statements of ``tree``."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found
