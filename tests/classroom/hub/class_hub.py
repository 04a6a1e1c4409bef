"""A class hub for the tests: system users, ``mhalib hub`` on a free loopback port, clean-up.

Users get names unique to the run (``mh<6 hex><role>``) and homes in the class's scratch
folder; everything is removed afterwards, whatever happened. Commands "as the instructor" run
under the instructor's uid with the environment their terminal on the hub would have.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from mhalib.classroom.hub.class_setup import ClassSettings
from mhalib.classroom.hub.users import create_user, remove_user
from tests.browser.lab_server import REPO, free_loopback_port

START_TIMEOUT_S = 90


@dataclass
class ClassHub:
    scratch: Path  # everything of this class: class folder, homes, the hub's log
    instructor: str
    learners: list[str]
    passwords: dict[str, str]
    port: int = 0
    process: subprocess.Popen | None = None
    created: list[str] = field(default_factory=list)

    @property
    def class_dir(self) -> Path:
        return self.scratch / "class"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.scratch / "hub.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def settings(self) -> ClassSettings:
        return ClassSettings.read(self.class_dir / "hub" / "class.json")

    def home(self, user: str) -> Path:
        return Path(pwd.getpwnam(user).pw_dir)

    def run_as(self, user: str, argv: list[str], cwd: Path | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
        """Run ``argv`` as ``user`` (own uid, gid and groups), as a terminal on the hub would."""
        entry = pwd.getpwnam(user)
        settings = self.settings()
        role = "instructor" if user == self.instructor else "learner"
        env = {"HOME": entry.pw_dir, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
               **settings.environment(role)}
        return subprocess.run(argv, cwd=cwd or entry.pw_dir, env=env, user=entry.pw_uid,
                              group=entry.pw_gid, extra_groups=[], capture_output=True,
                              text=True, timeout=timeout)

    def python_as(self, user: str, code: str) -> subprocess.CompletedProcess:
        """Run Python ``code`` as ``user`` with the class's interpreter."""
        return self.run_as(user, [self.settings().python, "-c", code], timeout=60)

    def start(self) -> None:
        """``mhalib hub`` as root, from the repository; wait until the login page answers."""
        self.port = free_loopback_port()
        command = [sys.executable, "-m", "mhalib", "hub", "--class-dir", str(self.class_dir),
                   "--instructor", self.instructor, "--learners", ",".join(self.learners),
                   "--port", str(self.port)]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTEST"))}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"`mhalib hub` exited with {self.process.returncode}:\n"
                                   f"{self.log()[-4000:]}")
            if _answers(f"{self.url}/hub/login"):
                return
            time.sleep(0.5)
        raise TimeoutError(f"the hub did not answer within {START_TIMEOUT_S}s:\n"
                           f"{self.log()[-4000:]}")

    def stop(self) -> None:
        """SIGTERM the hub (it stops every user's server and the proxy), then make sure."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        if self.process is not None:
            try:  # whatever is left in the hub's own process group
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _stop_leftover_proxy(self.class_dir / "hub" / "proxy.pid")


def _stop_leftover_proxy(pid_file: Path) -> None:
    """The hub stops its proxy when it exits; should it not have, stop it by its pid."""
    try:
        pid = int(pid_file.read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"configurable-http-proxy" in command:
        os.kill(pid, signal.SIGTERM)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def new_class(learner_count: int = 2) -> ClassHub:
    """Create the users of a fresh class (instructor + learners) in a new scratch folder."""
    scratch = Path(tempfile.mkdtemp(prefix="mhalib-hub-", dir="/tmp"))
    scratch.chmod(0o755)  # users reach the class folder and their homes through it
    (scratch / "home").mkdir(mode=0o755)
    tag = secrets.token_hex(3)
    instructor = f"mh{tag}teach"
    learners = [f"mh{tag}learn{i}" for i in range(1, learner_count + 1)]
    hub = ClassHub(scratch=scratch, instructor=instructor, learners=learners, passwords={})
    try:
        for name in [instructor, *learners]:
            hub.passwords[name] = create_user(name, home=scratch / "home" / name)
            hub.created.append(name)
    except BaseException:
        remove_class(hub)
        raise
    return hub


def remove_class(hub: ClassHub) -> None:
    """Stop the hub, remove the users it created and the scratch folder."""
    try:
        hub.stop()
    finally:
        for name in hub.created:
            remove_user(name)
        shutil.rmtree(hub.scratch, ignore_errors=True)
