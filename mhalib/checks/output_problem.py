"""Why one recorded output is wrong on its case (the judge's test of each case, and the repair
search's test of each try)."""

from __future__ import annotations

from mhalib.checks.explain import NUMPY_COUNT, float_count_problem


def output_problem(exercise, case, result: dict) -> str | None:
    """Why the output of ``result`` (status ok) is wrong on ``case``, or None (the library the
    output came from is checked apart: :func:`library_problem`)."""
    try:
        if getattr(case, "must_raise", ""):
            problem = exercise.refusal_problem(case, result.get("output"))
        else:
            problem = exercise.judge_case(case, result.get("output"), result.get("meta") or {})
    except Exception as error:  # a malformed output must never crash the judge
        problem = f"could not compare the output ({type(error).__name__}: {error})"
    if problem is None and getattr(exercise, "int_counts", False):
        problem = float_count_problem(result.get("output"))
        kind = (result.get("meta") or {}).get("numpy_scalar")
        if problem is None and kind and not kind.startswith("float"):
            problem = (f"the count {NUMPY_COUNT} ({kind}), not "
                       "a plain Python int: wrap it in int(...) (numpy integers wrap around "
                       "silently past 2**63 - 1, where Python's ints grow)")
    return problem
