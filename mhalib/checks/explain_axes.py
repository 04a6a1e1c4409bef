"""Which order the right values were read in (issue 22): a wrong output that holds the right
values in the wrong places is searched as the right tensor with one axis perhaps split in two
(``H*d_head`` read as ``(H, d_head)``), its axes taken in another order and poured back into the
output's shape, which is what a reshape where a transpose was needed does. The order found is
said in the case's own sizes (``(B, N, H, d_head)`` read as ``(B, H, N, d_head)``)."""

from __future__ import annotations

import itertools

import numpy as np

from mhalib.checks.explain_sizes import names_of

MAX_AXES = 5  # 5! = 120 orders for each way of splitting one axis


def axis_order(expected: np.ndarray, received: np.ndarray, named: dict[str, int]
               ) -> str | None:
    """A sentence naming the order of axes in which ``received`` holds ``expected``'s values,
    or None when no split-and-permute of ``expected`` gives ``received``."""
    if expected.shape != received.shape or expected.size < 4:
        return None
    for split_axis, parts in _splits(expected.shape):
        shape = list(expected.shape)
        if split_axis is not None:
            shape[split_axis:split_axis + 1] = parts
        if len(shape) > MAX_AXES:
            continue
        wide = expected.reshape(shape)
        for order in itertools.permutations(range(len(shape))):
            if order == tuple(range(len(shape))):
                continue
            moved = np.transpose(wide, order).reshape(expected.shape)
            if np.allclose(moved, received, rtol=1e-4, atol=1e-6):
                return _say_order(shape, order, split_axis, parts, expected.shape, named)
    return None


def _splits(shape):
    """``(None, None)`` first (no split), then every axis split into two factors > 1."""
    yield None, None
    for axis, size in enumerate(shape):
        for first in range(2, size):
            if size % first == 0:
                yield axis, (first, size // first)


def _name(size, named) -> str:
    found = names_of(size, named)
    return found[0] if found else str(size)


def _say_order(shape, order, split_axis, parts, out_shape, named) -> str:
    alike = {s for s in shape if list(shape).count(s) > 1}

    def say(size):  # (two axes of one size: a name would pick one of them by chance)
        return str(size) if size in alike else _name(size, named)
    right = "(" + ", ".join(say(s) for s in shape) + ")"
    taken = "(" + ", ".join(say(shape[a]) for a in order) + ")"
    split = ""
    if split_axis is not None:
        split = (f" (axis {split_axis}, of size {out_shape[split_axis]}, is "
                 f"{say(parts[0])} x {say(parts[1])})")
    return (f"holds the right values read in the order {taken} where the contract's order is "
            f"{right}{split}: the axes were reshaped in the wrong order, a reshape (or view, "
            "or expand before a reshape) where a transpose or permute was needed first, or "
            "one where the axes had not been moved back" + (
                ", or a repeat_interleave (or repeat) without dim=, which flattens the tensor "
                "first" if split_axis is not None and any(
                    "rep" in _name(p, named) for p in parts) else ""))
