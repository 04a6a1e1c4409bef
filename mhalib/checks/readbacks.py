"""The read-backs of issue 22, one registry: what the learner's output says its code did.

Tried by :mod:`mhalib.checks.explain` on the failing cases when no mistake model matched. Each
reader takes ``(exercise, case, output)`` and returns ``(flag, message)`` or None:

- attention weights per head (:mod:`mhalib.checks.weights_views`);
- a merge's shares and a softmax gradient's row term (:mod:`mhalib.checks.readback_rows`);
- RoPE's exponents, pairing and rotation (:mod:`mhalib.checks.readback_rope`);
- the entries a head score averaged (:mod:`mhalib.checks.readback_positions`);
- the softmax Jacobian's diagonal (:mod:`mhalib.checks.readback_jacobian`).
"""

from __future__ import annotations

from mhalib.checks import (
    readback_jacobian,
    readback_positions,
    readback_rope,
    readback_rows,
    weights_views,
)

READERS = {**weights_views.VIEWS, **readback_rows.READERS, **readback_rope.READERS,
           **readback_positions.READERS, **readback_jacobian.READERS}


def readback_diagnosis(exercise, recorded) -> tuple[str, str] | None:
    """``(flag, message)`` from the first failing case whose output can be read back, or None."""
    reader = READERS.get(exercise.name)
    if reader is None:
        return None
    for case, result in recorded:
        if getattr(case, "must_raise", ""):
            continue
        try:
            found = reader(exercise, case, result.get("output"))
        except Exception:  # noqa: BLE001 - a diagnosis never crashes the judge
            found = None
        if found:
            return found[0], f"{found[1]} (case '{case.label}')"
    return None
