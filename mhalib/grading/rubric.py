"""The rubric: how many of an exercise's points a diagnosed mistake, or a wrong answer the
checker cannot name, is worth.

The course ships a default (:mod:`mhalib.grading.default_rubric`); an instructor's TOML file
(``mhalib grade --rubric FILE``, format in grading/README.md) changes it where it says::

    unnamed_cap = 0            # every exercise: cap on credit for a wrong answer with no name
    hint_cost = "1/20"         # every exercise: share of its points each hint taken costs

    [attention]
    unnamed_cap = 0.5          # this exercise only
    hint_cost = 0              # this exercise only
    [attention.mistakes]
    no_scale = "1/2"           # share of the exercise's points: a number 0..1 or "a/b"
    softmax_over_queries = 0

Every exercise and mistake a file names is checked against the course's checkers
(:func:`mhalib.checks.registry.get_exercise`); an unknown one is an error that names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

DEFAULT_ORIGIN = "the course rubric"


class RubricError(ValueError):
    """A rubric file or table that cannot be used; the message names the entry."""


@dataclass(frozen=True)
class ExerciseRubric:
    """Shares of one exercise's points: per named mistake, the cap for unnamed answers and the
    cost of each hint taken (None: the rubric-wide value)."""

    mistakes: Mapping[str, float] = field(default_factory=dict)
    unnamed_cap: float | None = None
    hint_cost: float | None = None


@dataclass(frozen=True)
class Rubric:
    """Shares (0..1 of an exercise's points) the grader gives for wrong answers.

    ``origin`` names the rubric in feedback ("as the course rubric sets"). ``hint_cost`` is the
    share of an exercise's points each hint taken in an assessed release costs (None: 0, hints
    are free; see :mod:`mhalib.hints`).
    """

    exercises: Mapping[str, ExerciseRubric] = field(default_factory=dict)
    unnamed_cap: float | None = None  # every exercise that sets none (None: 0)
    origin: str = DEFAULT_ORIGIN
    hint_cost: float | None = None  # every exercise that sets none (None: 0)

    def mistake_share(self, exercise: str, mistake: str) -> float:
        """Share for a diagnosed ``mistake`` (0 when the rubric does not list it)."""
        entry = self.exercises.get(exercise)
        return float(entry.mistakes.get(mistake, 0.0)) if entry else 0.0

    def cap_for_unnamed(self, exercise: str) -> float:
        """Most an unnamed wrong answer of ``exercise`` can earn (share of general cases)."""
        entry = self.exercises.get(exercise)
        if entry is not None and entry.unnamed_cap is not None:
            return entry.unnamed_cap
        return self.unnamed_cap or 0.0

    def cost_per_hint(self, exercise: str) -> float:
        """Share of ``exercise``'s points that each hint taken costs (0: hints are free)."""
        entry = self.exercises.get(exercise)
        if entry is not None and entry.hint_cost is not None:
            return entry.hint_cost
        return self.hint_cost or 0.0

    def overlaid(self, other: Rubric) -> Rubric:
        """This rubric with every entry ``other`` sets replaced by ``other``'s."""
        exercises = dict(self.exercises)
        for name, entry in other.exercises.items():
            base = exercises.get(name, ExerciseRubric())
            exercises[name] = ExerciseRubric(
                {**base.mistakes, **entry.mistakes},
                entry.unnamed_cap if entry.unnamed_cap is not None else base.unnamed_cap,
                entry.hint_cost if entry.hint_cost is not None else base.hint_cost)
        cap = other.unnamed_cap if other.unnamed_cap is not None else self.unnamed_cap
        cost = other.hint_cost if other.hint_cost is not None else self.hint_cost
        return Rubric(exercises, cap, other.origin, cost)


def parse_share(value, where: str) -> float:
    """A share of points: a number in [0, 1] or a string "a/b" (e.g. "1/3")."""
    if isinstance(value, bool):
        raise RubricError(f"{where} = {value!r} must be a share between 0 and 1 (e.g. 0.5 or "
                          f'"1/3"), not a boolean')
    try:
        share = float(Fraction(value)) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, ZeroDivisionError):
        raise RubricError(f'{where} = {value!r} must be a share between 0 and 1 (e.g. 0.5 or '
                          f'"1/3")') from None
    if not 0.0 <= share <= 1.0:
        raise RubricError(f"{where} = {value!r} must be a share between 0 and 1 (e.g. 0.5 or "
                          f'"1/3")')
    return share


