"""Search over single changes of the answer key (issue 22).

An exercise's ``search_space()`` returns :class:`Change` s: its reference written as a few named
steps with knobs (:func:`single_changes` turns every alternative value of one knob into one
change). Only when a case fails and no mistake model matched does the judge evaluate them on
the failing cases (at most :data:`MAX_CHANGES` of them on at most three cases), and name the
change that reproduces more than half of those outputs; two that fit equally are both named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_CHANGES = 60
MAX_SEARCH_CASES = 8


@dataclass(frozen=True)
class Change:
    """One step of the reference changed: ``compute(case)`` gives the output with the change,
    ``message`` says it in the lesson's words."""

    name: str
    message: str
    compute: Callable[[Any], Any]


def single_changes(model: Callable, knobs: dict[str, list[tuple[Any, str]]],
                   prepare: Callable) -> list[Change]:
    """One :class:`Change` per alternative of each knob: ``model(*args, **{knob: value})`` on
    ``prepare(case) -> (args, kwargs)``; ``knobs`` maps a knob to ``[(value, sentence)]``."""
    changes = []
    for knob, alternatives in knobs.items():
        for value, sentence in alternatives:
            def compute(case, knob=knob, value=value):
                args, kwargs = prepare(case)
                return model(*args, **{**kwargs, knob: value})
            changes.append(Change(f"{knob}={value}", sentence, compute))
    return changes


def search_changes(exercise, changes: list[Change], recorded, cap: int = MAX_CHANGES,
                   beat: int = 0, passing=()) -> tuple[str, str] | None:
    """``(flag, message)`` of the change that reproduces most of the ``recorded`` failing
    ``(case, result)`` pairs (more than half, and more than ``beat``) and stays right on the
    ``passing`` cases (those the learner got right), or None."""
    from mhalib.checks.mutants import stays_right_on_all

    # a change is named only with more than max(beat, half the cases) votes: one that can no
    # longer get there is not evaluated on the cases left (the result is the same, sooner)
    needed = max(beat, len(recorded) // 2) + 1
    votes: dict[str, int] = {}
    for change in changes[:cap]:
        for index, (case, result) in enumerate(recorded):
            if votes.get(change.name, 0) + len(recorded) - index < needed:
                break
            if exercise.reproduces(case, change.compute, result.get("output")):
                votes[change.name] = votes.get(change.name, 0) + 1
    computes = {change.name: change.compute for change in changes[:cap]}
    votes = {name: count for name, count in votes.items()
             if stays_right_on_all(exercise, computes[name], passing)}
    if not votes:
        return None
    most = max(votes.values())
    if 2 * most <= len(recorded) or most <= beat:
        return None
    best = [c for c in changes if votes.get(c.name) == most][:2]
    if len(best) == 1:
        return f"change:{best[0].name}", best[0].message
    return (f"change:{best[0].name}",
            "two explanations fit this output: " + " Or: ".join(c.message for c in best))


def search_beats_models(exercise, cases, results, failures, votes) -> tuple[str, str] | None:
    """For an exercise with ``search_space_for(case)``: ``(flag, message)`` of the single
    change that reproduces more failing cases than any mistake model (``votes``: the models'
    counts) and more than half of the failing cases with an output, else None. Evaluated only
    on failure, on at most :data:`MAX_SEARCH_CASES` failing cases and ``search_cap`` changes."""
    space = getattr(exercise, "search_space_for", None)
    failing = {label for label, _ in failures}
    recorded = [(case, result) for case, result in zip(cases, results)
                if case.label in failing and result.get("status") == "ok"
                and not getattr(case, "must_raise", "")][:MAX_SEARCH_CASES]
    if space is None or not recorded or max(votes.values(), default=0) >= len(recorded):
        return None  # (a model that reproduces every case searched cannot be beaten)
    try:
        changes = space(recorded[0][0])[:getattr(exercise, "search_cap", MAX_CHANGES)]
        from mhalib.checks.mutants import passing_cases

        found = search_changes(exercise, changes, recorded, cap=len(changes), beat=max(
            votes.values(), default=0), passing=passing_cases(cases, results, failing))
    except Exception:  # a diagnosis must never crash the judge
        return None
    return found
