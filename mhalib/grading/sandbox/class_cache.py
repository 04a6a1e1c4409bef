"""Class cache: an expensive, learner-independent instructor cell run once per class.

Lesson 08 trains a model (about 30 s of CPU) in a cell the learner does not write. The
instructor marks such a cell in the source notebook (cell metadata ``{"mhalib":
{"class_cache": true}}``). Before a class is graded, the release notebook with the instructor's
answers runs once in the sandbox and *exports* that cell: the values it assigns (pickled), its
outputs, and a *guard*: a fingerprint of every name the cell reads from the notebook (module,
function code, class, simple value; one level into what those functions read).

A cell whose work lands in a process-level memo (lesson 08's ``trained_model`` keeps the model
in ``mhalib.induction.train._TRAINED`` so that later cells ask it again) names that dict:
``{"class_cache": true, "memo": ["mhalib.induction.train._TRAINED"]}``; the entries the cell
added are exported too, and a replay puts them back (never over an entry the learner's own
run already made).

In a learner's notebook the cached results are *replayed* instead of running the cell only if

1. the learner's cell has the release's source, character for character (else: planned as an
   ordinary cell, graded on what was submitted), and
2. when the notebook reaches it, every name it reads has the fingerprint of the class run and
   the kernel shows no tampering (numpy, torch, IPython or the checker patched).

Otherwise the cell runs as submitted and the notebook is flagged ``class_cache_refused``. Never
is a learner silently graded on the instructor's version of a cell they changed. Limit: names
reached more than one level down (an attribute of an object the cell's functions use) are not
fingerprinted; the exercises' scores never depend on such cells (they are judged outside).

This module is imported inside the sandbox: standard library only at import time. Which cells
are cached (the metadata above) is read on the host, by :mod:`mhalib.grading.cached_cells`.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import marshal
import os
import pickle
import sys
import types

CACHE_DIR = "class_cache"  # in a task's exchange folder: files written by the class run
EXPORT_DIR = "cache"  # in a task's exchange folder: what the class run exports


def memo_dict(path: str) -> dict:
    """The dict at ``package.module.NAME`` (imported if needed); ValueError if it is none."""
    import importlib

    module, _, name = path.rpartition(".")
    value = getattr(importlib.import_module(module), name, None)
    if not isinstance(value, dict):
        raise ValueError(f"memo={path!r} is not a dict")
    return value


def cache_key(source: str) -> str:
    """The cache entry of a cell: a digest of its (stripped) source."""
    return hashlib.sha256(source.strip().encode("utf-8")).hexdigest()[:20]


def _assigned_by(node: ast.stmt) -> list[str]:
    """Names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [item.optional_vars for item in node.items if item.optional_vars]
                   if isinstance(node, ast.With) else [node.target])
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def read_and_assigned_names(source: str) -> tuple[list[str], list[str]]:
    """(names the cell may read from the notebook, names it binds at top level).

    A name counts as read unless an earlier statement of the cell bound it; builtins count
    too (the notebook may shadow them)."""
    assigned: list[str] = []
    read: set[str] = set()
    for node in ast.parse(source).body:
        loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, (ast.Load, ast.Del))}
        read |= loads - set(assigned)
        assigned += _assigned_by(node)
    return sorted(read), list(dict.fromkeys(assigned))


