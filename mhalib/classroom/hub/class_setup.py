"""Setting up a class on one machine: folders, permissions, configuration, the instructor's course.

The steps, one function each; :func:`mhalib.classroom.hub.launch.set_up_class` runs them in
order (``mhalib hub setup``). Layout of the class folder (``--class-dir``, e.g.
``/srv/mha-class``, 0755)::

    env/                  the layered Python environment (only when needed, see environment)
    exchange/             nbgrader's exchange, 0777 as nbgrader documents ("chmod ugo+rw")
    config/common/        nbgrader_config.py every user reads: course id, exchange, submit
    config/learner/       JupyterLab page config: no formgrader, no course list
    config/instructor/    JupyterLab page config for the instructor
    hub/                  0700, root only: class.json, JupyterHub's database, cookie secret

The instructor's course lives in their home (0700): ``~/mha-course/`` with ``source/`` (the
solutions, hidden tests included), ``release/``, ``quick_check_keys/``, later ``submitted/``,
``autograded/``, ``feedback/`` and ``gradebook.db``; ``~/.jupyter/nbgrader_config.py`` points
nbgrader there (:func:`mhalib.classroom.nbgrader_config.configure`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mhalib.classroom.course_folder import CourseFiles
from mhalib.classroom.hub.users import check_user_name, home_of, uid_of, user_exists
from mhalib.classroom.nbgrader_config import COURSE_ID
from mhalib.quiz.keys import KEYS_VARIABLE

COURSE_FOLDER = "mha-course"  # the instructor's course, in their home
KEYS_FOLDER = "quick_check_keys"  # in the instructor's course folder
# The hub's own tools, hidden from learners: the server extensions and their JupyterLab parts.
INSTRUCTOR_ONLY_EXTENSIONS = ("nbgrader.server_extensions.formgrader",
                              "nbgrader.server_extensions.course_list")
INSTRUCTOR_ONLY_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                           "@jupyter/nbgrader:create-assignment")
QUIET_PLUGINS = ("@jupyterlab/apputils-extension:announcements",)


@dataclass
class ClassSettings:
    """Everything jupyterhub_config.py needs; written to ``hub/class.json``."""

    class_dir: str
    instructor: str
    learners: list[str]
    ip: str
    port: int
    hub_port: int
    proxy_api_port: int
    proxy_command: str
    python: str
    env_bin: str
    course_id: str = COURSE_ID
    config_dirs: dict[str, str] = field(default_factory=dict)
    instructor_keys: str = ""  # the quick-check keys in the instructor's course

    @property
    def state_dir(self) -> Path:
        return Path(self.class_dir) / "hub"

    def write(self) -> Path:
        path = self.state_dir / "class.json"
        path.write_text(json.dumps(asdict(self), indent=2))
        path.chmod(0o600)
        return path

    @classmethod
    def read(cls, path: str | Path) -> ClassSettings:
        return cls(**json.loads(Path(path).read_text()))

    def environment(self, role: str) -> dict[str, str]:
        """What a user's server and terminal of ``role`` ("learner" or "instructor") get:
        the class's tools first on PATH, the role's JupyterLab and nbgrader configuration, and
        for the instructor the quick-check keys of their course."""
        if role not in ("learner", "instructor"):
            raise ValueError(f"role={role!r} must be 'learner' or 'instructor'")
        env = {"PATH": os.pathsep.join([self.env_bin, "/usr/local/bin", "/usr/bin", "/bin"]),
               "JUPYTER_CONFIG_PATH": os.pathsep.join([self.config_dirs[role],
                                                       self.config_dirs["common"]])}
        if role == "instructor" and self.instructor_keys:
            env[KEYS_VARIABLE] = self.instructor_keys
        return env


def check_roster(instructor: str, learners: list[str]) -> None:
    """Every name valid, an existing system user, and nobody both instructor and learner."""
    for name in [instructor, *learners]:
        check_user_name(name)
        if not user_exists(name):
            raise ValueError(f"user {name!r} does not exist on this machine; create it "
                             "(useradd, or `mhalib hub --create-users`)")
        if uid_of(name) == 0:
            raise ValueError(f"user {name!r} has uid 0: their server would run as root")
    if instructor in learners:
        raise ValueError(f"--instructor={instructor!r} is also in --learners")
    if not learners:
        raise ValueError("--learners is empty: name at least one learner")


def make_folders(class_dir: Path) -> None:
    """The class folder (0755), the exchange (0777) and the hub's private state (0700)."""
    for folder, mode in [(class_dir, 0o755), (class_dir / "exchange", 0o777),
                         (class_dir / "config", 0o755), (class_dir / "hub", 0o700)]:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(mode)


