"""What one catalogue entry is: a submission (attack or honest control) and the outcome a
trustworthy grader must give it, as rules checked against what ``mhalib grade`` wrote.

A :class:`Submission` is the assessed release notebook of one lesson with some answer cells
replaced (``answers``: grade_id -> source), learner cells added (``after``: grade_id -> source
of a new code cell put right after that cell; ``"imports"`` puts it right after the lesson's
first code cell, ``"end"`` after the last cell), quick checks recorded as the form records
them (``quick``) and, for notebook-JSON tricks, a ``mutate`` function applied to the JSON
last. Answer cells it does not name hold a correct answer (the instructor's, from
``solutions/``), so every other exercise earns full credit and the entry's own exercise is what
the rules look at. The lesson's ungraded demo cells (plots, benchmarks; a learner may delete
them) are left out unless ``demos`` is set, which keeps a catalogue run to minutes.

Rules read the grader's own outputs only (the result JSON under
``<course>/mhalib-results/``, the CSV export, and the cost of the grading run measured from
outside), never anything the submission wrote:

- :class:`AtMost`: ``item`` earns at most ``points`` (the rubric price of the honest slip the
  attack amounts to, or 0); with ``or_review`` the rule also holds when the grader flags the
  notebook for review (the export's ``needs_review``), whatever the points.
- :class:`Full` / :class:`NoReview`: a control keeps every point and is not flagged.
- :class:`Exactly`: an honest slip (the forbidden method written plainly, no trick) earns the
  rubric's price for it: each attack's gain over that price is its trick's doing.
- :class:`Review`: the notebook must be flagged for review.
- :class:`DiagnosisNot`: the item's diagnosis must not say ``text`` (a wrong diagnosis).
- :class:`Resources`: grading the notebook costs the grader (outside the sandbox) no more CPU
  and memory than an honest notebook, within a margin.
- :class:`SameMaxPoints`: the notebook's items and points are the assignment's.
- :class:`GroupAtMost`: quick-check points summed over a group of submissions (a strategy that
  uses only public information, applied to several lessons) stay at chance level.
- :class:`PairReview`: two submissions (a copied notebook and its original) are both flagged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

EPS = 1e-6


@dataclass
class Outcome:
    """What the grader gave one submission (filled in by :mod:`.evaluate`)."""

    found: bool = False
    points: dict[str, float] = field(default_factory=dict)
    max_points: dict[str, float] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)  # item -> verdict flags
    issues: list[str] = field(default_factory=list)  # notebook-level flags
    diagnosis: dict[str, str] = field(default_factory=dict)
    needs_review: bool = False
    unit_seconds: float | None = None  # the grader's own time for this notebook
    sandbox_seconds: float | None = None  # of which the sandboxed run
    grader_cpu_seconds: float | None = None  # isolated runs: processes outside the sandbox
    peak_rss_mb: float | None = None  # isolated runs: largest peak RSS of one such process
    run_seconds: float | None = None  # wall time of the grading run it was in
    notes: list[str] = field(default_factory=list)  # "[attack] ..." lines it printed
    # students listed with this one in the grader's similarity report
    # (<course>/similarity/<assignment>.json: shared seed: variants, near-identical answers)
    similar_to: list[str] = field(default_factory=list)


@dataclass
class Rule:
    """One machine-checkable expectation. ``check`` returns (held, what was seen)."""

    def describe(self) -> str:
        raise NotImplementedError

    def check(self, outcome: Outcome, context: dict) -> tuple[bool, str]:
        raise NotImplementedError


def _pts(value: float | None) -> str:
    if value is None:
        return "?"
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def _got(outcome: Outcome, item: str) -> str:
    flags = [f for f in outcome.flags.get(item, [])]
    text = f"{item} {_pts(outcome.points.get(item))}/{_pts(outcome.max_points.get(item))}"
    return text + (f" [{' '.join(flags)}]" if flags else "")


def _review(outcome: Outcome) -> str:
    issues = " ".join(sorted(set(outcome.issues)))
    return ("REVIEW" if outcome.needs_review else "no review") + (f" ({issues})" if issues
                                                                 else "")


@dataclass
class AtMost(Rule):
    item: str
    points: float
    or_review: bool = True
    why: str = ""  # which honest slip (rubric entry) the price comes from

    def describe(self) -> str:
        text = f"{self.item} <= {_pts(self.points)}"
        if self.why:
            text += f" ({self.why})"
        return text + (" or review" if self.or_review else "")

    def check(self, outcome, context):
        got = outcome.points.get(self.item)
        seen = f"{_got(outcome, self.item)}; {_review(outcome)}"
        if got is None:
            return False, f"{self.item} not graded; {_review(outcome)}"
        held = got <= self.points + EPS or (self.or_review and outcome.needs_review)
        return held, seen


@dataclass
class Exactly(Rule):
    """``item`` earns exactly ``points`` (an honest slip: the rubric's price, no more, no
    less; a review flag is neither required nor refused)."""

    item: str
    points: float
    why: str = ""

    def describe(self) -> str:
        return f"{self.item} = {_pts(self.points)}" + (f" ({self.why})" if self.why else "")

    def check(self, outcome, context):
        got = outcome.points.get(self.item)
        return got is not None and abs(got - self.points) <= EPS, _got(outcome, self.item)


@dataclass
class Full(Rule):
    """Every exercise and quick check named (default: all items of the notebook) at full
    points."""

    items: tuple[str, ...] = ()

    def describe(self) -> str:
        return "full credit" + (f" on {', '.join(self.items)}" if self.items else "")

    def check(self, outcome, context):
        items = self.items or tuple(outcome.max_points)
        short = [i for i in items if outcome.points.get(i, -1) < outcome.max_points.get(i, 0)
                 - EPS or i not in outcome.points]
        if short:
            return False, "; ".join(_got(outcome, i) for i in short)
        total = sum(outcome.points.get(i, 0) for i in items)
        return True, f"{_pts(total)}/{_pts(sum(outcome.max_points.get(i, 0) for i in items))}"


@dataclass
class NoReview(Rule):
    def describe(self) -> str:
        return "no review flag"

    def check(self, outcome, context):
        return not outcome.needs_review, _review(outcome)


@dataclass
class Review(Rule):
    def describe(self) -> str:
        return "flagged for review"

    def check(self, outcome, context):
        return outcome.needs_review, _review(outcome)


@dataclass
class DiagnosisNot(Rule):
    item: str
    text: str

    def describe(self) -> str:
        return f"{self.item}'s diagnosis does not say {self.text!r}"

    def check(self, outcome, context):
        diagnosis = outcome.diagnosis.get(self.item, "")
        at = diagnosis.lower().find(self.text.lower())
        if at < 0:
            return True, diagnosis[:90]
        return False, "diagnosis: ..." + diagnosis[max(0, at - 40):at + len(self.text) + 30]


@dataclass
class Resources(Rule):
    """Grading this notebook, in a run of its own, costs the grader's processes outside the
    sandbox at most ``extra_cpu`` more CPU seconds and ``extra_mb`` more peak memory (largest
    resident set of one process) than grading the honest ``control`` of the same lesson the
    same way. CPU rather than wall time: the machine may be shared."""

    control: str
    extra_cpu: float = 10.0
    extra_mb: float = 256.0

    def describe(self) -> str:
        return (f"grader outside the sandbox: <= {self.control} + {self.extra_cpu:g} s CPU "
                f"and + {self.extra_mb:g} MB peak")

    def check(self, outcome, context):
        base = context["outcomes"].get(self.control)
        if base is None or base.grader_cpu_seconds is None or outcome.grader_cpu_seconds is None:
            return False, "not measured"
        cpu = outcome.grader_cpu_seconds - base.grader_cpu_seconds
        memory = (outcome.peak_rss_mb or 0.0) - (base.peak_rss_mb or 0.0)
        seen = (f"+{cpu:.1f} s CPU, {memory:+.0f} MB peak ({outcome.grader_cpu_seconds:.1f} s, "
                f"{outcome.peak_rss_mb:.0f} MB)")
        return cpu <= self.extra_cpu and memory <= self.extra_mb, seen


@dataclass
class GroupAtMost(Rule):
    """The quick-check points of every submission in ``group`` (same strategy, several
    lessons) add up to at most ``points`` (chance level plus two standard deviations for the
    questions concerned, see :mod:`.quick_checks`)."""

    group: str
    points: float
    questions: int = 0
    chance: float = 0.0

    def describe(self) -> str:
        return (f"group {self.group}: <= {_pts(self.points)} of {self.questions} multiple-"
                f"choice points (chance {self.chance:.2f})")

    def check(self, outcome, context):
        members = [s for s in context["submissions"] if s.group == self.group]
        total = 0.0
        for member in members:
            other = context["outcomes"].get(member.name)
            if other is None or not other.found:
                return False, f"{member.name} not graded"
            total += sum(other.points.get(q, 0.0) for q in member.scored_questions)
        return total <= self.points + EPS, f"{_pts(total)} of {self.questions}"


@dataclass
class PairReview(Rule):
    """This submission and ``other`` (its byte-identical copy) are both flagged for an
    instructor: both flagged for review, or listed together in the grader's similarity report
    (the grader's place for "these two look copied", which names the pair)."""

    other: str

    def describe(self) -> str:
        return f"this and {self.other} both flagged (review, or paired in the similarity report)"

    def check(self, outcome, context):
        other = context["outcomes"].get(self.other)
        both = outcome.needs_review and other is not None and other.needs_review
        paired = self.other in outcome.similar_to
        return both or paired, (f"{_review(outcome)} / {self.other}: "
                                + (_review(other) if other else "not graded")
                                + ("; paired in the similarity report" if paired else
                                   "; not paired in the similarity report"))


@dataclass
class SameMaxPoints(Rule):
    """The notebook's items and their maximum points are the assignment's, nothing added."""

    def describe(self) -> str:
        return "max points and items as in the release"

    def check(self, outcome, context):
        want = context["model_points"].get(context["current"].assignment, {})
        got = outcome.max_points
        extra = sorted(set(got) - set(want))
        changed = [i for i in want if abs(got.get(i, 0.0) - want[i]) > EPS]
        total = sum(got.values())
        return not extra and not changed, (f"max {_pts(total)} of {_pts(sum(want.values()))}"
                                           + (f"; extra {extra}" if extra else "")
                                           + (f"; changed {changed}" if changed else ""))


# Known limits (Submission.known_limit): why an entry's rules cannot hold with this grader. The
# first two are limits the course lead accepts; the third is a rule the design cannot meet.
DECODE_IN_PROCESS = (
    "accepted: decode_with_cache's 'projects only the new token / does not recompute the "
    "prefix' is checked in the learner's own process only (no physical check), so work hidden "
    "from the in-process watches there (another thread, disabled dispatch modes, a replaced "
    "checker, products written without a matrix product) is not seen")
FUSED_SDPA = (
    "accepted: one SDPA call over all keys is checked in-process only; CPU SDPA's fused kernel "
    "needs no N x N memory and little CPU, so the physical check cannot tell it from an online "
    "softmax")
INTEGRITY_IN_PROCESS = (
    "design: the integrity flag is the learner's process reporting on its own memory (a hint, "
    "like the in-process watches), so that process can erase the report; scores are decided "
    "outside it, so the patch changes no score (the points here are the honest ones). No "
    "witness that lives in the learner's process can meet 'erased, still flagged'")


@dataclass
class Submission:
    """One catalogue entry; ``name`` is its student id in the graded class."""

    name: str
    assignment: str
    family: str  # the mechanism family (issue 21's numbering, or "new: ...")
    mechanism: str  # one line: what the submission does
    rules: list[Rule]
    kind: str = "attack"  # "control" (honest, full credit) or "slip" (honest slip: its price)
    issue21: bool = True  # a mechanism issue 21 lists (False: found for this catalogue)
    answers: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    quick: dict | str | None = None  # qid -> answer, "right" (the keys' answers), or None
    variant: str | None = None  # the variant recorded with the quick-check answers
    mutate: Callable[[dict], None] | None = None
    copy_of: str | None = None  # byte-identical copy of that submission's notebook
    group: str | None = None  # for GroupAtMost
    scored_questions: tuple[str, ...] = ()  # the questions a GroupAtMost counts
    isolated: bool = False  # graded in a run of its own (resource rules)
    filler: bool = True  # unnamed answer cells hold the instructor's answer
    demos: bool = False  # keep the lesson's ungraded demo cells (slow: up to 80 s a lesson)
    # a documented known limit of the grader (why the rules cannot hold yet): when they do not,
    # the verdict is "limit", not THROUGH (the entry stays, so a later fix shows as "held")
    known_limit: str | None = None
    ci: bool = False  # in the CI subset (one attack per mechanism, with the controls it needs)

    def expected(self) -> str:
        return "; ".join(rule.describe() for rule in self.rules)
