"""The grader's flags: what each means and which ones an instructor should look at.

Notebook-level flags come from reading and running the submission; exercise-level flags come
from the judge (``mhalib.checks``). ``mistake:<name>`` flags only name the likely mistake.
"""

from __future__ import annotations

from collections.abc import Iterable

MEANING = {
    # the submission could not be graded normally
    "missing_notebook": "the notebook was not submitted",
    "invalid_notebook": "the file is not a readable notebook",
    "too_large": "the file or a result was larger than the grader accepts",
    "kernel_died": "the notebook's process died before the end",
    "timeout": "the notebook ran out of its time budget",
    "memory": "the notebook ran out of memory",
    "sandbox_error": "the grader's sandbox failed on this notebook",
    "grader_error": "the grader itself failed on this notebook",
    "no_record": "an exercise was never reached, or a quick check has no recorded answer",
    "bad_record": "the grading record was malformed (possibly tampered with)",
    "integrity": "the kernel was altered (checker, numpy, torch or IPython patched)",
    "called_answer_key": "an exercise called mhalib's own answer",
    # deviations that were repaired or only noted
    "edited_test_cell": "a test cell was edited; the original was graded",
    "restored_cell": "a deleted test cell was restored and graded",
    "changed_metadata": "nbgrader metadata was changed; the original was used",
    "changed_cell_type": "a cell's type was changed; the original type was used",
    "changed_kernel": "the notebook named another kernel; the course kernel was used",
    "unknown_cell_id": "a cell carries an id that is not in the assignment (renamed?)",
    "duplicate_cell_id": "two cells carry the same id; the second ran as a plain cell",
    "missing_answer_cell": "an answer cell is missing (deleted or renamed)",
    "invalid_cell": "a malformed cell was skipped",
    "cell_timeout": "a cell ran out of its time and was stopped",
    "output_truncated": "output beyond the size cap was dropped",
    "no_sandbox": "graded without bubblewrap isolation",
    "class_cache_refused": "an instructor cell cached for the class ran as submitted instead "
                           "(the notebook changed what it uses)",
    # exercise- and quick-check-level (on a verdict, never spelt like a notebook-level flag)
    "missing": "the exercise's function (or answer variable) was not defined",
    "call_error": "the function raised an error on some inputs",
    "call_timeout": "a call of the function ran longer than the time allowed for one call",
    "output_too_large": "the function returned an output too large to record",
    "invalid_answer": "the quick-check answer could not be judged",
    "no_key": "the instructor's keys have no (valid) key for this quick check",
    "variant_of_other_student": "the quick-check answer was recorded under another student's "
                                "id (a copied notebook?); it was judged on that student's "
                                "numbers",
    # the measured (physical) case of lessons 07, 11 and 12: see mhalib.checks.physical
    "no_physical_record": "the large measured case has no result from the grader",
    "physical_refused": "the large measured case could not be set up (the notebook's "
                        "definitions took too much memory or time before the call)",
    "physical_error": "the large measured case did not finish, or failed where the measured "
                      "process refuses files and imports (an honest answer may need a look)",
}

REVIEW = frozenset({
    "missing_notebook", "invalid_notebook", "too_large", "kernel_died", "timeout", "memory",
    "sandbox_error", "grader_error", "bad_record", "integrity", "called_answer_key",
    # a function that hangs or returns a huge output may be a budget set too tight
    "call_timeout", "output_too_large",
    "no_key", "variant_of_other_student",
    "no_physical_record", "physical_refused", "physical_error",
})


def needs_review(flags: Iterable[str]) -> bool:
    """True if any flag asks for an instructor's look."""
    return any(flag in REVIEW for flag in flags)


def problem_flags(flags: Iterable[str]) -> list[str]:
    """Flags without the ``mistake:`` labels (those are diagnoses, not problems)."""
    return sorted({f for f in flags if not f.startswith("mistake:")})
