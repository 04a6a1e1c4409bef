"""Where else a repair's change could be made (issue 22, round O).

A repair (:mod:`mhalib.checks.repairs`) is one small edit that makes every case right, but a
value can be mended where it is made or where it is used, and only one of the two is the slip:

- ``d_model = x.shape[-1]`` mended as ``q.shape[-1]`` makes every case right when the scale
  below divides by ``sqrt(d_model)``, but the slip is the scale (the name now holds a head's
  width);
- ``x.reshape(batch, seq_len, ...)`` mended as ``x.reshape(seq_len, batch, ...)`` makes every
  case right when ``seq_len, batch, d_model = x.shape`` unpacked the sizes in the wrong order,
  and the slip is the unpacking.

:func:`elsewhere` says the other place, for the message to offer beside the change found.
"""

from __future__ import annotations

import ast

MAX_SAID = 200  # characters of the other place's description a record carries
SIMPLE_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)


def elsewhere(tree: ast.FunctionDef | None, mutant, first_line: int,
              truthful=lambda name: False) -> str:
    """The other place where ``mutant``'s change (one statement of ``tree``, the function it
    edits, whose first line is numbered ``first_line`` in the learner's cell) could be made,
    as a phrase for the message, or ``""``. A size's assignment is offered at its use only when
    ``truthful(name)``: the variable is named after the size of the case it held (``d_model``
    holding d_model); ``tokens = seq_len + 1`` is the slip where it is made."""
    if tree is None:
        return ""
    lines = {getattr(node, "lineno", 0) for node, _ in mutant.edits}
    made = _made_from(tree, mutant, min(lines))
    if made is not None:
        name, other, at = made
        where = (f"line {first_line + at[0] - 1}" if len(at) == 1 else
                 f"lines {first_line + at[0] - 1}-{first_line + at[-1] - 1}")
        return (f"`{name}` is made from `{other}` at {where}, and how it is made there may be "
                "the slip")
    if len(lines) != 1:
        return ""
    line = lines.pop()
    statement = _statement_at(tree, line)
    if statement is None:
        return ""
    twin = _made_a_twin(tree, mutant, statement)
    if twin:
        name, other, at = twin
        where = ", ".join(str(first_line + n - 1) for n in at)
        return (f"or leave that line and read `{other}` where `{name}` is used, "
                f"line{'s' if len(at) > 1 else ''} {where}, if `{name}` should hold what it "
                "holds now")
    signed = _sign_made_upstream(tree, mutant, statement)
    if signed:
        name, at = signed
        return (f"or negate `{name}` where it is made, line {first_line + at - 1}, if its sign "
                "is the slip there: a sign can be undone where a value is made or where it is "
                "used")
    used = _used_later(tree, statement)
    if used and truthful(used[0]):
        name, at = used
        where = ", ".join(str(first_line + n - 1) for n in at)
        return (f"or leave that line and change the value where `{name}` is used, "
                f"line{'s' if len(at) > 1 else ''} {where}, if `{name}` should hold what it "
                "holds now")
    moved = _names_moved(mutant)
    unpacking = _unpacking_of(tree, line, moved)
    if unpacking is not None and _read_only_at(tree, moved, line) and \
            _every_read_edited(tree, mutant, moved):
        text = ast.unparse(unpacking)
        said = f": `{text}`" if len(text) <= MAX_SAID // 2 else ""
        return (f"or swap the names where they are assigned instead, line "
                f"{first_line + unpacking.lineno - 1}{said}")
    return ""


