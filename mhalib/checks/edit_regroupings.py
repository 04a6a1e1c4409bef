"""The same operands grouped otherwise (issue 22), one kind of edit of
:mod:`mhalib.checks.mutant_edits`: the parentheses of an operand left out and the expression
read by Python's precedence (``base ** -2.0 * i / d`` for ``base ** (-2.0 * i / d)``), or put
around other operands (``(layers * rank) + rope`` for ``layers * (rank + rope)``)."""

from __future__ import annotations

import ast
import copy

from mhalib.checks.edit_nodes import MAX_OPERANDS, _copies_of_one_term, _hinted, _masked, _unmasked

REGROUPED = ("the same operands grouped otherwise: check the parentheses (Python reads `**` "
             "before `*` and `/`, and those before `+` and `-`)")
# (round AE: -(b - r) for (-b - r) took the other root: a sign, which parentheses also move)
# (round AK: d * d + 1 mended as d * (d + 1) was a bias of d numbers counted as one)
REGROUPED_PER_FACTOR = ("the same operands grouped otherwise: either the parentheses are the "
                        "slip, or a term was left out of a product it belongs in (in a count: "
                        "once where it belongs once per unit of that factor, a bias of d "
                        "numbers counted as 1)")
REGROUPED_SIGN = ("the same operands grouped otherwise, which turns the sign of a term "
                  "(-(a - b) is -a + b): the slip is that sign or the parentheses")


def _regroupings(node: ast.BinOp):
    """``node`` (a whole expression of operators) with one pair of its parentheses left out and
    read again by Python's precedence (``base ** -2.0 * i / d`` for ``base ** (-2.0 * i / d)``),
    or with one pair put around a run of its operands (``layers * (rank + rope) * n`` for
    ``layers * rank + rope * n``, ``(4 * d) ** 2`` for ``4 * d ** 2``). The operands
    (anything but an operator) stay the original nodes."""
    text, operands = _masked(node)
    if not 2 <= len(operands) <= MAX_OPERANDS or _copies_of_one_term(node):
        return
    seen = {ast.dump(ast.parse(text, mode="eval").body)}
    for candidate in _bracketed(text, len(operands)):
        try:
            parsed = ast.parse(candidate, mode="eval").body
        except SyntaxError:
            continue
        if ast.dump(parsed) not in seen and not _same_value_regrouping(parsed, text):
            seen.add(ast.dump(parsed))
            regrouped = _unmasked(parsed, operands)
            if _number_pairs(regrouped) <= _number_pairs(node):
                plain = ast.parse(text, mode="eval").body
                signs = _negated_groups(parsed) != _negated_groups(plain)
                yield _hinted(regrouped, REGROUPED_SIGN if signs else REGROUPED_PER_FACTOR
                              if _factor_spread(plain, parsed) else REGROUPED)


def _factor_spread(before: ast.AST, after: ast.AST) -> bool:
    """True for ``a * b + c`` read as ``a * (b + c)``: a factor that now multiplies a term it
    did not (not ``h + 1 * d`` read as ``(h + 1) * d``, a slice's end)."""
    sums = (ast.Add, ast.Sub)
    return (isinstance(before, ast.BinOp) and isinstance(before.op, sums)
            and isinstance(before.left, ast.BinOp) and isinstance(before.left.op, ast.Mult)
            and isinstance(after, ast.BinOp) and isinstance(after.op, ast.Mult)
            and any(isinstance(side, ast.BinOp) and isinstance(side.op, sums)
                    for side in (after.left, after.right)))


def _negated_groups(tree) -> int:
    """How many minus signs of ``tree`` stand before a parenthesised sum or difference."""
    return sum(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub)
               and isinstance(n.operand, ast.BinOp) and isinstance(n.operand.op, (ast.Add, ast.Sub))
               for n in ast.walk(tree))  # (round AF: -(2 * i) is -2 * i, no sign turned)


def _number_pairs(tree) -> int:
    """How many operations of ``tree`` join two numbers into 0 (or fail): a regrouping that
    makes one (``n * n + 1 // 2`` from ``n * (n + 1) // 2``, where ``1 // 2`` is 0) folds away
    terms the code wrote, which is not a matter of parentheses (``d ** (1 / 2)`` for
    ``d ** 1 / 2`` is)."""
    return sum(isinstance(n, ast.BinOp) and isinstance(n.left, ast.Constant)
               and isinstance(n.right, ast.Constant) and _folds_to_zero(n)
               for n in ast.walk(tree))


def _folds_to_zero(node: ast.BinOp) -> bool:
    try:
        numbers = ast.fix_missing_locations(ast.Expression(copy.deepcopy(node)))
        return eval(compile(numbers, "<numbers>", "eval"), {"__builtins__": {}}) == 0
    except Exception:
        return True


def _bracketed(text: str, count: int):
    """``text`` with one pair of parentheses removed, then with one pair put around each run
    of two or more operands (placeholders ``_operand_i`` in order)."""
    opened = []
    for i, char in enumerate(text):
        if char == "(":
            opened.append(i)
        elif char == ")" and opened:
            start = opened.pop()
            yield text[:start] + text[start + 1:i] + text[i + 1:]
    starts = [text.index(f"_operand_{i}") for i in range(count)]
    ends = [starts[i] + len(f"_operand_{i}") for i in range(count)]
    for first in range(count):
        for last in range(first + 1, count):
            yield (text[:starts[first]] + "(" + text[starts[first]:ends[last]] + ")"
                   + text[ends[last]:])


def _same_value_regrouping(parsed, text) -> bool:
    """True when the new grouping only reassociates one kind of sum or product (``a * (b * c)``
    for ``a * b * c``), which gives the same value."""
    flat = {type(n.op) for n in ast.walk(parsed) if isinstance(n, ast.BinOp)}
    return len(flat) == 1 and flat <= {ast.Add, ast.Mult}


