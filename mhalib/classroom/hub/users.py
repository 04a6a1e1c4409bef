"""System users of a class hub: one per learner and one for the instructor.

JupyterHub's default authenticator (PAM) logs people in with their system password, and its
local spawner starts each one's server under their own uid, so the file system keeps learners
apart. Creating and removing users needs root and ``useradd``/``userdel`` (shadow-utils).
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
from pathlib import Path

# What useradd accepts on every distribution, and JupyterHub keeps as it is (lower case).
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,30}$")


def check_user_name(name: str) -> str:
    if not USER_NAME.match(name):
        raise ValueError(f"user name {name!r} is not a portable system user name "
                         "(lower-case letters, digits, '_' or '-', at most 31, not starting "
                         "with a digit or '-')")
    return name


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def uid_of(name: str) -> int:
    return pwd.getpwnam(name).pw_uid


def home_of(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


def can_manage_users() -> str | None:
    """None when this process may create system users, else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "creating system users needs root"
    missing = [tool for tool in ("useradd", "userdel", "chpasswd") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (Debian/Ubuntu package `passwd`)"
    return None


def create_user(name: str, password: str | None = None, home: Path | None = None) -> str:
    """Create system user ``name`` with its own group and a private home; return its password.

    ``password`` defaults to a fresh random one. ``home`` defaults to the system's choice
    (``/home/<name>``). The home is made readable by its owner only.
    """
    check_user_name(name)
    if user_exists(name):
        raise ValueError(f"user {name!r} already exists; pick another name or reuse it "
                         "without --create-users")
    password = password or secrets.token_urlsafe(12)
    command = ["useradd", "--create-home", "--user-group", "--shell", "/bin/bash"]
    if home is not None:
        command += ["--home-dir", str(home)]
    subprocess.run([*command, name], check=True, capture_output=True)
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True,
                   capture_output=True)
    home_of(name).chmod(0o700)
    return password


def remove_user(name: str) -> None:
    """Remove user ``name``, its group and its home (nothing if it does not exist)."""
    if not user_exists(name):
        return
    home = home_of(name)
    kill_processes_of(pwd.getpwnam(name).pw_uid)
    subprocess.run(["userdel", "--remove", name], capture_output=True)
    if user_exists(name):
        subprocess.run(["userdel", "--force", "--remove", name], check=True,
                       capture_output=True)
    shutil.rmtree(home, ignore_errors=True)


def kill_processes_of(uid: int) -> list[int]:
    """SIGKILL every process running as ``uid`` (read from /proc); return their ids."""
    if uid == 0:
        raise ValueError("uid=0: refusing to kill root's processes")
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        uids = next((line.split()[1:] for line in status.splitlines()
                     if line.startswith("Uid:")), [])
        if str(uid) in uids:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed
