"""What a learner sees of a quick check: prompt, blank or options, and the numbers of their variant.

Nothing here holds an answer. The keys (right answer, explanations, known slips) are instructor
data (:mod:`mhalib.quiz.keys`): in a practice release they travel with the notebook, in an
assessed release only the grader reads them.

Two kinds:

- :class:`FillIn`: a blank filled with a Python expression over the names it lists, judged by
  its value in several bindings of those names. With a ``variant`` the learner's own numbers
  (a model, a context length, a batch, a dtype...) are drawn from their seed, shown in the
  prompt and bound to the names, so ``2 * layers * tokens`` and a plain number both work.
- :class:`MultipleChoice`: one of several options, shown in an order shuffled per learner.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def question_rng(question_id: str, salt: str = "bindings") -> np.random.Generator:
    """A generator fixed by the question id (the same for the learner's form and the grader)."""
    digest = hashlib.sha256(f"mhalib-quiz:{salt}:{question_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _no_scenarios(rng: np.random.Generator) -> list[dict]:
    return [{}]


@dataclass(frozen=True)
class FillIn:
    """A blank whose answer is an expression over ``names``.

    ``scenarios(rng)`` gives the bindings the answer is judged in (random shapes and values;
    ``rng`` is fixed by the question id). ``variant(rng)``, when set, draws the learner's own
    numbers from their seed: they fill the ``{fields}`` of ``prompt`` and are bound in every
    scenario. ``rtol`` is the relative tolerance on the value (a blank asking for GiB rounded
    by hand needs more than an exact formula). ``transfer`` marks a question that applies the
    idea to a case the lesson's text does not work out.
    """

    id: str
    prompt: str
    template: str  # the line with the blank, e.g. "scores = q @ k.T / ____"
    names: dict[str, str]  # the names the expression may use -> what each one is
    scenarios: Callable[[np.random.Generator], list[dict]] = _no_scenarios
    variant: Callable[[np.random.Generator], dict] | None = None
    rtol: float = 1e-9
    transfer: bool = False

    def numbers(self, rng: np.random.Generator | None) -> dict:
        """The learner's numbers (empty without a variant)."""
        if self.variant is None:
            return {}
        if rng is None:
            raise ValueError(f"{self.id}: a variant question needs the learner's generator")
        return dict(self.variant(rng))

    def bindings(self, numbers: dict) -> list[dict]:
        """Every binding of the names the answer is judged in."""
        return [{**scenario, **numbers} for scenario in self.scenarios(question_rng(self.id))]

    def shown_prompt(self, numbers: dict) -> str:
        return self.prompt.format(**numbers) if numbers else self.prompt

    def names_line(self) -> str:
        """"You may use: ..." as the form shows it."""
        if not self.names:
            return "Type a number or an arithmetic expression (math and np are available)."
        listed = "; ".join(f"{name} ({what})" if what else name
                           for name, what in self.names.items())
        return f"You may use: {listed}; math and np are available."


@dataclass(frozen=True)
class MultipleChoice:
    """Pick one of ``options`` (stored in a canonical order, shown shuffled per learner)."""

    id: str
    prompt: str
    options: tuple[str, ...]
    transfer: bool = False
    shuffle: bool = True

    def __post_init__(self):
        if not 2 <= len(self.options) <= 8:
            raise ValueError(f"{self.id}: options must hold 2 to 8 options, "
                             f"got {len(self.options)}")

    def shown_prompt(self, numbers: dict) -> str:
        return self.prompt

    def order(self, rng: np.random.Generator | None) -> list[int]:
        """Canonical indexes in the order this learner sees them."""
        indexes = list(range(len(self.options)))
        if self.shuffle and rng is not None:
            rng.shuffle(indexes)
        return indexes

    def index_of(self, answer) -> int | None:
        """The canonical index of an answer given as an index or as the option's text."""
        if isinstance(answer, bool):
            return None
        if isinstance(answer, (int, np.integer)):
            return int(answer) if 0 <= answer < len(self.options) else None
        if isinstance(answer, str):
            text = answer.strip().lower().rstrip(".")
            for index, option in enumerate(self.options):
                if text == option.lower().rstrip("."):
                    return index
        return None
