"""Issue 21, mechanism 5: quick checks.

- **Tells in the public bank.** The options of every multiple-choice question ship in
  ``mhalib/quiz/lessonNN.py`` in their canonical order, and a recorded answer is a canonical
  index. A learner who never reads a question can answer by position (option 0 everywhere) or
  by length (the option whose text is third longest). Over the multiple-choice questions of
  lessons 06, 07, 10 and 11 such a strategy must earn no more than chance allows: the chance
  mean plus two standard deviations, rounded down.
- **Copied variants.** A question with per-learner numbers judges the answer on the variant the
  notebook records; a ``seed:`` variant is chosen when no student id is known. Two submissions
  with the same ``seed:`` variant (a copied notebook, or copied answers pasted into one's own)
  must both be flagged for review.
- **The fill-in evaluator.** An answer is an expression evaluated in the grader's own process.
  Sequence repetition (``'a' * 200000000``, 15 characters) or a nested tuple converted to an
  array by the comparison costs time and memory there. The answer must earn 0 and judging it
  must cost no more than an honest answer's (measured against an honest control graded the
  same way: at most 10 s more CPU and 256 MB more peak memory in the grader's processes
  outside the sandbox).
"""

from __future__ import annotations

import math

from tests.grading.attacks.controls import EINSUM_06
from tests.grading.attacks.spec import (
    AtMost,
    GroupAtMost,
    PairReview,
    Resources,
    Submission,
)

LESSONS = ("06-gqa", "07-flash", "10-mla", "11-serving")


def _choices(assignment: str):
    """The multiple-choice questions of a lesson, from the public bank (what a learner reads)."""
    import importlib

    from mhalib import course
    from mhalib.quiz import find
    from mhalib.quiz.question import MultipleChoice

    bank = importlib.import_module(course.lesson(assignment).quiz).QUESTIONS
    return [q for q in (find(qid)[0] for qid in bank) if isinstance(q, MultipleChoice)]


def first_option(question) -> int:
    return 0


def third_longest(question) -> int:
    """The option whose text is the third longest (ties in canonical order)."""
    by_length = sorted(range(len(question.options)), key=lambda i: -len(question.options[i]))
    return by_length[min(2, len(by_length) - 1)]


def chance_bound(assignments=LESSONS) -> tuple[int, float, int]:
    """(questions, chance mean, most points allowed: mean + 2 sd, rounded down)."""
    sizes = [len(q.options) for a in assignments for q in _choices(a)]
    mean = sum(1 / k for k in sizes)
    sd = math.sqrt(sum((1 / k) * (1 - 1 / k) for k in sizes))
    return len(sizes), mean, math.floor(mean + 2 * sd)


def _strategy_group(label: str, pick, description: str) -> list[Submission]:
    count, mean, bound = chance_bound()
    members = []
    for assignment in LESSONS:
        questions = _choices(assignment)
        rule = GroupAtMost(f"qc-{label}", bound, count, mean)
        members.append(Submission(
            f"qc-{label}-{assignment[:2]}", assignment, "5 quick-check tell",
            f"{description} (lesson {assignment[:2]}; its exercises left as stubs)", [rule],
            quick={q.id: pick(q) for q in questions}, filler=False, group=f"qc-{label}",
            scored_questions=tuple(q.id for q in questions)))
    return members


STRING_BOMB = "'a'*200000000"  # 15 characters: a 200 MB string in the grader's process
TUPLE_BOMB = "((0,)*6000,)*6000"  # 17 characters: 36 million floats once compared

SUBMISSIONS = [
    *_strategy_group("first-option", first_option,
                     "every multiple-choice question answered with canonical option 0"),
    *_strategy_group("third-longest", third_longest,
                     "every multiple-choice question answered with its third-longest option"),
    Submission("qc-seed-variant-original", "06-gqa", "5 copied variant",
               "an honest notebook whose quick checks carry the variant seed:424242 (no "
               "student id known)", [PairReview("qc-seed-variant-copy")],
               quick="right", variant="seed:424242"),
    Submission("qc-seed-variant-copy", "06-gqa", "5 copied variant",
               "a byte-identical copy of qc-seed-variant-original",
               [PairReview("qc-seed-variant-original")], copy_of="qc-seed-variant-original"),
    Submission("qc-seed-variant-pasted", "06-gqa", "5 copied variant",
               "its own exercise code, but quick-check answers and variant (seed:515151) "
               "pasted from qc-seed-variant-source", [PairReview("qc-seed-variant-source")],
               quick="right", variant="seed:515151", answers=EINSUM_06),
    Submission("qc-seed-variant-source", "06-gqa", "5 copied variant",
               "the classmate whose answers and seed:515151 were pasted",
               [PairReview("qc-seed-variant-pasted")], quick="right", variant="seed:515151"),
    Submission("qc-fillin-string-bomb", "06-gqa", "5 fill-in evaluator",
               f"qc_kv_cache_gib answered {STRING_BOMB!r}",
               [AtMost("qc_kv_cache_gib", 0.0, or_review=False, why="a wrong answer"),
                Resources("control-isolated-06")],
               quick={"qc_kv_cache_gib": STRING_BOMB}, isolated=True),
    Submission("qc-fillin-tuple-bomb", "07-flash", "5 fill-in evaluator",
               f"qc_kv_reads answered {TUPLE_BOMB!r}",
               [AtMost("qc_kv_reads", 0.0, or_review=False, why="a wrong answer"),
                Resources("control-isolated-07")],
               quick={"qc_kv_reads": TUPLE_BOMB}, isolated=True),
]
