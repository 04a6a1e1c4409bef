"""What the PyTorch checkers (lessons 06-08) share: cases that say which torch dtype to use,
tolerances by that dtype, and probes that measure the work a learner's function does.

Cases keep numpy arrays (float64) so the judge can rebuild them from the seed; the probe turns
them into tensors of the case's dtype (float32 unless the case says otherwise). The reference
is evaluated in float64 on the *same* values (rounded to the case's dtype first), so a correct
answer differs from it only by its own arithmetic error.

Work measurements (FLOPs, tensors allocated, a guard that keeps the work in torch) are in
:mod:`mhalib.checks.work`.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from mhalib.checks.compare import TOLERANCES, difference
from mhalib.checks.exercise import Case, Exercise

# (rtol, atol) by the torch dtype of a case's inputs; bfloat16 keeps 8 bits of mantissa
TORCH_TOLERANCES = {**TOLERANCES, "bfloat16": (8e-2, 8e-2)}


@dataclass
class TorchCase(Case):
    """A case whose float arrays become torch tensors of ``dtype`` when the probe calls
    (``degenerate`` as in :class:`~mhalib.checks.exercise.Case`)."""

    dtype: str = "float32"


@contextmanager
def one_thread():
    """Run torch on one CPU thread inside (restored after). The checkers' tensors are tiny, and
    on a busy machine extra threads only wait on each other: one thread is as fast when idle and
    many times faster under load, which keeps checks far from their time limits."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def to_tensor(value, dtype: str):
    """numpy float array -> tensor of ``dtype``; int/bool arrays keep their kind; rest as is."""
    import torch

    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            return torch.tensor(value, dtype=torch_dtype(dtype))
        return torch.from_numpy(value.copy())
    return value


def case_tensors(case: Case, dtype: str | None = None) -> tuple[tuple, dict]:
    """The case's arguments as the learner receives them (tensors of the case's dtype)."""
    dtype = dtype or getattr(case, "dtype", "float32")
    args = tuple(to_tensor(a, dtype) for a in case.args)
    kwargs = {k: to_tensor(v, dtype) for k, v in case.kwargs.items()}
    return args, kwargs


def exact_inputs(case: Case) -> tuple[tuple, dict]:
    """The learner's input values, rounded to the case's dtype, as float64 tensors."""
    import torch

    args, kwargs = case_tensors(case)
    widen = lambda v: v.to(torch.float64) if torch.is_tensor(v) and v.is_floating_point() else v  # noqa: E731
    return tuple(widen(a) for a in args), {k: widen(v) for k, v in kwargs.items()}


def torch_model(fn, **change):
    """A mistake model written in torch: ``fn`` on the case's float64 inputs, with keyword
    arguments ``change`` overriding the case's, returned as numpy (a ``WrongAnswer.compute``)."""
    def compute(case: Case):
        args, kwargs = exact_inputs(case)
        return as_numpy(fn(*args, **{**kwargs, **change}))
    return compute


def as_numpy(value):
    """Tensors (also inside tuples) -> float64 numpy arrays, for expected values."""
    import torch

    if isinstance(value, tuple):
        return tuple(as_numpy(v) for v in value)
    if torch.is_tensor(value):
        value = value.detach().cpu()
        return value.double().numpy() if value.is_floating_point() else value.numpy()
    return value


def output_kind(output) -> str:
    """'tensor' for a torch.Tensor, else the type name (recorded in meta)."""
    import torch

    return "tensor" if isinstance(output, torch.Tensor) else type(output).__name__


class TorchExercise(Exercise):
    """An exercise whose function takes and returns torch tensors (any float dtype)."""

    def tolerance(self, case: Case) -> tuple[float, float]:
        rtol, atol = TORCH_TOLERANCES[getattr(case, "dtype", "float64")]
        return (self.rtol if self.rtol is not None else rtol,
                self.atol if self.atol is not None else atol)

    def expected_once(self, case: Case):
        """``expected(case)``, computed once per case object (the judge asks many times)."""
        cache = self.__dict__.setdefault("_expected_cache", {})
        hit = cache.get(id(case))
        if hit is None or hit[0] is not case:
            if len(cache) > 64:
                cache.clear()
            with one_thread():
                hit = cache[id(case)] = (case, self.expected(case))
        return hit[1]

    def call(self, func, case: Case):
        args, kwargs = case_tensors(case)
        with one_thread():
            output = func(*args, **kwargs)
        return output, {"output_kind": output_kind(output)}

    def judge_case(self, case: Case, received, meta: dict) -> str | None:
        kind = meta.get("output_kind", "tensor")
        if kind != "tensor":
            return (f"output: returned a {kind}; lessons 06-08 take and return a "
                    "torch.Tensor (keep the computation in torch)")
        return difference(self.expected_once(case), received, *self.tolerance(case))

    def reproduces(self, case: Case, compute, received) -> bool:
        try:
            with one_thread():
                wrong = compute(case)
        except Exception:
            return False
        tolerance = self.tolerance(case)
        if difference(self.expected_once(case), wrong, *tolerance) is None:
            return False  # this mistake makes no difference on this case
        return difference(wrong, received, *tolerance) is None
