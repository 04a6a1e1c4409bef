"""``mhalib hub``'s work in order: check the machine, set the class up, start JupyterHub.

:func:`set_up_class` is everything before the hub starts (``mhalib hub setup``): the class
folder, the users, the shared environment, the configuration and the instructor's course
(:mod:`~mhalib.classroom.hub.class_setup`). :func:`start` then replaces this process with
JupyterHub, so Ctrl+C and SIGTERM reach it directly and it stops every user's server and the
proxy on its way out. Its configuration, ``grading/hub/jupyterhub_config.py``, reads the class
settings from the file that ``MHALIB_HUB_CLASS`` names.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from mhalib.classroom.course_folder import CourseFiles
from mhalib.classroom.hub.class_setup import (
    ClassSettings,
    check_roster,
    close_learner_homes,
    make_folders,
    set_up_instructor,
    write_config_dirs,
)
from mhalib.classroom.hub.environment import others_can_reach, shared_environment
from mhalib.classroom.hub.users import can_manage_users, create_user, user_exists

PROXY = "configurable-http-proxy"
SETTINGS_VARIABLE = "MHALIB_HUB_CLASS"  # the class.json the hub's configuration reads


def free_loopback_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def find_proxy() -> str | None:
    """configurable-http-proxy: on PATH, else where bootstrap.py installs it (npm, in .venv)."""
    found = shutil.which(PROXY)
    if found:
        return found
    local = Path(sys.prefix) / "lib" / "node" / "node_modules" / ".bin" / PROXY
    return str(local) if local.exists() else None


@dataclass(frozen=True)
class ClassRequest:
    """What ``mhalib hub`` was asked to set up: who, where, and the course to copy from."""

    instructor: str
    learners: list[str]
    class_dir: Path
    files: CourseFiles  # solutions, the release to hand out (notebooks), the keys
    hub_config: Path  # JupyterHub's configuration (grading/hub/jupyterhub_config.py)
    create_users: bool = False
    ip: str = "127.0.0.1"
    port: int = 8000


def say(text: str) -> None:
    """Print at once: ``mhalib hub`` replaces itself with JupyterHub right after."""
    print(text, flush=True)


def create_missing_users(names: list[str], state_dir: Path, echo=say) -> None:
    """Create the users in ``names`` that do not exist; their passwords are appended to
    ``state_dir/passwords.txt`` (0600)."""
    missing = [name for name in names if not user_exists(name)]
    if not missing:
        return
    reason = can_manage_users()
    if reason:
        raise ValueError(f"--create-users: {reason}")
    passwords = state_dir / "passwords.txt"
    with open(os.open(passwords, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a") as out:
        for name in missing:
            out.write(f"{name}:{create_user(name)}\n")
    echo(f"mhalib hub: created {', '.join(missing)}; passwords in {passwords}")


def _check_host(request: ClassRequest) -> str:
    """The proxy command, once everything the hub needs on this machine is there."""
    if not request.instructor:
        raise ValueError("--instructor is required: the system user who teaches")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise ValueError("must run as root: JupyterHub starts each user's server as that user")
    proxy = find_proxy()
    if proxy is None or shutil.which("node") is None:
        raise ValueError(f"{PROXY} (and node) not found: `npm install -g {PROXY}` "
                         "(bootstrap.py test installs it into .venv/lib/node)")
    if not request.hub_config.is_file():
        raise ValueError(f"--config={str(request.hub_config)!r} is not a file; run from the "
                         "course's top folder or name it")
    return proxy


def set_up_class(request: ClassRequest, echo=say) -> ClassSettings:
    """Everything ``mhalib hub`` does before it starts JupyterHub; returns the class settings
    (also written to ``<class-dir>/hub/class.json``)."""
    proxy = _check_host(request)
    class_dir = request.class_dir.resolve()
    make_folders(class_dir)
    if request.create_users:
        create_missing_users([request.instructor, *request.learners], class_dir / "hub", echo)
    check_roster(request.instructor, request.learners)
    env = shared_environment(class_dir)
    config_dirs = write_config_dirs(class_dir)
    course = set_up_instructor(request.instructor, request.files)
    close_learner_homes(request.learners)
    settings = ClassSettings(
        class_dir=str(class_dir), instructor=request.instructor, learners=request.learners,
        ip=request.ip, port=request.port, hub_port=free_loopback_port(),
        proxy_api_port=free_loopback_port(), proxy_command=proxy, python=str(env.python),
        env_bin=str(env.bin), config_dirs=config_dirs, instructor_keys=str(course.keys))
    settings.write()
    echo(f"mhalib hub: class in {class_dir} (environment: {env.prefix}"
         f"{', layered' if env.layered else ''}); course of {request.instructor} in "
         f"{course.root}")
    if others_can_reach(request.files.solutions):
        echo(f"mhalib hub: WARNING: {request.files.solutions} is readable by every user, so "
             "learners can read the solutions there; keep the course's clone private "
             "(chmod 700) on a machine learners use")
    return settings


def start(settings: ClassSettings, config: Path) -> None:
    """Replace this process with JupyterHub for the class in ``settings``, configured by
    ``config``."""
    config = config.resolve()
    env = {**os.environ, SETTINGS_VARIABLE: str(settings.state_dir / "class.json")}
    host = "127.0.0.1" if settings.ip in ("", "0.0.0.0") else settings.ip
    print(f"mhalib hub: open http://{host}:{settings.port}/hub/login "
          "(stop with Ctrl+C)", flush=True)
    os.chdir(settings.state_dir)
    os.execve(sys.executable, [sys.executable, "-m", "jupyterhub", "-f", str(config)], env)
