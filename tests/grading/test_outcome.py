"""Reading the sandbox's (untrusted) reply: outputs kept, endings named, reasons given."""

from __future__ import annotations

import json
import signal

from mhalib.grading.outcome import read_outcome
from mhalib.grading.sandbox.limits import Limits

STEPS = [{"kind": "cell", "index": 0}, {"kind": "record", "exercises": ["softmax"],
                                        "questions": []}]
LIMITS = Limits(notebook_seconds=12, cell_seconds=3, output_bytes=1000, cell_output_bytes=500)


def _reply(*entries, **extra) -> dict:
    return {"steps": "\n".join(json.dumps(e) for e in entries), **extra}


def _flags(outcome) -> set[str]:
    return {issue.flag for issue in outcome.issues}


def test_a_finished_run_keeps_known_outputs_only():
    cell = {"step": 0, "kind": "cell", "execution_count": 1, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "hi\n"},
        {"output_type": "stream", "name": "evil", "text": "x"}, "not an output"]}
    reply = _reply(cell, {"step": 1, "kind": "record", "status": "ok"},
                   {"step": 2, "kind": "done"}, exit_code=0)
    outcome = read_outcome(reply, STEPS, LIMITS)
    assert outcome.outputs[0] == [{"output_type": "stream", "name": "stdout", "text": "hi\n"}]
    assert outcome.reached == {"softmax"} and not outcome.issues and outcome.stop_reason is None


def test_a_timed_out_run_names_the_budget():
    outcome = read_outcome(_reply(timed_out=True, exit_code=-9), STEPS, LIMITS)
    assert _flags(outcome) == {"timeout"}
    assert "12 s" in outcome.stop_reason and "softmax" not in outcome.reached


def test_a_killed_kernel_names_the_signal():
    reply = _reply({"step": 0, "kind": "cell", "outputs": []},
                   exit_code=128 + signal.SIGKILL)
    outcome = read_outcome(reply, STEPS, LIMITS)
    assert _flags(outcome) == {"kernel_died"}
    assert "SIGKILL" in outcome.stop_reason and "out of memory" in outcome.stop_reason


def test_dropped_output_cell_timeouts_and_memory_are_reported():
    cell = {"step": 0, "kind": "cell", "status": "timeout", "dropped_bytes": 4096, "outputs": [
        {"output_type": "error", "ename": "MemoryError", "evalue": "", "traceback": []}]}
    outcome = read_outcome(_reply(cell, {"step": 2, "kind": "done"}, exit_code=0), STEPS,
                           LIMITS)
    assert _flags(outcome) == {"output_truncated", "cell_timeout", "memory"}
    assert any("1,000 bytes" in issue.message for issue in outcome.issues)


def test_a_failed_record_step_gives_its_reason():
    reply = _reply({"step": 1, "kind": "record", "status": "integrity check failed",
                    "tampering": ["np.allclose was replaced"]},
                   {"step": 2, "kind": "done"}, exit_code=0)
    outcome = read_outcome(reply, STEPS, LIMITS)
    assert outcome.record_errors == {"softmax": "integrity check failed"}
    assert _flags(outcome) == {"integrity"}
