"""What the PyTorch checkers (lessons 06 on) share: cases that say which torch dtype to use,
tolerances by that dtype, the default reference (the answer key on the case's float64 inputs),
mistake models written in torch, and the base class of the measured exercises.

Cases keep numpy arrays (float64) so the judge can rebuild them from the seed; the probe turns
them into tensors of the case's dtype (float32 unless the case says otherwise). The reference
is evaluated in float64 on the *same* values (rounded to the case's dtype first), so a correct
answer differs from it only by its own arithmetic error.

A :class:`MeasuredExercise` is judged on its work as well as its output: its probe runs the
learner's function on one thread with the tensors kept in torch, under the watches its
``measure`` chooses (FLOPs, tensors allocated, fused attention calls: :mod:`mhalib.checks.work`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from mhalib.checks.answer_key import answer_key
from mhalib.checks.compare import TOLERANCES, difference, nan_where_empty
from mhalib.checks.exercise import Case, Exercise, Symptom

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
    arguments ``change`` overriding the case's, returned as numpy (a ``WrongAnswer.compute``).

    ``fn`` may be a dotted name (``"mhalib.reference.backward_variants.softmax_backward_variant"``):
    it is imported only when the model is computed, on the judge's side."""
    def compute(case: Case):
        args, kwargs = exact_inputs(case)
        return as_numpy(_resolve(fn)(*args, **{**kwargs, **change}))
    return compute


def _resolve(fn):
    if not isinstance(fn, str):
        return fn
    import importlib

    module, _, name = fn.rpartition(".")
    return getattr(importlib.import_module(module), name)


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


def output_dtypes(output) -> list[str] | None:
    """The dtype names of returned tensors (the record turns bfloat16 into float32)."""
    import torch

    items = output if isinstance(output, (tuple, list)) else (output,)
    if not all(isinstance(t, torch.Tensor) for t in items):
        return None
    return [str(t.dtype).removeprefix("torch.") for t in items]


class TorchExercise(Exercise):
    """An exercise whose function takes and returns torch tensors (any float dtype).

    ``keeps_dtype``: the lesson asks for the result in the inputs' dtype (the probe records the
    returned dtypes, and right values in another dtype fail with :meth:`dtype_problem`)."""

    keeps_dtype = False

    def with_dtypes(self, output, meta: dict) -> dict:
        """``meta`` with the returned tensors' dtypes, where the exercise keeps the dtype."""
        dtypes = output_dtypes(output) if self.keeps_dtype else None
        return meta if dtypes is None else {**meta, "output_dtypes": dtypes}

    def dtype_problem(self, case: Case, meta: dict) -> str | None:
        """Why right values still fail: returned in another dtype than the inputs' (None: they
        do not, or the exercise does not fix the dtype)."""
        dtypes = meta.get("output_dtypes")
        want = getattr(case, "dtype", "float32")
        if not self.keeps_dtype or not isinstance(dtypes, list) or all(d == want for d in
                                                                        dtypes):
            return None
        return (f"right values, but returned {'/'.join(map(str, dtypes))} for {want} inputs: "
                "return the result in the inputs' dtype (compute in float32 if you like, then "
                "cast back with .to(the input's dtype))")

    def tolerance(self, case: Case) -> tuple[float, float]:
        rtol, atol = TORCH_TOLERANCES[getattr(case, "dtype", "float64")]
        return (self.rtol if self.rtol is not None else rtol,
                self.atol if self.atol is not None else atol)

    def expected(self, case: Case):
        """The answer key of this exercise on the case's inputs (rounded to the case's dtype,
        computed in float64), as numpy."""
        args, kwargs = exact_inputs(case)
        return as_numpy(answer_key(self.name)(*args, **kwargs))

    def _expected_now(self, case: Case):
        with one_thread():
            return self.expected(case)

    def call(self, func, case: Case):
        args, kwargs = case_tensors(case)
        with one_thread():
            output = func(*args, **kwargs)
        return output, self.with_dtypes(output, {"output_kind": output_kind(output)})

    def judge_case(self, case: Case, received, meta: dict) -> str | None:
        kind = meta.get("output_kind", "tensor")
        if kind != "tensor":
            return (f"output: returned a {kind}; this exercise takes and returns a "
                    "torch.Tensor (keep the computation in torch)")
        return difference(self.expected_once(case), received, *self.tolerance(case)) or \
            self.dtype_problem(case, meta)

    def reproduces(self, case: Case, compute, received) -> bool:
        try:
            with one_thread():
                wrong = compute(case)
        except Exception:
            return False
        tolerance = self.tolerance(case)
        if difference(self.expected_once(case), wrong, *tolerance) is None:
            return False  # this mistake makes no difference on this case
        return difference(wrong, nan_where_empty(wrong, received), *tolerance) is None

    def stays_right(self, case: Case, compute) -> bool:
        try:
            with one_thread():
                output = compute(case)
        except Exception:
            return False
        return difference(self.expected_once(case), output, *self.tolerance(case)) is None


