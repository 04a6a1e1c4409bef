"""The sandbox learner code runs in: bubblewrap around a warm zygote process (host side).

With bubblewrap (Debian package ``bubblewrap``) the zygote sees a read-only system and Python,
an answer-free copy of mhalib, and nothing else of the host: no network, no home folder, no
solutions/, no gradebook, no other student's work. Inside, each notebook gets its own mount,
PID and IPC namespaces (see :mod:`mhalib.grading.sandbox.zygote`). Without bubblewrap the same
zygote runs as a plain process: time, memory, output and process limits still apply, but files
and network are NOT isolated; :func:`choose_mode` says so loudly.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mhalib.grading.sandbox_package import write_answer_free_copy

PACKAGE_MOUNT = "/opt/mhalib-grader"
ZYGOTE = "mhalib.grading.sandbox.zygote"  # the module the sandbox runs
EXCHANGE = "/exchange"
EXCHANGE_BYTES = 192 * 1024 * 1024
PREIMPORT = ["numpy", "torch", "matplotlib", "IPython", "mhalib.checks", "mhalib.quiz",
             "torch.utils.flop_counter", "ipywidgets", "IPython.display"]


def preimports() -> list[str]:
    """What the zygote imports once: the libraries, then every lesson's plots and widgets (the
    set-up cells import them), so that neither a notebook nor a physical check's replay (which
    may open no file) pays for an import."""
    from mhalib import course

    return PREIMPORT + [lesson.viz for lesson in course.LESSONS]


STARTUP_SECONDS = 120.0
MAX_REPLY_BYTES = 512 * 1024 * 1024
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
              "nsswitch.conf", "alternatives", "mime.types", "os-release")
NO_SANDBOX_WARNING = (
    "WARNING: bubblewrap (bwrap) is not usable here ({reason}).\n"
    "WARNING: learner code will run WITHOUT file-system or network isolation: it can read\n"
    "WARNING: solutions/, the gradebook and other students' work. Time, memory, output and\n"
    "WARNING: process limits still apply. Install it with: apt-get install -y bubblewrap"
)


class SandboxError(RuntimeError):
    """The sandbox could not start, or its zygote died or stopped answering."""


def _bwrap_namespaces() -> list[str]:
    return ["--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]


PREFIX_HOLD = "/opt/mhalib-prefix"
_PRIVATE_TOPS = ("/tmp/", "/dev/shm/")


def _python_prefixes() -> list[str]:
    """The Python installation(s) the sandbox must see (a venv and the interpreter under it)."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted(p for p in prefixes if not p.startswith("/usr/"))


def prefixes_under_private_tops() -> list[tuple[str, str]]:
    """(hold, prefix) for each Python prefix below /tmp or /dev/shm: every notebook gets a fresh
    /tmp, which would hide it, so the zygote binds it again from ``hold`` after the swap."""
    return [(f"{PREFIX_HOLD}/{index}", prefix)
            for index, prefix in enumerate(_python_prefixes())
            if (prefix + "/").startswith(_PRIVATE_TOPS)]


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/lib", "/lib32", "/lib64", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in _ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
    for prefix in _python_prefixes():
        args += ["--ro-bind", prefix, prefix]
    for hold, prefix in prefixes_under_private_tops():
        args += ["--ro-bind", prefix, hold]
    return args


