"""The unit of work: one student's notebook in (:class:`GradingTask`), one
:class:`GradingResult` out.

``grade_unit(task)`` reads the submission (and the quick-check answers recorded in it), builds
the plan, runs it in this process's warm sandbox, judges the records in this (clean) process
and assembles the result: verdicts, points per grade cell, issues, and the graded notebook. It
never raises for anything a submission does; the same function runs in local worker processes
and on Dask workers.
"""

from __future__ import annotations

import base64
import dataclasses
import time

from mhalib.grading.assignment import NotebookModel, nbgrader_meta
from mhalib.grading.graded_notebook import build_graded_notebook
from mhalib.grading.outcome import Outcome, read_outcome
from mhalib.grading.plan import (
    NotebookUnreadable,
    Plan,
    build_plan,
    parse_notebook,
    release_cell_copy,
    sandbox_plan,
)
from mhalib.grading.records import (
    MAX_RESPONSE_CHARS,
    GradingResult,
    GradingTask,
    Issue,
    ItemVerdict,
    RunStats,
)
from mhalib.grading.sandbox.limits import Limits
from mhalib.grading.sandbox_host import Sandbox, SandboxError, choose_mode
from mhalib.grading.scorer import grade_cell_scores, score_notebook, seals_by_exercise
from mhalib.hints.record import hints_taken
from mhalib.quiz.record import recorded_answers

_SANDBOXES: dict[tuple[str, str | None], Sandbox] = {}
_RESOLVED: dict[str, str] = {}


def resolve_mode(requested: str) -> str:
    """``bwrap`` or ``none`` for this machine (``auto`` is decided once per process)."""
    if requested not in _RESOLVED:
        import sys

        _RESOLVED[requested] = choose_mode(requested, echo=lambda text: print(
            text, file=sys.stderr))
    return _RESOLVED[requested]


def worker_sandbox(mode: str, assignment: str | None = None) -> Sandbox:
    """This process's warm sandbox for ``assignment`` (started on first use, restarted after a
    crash): its copy of mhalib holds nothing that computes that assignment's answers."""
    sandbox = _SANDBOXES.get((mode, assignment))
    if sandbox is None:
        if not _SANDBOXES:
            import atexit

            atexit.register(close_sandboxes)
        sandbox = _SANDBOXES[(mode, assignment)] = Sandbox(mode, assignment)
    if not sandbox.running:
        sandbox.start()
    return sandbox


def close_sandboxes() -> None:
    for sandbox in _SANDBOXES.values():
        sandbox.destroy()
    _SANDBOXES.clear()


def _unreadable_plan(reason: str, flag: str, model: NotebookModel) -> Plan:
    """Nothing runs; the graded notebook shows the release and the reason."""
    cells = [release_cell_copy(cell) for cell in model.release["cells"]]
    return Plan(cells=cells, issues=[Issue(flag, reason)], runnable=False)


def _plan_for(task: GradingTask) -> tuple[Plan, dict]:
    """The plan, and the submitted notebook's JSON ({} when unreadable)."""
    model = task.model
    if task.submission is None:
        flag, reason = task.submission_error or (
            "missing_notebook", f"no {model.notebook} was submitted")
        return _unreadable_plan(reason + ".", flag, model), {}
    limit = task.limits.notebook_bytes
    if len(task.submission) > limit:
        return _unreadable_plan(f"the notebook is {len(task.submission):,} bytes, more than "
                                f"the {limit:,} accepted.", "too_large", model), {}
    try:
        notebook = parse_notebook(task.submission)
    except NotebookUnreadable as error:
        return _unreadable_plan(f"the notebook could not be read: {error}.",
                                "invalid_notebook", model), {}
    plan = build_plan(notebook, model)
    for step in plan.steps:  # replay only what the class run left (none: run the cell)
        if step.get("class_cache") and f"{step['class_cache']}.json" not in task.class_cache:
            del step["class_cache"]
    return plan, notebook


def _run(task: GradingTask, plan: Plan) -> dict:
    """The sandbox's reply (untrusted JSON data) for ``plan``."""
    try:
        sandbox = worker_sandbox(task.sandbox, task.assignment)
        files = {path: base64.b64encode(data).decode("ascii")
                 for path, data in task.files.items()}  # the zygote's JSON wire format
        cache = {name: base64.b64encode(data).decode("ascii")
                 for name, data in task.class_cache.items()}
        reply = sandbox.run(sandbox_plan(plan, task.seed if task.fixed_seed else None,
                                           task.limits.to_dict()), files, cache)
        reply["isolation"] = sandbox.info.get("isolation")
        return reply
    except (SandboxError, OSError, ValueError) as error:
        return {"error": str(error)[:500], "steps": ""}


def _records(reply: dict, limits: Limits) -> dict[str, str | None]:
    """Seal name -> its text in the sandbox's (untrusted) reply; None for a seal that is no text
    or is larger than ``limits.record_bytes`` (the sandbox already cut it there)."""
    return {str(name): text if isinstance(text, str) and len(text) <= limits.record_bytes
            else None for name, text in (reply.get("records") or {}).items()}


