"""Fixtures of the class-hub tests: a hub with real system users, and a headless Chromium.

The tests skip, saying why, only where system users cannot be created (not root, no
``useradd``) or node / configurable-http-proxy is missing (``python3 bootstrap.py test``
installs it with npm); a missing browser is handled as in tests/browser.
"""

from __future__ import annotations

import shutil

import pytest

from mhalib.classroom.hub.launch import find_proxy
from mhalib.classroom.hub.users import can_manage_users
from tests.browser.conftest import CHROMIUM_ARGS, _unavailable, find_chromium
from tests.classroom.hub.class_hub import new_class, remove_class


def hub_unavailable() -> str | None:
    """Why a class hub cannot run here, or None."""
    reason = can_manage_users()
    if reason:
        return f"{reason}: the class hub needs separate system users"
    if shutil.which("node") is None:
        return "node is not installed (apt-get install -y nodejs npm)"
    if find_proxy() is None:
        return ("configurable-http-proxy is not installed: `python3 bootstrap.py test` installs "
                "it (npm install --prefix .venv/lib/node configurable-http-proxy)")
    return None


@pytest.fixture(scope="module")
def class_hub():
    """A running hub with one instructor and two learners; all of it removed afterwards."""
    reason = hub_unavailable()
    if reason:
        pytest.skip(reason)
    hub = new_class(learner_count=2)
    try:
        hub.start()
        yield hub
    finally:
        log = hub.log()
        remove_class(hub)
        print(f"--- the end of the hub's log ---\n{log[-5000:]}")


@pytest.fixture(scope="module")
def hub_browser(request):
    """A headless Chromium (fresh profile) in which each user gets their own context."""
    chromium = find_chromium()
    if chromium is None:
        _unavailable("no Chromium found: install it with `apt-get install -y chromium`")
    playwright = request.getfixturevalue("playwright_driver")  # one per process (tests/conftest.py)
    browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                         args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()