def _mistake_names(exercise: str, where: str) -> set[str]:
    from mhalib.checks.registry import get_exercise

    try:
        checker = get_exercise(exercise)
    except ValueError as error:
        raise RubricError(f"{where}: {exercise!r} is not an exercise of the course ({error})"
                          ) from None
    return {mistake.name for mistake in checker.mistakes()}


def _exercise_entry(exercise: str, table, where: str, check: bool) -> ExerciseRubric:
    if not isinstance(table, Mapping):
        raise RubricError(f"{where}: [{exercise}] must be a table with 'mistakes', "
                          f"'unnamed_cap' and/or 'hint_cost', not {type(table).__name__}")
    unknown = set(table) - {"mistakes", "unnamed_cap", "hint_cost"}
    if unknown:
        raise RubricError(f"{where}: [{exercise}] has unknown key(s) {sorted(unknown)}; "
                          "allowed: 'mistakes', 'unnamed_cap', 'hint_cost'")
    mistakes = table.get("mistakes", {})
    if not isinstance(mistakes, Mapping):
        raise RubricError(f"{where}: [{exercise}.mistakes] must be a table of "
                          "mistake = share")
    known = _mistake_names(exercise, where) if check else set(mistakes)
    for name in mistakes:
        if name not in known:
            raise RubricError(f"{where}: exercise {exercise!r} has no mistake {name!r}; its "
                              f"mistakes: {', '.join(sorted(known)) or '(none)'}")
    shares = {name: parse_share(value, f"{where}: {exercise}.mistakes.{name}")
              for name, value in mistakes.items()}
    cap, cost = table.get("unnamed_cap"), table.get("hint_cost")
    return ExerciseRubric(shares, None if cap is None else
                          parse_share(cap, f"{where}: {exercise}.unnamed_cap"),
                          None if cost is None else
                          parse_share(cost, f"{where}: {exercise}.hint_cost"))


def rubric_from_table(table: Mapping, origin: str, where: str, check: bool = True) -> Rubric:
    """A :class:`Rubric` from parsed TOML (or the default's dict); ``where`` names the source
    in errors; ``check`` validates exercise and mistake names against the checkers."""
    if not isinstance(table, Mapping):
        raise RubricError(f"{where}: a rubric is a table, not {type(table).__name__}")
    cap, cost = table.get("unnamed_cap"), table.get("hint_cost")
    cap = None if cap is None else parse_share(cap, f"{where}: unnamed_cap")
    cost = None if cost is None else parse_share(cost, f"{where}: hint_cost")
    exercises = {name: _exercise_entry(name, entry, where, check)
                 for name, entry in table.items() if name not in ("unnamed_cap", "hint_cost")}
    return Rubric(exercises, cap, origin, cost)


def _read_toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise RubricError(f"rubric={path}: reading TOML needs Python 3.11 or the tomli "
                              "package") from None
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise RubricError(f"rubric={path}: cannot be read ({error.strerror or error})") from None
    except tomllib.TOMLDecodeError as error:
        raise RubricError(f"rubric={path}: not valid TOML ({error})") from None


def default_rubric() -> Rubric:
    """The course's default rubric (not validated here: tests check it against the checkers)."""
    from mhalib.grading.default_rubric import DEFAULT_RUBRIC

    return rubric_from_table(DEFAULT_RUBRIC, DEFAULT_ORIGIN, "the default rubric", check=False)


def load_rubric(path: Path | str | None = None) -> Rubric:
    """The default rubric, changed by the instructor's TOML file at ``path`` if given.

    The file's entries replace the default's one by one (a mistake the file does not name keeps
    the default's share); a top-level ``unnamed_cap`` or ``hint_cost`` applies to every exercise
    that sets none.
    """
    base = default_rubric()
    if path is None:
        return base
    path = Path(path)
    instructor = rubric_from_table(_read_toml(path), DEFAULT_ORIGIN, f"rubric {path}")
    return base.overlaid(instructor)
