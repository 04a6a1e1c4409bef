"""One call of the learner's function, as the probe (and the repair search) makes it: a time
limit, the output encoded for the record, and the learner's exception as the case's result."""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from contextlib import contextmanager, nullcontext

from mhalib.checks.encoding import EncodingError, encode, to_plain


class CallTimeout(Exception):
    """One call of the learner's function ran out of time."""


class MetaOutput(Exception):
    """The learner's function returned a tensor on torch's 'meta' device (no values)."""


META_OUTPUT = ("returned a tensor on device 'meta': it has a shape but no values (made with "
               "device='meta' or moved there); compute the output from the inputs' values, on "
               "the inputs' device (device=x.device)")


def _on_meta_device(output) -> bool:
    """True when ``output`` (or a tensor inside a tuple, list or dict) is on device 'meta'."""
    if isinstance(output, (tuple, list)):
        return any(_on_meta_device(item) for item in output)
    if isinstance(output, dict):
        return any(_on_meta_device(item) for item in output.values())
    device = getattr(output, "device", None)
    return getattr(device, "type", None) == "meta"


@contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`CallTimeout` after ``seconds`` (main thread only; elsewhere no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _alarm(signum, frame):
        raise CallTimeout(f"call took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(exercise, func, case, timeout: float | None, watching=nullcontext) -> dict:
    """Call ``func`` on one case: the record's entry (``status``, encoded ``output``,
    ``error``, ``meta``). The learner's exception is the result for the case."""
    profile, modes = sys.getprofile(), _dispatch_depth()
    try:
        return _run_case(exercise, func, case, timeout, watching)
    finally:
        _heal(profile, modes)


def _heal(profile, modes: int | None) -> None:
    """Undo what the time limit's alarm leaves behind when it interrupts a watch's cleanup:
    a profile hook still set, torch's exits still refused, a dispatch mode still pushed.
    Each later call of the process (a learner's kernel, a grader's worker) would run under
    them."""
    from mhalib.checks.work import heal_torch_exits

    if sys.getprofile() is not profile:
        sys.setprofile(profile)
    heal_torch_exits()
    depth = _dispatch_depth()
    if depth is not None and modes is not None and depth > modes:
        from torch.utils._python_dispatch import _pop_mode

        for _ in range(depth - modes):
            _pop_mode()


def _dispatch_depth() -> int | None:
    torch = sys.modules.get("torch")
    try:
        return torch._C._len_torch_dispatch_stack() if torch is not None else None
    except Exception:  # (an older torch without the call)
        return None


def _run_case(exercise, func, case, timeout: float | None, watching) -> dict:
    entry = {"status": "ok", "output": None, "error": None, "meta": {}}
    try:
        with watching(), time_limit(timeout):
            output, meta = exercise.call(func, case)
        if _on_meta_device(output):
            raise MetaOutput(META_OUTPUT)
        entry["output"] = _encoded(output)
        entry["meta"] = meta
    except CallTimeout:
        entry["status"] = "timeout"
    except MetaOutput as error:
        entry.update(status="error", error=str(error))
    except EncodingError as error:
        entry.update(status="error", error=f"an unusable return value ({error})")
    except Exception as error:  # the learner's exception is the result for this case
        if getattr(case, "must_raise", ""):  # refusing the arguments is the right answer
            entry["output"] = encode(f"raised {type(error).__name__}: {error}"[:300])
        else:
            entry.update(status="error", error=_short_error(error))
    return entry


def _encoded(output):
    """The output as the record carries it; an output whose values cannot be read (a tensor on
    the meta device has none) is an unusable return value, not an error the function raised
    (a NotImplementedError here is not the release's stub)."""
    try:
        return encode(to_plain(output))
    except EncodingError:
        raise
    except Exception as error:
        raise EncodingError(f"its values cannot be read: {_short_error(error)[:200]}") from None


def _short_error(error: BaseException) -> str:
    """The exception's last line, then the learner's line that raised it (``in your line
    `...```: the innermost frame outside numpy, torch, the standard library and mhalib)."""
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    line = _learner_line(error)
    if not line:
        return text[:300]
    return f"{text[:290 - min(len(line), 100)]} in your line `{line[:100]}`"


_LIBRARY_PARTS = ("site-packages", "dist-packages", "/lib/python", "/mhalib/", "<frozen")


def _learner_line(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        name = frame.filename.replace("\\", "/")
        if not any(part in name for part in _LIBRARY_PARTS) and frame.line:
            return frame.line.strip()
    return ""
