"""Tamper detection inside the learner's kernel (instant feedback only).

Scores for credit are decided in a clean process (see :mod:`mhalib.checks.judge`), where nothing
done in the kernel counts. For instant feedback we still refuse to judge when the kernel has been
altered: comparison functions replaced, IPython transformers added, or the answer key called.
"""

from __future__ import annotations

import builtins
import os
import sys
from contextlib import contextmanager

import numpy as np

from mhalib import course

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# functions whose code is the answer key: defined in these sub-packages of mhalib
_ANSWER_KEY_DIRS = tuple(os.path.join(_PACKAGE_DIR, sub) + os.sep
                         for sub in course.ANSWER_KEY_PACKAGES)

_NUMPY_NAMES = ("allclose", "isclose", "array_equal", "asarray", "array", "abs", "max", "all",
                "any", "isnan", "isfinite", "sqrt", "exp", "einsum", "matmul", "sum")
_NUMPY_TESTING_NAMES = ("assert_allclose", "assert_array_equal", "assert_array_almost_equal")
_TORCH_NAMES = ("allclose", "isclose", "equal", "testing")


_BUILTIN_NAMES = ("abs", "isinstance", "len", "max", "min", "float", "int", "sum", "all", "any",
                  "getattr", "type", "tuple", "str", "repr", "sorted", "zip", "range")


def _snapshot() -> dict:
    snap = {("numpy", n): getattr(np, n) for n in _NUMPY_NAMES}
    snap.update({("builtins", n): getattr(builtins, n) for n in _BUILTIN_NAMES})
    snap.update({("numpy.testing", n): getattr(np.testing, n) for n in _NUMPY_TESTING_NAMES})
    snap[("numpy", "ndarray.__eq__")] = np.ndarray.__eq__
    return snap


_GENUINE = _snapshot()
_GENUINE_TORCH: dict = {}


def _torch_snapshot() -> dict:
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    if not _GENUINE_TORCH:
        _GENUINE_TORCH.update({n: getattr(torch, n, None) for n in _TORCH_NAMES})
        _GENUINE_TORCH["Tensor.__eq__"] = torch.Tensor.__eq__
    return _GENUINE_TORCH


def tampering() -> list[str]:
    """What in this kernel differs from a clean one (empty list: nothing noticed)."""
    problems = []
    current = _snapshot()
    for key, genuine in _GENUINE.items():
        if current[key] is not genuine:
            problems.append(f"{key[0]}.{key[1]} was replaced")
    torch = sys.modules.get("torch")
    for name, genuine in _torch_snapshot().items():
        now = torch.Tensor.__eq__ if name == "Tensor.__eq__" else getattr(torch, name, None)
        if now is not genuine:
            problems.append(f"torch.{name} was replaced")
    from mhalib.checks import compare, judge

    if compare.difference.__code__ is not _CODE["difference"] or (
        judge.judge_outputs.__code__ is not _CODE["judge_outputs"]
    ):
        problems.append("the mhalib checker was modified")
    problems += _ipython_transformers()
    return problems


def _ipython_transformers() -> list[str]:
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    if shell is None:
        return []
    problems = []
    if getattr(shell, "ast_transformers", None):
        problems.append("an IPython AST transformer was installed")
    manager = getattr(shell, "input_transformer_manager", None)
    for attr in ("cleanup_transforms", "line_transforms"):
        extra = [t for t in getattr(manager, attr, []) if t not in _IPYTHON_DEFAULTS.get(attr, ())]
        if extra:
            problems.append(f"an IPython input transformer ({attr}) was installed")
    if getattr(shell, "input_transformers_post", None):
        problems.append("an IPython input transformer was installed")
    return problems


def _ipython_defaults() -> dict:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return {}
    manager = TransformerManager()
    return {"cleanup_transforms": tuple(manager.cleanup_transforms),
            "line_transforms": tuple(manager.line_transforms)}


_IPYTHON_DEFAULTS = _ipython_defaults()


def _codes() -> dict:
    from mhalib.checks import compare, judge

    return {"difference": compare.difference.__code__,
            "judge_outputs": judge.judge_outputs.__code__}


_CODE = _codes()


class AnswerKeyWatch:
    """Notices when the learner's function reaches mhalib's own answer for the same exercise."""

    def __init__(self, names):
        self.names = frozenset(names)  # function names that are this exercise's answer
        self.reached: str | None = None

    def _profile(self, frame, event, arg):
        if event != "call" or self.reached:
            return
        code = frame.f_code
        if code.co_name in self.names and code.co_filename.startswith(_ANSWER_KEY_DIRS):
            module = frame.f_globals.get("__name__", "mhalib")
            self.reached = f"{module}.{code.co_name}"

    @contextmanager
    def watching(self):
        previous = sys.getprofile()
        sys.setprofile(self._profile)
        try:
            yield self
        finally:
            sys.setprofile(previous)
