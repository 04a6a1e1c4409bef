"""The answer key compiled once with every small edit switchable (issue 22; used by
:mod:`mhalib.checks.mutants`).

Every editable node of the key's computing statements (and of the answer-key helpers it calls,
two levels down) becomes a chain ``alternative_1 if 1 in ACTIVE else (... else original)``, so
one mutant is one call with ``ACTIVE`` set, not one compilation. :class:`Mutant` is one edit,
or one kind of edit made in several places at once; its sentence shows the edited fragments in
the contract's argument names. Schemas are built once per key and process, on a daemon thread
when the judge has no time to wait (:func:`build_in_background`); such a build gives way to any
check that runs meanwhile (:func:`foreground`).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import itertools
import textwrap
import threading
import time
import types
from dataclasses import dataclass, field

from mhalib.checks import edit_nodes, edit_sayings, mutant_edits

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
        # (a lesson's function the learner also writes, like softmax, is named; the key's
        # private helpers are not the learner's code)
        inside = f" (inside {self.where})" if self.where and not self.where.startswith(
            "_") else ""
        fragments = " and ".join(f"`{old}` computed as `{new}`"
                                 for old, new in (self.said(n, e) for n, e in self.edits))
        everywhere = " (the same slip in each place)" if len(self.edits) > 1 else ""
        hints = dict.fromkeys(getattr(e, edit_nodes.HINT, "") for _, e in self.edits)
        hint = "".join(f" ({h})" for h in hints if h)
        return f"{fragments}{everywhere}{inside}{hint}"


@dataclass
class Schema:
    function: types.FunctionType  # the key, every edit switchable through ``active``
    active: set
    mutants: list
    codes: dict  # function name ("" for the key) -> its schema's code object
    originals: dict = field(default_factory=dict)  # function name -> the function as written


def built(key) -> bool:
    return key in _SCHEMAS


def clear_schemas() -> None:
    """Forget every schema built (tests time a first build)."""
    _SCHEMAS.clear()
    _BUILDING.clear()


def build_in_background(key) -> None:
    """Build ``key``'s schema on a daemon thread (once), so that a judge with little time (the
    visible suite, while the learner waits) finds it built the next time."""
    if key in _BUILDING:
        return
    _BUILDING.add(key)
    threading.Thread(target=_build_giving_way, args=(key,), daemon=True,
                     name=f"mhalib-mutants-{getattr(key, '__name__', 'key')}").start()


@contextlib.contextmanager
def foreground():
    """While a check runs inside, every background build waits at its next step (a few ms of
    work apart): sharing the interpreter half and half made the check that the learner waits
    on up to twice as slow (round AD's visible max, 0.26 s, was a second check beside its
    first check's build)."""
    with _RUNNING_LOCK:
        _RUNNING[0] += 1
    try:
        yield
    finally:
        with _RUNNING_LOCK:
            _RUNNING[0] -= 1


def _build_giving_way(key) -> None:
    _IN_BACKGROUND.active = True
    schema(key)


def _give_way() -> None:
    """On a background build's thread, wait while a check runs (:func:`foreground`)."""
    if getattr(_IN_BACKGROUND, "active", False):
        while _RUNNING[0]:
            time.sleep(0.002)


_SCHEMAS: dict = {}
_BUILDING: set = set()
_RUNNING = [0]  # checks running now (:func:`foreground`)
_RUNNING_LOCK = threading.Lock()
_IN_BACKGROUND = threading.local()


def schema(key) -> Schema | None:
    """The key compiled with every edit switchable, and its mutants (built once per key and
    process): the key's own edits first, then its helpers' (and theirs: ``softmax`` inside
    ``attention`` inside multi-head attention), then mix-ups of variables."""
    if key not in _SCHEMAS:
        _SCHEMAS[key] = build_schema(key)
    return _SCHEMAS[key]


def build_schema(function, owned=None, repairing=False) -> Schema | None:
    """``function`` (and the helpers ``owned`` accepts, two levels down) compiled with every
    small edit switchable, and its mutants in the order they are tried (not cached: see
    :func:`schema` for the answer key's)."""
    active = _Switchboard()
    counter = iter(range(1, 10**9))
    codes: dict = {}
    originals: dict = {}
    made = _build(function, "", active, counter, codes, depth=0, seen={function}, owned=owned,
                  repairing=repairing, originals=originals)
    if made is None:
        return None
    compiled, mutants = made
    siblings = {where: _sibling_pairs(_parsed(function)) for where, function in
                originals.items()}
    ordered = sorted(mutants, key=lambda m: (
        m.swap is not None and frozenset(m.swap) not in siblings.get(m.where, ()),
        m.where != "", any(hasattr(e, edit_nodes.ADDED) for _, e in m.edits),
        not _accumulates(m)))
    # (a mix-up of siblings, k for q, is tried where its place comes: round AC's grad_k read
    # from k came after the 800 tries a grader makes)
    # (what a slip left out: last; an overwrite made an accumulation: first, few as they are,
    # since a loop's last statement is otherwise tried after every edit above it, round AA)
    return Schema(compiled, active, ordered, codes, originals)


def _sibling_pairs(tree: ast.FunctionDef | None) -> set[frozenset]:
    """The pairs of names made side by side: the function's parameters, the names of one
    unpacking (``q_, k_, v_ = ...``), each pair once."""
    if tree is None:
        return set()
    groups = [[a.arg for a in tree.args.args + tree.args.kwonlyargs]]
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Tuple):
            groups.append([n.id for n in node.targets[0].elts if isinstance(n, ast.Name)])
    return {frozenset((a, b)) for group in groups for a in group for b in group if a != b}


