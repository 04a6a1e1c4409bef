"""A seccomp filter for the measured process: no threads, no processes, no files, no memory tricks.

The measured process (:mod:`mhalib.grading.sandbox.warden`) installs it on itself right after it is
forked, before any learner code runs in it, so no learner code ever runs without it (seccomp
filters cannot be removed, only added to). It is what lets the kernel's own counters (CPU time,
peak resident memory) stand for the work of the one thread that computes:

* ``clone``, ``clone3``, ``fork``, ``vfork``, ``execve``: no thread or process can start, so no
  work can move where the counters do not look;
* ``open``, ``openat``, ``openat2``, ``creat`` and handle-based opens: no file can be opened, so
  the peak-memory counter cannot be reset through ``/proc/self/clear_refs`` and no file can be
  mapped as scratch memory;
* ``link``, ``symlink``, ``rename``, ``unlink``, ``mkdir``, ``mknod``, ``truncate``, ``chmod``,
  ``chown`` and their ``*at`` forms: no name in a file system can be made, moved or changed. The
  process is a fork of the warden, in the warden's mount namespace, where the sealed folder is
  writable: without this it could move a file the notebook wrote into the warden's place for its
  own seal (the warden's first-write-wins would then keep the planted one);
* ``mprotect`` adding write permission, ``mmap`` with ``MAP_FIXED``, ``mremap`` with
  ``MREMAP_FIXED`` or ``MREMAP_DONTUNMAP``, ``madvise`` that drops pages (``MADV_DONTNEED``,
  ``MADV_FREE``...): memory the process already has cannot be turned into fresh scratch space
  without the kernel counting it;
* signals only to itself, no sockets, no ``ptrace``, ``process_vm_*``, ``userfaultfd``,
  ``io_uring``, ``shmat``: nothing reaches or wakes another process.

A denied call fails with ``EPERM`` (the Python code sees an ``OSError``/``RuntimeError``), except
a system call of another architecture, which kills the process. x86-64 and aarch64 only;
:func:`supported` says whether this machine is one of them.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_ARGS_OFFSET = 16  # struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SYSCALLS = {
    "x86_64": dict(
        clone=56, fork=57, vfork=58, execve=59, execveat=322, clone3=435, open=2, openat=257,
        openat2=437, creat=85, name_to_handle_at=303, open_by_handle_at=304, mprotect=10,
        pkey_mprotect=329, mmap=9, mremap=25, madvise=28, process_madvise=440,
        process_vm_readv=310, process_vm_writev=311, ptrace=101, userfaultfd=323,
        io_uring_setup=425, shmat=30, remap_file_pages=216, socket=41, connect=42,
        socketpair=53, kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129,
        rt_tgsigqueueinfo=297, pidfd_open=434, pidfd_send_signal=424, pidfd_getfd=438,
        truncate=76, rename=82, mkdir=83, rmdir=84, link=86, unlink=87, symlink=88, chmod=90,
        chown=92, lchown=94, mknod=133, mkdirat=258, mknodat=259, fchownat=260, unlinkat=263,
        renameat=264, linkat=265, symlinkat=266, fchmodat=268, renameat2=316, fchmodat2=452),
    "aarch64": dict(
        clone=220, execve=221, execveat=281, clone3=435, openat=56, openat2=437,
        name_to_handle_at=264, open_by_handle_at=265, mprotect=226, pkey_mprotect=288, mmap=222,
        mremap=216, madvise=233, process_madvise=440, process_vm_readv=270,
        process_vm_writev=271, ptrace=117, userfaultfd=282, io_uring_setup=425, shmat=196,
        remap_file_pages=234, socket=198, connect=203, socketpair=199, kill=129, tkill=130,
        tgkill=131, rt_sigqueueinfo=138, rt_tgsigqueueinfo=240, pidfd_open=434,
        pidfd_send_signal=424, pidfd_getfd=438, mknodat=33, mkdirat=34, unlinkat=35,
        symlinkat=36, linkat=37, renameat=38, truncate=45, fchmodat=53, fchownat=54,
        renameat2=276, fchmodat2=452),
}
DENIED = ("clone", "fork", "vfork", "clone3", "execve", "execveat", "open", "openat", "openat2",
          "creat", "name_to_handle_at", "open_by_handle_at", "pkey_mprotect", "process_madvise",
          "process_vm_readv", "process_vm_writev", "ptrace", "userfaultfd", "io_uring_setup",
          "shmat", "remap_file_pages", "socket", "connect", "socketpair", "tkill",
          "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
          "pidfd_getfd", "truncate", "rename", "renameat", "renameat2", "link", "linkat",
          "symlink", "symlinkat", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat", "mknod",
          "mknodat", "chmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchownat")
PROT_WRITE, MAP_FIXED, MREMAP_FIXED, MREMAP_DONTUNMAP = 0x2, 0x10, 0x2, 0x4
# madvise advice that keeps every page where it is (NORMAL, RANDOM, SEQUENTIAL, WILLNEED,
# HUGEPAGE, NOHUGEPAGE, DONTDUMP, DODUMP): numpy and torch use some of them on big arrays
SAFE_ADVICE = (0, 1, 2, 3, 14, 15, 16, 17)


class SeccompUnavailable(OSError):
    """This machine cannot install the filter (another architecture, or the kernel said no)."""


def supported() -> bool:
    """True on an architecture whose system-call numbers this module knows."""
    return platform.machine() in _SYSCALLS


def _op(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _ret(value: int) -> bytes:
    return _op(_RET_K, 0, 0, value)


def _load_nr() -> bytes:
    return _op(_LD_W_ABS, 0, 0, 0)


def _load_arg_low(index: int) -> bytes:
    """Load the low 32 bits of argument ``index`` (little-endian)."""
    return _op(_LD_W_ABS, 0, 0, _ARGS_OFFSET + 8 * index)


def _deny_if_flag(number: int, arg: int, mask: int, deny: int) -> list[bytes]:
    """If the call is ``number``: deny when ``args[arg] & mask``, else allow."""
    return [_op(_JEQ_K, 0, 4, number), _load_arg_low(arg), _op(_JSET_K, 0, 1, mask),
            _ret(deny), _ret(_RET_ALLOW)]


def _allow_only_values(number: int, arg: int, values: tuple[int, ...], deny: int) -> list[bytes]:
    """If the call is ``number``: allow when ``args[arg]`` is one of ``values``, else deny."""
    program = [_op(_JEQ_K, 0, 3 + len(values), number), _load_arg_low(arg)]
    for position, value in enumerate(values):
        program.append(_op(_JEQ_K, len(values) - position, 0, value))
    return program + [_ret(deny), _ret(_RET_ALLOW)]


def filter_program(own_pid: int, arch: str | None = None) -> bytes:
    """The BPF program (8-byte instructions) for a process whose pid is ``own_pid``."""
    arch = arch or platform.machine()
    if arch not in _SYSCALLS:
        raise SeccompUnavailable(errno.ENOSYS, f"no system-call table for arch={arch!r}")
    numbers = _SYSCALLS[arch]
    deny = _RET_ERRNO | errno.EPERM
    program = [_op(_LD_W_ABS, 0, 0, 4), _op(_JEQ_K, 1, 0, _AUDIT_ARCH[arch]),
               _ret(_RET_KILL_PROCESS), _load_nr()]
    if arch == "x86_64":  # the x32 ABI's numbers start at 0x40000000
        program += [_op(_JGE_K, 0, 1, 0x40000000), _ret(deny)]
    for name in DENIED:
        if name in numbers:
            program += [_op(_JEQ_K, 0, 1, numbers[name]), _ret(deny)]
    program += _deny_if_flag(numbers["mprotect"], 2, PROT_WRITE, deny)
    program += [_load_nr()] + _deny_if_flag(numbers["mmap"], 3, MAP_FIXED, deny)
    program += [_load_nr()] + _deny_if_flag(numbers["mremap"], 3,
                                            MREMAP_FIXED | MREMAP_DONTUNMAP, deny)
    program += [_load_nr()] + _allow_only_values(numbers["madvise"], 2, SAFE_ADVICE, deny)
    for name in ("kill", "tgkill"):  # signals to itself only (abort() raises on itself)
        program += [_load_nr()] + _allow_only_values(numbers[name], 0, (own_pid,), deny)
    return b"".join(program + [_ret(_RET_ALLOW)])


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Install the filter on this process (irreversibly; its children would inherit it)."""
    program = filter_program(os.getpid())
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise SeccompUnavailable(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise SeccompUnavailable(code, f"prctl(PR_SET_SECCOMP): {os.strerror(code)}")
