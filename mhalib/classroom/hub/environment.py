"""The Python environment every user of a class hub runs: the course package, for everyone.

JupyterHub starts each user's server *as that user*, so the interpreter, its standard library,
the installed packages and mhalib must be readable by every user. When the environment that
runs ``mhalib hub`` already is (an admin installed the course into ``/opt/...``), it is used
as it is. When it is not (a virtual environment whose interpreter sits in a private home, as
pyenv puts it), a *layered* environment is made in the class folder: a virtual environment
of a world-readable interpreter of the same Python version, holding hard links to the
installing environment's packages (no second download, no extra space), its own copy of
mhalib and of the console scripts.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import mhalib

INTERPRETER_FOLDERS = ("/usr/local/bin", "/usr/bin")


@dataclass(frozen=True)
class SharedEnvironment:
    prefix: Path  # what sys.prefix is inside it
    python: Path  # its interpreter, as the users start it
    layered: bool  # True when built in the class folder on top of the installing environment

    @property
    def bin(self) -> Path:
        return self.prefix / "bin"


def others_can_reach(path: Path | str, execute: bool = False) -> bool:
    """Whether a user who is neither owner nor group member can read ``path`` (a file or folder).

    Every folder above it must be searchable by others; the path itself readable (folders also
    searchable, files also executable when ``execute``). Links are followed.
    """
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode
    except OSError:
        return False
    need = stat.S_IROTH | (stat.S_IXOTH if execute or stat.S_ISDIR(mode) else 0)
    if mode & need != need:
        return False
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in target.parents)


def _needed_paths() -> list[tuple[Path, bool]]:
    paths = sysconfig.get_paths()
    return [(Path(sys.executable), True), (Path(paths["stdlib"]), False),
            (Path(paths["purelib"]), False), (Path(paths["platlib"]), False),
            (Path(mhalib.__file__).parent, False)]


def current_is_shared() -> bool:
    """Whether every user can run this very environment (interpreter, packages, mhalib)."""
    return all(others_can_reach(path, execute) for path, execute in _needed_paths())


def world_readable_interpreter() -> Path:
    """A Python of this version (major.minor) that every user can run.

    This environment's own base interpreter when it is reachable, else ``python3.X`` from
    /usr/local/bin or /usr/bin.
    """
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(getattr(sys, "_base_executable", sys.executable))]
    candidates += [Path(folder) / version for folder in INTERPRETER_FOLDERS]
    for candidate in candidates:
        if candidate.exists() and others_can_reach(candidate, execute=True):
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise RuntimeError(f"no {version} that every user may run (tried {tried}); install one "
                       f"(e.g. apt-get install {version}) or install the course into a shared "
                       "environment and run `mhalib hub` from it")


def _link_or_copy(source: str, target: str) -> str:
    """Hard-link ``source`` to ``target`` (instant, no space); copy across file systems."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    return target


def build_layered(target: Path) -> SharedEnvironment:
    """Make ``target`` a virtual environment that every user can run, with this one's packages.

    Its interpreter is a world-readable Python of the same version; the packages, JupyterLab's
    assets and the server configuration are hard links to this environment's files (copies
    across file systems), so the grader's sandbox, which mounts ``sys.prefix``, sees them all.
    """
    interpreter = world_readable_interpreter()
    subprocess.run([str(interpreter), "-m", "venv", "--clear", "--without-pip", str(target)],
                   check=True, stdout=subprocess.DEVNULL)
    env = SharedEnvironment(prefix=target, python=target / "bin" / "python", layered=True)
    own_site = Path(subprocess.run(
        [str(env.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    editable = shutil.ignore_patterns("__editable__*", "mhalib")  # bytecode comes along
    shutil.copytree(sysconfig.get_paths()["purelib"], own_site, symlinks=True,
                    ignore=editable, copy_function=_link_or_copy, dirs_exist_ok=True)
    # The course package itself is copied, so that the users' kernels never read the clone,
    # and compiled now: users cannot write bytecode there.
    shutil.copytree(Path(mhalib.__file__).parent, own_site / "mhalib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([str(env.python), "-m", "compileall", "-q", str(own_site / "mhalib")],
                   check=True, stdout=subprocess.DEVNULL)
    for shared in ("share", "etc"):  # JupyterLab's assets and extensions, server extension config
        if (Path(sys.prefix) / shared).is_dir():
            shutil.copytree(Path(sys.prefix) / shared, target / shared, symlinks=True,
                            copy_function=_link_or_copy, dirs_exist_ok=True)
    _copy_console_scripts(Path(sys.prefix) / "bin", env.bin, env.python)
    return env


def _copy_console_scripts(source: Path, target: Path, python: Path) -> None:
    """Copy the entry-point scripts (``nbgrader``, ``mhalib``, ``alembic``...), re-pointed."""
    own_python = str(Path(sys.prefix) / "bin" / "python")
    for script in sorted(source.iterdir()):
        if script.name.startswith(("python", "activate", "Activate")) or not script.is_file():
            continue
        try:
            text = script.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        first, _, rest = text.partition("\n")
        if first.startswith("#!") and first[2:].strip().startswith(own_python):
            (target / script.name).write_text(f"#!{python}\n{rest}")
            (target / script.name).chmod(0o755)


def shared_environment(class_root: Path) -> SharedEnvironment:
    """The environment the class runs: this one when every user can run it, else a layer."""
    if current_is_shared():
        return SharedEnvironment(prefix=Path(sys.prefix), python=Path(sys.executable),
                                 layered=False)
    return build_layered(class_root / "env")
