"""Slips that read an input the wrong way (issue 22): the answer key on edited inputs.

Some slips are not an edit of the computation but of how an argument is read; the output is
then the answer key's on that argument changed, which this module tries, one reading at a time:

- ``-inf`` entries read as 0 (replaced to avoid NaN, which gives them weight);
- a boolean mask read the other way round (True taken as masked);
- an array with its last two axes swapped (a transpose too many: keys on rows);
- a 1-D int array of one entry per item (the sequences' lengths) with one entry used for all
  (its largest or its first), or read in reverse;
- an axis holding blocks (heads of ``d_head`` columns, groups, pages) split the other way: head
  ``h`` taking every ``H``-th entry instead of a contiguous block, in one argument or in every
  argument with such an axis at once.

The reading that reproduces every failing output (at most three cases) is named; two are both
said, more are not named. Only when the exercise's expected output is its answer key.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mhalib.checks.exercise import expected_of

MAX_READINGS = 200


@dataclass(frozen=True)
class Reading:
    """An argument (or several) read another way: ``edit(values, named)`` changes the named
    values (a dict ``name -> value``) in place, ``named`` being the evaluated case's sizes;
    ``sentence`` says what the code did."""

    key: str
    sentence: str
    edit: Callable[[dict, dict], None]


def input_edit_diagnosis(exercise, recorded, budget_s: float = 30.0, passing=()
                         ) -> tuple[str, str] | None:
    """``(flag, message)`` for the reading of the inputs that reproduces every recorded failing
    ``(case, result)`` and stays right on the ``passing`` cases, or None; none is tried after
    ``budget_s`` seconds."""
    started = time.perf_counter()
    from mhalib.checks.case_inputs import parameter_names, sizes
    from mhalib.checks.mutants import reproduces_all, stays_right_on_all, to_explain

    explained = to_explain(exercise, recorded)
    caps_only = not explained  # only inputs of magnitude 80 or more fail: a cap may say why
    recorded = explained or to_explain(exercise, recorded, extreme=True)
    names = parameter_names(exercise)
    if not recorded or not names or budget_s <= 0:
        return None
    if any(_shapes(result.get("output")) != _shapes(expected_of(exercise, case))
           for case, result in recorded):
        return None  # a wrong shape: the output's form says more than any reading
    first = recorded[0][0]
    readings = _readings(_values(exercise, first, names), sizes(exercise, first))
    if caps_only:
        readings = [r for r in readings if _CAP.search(r.key)]
    fits: list[Reading] = []
    for reading in readings[:MAX_READINGS]:
        if time.perf_counter() - started > budget_s:
            break
        compute = _computer(exercise, names, reading)
        if not reproduces_all(exercise, compute, recorded) or \
                not stays_right_on_all(exercise, compute, passing):
            continue
        fits.append(reading)
        fits = _one_per_family(fits)
        if len(fits) > 2:
            return None
    if not fits:
        return None
    lead = ("your output is what the right computation gives with an input read another way: "
            if len(fits) == 1 else "two readings of the inputs give exactly your output: ")
    return f"input:{fits[0].key}", lead + " Or: ".join(r.sentence for r in fits) + "."


_CAP = re.compile(r":(clipped|capped)_(\d+)(?:-(\d+))?$")


def _one_per_family(fits: list[Reading]) -> list[Reading]:
    """Cap readings of one kind and argument that differ only in the constant (``x`` clipped
    at 500, 700 or 1000: the output cannot tell them apart) as one, which says the range."""
    merged: list[Reading] = []
    families: dict[tuple[str, str], int] = {}  # (argument, kind) -> its place in merged
    for reading in fits:
        match = _CAP.search(reading.key)
        family = (reading.key[:match.start()], match.group(1)) if match else None
        if family is None or family not in families:
            if family is not None:
                families[family] = len(merged)
            merged.append(reading)
            continue
        place = families[family]
        low = int(_CAP.search(merged[place].key).group(2))
        high = int(match.group(3) or match.group(2))
        name, kind = family
        merged[place] = Reading(f"{name}:{kind}_{low}-{high}", _cap_sentence(name, kind, low, high),
                                reading.edit)
    return merged


def _shapes(output) -> tuple:
    parts = output if isinstance(output, tuple) else (output,)
    return tuple(tuple(getattr(p, "shape", ())) for p in parts)


def _values(exercise, case, names) -> dict:
    """The case's arguments by name, as the answer key takes them (float64 tensors in torch)."""
    from mhalib.checks.torch_exercise import TorchExercise, exact_inputs

    if isinstance(exercise, TorchExercise):
        args, kwargs = exact_inputs(case)
    else:
        args, kwargs = case.args, case.kwargs
    values = dict(zip(names, args))
    values.update(kwargs)
    return values