def bypassed(tree: ast.FunctionDef | None, mutant, first_line: int) -> str:
    """When ``mutant`` reads another variable wherever the code reads ``name`` (two reads or
    more, or one of a value reduced from an input's entries; ``name`` not made from the other):
    ``name`` is then read nowhere, and the value made for it is the likelier slip, as a phrase;
    else ``""`` (round AA: ``scores = 2 * (N * D) ** 2`` mended by reading ``wsum``, which held
    the right count, at both of its uses)."""
    swap = getattr(mutant, "swap", None)
    if tree is None or swap is None or None in swap:
        return ""
    name, other = swap
    reads = _reads_of(tree, name)
    made = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign))
            and any(isinstance(t, ast.Name) and t.id == name
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    if not reads or len(mutant.edits) < len(reads) or len(made) != 1 or any(
            isinstance(n, ast.Name) and n.id == other for n in ast.walk(made[0].value)):
        return ""
    if len(reads) < 2 and not _reduced_from_data(made[0].value):
        return ""
    text = ast.unparse(made[0])
    said = f" (`{text}`)" if len(text) <= MAX_SAID // 2 else ""
    return (f"`{name}` is then read nowhere: the slip is most likely where it is made, line "
            f"{first_line + made[0].lineno - 1}{said}, and `{other}` holds what it should")


def _reduced_from_data(value: ast.AST) -> bool:
    """A value computed by reducing an input's entries (``int(lengths.max())``, ``x.sum()``):
    made that way for its one read, it is likelier the slip than the read (round AP: the
    longest length taken for the mask's width n), unlike a size read off a shape (``d_v =
    v.shape[-1]`` read where d_k belongs is a slip at the read)."""
    return any(isinstance(n, ast.Call) and (getattr(n.func, "attr", None) or getattr(
        n.func, "id", None)) in _REDUCTIONS for n in ast.walk(value))


_REDUCTIONS = ("max", "min", "amax", "amin", "sum", "mean", "argmax", "item")


def _made_a_twin(tree, mutant, statement) -> tuple[str, str, list[int]] | None:
    """``(name, other, lines)`` when ``mutant`` makes one name of an unpacking (``n, d =
    x.shape[-2], x.shape[-1]``) hold what another of its names holds (``x.shape[-1]``): the
    uses of ``name`` (``lines``) may be the slip instead, reading ``other`` there (round AC:
    the exponent divided by ``n`` where ``d`` belongs, mended as ``n = x.shape[-1]``)."""
    if len(mutant.edits) != 1 or not isinstance(statement, ast.Assign) or \
            len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Tuple) or \
            not isinstance(statement.value, ast.Tuple):
        return None
    names, values = statement.targets[0].elts, statement.value.elts
    node, new = mutant.edits[0]
    if len(names) != len(values) or not all(isinstance(n, ast.Name) for n in names):
        return None
    for i, value in enumerate(values):
        if not any(_same_node(inner, node) for inner in ast.walk(value)):
            continue  # (the mutant's nodes are the schema's copy of the learner's code)
        edited = ast.unparse(value).replace(ast.unparse(node), ast.unparse(new), 1)
        for j, twin in enumerate(values):
            if j != i and ast.unparse(twin) == edited:
                reads = sorted({n.lineno for n in _reads_of(tree, names[i].id,
                                                              statement.lineno)})
                return (names[i].id, names[j].id, reads[:3]) if reads else None
    return None


def _reads_of(tree, name: str, after: int = 0) -> list[ast.Name]:
    """Where ``tree`` reads the variable ``name`` (on lines past ``after``)."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load) and n.lineno > after]


def _same_node(a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` are the same node of two parses of one code: at one place, alike."""
    return getattr(a, "lineno", None) == getattr(b, "lineno", -1) and getattr(
        a, "col_offset", None) == getattr(b, "col_offset", -1) and ast.dump(a) == ast.dump(b)


def _factors(node: ast.AST) -> list[str]:
    """The names that are factors of ``node`` (through products, quotients' numerators and
    unary minus only): negating one negates the whole; a name inside a call (``log(s)``) is
    not one (round Z's log-domain softmax: negating s would take the log of a negative)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _factors(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.MatMult)):
        return _factors(node.left) + _factors(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _factors(node.left)
    return []


def _sign_made_upstream(tree, mutant, statement) -> tuple[str, int] | None:
    """``(name, line)`` when ``mutant`` only flips a sign (``+`` and ``-`` swapped, or a unary
    minus dropped) of an operand holding a variable that one earlier statement of the function
    made: the sign may be wrong where that variable is made (round AB: rotate_half built as
    cat(x2, -x1), mended as ``- rotated * sin`` where ``+`` stood)."""
    if len(mutant.edits) != 1:
        return None
    node, new = mutant.edits[0]
    if isinstance(node, ast.BinOp) and isinstance(new, ast.BinOp) and \
            {type(node.op), type(new.op)} == {ast.Add, ast.Sub} and new.right is node.right:
        operand = node.right
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            new is node.operand:
        operand = node.operand
    else:
        return None
    for name in _factors(operand):
        made = [a for a in ast.walk(tree) if isinstance(a, ast.Assign) and len(a.targets) == 1
                and isinstance(a.targets[0], ast.Name) and a.targets[0].id == name]
        if len(made) == 1 and made[0].lineno < statement.lineno:
            return name, made[0].lineno
    return None


def _made_from(tree, mutant, line: int) -> tuple[str, str, list[int]] | None:
    """``(name, other, lines)`` when ``mutant`` reads ``other`` wherever the code reads
    ``name``, and ``name`` was made from ``other`` on ``lines`` before ``line`` (``logits =
    np.asarray(x)`` then ``logits = np.where(np.isneginf(logits), 0.0, logits)``): reading
    ``other`` instead bypasses what those statements did, and they may be the slip (round P)."""
    swap = getattr(mutant, "swap", None)
    if swap is None or None in swap:
        return None
    name, other = swap
    if len(mutant.edits) < len(_reads_of(tree, name)):
        return None  # (read elsewhere as it is: the value made is used, the slip is here)
    made: list[int] = []
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                        and n.lineno <= line and len(n.targets) == 1
                        and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name),
                       key=lambda n: n.lineno):
        names = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        if other in names and name not in names:
            made = [node.lineno]  # (made afresh from ``other``)
        elif name in names and made:
            made.append(node.lineno)  # (then changed)
        else:
            made = []
    return (name, other, made) if made else None


def _statement_at(tree, line: int) -> ast.stmt | None:
    """The innermost simple statement spanning ``line``."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, SIMPLE_STATEMENTS) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            if found is None or node.lineno >= found.lineno:
                found = node
    return found


