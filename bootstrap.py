#!/usr/bin/env python3
"""Set up everything on a fresh machine, then launch the course or run the test suite.

    python3 bootstrap.py lab     # install into .venv, start JupyterLab on the lessons
    python3 bootstrap.py test    # install into .venv (with test tools), run the whole suite

Needs only Python 3.10+ with pip and venv. The versions installed are the tested ones of
constraints.txt (pyproject.toml states only the ranges mhalib needs). Re-running is cheap: the
install is skipped while pyproject.toml and constraints.txt are unchanged. Extra arguments
after ``test`` go to pytest, after ``lab`` to ``mhalib lab``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
# The exact versions the course is tested with (torch's CPU build among them).
CONSTRAINTS = ROOT / "constraints.txt"
# Debian packages the test suite uses when it can get them: the grader's sandbox and the
# browser for the JupyterLab end-to-end tests. Without them those tests skip, saying why.
SYSTEM_PACKAGES = {"bwrap": "bubblewrap", "chromium": "chromium"}
# JupyterHub's proxy (npm) for the class-hub test, installed into the virtual environment;
# `mhalib hub` looks there when it is not on PATH. Without it that test skips, saying why.
HUB_PROXY = "configurable-http-proxy"
NODE_PREFIX = VENV / "lib" / "node"


def say(message: str) -> None:
    print(f"[bootstrap] {message}", flush=True)


def run(command: list, **kwargs) -> None:
    say(" ".join(str(c) for c in command))
    subprocess.run([str(c) for c in command], check=True, cwd=ROOT, **kwargs)


def ensure_venv() -> None:
    if sys.version_info < (3, 10):  # noqa: UP036 - bootstrap may run on an old python3
        sys.exit(f"Python 3.10 or newer is needed, this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        run([sys.executable, "-m", "venv", VENV])


def ensure_installed(extras: str) -> None:
    """pip install the project (editable) with ``extras`` at the versions of constraints.txt,
    unless done for this pyproject.toml and constraints.txt."""
    stamp = VENV / f".installed-{extras or 'base'}"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()
                            + CONSTRAINTS.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        say(f"dependencies up to date ({stamp.name})")
        return
    target = f".[{extras}]" if extras else "."
    run([PYTHON, "-m", "pip", "install", "--upgrade", "pip"])
    run([PYTHON, "-m", "pip", "install", "-c", CONSTRAINTS, "-e", target])
    stamp.write_text(digest)


def ensure_system_packages() -> None:
    """Best effort: apt-get the sandbox tool and the browser when missing and we may."""
    missing = [pkg for tool, pkg in SYSTEM_PACKAGES.items() if shutil.which(tool) is None]
    if not missing:
        return
    can_apt = shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0
    if not can_apt:
        say(f"NOTE: {', '.join(missing)} not installed and apt-get is not available to this "
            "user; the tests that need them will skip and say so.")
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        run(["apt-get", "update", "-qq"], env=env)
        run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)
    except subprocess.CalledProcessError:
        say(f"NOTE: could not install {', '.join(missing)}; the tests that need them will skip.")


def ensure_hub_proxy() -> None:
    """Best effort: npm-install configurable-http-proxy into .venv/lib/node when missing."""
    if shutil.which(HUB_PROXY) or (NODE_PREFIX / "node_modules" / ".bin" / HUB_PROXY).exists():
        return
    if shutil.which("npm") is None:
        say(f"NOTE: npm is not installed, so neither is {HUB_PROXY}; the class-hub test will "
            "skip and say so.")
        return
    try:
        run(["npm", "install", "--no-audit", "--no-fund", "--prefix", NODE_PREFIX, HUB_PROXY])
    except subprocess.CalledProcessError:
        say(f"NOTE: could not install {HUB_PROXY}; the class-hub test will skip.")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("lab", "test"):
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    ensure_venv()
    env = {**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
    if command == "lab":
        ensure_installed("")
        return subprocess.call([str(BIN / "mhalib"), "lab", *rest], cwd=ROOT, env=env)
    ensure_installed("test")
    ensure_system_packages()
    ensure_hub_proxy()
    workers = str(min(4, max(2, os.cpu_count() or 1)))
    pytest = [str(PYTHON), "-m", "pytest", "-n", workers, "--dist", "loadgroup", *rest]
    say(" ".join(pytest))
    return subprocess.call(pytest, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
