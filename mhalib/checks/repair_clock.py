"""The repair search's clock: how much of its budget the search has used.

A grader checks many notebooks at once, and a learner's laptop runs other work: on a loaded
machine the search gets a share of a core, and a wall-clock budget finds fewer repairs than on
an idle one (rounds AH and AN: a repair found on one seed and not on the other, the same code).
The search is charged the CPU time of its process while that is less than the wall time, so the
same search fits the budget under load as when idle, and never more than ``WALL_CAP`` times the
budget in wall time. When the process's threads run in parallel (torch's intra-op threads), the
CPU time runs ahead of the wall and the wall time is charged: never more than before.
"""

from __future__ import annotations

import time

WALL_CAP = 2.0  # the search may take this many times its budget of wall time under load


class SearchClock:
    """``clock()``: seconds of the budget used since the clock was made; ``clock.left()``:
    what is left of ``budget_s`` (at most 0 once the wall cap is reached)."""

    def __init__(self, budget_s: float):
        self.budget_s = budget_s
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def __call__(self) -> float:
        wall = time.perf_counter() - self._wall
        if wall >= WALL_CAP * self.budget_s:
            return wall
        return min(wall, time.process_time() - self._cpu)

    def left(self) -> float:
        return self.budget_s - self()
