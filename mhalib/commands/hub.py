"""``mhalib hub``: set up a class on this machine and start JupyterHub for it.

    sudo .venv/bin/mhalib hub --instructor teacher --learners ada,bert --class-dir /srv/mha-class

Run as root in the course's top folder (or name it: ``--root`` or ``MHALIB_COURSE_ROOT``). It
makes the class folder (shared environment, nbgrader exchange, configuration), copies the
lessons into the instructor's private course folder, then runs JupyterHub
(grading/hub/jupyterhub_config.py) in this process until Ctrl+C. ``setup`` does everything but
start the hub. As the instructor, after ``mhalib grade``, ``mhalib hub feedback 01-single-head``
returns the feedback through the exchange. The work is :mod:`mhalib.classroom.hub`'s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HELP = "set up a class on this machine (users, nbgrader exchange) and start JupyterHub for it"
HUB_CONFIG = Path("grading") / "hub" / "jupyterhub_config.py"  # in the course's top folder


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
    parser.add_argument("--root", type=Path,
                        help="the course's top folder (default: MHALIB_COURSE_ROOT, else the "
                             "working directory)")
    parser.add_argument("--config", type=Path,
                        help=f"JupyterHub config (default: {HUB_CONFIG} of the course)")
    parser.add_argument("--solutions", type=Path,
                        help="instructor sources to copy into the course (default: solutions "
                             "of the course)")
    parser.add_argument("--notebooks", type=Path,
                        help="learner release to copy into the course (default: notebooks of "
                             "the course)")
    parser.add_argument("--keys", type=Path, metavar="DIR",
                        help="quick-check keys to copy into the course (default: "
                             "MHALIB_QUICK_CHECK_KEYS, else grading/quick_checks of the course)")
    parser.add_argument("--course", type=Path, default=None,
                        help="with feedback: the instructor's course (default: ~/mha-course)")


def _learners(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _request(args: argparse.Namespace):
    from mhalib.classroom.course_folder import locate
    from mhalib.classroom.hub.launch import ClassRequest

    files = locate(args.root, solutions=args.solutions, notebooks=args.notebooks,
                   keys=args.keys)
    return ClassRequest(instructor=args.instructor, learners=_learners(args.learners),
                        class_dir=args.class_dir, files=files,
                        hub_config=(args.config or files.root / HUB_CONFIG).resolve(),
                        create_users=args.create_users, ip=args.ip, port=args.port)


def _return_feedback(args: argparse.Namespace) -> int:
    from mhalib.classroom.hub.class_setup import COURSE_FOLDER
    from mhalib.classroom.hub.feedback import release_feedback

    if not args.assignment:
        raise ValueError("feedback needs the assignment id, e.g. `mhalib hub feedback "
                         "01-single-head`")
    course = (args.course or Path.home() / COURSE_FOLDER).resolve()
    students = release_feedback(course, args.assignment)
    print(f"mhalib hub: feedback on {args.assignment} released to {', '.join(students)}")
    return 0


def run(args: argparse.Namespace) -> int:
    from mhalib.classroom.hub.launch import set_up_class, start

    try:
        if args.action == "feedback":
            return _return_feedback(args)
        request = _request(args)
        settings = set_up_class(request)
    except (ValueError, RuntimeError) as error:
        print(f"mhalib hub: error: {error}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as error:
        print(f"mhalib hub: error: `{' '.join(map(str, error.cmd))}` exited with "
              f"{error.returncode}", file=sys.stderr)
        return 1
    if args.action == "start":
        start(settings, request.hub_config)
    return 0
