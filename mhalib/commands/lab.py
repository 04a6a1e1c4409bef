"""``mhalib lab``: start JupyterLab on the lessons, with lesson 01 open.

Two ways to start it:

- learner (default): the server's root is ``notebooks/``; the browser opens the
  first lesson. nbgrader's instructor tools (formgrader, exchange lists) are
  switched off so that their menus do not appear; nbgrader's *Validate* button
  stays.
- instructor (``--instructor``): the server's root is the folder holding
  ``notebooks/`` and ``grading/``, the server runs inside ``grading/`` so that
  nbgrader reads ``grading/nbgrader_config.py``, and the browser opens
  nbgrader's formgrader on the course. (Formgrader only works when the course
  folder lies inside the server's root, hence the wider root.)

Jupyter runs in this process; its own configuration is kept, and what this
command sets is passed on Jupyter's command line, where it wins. Arguments
after ``--`` go to Jupyter unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import sys
import sysconfig
import tempfile
from pathlib import Path

HELP = "Start JupyterLab on the lessons (lesson 01 open); --instructor opens nbgrader's formgrader."

DEFAULT_PORT = 8888
PORTS_TO_TRY = 50

# Server extensions that only make sense for an instructor with a course folder.
INSTRUCTOR_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.assignment_list",
    "nbgrader.server_extensions.course_list",
)
# Their JupyterLab front-ends, hidden from learners.
INSTRUCTOR_LAB_PLUGINS = (
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:assignment-list",
    "@jupyter/nbgrader:course-list",
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:menu",
)
# Hidden in both modes: the first-run "receive Jupyter news?" pop-up (it would fetch from the web).
QUIET_LAB_PLUGINS = ("@jupyterlab/apputils-extension:announcements",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=None,
                        help=f"port to serve on (default: the first free one from {DEFAULT_PORT})")
    parser.add_argument("--ip", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--no-browser", action="store_true",
                        help="do not open a web browser; just print the address")
    parser.add_argument("--notebook-dir", default="notebooks", type=Path,
                        help="folder of the learner notebooks (default: notebooks)")
    parser.add_argument("--instructor", action="store_true",
                        help="serve the whole course and open nbgrader's formgrader")
    parser.add_argument("--course-dir", default="grading", type=Path,
                        help="with --instructor: the folder of nbgrader_config.py "
                             "(default: grading)")
    parser.add_argument("jupyter_args", nargs=argparse.REMAINDER,
                        help="after --: options passed to JupyterLab unchanged")


def first_lesson(notebook_dir: Path) -> Path | None:
    """The first lesson notebook (folders in name order), relative to ``notebook_dir``."""
    for lesson in sorted(p for p in notebook_dir.iterdir() if p.is_dir()):
        notebooks = sorted(lesson.glob("*.ipynb"))
        if notebooks:
            return notebooks[0].relative_to(notebook_dir)
    return None


def free_port(ip: str, start: int = DEFAULT_PORT, tries: int = PORTS_TO_TRY) -> int:
    """The first port from ``start`` on which nothing listens at ``ip``."""
    for port in range(start, start + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((ip, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {start}..{start + tries - 1} on ip={ip!r}; pass --port")


def write_page_config(config_dir: Path, disabled_plugins: tuple[str, ...]) -> None:
    """Write ``labconfig/page_config.json`` that switches the given JupyterLab plugins off."""
    labconfig = config_dir / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    page_config = {"disabledExtensions": {name: True for name in disabled_plugins}}
    (labconfig / "page_config.json").write_text(json.dumps(page_config, indent=2))


def jupyter_argv(args: argparse.Namespace, root: Path, default_url: str, port: int,
                 token: str) -> list[str]:
    """The JupyterLab command line for this launch (options only, no program name)."""
    argv = [
        f"--ServerApp.root_dir={root}",
        f"--ServerApp.ip={args.ip}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.open_browser={not args.no_browser}",
        f"--IdentityProvider.token={token}",
        f"--LabApp.default_url={default_url}",
    ]
    if not args.instructor:
        argv += [f"--ServerApp.jpserver_extensions={name}=False"
                 for name in INSTRUCTOR_SERVER_EXTENSIONS]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Containers often run as root; the server still listens on args.ip with a token.
        argv.append("--ServerApp.allow_root=True")
    extra = list(args.jupyter_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    return argv + extra


def put_scripts_on_path() -> None:
    """Make this environment's commands (``alembic``, ``nbgrader``) findable by name.

    nbgrader runs ``alembic`` through ``PATH`` when it creates a gradebook, which fails when
    the virtual environment was not activated (``.venv/bin/python -m mhalib lab``).
    """
    scripts = sysconfig.get_path("scripts")
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if scripts and scripts not in parts:
        os.environ["PATH"] = os.pathsep.join([scripts, *[p for p in parts if p]])


def prepare_gradebook_folder(course_dir: Path) -> None:
    """Create the folder of the course's SQLite gradebook, which nbgrader will not create.

    Without it formgrader answers every request with "unable to open database file".
    """
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course_dir)).load_config()
    db_url = config.CourseDirectory.get("db_url", "")
    if isinstance(db_url, str) and db_url.startswith("sqlite:///"):
        Path(db_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def resolve_layout(args: argparse.Namespace) -> tuple[Path, Path, str]:
    """(server root, working folder, URL path to open) for the chosen mode."""
    notebook_dir = args.notebook_dir.resolve()
    if not notebook_dir.is_dir():
        raise ValueError(f"--notebook-dir={str(args.notebook_dir)!r} is not a folder "
                         f"(looked in {Path.cwd()}); run from the course's top folder")
    if not args.instructor:
        lesson = first_lesson(notebook_dir)
        default_url = f"/lab/tree/{lesson.as_posix()}" if lesson else "/lab"
        return notebook_dir, notebook_dir, default_url
    course_dir = args.course_dir.resolve()
    if not (course_dir / "nbgrader_config.py").is_file():
        raise ValueError(f"--course-dir={str(args.course_dir)!r} holds no nbgrader_config.py")
    root = Path(os.path.commonpath([notebook_dir.parent, course_dir]))
    return root, course_dir, "/formgrader"


def run(args: argparse.Namespace) -> int:
    try:
        root, workdir, default_url = resolve_layout(args)
    except ValueError as error:
        print(f"mhalib lab: {error}", file=sys.stderr)
        return 2
    port = args.port if args.port is not None else free_port(args.ip)
    token = os.environ.get("JUPYTER_TOKEN") or secrets.token_hex(24)

    disabled = QUIET_LAB_PLUGINS + (() if args.instructor else INSTRUCTOR_LAB_PLUGINS)
    with tempfile.TemporaryDirectory(prefix="mhalib-lab-") as scratch:
        write_page_config(Path(scratch), disabled)
        extra_paths = [scratch] + [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(
            os.pathsep) if p]
        os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(extra_paths)
        put_scripts_on_path()

        host = "127.0.0.1" if args.ip in ("", "0.0.0.0") else args.ip
        url = f"http://{host}:{port}{default_url}?token={token}"
        what = "nbgrader formgrader" if args.instructor else "the first lesson"
        print(f"mhalib lab: JupyterLab on {root}", flush=True)
        print(f"mhalib lab: open {what} at {url}", flush=True)
        print("mhalib lab: stop with Ctrl+C (twice to skip the question)", flush=True)

        from jupyterlab.labapp import LabApp  # imported here: slow, and only this command needs it

        os.chdir(workdir)
        if args.instructor:
            prepare_gradebook_folder(workdir)
        LabApp.launch_instance(argv=jupyter_argv(args, root, default_url, port, token))
    return 0
