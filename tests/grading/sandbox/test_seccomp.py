"""The measured process's seccomp filter: what it refuses, and that ordinary torch work runs."""

from __future__ import annotations

import ctypes
import mmap
import os
import threading

import pytest

from mhalib.grading.sandbox import seccomp

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="no system-call table for this "
                                "architecture")


def _in_filtered_child(body) -> dict:
    """Run ``body()`` (returns a dict of str) in a forked child after installing the filter."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            seccomp.install()
            result = body()
            os.write(write_end, repr(result).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 65536):
        data += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    return eval(data.decode())  # noqa: S307 - our own child's repr of a dict of str


def _attempt(action) -> str:
    try:
        action()
        return "allowed"
    except (OSError, RuntimeError):
        return "denied"


def test_threads_processes_files_and_memory_tricks_are_refused():
    def body():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        block = mmap.mmap(-1, 1 << 20)
        address = ctypes.addressof(ctypes.c_char.from_buffer(block))

        def call(result):
            if result != 0:
                raise OSError(ctypes.get_errno(), "refused")

        def fixed_map():
            got = libc.mmap(ctypes.c_void_p(address), 4096, 3, 0x22 | 0x10, -1, 0)
            if got in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), "refused")

        return {
            "fork": _attempt(os.fork),
            "thread": _attempt(lambda: threading.Thread(target=int).start()),
            "open": _attempt(lambda: open("/proc/self/clear_refs", "w")),
            "signal the parent": _attempt(lambda: os.kill(os.getppid(), 0)),
            "signal itself": _attempt(lambda: os.kill(os.getpid(), 0)),
            "new memory": _attempt(lambda: mmap.mmap(-1, 1 << 20)),
            "huge pages advice": _attempt(lambda: call(libc.madvise(
                ctypes.c_void_p(address), 1 << 20, 14))),
            "drop pages": _attempt(lambda: call(libc.madvise(ctypes.c_void_p(address),
                                                             1 << 20, 4))),
            "read-only": _attempt(lambda: call(libc.mprotect(ctypes.c_void_p(address), 4096,
                                                             1))),
            "make writable": _attempt(lambda: call(libc.mprotect(ctypes.c_void_p(address), 4096,
                                                                 3))),
            "map over": _attempt(fixed_map),
        }

    result = _in_filtered_child(body)
    assert result == {"fork": "denied", "thread": "denied", "open": "denied",
                      "signal the parent": "denied", "signal itself": "allowed",
                      "new memory": "allowed", "huge pages advice": "allowed",
                      "drop pages": "denied", "read-only": "allowed",
                      "make writable": "denied", "map over": "denied"}


def test_attention_in_torch_runs_under_the_filter():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)

    def body():
        q, k, v = (torch.randn(1, 2, 64, 8, dtype=torch.float64) for _ in range(3))
        weights = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, dim=-1)
        fused = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return {"same": str(torch.allclose(weights @ v, fused))}

    assert _in_filtered_child(body) == {"same": "True"}


def test_an_unknown_architecture_is_refused_by_name():
    with pytest.raises(seccomp.SeccompUnavailable, match="arch='mips'"):
        seccomp.filter_program(1, arch="mips")
