"""Node-level pieces shared by the slips (:mod:`mhalib.checks.mutant_edits`) and the repairs
(:mod:`mhalib.checks.repair_edits`): the marks a new node carries (what the edit means, that it
puts back what a slip left out), small constructors (a bound shifted by one, a block's slice),
and an expression's operators as text with its operands masked, to read it again with ``**``
for ``^``.
"""

from __future__ import annotations

import ast

_RESHAPES = ("reshape", "view")


HINT = "_mhalib_hint"  # an attribute of a new node: what the edit means, said after it


ADDED = "_mhalib_added"  # an attribute of a new node that puts back what a slip left out


_CLOSED = "the call's closing parenthesis belongs on the other side of the operator"


_XOR = "`^` is XOR in Python: the power is `**`, which binds tighter than `*`"


_BLOCK = ("block i of width w starts at i * w: an index where index times width belongs (the "
          "blocks overlap)")


def _block_of_index(part) -> ast.Slice | None:
    """``i * w:(i + 1) * w`` for a slice ``i:i + w`` (a block's index used as its start)."""
    if not (isinstance(part, ast.Slice) and part.step is None and isinstance(part.lower, ast.Name)
            and isinstance(part.upper, ast.BinOp) and isinstance(part.upper.op, ast.Add)
            and isinstance(part.upper.left, ast.Name) and part.upper.left.id == part.lower.id
            and not isinstance(part.upper.right, ast.Constant)):
        return None
    index, width = part.lower, part.upper.right
    return ast.Slice(ast.BinOp(ast.Name(index.id, ast.Load()), ast.Mult(), width),
                     ast.BinOp(ast.BinOp(ast.Name(index.id, ast.Load()), ast.Add(),
                                         ast.Constant(1)), ast.Mult(), width))


def _int_of(node) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_of(node.operand)
        return -inner if inner is not None else None
    return None


def _shifted(bound, delta: int):
    """``bound + delta`` as it would be written (``t + 1`` shifted by -1 is ``t``)."""
    if isinstance(bound, ast.BinOp) and isinstance(bound.op, (ast.Add, ast.Sub)) and isinstance(
            bound.right, ast.Constant) and type(bound.right.value) is int:
        step = bound.right.value if isinstance(bound.op, ast.Add) else -bound.right.value
        total = step + delta
        if total == 0:
            return bound.left
        op = ast.Add() if total > 0 else ast.Sub()
        return ast.BinOp(bound.left, op, ast.Constant(abs(total)))
    if isinstance(bound, ast.Constant) and type(bound.value) is int:
        return ast.Constant(bound.value + delta)
    return ast.BinOp(bound, ast.Add() if delta > 0 else ast.Sub(), ast.Constant(abs(delta)))


def _hinted(node: ast.AST, hint: str) -> ast.AST:
    setattr(node, HINT, hint)
    return node


MAX_OPERANDS = 10  # of an expression whose parentheses are moved (spans: at most 45)


def _masked(node: ast.AST) -> tuple[str, list[ast.AST]]:
    """``node``'s operators as text, each operand (anything but an operator) a placeholder
    ``_operand_i``; the operands in order."""
    operands: list[ast.AST] = []

    def masked(tree):
        if isinstance(tree, ast.BinOp):
            return ast.BinOp(masked(tree.left), tree.op, masked(tree.right))
        if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, (ast.USub, ast.UAdd)):
            return ast.UnaryOp(tree.op, masked(tree.operand))
        operands.append(tree)
        return ast.Name(f"_operand_{len(operands) - 1}", ast.Load())

    return ast.unparse(masked(node)), operands


POWER_FOR_XOR = "_mhalib_power_for_xor"  # (marks the edit: the same slip in several places)


def _power_for_xor(node: ast.BinOp) -> ast.AST | None:
    """``node`` read again with ``**`` for every ``^``, as its text would be if the learner had
    typed ``**`` (``6 * n * d ** 2`` for what Python reads as ``(6 * n * d) ^ 2``), or None
    when that is only the operator changed (an edit tried already)."""
    text, operands = _masked(node)
    if len(operands) > MAX_OPERANDS:
        return None
    try:
        parsed = ast.parse(text.replace("^", "**"), mode="eval").body
    except SyntaxError:
        return None
    plain = ast.parse(text, mode="eval").body
    plain.op = ast.Pow()
    if ast.dump(parsed) == ast.dump(plain):
        return None
    read = _hinted(_unmasked(parsed, operands), _XOR)
    setattr(read, POWER_FOR_XOR, True)
    return read


def _unmasked(tree, operands):
    if isinstance(tree, ast.Name) and tree.id.startswith("_operand_"):
        return operands[int(tree.id.rsplit("_", 1)[1])]
    if isinstance(tree, ast.BinOp):
        return ast.BinOp(_unmasked(tree.left, operands), tree.op,
                         _unmasked(tree.right, operands))
    if isinstance(tree, ast.UnaryOp):
        return ast.UnaryOp(tree.op, _unmasked(tree.operand, operands))
    return tree


def _in_a_copy(node: ast.AST, parents: dict) -> bool:
    """True when ``node`` (a number) is a factor of one term of a sum of copies of one term
    (the 2 of ``2 * n2d + 2 * n2d + 2 * n2d``): changing it counts that copy twice, which
    mends a missing term without writing it."""
    term = node
    while isinstance(parents.get(id(term)), ast.BinOp) and isinstance(
            parents[id(term)].op, (ast.Mult, ast.Div, ast.FloorDiv)):
        term = parents[id(term)]
    top = parents.get(id(term))
    if not (isinstance(top, ast.BinOp) and isinstance(top.op, ast.Add)):
        return False
    while isinstance(parents.get(id(top)), ast.BinOp) and isinstance(parents[id(top)].op,
                                                                      ast.Add):
        top = parents[id(top)]
    return _copies_of_one_term(top)


def _copies_of_one_term(node: ast.BinOp) -> bool:
    """True for a sum of copies of one term (``2 * n2d + 2 * n2d + 2 * n2d``): parentheses
    moved among them only weight one copy differently, which makes a count of terms, not a
    grouping (round X: three products where four belong, said as a parenthesis slip)."""
    terms: list[ast.AST] = []

    def flatten(tree):
        if isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Add):
            flatten(tree.left)
            flatten(tree.right)
        else:
            terms.append(tree)

    flatten(node)
    return len(terms) >= 2 and len({ast.dump(term) for term in terms}) == 1
