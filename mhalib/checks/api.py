"""``check``: what a notebook's test cell calls for instant feedback; ``needs``: what a demo
cell that runs an exercise wraps its code in. Under a failed check's verdict a button offers
the exercise's hints (:mod:`mhalib.hints`).

How a failed check is reported, so that Run All in JupyterLab reaches the last cell while
nbgrader still sees the failure: inside a Jupyter kernel a failed check publishes its report as
the cell's one *error output* (IPython's ``showtraceback``) and returns, so the kernel's reply is
"ok" and the queued cells of a Run All keep running. Every nbclient-based grader (``nbgrader
validate``, ``nbgrader autograde``) records that error output, and nbgrader gives a test cell
with an error output no points. Outside a kernel (plain Python, the test suite) it raises
:class:`CheckFailed`.
"""

from __future__ import annotations

import contextlib
import os
import random

from mhalib.checks.integrity import tampering
from mhalib.checks.judge import judge_record
from mhalib.checks.mutant_schema import foreground
from mhalib.checks.probe import probe
from mhalib.checks.record import grading_mode
from mhalib.checks.registry import get_exercise
from mhalib.checks.report import as_text, show
from mhalib.checks.verdict import Verdict


class CheckFailed(AssertionError):
    """A test cell's check did not pass; the message is the diagnosis.

    ``report`` (optional) is the whole verdict as text; IPython then shows it instead of a
    traceback, its first line in red.
    """

    def __init__(self, message: str, report: str | None = None) -> None:
        super().__init__(message)
        self.report = report

    def _render_traceback_(self) -> list[str]:
        """IPython shows this instead of a traceback into mhalib."""
        if self.report:
            head, *rest = self.report.splitlines()
            return [f"\x1b[0;31m{head}\x1b[0m", *rest]
        return [f"\x1b[0;31mCheckFailed\x1b[0m: {self}"]


def _kernel_shell():
    """The IPython shell of a Jupyter kernel this code runs in, or None (plain Python, a
    terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or "IPKernelApp" not in shell.config or not hasattr(shell, "kernel"):
        return None
    return shell


@contextlib.contextmanager
def _collector_paused():
    """Python's cycle collector off while a check runs, back as it was after: a full
    collection of a kernel that holds torch and the checkers takes about 0.08 s, and landing
    inside the visible check made one answer in ten take 0.26-0.33 s where the rest take under
    0.2 (round V). The garbage is collected after the check instead."""
    import gc

    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def fail(error: CheckFailed) -> None:
    """Report a failed check: in a Jupyter kernel as the cell's error output without stopping
    the cells queued after it (see the module docstring); anywhere else, raise ``error``."""
    shell = _kernel_shell()
    if shell is None:
        raise error
    shell.showtraceback((type(error), error, None))


@contextlib.contextmanager
def needs(*exercises):
    """``with needs(f, g):`` around a demo that runs exercise functions ``f``, ``g``.

    While one of them (or an exercise it calls) is still the release's stub, the block stops
    there and the cell says so in one line instead of failing; any other error shows as usual.
    """
    names = {getattr(f, "__name__", str(f)) for f in exercises}
    try:
        yield
    except NotImplementedError as error:
        frames = []
        tb = error.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        if not names.intersection(frames):
            raise
        unfinished = frames[-1] if frames[-1] not in ("<module>", "needs") else sorted(names)[0]
        print(f"This cell runs your `{unfinished}`, which is not written yet: finish it, run "
              "its cell, then run this cell again.")


def check(exercise: str, func, suite: str = "visible", seed: int | None = None,
          quiet: bool = False) -> Verdict | None:
    """Probe ``func`` as exercise ``exercise`` on fresh inputs, judge it, show the verdict.

    When it does not pass: in a Jupyter kernel, the report is the cell's error output (so
    nbgrader gives the test cell no points) and the call returns the verdict without raising
    (so Run All goes on); elsewhere, or with ``quiet=True``, it raises :class:`CheckFailed` (an
    AssertionError). In the grader's sandbox it only says that grading happens elsewhere.
    """
    checker = get_exercise(exercise)
    if grading_mode():
        print(f"{exercise}: recorded for grading (scores are decided outside this notebook).")
        return None
    if not callable(func):
        message = (f"{exercise}: expected a function, got {type(func).__name__}; "
                   f"run the cell that defines {exercise} first.")
        fail(CheckFailed(message, report=f"NOT YET -- {message}"))
        offer_hints(exercise, passed=False)
        return None
    problems = tampering()
    if problems:
        verdict = Verdict.failure(
            exercise,
            f"{exercise}: this kernel was altered ({'; '.join(problems)}), so it cannot be "
            "checked here. Restart the kernel and run the notebook from the top.",
            "integrity",
        )
    else:
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        with _collector_paused(), foreground():  # (a background build waits meanwhile)
            record = probe(checker, func, seed, suite)
            # the learner's function may have altered the kernel while it ran: look again
            problems = tampering()
            verdict = (judge_record(exercise, record, seed, suite) if not problems else
                       Verdict.failure(exercise, f"{exercise}: your function altered this "
                                       f"kernel while it ran ({'; '.join(problems)}), so it "
                                       "scores 0 here. Restart the kernel and remove that code.",
                                       "integrity"))
    if verdict.passed:
        if not quiet:
            show(verdict)
            offer_hints(exercise, passed=True)
        return verdict
    if quiet:
        raise CheckFailed(verdict.diagnosis)
    # one verdict: the report is the error output itself (no HTML report above it)
    fail(CheckFailed(verdict.diagnosis, report=as_text(verdict)))
    offer_hints(exercise, passed=False)
    return verdict


def offer_hints(exercise: str, passed: bool) -> None:
    """Under the verdict, in a learner's Jupyter kernel: the hint button when the check failed,
    and in an assessed release the record of hint use (:func:`mhalib.hints.show.after_check`).
    Not under nbgrader (validate, autograde), nor outside a kernel."""
    if _kernel_shell() is None or os.environ.get("NBGRADER_EXECUTION"):
        return
    from mhalib.hints.show import after_check

    after_check(exercise, passed)