class MeasuredExercise(TorchExercise):
    """A torch exercise judged on its work as well as its output.

    ``call`` runs the learner's function on one thread with the tensors kept in torch
    (:func:`mhalib.checks.work.torch_only`: work done in numpy or plain Python would escape the
    watches) through ``measure``, which runs it under the watches the exercise needs and
    returns ``(output, meta)``. A call that took a tensor out of torch is recorded as
    ``{"output_kind": "left_torch", "left_torch": why}``: it fails with ``left_torch_problem``
    and shows the :meth:`leaves_torch` symptom. ``judge_case`` checks the values, then
    ``work_problem`` (the work rule the exercise teaches) on a right output.
    """

    # the failing case's problem when the tensors left torch ({reason}: what the guard said)
    left_torch_problem = "left torch while it ran: {reason}"
    # meta entries that ``measure`` may leave as tensors: encoded for the record once the
    # guard is off (a tensor that is not a tensor is dropped)
    encoded_meta: tuple[str, ...] = ()

    def call(self, func, case: Case):
        from mhalib.checks.encoding import encode, to_plain
        from mhalib.checks.work import LeftTorch, torch_only

        args, kwargs = case_tensors(case)
        try:
            with one_thread(), torch_only(self.name):
                output, meta = self.measure(func, case, args, kwargs)
        except LeftTorch as error:
            return None, {"output_kind": "left_torch", "left_torch": str(error)}
        meta = self.with_dtypes(output, meta)
        for key in self.encoded_meta:
            if key in meta:
                value = meta.pop(key)
                if output_kind(value) == "tensor":
                    meta[key] = encode(to_plain(value))
        return output, meta

    def measure(self, func, case: Case, args: tuple, kwargs: dict) -> tuple[object, dict]:
        """Call ``func(*args, **kwargs)`` under the exercise's watches (probe side); returns
        ``(output, meta)``, meta with ``output_kind`` and what was measured."""
        raise NotImplementedError

    def judge_case(self, case: Case, received, meta: dict) -> str | None:
        if meta.get("left_torch"):
            return self.left_torch_problem.format(reason=meta["left_torch"])
        problem = super().judge_case(case, received, meta)
        if problem is not None:
            return problem
        return self.work_problem(case, received, meta)

    def work_problem(self, case: Case, received, meta: dict) -> str | None:
        """Why a right output still fails the exercise's work rule (None: it does not)."""
        return None

    def right(self, case: Case, received) -> bool:
        """The output's values are right (a work symptom names only work, never values)."""
        return difference(self.expected_once(case), received, *self.tolerance(case)) is None

    @staticmethod
    def leaves_torch(message: str) -> Symptom:
        """The symptom of a call that took tensors out of torch, with the exercise's message."""
        return Symptom("leaves_torch", message,
                       lambda case, received, meta: bool(meta.get("left_torch")))
