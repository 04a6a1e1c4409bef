"""One call of the learner's function (mhalib.checks.calls.run_case) leaves the process as it
found it, even when a time limit's alarm interrupted a watch's cleanup: torch's exits refused
by torch_only, a profile hook or a dispatch mode left behind would otherwise hang over every
later call of a learner's kernel or a grader's worker (seen once in a held-out measurement:
a right induction_score answer refused for .item(), after a decode_with_cache repair search
in the same process)."""

import sys

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mhalib.checks import get_exercise
from mhalib.checks.calls import run_case
from mhalib.checks.work import torch_only


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def a_case():
    checker = get_exercise("softmax")
    return checker, checker.cases(0, "visible")[0]


def test_exits_left_refused_by_an_interrupted_torch_only_are_put_back():
    original = torch.Tensor.item
    guard = torch_only("decode_with_cache")
    guard.__enter__()  # its cleanup never runs, as when the alarm fires inside it
    assert torch.Tensor.item is not original
    checker, case = a_case()
    assert run_case(checker, softmax, case, 5.0)["status"] == "ok"
    assert torch.Tensor.item is original
    assert torch.tensor(3.0).item() == 3.0


def test_a_profile_hook_left_behind_is_removed():
    def leaves_a_hook(x, axis=-1):
        sys.setprofile(lambda *args: None)
        return softmax(x, axis)

    before = sys.getprofile()
    checker, case = a_case()
    run_case(checker, leaves_a_hook, case, 5.0)
    assert sys.getprofile() is before


def test_a_dispatch_mode_left_pushed_is_popped():
    def leaves_a_mode(x, axis=-1):
        TorchDispatchMode().__enter__()
        return softmax(x, axis)

    depth = torch._C._len_torch_dispatch_stack()
    checker, case = a_case()
    run_case(checker, leaves_a_mode, case, 5.0)
    assert torch._C._len_torch_dispatch_stack() == depth
