"""Settings for the whole suite."""

from __future__ import annotations

import os

import pytest

# Under pytest-xdist the workers, and the kernels, nbgrader runs and sandboxes they start, share
# the cores. With one BLAS/OpenMP thread each they take turns; with a thread per core each,
# spinning threads starve one another (a 4 s notebook once took 300 s in the full suite).
# Set before torch or numpy is imported, so it holds for the workers and everything they start.
# Nothing here times code: run times at full threads are in docs/benchmarks.md.
# The repair search (mhalib.checks.repairs) spends up to 2 s on every failing answer that no
# single change mends; the suite judges hundreds of wrong answers whose readings, not repairs,
# are what their tests check. It is off for the workers and what they start, except where a
# test turns it on (tests/checks/test_repairs.py, and measure.py for the held-out rounds).
os.environ.setdefault("MHALIB_REPAIR_BUDGET_S", "0")
# The visible suite's judge answers within 0.16 s of its own (mhalib.checks.judge), skipping what
# has not answered by then: on two loaded cores that would make what a test sees depend on the
# load. The suite lifts the limit; tests/checks/test_visible_time.py checks it with the limit on.
os.environ.setdefault("MHALIB_VISIBLE_JUDGE_S", "10")

if os.environ.get("PYTEST_XDIST_WORKER"):
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")


def _stored_models_apart(config):
    """Lesson 08's trained model is stored in a folder of this run's own (mhalib.induction.
    stored), made by the controlling process before the xdist workers start, so the workers and
    every kernel, nbgrader run and sandbox they start inherit it: the first notebook that runs
    lesson 08 trains, the others load (the suite ran that training four times), and nothing is
    written to the home folder or kept from an earlier run."""
    if hasattr(config, "workerinput") or os.environ.get("MHALIB_CACHE_DIR"):
        return
    import tempfile

    folder = tempfile.mkdtemp(prefix="mhalib-test-cache-")
    os.environ["MHALIB_CACHE_DIR"] = folder
    config._mhalib_cache_dir = folder


def pytest_unconfigure(config):
    folder = getattr(config, "_mhalib_cache_dir", None)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("MHALIB_CACHE_DIR", None)


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


# -- one worker per costly shared fixture ------------------------------------------------------
# Under ``--dist loadgroup`` a test without an xdist group is scheduled on its own, so the tests
# that share a module- or session-scoped fixture were spread over both workers, and each worker
# built the fixture (the catalogue's ``mhalib grade`` run, the assessed releases of every
# lesson, the Triton compiles...): the same minutes of work twice. Every test that uses one of
# these fixtures joins the fixture's group, so one worker builds it once. Keyed on where the
# fixture is defined (pytest's baseid: the conftest's folder or the test module) and its name;
# a test that already names a group keeps it. tests/test_suite_setup.py checks every key still
# names a fixture and every test using it got the group.
SHARED_FIXTURE_GROUPS = {
    "tests/grading::catalogue_run": "catalogue_run",
    "tests/classroom/report::demo_course": "report_demo_course",
    "tests/classroom/report::synthetic": "report_synthetic",
    "tests/quiz/test_no_key_leak.py::releases": "no_key_leak",
    "tests/kernels/test_triton_compile.py::compiled": "triton_compile",
    "tests/kernels/test_triton_interpret.py::interpreted_runs": "triton_interpret",
    "tests/induction/test_core_training.py::runs": "induction_runs",
    "tests/bench/test_runner.py::rows": "bench_rows",
    "tests/commands/test_report.py::course": "report_command_course",
    "tests/checks/test_diagnosis_coverage.py::outcomes": "diagnosis_outcomes",
    "tests/grading/test_answer_paths.py::search_server": "answer_paths",
    "tests/browser::release_lab": "jupyterlab",
}


def shared_fixture_group(item) -> str | None:
    """The group of the first costly shared fixture (in SHARED_FIXTURE_GROUPS order) ``item``
    uses, directly or through another fixture."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for key, group in SHARED_FIXTURE_GROUPS.items():
        baseid, name = key.rsplit("::", 1)
        if any(d.baseid == baseid for d in info.name2fixturedefs.get(name, ())):
            return group
    return None


def _group_of(item) -> str | None:
    """The scope name pytest-xdist gives a grouped test (its group names, sorted and joined)."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    return "_".join(names) or None


def _loadgroup(config) -> bool:
    return getattr(config.option, "dist", None) == "loadgroup"


# -- the order in which --dist loadgroup hands out work -----------------------------------------
# pytest-xdist hands out work units (a group, or one ungrouped test) in the order of a queue and
# by default sorts that queue by the number of tests in each unit. The groups still come first
# here, largest first, as xdist would put them; among the ungrouped tests, those marked ``slow``
# come next, ahead of the quick ones: a 100 s test handed out last kept one worker busy alone
# at the end of the run while the other had finished. Only the order changes, never what runs.
def pytest_configure(config):
    _stored_models_apart(config)
    if _loadgroup(config) and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # the controller takes the order below as is


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks into the node ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        group = shared_fixture_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    if not _loadgroup(config):
        return
    groups = [_group_of(item) for item in items]
    sizes = {}
    for group in groups:
        if group:
            sizes[group] = sizes.get(group, 0) + 1

    def rank(pair):
        item, group = pair
        if group:
            return (0, -sizes[group])
        return (1 if item.get_closest_marker("slow") else 2, 0)

    items[:] = [item for item, _ in sorted(zip(items, groups), key=rank)]
