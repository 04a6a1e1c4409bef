"""Settings for the whole suite."""

from __future__ import annotations

import os

import pytest

# Under pytest-xdist the workers, and the kernels, nbgrader runs and sandboxes they start, share
# the cores. With one BLAS/OpenMP thread each they take turns; with a thread per core each,
# spinning threads starve one another (a 4 s notebook once took 300 s in the full suite).
# Set before torch or numpy is imported, so it holds for the workers and everything they start.
# Nothing here times code: run times at full threads are in docs/benchmarks.md.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")


@pytest.fixture(scope="session")
def playwright_driver():
    """One Playwright per test process, shared by every browser test (tests/browser and
    tests/classroom/hub): its sync API refuses to start while another instance runs in the
    process."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed: `pip install playwright` "
                    "(no `playwright install` needed; the system Chromium is used)")
    driver = sync_playwright().start()
    try:
        yield driver
    finally:
        driver.stop()
