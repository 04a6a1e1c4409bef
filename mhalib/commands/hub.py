"""``mhalib hub``: set up a class on this machine and start JupyterHub for it.

    sudo .venv/bin/mhalib hub --instructor teacher --learners ada,bert --class-dir /srv/mha-class

Run as root from the course's top folder. It makes the class folder (shared environment,
nbgrader exchange, configuration), copies the lessons into the instructor's private course
folder, then runs JupyterHub (grading/hub/jupyterhub_config.py) in this process until Ctrl+C.
``setup`` does everything but start the hub. As the instructor, after ``mhalib grade``,
``mhalib hub feedback 01-single-head`` returns the feedback through the exchange.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

HELP = "set up a class on this machine (users, nbgrader exchange) and start JupyterHub for it"
PROXY = "configurable-http-proxy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("start", "setup", "feedback"),
                        default="start",
                        help="start (default): set up and run the hub; setup: only set up; "
                             "feedback ASSIGNMENT: as the instructor, return graded feedback")
    parser.add_argument("assignment", nargs="?", help="with feedback: the assignment id")
    parser.add_argument("--class-dir", type=Path, default=Path("/srv/mha-class"),
                        help="folder for the exchange, environment and hub state "
                             "(default: /srv/mha-class)")
    parser.add_argument("--instructor", help="system user who teaches (admin, formgrader)")
    parser.add_argument("--learners", default="",
                        help="comma-separated system users who learn, e.g. ada,bert")
    parser.add_argument("--create-users", action="store_true",
                        help="create missing users; their passwords go to "
                             "<class-dir>/hub/passwords.txt (root only)")
    parser.add_argument("--ip", default="127.0.0.1",
                        help="address browsers reach the hub on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="the hub's port (default 8000)")
    parser.add_argument("--config", type=Path, default=Path("grading/hub/jupyterhub_config.py"),
                        help="JupyterHub config (default: grading/hub/jupyterhub_config.py)")
    parser.add_argument("--solutions", type=Path, default=Path("solutions"),
                        help="instructor sources to copy into the course (default: solutions)")
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"),
                        help="learner release to copy into the course (default: notebooks)")
    parser.add_argument("--course", type=Path, default=None,
                        help="with feedback: the instructor's course (default: ~/mha-course)")


def free_loopback_port() -> int:
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


def _learners(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _create_missing(names: list[str], state_dir: Path) -> None:
    from mhalib.hub_users import can_manage_users, create_user, user_exists

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
    print(f"mhalib hub: created {', '.join(missing)}; passwords in {passwords}", flush=True)


def set_up(args: argparse.Namespace):
    """Everything but starting the hub; returns the class settings."""
    from mhalib import hub_class
    from mhalib.hub_env import others_can_reach, shared_environment

    if not args.instructor:
        raise ValueError("--instructor is required: the system user who teaches")
    learners = _learners(args.learners)
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise ValueError("must run as root: JupyterHub starts each user's server as that user")
    proxy = find_proxy()
    if proxy is None or shutil.which("node") is None:
        raise ValueError(f"{PROXY} (and node) not found: `npm install -g {PROXY}` "
                         "(bootstrap.py test installs it into .venv/lib/node)")
    if not args.config.is_file():
        raise ValueError(f"--config={str(args.config)!r} is not a file; run from the course's "
                         "top folder")
    class_dir = args.class_dir.resolve()
    hub_class.make_folders(class_dir)
    if args.create_users:
        _create_missing([args.instructor, *learners], class_dir / "hub")
    hub_class.check_roster(args.instructor, learners)
    env = shared_environment(class_dir)
    config_dirs = hub_class.write_config_dirs(class_dir)
    course = hub_class.set_up_instructor(args.instructor, args.solutions.resolve(),
                                         args.notebooks.resolve())
    hub_class.close_learner_homes(learners)
    settings = hub_class.settings_for(
        class_dir, env, args.instructor, learners, args.ip,
        (args.port, free_loopback_port(), free_loopback_port()), proxy, config_dirs)
    settings.write()
    print(f"mhalib hub: class in {class_dir} (environment: {env.prefix}"
          f"{', layered' if env.layered else ''}); course of {args.instructor} in {course}",
          flush=True)
    if others_can_reach(args.solutions):
        print(f"mhalib hub: WARNING: {args.solutions.resolve()} is readable by every user, so "
              "learners can read the solutions there; keep the course's clone private "
              "(chmod 700) on a machine learners use", flush=True)
    return settings


def start(settings, config: Path) -> None:
    """Replace this process with JupyterHub (signals reach it directly)."""
    config = config.resolve()
    env = {**os.environ, "MHALIB_HUB_CLASS": str(settings.state_dir / "class.json")}
    host = "127.0.0.1" if settings.ip in ("", "0.0.0.0") else settings.ip
    print(f"mhalib hub: open http://{host}:{settings.port}/hub/login "
          "(stop with Ctrl+C)", flush=True)
    os.chdir(settings.state_dir)
    os.execve(sys.executable, [sys.executable, "-m", "jupyterhub", "-f", str(config)],
              env)


def return_feedback(args: argparse.Namespace) -> int:
    from mhalib.hub_class import COURSE_FOLDER
    from mhalib.hub_feedback import release_feedback

    if not args.assignment:
        raise ValueError("feedback needs the assignment id, e.g. `mhalib hub feedback "
                         "01-single-head`")
    course = (args.course or Path.home() / COURSE_FOLDER).resolve()
    nbgrader = shutil.which("nbgrader") or str(Path(sys.executable).parent / "nbgrader")
    students = release_feedback(course, args.assignment, nbgrader)
    print(f"mhalib hub: feedback on {args.assignment} released to {', '.join(students)}")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "feedback":
            return return_feedback(args)
        settings = set_up(args)
    except (ValueError, RuntimeError) as error:
        print(f"mhalib hub: error: {error}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as error:
        print(f"mhalib hub: error: `{' '.join(map(str, error.cmd))}` exited with "
              f"{error.returncode}", file=sys.stderr)
        return 1
    if args.action == "start":
        start(settings, args.config)
    return 0
