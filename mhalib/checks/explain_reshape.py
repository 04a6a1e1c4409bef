"""A reshape that raised, explained (issue 22): which of its sizes is wrong, what it should be
in the case's own words (checked on every other case that raised the same error), and what the
wrong size may have been computed from; and a -1 that an empty tensor cannot infer."""

from __future__ import annotations

import math
import re

from mhalib.checks.case_inputs import parameter_names, sizes
from mhalib.checks.explain_sizes import as_many_as, products, quotients


def _reshape_sizes(last: str) -> tuple[list[int], int] | None:
    """The target shape and the tensor's size a reshape error reports, or None."""
    match = (re.search(r"shape '\[([\d, -]+)\]' is invalid for input of size (\d+)", last)
             or re.search(r"cannot reshape array of size (\d+) into shape \(([\d, -]+)\)", last))
    if not match:
        return None
    if match.re.pattern.startswith("shape"):
        target, size = match.group(1), int(match.group(2))
    else:
        size, target = int(match.group(1)), match.group(2)
    return [int(n) for n in re.findall(r"-?\d+", target)], size


def _misfits(shape: list[int], size: int, named: dict[str, int]) -> list[tuple[int, int, int]]:
    """``(position, size there, the size that would fit)`` for each position of ``shape`` whose
    size, changed alone to one of ``named``'s, makes the reshape hold ``size`` values."""
    product = math.prod(shape)
    found = []
    for i, entry in enumerate(shape):
        rest = product // entry if entry else 0
        if rest and size % rest == 0:
            fits = size // rest
            if fits != entry and any(v == fits for v in named.values()):
                found.append((i, entry, fits))
    return found


def _with_parts(named: dict[str, int], ones: bool = False) -> dict[str, int]:
    """The case's sizes with their quotients (d_model / num_heads is a size of the case too)
    and products (H * d_head, a merged width; ``ones``: sizes of 1 in them too, so that a
    case of one head still names a merged width as one)."""
    return {**quotients(named), **named, **products(named, ones)}


def _fits_everywhere(position: int, fits: int, named: dict[str, int], others) -> bool:
    """True when every other case that raised the same reshape error is mended at
    ``position`` too, by a size of one name with this one's (round U: a batch of 1 'should be
    2' fitted one case; on the next, the batch of 2 'should be 4', which no name shared)."""
    names = {name for name, value in named.items() if value == fits}
    for their, text in others:
        reported = _reshape_sizes(text)
        if reported is None or len(reported[0]) <= position:
            return False
        their = _with_parts(their, ones=True)
        there = [f for i, _, f in _misfits(*reported, their) if i == position]
        if not there or not names & {name for name, value in their.items()
                                     if value == there[0]}:
            return False
    return True


def _fit_names(position: int, fits: int, full: dict[str, int], others) -> list[str]:
    """The names of the size that mends ``position`` on this case and on every other case that
    raised the same reshape error (none when no other case did: a size of 2 alone may be any
    name's). The error's own numbers may have ruled a name out as a coincidence where it stood
    for another size (round AM: the batch of 2 beside a last chunk of 2 queries, N %
    chunk_size, which the reshape wanted)."""
    if not others:
        return []
    names = [name for name, value in full.items() if value == fits]
    for their, text in others:
        reported = _reshape_sizes(text)
        if reported is None or len(reported[0]) <= position:
            return []
        their = _with_parts(their, ones=True)
        there = [f for i, _, f in _misfits(*reported, their) if i == position]
        if not there:
            return []
        names = [name for name in names if their.get(name) == there[0]]
    return names


def empty_reshape(exercise, case, last, line, named):
    """A -1 among the sizes of a reshape of an empty tensor: any size fits, so none is
    inferred."""
    if not ("cannot reshape tensor of 0 elements" in last and "-1" in last
            or re.search(r"cannot reshape array of size 0 into shape \(.*newaxis", last)):
        return None
    return ("reshape_empty", "the tensor is empty (a size of 0, such as no tokens yet, which the "
            "contract allows), and a reshape of 0 values cannot infer the size written -1 (any "
            "size fits): write that size out, computed from the shapes you have (a product of "
            "two sizes, say), instead of -1.")


