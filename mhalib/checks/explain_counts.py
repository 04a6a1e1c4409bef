"""A wrong count read as the right one with one term changed (issue 22).

When no mistake model and no single-factor change (:mod:`mhalib.checks.search_spaces`) explain
a count, the failing cases are read together: is the learner's count the right one

- **times a ratio of the case's sizes** (``seq_len / d_model``: an N where a d belongs, as in
  N d^2 for N^2 d), or
- **plus or minus one term** ``c * size * size ...`` (``+ 2 seq_len^2``: elementwise work the
  contract leaves out; ``- num_layers * rope_head_dim * bytes``: a part of the cache left out)?

The same ratio or term must fit every failing case, and at least two failing cases with
different sizes must pin it down; otherwise nothing is said.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from mhalib.checks.exercise import expected_of

RATIO_EXPONENTS, RATIO_FACTORS = (-2, -1, 1, 2), 3  # N / d, d^2 / N^2 ...
TERM_EXPONENTS, TERM_FACTORS = (1, 2), 6  # 2 N^2, num_layers * rope_head_dim * bytes ...
MAX_NAMES = 8
UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "kB": 10**3, "MB": 10**6, "GB": 10**9}
CONSTANTS = tuple(Fraction(n, d) for n in (1, 2, 3, 4, 6, 8) for d in (1, 2, 4)
                  if Fraction(n, d).denominator == d or d == 1)


def _monomials(names: list[str], exponents, most: int):
    """``{name: exponent}`` with 1..``most`` names, smallest total degree first."""
    found = []
    for count in range(1, min(most, len(names)) + 1):
        for chosen in itertools.combinations(names, count):
            for powers in itertools.product(exponents, repeat=count):
                found.append(dict(zip(chosen, powers)))
    found.sort(key=lambda m: (sum(abs(p) for p in m.values()), len(m)))
    return found


def _value(monomial: dict[str, int], sizes: dict[str, int]) -> float:
    return math.prod(float(sizes[name]) ** power for name, power in monomial.items())


def _say(monomial: dict[str, int]) -> str:
    up = [n if p == 1 else f"{n}^{p}" for n, p in monomial.items() if p > 0]
    down = [n if p == -1 else f"{n}^{-p}" for n, p in monomial.items() if p < 0]
    top = " * ".join(up) or "1"
    return f"{top} / {' / '.join(down)}" if down else top


_CONSTANT_FLOATS = tuple((float(constant), constant) for constant in CONSTANTS)
_SMALLEST, _LARGEST = min(CONSTANTS), max(CONSTANTS)


def _nice(value: float) -> Fraction | None:
    size = abs(value)
    if not (0.99 * _SMALLEST <= size <= 1.01 * _LARGEST):  # most tries: no constant is near
        return None
    for number, constant in _CONSTANT_FLOATS:
        if math.isclose(size, number, rel_tol=1e-9):
            return constant if value > 0 else -constant
    return None


def _numbers(output, expected) -> list[tuple[str | None, float, float]]:
    """``(key, got, want)`` of each differing number of a count or a dict of counts."""
    if isinstance(expected, dict) and isinstance(output, dict):
        return [(k, float(output[k]), float(v)) for k, v in expected.items()
                if k in output and _number(output[k]) and output[k] != v]
    if _number(output) and _number(expected) and output != expected:
        return [(None, float(output), float(expected))]
    return []


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


def explain_count_terms(exercise, recorded) -> tuple[str, str] | None:
    """``(flag, message)`` for the failing count cases ``recorded`` ((case, result) pairs with
    an output), or None."""
    from mhalib.checks.case_inputs import sizes

    rows = []  # (key, got, want, sizes)
    for case, result in recorded:
        named = {k: v for k, v in sizes(exercise, case).items() if isinstance(v, int) and v >= 1}
        for key, got, want in _numbers(result.get("output"), expected_of(exercise, case)):
            rows.append((key, got, want, named))
    if not rows:
        return None
    key = rows[0][0]
    rows = [r for r in rows if r[0] == key]
    where = f"the {key!r} count" if key is not None else "your count"
    switched_off = _zero_where_a_flag_is_off(exercise, recorded, where)
    if switched_off is not None:
        return switched_off
    if all(got == 0 for _, got, _, _ in rows):
        return "count:zero", (
            f"{where} is 0 on every failing case: a branch returned 0 where only a part of the "
            "count depends on the condition. A conditional expression binds loosest: "
            "`a + b if bias else 0` means `(a + b) if bias else 0`; write "
            "`a + (b if bias else 0)`.")
    off = _off_by_one(rows, where)
    if off is not None:
        return off
    units = _in_units(rows, where)
    if units is not None:
        return units
    distinct = {tuple(sorted(r[3].items())) for r in rows}
    if len(distinct) < 2:
        return None
    constant = _constant_factor(rows, where, "flops" in exercise.name)
    if constant is not None:
        return constant
    names = sorted(set.intersection(*(set(r[3]) for r in rows)))[:MAX_NAMES]
    for monomial in _monomials(names, RATIO_EXPONENTS, RATIO_FACTORS):
        ratios = [got / want / _value(monomial, named) if want else None
                  for _, got, want, named in rows]
        if all(r is not None and math.isclose(r, 1.0, rel_tol=1e-9) for r in ratios):
            return "count:ratio", (
                f"{where} is the right one times {_say(monomial)} on every failing case: "
                f"{_ratio_meaning(monomial)}")
    for name in names:
        for ratio, meaning in _near_ratios(name, exercise.name):
            if all(want and math.isclose(got / want, ratio(named[name]), rel_tol=1e-9)
                   for _, got, want, named in rows):
                return "count:ratio", f"{where} {meaning} (on every failing case)."
    for monomial in _monomials(names, TERM_EXPONENTS, TERM_FACTORS):
        terms = [(got - want) / _value(monomial, named) for _, got, want, named in rows]
        constant = _nice(terms[0])
        if constant is not None and all(math.isclose(t, float(constant), rel_tol=1e-9)
                                        for t in terms):
            term = _say(monomial) if constant in (1, -1) else f"{abs(constant)} * {_say(monomial)}"
            if constant > 0:
                meaning = (f"has a term {term} too many: something counted that the contract "
                           "does not count, a part counted twice, or a part with a larger "
                           "coefficient or size than it has")
            else:
                meaning = (f"misses a term {term}: a part of the count left out, or counted "
                           "with a smaller coefficient or size (or subtracted)")
            return "count:term", f"{where} {meaning} (the same difference on every failing case)."
    return _factor_out_of_a_term(rows, names, where) or _term_swapped(rows, names, where)


def _flags(exercise, case) -> dict[str, bool]:
    """The case's boolean arguments by name, defaults filled in."""
    import inspect

    from mhalib.checks.answer_key import answer_key

    try:
        bound = inspect.signature(answer_key(exercise.name)).bind(*case.args, **case.kwargs)
    except (TypeError, ValueError):
        return {}
    bound.apply_defaults()
    return {name: value for name, value in bound.arguments.items() if isinstance(value, bool)}