def _used_later(tree, statement) -> tuple[str, list[int]] | None:
    """``(name, lines)``: ``statement`` assigns one plain name a size (not in a loop, not a
    running total), which the function reads afterwards on ``lines`` (before it is assigned
    again)."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        return None
    name = statement.targets[0].id
    if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(statement.value)):
        return None  # (x = x + ...: an update, not a value made once)
    if not _a_size(statement.value):
        return None  # (an array computed: the edit is a part of it, not the value as a whole)
    if any(isinstance(loop, (ast.For, ast.While)) and statement in ast.walk(loop)
           for loop in ast.walk(tree)):
        return None
    end = statement.end_lineno or statement.lineno
    reads, stored_again = [], None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and node.lineno > end:
            if isinstance(node.ctx, ast.Store):
                stored_again = min(stored_again or node.lineno, node.lineno)
            else:
                reads.append(node.lineno)
    reads = sorted({n for n in reads if stored_again is None or n <= stored_again})
    return (name, reads[:3]) if reads else None


_SIZE_CALLS = {"len", "int", "float", "min", "max", "abs", "round", "sqrt", "size", "log",
               "log2", "prod", "isqrt"}


def _a_size(value: ast.AST) -> bool:
    """True for an expression of sizes (``w_q.shape[0]``, ``d_model // num_heads``,
    ``1 / math.sqrt(d)``): no matrix product, no slicing but of a shape, no call but of the
    size functions."""
    for node in ast.walk(value):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return False
        if isinstance(node, ast.Subscript) and not (
                isinstance(node.value, ast.Attribute) and node.value.attr == "shape"):
            return False
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if called not in _SIZE_CALLS:
                return False
    return True


def _names_moved(mutant) -> set[str]:
    """The variables the edit reads in other places: one read instead of another (a mix-up),
    or the same names in another order."""
    if getattr(mutant, "swap", None) is not None and None not in mutant.swap:
        return set(mutant.swap)
    moved: set[str] = set()
    for node, new in mutant.edits:
        before, after = _names_in_order(node), _names_in_order(new)
        if sorted(before) == sorted(after) and before != after:
            moved |= {a for a, b in zip(before, after) if a != b}
    return moved


def _names_in_order(node: ast.AST) -> list[str]:
    """The names ``node`` reads, in the order the code reads them (left to right: regrouping
    ``p * g - row`` as ``p * (g - row)`` moves no name)."""
    if isinstance(node, ast.Name):
        return [node.id]
    return [name for child in ast.iter_child_nodes(node) for name in _names_in_order(child)]


def _read_only_at(tree, names: set[str], line: int) -> bool:
    """True when the function reads none of ``names`` but on ``line``: swapping them where they
    are assigned then gives the same values as swapping them there."""
    return all(node.lineno == line for node in ast.walk(tree)
               if isinstance(node, ast.Name) and node.id in names
               and isinstance(node.ctx, ast.Load))


def _every_read_edited(tree, mutant, names: set[str]) -> bool:
    """True when the edit changes every read of ``names`` (round U: ``reshape(b, n, h * n)``
    mended as ``h * d`` leaves the first ``n`` as it is, so swapping ``n`` and ``d`` where
    they are unpacked would change both)."""
    def reads(nodes) -> set:
        return {(n.lineno, n.col_offset) for node in nodes for n in ast.walk(node)
                if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)}
    return reads([tree]) <= reads([node for node, _ in mutant.edits])


def _unpacking_of(tree, line: int, names: set[str]) -> ast.Assign | None:
    """The last unpacking before ``line`` (``a, b, c = x.shape``) that assigns two or more of
    ``names``."""
    if len(names) < 2:
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno < line and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Tuple):
            targets = {n.id for n in node.targets[0].elts if isinstance(n, ast.Name)}
            if len(targets & names) >= 2 and (found is None or node.lineno > found.lineno):
                found = node
    return found
