"""Fixtures of the browser tests: a headless Chromium driven by Playwright.

Playwright is used with the system's Chromium (Debian package ``chromium``); it never downloads
a browser. Without Playwright or Chromium the browser tests skip and say how to install them,
unless ``MHALIB_REQUIRE_BROWSER=1`` (set by ``.ci/run`` once it installed Chromium), where they
fail instead, so that CI cannot pass by skipping.

Screenshots go to a temporary folder, or to ``MHALIB_SCREENSHOTS`` when set
(``MHALIB_SCREENSHOTS=docs/screenshots`` refreshes the ones in the docs).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]
VIEWPORT = {"width": 1280, "height": 860}


def find_chromium() -> str | None:
    """Path of a Chromium to drive: ``MHALIB_CHROMIUM``, else the first one installed."""
    chosen = os.environ.get("MHALIB_CHROMIUM")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    for candidate in CHROMIUM_CANDIDATES:
        path = shutil.which(candidate)
        if path:
            return path
    return None


def _unavailable(reason: str):
    if os.environ.get("MHALIB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"MHALIB_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = find_chromium()
    if path is None:
        _unavailable("no Chromium found: install it with `apt-get install -y chromium` "
                     "(or set MHALIB_CHROMIUM=/path/to/chromium)")
    return path


@pytest.fixture(scope="session")
def browser(chromium_path, playwright_driver, tmp_path_factory):
    """A headless Chromium with a fresh profile (one per test session)."""
    context = playwright_driver.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")), executable_path=chromium_path,
        headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT)
    try:
        yield context
    finally:
        context.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Remember on the test item whether its call failed (the ``page`` fixture reads it)."""
    report = yield
    if report.when == "call":
        item.call_failed = report.failed
    return report


@pytest.fixture
def page(browser, request, screenshot_dir):
    """A new tab; console errors of the page are kept in ``page.console_errors``.

    When the test fails, what the tab showed is saved as ``FAILED-<test>.png``.
    """
    tab = browser.new_page()
    tab.console_errors = []
    tab.on("console", lambda m: tab.console_errors.append(m.text) if m.type == "error" else None)
    yield tab
    if getattr(request.node, "call_failed", False):
        shot = screenshot_dir / f"FAILED-{request.node.name}.png"
        tab.screenshot(path=str(shot))
        print(f"screenshot of the failure: {shot}")
    tab.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory) -> Path:
    chosen = os.environ.get("MHALIB_SCREENSHOTS")
    if chosen:
        folder = Path(chosen).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="session")
def release_lab(tmp_path_factory):
    """JupyterLab on a scratch copy of notebooks/ (autosave never touches the release), shared
    by the Run All tests of the untouched release (test_lab_run_all*.py, one xdist group): one
    server start instead of one per module. Each test opens its notebook with
    ``lab_server.open_fresh`` (earlier kernels shut down, the workspace reset), and only runs
    cells, so a test sees the server as if it had just started on the release."""
    from tests.browser.lab_server import REPO, start_lab

    scratch = tmp_path_factory.mktemp("release-lab")
    shutil.copytree(REPO / "notebooks", scratch / "notebooks")
    server = start_lab(REPO, ["--notebook-dir", str(scratch / "notebooks")], scratch / "jupyter")
    server.notebook_dir = scratch / "notebooks"
    yield server
    server.stop()



@pytest.fixture(scope="session")
def assessed_release_01(tmp_path_factory):
    """``mhalib release 01-single-head --quick-checks assessed`` made once for the tests that
    open it in JupyterLab (test_lab_assessed.py, test_lab_hints.py): each works on its own copy
    (``copy_assessed_release``), since the learner saves into it."""
    from mhalib.cli import main
    from tests.browser.lab_server import REPO

    release = tmp_path_factory.mktemp("assessed-01") / "release"
    assert main(["release", "01-single-head", "--quick-checks", "assessed", "--to",
                 str(release), "--root", str(REPO)]) == 0
    return release
