"""Reading what came back from the sandbox: cell outputs, how the run ended, what it missed.

The zygote's reply is treated as untrusted: step lines are parsed one by one, malformed ones are
ignored, and only known output shapes are kept. The run's ending (finished, timed out, kernel
died, memory, output flood) becomes named issues, and every exercise whose recording step never
ran gets the reason why.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field

from mhalib.grading.records import Issue
from mhalib.grading.sandbox.limits import Limits

_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


@dataclass
class Outcome:
    outputs: dict[int, list[dict]] = field(default_factory=dict)  # merged cell index -> outputs
    counts: dict[int, int] = field(default_factory=dict)  # merged cell index -> execution count
    issues: list[Issue] = field(default_factory=list)
    reached: set[str] = field(default_factory=set)  # items whose recording step finished
    record_errors: dict[str, str] = field(default_factory=dict)
    stop_reason: str | None = None  # why the notebook did not run to the end
    tampering: list[str] = field(default_factory=list)


def describe_exit(code: int) -> str:
    if code > 128:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        return f"the notebook's process was killed by {name}"
    return f"the notebook's process exited with status {code}"


def _clean_output(raw) -> dict | None:
    if not isinstance(raw, dict) or raw.get("output_type") not in _OUTPUT_TYPES:
        return None
    kind = raw["output_type"]
    if kind == "stream":
        if raw.get("name") not in ("stdout", "stderr") or not isinstance(raw.get("text"), str):
            return None
        return {"output_type": "stream", "name": raw["name"], "text": raw["text"]}
    if kind == "error":
        trace = raw.get("traceback") if isinstance(raw.get("traceback"), list) else []
        return {"output_type": "error", "ename": str(raw.get("ename", "Error"))[:200],
                "evalue": str(raw.get("evalue", ""))[:2000],
                "traceback": [str(line)[:4000] for line in trace[:60]]}
    data = raw.get("data")
    if not isinstance(data, dict):
        return None
    data = {str(k): v for k, v in data.items() if isinstance(v, str)}
    out = {"output_type": kind, "data": data, "metadata": {}}
    if kind == "execute_result":
        count = raw.get("execution_count")
        out["execution_count"] = count if isinstance(count, int) else None
    return out


def read_outcome(reply: dict, steps: list[dict], limits: Limits) -> Outcome:
    """Interpret the zygote's reply for a plan with ``steps``."""
    outcome = Outcome()
    done = False
    dropped = 0
    timed_out_cells = 0
    memory = False
    valid_steps = {i: step for i, step in enumerate(steps)}
    for line in str(reply.get("steps", "")).splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if entry.get("kind") == "done" and entry.get("step") == len(steps):
            done = True
            continue
        step = valid_steps.get(entry.get("step"))
        if step is None or entry.get("kind") != step["kind"]:
            continue
        if step["kind"] == "cell":
            outputs = [o for o in map(_clean_output, entry.get("outputs") or []) if o]
            outcome.outputs[step["index"]] = outputs
            count = entry.get("execution_count")
            outcome.counts[step["index"]] = count if isinstance(count, int) else None
            dropped += entry.get("dropped_bytes", 0) if isinstance(
                entry.get("dropped_bytes"), int) else 0
            timed_out_cells += entry.get("status") == "timeout"
            if entry.get("class_cache") == "refused":
                outcome.issues.append(Issue("class_cache_refused", "an instructor cell run once "
                                            "for the class ran as submitted instead: "
                                            + str(entry.get("reason", ""))[:300] + "."))
            memory |= any(o.get("ename") == "MemoryError" for o in outputs)
        else:
            status = str(entry.get("status", ""))
            altered = entry.get("tampering") if isinstance(entry.get("tampering"), list) else []
            for text in altered[:20]:
                if str(text)[:200] not in outcome.tampering:
                    outcome.tampering.append(str(text)[:200])
            for item in [*step.get("exercises", []), *step.get("questions", [])]:
                outcome.reached.add(item)
                if status != "ok":
                    outcome.record_errors[item] = status[:300]
    if outcome.tampering:
        outcome.issues.append(Issue("integrity", "the notebook altered its kernel ("
                                    + "; ".join(outcome.tampering[:6]) + "); scores were "
                                    "decided outside it, so this changed nothing."))
    if reply.get("steps_truncated"):
        dropped += 1
    if dropped:
        outcome.issues.append(Issue("output_truncated", f"the notebook printed more than the "
                                    f"{int(limits.output_bytes):,} bytes of output kept; "
                                    f"{dropped:,} bytes were dropped."))
    if timed_out_cells:
        outcome.issues.append(Issue("cell_timeout", f"{timed_out_cells} cell(s) ran longer than "
                                    f"{limits.cell_seconds:g} s and were stopped."))
    if memory:
        outcome.issues.append(Issue("memory", f"the notebook tried to use more than "
                                    f"{int(limits.memory_mb)} MB of memory (MemoryError)."))
    _ending(reply, done, limits, outcome)
    return outcome


def _ending(reply: dict, done: bool, limits: Limits, outcome: Outcome) -> None:
    code = reply.get("exit_code")
    if reply.get("error"):
        outcome.stop_reason = "the grader's sandbox failed"
        outcome.issues.append(Issue("sandbox_error", f"the grader's sandbox failed: "
                                    f"{str(reply['error'])[:300]}"))
    elif reply.get("setup_failed"):
        outcome.stop_reason = "the grader's sandbox failed to start the notebook"
        detail = f" ({str(reply['setup_error'])[:300]})" if reply.get("setup_error") else ""
        outcome.issues.append(Issue("sandbox_error", outcome.stop_reason + detail + "."))
    elif reply.get("timed_out"):
        outcome.stop_reason = (f"the notebook ran out of its {limits.notebook_seconds:g} s "
                               "time budget before this point")
        outcome.issues.append(Issue("timeout", f"the notebook did not finish within "
                                    f"{limits.notebook_seconds:g} s and was stopped."))
    elif isinstance(code, int) and code != 0:
        outcome.stop_reason = describe_exit(code) + " before this point"
        if code == 128 + signal.SIGKILL:  # (a timed-out run was handled above)
            outcome.stop_reason += " (killed: possibly out of memory or killed by itself)"
        outcome.issues.append(Issue("kernel_died", describe_exit(code) + "."))
    elif not done:
        outcome.stop_reason = "the notebook stopped before this point"
        outcome.issues.append(Issue("kernel_died", "the notebook stopped before its end."))