def reshape(exercise, case, last, line, named, others=()):
    reported = _reshape_sizes(last)
    if reported is None:
        return None
    shape, size = reported
    if -1 in shape:
        return ("reshape", f"a reshape to {tuple(shape)} cannot hold the tensor's {size} values: "
                "one of its other sizes is wrong (is it a head count or a head width of another "
                "tensor?).")
    product = math.prod(shape)
    whole = _output_shaped(exercise, case, shape, size)
    if whole:
        return whole
    given = {name for name in parameter_names(exercise) if name in named}
    base, named = named, _with_parts(named)
    full = {**_with_parts(sizes(exercise, case)), **named}
    candidates = _misfits(shape, size, full)
    candidates = [c for c in candidates if _fits_everywhere(c[0], c[2], full, others)] or \
        candidates
    chosen = [c for c in candidates if not any(named[g] == c[1] for g in given)] or candidates

    def right(i: int, fits: int) -> str:
        names = _fit_names(i, fits, full, others)
        return f"{fits} (as many as {' = '.join(names[:2])})" if names else \
            as_many_as(fits, named)

    if len(chosen) == 1:
        i, entry, fits = chosen[0]
        # (a wrong size that is an argument's own value may have been passed as that argument,
        # not computed: round AT's num_heads where num_kv_heads belongs equalled d_model //
        # num_heads, and "your 4 is d_model // num_heads" was said of it as certain)
        passed = [g for g in given if base[g] == entry]
        made = _made_of(entry, fits, base, passed[0] if passed else None)
        return ("reshape", f"a reshape to {tuple(shape)} ({product} values) got a tensor of "
                f"{size}: its size {as_many_as(entry, named)} at position {i} should be "
                f"{right(i, fits)} for this tensor{made}.")
    if chosen:
        said = " or ".join(f"the {as_many_as(entry, named)} at position {i} should be "
                           f"{right(i, fits)}" for i, entry, fits in chosen[:3])
        return ("reshape", f"a reshape to {tuple(shape)} ({product} values) got a tensor of "
                f"{size}: one size is wrong: {said}.")
    return ("reshape", f"a reshape to {tuple(shape)} ({product} values) got a tensor of {size} "
            "values: one of the sizes it uses is wrong (another tensor's or axis's size, or sizes "
            "combined with the wrong operator).")


def _ratio(shape: list[int], size: int) -> tuple[int, bool] | None:
    """``(k, more)``: a tensor of ``size`` values holds k times more (or fewer) than ``shape``."""
    product = math.prod(shape)
    if not product or not size or size % product and product % size:
        return None
    return (size // product, True) if size > product else (product // size, False)


def _output_shaped(exercise, case, shape: list[int], size: int):
    """A reshape to the very shape of the right output whose tensor holds a whole multiple (or
    fraction) of its values: the sizes are right and an earlier step made the tensor wrong
    (round AK: v never split into heads, so the weights of H heads met all of v's d_model
    columns and the merge got num_heads times the values)."""
    from mhalib.checks.exercise import expected_of

    try:
        expected = expected_of(exercise, case)
    except Exception:
        return None
    product, found = math.prod(shape), _ratio(shape, size)
    if tuple(shape) != tuple(getattr(expected, "shape", ())) or found is None:
        return None
    ratio, more = found
    named = {name: value for name, value in sizes(exercise, case).items() if value == ratio}
    if not more:
        cause = "an axis summed, sliced or averaged away, or one head's width where all belong"
    elif any("head" in name for name in named):
        cause = ("most likely a tensor that kept its full width where one head's belongs (one "
                 "of q, k or v never split into heads, whose axes then broadcast against the "
                 "others' heads), or another axis broadcast against one it should not meet")
    else:
        cause = ("an axis kept, or a size used, where the contract has another (two axes "
                 "broadcast against each other)")
    return ("reshape_output", f"a reshape to {tuple(shape)}, the output's own shape, got a "
            f"tensor of {size} values, {as_many_as(ratio, named)} times "
            f"{'as many as' if more else 'fewer than'} its {product}: the reshape's sizes are "
            f"right, the tensor is not: a step before it made it too "
            f"{'large' if more else 'small'}: {cause}. Print the shapes of the tensors it was "
            "made from.")


def _made_of(wrong: int, right: int, named: dict[str, int], passed: str | None = None) -> str:
    """`` (your 6 is d_model // num_heads)``: what the wrong size was computed from, when a
    quotient of two of the case's sizes gives it and not the right one (every such quotient,
    when more than one does: round U's 2 was G*d_head // num_heads, and d_model // G*d_head
    too); said as one of two when the wrong size is also the argument ``passed``'s own value."""
    pairs = [f"{a} // {b}" for a, va in named.items() for b, vb in named.items()
             if a != b and vb > 1 and "/" not in a + b and va // vb == wrong
             and va % vb == 0 and va // vb != right]
    if not pairs:
        return ""
    if passed is not None:
        return (f" (your {wrong} is {passed} itself, or {' or '.join(pairs[:3])}: a size "
                "computed from the wrong dimension)")
    return f" (your {wrong} is {' or '.join(pairs[:3])}: a size computed from the wrong dimension)"