def bwrap_problem(bwrap: str | None = None) -> str | None:
    """None if bubblewrap works here with the namespaces the sandbox needs, else why not."""
    bwrap = bwrap or shutil.which("bwrap")
    if not bwrap:
        return "the bwrap program is not installed"
    command = [bwrap, *_bwrap_namespaces(), *_system_binds(), "--proc", "/proc", "--dev", "/dev",
               "--", sys.executable, "-c", "pass"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"running bwrap failed: {error}"
    if done.returncode:
        return f"bwrap exited with {done.returncode}: {done.stderr.strip()[:300]}"
    return None


def choose_mode(requested: str = "auto", echo=print) -> str:
    """Resolve ``auto``/``bwrap``/``none`` to the mode used, warning loudly without isolation."""
    if requested not in ("auto", "bwrap", "none"):
        raise ValueError(f"sandbox={requested!r} is not one of 'auto', 'bwrap', 'none'")
    if requested == "none":
        echo(NO_SANDBOX_WARNING.format(reason="--sandbox none was asked for"))
        return "none"
    problem = bwrap_problem()
    if problem is None:
        return "bwrap"
    if requested == "bwrap":
        raise SandboxError(f"--sandbox bwrap was asked for but {problem}")
    echo(NO_SANDBOX_WARNING.format(reason=problem))
    return "none"


def _fontcache() -> str | None:
    try:
        import matplotlib

        cache = Path(matplotlib.get_cachedir())
        found = sorted(cache.glob("fontlist-*.json"))
        return str(found[-1]) if found else None
    except Exception:
        return None


class Sandbox:
    """One warm zygote in a sandbox; ``run`` grades one notebook plan in a fresh child."""

    def __init__(self, mode: str, assignment: str | None = None):
        if mode not in ("bwrap", "none"):
            raise ValueError(f"mode={mode!r} is not 'bwrap' or 'none'")
        self.mode = mode
        self.assignment = assignment
        self.process: subprocess.Popen | None = None
        self.info: dict = {}
        self._buffer = b""
        self._home = Path(tempfile.mkdtemp(prefix="mhalib-sandbox-"))
        self._package = write_answer_free_copy(self._home / "package", assignment)
        self._log_path = self._home / "zygote.log"

    def _environment(self, package: str, scratch: str) -> dict:
        path = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin",
                                "/bin"])
        return {"PATH": path, "HOME": scratch, "PYTHONPATH": package, "MHALIB_GRADING": "1",
                "MPLBACKEND": "Agg",
                "MPLCONFIGDIR": str(self._home / "mpl") if self.mode == "none" else "/tmp/mpl",
                "IPYTHONDIR": "/tmp/ipython" if self.mode == "bwrap"
                else str(self._home / "ipython"),
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "LANG": "C.UTF-8",
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "TORCH_NUM_THREADS": "1", "TERM": "dumb"}

    def _command(self) -> tuple[list[str], dict]:
        fontcache = _fontcache()
        if self.mode == "none":
            exchange = str(self._home / "exchange")
            os.makedirs(exchange, exist_ok=True)
            config = {"exchange": exchange, "namespaces": False, "preimport": preimports(),
                      "fontcache": fontcache}
            env = self._environment(str(self._package), str(self._home))
            return [sys.executable, "-m", ZYGOTE, json.dumps(config)], env
        config = {"exchange": EXCHANGE, "namespaces": True, "preimport": preimports(),
                  "fontcache": "/opt/mpl-seed/fontlist.json" if fontcache else None,
                  "rebind": prefixes_under_private_tops()}
        # /proc, /dev and /tmp first: a Python installation under /tmp is bound on top of them
        command = [shutil.which("bwrap"), *_bwrap_namespaces(),
                   "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", *_system_binds(),
                   "--ro-bind", str(self._package), PACKAGE_MOUNT,
                   "--size", str(EXCHANGE_BYTES), "--tmpfs", EXCHANGE, "--dir", "/scratch",
                   "--chdir", "/scratch", "--hostname", "grader", "--clearenv"]
        if fontcache:
            command += ["--ro-bind", fontcache, "/opt/mpl-seed/fontlist.json"]
        for key, value in self._environment(PACKAGE_MOUNT, "/scratch").items():
            command += ["--setenv", key, value]
        command += ["--", sys.executable, "-m", ZYGOTE, json.dumps(config)]
        return command, {}

    def start(self) -> dict:
        """Start the zygote and wait until it has imported everything; returns its hello."""
        self.close()
        command, env = self._command()
        log = open(self._log_path, "ab")
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env=env or None, cwd=str(self._home), start_new_session=True)
        log.close()
        self._buffer = b""
        self.info = self._read_message(STARTUP_SECONDS)
        if not self.info.get("ready"):
            raise SandboxError(f"the zygote did not start: {self.info}")
        return self.info

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, size: int = 2000) -> str:
        try:
            data = self._log_path.read_bytes()[-size:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace")

    def _read_message(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxError(f"the zygote did not answer within {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise SandboxError("the zygote died; its log ends with:\n" + self.log_tail())
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES:
                raise SandboxError("the zygote's reply is larger than the grader accepts")
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, plan: dict, files: dict[str, str] | None = None,
            class_cache: dict[str, str] | None = None) -> dict:
        """Run one notebook plan (see :mod:`mhalib.grading.plan`); returns the zygote's result.

        ``files`` (relative path -> base64) go into the notebook's folder; ``class_cache``
        (file name -> base64) holds the class run's results (:mod:`~.sandbox.class_cache`).

        Raises :class:`SandboxError` when the zygote itself dies or hangs; the caller restarts.
        """
        if not self.running:
            self.start()
        request = {"op": "run", "plan": plan, "files": files or {},
                   "class_cache": class_cache or {}}
        try:
            self.process.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise SandboxError(f"the zygote is gone ({error})") from None
        timeout = float(plan["limits"]["notebook_seconds"]) + 30.0
        try:
            return self._read_message(timeout)
        except SandboxError:
            self.close()
            raise

    def close(self) -> None:
        """Kill the sandbox (and with it, every process inside it)."""
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.kill()
        except OSError:
            pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self._home, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()
