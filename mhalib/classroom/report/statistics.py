"""Item statistics of a class: facility, point-biserial and upper-lower discrimination.

Notation, for one item (a quick check, or an exercise passed or not) over the ``n`` students
who answered it: ``x_i`` is 1 when student ``i`` got it right and 0 otherwise; ``y_i`` is the
student's *rest score*, their total on the assignment minus what this item earned them (so
the item is not correlated with itself).

- **Facility** ``p = (1/n) sum x_i``: the share who got it right (Moodle's facility index).
- **Point-biserial correlation** ``r_pb = (M_1 - M_0) / s_y * sqrt(p q)``, with ``M_1`` and
  ``M_0`` the mean rest score of those right and of those wrong, ``q = 1 - p`` and ``s_y`` the
  population standard deviation of ``y`` (divided by ``n``). It is Pearson's correlation of
  ``x`` with ``y``: near 1 when those who do well elsewhere get this item right, negative when
  they get it wrong (a question that looks broken). Undefined (None) when everybody, or
  nobody, got it right, or when every rest score is the same.
- **Upper-lower index** (Kelley's 27%) ``D = p_U - p_L``: the facility in the upper group
  minus the facility in the lower group, each group being the ``g = max(1, round(0.27 n))``
  students with the highest (lowest) rest scores. Students tied at a group's boundary share
  its remaining places equally: each of ``t`` tied students competing for ``k`` places counts
  with weight ``k / t``, so the index does not depend on the order of the roster. ``p_U =
  sum w_i x_i / g`` over the upper group's weights ``w_i``. Undefined for fewer than 2
  students.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

GROUP_FRACTION = 0.27


def facility(right: Sequence[bool]) -> float | None:
    """Share of ``right`` that is True (None when empty)."""
    return float(np.mean(np.asarray(right, dtype=float))) if len(right) else None


def point_biserial(right: Sequence[bool], rest: Sequence[float]) -> float | None:
    """``r_pb`` of the 0/1 item scores ``right`` against the ``rest`` scores (module docstring).
    """
    x = np.asarray(right, dtype=float)
    y = np.asarray(rest, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"right has {x.size} entries and rest has {y.size}; they must match")
    n = x.size
    if n < 2:
        return None
    p = x.mean()
    spread = y.std()  # population standard deviation (ddof=0)
    if p in (0.0, 1.0) or spread == 0.0:
        return None
    mean_right, mean_wrong = y[x == 1].mean(), y[x == 0].mean()
    return float((mean_right - mean_wrong) / spread * np.sqrt(p * (1 - p)))


def group_size(n: int, fraction: float = GROUP_FRACTION) -> int:
    """Places in the upper (and lower) group: ``max(1, round(fraction * n))``."""
    if not 0 < fraction <= 0.5:
        raise ValueError(f"fraction={fraction!r} must be in (0, 0.5]")
    return max(1, int(round(fraction * n)))


def group_weights(rest: Sequence[float], upper: bool,
                  fraction: float = GROUP_FRACTION) -> np.ndarray:
    """Each student's weight (0..1) in the upper (or lower) group; the weights sum to the
    group's size, and students tied at its boundary share the places left (module docstring).
    """
    y = np.asarray(rest, dtype=float)
    places = group_size(y.size, fraction)
    key = -y if upper else y  # best first for the upper group, worst first for the lower
    weights = np.zeros(y.size)
    taken = 0
    for value in np.unique(key):  # ascending: best (or worst) scores first
        members = key == value
        count = int(members.sum())
        share = min(count, places - taken)
        if share <= 0:
            break
        weights[members] = share / count
        taken += share
    return weights


def upper_lower_index(right: Sequence[bool], rest: Sequence[float],
                      fraction: float = GROUP_FRACTION) -> float | None:
    """``D = p_U - p_L`` (module docstring); None for fewer than 2 students."""
    x = np.asarray(right, dtype=float)
    if x.size < 2:
        return None
    if x.size != len(rest):
        raise ValueError(f"right has {x.size} entries and rest has {len(rest)}; they must match")
    top = group_weights(rest, upper=True, fraction=fraction)
    bottom = group_weights(rest, upper=False, fraction=fraction)
    return float(top @ x / top.sum() - bottom @ x / bottom.sum())


def upper_group_counts(choices: Sequence, rest: Sequence[float],
                       fraction: float = GROUP_FRACTION) -> dict:
    """How many of the upper group made each choice (weighted as in :func:`group_weights`)."""
    if len(choices) != len(rest):
        raise ValueError(f"choices has {len(choices)} entries and rest has {len(rest)}; "
                         "they must match")
    if not len(choices):
        return {}
    counts: dict = {}
    for choice, weight in zip(choices, group_weights(rest, upper=True, fraction=fraction)):
        if weight > 0:
            counts[choice] = counts.get(choice, 0.0) + float(weight)
    return counts
