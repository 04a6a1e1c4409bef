"""Judging a fill-in-the-blank answer by meaning: evaluate the learner's expression safely.

Only a small, side-effect-free subset of Python is accepted (numbers, names from the question's
namespace, attribute access on them, calls, arithmetic, subscripts), so ``np.sqrt(d_k)``,
``d_k ** 0.5`` and ``math.sqrt(q.shape[-1])`` all evaluate, and nothing else can run.
"""

from __future__ import annotations

import ast
import math

import numpy as np

_ALLOWED_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Call, ast.BinOp,
    ast.UnaryOp, ast.Subscript, ast.Slice, ast.Tuple, ast.keyword,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod, ast.USub, ast.UAdd,
)
MAX_LENGTH = 200
# attributes an answer may use: enough for maths on shapes, nothing that touches files
ALLOWED_ATTRIBUTES = frozenset({
    "sqrt", "shape", "size", "ndim", "log", "log2", "log10", "exp", "pi", "e", "prod", "sum",
    "mean", "var", "std", "T", "power", "square", "abs", "max", "min", "floor", "ceil", "float64",
    "float32", "int64", "inf", "isqrt", "pow", "dtype", "itemsize", "maximum", "minimum",
    "log1p", "expm1", "logaddexp", "round",
})


class ExpressionError(ValueError):
    """The answer is not an expression the quiz can evaluate."""


def parse(text: str) -> ast.Expression:
    if not isinstance(text, str):
        raise ExpressionError(f"the answer must be a string, got {type(text).__name__}")
    text = text.strip()
    if not text:
        raise ExpressionError("the answer is empty")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"the answer is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"{text!r} is not a Python expression ({error.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ExpressionError(f"{type(node).__name__} is not allowed in an answer")
        if isinstance(node, ast.Attribute) and node.attr not in ALLOWED_ATTRIBUTES:
            raise ExpressionError(f"attribute {node.attr!r} is not allowed in an answer")
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise ExpressionError(f"name {node.id!r} is not allowed in an answer")
    return _FloatPower().visit(tree)


class _FloatPower(ast.NodeTransformer):
    """Rewrite ``a ** b`` as float power, so ``9 ** 9 ** 9`` overflows at once, never hangs."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow):
            call = ast.Call(func=ast.Name("__pow", ast.Load()), args=[node.left, node.right],
                            keywords=[])
            return ast.copy_location(call, node)
        return node


def _float_power(base, exponent):
    return np.power(np.asarray(base, dtype=float), np.asarray(exponent, dtype=float))


def evaluate(text: str, names: dict):
    """Value of ``text`` with ``np``, ``math`` and ``names`` in scope (no builtins)."""
    tree = parse(text)
    scope = {"np": np, "numpy": np, "math": math, "sqrt": math.sqrt, **names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id != "__pow" and node.id not in scope:
            raise ExpressionError(f"{node.id!r} is not defined here (known: "
                                  f"{', '.join(sorted(scope))})")
    try:
        with np.errstate(all="ignore"):
            code = compile(ast.fix_missing_locations(tree), "<answer>", "eval")
            # numpy's methods may import lazily from the caller's builtins; names starting with
            # "_" are refused above, so an answer cannot reach __import__ itself
            return eval(code, {"__builtins__": {"__import__": __import__}},  # noqa: S307
                        {**scope, "__pow": _float_power})
    except Exception as error:
        raise ExpressionError(f"evaluating the answer failed: {type(error).__name__}: {error}"
                              ) from None
