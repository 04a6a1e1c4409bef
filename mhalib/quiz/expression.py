"""Judging a fill-in-the-blank answer by meaning: evaluate the learner's expression safely.

Only a small, side-effect-free subset of Python is accepted (numbers, names from the question's
namespace, attribute access on them, calls, arithmetic, subscripts), so ``np.sqrt(d_k)``,
``d_k ** 0.5`` and ``math.sqrt(q.shape[-1])`` all evaluate, and nothing else can run.

Numbers only, and bounded: constants must be numbers (no strings or bytes), every arithmetic
operator is checked to act on numbers or numeric arrays of at most ``MAX_ELEMENTS`` values (so
``'a' * 10**8``, ``(1,) * 10**8`` or ``q.shape * 10**8`` cannot allocate; a tuple or list may
still be an argument, ``np.max((a, b))``, or an index, ``x[0, 1]``), the
result must be a number or a numeric array, and an evaluation that runs past ``TIME_LIMIT``
seconds is stopped (where the grader can set an alarm: the main thread on POSIX).
"""

from __future__ import annotations

import ast
import math
import numbers
import operator
import signal
import threading
from contextlib import contextmanager

import numpy as np

_ALLOWED_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Call, ast.BinOp,
    ast.UnaryOp, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.keyword,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod, ast.USub, ast.UAdd,
)
MAX_LENGTH = 200
MAX_ELEMENTS = 1_000_000  # largest array an operator may act on
TIME_LIMIT = 2.0  # seconds for one evaluation
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
        if isinstance(node, ast.Constant) and not _is_number_constant(node.value):
            raise ExpressionError(f"{node.value!r} is not a number: an answer is built from "
                                  "numbers and the names given")
    return _CheckedOperators().visit(tree)


def _is_number_constant(value) -> bool:
    return isinstance(value, (int, float))  # bools too: keepdims=True (operators refuse them)


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


class _CheckedOperators(ast.NodeTransformer):
    """Every operator becomes a call that first checks its operands are numbers (``a ** b`` as
    float power, so ``9 ** 9 ** 9`` overflows at once, never hangs)."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        name = "__pow" if isinstance(node.op, ast.Pow) else f"__{type(node.op).__name__}"
        call = ast.Call(func=ast.Name(name, ast.Load()), args=[node.left, node.right],
                        keywords=[])
        return ast.copy_location(call, node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        call = ast.Call(func=ast.Name(f"__{type(node.op).__name__}", ast.Load()),
                        args=[node.operand], keywords=[])
        return ast.copy_location(call, node)


def _numeric(value, where: str):
    """``value`` if it is a number or a numeric array of at most MAX_ELEMENTS values."""
    if isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_)):
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        if value.size > MAX_ELEMENTS:
            raise ExpressionError(f"{where}: an array of {value.size} values is too large")
        return value
    raise ExpressionError(f"{where} works on numbers only, got {type(value).__name__}")


def _checked(function, name: str):
    def apply(*operands):
        return function(*(_numeric(x, name) for x in operands))
    return apply


def _float_power(base, exponent):
    base, exponent = _numeric(base, "**"), _numeric(exponent, "**")
    return np.power(np.asarray(base, dtype=float), np.asarray(exponent, dtype=float))


_OPERATORS = {
    "__pow": _float_power,
    **{f"__{op.__name__}": _checked(f, op.__name__) for op, f in _BINARY.items()},
    **{f"__{op.__name__}": _checked(f, op.__name__) for op, f in _UNARY.items()},
}


@contextmanager
def _time_limit(seconds: float):
    """Raise ExpressionError when the block runs past ``seconds`` (main thread, POSIX only)."""
    usable = (hasattr(signal, "setitimer") and threading.current_thread()
              is threading.main_thread()
              and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN))
    if not usable:  # another thread, or someone else's alarm: never disturb it
        yield
        return

    def stop(signum, frame):
        raise ExpressionError(f"evaluating the answer took more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def evaluate(text: str, names: dict):
    """Value of ``text`` with ``np``, ``math`` and ``names`` in scope (no builtins)."""
    tree = parse(text)
    scope = {"np": np, "numpy": np, "math": math, "sqrt": math.sqrt, **names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in _OPERATORS and node.id not in scope:
            raise ExpressionError(f"{node.id!r} is not defined here (known: "
                                  f"{', '.join(sorted(scope))})")
    try:
        with np.errstate(all="ignore"), _time_limit(TIME_LIMIT):
            code = compile(ast.fix_missing_locations(tree), "<answer>", "eval")
            # numpy's methods may import lazily from the caller's builtins; names starting with
            # "_" are refused above, so an answer cannot reach __import__ itself
            value = eval(code, {"__builtins__": {"__import__": __import__}},  # noqa: S307
                         {**scope, **_OPERATORS})
    except ExpressionError:
        raise
    except Exception as error:
        raise ExpressionError(f"evaluating the answer failed: {type(error).__name__}: {error}"
                              ) from None
    try:
        return _numeric(value, "the answer")
    except ExpressionError:
        raise ExpressionError(f"the answer must be a number, got {type(value).__name__}"
                              ) from None
