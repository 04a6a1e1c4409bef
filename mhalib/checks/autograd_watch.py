"""Refusing torch.autograd in a measured call (lesson 12: gradients written out by hand).

Grad mode is not the guard: ``torch.enable_grad()`` turns it back on, so a call run under
``torch.no_grad()`` could still build a graph. :func:`watch_autograd` instead *records* the use
of autograd, from two layers that watch different things:

1. **Dispatch** (:class:`AutogradWatch`, a ``TorchDispatchMode``): every aten op the call runs,
   including those the autograd engine runs for a backward pass. It notes an op that receives
   a tensor that requires grad (a graph is being recorded) and any op the autograd engine runs
   inside a backward pass (``torch._C._current_graph_task_id()`` is set then: ``.backward()``,
   ``autograd.grad``, ``torch.func.vjp``). Backward formulas called directly, such as the
   built-in ``torch._softmax_backward_data``, are not autograd and pass.
2. **Python calls** (a ``sys.setprofile`` hook, chained to the one already installed, so the
   answer-key watch keeps working): calls into autograd's entry points (``Tensor.backward``,
   ``torch.autograd.grad``/``backward``, the engine's ``run_backward``, ``torch.func``'s
   transforms, ``torch.autograd.functional``, forward-mode dual tensors), and the calls that
   would switch the watches off: popping or disabling the dispatch modes, ``sys.setprofile``,
   starting a thread or a process (the modes and the hook hold for this thread only), and, with
   ``exits=True``, the C methods behind ``.numpy()``/``.tolist()``/``.item()`` that
   :func:`mhalib.checks.work.torch_only` guards.

A torch API that hides work from layer 1 (``torch.utils._python_dispatch._disable_current_modes``
and the like) is itself a call that layer 2 sees; removing layer 2 takes ``sys.setprofile``,
which layer 2 sees before it takes effect. The report says what was seen; the checker turns it
into a failed case. What still escapes (code outside Python: a C extension, ctypes; work handed
to a thread started before the call; a recorded report forged in a hostile grading kernel) is
listed in docs/benchmarks.md's section on lesson 12; the grader's operating-system limits are
the layer below these.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass

from mhalib.checks.work import _watch_class

# Python functions that run or set up autograd: (file suffix, names or None for any, the
# public name to report)
_AUTOGRAD_CALLS = (
    ("torch/_tensor.py", {"backward"}, "Tensor"),
    ("torch/autograd/__init__.py", {"backward", "grad"}, "torch.autograd"),
    ("torch/autograd/graph.py", {"_engine_run_backward"}, "torch.autograd.graph"),
    ("torch/autograd/functional.py", None, "torch.autograd.functional"),
    ("torch/autograd/forward_ad.py", {"make_dual", "__enter__"}, "torch.autograd.forward_ad"),
    ("torch/_functorch/eager_transforms.py", {"vjp", "grad", "grad_and_value", "jacrev",
                                              "jacfwd", "jvp", "hessian", "linearize"},
     "torch.func"),
)
# C functions that run autograd (by __name__)
_AUTOGRAD_C_CALLS = frozenset({"run_backward", "_make_dual"})
# functions that take the dispatch modes off the stack (python_dispatch.py, or the C calls)
_MODE_CALLS = frozenset({"_pop_mode", "_disable_current_modes", "_pop_mode_temporarily"})
_MODE_C_CALLS = frozenset({"_pop_torch_dispatch_stack", "_set_dispatch_mode",
                           "_unset_dispatch_mode"})
# C functions that remove the profile hook or run code where neither watch reaches
_ESCAPE_C_CALLS = frozenset({"setprofile", "start_new_thread", "fork", "fork_exec",
                             "posix_spawn", "posix_spawnp", "system", "execv", "execve"})
# the C methods behind the exits torch_only guards
_EXIT_C_CALLS = frozenset({"Tensor.numpy", "Tensor.tolist", "Tensor.item",
                           "Tensor.__dlpack__", "Tensor.__array__"})
_TRUSTED = ("/torch/", "/mhalib/checks/")
# operator namespaces of torch itself (anything else was registered by someone's code)
_TORCH_NAMESPACES = frozenset({"aten", "prims", "prim", "quantized", "_c10d_functional"})


@dataclass
class AutogradReport:
    """What the watches saw: ``autograd`` (how autograd was used) and ``evaded`` (how the
    measurement was switched off), each a short sentence or None."""

    exercise: str
    autograd: str | None = None
    evaded: str | None = None
    # elements of the largest storage any op wrote into (in place and ``out=`` included)
    largest_storage: int = 0

    def saw_autograd(self, what: str) -> None:
        if self.autograd is None:
            self.autograd = what

    def saw_evasion(self, what: str) -> None:
        if self.evaded is None:
            self.evaded = what

    def run(self, func, *args, **kwargs):
        """``func(*args, **kwargs)`` under a fresh :class:`AutogradWatch` reporting here."""
        with _watch_class("autograd", _autograd_watch_class)(self):
            return func(*args, **kwargs)

    def meta(self) -> dict:
        """The entries a probe records (empty when nothing was seen)."""
        found = {}
        if self.autograd:
            found["autograd"] = self.autograd
        if self.evaded:
            found["evaded"] = self.evaded
        return found


def _autograd_watch_class():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def _elements(tensor) -> int:
        """Elements of the storage behind ``tensor`` (not of the view: an expanded view of a
        small tensor holds little, a slice of a big buffer holds the whole buffer)."""
        try:
            return tensor.untyped_storage().nbytes() // max(1, tensor.element_size())
        except (RuntimeError, NotImplementedError):
            return tensor.numel()

    def _tensors(args, kwargs):
        """The tensors among an op's arguments (and one level into lists, as cat's)."""
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor):
                yield value
            elif isinstance(value, (list, tuple)):
                yield from (v for v in value if isinstance(v, torch.Tensor))

    class AutogradWatch(TorchDispatchMode):
        """Notes the first op that records a graph (a tensor input that requires grad), the
        first op the engine runs in a backward pass, and any operator outside torch's own
        namespaces (a custom operator defined in Python could run code the watches do not
        see); and the largest storage any op wrote into, which a memory watch that counts new
        tensors only would miss when the work goes into a buffer grown in place (``resize_``)
        or allocated before the call (``out=``, ``copy_`` into a slice). Entered last, it is
        the first mode every op meets; the ops it passes on run with the profile hook paused,
        so the Python code of the other watches below it (tens of thousands of calls) does not
        go through the hook. Light: no torch._dynamo import."""

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __init__(self, report: AutogradReport):
            super().__init__()
            self.report = report

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            report = self.report
            if report.autograd is None:
                name = func.__name__
                if torch._C._current_graph_task_id() >= 0:
                    # the autograd engine is running a backward pass (Tensor.backward,
                    # autograd.grad, torch.func.vjp); a learner calling a backward formula such
                    # as torch._softmax_backward_data directly runs outside any graph task
                    report.saw_autograd(f"the autograd engine ran aten.{name} in a backward "
                                        "pass")
                elif any(t.requires_grad for t in _tensors(args, kwargs)):
                    report.saw_autograd(f"aten.{name} received a tensor with "
                                        "requires_grad=True, so autograd was recording a graph")
            if func.namespace not in _TORCH_NAMESPACES:
                report.saw_evasion(f"it ran the custom operator {func.namespace}::"
                                   f"{func.__name__}, whose code the measurement cannot follow")
            hook = sys.getprofile()
            sys.setprofile(None)
            try:
                out = func(*args, **kwargs)
            finally:
                sys.setprofile(hook)
            for tensor in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(tensor, torch.Tensor):
                    report.largest_storage = max(report.largest_storage, _elements(tensor))
            return out

    return AutogradWatch


def _trusted(frame) -> bool:
    filename = frame.f_code.co_filename.replace("\\", "/") if frame is not None else ""
    return any(part in filename for part in _TRUSTED)


def _classify(code) -> tuple[str, str] | None:
    """What a call into ``code`` means: ("autograd", public name), ("mode", name) or None."""
    filename = code.co_filename.replace("\\", "/")
    for suffix, names, public in _AUTOGRAD_CALLS:
        if filename.endswith(suffix) and (names is None or code.co_name in names):
            return "autograd", f"{public}.{code.co_name}"
    if code.co_name in _MODE_CALLS and filename.endswith("_python_dispatch.py"):
        return "mode", code.co_name
    return None


_WATCHED_C_CALLS = _AUTOGRAD_C_CALLS | _MODE_C_CALLS | _ESCAPE_C_CALLS | frozenset(
    name.split(".")[-1] for name in _EXIT_C_CALLS)


def _profile_hook(report: AutogradReport, previous, exits: bool):
    """A ``sys.setprofile`` function: ours, with ``previous`` given the Python "call" and
    "return" events (the probe's answer-key watch reads the calls; the repair search's look at
    the learner's local variables, :func:`mhalib.checks.mutants._locals_seen`, the returns).

    It runs on every call the measured function makes, and on the calls inside the other
    watches (tens of thousands for one flash backward), so the common case is a comparison or
    two and a dictionary lookup: what a code object means is worked out once (``_classify``),
    and C functions are matched by name in a set."""
    meaning: dict = {}

    def hook(frame, event, arg):
        if event == "c_call":
            name = getattr(arg, "__name__", "")
            if name in _WATCHED_C_CALLS:
                _c_call(report, frame, arg, name, exits)
        elif event == "call":
            if previous is not None:
                previous(frame, event, arg)
            code = frame.f_code
            found = meaning.get(code, False)
            if found is False:
                found = meaning[code] = _classify(code)
            if found is None:
                return
            kind, name = found
            if kind == "autograd":
                report.saw_autograd(f"it called {name}")
            elif not _trusted(frame.f_back):
                report.saw_evasion(f"it called torch.utils._python_dispatch.{name}, which "
                                   "takes the measuring dispatch modes off")
        elif event == "return" and previous is not None:
            previous(frame, event, arg)
    return hook


def _c_call(report: AutogradReport, frame, arg, name: str, exits: bool) -> None:
    """A call of one of the watched C functions: note what it means, unless torch itself or
    the checker made it."""
    if name in _AUTOGRAD_C_CALLS:
        report.saw_autograd(f"it ran autograd's {name}")
    elif _trusted(frame):
        return
    elif name in _MODE_C_CALLS:
        report.saw_evasion(f"it called torch._C.{name}, which changes the dispatch modes "
                           "that measure it")
    elif name in _ESCAPE_C_CALLS:
        module = getattr(arg, "__module__", None)
        report.saw_evasion(f"it called {module + '.' if module else ''}{name}, out of the "
                           "measurement's reach")
    elif exits and getattr(arg, "__qualname__", "") in _EXIT_C_CALLS:
        report.saw_evasion(f"it called torch._C.TensorBase.{name} directly, around the guard "
                           "that keeps the work in torch")


@contextmanager
def watch_autograd(exercise: str, exits: bool = False):
    """While the block runs, record any use of torch.autograd (and any attempt to switch the
    watch off) in the yielded :class:`AutogradReport`; the measured function is called
    through ``report.run(func, *args, **kwargs)``, which enters the dispatch mode (pass
    ``report.run`` to the other watches so that this mode is the innermost). Nothing is
    refused on the spot: the call runs to its end and the checker judges the report with
    the output."""
    report = AutogradReport(exercise)
    previous = sys.getprofile()
    hook = _profile_hook(report, previous, exits)
    sys.setprofile(hook)
    try:
        yield report
    finally:
        replaced = sys.getprofile() is not hook
        sys.setprofile(previous)
        if replaced:
            report.saw_evasion("the profile hook that watches it was replaced")


def carries_graph(output) -> bool:
    """True when a returned tensor (or one inside a tuple or list) requires grad or has a
    grad_fn: it was computed with autograd recording."""
    import torch

    items = output if isinstance(output, (tuple, list)) else (output,)
    return any(isinstance(t, torch.Tensor) and (t.requires_grad or t.grad_fn is not None)
               for t in items)
