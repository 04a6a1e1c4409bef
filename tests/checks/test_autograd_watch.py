"""The autograd watch of lesson 12's measured calls: every way into torch.autograd is seen, the
torch APIs that would hide work from it are seen too, and legitimate code is left alone."""

from __future__ import annotations

import math
import sys
import threading

import pytest
import torch

from mhalib.checks.autograd_watch import carries_graph, watch_autograd
from mhalib.checks.integrity import AnswerKeyWatch


def _attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v


def _inputs():
    return tuple(torch.randn(1, 2, 6, 4) for _ in range(4))


def run_watched(fn, exits=False):
    q, k, v, g = _inputs()
    with watch_autograd("attention_backward", exits=exits) as report:
        result = report.run(fn, q, k, v, g)
    return report, result


def by_backward(q, k, v, g):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    _attention(*leaves).backward(g)
    return tuple(t.grad for t in leaves)


def by_grad_under_enable_grad(q, k, v, g):
    with torch.no_grad(), torch.enable_grad():  # grad mode is no guard
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        return torch.autograd.grad(_attention(*leaves), leaves, g)


def by_func_vjp(q, k, v, g):
    _, pullback = torch.func.vjp(_attention, q, k, v)
    return pullback(g)


def by_engine_directly(q, k, v, g):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = _attention(*leaves)
    torch.autograd.Variable._execution_engine.run_backward(
        (out,), (g,), False, False, tuple(leaves), False, False)
    return tuple(t.grad for t in leaves)


def by_functional_jacobian(q, k, v, g):
    return torch.autograd.functional.vjp(_attention, (q, k, v), g)[1]


@pytest.mark.parametrize("fn", [by_backward, by_grad_under_enable_grad, by_func_vjp,
                                by_engine_directly, by_functional_jacobian])
def test_every_way_into_autograd_is_seen(fn):
    report, _ = run_watched(fn)
    assert report.autograd, fn.__name__
    assert report.meta()["autograd"] == report.autograd


def test_a_hand_written_backward_is_left_alone():
    def by_hand(q, k, v, g):
        with torch.no_grad():  # a learner may well write this
            p = torch.softmax(q @ k.transpose(-2, -1) / 2.0, -1)
            grad_p = g @ v.transpose(-2, -1)
            grad_s = torch._softmax_backward_data(grad_p, p, -1, p.dtype)  # a built-in
            return grad_s @ k / 2.0, grad_s.transpose(-2, -1) @ q / 2.0, p.transpose(-2, -1) @ g

    report, result = run_watched(by_hand)
    assert report.meta() == {} and not carries_graph(result)


def test_turning_the_dispatch_modes_off_is_seen():
    from torch.utils._python_dispatch import _disable_current_modes

    def hidden(q, k, v, g):
        with _disable_current_modes():
            return by_backward(q, k, v, g)

    report, _ = run_watched(hidden)
    assert "_disable_current_modes" in report.evaded


def test_removing_the_profile_hook_is_seen_and_repaired():
    def quiet(q, k, v, g):
        saved = sys.getprofile()
        sys.setprofile(None)
        try:
            return by_backward(q, k, v, g)
        finally:
            sys.setprofile(saved)

    outer = sys.getprofile()
    report, _ = run_watched(quiet)
    assert "setprofile" in report.evaded
    assert sys.getprofile() is outer


def test_work_in_another_thread_is_seen():
    def threaded(q, k, v, g):
        found = []
        worker = threading.Thread(target=lambda: found.append(by_backward(q, k, v, g)))
        worker.start()
        worker.join()
        return found[0]

    report, _ = run_watched(threaded)
    assert "start_new_thread" in report.evaded


def test_a_custom_operator_is_seen():
    library = torch.library.Library("mhalib_watch_test", "DEF")
    library.define("double(Tensor x) -> Tensor")
    library.impl("double", lambda x: x * 2, "CPU")

    report, _ = run_watched(lambda q, k, v, g: torch.ops.mhalib_watch_test.double(q))
    assert "custom operator mhalib_watch_test::double" in report.evaded


def test_the_c_method_behind_numpy_is_seen_when_exits_are_guarded():
    report, _ = run_watched(lambda q, k, v, g: torch._C.TensorBase.numpy(q), exits=True)
    assert "TensorBase.numpy" in report.evaded
    report, _ = run_watched(lambda q, k, v, g: torch._C.TensorBase.numpy(q))
    assert report.meta() == {}  # attention_backward may use numpy


def test_the_answer_key_watch_keeps_working_inside():
    """The probe's profile hook (the answer-key watch) still sees, through the autograd
    watch's hook chained on top of it, a call into the package's own tiled backward."""
    from mhalib.kernels.tiled_backward import tiled_attention_backward
    from mhalib.viz.lesson12 import attention_with_lse

    def through_the_kernel(q, k, v, g):
        out, lse = attention_with_lse(q, k, v)
        return tiled_attention_backward(q, k, v, out, lse, g)

    watch = AnswerKeyWatch({"tiled_attention_backward"})
    with watch.watching():
        report, _ = run_watched(through_the_kernel)
    assert watch.reached == "mhalib.kernels.tiled_backward.tiled_attention_backward"
    assert report.meta() == {}
    untouched = AnswerKeyWatch({"tiled_attention_backward"})
    with untouched.watching():
        run_watched(lambda q, k, v, g: (q, k, v))
    assert untouched.reached is None


def test_returned_graphs_are_noticed():
    x = torch.ones(2, requires_grad=True)
    assert carries_graph(x * 2) and carries_graph((torch.ones(1), x))
    assert not carries_graph((torch.ones(1), torch.zeros(2)))