def _portable(code: types.CodeType) -> types.CodeType:
    """The code without its file name (each sandbox may import mhalib from its own copy)."""
    consts = tuple(_portable(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename="", co_consts=consts)


def _code_digest(code: types.CodeType) -> str:
    return hashlib.sha256(marshal.dumps(_portable(code))).hexdigest()[:24]


def fingerprint(value, depth: int = 1):
    """A JSON-able description that equals across processes only for the same library object
    (or the same simple value); ``None`` for anything that cannot be compared that way."""
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if isinstance(value, (bool, int, float, str, type(None))):
        return ["value", repr(value)[:200]]
    if isinstance(value, types.FunctionType):
        parts = ["function", value.__module__, value.__qualname__, _code_digest(value.__code__),
                 repr(value.__defaults__)[:400]]
        if depth:
            reads = {n: fingerprint(value.__globals__[n], 0) for n in sorted(
                value.__code__.co_names) if n in value.__globals__}
            parts.append(reads)
        return parts
    if isinstance(value, type):
        module = sys.modules.get(value.__module__)
        methods = sorted((name, _code_digest(f.__code__)) for name, f in vars(value).items()
                         if isinstance(f, types.FunctionType))
        return ["class", value.__module__, value.__qualname__,
                getattr(module, value.__qualname__, None) is value, methods]
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return ["builtin", getattr(value, "__module__", None), value.__qualname__]
    kind = ["object", type(value).__module__, type(value).__qualname__]
    if callable(value):  # e.g. numpy's dispatchers: by type and by the name they carry
        return kind + [str(getattr(value, "__module__", ""))[:100],
                       str(getattr(value, "__qualname__", getattr(value, "__name__", "")))[:100]]
    return None if depth else kind  # data read directly by the cell cannot be compared


def attribute_chains(source: str, roots: list[str]) -> list[str]:
    """Dotted names the cell reads through ``roots`` (``np.full``, ``torch.nn.functional``)."""
    chains = set()
    for node in ast.walk(ast.parse(source)):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if parts and isinstance(node, ast.Name) and node.id in roots:
            names = [node.id, *reversed(parts)]
            chains.update(".".join(names[:i]) for i in range(2, len(names) + 1))
    return sorted(chains)


def _resolve(chain: str, namespace: dict):
    head, *rest = chain.split(".")
    value = namespace[head]
    for part in rest:
        value = getattr(value, part)
    return value


def guard_of(source: str, namespace: dict) -> dict:
    """Fingerprints of the names and dotted names ``source`` reads, as ``namespace`` binds
    them now."""
    read, _ = read_and_assigned_names(source)
    guard = {name: fingerprint(namespace[name]) if name in namespace else ["unbound"]
             for name in read}
    for chain in attribute_chains(source, [n for n in read if n in namespace]):
        try:
            guard[chain] = fingerprint(_resolve(chain, namespace))
        except Exception:  # noqa: BLE001 - an attribute that does not resolve (yet)
            guard[chain] = ["unresolved"]
    return guard


def memo_snapshot(paths: list[str]) -> dict[str, set]:
    """The keys each memo dict holds now (taken before the exported cell runs)."""
    return {path: set(memo_dict(path)) for path in paths}


def export_entry(source: str, guard: dict, namespace: dict, outputs: list[dict],
                 memo_before: dict[str, set] | None = None) -> dict:
    """The class-run entry of a cell that just ran: its values, outputs, guard, and the memo
    entries it added (``memo_before``: :func:`memo_snapshot` taken before it ran)."""
    _, assigned = read_and_assigned_names(source)
    bound = {name: namespace[name] for name in assigned if name in namespace}
    modules = {name: value.__name__ for name, value in bound.items()
               if isinstance(value, types.ModuleType)}
    values = {name: value for name, value in bound.items() if name not in modules}
    memo = {}
    for path, keys in (memo_before or {}).items():
        added = {k: v for k, v in memo_dict(path).items() if k not in keys}
        memo[path] = base64.b64encode(pickle.dumps(added, protocol=4)).decode("ascii")
    return {"key": cache_key(source), "guard": guard, "outputs": outputs, "modules": modules,
            "values": base64.b64encode(pickle.dumps(values, protocol=4)).decode("ascii"),
            "memo": memo}


def write_export(task_dir: str, entry: dict) -> None:
    folder = os.path.join(task_dir, EXPORT_DIR)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{entry['key']}.json"), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(entry))


def load_entry(task_dir: str, key: str, max_bytes: int) -> dict | None:
    """The class run's entry for ``key`` (None when the class run left none, or one larger than
    ``max_bytes``: :attr:`~mhalib.grading.sandbox.limits.Limits.record_bytes`)."""
    path = os.path.join(task_dir, CACHE_DIR, f"{key}.json")
    try:
        with open(path, encoding="utf-8") as handle:
            entry = json.loads(handle.read(max_bytes))
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("key") == key else None


def refusal(entry: dict | None, source: str, namespace: dict, tampered: list[str]) -> str | None:
    """Why the cached results may not stand in for running ``source`` now (None: they may)."""
    if entry is None:
        return "the class run left no results for it"
    if tampered:
        return "the kernel was altered before it (" + "; ".join(tampered[:3]) + ")"
    now = guard_of(source, namespace)
    changed = sorted(name for name in entry.get("guard", {})
                     if json.loads(json.dumps(now.get(name))) != entry["guard"][name]
                     or entry["guard"][name] is None)
    if changed or set(now) != set(entry.get("guard", {})):
        names = changed or sorted(set(now) ^ set(entry.get("guard", {})))
        return "the notebook changed what it uses: " + ", ".join(names[:6])
    return None


def replay_values(entry: dict, namespace: dict) -> None:
    """Bind the class run's values in the learner's namespace."""
    import importlib

    values = pickle.loads(base64.b64decode(entry["values"]))
    values.update({name: importlib.import_module(module)
                   for name, module in entry.get("modules", {}).items()})
    namespace.update(values)
    for path, blob in entry.get("memo", {}).items():
        target = memo_dict(path)
        for key, value in pickle.loads(base64.b64decode(blob)).items():
            target.setdefault(key, value)