def _accumulates(mutant) -> bool:
    """True for ``x = ...`` in a loop made ``x += ...`` (:mod:`mhalib.checks.repair_edits`)."""
    return any(isinstance(node, ast.Assign) and isinstance(new, ast.AugAssign)
               for node, new in mutant.edits)


def _build(function, where, active, counter, codes, depth, seen, owned=None, repairing=False,
           originals=None):
    """``(schema function, mutants)`` of ``function`` and of the helpers it calls (two levels
    down: the functions ``owned`` accepts, by default the answer key's), or None."""
    helpers, mutants = {}, []
    for name, helper in (_helpers(function, owned) if depth < 2 else []):
        if helper in seen:
            continue
        made = _build(helper, name, active, counter, codes, depth + 1, seen | {helper}, owned,
                      repairing, originals)
        if made is not None:
            helpers[name], helper_mutants = made
            mutants.extend(helper_mutants)
    made = _instrument(function, active, counter, where, overrides=helpers, repairing=repairing)
    if made is None:
        return None
    compiled, own = made
    codes.setdefault(where, compiled.__code__)
    if originals is not None:
        originals.setdefault(where, function)
    return compiled, own + mutants


def _is_key(function) -> bool:
    return function.__module__.startswith(KEY_MODULES)


def _helpers(function, owned=None):
    """``(name, function)`` of the functions ``function`` calls by name that ``owned`` accepts
    (by default: the answer key's)."""
    owned = owned or _is_key
    tree = _parsed(function)
    if tree is None:
        return []
    seen, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            target = function.__globals__.get(name)
            if (name not in seen and inspect.isfunction(target)
                    and target.__module__ is not None and owned(target)):
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


def _instrument(function, active, counter, where, overrides, repairing=False):
    """``(schema function, mutants)`` for ``function``, or None when it cannot be built (for a
    ``repairing`` search, the edits also put back what a slip leaves out)."""
    tree = _parsed(function)
    if tree is None or function.__code__.co_freevars:
        return None  # (a closure's free variables would not be found in the schema's globals)
    module_globals = function.__globals__
    found = mutant_edits.sites(tree, module_globals, repairing=repairing, helper=bool(where))
    aliases = edit_sayings.aliases_of(tree, module_globals)
    parents = edit_sayings.parents_of(tree)
    by_node = {id(n): n for n in ast.walk(tree)}
    chains: dict[int, list[tuple[int, ast.AST]]] = {}
    mutants: list[Mutant] = []
    kinds: dict[tuple, list[tuple[int, ast.AST, tuple]]] = {}
    def said(node, new, least=0, together=None):
        if together is not None:  # several edits shown in one fragment that holds them all
            return edit_sayings.say_together(together, aliases, parents)
        return edit_sayings.say(tree, node, new, aliases, parents, least)

    for node_id, alternatives in found.items():
        _give_way()
        node = by_node[node_id]
        subtree = _subtree(node)
        for new in alternatives:
            edit_id = next(counter)
            chains.setdefault(node_id, []).append((edit_id, new))
            kind = edit_sayings.kind_of(node, new)
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
        groups = [_outermost(places)]  # (round AI: `a * d ^ 2 + b * n ^ 2 * d` holds two
        # ^ nodes, one inside the other; read with ** at the outer one, it mends both)
        if len(places) <= MAX_GROUP and _swap_of(kind) is None:  # (a mix-up: everywhere only)
            groups = [list(g) for size in range(2, len(places) + 1)
                      for g in itertools.combinations(places, size)]
        for group in groups:
            _give_way()
            subtrees = [_subtree(node) for _, node, _ in group]
            union = frozenset().union(*subtrees)
            if sum(len(s) for s in subtrees) != len(union):
                continue  # one place inside another
            found.append(Mutant(where, frozenset(i for i, _, _ in group),
                                tuple((node, new) for _, node, new in group), union,
                                _swap_of(kind), said))
    return found


def _outermost(places: list) -> list:
    """``places`` (``(edit id, node, new)``) without those inside another place."""
    subtrees = [_subtree(node) for _, node, _ in places]
    return [place for place, inner in zip(places, subtrees)
            if not any(inner < outer for outer in subtrees)]


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
        _give_way()
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
