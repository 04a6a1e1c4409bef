"""Shared assertions for the per-lesson checker tests (tests/checks/test_lessonNN.py).

Each lesson's fixture module (tests/checks/answers/lessonNN.py) provides learner-style answers:
``WRONG[exercise][mistake_name]``, ``RIGHT[exercise]``, ``ANSWER_KEY[exercise]`` and optionally
``BROKEN[exercise]`` (answers that raise on some case). These helpers turn them into verdicts.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from mhalib.checks import CheckFailed, check, get_exercise, judge_record
from mhalib.checks.encoding import decode, encode, to_plain
from mhalib.checks.exercise import Case, Refusal, WrongAnswer
from mhalib.checks.probe import probe

SEEDS = (0, 1, 2)


def verdict_of(exercise: str, func, seed: int, suite: str = "grading"):
    """Probe ``func`` and judge the record, as the grader does (no printing)."""
    return judged(exercise, func, seed, suite)[1]


def judged(exercise: str, func, seed: int, suite: str = "grading"):
    """``(record, verdict)``: the probe's record of ``func`` and the grader's verdict on it."""
    record = probe(get_exercise(exercise), func, seed, suite)
    return record, judge_record(exercise, record, seed, suite)


def mistake_message(exercise: str, mistake: str) -> str:
    return next(m.message for m in get_exercise(exercise).mistakes() if m.name == mistake)


def assert_named(exercise: str, func, mistake: str, seeds=SEEDS, strict: bool = False) -> None:
    """``func`` fails every seed, flagged as ``mistake`` with that mistake's sentence; with
    ``strict``, the strict rule (:func:`strict_name`) names it too, from the same record."""
    for seed in seeds:
        record, verdict = judged(exercise, func, seed)
        assert not verdict.passed, f"seed {seed}: a wrong answer passed"
        assert verdict.score < 1
        assert f"mistake:{mistake}" in verdict.flags, (
            f"seed {seed}: expected mistake:{mistake}, got {verdict.flags}: {verdict.diagnosis}")
        assert mistake_message(exercise, mistake) in verdict.diagnosis
        if strict:
            found = strict_name(exercise, record, seed)
            assert found == mistake, f"seed {seed}: the strict rule names {found}"


def strict_name(exercise_name: str, record: dict, seed: int, suite: str = "grading"):
    """The mistake the strict rule names for ``record``: one whose model reproduces every
    failing case with a recorded output (most votes first, then the checker's order); None if
    there is none or no such case. A refusal gone wrong (a must_raise case) is voted apart, as
    the judge does."""
    exercise = get_exercise(exercise_name)
    if record.get("status") != "ok":
        return None
    mistakes = exercise.mistakes()
    candidates = None
    refusals = None
    for case, raw in zip(exercise.cases(seed, suite), record["cases"]):
        if raw.get("status") != "ok":
            continue
        output, meta = decode(raw.get("output")), raw.get("meta") or {}
        try:
            problem = (exercise.refusal_problem(case, output) if case.must_raise
                       else exercise.judge_case(case, output, meta))
        except Exception:
            problem = "could not compare"
        if problem is None:
            continue
        refusing = bool(case.must_raise)
        detected = {m.name for m in mistakes if isinstance(m, Refusal) == refusing
                    and m.detect(exercise, case, output, meta)}
        if refusing:
            refusals = detected if refusals is None else refusals & detected
        else:
            candidates = detected if candidates is None else candidates & detected
    if candidates is None:
        candidates = refusals
    if not candidates:
        return None
    return next(m.name for m in mistakes if m.name in candidates)


def assert_accepted(exercise: str, func, seeds=SEEDS) -> None:
    for seed in seeds:
        verdict = verdict_of(exercise, func, seed)
        assert verdict.passed and verdict.score == 1.0, (
            f"seed {seed}: a right answer failed: {verdict.diagnosis} {verdict.details}")
        assert verdict.flags == []


def assert_answer_key_refused(exercise: str, func) -> None:
    verdict = verdict_of(exercise, func, seed=0)
    assert not verdict.passed and verdict.score == 0.0
    assert verdict.flags == ["called_answer_key"]
    assert "mhalib's own answer" in verdict.diagnosis and "scores 0" in verdict.diagnosis
    with pytest.raises(CheckFailed, match="mhalib's own answer"):
        check(exercise, func, quiet=True)


def assert_broken_reported(exercise: str, func) -> None:
    verdict = verdict_of(exercise, func, seed=0)
    assert not verdict.passed and "error" in verdict.flags
    assert "raised" in verdict.diagnosis and "called with" in verdict.diagnosis


def model_as_answer(exercise: str, mistake_name: str):
    """A learner function that returns exactly what a mistake model computes."""
    model = next(m for m in get_exercise(exercise).mistakes() if m.name == mistake_name)

    def answer(*args, **kwargs):
        return model.compute(Case("as answer", args, kwargs))

    return answer


def model_verdict(exercise: str, mistake_name: str, seed: int = 5):
    """Judge the outputs of a mistake model as if a learner had returned them (no probe, so a
    model that goes through the answer key is judged on its values)."""
    checker = get_exercise(exercise)
    model = next(m for m in checker.mistakes() if m.name == mistake_name)
    record = {"format": "mhalib-record/1", "exercise": exercise, "seed": seed,
              "suite": "grading", "status": "ok", "cases": []}
    for case in checker.cases(seed, "grading"):
        try:
            output = encode(to_plain(model.compute(case)))
            record["cases"].append({"status": "ok", "output": output, "meta": {}})
        except Exception as error:  # the model raises where the learner's code would
            record["cases"].append({"status": "error", "error": repr(error)})
    return judge_record(exercise, record, seed)


def assert_model_detectable(exercise: str, mistake_name: str) -> None:
    """Every mistake model differs from the answer on some case and is named for itself."""
    verdict = model_verdict(exercise, mistake_name)
    assert not verdict.passed
    assert f"mistake:{mistake_name}" in verdict.flags, (verdict.flags, verdict.diagnosis)


def assert_model_cannot_pass(exercise: str, mistake_name: str) -> None:
    """Calling a checker's mistake model as an answer never passes."""
    verdict = verdict_of(exercise, model_as_answer(exercise, mistake_name), seed=6)
    assert not verdict.passed


def assert_tampering_refused(exercise: str, right_answer, monkeypatch) -> None:
    """A kernel whose comparisons or checker were replaced is not judged: the check fails."""
    from mhalib.checks import compare, judge

    patches = [
        (np, "allclose", lambda *a, **k: True, "numpy.allclose was replaced"),
        (np.testing, "assert_allclose", lambda *a, **k: None,
         "numpy.testing.assert_allclose was replaced"),
        (compare.difference, "__code__", (lambda *a, **k: None).__code__,
         "the mhalib checker was modified"),
        (judge, "judge_outputs", lambda *a, **k: None, "the mhalib checker was modified"),
    ]
    for target, name, fake, reason in patches:
        with monkeypatch.context() as patch:
            patch.setattr(target, name, fake)
            with pytest.raises(CheckFailed, match="kernel was altered") as info:
                check(exercise, right_answer, quiet=True)
        assert reason in str(info.value)
    assert check(exercise, right_answer, quiet=True).passed  # and clean again afterwards


def assert_fast(exercise: str, right_answer, limit_s: float = 1.0) -> None:
    start = time.perf_counter()
    verdict_of(exercise, right_answer, seed=11)
    assert time.perf_counter() - start < limit_s


def mistake_params(answers) -> list:
    """One param per fixture answer in ``WRONG`` and ``ALSO_WRONG``."""
    params = [pytest.param(ex, name, func, id=f"{ex}-{name}")
              for ex, by_name in answers.WRONG.items() for name, func in by_name.items()]
    params += [pytest.param(ex, name, func, id=f"{ex}-{name}-{func.__name__}")
               for ex, by_name in getattr(answers, "ALSO_WRONG", {}).items()
               for name, func in by_name.items()]
    return params


def assert_every_mistake_has_a_fixture(answers, exercises) -> None:
    """Each mistake model is exercised by a learner-style wrong answer, and vice versa."""
    for exercise in exercises:
        models = {m.name for m in get_exercise(exercise).mistakes()}
        assert set(answers.WRONG[exercise]) == models, exercise


def right_params(answers) -> list:
    return [pytest.param(ex, func, id=f"{ex}-{func.__name__}")
            for ex, funcs in answers.RIGHT.items() for func in funcs]


def answer_key_params(answers) -> list:
    return [pytest.param(ex, func, id=f"{ex}-{func.__name__}")
            for ex, funcs in answers.ANSWER_KEY.items() for func in funcs]


def broken_params(answers) -> list:
    return [pytest.param(ex, func, id=f"{ex}-{func.__name__}")
            for ex, funcs in getattr(answers, "BROKEN", {}).items() for func in funcs]


def model_params(exercises: list[str]) -> list:
    """One param per recomputable mistake model (a :class:`WrongAnswer`); a :class:`Symptom`
    is read off a measurement or the output's structure and is tested in test_lessonNN.py."""
    return [pytest.param(ex, m.name, id=f"{ex}-{m.name}")
            for ex in exercises for m in get_exercise(ex).mistakes()
            if isinstance(m, WrongAnswer)]