def _zero_where_a_flag_is_off(exercise, recorded, where) -> tuple[str, str] | None:
    """The count is 0 on exactly the failing cases where one boolean argument is False (and
    not 0 where it is True): the whole sum went into the conditional's first branch (round Y:
    ``8 * n * n * d + 2 if recompute else 0``)."""
    zero = [_number(result.get("output")) and result.get("output") == 0
            for _, result in recorded]
    if not any(zero) or all(zero):
        return None
    flags = [_flags(exercise, case) for case, _ in recorded]
    for name in set.intersection(*(set(f) for f in flags)):
        if all((not f[name]) == z for f, z in zip(flags, zero)):
            return "count:zero_when_off", (
                f"{where} is 0 on every failing case with {name}=False (and wrong with "
                f"{name}=True too): the whole count went into the branch the condition "
                "selects. A conditional expression binds loosest: `a + b if flag else 0` means "
                f"`(a + b) if flag else 0`; write `a + (b if {name} else 0)`, with the part "
                f"that depends on {name} in the parentheses, counted in the same units as a.")
    return None


def _factor_out_of_a_term(rows, names, where) -> tuple[str, str] | None:
    """One term counted without one of its factors, or with one too many: the difference is
    ``c * m * (s - 1)`` on every failing case (``m`` a product of sizes, ``s`` a size), the
    term ``c * m * s`` counted as ``c * m`` or the other way round (round O: MLA's RoPE key
    counted once per sequence, not once per token)."""
    monomials = _monomials(names, (1,), TERM_FACTORS - 1)
    for size in names:
        for monomial in monomials:
            terms = []
            for _, got, want, named in rows:
                gap = _value(monomial, named) * (named[size] - 1)
                terms.append((want - got) / gap if gap else None)
            constant = _nice(terms[0]) if terms[0] is not None else None
            if constant is None or not all(t is not None and math.isclose(
                    t, float(constant), rel_tol=1e-9) for t in terms):
                continue
            term = _say(monomial) if abs(constant) == 1 else f"{abs(constant)} * {_say(monomial)}"
            if constant > 0:
                return "count:factor_out_of_a_term", (
                    f"{where} counts a part {term} * {size} as {term} (the same difference on "
                    f"every failing case): the factor {size} is left out of that one term, a "
                    f"part counted once where it belongs once per {size}.")
            return "count:factor_out_of_a_term", (
                f"{where} counts a part {term} as {term} * {size} (the same difference on every "
                f"failing case): a factor {size} too many in that one term, a part counted once "
                f"per {size} where it belongs once.")
    return None


