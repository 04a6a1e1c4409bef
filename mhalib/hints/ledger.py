"""Which hints this kernel's learner has seen, and whether the release records them.

The learner climbs each exercise's ladder one rung at a time: the next hint is the one after the
highest seen, and any hint already seen can be read again. In an assessed release (the quick
checks' ``quick_checks.json`` or the notebook's metadata says ``assessed``) the counts are
recorded in the notebook (:mod:`mhalib.hints.record`); a new kernel starts from the counts of
the last saved copy of the notebook, so a restart forgets nothing that was saved.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from mhalib.hints.ladder import ladder, ladders
from mhalib.hints.record import bundle, hints_taken


def assessed(session) -> bool:
    """True when this kernel's notebook comes from an assessed release (a quiz session of
    :mod:`mhalib.quiz.session` tells: its release file, else the saved notebook's metadata)."""
    if session.release is not None:
        return session.release.get("mode") == "assessed"
    metadata = session.saved_notebook().get("metadata", {})
    mhalib_meta = metadata.get("mhalib", {}) if isinstance(metadata, dict) else {}
    return isinstance(mhalib_meta, dict) and mhalib_meta.get("quick_checks") == "assessed"


class HintLedger:
    """The highest hint seen per exercise in one kernel; ``recording`` when the release records
    hint use, under one ``display_id`` shared by all of this kernel's records."""

    def __init__(self, recording: bool = False, seen: dict[str, int] | None = None):
        self.recording = recording
        self.seen: dict[str, int] = dict(seen or {})
        self.display_id = f"mhalib-hints-{uuid.uuid4().hex}"

    def next_rung(self, exercise: str) -> int:
        """The hint ``hint(exercise)`` shows next (the last one again once all are seen)."""
        return min(self.seen.get(exercise, 0) + 1, len(ladder(exercise)))

    def take(self, exercise: str, rung: int | None = None) -> tuple[int, str]:
        """(number, text) of hint ``rung`` of ``exercise`` (default: the next one), now seen.

        A hint may be read again, or the next one taken; skipping ahead is refused, so the
        ladder is climbed from the nudge up.
        """
        rungs = ladder(exercise)
        allowed = min(self.seen.get(exercise, 0) + 1, len(rungs))
        if rung is None:
            rung = allowed
        if isinstance(rung, bool) or not isinstance(rung, int) or not 1 <= rung <= allowed:
            readable = "hint 1" if allowed == 1 else f"hints 1 to {allowed}"
            raise ValueError(f"rung={rung!r}: {exercise} has hints 1 to {len(rungs)}, and you "
                             f"can read {readable} now (hint({exercise!r}) shows the next)")
        self.seen[exercise] = max(self.seen.get(exercise, 0), rung)
        return rung, rungs[rung - 1]

    def totals(self) -> dict[str, int]:
        return {name: len(ladder(name)) for name in self.seen}

    def record(self) -> dict:
        """The display data of this kernel's record (:func:`mhalib.hints.record.bundle`)."""
        return bundle(self.seen, self.totals())


_LEDGER: HintLedger | None = None
_FOLDER: Path | None = None


def current() -> HintLedger:
    """This kernel's ledger, made at the first hint (again if the working folder changed)."""
    global _LEDGER, _FOLDER
    if _LEDGER is None or _FOLDER != Path.cwd():
        from mhalib.quiz.session import current as quiz_session

        session = quiz_session()
        recording = assessed(session)
        seen = hints_taken(session.saved_notebook(), ladders()) if recording else {}
        _LEDGER, _FOLDER = HintLedger(recording, seen), Path.cwd()
    return _LEDGER
