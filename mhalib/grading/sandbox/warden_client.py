"""The learner process's side of the warden (sandbox side): ask for a seed, hand back a record.

Runs in the learner's process, where nothing is trusted: it only relays. What counts is what the
warden (:mod:`mhalib.grading.sandbox.warden`) issued and sealed.
"""

from __future__ import annotations

import json
import os
import socket

from mhalib.grading.sandbox.warden import ENV_SOCKET, MAX_MESSAGE_BYTES


class WardenError(RuntimeError):
    """The warden refused a request or could not be reached (the message says which)."""


class WardenClient:
    """One connection to the warden, for one recording step."""

    def __init__(self, path: str | None = None, timeout: float = 60.0):
        path = path or os.environ.get(ENV_SOCKET)
        if not path:
            raise WardenError(f"no warden: {ENV_SOCKET} is not set")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self._buffer = b""

    def _ask(self, message: dict) -> dict:
        self.sock.sendall((json.dumps(message) + "\n").encode("utf-8"))
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk or len(self._buffer) > MAX_MESSAGE_BYTES:
                raise WardenError("the warden closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply = json.loads(line)
        if "error" in reply:
            raise WardenError(str(reply["error"]))
        return reply

    def seed(self, exercise: str) -> int:
        """The exercise's seed, issued now and only once."""
        return int(self._ask({"op": "seed", "exercise": exercise})["seed"])

    def submit(self, exercise: str, record: dict) -> None:
        """Hand back the exercise's record; the warden seals it."""
        self._ask({"op": "record", "exercise": exercise, "record": record})

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WardenClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
