"""The repair search's clock charges CPU time under load, wall time otherwise, and stops at a
cap of wall time (:mod:`mhalib.checks.repair_clock`)."""

from __future__ import annotations

import time

from mhalib.checks.repair_clock import WALL_CAP, SearchClock


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_time_spent_waiting_on_other_processes_is_not_charged():
    clock = SearchClock(budget_s=1.0)
    time.sleep(0.2)  # (no CPU used: as a search that other processes keep off the core)
    assert clock() < 0.1
    assert clock.left() > 0.9


def test_time_spent_computing_is_charged():
    clock = SearchClock(budget_s=1.0)
    _spin(0.2)
    assert 0.15 < clock() <= 0.2 + 0.05


def test_past_the_wall_cap_the_wall_time_is_charged():
    clock = SearchClock(budget_s=0.05)
    time.sleep(WALL_CAP * 0.05 + 0.02)
    assert clock() >= WALL_CAP * 0.05
    assert clock.left() < 0
