"""Measuring the work a learner's function does (probe side): FLOPs, tensors, and a guard that
keeps the computation where it is measured.

- :func:`count_flops` / :func:`watch_products`: matrix-product FLOPs with the formulas of
  ``torch.utils.flop_counter`` (the CPU flash-attention op behind SDPA counted densely, as
  :mod:`mhalib.accounting.flop_counter` does), and for each matrix product the shapes it
  multiplied (:class:`ProductWatch`), so a check can see how many tokens one projection took.
- :class:`TensorWatch`: one ``TorchDispatchMode`` that sees every tensor an op allocates and
  records both the largest single new tensor and the peak bytes of new tensors alive at once.
- :func:`torch_only`: while a measured call runs, tensors refuse to leave torch (``.numpy()``,
  ``np.asarray(t)``, ``.tolist()``, ``.item()``), so work done in numpy or plain Python cannot
  hide from the measurement: the call raises :class:`LeftTorch` with a message that says so
  (``__dlpack__`` too, so ``np.from_dlpack`` is no way out; torch's own printing still reads
  values, so ``print(t)`` while debugging keeps working).

The two watches are light: they opt out of the ``torch._dynamo`` wrapper that ``TorchDispatchMode``
puts around ``__torch_dispatch__`` by default (and ``FlopCounterMode`` keeps), whose first use
imports ``torch._dynamo``: about 1.5 s on a 2-core machine, paid by the first measured check
of a fresh kernel. Nothing here is compiled, so the wrapper has nothing to do.

All of them use torch only, never the answer key.
"""

from __future__ import annotations

import sys
import weakref
from contextlib import contextmanager


def count_flops(fn, *args, **kwargs) -> tuple[object, int]:
    """Run ``fn(*args, **kwargs)`` under a :class:`ProductWatch`; returns ``(result, total
    FLOPs)``, the same total as :func:`mhalib.accounting.flop_counter.count_flops`.

    Matrix products count 2 FLOPs per multiply-add; elementwise work counts 0.
    """
    result, watch = watch_products(fn, *args, **kwargs)
    return result, watch.flops


# matrix products whose operands are (..., m, k) @ (..., k, n): op name -> index of the first
# operand among the op's arguments (addmm and baddbmm take the bias first)
_PRODUCTS = {"mm": 0, "bmm": 0, "addmm": 1, "baddbmm": 1, "mv": 0, "dot": 0}