def _not_reached(model: NotebookModel, outcome: Outcome, plan: Plan) -> dict[str, str]:
    reasons = {}
    for item in model.exercises:
        if item in outcome.record_errors:
            reasons[item] = f"recording its results failed ({outcome.record_errors[item]})"
        elif item not in outcome.reached:
            reasons[item] = outcome.stop_reason or "the notebook never reached its test"
            if not plan.runnable:
                reasons[item] = plan.issues[0].message.rstrip(".")
    return reasons


def _explain_missing(verdicts: dict[str, ItemVerdict], plan: Plan, outcome: Outcome) -> None:
    """A function that was never defined: say so if its answer cell raised an error."""
    for index, cell in enumerate(plan.cells):
        verdict = verdicts.get(nbgrader_meta(cell).get("grade_id"))
        if verdict is None or not {"missing", "no_record"} & set(verdict.flags):
            continue
        errors = [o for o in outcome.outputs.get(index, []) if o["output_type"] == "error"]
        if errors:
            verdict.diagnosis += (f" Its answer cell raised {errors[0]['ename']}: "
                                  f"{errors[0]['evalue'][:200]}")


def _keep_answers(verdicts: dict[str, ItemVerdict], plan: Plan, model: NotebookModel) -> None:
    """Each exercise's answer cell as submitted, and whether it is still the release's stub
    (``ItemVerdict.response``, read by class reports; nothing when the notebook was unreadable)."""
    stubs = {nbgrader_meta(c).get("grade_id"): c.get("source", "")
             for c in model.release.get("cells", [])}
    for cell in plan.cells:
        verdict = verdicts.get(nbgrader_meta(cell).get("grade_id"))
        if verdict is not None and verdict.kind == "exercise" and cell.get("origin") == "learner":
            source = str(cell.get("source", ""))
            verdict.response = {"answer": source[:MAX_RESPONSE_CHARS], "blank": source.strip()
                                == str(stubs.get(verdict.item, "")).strip()}


def grade_unit(task: GradingTask) -> GradingResult:
    """Grade one student's notebook; see the module docstring."""
    started = time.monotonic()
    task = dataclasses.replace(task, sandbox=resolve_mode(task.sandbox))
    model = task.model
    plan, submitted = _plan_for(task)
    reply: dict = {}
    if plan.runnable:
        reply = _run(task, plan)
        outcome = read_outcome(reply, plan.steps, task.limits)
    else:
        outcome = Outcome()
    records = seals_by_exercise(_records(reply, task.limits), model.exercises)
    answers = recorded_answers(submitted, model.questions)  # read here, never in the sandbox
    hints = hints_taken(submitted, model.exercises)  # hint use, from the submission too
    verdicts = score_notebook(model, records, answers, _not_reached(model, outcome, plan),
                              task.rubric, task.student, task.quick_check_keys, hints)
    _explain_missing(verdicts, plan, outcome)
    _keep_answers(verdicts, plan, model)
    issues = [*plan.issues, *outcome.issues]
    if task.sandbox == "none":
        issues.append(Issue("no_sandbox", "graded without bubblewrap: learner code was not "
                                          "isolated from the host."))
    return GradingResult(
        student=task.student, assignment=task.assignment, notebook=model.notebook,
        seed=task.seed, timestamp=task.timestamp, sandbox=task.sandbox,
        isolation=reply.get("isolation"), issues=issues, verdicts=verdicts,
        grade_cells=grade_cell_scores(model, verdicts), run=RunStats.from_reply(reply),
        seconds=round(time.monotonic() - started, 4),
        graded_notebook=build_graded_notebook(model, plan.cells, outcome.outputs,
                                              outcome.counts, verdicts, issues, answers))


def grade_student(tasks: list[GradingTask]) -> list[GradingResult]:
    """All notebooks of one student, one after the other (never two at once)."""
    results = []
    for task in tasks:
        try:
            results.append(grade_unit(task))
        except Exception as error:  # a grader bug must not lose the rest of the class
            results.append(grader_error_result(task, error))
    return results


def grader_error_result(task: GradingTask, error: BaseException) -> GradingResult:
    """A result that gives 0 everywhere and says the grader failed (flag ``grader_error``)."""
    model = task.model
    message = f"the grader failed on this notebook ({type(error).__name__}: {error})"[:500]
    verdicts = score_notebook(model, {}, {},
                              {i: message for i in model.exercises}, task.rubric)
    for question in model.questions:
        verdicts[question] = ItemVerdict.failure("quick_check", question,
                                                 f"{question}: not graded: {message}.",
                                                 "grader_error")
        verdicts[question].max_points = model.points_of(question)
    return GradingResult(
        student=task.student, assignment=task.assignment, notebook=model.notebook,
        seed=task.seed, timestamp=task.timestamp, sandbox=task.sandbox,
        issues=[Issue("grader_error", message)], verdicts=verdicts,
        grade_cells=grade_cell_scores(model, verdicts))
