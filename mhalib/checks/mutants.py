"""Mutants of the answer key (issue 22): the search over small changes, made from the key's own
code instead of a hand-written list.

Every small edit a slip makes (:mod:`mhalib.checks.mutant_edits`: an operator changed, a term
dropped, a constant moved by one, a keyword or a transpose left out, two arguments swapped, one
variable used for another, a bound off by one) is tried on the answer key
(``mhalib.reference.<name>``) and on the answer-key helpers it calls (``softmax`` inside
``attention``, ``repeat_kv`` inside grouped-query attention), one at a time, and each kind of
edit also in every place it applies at once (``keepdims=True`` left out of both reductions).

The key is compiled once, as a schema: every editable node becomes a chain
``alternative_1 if 1 in ACTIVE else (... else original)``, so one mutant is one call with
``ACTIVE`` set, not one compilation. A mutant is named only when it reproduces the learner's
output on every failing case given (several sizes, so one case's coincidence does not count);
when two edits in different places fit, both are said, and when more fit none is. Messages show
the edited fragment in the contract's argument names, never the key's whole statement.
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import textwrap
import threading
import time
import types
import warnings
from dataclasses import dataclass

import numpy as np

from mhalib.checks import mutant_edits

# The grader tries at most MAX_TRIED mutants (after the ones a case cannot tell apart are
# skipped), so that the same submission always gets the same diagnosis, with a time limit that
# only a machine in trouble reaches; the visible judge answers while the learner waits (within
# 0.25 s in all), so it stops after QUICK_BUDGET_S seconds (the schema's first build included).
MAX_TRIED = 1500
QUICK_BUDGET_S = 0.07
BUILD_IN_BACKGROUND_BELOW_S = 1.0  # a judge with less time never builds a schema itself
GRADING_BUDGET_S = 30.0
KEY_MODULES = ("mhalib.reference", "mhalib.accounting")
MAX_GROUP = 4  # places of one kind of edit whose every subset is tried
ACTIVE = "__mhalib_active_edits__"


@dataclass(frozen=True, eq=False)
class Mutant:
    """Edits switched on together (``ids``: ``(node, new)`` pairs in ``edits``) in the function
    ``where`` (empty: the key itself); ``nodes`` are the edited subtrees (for overlaps),
    ``swap`` the ``(variable, used instead)`` of a mix-up of variables, ``said`` what shows the
    edits (rendered only for a mutant that fits)."""

    where: str
    ids: frozenset
    edits: tuple
    nodes: frozenset
    swap: tuple | None
    said: object

    @property
    def sentence(self) -> str:
        inside = f" (inside {self.where})" if self.where else ""
        fragments = " and ".join(f"`{old}` computed as `{new}`"
                                 for old, new in (self.said(n, e) for n, e in self.edits))
        everywhere = " (the same slip in each place)" if len(self.edits) > 1 else ""
        return f"{fragments}{everywhere}{inside}"


def mutant_diagnosis(exercise, recorded, budget_s: float = GRADING_BUDGET_S,
                     max_tried: int = MAX_TRIED) -> tuple[str, str] | None:
    """``(flag, message)`` naming the edit of the answer key that reproduces every recorded
    failing ``(case, result)`` (at most three), or None; tries at most ``max_tried`` mutants in
    order, and none after ``budget_s`` seconds (the schema's first build included)."""
    recorded = [(c, r) for c, r in recorded if not getattr(c, "must_raise", "")][:3]
    if not recorded or not default_expected(exercise) or degenerate(recorded) or \
            only_non_finite_differ(exercise, recorded) or extreme_inputs_only(recorded):
        return None
    from mhalib.checks.answer_key import answer_key

    started = time.perf_counter()
    key = answer_key(exercise.name)
    if budget_s < BUILD_IN_BACKGROUND_BELOW_S and not _built(key):
        _build_in_background(key)  # ready for the next check; this one goes on without it
        return None
    schema = _schema(key)
    if schema is None:
        return None
    compute = _computer(exercise, schema.function)
    recorded.sort(key=lambda pair: _size(pair[0]))  # the smallest case first: cheapest to try
    schema.active.reached = set()
    try:
        seen_values = _locals_seen(schema, compute, recorded[0][0])
    finally:
        reached, schema.active.reached = schema.active.reached, None
    fits: list[Mutant] = []
    for mutant in schema.mutants:
        if not mutant.ids & reached:
            continue  # an edit of code this case never runs changes nothing
        if mutant.swap is not None and not _alike(seen_values.get(mutant.where, {}),
                                                  *mutant.swap):
            continue
        max_tried -= 1
        if max_tried < 0 or time.perf_counter() - started > budget_s:
            break
        schema.active.clear()
        schema.active.update(mutant.ids)
        try:
            if not all(_reproduces(exercise, case, compute, result.get("output"))
                       for case, result in recorded):
                continue
        finally:
            schema.active.clear()
        if any(mutant.nodes & seen.nodes for seen in fits):
            continue  # the same place said another way (keepdims left out, or set False)
        fits.append(mutant)
        if len(fits) > 2:
            return None  # too many readings: none of them can be trusted to be the slip
    if not fits:
        return None
    lead = ("your output is exactly what the right computation gives with one change: "
            if len(fits) == 1 else "two single changes of the right computation give exactly "
            "your output: ")
    flag = f"mutant:{fits[0].where or 'key'}:{min(fits[0].ids)}"
    return flag, lead + " Or: ".join(m.sentence for m in fits) + "."


def only_non_finite_differ(exercise, recorded) -> bool:
    """True when, on every recorded case, the output is right wherever it is finite (it fails
    by NaN or inf alone): an overflow, which edits that overflow the same way would "explain"."""
    for case, result in recorded:
        output, expected = result.get("output"), exercise.expected(case)
        pairs = zip(output, expected) if isinstance(output, tuple) and isinstance(
            expected, tuple) else [(output, expected)]
        for got, want in pairs:
            if not isinstance(got, np.ndarray) or not isinstance(want, np.ndarray) or \
                    got.shape != want.shape:
                return False
            got, want = got.astype(np.float64), want.astype(np.float64)
            finite = np.isfinite(got)
            if finite.all() or not np.allclose(got[finite], want[finite], rtol=1e-3, atol=1e-5):
                return False
    return True


def extreme_inputs_only(recorded) -> bool:
    """True when every failing case has inputs of magnitude 80 or more (exp overflows past 88
    in float32): a slip of numerical care, which edits that overflow or underflow the same way
    would "explain"; the output's form says it better."""
    def largest(case):
        found = 0.0
        for value in list(case.args) + list(case.kwargs.values()):
            if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
                finite = np.abs(value[np.isfinite(value)])
                found = max(found, float(finite.max()) if finite.size else 0.0)
        return found
    return all(largest(case) >= 80 for case, _ in recorded)


def degenerate(recorded) -> bool:
    """True when every output holds the same value all along its last axis (a constant, all
    zeros, a uniform softmax): an output that ignores its inputs is reproduced by edits that
    throw the inputs away (the max shift computed as x itself), which name nothing."""
    arrays = []
    for _, result in recorded:
        output = result.get("output")
        parts = output if isinstance(output, tuple) else (output,)
        arrays += [np.asarray(p, dtype=np.float64) for p in parts
                   if isinstance(p, np.ndarray) and p.ndim and p.shape[-1] > 1]
    return bool(arrays) and all(
        np.allclose(a, a[..., :1], rtol=1e-9, atol=1e-12, equal_nan=True) for a in arrays)


def _size(case) -> int:
    """How many values the case's inputs hold."""
    return sum(int(np.size(a)) for a in list(case.args) + list(case.kwargs.values())
               if hasattr(a, "shape"))


def _locals_seen(schema, compute, case) -> dict[str, dict]:
    """The key's and its helpers' local variables when they return on ``case`` (the last
    call's), by function name ("" for the key), to tell which variables could be mixed up."""
    import sys

    codes = {code: where for where, code in schema.codes.items()}
    seen: dict[str, dict] = {}

    def watch(frame, event, arg):
        if event == "return" and frame.f_code in codes:
            seen[codes[frame.f_code]] = dict(frame.f_locals)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            compute(case)
    except Exception:
        pass
    finally:
        sys.setprofile(previous)
    return seen


def _alike(values: dict, name: str, other: str) -> bool:
    """True when ``other`` could stand where ``name`` is: both arrays (or tensors) of one
    shape, or both ints, or both floats."""
    if other is None:  # hard-coded: only an int variable (an axis, a count) is
        value = values.get(name)
        return isinstance(value, int) and not isinstance(value, bool)
    if name not in values or other not in values:
        return False
    a, b = values[name], values[other]
    shape_a, shape_b = getattr(a, "shape", None), getattr(b, "shape", None)
    if shape_a is not None or shape_b is not None:
        return shape_a is not None and tuple(shape_a) == tuple(shape_b or (None,))
    for kind in (bool, int, float):
        if isinstance(a, kind) or isinstance(b, kind):
            return isinstance(a, kind) and isinstance(b, kind)
    return False


def default_expected(exercise) -> bool:
    """True when the exercise's expected output is its answer key on the case's inputs."""
    from mhalib.checks.exercise import Exercise
    from mhalib.checks.torch_exercise import TorchExercise

    return type(exercise).expected in (Exercise.expected, TorchExercise.expected)


def _reproduces(exercise, case, compute, received) -> bool:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return exercise.reproduces(case, compute, received)


def _computer(exercise, function):
    from mhalib.checks.torch_exercise import TorchExercise, torch_model

    if isinstance(exercise, TorchExercise):
        return torch_model(function)

    def compute(case):
        return function(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
    return compute


# -- the schema -----------------------------------------------------------------------------------
@dataclass
class _Schema:
    function: types.FunctionType  # the key, every edit switchable through ``active``
    active: set
    mutants: list
    codes: dict  # function name ("" for the key) -> its schema's code object


def _built(key) -> bool:
    return key in _SCHEMAS


def clear_schemas() -> None:
    """Forget every schema built (tests time a first build)."""
    _SCHEMAS.clear()
    _BUILDING.clear()


def _build_in_background(key) -> None:
    """Build ``key``'s schema on a daemon thread (once), so that a judge with little time (the
    visible suite, while the learner waits) finds it built the next time."""
    if key in _BUILDING:
        return
    _BUILDING.add(key)
    threading.Thread(target=_schema, args=(key,), daemon=True,
                     name=f"mhalib-mutants-{getattr(key, '__name__', 'key')}").start()


_SCHEMAS: dict = {}
_BUILDING: set = set()


def _schema(key) -> _Schema | None:
    """The key compiled with every edit switchable, and its mutants (built once per key and
    process): the key's own edits first, then its helpers' (and theirs: ``softmax`` inside
    ``attention`` inside multi-head attention), then mix-ups of variables."""
    if key not in _SCHEMAS:
        _SCHEMAS[key] = _new_schema(key)
    return _SCHEMAS[key]


def _new_schema(key) -> _Schema | None:
    active = _Switchboard()
    counter = iter(range(1, 10**9))
    codes: dict = {}
    built = _build(key, "", active, counter, codes, depth=0, seen={key})
    if built is None:
        return None
    function, mutants = built
    ordered = sorted(mutants, key=lambda m: (m.swap is not None, m.where != ""))
    return _Schema(function, active, ordered, codes)


def _build(function, where, active, counter, codes, depth, seen):
    """``(schema function, mutants)`` of ``function`` and of the helpers it calls (two levels
    down), or None."""
    helpers, mutants = {}, []
    for name, helper in (_helpers(function) if depth < 2 else []):
        if helper in seen:
            continue
        built = _build(helper, name, active, counter, codes, depth + 1, seen | {helper})
        if built is not None:
            helpers[name], helper_mutants = built
            mutants.extend(helper_mutants)
    built = _instrument(function, active, counter, where, overrides=helpers)
    if built is None:
        return None
    compiled, own = built
    codes.setdefault(where, compiled.__code__)
    return compiled, own + mutants


def _helpers(function):
    """``(name, function)`` of the answer-key functions ``function`` calls by name."""
    tree = _parsed(function)
    if tree is None:
        return []
    seen, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            target = function.__globals__.get(name)
            if (name not in seen and inspect.isfunction(target)
                    and target.__module__.startswith(KEY_MODULES)):
                seen.add(name)
                found.append((name, target))
    return found


def _parsed(function) -> ast.FunctionDef | None:
    """``function``'s definition, freshly parsed, or None."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None
    node = ast.parse(source).body[0]
    return node if isinstance(node, ast.FunctionDef) else None


def _instrument(function, active, counter, where, overrides):
    """``(schema function, mutants)`` for ``function``, or None when it cannot be built."""
    tree = _parsed(function)
    if tree is None:
        return None
    module_globals = function.__globals__
    found = mutant_edits.sites(tree, module_globals)
    aliases = mutant_edits.aliases_of(tree, module_globals)
    parents = mutant_edits.parents_of(tree)
    by_node = {id(n): n for n in ast.walk(tree)}
    chains: dict[int, list[tuple[int, ast.AST]]] = {}
    mutants: list[Mutant] = []
    kinds: dict[tuple, list[tuple[int, ast.AST, tuple]]] = {}
    def said(node, new):
        return mutant_edits.say(tree, node, new, aliases, parents)

    for node_id, alternatives in found.items():
        node = by_node[node_id]
        subtree = _subtree(node)
        for new in alternatives:
            edit_id = next(counter)
            chains.setdefault(node_id, []).append((edit_id, new))
            kind = mutant_edits.kind_of(node, new)
            swap = _swap_of(kind)
            mutants.append(Mutant(where, frozenset({edit_id}), ((node, new),), subtree, swap,
                                  said))
            if kind is not None:
                kinds.setdefault(kind, []).append((edit_id, node, new))
    mutants += _everywhere(where, kinds, said)
    switched = copy.deepcopy(tree)  # the original stays as it reads, for the messages
    twins = {id(a): b for a, b in zip(ast.walk(tree), ast.walk(switched))}
    chains = {id(twins[node_id]): chain for node_id, chain in chains.items()}
    compiled = _compile(switched, chains, function, active, overrides)
    return (compiled, mutants) if compiled is not None else None


def _subtree(node) -> frozenset:
    """The ids of ``node``'s subtree (not its Load/Store markers and operators: the parser
    shares one of each between all the places)."""
    shared = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    return frozenset(id(n) for n in ast.walk(node) if not isinstance(n, shared))


def _swap_of(kind) -> tuple | None:
    """``(variable, other)`` of a mix-up of variables, ``(variable, None)`` of an int variable
    hard-coded: kept only where the values seen allow it (see :func:`_alike`)."""
    if kind is not None and kind[0] == "variable":
        return kind[1], kind[2]
    if kind is not None and kind[0] == "pinned":
        return kind[1], None
    return None


def _everywhere(where, kinds, said) -> list[Mutant]:
    """Mutants making one kind of edit in several places that do not nest: in all of them, and
    (for up to :data:`MAX_GROUP` places) in every two or more of them (the transposes of the
    keys and the values left out, but not the one in the scores)."""
    found = []
    for kind, places in kinds.items():
        if len(places) < 2:
            continue
        groups = [places]
        if len(places) <= MAX_GROUP and _swap_of(kind) is None:  # (a mix-up: everywhere only)
            groups = [list(g) for size in range(2, len(places) + 1)
                      for g in itertools.combinations(places, size)]
        for group in groups:
            subtrees = [_subtree(node) for _, node, _ in group]
            union = frozenset().union(*subtrees)
            if sum(len(s) for s in subtrees) != len(union):
                continue  # one place inside another
            found.append(Mutant(where, frozenset(i for i, _, _ in group),
                                tuple((node, new) for _, node, new in group), union,
                                _swap_of(kind), said))
    return found


class _Switchboard(set):
    """The ids of the edits switched on; while ``reached`` is a set, every id asked about is
    noted in it (the edits the code actually passes through on a case)."""

    reached: set | None = None

    def __contains__(self, edit_id):
        if self.reached is not None:
            self.reached.add(edit_id)
        return set.__contains__(self, edit_id)


class _Switches(ast.NodeTransformer):
    """Each edited node becomes ``new_1 if id_1 in ACTIVE else (... else node)`` (a statement:
    ``if id_1 in ACTIVE: new_1 else: ...``)."""

    def __init__(self, chains):
        self.chains = chains

    def visit(self, node):
        chain = self.chains.get(id(node))
        node = self.generic_visit(node)
        if not chain:
            return node
        at = {field: getattr(node, field, 1) for field in _POSITION}
        result = node
        for edit_id, new in reversed(chain):
            test = ast.Compare(ast.Constant(edit_id, **at), [_IN],
                               [ast.Name(ACTIVE, _LOAD, **at)], **at)
            if isinstance(node, ast.stmt):
                result = ast.If(test, [_located(new, node)], [result], **at)
            else:
                result = ast.IfExp(test, _located(new, node), result, **at)
        return result


_POSITION = ("lineno", "col_offset", "end_lineno", "end_col_offset")
_IN, _LOAD = ast.In(), ast.Load()


def _located(new, like):
    """``new`` with the source position of ``like`` on every node that has none (the nodes it
    shares with the original keep theirs), without walking into located subtrees."""
    pending = [new]
    while pending:
        node = pending.pop()
        if "lineno" in node._attributes and hasattr(node, "lineno"):
            continue
        if "lineno" in node._attributes:
            ast.copy_location(node, like)
        pending.extend(ast.iter_child_nodes(node))
    return new


def _compile(tree, chains, function, active, overrides):
    tree = _Switches(chains).visit(tree)
    tree.decorator_list = []
    tree.returns = None
    for argument in tree.args.args + tree.args.kwonlyargs:
        argument.annotation = None
    module = ast.Module(body=[tree], type_ignores=[])
    namespace = dict(function.__globals__)
    namespace.update(overrides)
    namespace[ACTIVE] = active
    try:
        exec(compile(module, f"<answer key {function.__name__}, every slip switchable>", "exec"),
             namespace)
    except Exception:
        return None
    compiled = namespace[tree.name]
    compiled.__defaults__ = function.__defaults__
    compiled.__kwdefaults__ = function.__kwdefaults__
    return compiled