def _nbgrader_common(class_dir: Path) -> str:
    return (
        '"""nbgrader settings every user of the class hub reads (written by mhalib hub)."""\n'
        "from mhalib.classroom.nbgrader_config import configure_exchange\n\n"
        "c = get_config()  # noqa: F821\n"
        f"configure_exchange(c, {str(class_dir / 'exchange')!r})\n")


def write_config_dirs(class_dir: Path) -> dict[str, str]:
    """The shared nbgrader settings and the per-role JupyterLab page configs; role -> path."""
    config = class_dir / "config"
    dirs = {role: config / role for role in ("common", "learner", "instructor")}
    for folder in dirs.values():
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
    (dirs["common"] / "nbgrader_config.py").write_text(_nbgrader_common(class_dir))
    for role, plugins in [("learner", QUIET_PLUGINS + INSTRUCTOR_ONLY_PLUGINS),
                          ("instructor", QUIET_PLUGINS)]:
        labconfig = dirs[role] / "labconfig"
        labconfig.mkdir(exist_ok=True)
        labconfig.chmod(0o755)
        page = {"disabledExtensions": {name: True for name in plugins}}
        (labconfig / "page_config.json").write_text(json.dumps(page, indent=2))
    for path in config.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    return {role: str(path) for role, path in dirs.items()}


def instructor_course(instructor: str) -> CourseFiles:
    """The instructor's private course folder on the hub, laid out as nbgrader's defaults."""
    return CourseFiles.nbgrader(home_of(instructor) / COURSE_FOLDER, KEYS_FOLDER)


def _instructor_nbgrader(course: CourseFiles) -> str:
    """The instructor's nbgrader config: the course's configuration, on their course folder."""
    return (
        '"""The instructor\'s nbgrader settings on the class hub (written by mhalib hub)."""\n'
        "from mhalib.classroom.course_folder import CourseFiles\n"
        "from mhalib.classroom.nbgrader_config import configure\n\n"
        "c = get_config()  # noqa: F821\n"
        f"configure(c, CourseFiles.nbgrader({str(course.root)!r}, {KEYS_FOLDER!r}))\n")


def set_up_instructor(instructor: str, files: CourseFiles) -> CourseFiles:
    """Copy the lessons into the instructor's private course folder; return that course.

    ``source/`` comes from ``files.solutions`` (hidden tests included), ``release/`` from
    ``files.notebooks`` (what learners get: a practice or an assessed release) and
    ``quick_check_keys/`` from ``files.keys`` (the instructor's quick-check keys), all replaced
    on every set-up; what the class produced (submissions, grades, feedback, the gradebook) is
    kept.
    """
    for name, folder in [("--solutions", files.solutions), ("--notebooks", files.notebooks),
                         ("--keys", files.keys)]:
        if not folder.is_dir():
            raise ValueError(f"{name}={str(folder)!r} is not a folder; run from the course's "
                             "top folder or name it")
    home = home_of(instructor)
    course = instructor_course(instructor)
    for origin, target in [(files.solutions, course.solutions),
                           (files.notebooks, course.notebooks), (files.keys, course.keys)]:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(origin, target,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    jupyter = home / ".jupyter"
    jupyter.mkdir(exist_ok=True)
    (jupyter / "nbgrader_config.py").write_text(_instructor_nbgrader(course))
    _give_to_owner_of(home, [course.root, jupyter])
    home.chmod(0o700)
    course.root.chmod(0o700)
    return course


def close_learner_homes(learners: list[str]) -> None:
    """Learners' homes readable by their owner only (useradd may make them 0755)."""
    for learner in learners:
        home_of(learner).chmod(0o700)


def _give_to_owner_of(home: Path, trees: list[Path]) -> None:
    uid, gid = home.stat().st_uid, home.stat().st_gid
    for tree in trees:
        os.chown(tree, uid, gid)
        for path in tree.rglob("*"):
            os.chown(path, uid, gid, follow_symlinks=False)
