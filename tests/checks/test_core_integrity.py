"""Instant feedback refuses to judge an altered kernel, and catches calls into the answer key."""

import types

import numpy as np
import pytest

import mhalib.reference as reference
from mhalib.checks import CheckFailed, check
from mhalib.checks.integrity import tampering


def stable_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def test_clean_kernel_has_no_tampering():
    assert tampering() == []


@pytest.mark.parametrize("target,name", [
    (np, "allclose"), (np, "isclose"), (np.testing, "assert_allclose"), (np, "array_equal"),
])
def test_replaced_numpy_comparison_is_refused(monkeypatch, target, name):
    monkeypatch.setattr(target, name, lambda *a, **k: True)
    with pytest.raises(CheckFailed, match="kernel was altered"):
        check("softmax", stable_softmax, quiet=True)


def test_replaced_torch_comparison_is_refused(monkeypatch):
    torch = pytest.importorskip("torch")
    tampering()  # takes the torch snapshot while torch is genuine
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    assert "torch.allclose was replaced" in tampering()


def test_patched_checker_is_refused(monkeypatch):
    from mhalib.checks import compare

    monkeypatch.setattr(compare.difference, "__code__", (lambda *a, **k: None).__code__)
    assert "the mhalib checker was modified" in tampering()


def test_answer_key_reached_through_wrapped_code_scores_zero():
    # a copy of the reference's code object still runs the answer key's code
    clone = types.FunctionType(reference.attention.__code__, reference.attention.__globals__)
    with pytest.raises(CheckFailed, match="mhalib's own answer"):
        check("attention", clone, quiet=True)


def test_calling_another_exercises_answer_is_allowed():
    # the contract forbids only the answer to the same exercise
    def attention(q, k, v):
        w = reference.softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
        return w @ v, w

    assert check("attention", attention, quiet=True).passed


def test_ipython_ast_transformer_is_refused():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import get_ipython

    if InteractiveShell.initialized() and type(InteractiveShell.instance()).__name__ != (
            "TerminalInteractiveShell"):
        InteractiveShell.clear_instance()  # another test's shell (the grader's) in this worker
    shell = get_ipython()
    import ast

    class StripAsserts(ast.NodeTransformer):
        def visit_Assert(self, node):
            return None

    shell.ast_transformers.append(StripAsserts())
    try:
        assert "an IPython AST transformer was installed" in tampering()
    finally:
        shell.ast_transformers.clear()


def test_a_failed_check_shows_one_line_in_ipython_not_a_traceback():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shown = []
    shell._showtraceback = lambda etype, evalue, stb: shown.append(stb)
    try:
        shell.run_cell("from mhalib.checks import CheckFailed\n"
                       "raise CheckFailed('forgot the scale')")
    finally:
        InteractiveShell.clear_instance()
    assert shown and len(shown[-1]) == 1, shown
    assert "CheckFailed" in shown[-1][0] and "forgot the scale" in shown[-1][0]
    assert "Traceback" not in shown[-1][0]
