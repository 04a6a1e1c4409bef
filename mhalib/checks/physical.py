"""Physical checks: one large case per measured exercise, run where the kernel keeps the score.

A work check that lives in the learner's own Python (a dispatch mode, a profile hook) is a hint,
not a defence: the learner's code can switch it off. A :class:`PhysicalCheck` is the defence. The
grader runs it, after the notebook has finished, in a fresh process of its own (see
:mod:`mhalib.grading.sandbox.warden`) that holds nothing but the pre-imported libraries and the
learner's own definitions, with no thread, process, file or memory trick available (a seccomp
filter), and reads two numbers the kernel counts for that process: the peak of its resident
memory and its CPU time. The inputs are drawn only then, from a seed the learner's code never
sees earlier.

The sizes are chosen so that the forbidden method cannot pass: the case's ``N x N`` scores need
several times ``memory_mb`` (the most new memory the right method may use, with room), or the
forbidden method's work needs many times ``cpu_seconds``. The right method stays far inside both
on a slow laptop. The output is compared with the reference on randomly chosen rows only (the
learner cannot know which), so judging stays cheap.

Here: what a physical check is, the probe side (:func:`run_physical`, in the measured process) and
the judge side (:func:`judge_physical`, in the grader's clean process).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mhalib.checks.compare import difference
from mhalib.checks.encoding import EncodingError, decode, encode, to_plain

SEAL_FORMAT = "mhalib-seal/1"
# words of an exception that say an allocation failed (MemoryError, torch's allocator)
_OUT_OF_MEMORY = ("MemoryError", "can't allocate memory", "not enough memory",
                  "DefaultCPUAllocator", "Cannot allocate memory")


@dataclass(frozen=True)
class PhysicalCheck:
    """The measured case of an exercise and the limits that stand for its work rule.

    ``build(rng)`` returns the case (a ``TorchCase``); ``output_shape(case)`` the shape of the
    right output and ``expected_rows(case, rows)`` its values at the given rows (indices along
    ``row_axis``), cheap to compute: the judge never builds the whole reference;
    ``memory_mb``: peak resident memory the call may add (MiB); ``cpu_seconds``: CPU it may use;
    ``memory_mistake`` / ``cpu_mistake``: the mistake a call over the limit shows, with
    ``memory_message`` / ``cpu_message`` (``{used}`` and ``{limit}`` are filled in, in MiB or s).
    """

    label: str
    build: Callable[[np.random.Generator], object]
    output_shape: Callable[[object], tuple]
    expected_rows: Callable[[object, np.ndarray], np.ndarray]
    memory_mb: int
    cpu_seconds: float
    memory_mistake: str | None = None
    memory_message: str = ""
    cpu_mistake: str | None = None
    cpu_message: str = ""
    row_axis: int = -2
    rows_checked: int = 48

    def case(self, exercise_name: str, seed: int):
        """The case for ``seed`` (the same in the measured process and in the judge)."""
        return self.build(np.random.default_rng([int(seed), sum(map(ord, exercise_name)), 7]))


# -- probe side: runs in the measured process -------------------------------------------------

def run_physical(exercise, func, seed: int) -> dict:
    """Call ``func`` once on the physical case of ``exercise``; the record for the warden."""
    from mhalib.checks.torch_exercise import case_tensors

    if not callable(func):
        return {"status": "missing", "output": None, "error": None}
    case = exercise.physical.case(exercise.name, seed)
    args, kwargs = case_tensors(case)
    try:
        output = func(*args, **kwargs)
        parts = list(output) if isinstance(output, (tuple, list)) else [output]
        kinds = [_kind(part) for part in parts]
        if any(kind != "tensor" for kind in kinds):
            return {"status": "error", "output": None,
                    "error": f"returned {', '.join(kinds)}, not torch.Tensors"}
        return {"status": "ok", "output": encode_output(output), "error": None}
    except EncodingError as error:
        return {"status": "error", "output": None, "error": f"an unusable output ({error})"}
    except BaseException as error:  # noqa: BLE001 - the learner's error is the result
        text = f"{type(error).__name__}: {error}"[:300]
        status = "out_of_memory" if any(w in text for w in _OUT_OF_MEMORY) else "error"
        return {"status": status, "output": None, "error": text}


def encode_output(output):
    """A tensor (or a tuple of tensors) as the record carries it."""
    if isinstance(output, list):
        output = tuple(output)
    return encode(to_plain(output))


def _kind(output) -> str:
    import torch

    if isinstance(output, torch.Tensor):
        return "tensor" if output.device.type != "meta" else "a tensor on the meta device"
    return type(output).__name__


# -- judge side: the grader's own process ------------------------------------------------------

@dataclass(frozen=True)
class PhysicalVerdict:
    """What the physical case shows: ``problem`` (None: passed), the mistake it shows (if any),
    and flags for the instructor."""

    problem: str | None
    mistake: str | None = None
    flags: tuple[str, ...] = ()
    summary: str = ""  # what the kernel counted, for the instructor


# what an error says when the measured process's seccomp filter, not the learner's code, failed
_REFUSED_BY_THE_SANDBOX = ("Operation not permitted", "PermissionError", "ImportError",
                           "ModuleNotFoundError", "Bad system call")


def judge_physical(exercise, seal: dict | None) -> PhysicalVerdict:
    """Judge the warden's seal of the physical case (``None``: it never ran)."""
    check: PhysicalCheck = exercise.physical
    where = f"the large case ({check.label})"
    if not isinstance(seal, dict) or seal.get("format") != SEAL_FORMAT:
        return PhysicalVerdict(f"{where} was not run: the grader has no measured result for "
                               "it", None, ("no_physical_record",))
    facts = seal.get("facts") if isinstance(seal.get("facts"), dict) else {}
    if seal.get("session") != "physical" or seal.get("exercise") != exercise.name or facts.get(
            "planted"):
        why = str(facts.get("planted") or "another seal was in its place")[:200]
        return PhysicalVerdict(f"{where}: its sealed result is not the grader's own ({why})",
                               None, ("bad_record",))
    refused = facts.get("refused")
    if refused:
        return PhysicalVerdict(f"{where} could not be measured: {str(refused)[:300]}", None,
                               ("physical_refused",))
    memory = float(facts.get("peak_memory_mb") or 0.0)
    cpu = float(facts.get("cpu_seconds") or 0.0)
    cpu_limit = check.cpu_seconds
    summary = f"peak new memory {memory:,.0f} MiB, CPU {cpu:.2f} s"
    if facts.get("killed") == "cpu" or cpu > cpu_limit:
        return PhysicalVerdict(
            f"{where} needed more than {cpu_limit:.1f} s of CPU "
            f"({'stopped at the limit' if facts.get('killed') else f'{cpu:.1f} s'}), many times "
            "what the right method needs", check.cpu_mistake, (), summary)
    record = seal.get("record") if isinstance(seal.get("record"), dict) else {}
    status = record.get("status")
    if status == "out_of_memory":
        return PhysicalVerdict(
            f"{where} ran out of memory: it asked for more than the right method needs with "
            f"room to spare ({check.memory_mb} MiB at once)", check.memory_mistake, (), summary)
    if memory > check.memory_mb:
        return PhysicalVerdict(
            f"{where} used {memory:,.0f} MiB of new memory at once (the right method needs "
            f"less than {check.memory_mb} MiB)", check.memory_mistake, (), summary)
    if facts.get("killed"):
        return PhysicalVerdict(f"{where} did not finish: {str(facts['killed'])[:200]}", None,
                               ("physical_error",))
    if status == "missing":
        replay = facts.get("replay") if isinstance(facts.get("replay"), dict) else {}
        errors = [str(e)[:160] for e in (replay.get("errors") or [])][:3]
        return PhysicalVerdict(f"{where}: the function was not defined when the notebook's "
                               "definitions were run again in the measured process"
                               + (f" ({'; '.join(errors)})" if errors else ""), None,
                               ("physical_error",))
    if status != "ok":
        error = str(record.get("error") or "")
        if any(sign in error for sign in _REFUSED_BY_THE_SANDBOX):
            return PhysicalVerdict(
                f"{where} raised {error[:240]} (the measured process refuses to open files and "
                "to import modules not loaded before the call: an instructor should look)",
                None, ("physical_error",))
        return PhysicalVerdict(f"{where} raised {error[:300]}", None)
    try:
        output = decode(record.get("output"))
    except (EncodingError, ValueError, TypeError) as error:
        return PhysicalVerdict(f"{where}: an unreadable output ({error})", None, ("bad_record",))
    return PhysicalVerdict(_compare_rows(exercise, seal.get("seed"), output), summary=summary)


