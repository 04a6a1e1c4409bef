"""The judge: a pure function from (exercise, seed, suite, recorded outputs) to a :class:`Verdict`.

It rebuilds the inputs from the seed, so nothing recorded in the learner's kernel but the outputs
is trusted, and names the likely mistake by evaluating each mistake model on the same inputs:
only a mistake that reproduces most of the failing cases is named.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import numpy as np

from mhalib.checks.encoding import EncodingError, decode
from mhalib.checks.exercise import Refusal
from mhalib.checks.explain import explain_failures
from mhalib.checks.library_contract import library_problem
from mhalib.checks.output_problem import output_problem
from mhalib.checks.repair_sentences import repair_of, scalar_factor, with_repair
from mhalib.checks.search import search_beats_models
from mhalib.checks.verdict import Verdict

RECORD_FORMAT = "mhalib-record/1"
# the judge's own seconds in the visible suite, where the learner waits: the mistake models and
# the readings that have not answered by then are skipped (with the repair search's
# VISIBLE_REPAIR_BUDGET_S, the check's own work stays within 0.25 s). The environment's
# VISIBLE_JUDGE_VARIABLE sets another limit (at most 10 s): the test suite, whose tests check
# what the visible suite names on a loaded machine, lifts it.
VISIBLE_JUDGE_S = 0.16
VISIBLE_JUDGE_VARIABLE = "MHALIB_VISIBLE_JUDGE_S"

# statuses the probe writes for a whole exercise, with the learner-facing reason
_EXERCISE_FAILURES = {
    "missing": "no function named {name} was defined: keep the function name of the exercise.",
    "integrity": "{reason}",
    "called_answer_key": "{reason}",
}


def judge_outputs(exercise, seed: int, suite: str, results: list[dict]) -> Verdict:
    """Judge decoded per-case results ``[{status, output, error, meta}]`` of ``exercise``."""
    name = exercise.name
    until = time.perf_counter() + _visible_judge_s() if suite == "visible" else None
    clock = _Clock(until)
    cases = exercise.cases(seed, suite)
    if len(results) != len(cases):
        return Verdict.failure(
            name, f"the record holds {len(results)} results for {len(cases)} cases.", "bad_record"
        )
    failures: list[tuple[str, str]] = []  # (case label, problem)
    mistake_votes: Counter[str] = Counter()
    flags: set[str] = set()
    general_failed = 0  # failures on cases not marked degenerate (what partial credit counts)
    recorded_failures = 0  # failing cases with an output to compare (not errors or timeouts)
    detections: list[list[str]] = []  # per failing case: the mistakes that reproduce it
    dtype_only: list[tuple[str, str]] = []  # failing cases whose values are right, not their dtype
    mistakes = exercise.mistakes()
    for case, result in zip(cases, results):
        status = result.get("status")
        if status != "ok":
            flags.add(status if status in ("error", "timeout", "too_large") else "bad_record")
            failures.append((case.label, _status_problem(status, result.get("error"), case)))
            general_failed += not getattr(case, "degenerate", False)
            detections.append([])
            continue
        problem = output_problem(exercise, case, result)
        library = library_problem(result.get("meta") or {},
                                  getattr(exercise, "int_counts", False))
        problem = library or problem
        if problem is None:
            continue
        failures.append((case.label, problem))
        recorded_failures += 1
        general_failed += not getattr(case, "degenerate", False)
        if library:  # the values may be right: no mistake model is asked about them
            detections.append([])
            continue
        if problem == _dtype_problem(exercise, case, result):
            dtype_only.append(failures.pop())  # right values: nothing for a model to read
            recorded_failures -= 1
            continue
        if _no_values(result.get("output")):  # (any model of the right shape reproduces it:
            detections.append([])  # round AB, x returned as it is, read as copies along N = 0)
            continue
        refusing = bool(getattr(case, "must_raise", ""))
        detected = [m.name for m in mistakes if isinstance(m, Refusal) == refusing
                    and not clock.late() and clock.timed(m.detect, exercise, case,
                                                         result.get("output"),
                                                         result.get("meta") or {})]
        mistake_votes.update(detected)
        detections.append(detected)
    total = len(cases)
    passed = total - len(failures)
    general = sum(not getattr(case, "degenerate", False) for case in cases)
    counts = {"cases_passed": passed, "cases_total": total,
              "general_passed": general - general_failed, "general_total": general}
    if not failures and not dtype_only:
        return Verdict(name, True, 1.0, f"{name}: all {total} checks passed.", **counts)
    details = [f"{label}: {problem}" for label, problem in failures + dtype_only]
    said = ""  # right values in another dtype: said as that, after any slip of the values
    if dtype_only:
        counts.update(cases_passed=passed - len(dtype_only))
        flags.add("dtype")
        more = f" and {len(dtype_only) - 1} more" if len(dtype_only) > 1 else ""
        said = f"{dtype_only[0][1]} (case '{dtype_only[0][0]}'{more})"
    if not failures:
        return Verdict(name, False, counts["cases_passed"] / total, f"{name}: {said}.",
                       details, sorted(flags), **counts)
    verdict = _judged_failures(exercise, cases, results, failures, mistakes, mistake_votes,
                               detections, recorded_failures, flags, details, counts, clock,
                               suite, until)
    verdict.diagnosis += f" Also, {said}." if said else ""
    return verdict


def _no_values(output) -> bool:
    """True for an output that is one array, or a tuple of them, with no entries at all."""
    parts = output if isinstance(output, (tuple, list)) else (output,)
    return bool(parts) and all(isinstance(p, np.ndarray) and p.size == 0 for p in parts)


def _dtype_problem(exercise, case, result) -> str | None:
    dtype_problem = getattr(exercise, "dtype_problem", None)
    return None if dtype_problem is None else dtype_problem(case, result.get("meta") or {})


def _judged_failures(exercise, cases, results, failures, mistakes, mistake_votes, detections,
                     recorded_failures, flags, details, counts, clock, suite, until) -> Verdict:
    """The failing verdict of the cases whose values are wrong: the mistake model that
    reproduces most of them, else a reading of the output, else the first failure as it is."""
    name, total = exercise.name, counts["cases_total"]
    # a refusal gone wrong is a slip of its own, beside whatever the computation gets wrong:
    # the computation's mistakes are voted on the other cases, the refusal's on its own case
    refusals = {m.name for m in mistakes if isinstance(m, Refusal)}
    refusal_votes = Counter({n: v for n, v in mistake_votes.items() if n in refusals})
    refused = sum(bool(refusals & set(d)) for d in detections)
    tied = _named_mistakes(mistakes, mistake_votes - refusal_votes, recorded_failures - refused)
    also = _named_mistakes(mistakes, refusal_votes, refused) if tied else []
    if not tied and refused == len(failures):
        tied = _named_mistakes(mistakes, refusal_votes, refused)
    searched = None if clock.past() else search_beats_models(
        exercise, cases, results, failures, mistake_votes - refusal_votes)
    if searched is not None:
        tied, also = [], []
    vague = bool(tied) and all(getattr(m, "vague", False) for m in mistakes if m.name in tied)
    explained = searched or (None if tied and not vague else explain_failures(
        exercise, cases, results, failures, quick=suite == "visible", until=until))
    if vague and explained is not None and explained[0].startswith(EXACT_READINGS):
        tied, also = [], []  # the output reproduced exactly says more than the symptom
    if tied:
        best = tied[0]
        messages = [next(m.message for m in mistakes if m.name == t) for t in tied]
        diagnosis = f"{name}: {messages[0]}" if len(tied) == 1 else (
            f"{name}: two explanations fit this output: " + " Or: ".join(messages))
        if also:
            diagnosis += " Also, " + next(m.message for m in mistakes if m.name == also[0])
        flags.update(f"mistake:{t}" for t in tied)
        counts.update(_beside(best, detections, mistake_votes))
    elif explained is not None:
        flag, message = explained
        diagnosis = f"{name}: {message}"
        flags.add(flag)
        counts["unexplained_cases"] = len(failures)
    else:
        counts["unexplained_cases"] = len(failures)
        label, problem = failures[0]
        diagnosis = f"{name}: wrong result on the case '{label}': {problem}"
    return Verdict(name, False, counts["cases_passed"] / total, diagnosis, details, sorted(flags),
                   **counts)


def _visible_judge_s() -> float:
    try:
        return min(10.0, max(0.0, float(os.environ.get(VISIBLE_JUDGE_VARIABLE,
                                                       VISIBLE_JUDGE_S))))
    except ValueError:
        return VISIBLE_JUDGE_S


class _Clock:
    """The mistake models' share of the visible suite's time: a model is skipped when the
    slowest one so far would run past ``until`` (None: no limit)."""

    def __init__(self, until: float | None):
        self.until, self.slowest = until, 0.0

    def late(self) -> bool:
        return self.until is not None and time.perf_counter() + self.slowest > self.until

    def past(self) -> bool:
        """True once the time itself has passed."""
        return self.until is not None and time.perf_counter() > self.until

    def timed(self, detect, *args) -> bool:
        started = time.perf_counter()
        try:
            return detect(*args)
        finally:
            self.slowest = max(self.slowest, time.perf_counter() - started)


# diagnoses that reproduce the learner's output exactly (an edit of the key, or of its inputs)
EXACT_READINGS = ("mutant:", "input:", "change:")


def _named_mistakes(mistakes, votes: Counter[str], recorded_failures: int) -> list[str]:
    """The mistakes to name: the one whose model reproduces the most failing cases, and only if
    it reproduces more than half of the failing cases with a recorded output. A model that
    matches a case or two of many explains nothing: a wrong name is worse than none. When two
    models reproduce as many cases, the checker's order decides (the list returned keeps room
    for naming both, once a test tells truly indistinguishable models apart)."""
    if not votes:
        return []
    most = max(votes.values())
    if 2 * most <= recorded_failures:
        return []
    return [m.name for m in mistakes if votes[m.name] == most][:1]


def _beside(best: str, detections: list[list[str]], votes: Counter[str]) -> dict:
    """How many failing cases ``best`` reproduces; for the others, the known mistake each shows
    (the most voted, listed once) and how many show none."""
    others: list[str] = []
    unexplained = 0
    for detected in detections:
        if best in detected:
            continue
        if not detected:
            unexplained += 1
            continue
        other = max(detected, key=lambda mistake: votes[mistake])
        if other not in others:
            others.append(other)
    return {"mistake_cases": votes[best], "other_mistakes": others,
            "unexplained_cases": unexplained}


def _status_problem(status, error, case) -> str:
    if status == "error" and str(error).startswith("returned "):
        return str(error)
    if status == "error" and str(error).startswith("NotImplementedError"):
        return "is not written yet (it still raises NotImplementedError)"
    if status == "error" and str(error).startswith("an unusable return value"):
        return f"gave {error} when called with {case.signature()}"
    if status == "error":
        return f"raised {error} when called with {case.signature()}"
    if status == "timeout":
        return "took longer than the time allowed for one call"
    if status == "too_large":
        return "returned an output too large to record"
    return f"unexpected result status {status!r}"


def judge_record(exercise_name: str, record, seed: int, suite: str = "grading") -> Verdict:
    """Judge a record dict written by :func:`mhalib.checks.record.record_exercises`.

    The suite is the grader's, never the record's. Never raises on hostile or malformed
    records; those get a failing verdict flagged ``bad_record``.
    """
    from mhalib.checks.registry import get_exercise

    exercise = get_exercise(exercise_name)
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        return Verdict.failure(exercise_name, "the grading record is malformed.", "bad_record")
    if record.get("exercise") != exercise_name or record.get("seed") != seed:
        return Verdict.failure(
            exercise_name, "the grading record does not belong to this exercise and seed.",
            "bad_record",
        )
    status = record.get("status")
    if status in _EXERCISE_FAILURES:
        reason = str(record.get("reason") or "")[:500]
        text = _EXERCISE_FAILURES[status].format(name=exercise_name, reason=reason)
        return Verdict.failure(exercise_name, f"{exercise_name}: {text}", status)
    if status != "ok" or not isinstance(record.get("cases"), list):
        return Verdict.failure(exercise_name, "the grading record is malformed.", "bad_record")
    results = []
    try:
        for raw in record["cases"]:
            if not isinstance(raw, dict):
                raise EncodingError("case is not an object")
            results.append({
                "status": raw.get("status"),
                "output": decode(raw.get("output")) if raw.get("status") == "ok" else None,
                "error": str(raw.get("error") or "")[:300],
                "meta": raw.get("meta") if isinstance(raw.get("meta"), dict) else {},
            })
    except (EncodingError, ValueError, TypeError) as error:
        return Verdict.failure(exercise_name, f"the grading record is malformed ({error}).",
                               "bad_record")
    verdict = judge_outputs(exercise, seed, suite, results)
    repair = repair_of(record)
    if not repair or verdict.passed or verdict.flags == ["dtype"]:
        return verdict  # (right values in another dtype: said as that, not as a change that
        # computes in the inputs' low precision and passes within its tolerance)
    return with_repair(verdict, repair, scalar_factor(exercise.cases(seed, suite), results,
                                                      exercise, repair))


def judge_seals(exercise_name: str, generic, physical=None) -> Verdict:
    """Judge what the warden sealed for an exercise: the record of its cases (``generic``,
    judged on the seed the warden issued) and, for a measured exercise, its physical check.

    Never raises on hostile or malformed seals (``bad_record``)."""
    from mhalib.checks.physical import SEAL_FORMAT, judge_physical
    from mhalib.checks.registry import get_exercise

    exercise = get_exercise(exercise_name)
    if not isinstance(generic, dict) or generic.get("format") != SEAL_FORMAT or not isinstance(
            generic.get("seed"), int):
        return Verdict.failure(exercise_name, "the grading record is malformed.", "bad_record")
    facts = generic.get("facts") if isinstance(generic.get("facts"), dict) else {}
    if generic.get("session", "generic") != "generic" or facts.get("planted"):
        return Verdict.failure(exercise_name, "the grading record is not the grader's own (a "
                               "file was planted in its place).", "bad_record")
    verdict = judge_record(exercise_name, generic.get("record"), generic["seed"])
    if getattr(exercise, "physical", None) is None or verdict.cases_total == 0:
        return verdict
    return with_physical(exercise, verdict, judge_physical(exercise, physical))


def with_physical(exercise, verdict: Verdict, physical) -> Verdict:
    """``verdict`` with the physical check counted as one more case (see
    :mod:`mhalib.checks.physical`); its mistake is named when it is the only failure."""
    verdict.cases_total += 1
    verdict.general_total += 1
    verdict.flags = sorted(set(verdict.flags) | set(physical.flags))
    if physical.summary:
        verdict.details.append(f"the large measured case: {physical.summary}")
    if physical.problem is None:
        verdict.cases_passed += 1
        verdict.general_passed += 1
        verdict.score = verdict.cases_passed / verdict.cases_total
        if verdict.passed:
            verdict.diagnosis = (f"{exercise.name}: all {verdict.cases_total} checks passed, "
                                 "the large measured case included.")
        return verdict
    verdict.details.append(f"the large measured case: {physical.problem}")
    verdict.score = verdict.cases_passed / verdict.cases_total
    message = next((m.message for m in exercise.mistakes() if m.name == physical.mistake),
                   None) if physical.mistake else None
    if verdict.passed:
        verdict.passed = False
        if message is not None:
            verdict.diagnosis = f"{exercise.name}: {message} ({physical.problem})"
            verdict.flags = sorted(set(verdict.flags) | {f"mistake:{physical.mistake}"})
            verdict.mistake_cases = 1
        else:
            verdict.diagnosis = f"{exercise.name}: right on the small cases, but {physical.problem}"
            verdict.unexplained_cases += 1
    elif physical.mistake and physical.mistake not in verdict.other_mistakes:
        verdict.other_mistakes.append(physical.mistake)
    else:
        verdict.unexplained_cases += 1
    return verdict
