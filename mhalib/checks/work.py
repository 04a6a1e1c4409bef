"""Measuring the work a learner's function does (probe side): FLOPs, tensors, and a guard that
keeps the computation where it is measured.

- :func:`count_flops`: matrix-product FLOPs under ``FlopCounterMode`` (the CPU flash-attention
  op behind SDPA counted densely; see :mod:`mhalib.accounting.flop_counter`).
- :class:`TensorWatch`: one ``TorchDispatchMode`` that sees every tensor an op allocates and
  records both the largest single new tensor and the peak bytes of new tensors alive at once.
- :func:`torch_only`: while a measured call runs, tensors refuse to leave torch (``.numpy()``,
  ``np.asarray(t)``, ``.tolist()``, ``.item()``), so work done in numpy or plain Python cannot
  hide from the measurement: the call raises :class:`LeftTorch` with a message that says so.

All of them use torch only, never the answer key.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager


def count_flops(fn, *args, **kwargs) -> tuple[object, int]:
    """Run ``fn(*args, **kwargs)`` under FlopCounterMode; returns ``(result, total FLOPs)``.

    Matrix products count 2 FLOPs per multiply-add; elementwise work counts 0.
    """
    from mhalib.accounting.flop_counter import count_flops as counted

    count = counted(fn, *args, **kwargs)
    return count.result, count.total


def _storage_of(tensor):
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def _tensor_watch_class():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class TensorWatch(TorchDispatchMode):
        """Records the tensors ops allocate: views, in-place results and the ops' inputs do not
        count, only outputs whose storage no input of that op shares (factories count).

        ``largest_numel`` / ``largest_shape``: the biggest single new tensor;
        ``peak_bytes``: the most bytes of new tensors alive at the same time.
        """

        def __init__(self):
            super().__init__()
            self.largest_numel = 0
            self.largest_shape: list[int] = []
            self.peak_bytes = 0
            self._live: dict[int, int] = {}
            self._live_bytes = 0

        def _free(self, pointer):
            self._live_bytes -= self._live.pop(pointer, 0)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            inputs = {_storage_of(t) for t in tree_leaves((args, kwargs))
                      if isinstance(t, torch.Tensor)}
            for t in tree_leaves(out):
                if not isinstance(t, torch.Tensor):
                    continue
                pointer = _storage_of(t)
                if pointer in inputs:
                    continue
                if t.numel() > self.largest_numel:
                    self.largest_numel, self.largest_shape = t.numel(), list(t.shape)
                if pointer and pointer not in self._live:
                    self._live[pointer] = t.untyped_storage().nbytes()
                    self._live_bytes += self._live[pointer]
                    self.peak_bytes = max(self.peak_bytes, self._live_bytes)
                    weakref.finalize(t, self._free, pointer)
            return out

    return TensorWatch


def watch_tensors(fn, *args, **kwargs):
    """Run ``fn`` under a fresh :class:`TensorWatch`; returns ``(result, watch)``."""
    watch = _tensor_watch_class()()
    with watch:
        result = fn(*args, **kwargs)
    return result, watch


def largest_new_tensor(fn, *args, **kwargs):
    """Run ``fn`` and return ``(result, numel, shape)`` of the largest tensor an op allocated."""
    result, watch = watch_tensors(fn, *args, **kwargs)
    return result, watch.largest_numel, watch.largest_shape


class LeftTorch(RuntimeError):
    """A measured call took a tensor out of torch (numpy, a Python list or number)."""


_EXITS = ("numpy", "__array__", "tolist", "item")


@contextmanager
def torch_only(exercise: str):
    """While the block runs, converting a tensor to numpy or Python values raises
    :class:`LeftTorch` naming ``exercise``: its check measures the work done in torch, and work
    done elsewhere would not be seen."""
    import torch

    saved = {name: getattr(torch.Tensor, name) for name in _EXITS}

    def refuse(name):
        def exit_blocked(self, *args, **kwargs):
            raise LeftTorch(
                f"{exercise} is checked by measuring the work it does in torch, so the tensors "
                f"may not leave torch while it runs (Tensor.{name} was called): keep the whole "
                "computation in torch (no .numpy(), np.asarray, .tolist() or .item()).")
        return exit_blocked

    for name in _EXITS:
        setattr(torch.Tensor, name, refuse(name))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)