def _product_watch_class():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry, sdpa_flop_count, shape_wrapper

    # torch has no formula for two CPU attention ops; these are the ones
    # mhalib.accounting.flop_counter registers, written here because the grader's sandbox keeps
    # no function body of a computing package (mhalib.grading.stubbing): the checkers'
    # infrastructure must not call one
    def sdpa_cpu_flash(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
        return sdpa_flop_count(query_shape, key_shape, value_shape)

    def native_mha(query_shape, key_shape, value_shape, embed_dim, num_head, *args,
                   out_shape=None, **kwargs):
        batch, n_q, e = query_shape
        n_k = key_shape[1]
        return (2 * batch * n_q * e * e + 4 * batch * n_k * e * e + 4 * batch * n_q * n_k * e
                + 2 * batch * n_q * e * e)

    aten = torch.ops.aten
    formulas = {**flop_registry,
                aten._scaled_dot_product_flash_attention_for_cpu: shape_wrapper(sdpa_cpu_flash),
                aten._native_multi_head_attention: shape_wrapper(native_mha)}

    class ProductWatch(TorchDispatchMode):
        """Counts matrix-product FLOPs like ``FlopCounterMode`` and keeps the shapes of every
        matrix product: ``products`` is a list of ``(op name, batch, m, k, n)`` for
        ``(batch, m, k) @ (batch, k, n)`` (``batch`` 1 for mm; SDPA's fused attention
        records its two products, ``m`` queries against ``n`` keys)."""

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # see the module docstring: no torch._dynamo import on first use

        def __init__(self):
            super().__init__()
            self.flops = 0
            self.products: list[tuple[str, int, int, int, int]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            packet = func._overloadpacket
            if packet not in formulas:
                with self:  # a composite op: count the ops it decomposes into
                    decomposed = func.decompose(*args, **kwargs)
                if decomposed is not NotImplemented:
                    return decomposed
            out = func(*args, **kwargs)
            if packet in formulas:
                self.flops += int(formulas[packet](*args, **kwargs, out_val=out))
                self._record(packet.__name__, args, out)
            return out

        def _record(self, name, args, out=None):
            if name == "convolution" and len(args) >= 2 and isinstance(out, torch.Tensor):
                # a convolution is a matrix product per output position: (batch, positions,
                # in channels x kernel) @ (.., out channels); a width-1 conv1d over the tokens
                # is a projection of every token at once
                x, weight = args[0], args[1]
                if isinstance(x, torch.Tensor) and isinstance(weight, torch.Tensor) and (
                        x.dim() >= 3 and out.dim() >= 3):
                    positions = int(out[0, 0].numel())
                    self.products.append((name, int(x.shape[0]), positions,
                                          int(weight[0].numel()), int(weight.shape[0])))
                return
            if name in _PRODUCTS:
                a, b = args[_PRODUCTS[name]], args[_PRODUCTS[name] + 1]
                if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                    return
                batch = a.shape[0] if a.dim() == 3 else 1
                m = a.shape[-2] if a.dim() >= 2 else 1
                n = b.shape[-1] if b.dim() >= 2 else 1
                self.products.append((name, int(batch), int(m), int(a.shape[-1]), int(n)))
            elif "scaled_dot_product" in name and len(args) >= 3:
                q, k = args[0], args[1]
                if isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() >= 2:
                    batch = int(q.numel() // (q.shape[-2] * q.shape[-1]) or 1)
                    self.products.append((name, batch, int(q.shape[-2]), int(q.shape[-1]),
                                          int(k.shape[-2])))

    return ProductWatch


_CLASSES: dict = {}


def _watch_class(name: str, build):
    """Each dispatch-mode class is built once (building one is not free)."""
    if name not in _CLASSES:
        _CLASSES[name] = build()
    return _CLASSES[name]


def watch_products(fn, *args, **kwargs):
    """Run ``fn`` under a fresh :class:`ProductWatch`; returns ``(result, watch)`` with
    ``watch.flops`` and ``watch.products``."""
    watch = _watch_class("products", _product_watch_class)()
    with watch:
        result = fn(*args, **kwargs)
    return result, watch


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

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # see the module docstring: no torch._dynamo import on first use

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
    watch = _watch_class("tensors", _tensor_watch_class)()
    with watch:
        result = fn(*args, **kwargs)
    return result, watch


def largest_new_tensor(fn, *args, **kwargs):
    """Run ``fn`` and return ``(result, numel, shape)`` of the largest tensor an op allocated."""
    result, watch = watch_tensors(fn, *args, **kwargs)
    return result, watch.largest_numel, watch.largest_shape


class LeftTorch(RuntimeError):
    """A measured call took a tensor out of torch (numpy, a Python list or number)."""


_EXITS = ("numpy", "__array__", "__dlpack__", "tolist", "item")
# torch's own printing reads values through these exits: print(t) while debugging stays allowed
_PRINTING = ("torch._tensor_str",)


@contextmanager
def torch_only(exercise: str):
    """While the block runs, converting a tensor to numpy or Python values raises
    :class:`LeftTorch` naming ``exercise``: its check measures the work done in torch, and work
    done elsewhere would not be seen."""
    import torch

    saved = {name: getattr(torch.Tensor, name) for name in _EXITS}

    def refuse(name):
        original = saved[name]

        def exit_blocked(self, *args, **kwargs):
            caller = sys._getframe(1)
            if caller.f_globals.get("__name__") in _PRINTING or (
                    caller.f_code.co_name == "__format__"
                    and caller.f_globals.get("__name__") == "torch._tensor"):
                return original(self, *args, **kwargs)
            raise LeftTorch(
                f"{exercise} is checked by measuring the work it does in torch, so the tensors "
                f"may not leave torch while it runs (Tensor.{name} was called): keep the whole "
                "computation in torch (no .numpy(), np.asarray, .tolist() or .item()).")
        exit_blocked.mhalib_original = original  # (for heal_torch_exits)
        return exit_blocked

    for name in _EXITS:
        setattr(torch.Tensor, name, refuse(name))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)


def heal_torch_exits() -> None:
    """Put back torch.Tensor's exits where a :func:`torch_only` block left its guards on: a
    time limit's alarm that fires inside its cleanup stops the restoring loop half-way (seen
    once in a thousand searched repairs on a loaded machine), and every later ``.item()`` of
    the process would then be refused. Called where no such block can be open (after a
    call, outside its time limit)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    for name in _EXITS:
        method = getattr(torch.Tensor, name, None)
        original = method
        while hasattr(original, "mhalib_original"):
            original = original.mhalib_original
        if original is not method:
            setattr(torch.Tensor, name, original)


def _attention_call_watch_class():
    from torch.utils._python_dispatch import TorchDispatchMode

    class AttentionCallWatch(TorchDispatchMode):
        """Records, for each fused attention op (the backends behind
        ``F.scaled_dot_product_attention``), how many queries it took: ``queries`` is a list of
        ``q.shape[-2]``. Light: no flop formulas, no ``torch._dynamo`` import."""

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # as the other watches: no torch._dynamo import on first use

        def __init__(self):
            super().__init__()
            self.queries: list[int] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if "scaled_dot_product" in func.__name__ and args and hasattr(args[0], "shape"):
                if len(args[0].shape) >= 2:
                    self.queries.append(int(args[0].shape[-2]))
            return out

    return AttentionCallWatch


_ATTENTION_CALL_WATCH: list = []


def watch_attention_calls(fn, *args, **kwargs):
    """Run ``fn`` under a fresh ``AttentionCallWatch``; returns ``(result, watch)`` with
    ``watch.queries``: the query count of every fused SDPA call (a check can tell that a
    prompt was attended to in chunks, which a fused kernel's memory would not show)."""
    if not _ATTENTION_CALL_WATCH:
        _ATTENTION_CALL_WATCH.append(_attention_call_watch_class())
    watch = _ATTENTION_CALL_WATCH[0]()
    with watch:
        result = fn(*args, **kwargs)
    return result, watch