def _computer(exercise, names, reading: Reading):
    from mhalib.checks.answer_key import answer_key
    from mhalib.checks.case_inputs import sizes
    from mhalib.checks.torch_exercise import TorchExercise, as_numpy

    key = answer_key(exercise.name)

    def compute(case):
        values = {k: _copy(v) for k, v in _values(exercise, case, names).items()}
        reading.edit(values, sizes(exercise, case))
        output = key(**values)
        return as_numpy(output) if isinstance(exercise, TorchExercise) else output
    return compute


def _copy(value):
    return value.clone() if hasattr(value, "clone") else (
        value.copy() if isinstance(value, np.ndarray) else value)


def _is_array(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and len(value.shape) > 0


def _is_bool(value) -> bool:
    return "bool" in str(value.dtype)


def _readings(values: dict, named: dict[str, int]) -> list[Reading]:
    found: list[Reading] = []
    blocked: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for name, value in values.items():
        if not _is_array(value):
            continue
        if _is_bool(value):
            found.append(Reading(f"{name}:inverted", f"`{name}` read the other way round (True "
                                 "taken as masked): True means the key may be attended",
                                 lambda v, _, n=name: v.__setitem__(n, ~v[n])))
        elif "float" in str(value.dtype):
            found += _capped_readings(name, value)
        if not _is_bool(value) and _has_neg_inf(value):
            found.append(Reading(f"{name}:neg_inf_as_zero", f"`{name}`'s -inf entries used as "
                                 "0: -inf must stay -inf (exp(-inf) = 0 is what gives those "
                                 "entries weight 0), and a 0 in its place gives them weight",
                                 lambda v, _, n=name: v.__setitem__(n, _neg_inf_to_zero(v[n]))))
        if len(value.shape) >= 2 and value.shape[-1] > 1 and value.shape[-2] > 1:
            found.append(Reading(f"{name}:swapped", f"`{name}` with its last two axes swapped "
                                 "(a transpose too many, or its rows and columns mixed up)",
                                 lambda v, _, n=name: v.__setitem__(n, _swap_last(v[n]))))
        if _is_bool(value):
            continue
        if _is_int(value) and len(value.shape) == 1 and value.shape[0] > 1:
            found += _per_item_readings(name)
        for axis, size in enumerate(value.shape):
            for rule in _block_rules(size, named):
                blocked.setdefault(rule, []).append((name, axis))
                found.append(_strided([(name, axis)], rule, size, named))
    for rule, places in blocked.items():
        if 1 < len(places) <= 8:  # every two or three such axes, read the same way
            for count in range(2, min(3, len(places)) + 1):
                found += [_strided(list(group), rule, values[group[0][0]].shape[group[0][1]],
                                   named) for group in itertools.combinations(places, count)]
    return found


def _block_rules(size, named) -> list[tuple[str, str]]:
    """How an axis of ``size`` may hold blocks, as rules the other cases can follow: blocks of
    a named size (``("of", "d_head")``) or as many blocks as a named size (``("count",
    "num_heads")``)."""
    rules = []
    for label, value in named.items():
        if 1 < value < size and size % value == 0:
            rules += [("of", label), ("count", label)]
    return rules


def _block(rule, size, named) -> int | None:
    kind, label = rule
    value = named.get(label)
    if not value or size % value or value in (1, size):
        return None
    return value if kind == "of" else size // value


def _strided(places, rule, size, named) -> Reading:
    """Blocks along the axes in ``places`` (by ``rule``) taken as every ``count``-th entry
    instead of contiguous entries, in every such axis at once."""
    from mhalib.checks.explain_sizes import names_of

    block = _block(rule, size, named)
    count = size // block

    def say(n):
        found = names_of(n, named) if n > 2 else []  # (a 2 equals some size by chance)
        return f"{n} ({found[0]})" if found else str(n)

    where = " and ".join(f"`{name}`'s axis {axis}" for name, axis in places)
    sentence = (f"{where} (of {size} = {say(count)} blocks of {say(block)}) split the other "
                f"way: block i taking every {_nth(count)} entry (i, i + {count}, ...) instead of "
                f"the contiguous entries i*{block} ... i*{block} + {block - 1} (a reshape to "
                f"({block}, {count}) where ({count}, {block}) was meant, or a strided slice)")

    def edit(values, case_named):
        for name, axis in places:
            length = values[name].shape[axis]
            block = _block(rule, length, case_named)
            if block is None:
                continue  # no such blocks in this case: the reading changes nothing here
            values[name] = _unstride(values[name], axis, length // block, block)
    key = "+".join(f"{name}@{axis}" for name, axis in places)
    return Reading(f"{key}:strided_{rule[0]}_{rule[1]}", sentence, edit)


def _nth(n: int) -> str:
    return {2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def _unstride(value, axis, count, block):
    """``value`` with entry ``i*block + j`` of ``axis`` replaced by entry ``j*count + i``: what
    contiguous blocks hold when the code reads strided ones."""
    shape = tuple(value.shape)
    split = shape[:axis] + (block, count) + shape[axis + 1:]
    if hasattr(value, "permute"):
        moved = value.reshape(split).transpose(axis, axis + 1)
        return moved.reshape(shape)
    return np.swapaxes(value.reshape(split), axis, axis + 1).reshape(shape)


def _is_int(value) -> bool:
    return "int" in str(value.dtype)


def _per_item_readings(name) -> list[Reading]:
    """Readings of a 1-D int array of one entry per item (the sequences' lengths): one entry
    used for every item, or the entries in reverse order."""
    def everywhere(pick):
        return lambda v, _: v.__setitem__(name, v[name] * 0 + pick(v[name]))
    return [
        Reading(f"{name}:largest_for_all", f"`{name}`'s largest entry used for every item (one "
                f"value for all, max({name})): item b has its own `{name}[b]`",
                everywhere(lambda v: v.max())),
        Reading(f"{name}:first_for_all", f"`{name}[0]` used for every item (the first item's "
                f"value, or a loop variable left over from it): item b has its own `{name}[b]`",
                everywhere(lambda v: v[0])),
        Reading(f"{name}:reversed", f"`{name}` read in reverse order (item b got the value of "
                f"item B - 1 - b)", lambda v, _: v.__setitem__(name, _reversed(v[name]))),
    ]


def _reversed(value):
    return value.flip(0) if hasattr(value, "flip") else value[::-1].copy()


# round constants a learner caps values at to keep exp() finite (88 and 709: where exp
# overflows in float32 and float64)
CAPS = (5, 10, 20, 30, 50, 60, 80, 88, 100, 200, 500, 700, 709, 1000, 10000)


def _capped_readings(name, value) -> list[Reading]:
    """``name`` clipped to [-c, c] (np.clip, torch.clamp) or capped at c (np.minimum) for each
    round constant c that some finite entry of ``value`` exceeds: overflow avoided by clipping
    instead of shifting, which ties every value past c."""
    finite = np.abs(np.asarray(value, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    largest = float(finite.max()) if finite.size else 0.0
    found = []
    for cap in (c for c in CAPS if c < largest):
        found += [Reading(f"{name}:clipped_{cap}", _cap_sentence(name, "clipped", cap, cap),
                          lambda v, _, n=name, c=cap: v.__setitem__(n, _clipped(v[n], -c, c))),
                  Reading(f"{name}:capped_{cap}", _cap_sentence(name, "capped", cap, cap),
                          lambda v, _, n=name, c=cap: v.__setitem__(n, _clipped(v[n], None, c)))]
    return found


def _cap_sentence(name: str, kind: str, low: int, high: int) -> str:
    """What a cap at a constant from ``low`` to ``high`` did to ``name``."""
    cap = f"{low}" if low == high else "c"
    how = (f"clipped to [-{cap}, {cap}] (np.clip or torch.clamp)" if kind == "clipped" else
           f"capped at {cap} (np.minimum(x, {cap}) or a clamp from above)")
    which = "" if low == high else (f", for a constant c from {low} to {high} (these inputs "
                                    "cannot tell which)")
    return (f"`{name}` {how}{which}: every entry past {cap} becomes {cap}, so entries that "
            "differ there get equal values; to keep exp() finite, subtract the maximum instead "
            "(softmax does not change when the same number is subtracted from a whole slice)")


def _clipped(value, low, high):
    if hasattr(value, "clamp"):
        return value.clamp(min=low, max=high)
    return np.clip(value, low, high)


def _has_neg_inf(value) -> bool:
    try:
        return bool((value == -np.inf).any()) and "float" in str(value.dtype)
    except Exception:
        return False


def _neg_inf_to_zero(value):
    if hasattr(value, "masked_fill"):
        return value.masked_fill(value == -float("inf"), 0.0)
    return np.where(value == -np.inf, 0.0, value)


def _swap_last(value):
    if hasattr(value, "transpose") and hasattr(value, "permute"):
        return value.transpose(-1, -2)
    return np.swapaxes(value, -1, -2)