def _in_units(rows, where) -> tuple[str, str] | None:
    """The count the right one divided by a unit (2**20 for MiB, 10**9 for GB...), on every
    failing case (one is enough: no size of a case makes such a factor by chance)."""
    for unit, size in UNITS.items():
        if all(want and got in (want / size, want // size, round(want / size))
               for _, got, want, _ in rows):
            return "count:units", (
                f"{where} is the right one in {unit} (divided by {size:,}) on every failing "
                "case: the contract's count is in plain units (bytes, FLOPs), so leave it "
                "undivided.")
    return None


def _constant_factor(rows, where, flops: bool = False) -> tuple[str, str] | None:
    """The count a power of 2 (1/4, 1/2, 2, 4) times the right one on every failing case: a
    constant factor missing or one too many, which a term of the same size would only restate
    ("misses a term 3 N d^2" where the 3 N d^2 is half of 6 N d^2)."""
    ratios = {got / want if want else None for _, got, want, _ in rows}
    if len(ratios) != 1:
        return None
    ratio = next(iter(ratios))
    for factor in (Fraction(1, 4), Fraction(1, 2), Fraction(2), Fraction(4)):
        if ratio is not None and math.isclose(ratio, float(factor), rel_tol=1e-12):
            break
    else:
        return None
    if factor < 1:
        halved = ("a multiply-add counted as 1 FLOP instead of 2 halves a FLOP count; or a 2 "
                  "left out of a term" if flops and factor == Fraction(1, 2) else
                  "a coefficient left out, or several equal parts counted as one")
        return "count:constant_factor", (
            f"{where} is exactly {factor} of the right one on every failing case: a constant "
            f"factor {1 / factor} is missing ({halved}).")
    return "count:constant_factor", (
        f"{where} is exactly {factor} times the right one on every failing case: a constant "
        "factor too many (a constant squared along with a size, as (2 * n) ** 2 where "
        "2 * n ** 2 is meant, a unit multiplied in, such as 2 or 4 bytes per value, or the "
        "whole part counted twice).")


def explain_off_by_one(exercise, recorded) -> tuple[str, str] | None:
    """For any exercise whose answer is a number: ``(flag, message)`` when it is exactly one
    more (or one less) than the right one on every failing case, else None."""
    rows = []
    for case, result in recorded:
        rows += [(key, got, want, {}) for key, got, want in _numbers(
            result.get("output"), expected_of(exercise, case))]
    if not rows or len({r[0] for r in rows}) != 1:
        return None
    key = rows[0][0]
    return _off_by_one(rows, f"the {key!r} value" if key is not None else "your answer")


def _off_by_one(rows, where) -> tuple[str, str] | None:
    steps = {got - want for _, got, want, _ in rows}
    if steps not in ({1.0}, {-1.0}):
        return None
    more = steps == {1.0}
    return "count:off_by_one", (
        f"{where} is exactly one {'more' if more else 'less'} than the right one on every "
        f"failing case: a loop or a search that stops one step {'late' if more else 'early'}, "
        "a < where <= is meant (or the other way round), or a + 1 / - 1 too many.")


def _term_swapped(rows, names, where) -> tuple[str, str] | None:
    """One term counted with other sizes of the same degree (``2 N d^2`` for ``2 N^2 d``): the
    difference is ``c * (m1 - m2)`` on every failing case, ``c`` a plain constant."""
    monomials = _monomials(names, TERM_EXPONENTS, 3)
    values = [[_value(m, named) for _, _, _, named in rows] for m in monomials]  # once each
    degrees = [sum(m.values()) for m in monomials]
    first_gap = rows[0][1] - rows[0][2]
    low, high = 0.99 * float(_SMALLEST), 1.01 * float(_LARGEST)
    for (i, counted), (j, meant) in itertools.permutations(enumerate(monomials), 2):
        if degrees[i] != degrees[j] or values[i][0] == values[j][0] or not (
                low <= abs(first_gap / (values[i][0] - values[j][0])) <= high):
            continue  # the first case already rules this pair out
        terms = []
        for row, (_, got, want, _) in enumerate(rows):
            gap = values[i][row] - values[j][row]
            terms.append((got - want) / gap if gap else None)
        constant = _nice(terms[0]) if terms[0] is not None else None
        if constant is None or constant <= 0 or not all(
                t is not None and math.isclose(t, float(constant), rel_tol=1e-9) for t in terms):
            continue
        factor = "" if constant == 1 else f"{constant} * "
        return "count:term_swapped", (
            f"{where} counts a term {factor}{_say(counted)} where {factor}{_say(meant)} belongs "
            "(the same difference on every failing case): one product's sizes are mixed up "
            "(which axis is N and which is d).")
    return None


def _near_ratios(name: str, exercise_name: str = ""):
    """Ratios of a count with one size off by one, or (for a number of tokens, in a count of
    token pairs: FLOPs) with the causal triangle of a square."""
    triangles = (_TOKENS in name or name.lower() in ("n", "n_q", "n_k")) and \
        "flops" in exercise_name
    return [r for i, r in enumerate(_ratios(name)) if triangles or i not in (3, 4)]


_TOKENS = "seq"  # seq_len, max_seq_len: the sizes that count tokens (a causal triangle's side)


def _ratios(name: str):
    return [
        (lambda s: (s + 1) / s, f"uses {name} + 1 where one factor {name} belongs (an "
                                "off-by-one: one more token, row or column than the contract "
                                f"counts; where {name} is a factor more than once, only one "
                                "of them)"),
        (lambda s: (s - 1) / s, f"uses {name} - 1 where one factor {name} belongs (an "
                                "off-by-one: one token, row or column too few; where "
                                f"{name} is a factor more than once, only one of them)"),
        (lambda s: (s + 1) ** 2 / s ** 2, f"uses ({name} + 1)^2 where {name}^2 belongs (an "
                                          "extra row AND column)"),
        (lambda s: (s + 1) / (2 * s), f"counts the causal triangle, {name} ({name} + 1) / 2 "
                                      f"pairs, where the contract counts all {name}^2 (dense, "
                                      "no causal saving)"),
        (lambda s: (s - 1) / (2 * s), f"counts {name} ({name} - 1) / 2 pairs (a strict "
                                      f"triangle) where the contract counts all {name}^2"),
    ]


def _ratio_meaning(monomial: dict[str, int]) -> str:
    up = [n for n, p in monomial.items() if p > 0]
    down = [n for n, p in monomial.items() if p < 0]
    if len(up) == 1 and len(down) == 1 and abs(monomial[up[0]]) == abs(monomial[down[0]]) == 1:
        return (f"a {up[0]} stands where a {down[0]} belongs (a term with the sizes in the wrong "
                "places, like N d^2 for N^2 d).")
    if not down:
        return f"a factor {_say(monomial)} too many."
    if not up:
        return f"a factor {_say({n: -p for n, p in monomial.items()})} missing."
    return "the sizes in one term are in the wrong places."
