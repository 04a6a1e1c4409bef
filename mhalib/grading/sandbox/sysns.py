"""Linux system calls the sandbox needs and Python 3.11 lacks: namespaces, mounts, capabilities.

Only the standard library (ctypes) is used, because this module runs inside the sandbox before
anything else. Every failing call raises ``OSError`` naming the call and its arguments.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, call: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{call} failed: {os.strerror(errno)}")


def prctl(option: int, arg: int = 0) -> None:
    _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                            ctypes.c_ulong]
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl(option={option}, arg={arg})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare(flags={flags:#x})")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                            ctypes.c_char_p]
    encoded = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    _check(_libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]),
           f"mount(source={source!r}, target={target!r}, fstype={fstype!r}, data={data!r})")


def mount_tmpfs(target: str, size_bytes: int) -> None:
    """A fresh, private, size-capped tmpfs at ``target`` (mode 1777 like /tmp)."""
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(size_bytes)},mode=1777")


def make_mounts_private() -> None:
    """Stop mount events from travelling back to the parent namespace."""
    mount("none", "/", None, MS_REC | MS_PRIVATE, None)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return 63


def drop_all_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable capability sets.

    Afterwards neither this process nor anything it executes (even as uid 0 of its user
    namespace) can mount, unshare, trace or change ownership; ``no_new_privs`` is set too.
    """
    for cap in range(last_capability() + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as error:
            if error.errno != 22:  # EINVAL: capability unknown to this kernel
                raise
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset(all capabilities cleared)")
    prctl(PR_SET_NO_NEW_PRIVS, 1)
