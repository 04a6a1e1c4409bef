"""Which other edit of a place a repair says beside the one it found (issue 22): where a
number that multiplies or divides was changed (``-2 * i / half`` to ``-1 * i / half``), the
slip may be at another operand of the same place (``/ half`` for ``/ head_dim``), so the first
edit there that changes more than numbers and also mends every case is said too, as "in either
of two ways". Axes, indices and signs are not factors (``dim=0`` to ``dim=1`` is said alone)."""

from __future__ import annotations

import ast
import re


def another_operand(same_place: list, mutant, either: dict, least_said: int) -> bool:
    """True when the one edit found at ``mutant``'s place changes a number alone (``-2 * i``
    to ``-1 * i``) and ``mutant`` changes something else there: a factor undone at one
    operand may be a slip at another (round W: ``-2 * i / half`` mended as ``-1 * i / half``,
    where ``half`` is the slip), so the first other edit that mends the place is said too."""
    return len(same_place) == 1 and id(same_place[0]) not in either and \
        len(same_place[0].edits) == 1 and _number_only(same_place[0]) and \
        _a_factor(same_place[0], least_said) and not _number_only(mutant)


_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:e-?\d+)?")
_FACTOR = re.compile(r"\d\s*[*/]|[*/]\s*\(?-?\d")  # a number multiplying or dividing


def _number_only(mutant) -> bool:
    """True when every edit of ``mutant`` changes numbers (and their signs) and nothing else:
    ``2`` to ``1``, an axis ``0`` to ``-1``, a constant changed wherever it stands."""
    try:
        pairs = [tuple(ast.unparse(part) for part in edit) for edit in mutant.edits]
    except Exception:
        return False
    return bool(pairs) and all(old != new and _NUMBER.sub("#", old) == _NUMBER.sub("#", new)
                               for old, new in pairs)


def _a_factor(mutant, least_said: int) -> bool:
    """True when the number ``mutant`` changes multiplies or divides something where it
    stands (``-2 * i / half``), not an axis or an index (``mean(dim=0)``)."""
    node, new = mutant.edits[0]
    try:
        old_text, _ = mutant.said(node, new, least_said)
    except Exception:
        return False
    return bool(_FACTOR.search(old_text))
