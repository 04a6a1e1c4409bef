"""The whole catalogue: every attack and control, in one list (names are student ids)."""

from __future__ import annotations

from tests.grading.attacks import (
    answer_paths,
    controls,
    inputs,
    notebook_tricks,
    quick_checks,
    rubric_diag,
    slips,
    tamper,
    work_checks,
)
from tests.grading.attacks.spec import GroupAtMost, PairReview, Resources, Submission

CATALOGUE: list[Submission] = [
    *answer_paths.SUBMISSIONS,
    *work_checks.SUBMISSIONS,
    *inputs.SUBMISSIONS,
    *tamper.SUBMISSIONS,
    *quick_checks.SUBMISSIONS,
    *rubric_diag.SUBMISSIONS,
    *notebook_tricks.SUBMISSIONS,
    *slips.SUBMISSIONS,
    *controls.SUBMISSIONS,
]

BY_NAME = {s.name: s for s in CATALOGUE}
if len(BY_NAME) != len(CATALOGUE):
    raise ValueError("two catalogue entries share a name")

# The CI subset: one attack per mechanism, with the honest control and slip they are measured
# against, in two lessons (one ``mhalib grade`` run each): the default run of test_attacks.py.
CI_NAMES = (
    "answer-viz06-sdpa-gqa",         # 1. an answer-key equivalent outside the stubbed packages
    "answer-checks-online-variant",  # 1. the checkers' own mistake model with default knobs
    "work-online-resize",            # 2. hidden work: N x N grown with resize_ (physical check)
    "seed-frame-precompute",         # 3. predictable inputs: the seed read before the call
    "tamper-record-rewrite",         # 4. a record rewritten after the test
    "new-physical-seal-planted",     # 4. a forged physical seal moved into the sealed folder
    "qc-seed-variant-copy",          # 5. a copied seed: variant (with its original)
    "rubric-leaves-torch-online",    # 6. leaves_torch priced above the method slip
    "diag-meta-device",              # 6. the meta-device diagnosis
    "new-cell-claims-points-07",     # new: notebook JSON that claims points
    "slip-online-full-scores",       # the honest slip the lesson-07 prices are compared with
    "control-loops-06",              # honest controls, one per lesson
    "control-sdpa-blocks-07",
)

ATTACKS = [s for s in CATALOGUE if s.kind == "attack"]
CONTROLS = [s for s in CATALOGUE if s.kind == "control"]
SLIPS = [s for s in CATALOGUE if s.kind == "slip"]


def assignments(submissions=CATALOGUE) -> list[str]:
    return sorted({s.assignment for s in submissions})


def with_dependencies(selected: list[Submission]) -> list[Submission]:
    """``selected`` plus what their rules read: the other members of a group, a copied
    notebook's original and its pair, the control a resource rule compares with."""
    names = {s.name for s in selected}
    changed = True
    while changed:
        changed = False
        for submission in [BY_NAME[n] for n in sorted(names)]:
            needed = set()
            if submission.copy_of:
                needed.add(submission.copy_of)
            for rule in submission.rules:
                if isinstance(rule, PairReview):
                    needed.add(rule.other)
                elif isinstance(rule, Resources):
                    needed.add(rule.control)
                elif isinstance(rule, GroupAtMost):
                    needed |= {s.name for s in CATALOGUE if s.group == rule.group}
            if needed - names:
                names |= needed
                changed = True
    return [s for s in CATALOGUE if s.name in names]


CI: list[Submission] = with_dependencies([BY_NAME[name] for name in CI_NAMES])
