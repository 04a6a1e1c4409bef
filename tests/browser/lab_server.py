"""Start ``mhalib lab`` as a learner would, in a sandbox, and wait until it answers.

The server runs the real command line (``python -m mhalib lab ...``) on a free loopback port,
with Jupyter's per-user folders (config, data, runtime, IPython, matplotlib) in a temporary
folder, so neither the user's settings nor a previous run can change what the test sees. The
extensions installed in the virtual environment (``<venv>/share/jupyter``) stay visible, since
Jupyter always searches ``sys.prefix``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB_COMMAND = [sys.executable, "-m", "mhalib", "lab"]
URL_LINE = re.compile(r"mhalib lab: open .* at (?P<url>http://\S+)")


def free_loopback_port() -> int:
    """A port nothing listens on at 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def isolated_jupyter_env(scratch: Path) -> dict[str, str]:
    """Environment for a Jupyter server that ignores the user's own Jupyter set-up."""
    env = dict(os.environ)
    for name, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                      ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython"),
                      ("MPLCONFIGDIR", "matplotlib")]:
        folder = scratch / sub
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    # Kernels talk over IPC sockets, not TCP ports: beside the suite's other kernels a kernel
    # once lost its connection to a race for the same free port ("Connecting" for minutes).
    ipc = scratch / "ipc"
    ipc.mkdir(parents=True, exist_ok=True)
    (scratch / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"KernelManager": {"transport": "ipc", "ip": str(ipc / "kernel")}}))
    for name in ("JUPYTER_CONFIG_PATH", "JUPYTER_PATH", "JUPYTER_TOKEN", "JUPYTERLAB_SETTINGS_DIR",
                 "JUPYTERLAB_WORKSPACES_DIR", "JUPYTERLAB_DIR", "MHALIB_GRADING"):
        env.pop(name, None)
    # The kernels must import this working tree's mhalib, whatever is installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class LabServer:
    process: subprocess.Popen
    url: str  # what `mhalib lab` printed: the page it opens, with the token
    log_path: Path

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``"""
        return re.match(r"http://[^/]+", self.url).group(0)

    @property
    def token(self) -> str:
        return re.search(r"token=(\w+)", self.url).group(1)

    def page_url(self, path: str) -> str:
        """``path`` on this server, with the token (``path`` starts with ``/``)."""
        return f"{self.base}{path}?token={self.token}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server the way Ctrl+C would, so it shuts its kernels down."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)


def start_lab(cwd: Path, lab_args: list[str], scratch: Path, timeout: float = 90.0,
              browser_command: str | None = None) -> LabServer:
    """Run ``mhalib lab --port P <lab_args>`` in ``cwd``; wait until it answers.

    With ``browser_command`` (as Python's ``webbrowser`` reads it from ``BROWSER``, ``%s``
    standing for the address) the command opens its browser that way; else ``--no-browser``.
    """
    env = isolated_jupyter_env(scratch)
    if browser_command:
        env["BROWSER"] = browser_command
    log_path = scratch / "lab.log"
    command = [*LAB_COMMAND, *([] if browser_command else ["--no-browser"]),
               "--port", str(free_loopback_port()), *lab_args]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"`mhalib lab` exited with {process.returncode}:\n"
                                   f"{log_path.read_text(errors='replace')}")
            match = URL_LINE.search(log_path.read_text(errors="replace"))
            if server is None and match:
                server = LabServer(process, match.group("url"), log_path)
            if server is not None and _answers(server):
                return server
            time.sleep(0.3)
        raise TimeoutError(f"`mhalib lab` did not answer within {timeout:.0f}s:\n"
                           f"{log_path.read_text(errors='replace')}")
    except BaseException:
        process.kill()
        process.wait(timeout=10)
        raise


def _answers(server: LabServer) -> bool:
    request = urllib.request.Request(f"{server.base}/api/status",
                                     headers={"Authorization": f"token {server.token}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def api(server: LabServer, method: str, path: str):
    """One call of the server's REST API (``path`` starts with ``/api``); its JSON, or None."""
    request = urllib.request.Request(f"{server.base}{path}", method=method,
                                     headers={"Authorization": f"token {server.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def shut_down_kernels(server: LabServer) -> None:
    """End every session and its kernel: one notebook's kernel at a time on a shared server
    (eleven warm kernels would not fit beside the browser)."""
    for session in api(server, "GET", "/api/sessions"):
        api(server, "DELETE", f"/api/sessions/{session['id']}")


def open_fresh(page, server: LabServer, path: str) -> None:
    """Open notebook ``path`` on a server other tests used as on one just started: no earlier
    kernel, and (``reset``) an empty workspace, so no earlier tab or kernel comes back."""
    from tests.browser import lab_driver

    shut_down_kernels(server)
    lab_driver.open_notebook(page, server.page_url(f"/lab/tree/{path}") + "&reset")


def print_log_if_failed(request, server: LabServer) -> None:
    """After a test that failed, the end of the JupyterLab log (pytest shows it with the
    failure)."""
    if getattr(request.node, "call_failed", False):
        print(f"--- the end of the JupyterLab log ---\n{server.log()[-6000:]}")
