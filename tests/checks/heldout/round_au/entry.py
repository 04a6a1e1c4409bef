"""One catalogue entry: a learner's answer to one exercise, wrong (one slip) or right (unusual)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class Entry:
    exercise: str  # the contract's exercise function name, e.g. "attention"
    kind: str  # "wrong" or "right"
    label: str  # unique per exercise
    mistake: Optional[str]  # one sentence in a teacher's words; None for right answers
    func: Callable

    def __post_init__(self):
        if self.kind not in ("wrong", "right"):
            raise ValueError(f"kind={self.kind!r} must be 'wrong' or 'right'")
        if (self.kind == "wrong") != (self.mistake is not None):
            raise ValueError(f"{self.exercise}/{self.label}: wrong entries need a mistake, "
                             "right entries must have mistake=None")