def _compare_rows(exercise, seed, output) -> str | None:
    """None when ``output`` (an array, or a tuple of arrays for an exercise that returns
    several) has the right shapes and is right on randomly chosen rows."""
    check: PhysicalCheck = exercise.physical
    case = check.case(exercise.name, int(seed))
    shapes = check.output_shape(case)
    several = bool(shapes) and isinstance(shapes[0], (tuple, list))
    parts = list(output) if several and isinstance(output, (tuple, list)) else [output]
    parts = [np.asarray(part) for part in parts]
    wanted = [tuple(s) for s in shapes] if several else [tuple(shapes)]
    got = [tuple(part.shape) for part in parts]
    if got != wanted:
        return (f"the large case's output has shape{'s' if several else ''} "
                f"{got if several else got[0]}, expected {wanted if several else wanted[0]}")
    count = wanted[0][check.row_axis]
    rows = np.sort(np.random.default_rng().choice(count, size=min(check.rows_checked, count),
                                                  replace=False))
    expected = check.expected_rows(case, rows)
    received = [np.take(part, rows, axis=check.row_axis) for part in parts]
    rtol, atol = exercise.tolerance(case) if hasattr(exercise, "tolerance") else (None, None)
    problem = difference(tuple(expected) if several else expected,
                         tuple(received) if several else received[0], rtol, atol)
    return None if problem is None else f"the large case ({check.label}): {problem}"


def seal_name(exercise: str, session: str) -> str:
    """File name of a seal in the sealed folder."""
    return f"{exercise}.{session}.json"


# -- reference rows, shared by the attention-shaped checks --------------------------------------

def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; rows that are all -inf give zeros."""
    top = np.max(scores, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    weights = np.exp(scores - top)
    total = weights.sum(axis=-1, keepdims=True)
    return weights / np.where(total == 0, 1.0, total)


def attention_rows(q_rows: np.ndarray, k: np.ndarray, v: np.ndarray, query_positions=None
                   ) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v for some query rows (..., R, d) against all keys (..., N, d);
    with ``query_positions`` (R,), key j is visible to a query at position p when j <= p."""
    scores = q_rows @ np.swapaxes(k, -1, -2) / np.sqrt(q_rows.shape[-1])  # (..., R, N)
    if query_positions is not None:
        keys = np.arange(k.shape[-2])
        scores = np.where(keys[None, :] <= np.asarray(query_positions)[:, None], scores, -np.inf)
    return softmax_rows(scores) @ v
