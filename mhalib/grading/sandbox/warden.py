"""The warden: the trusted parent of a graded notebook's process (sandbox side).

The warden runs only the grader's code. It is the reaper of the notebook's PID namespace (or, with
no namespaces, the zygote itself), it holds what the learner's process must not be able to
choose or change, and it writes the only records the judge reads:

* **Fresh inputs, drawn at call time.** When the notebook reaches an exercise's test, the
  learner's process asks the warden for that exercise's seed over a Unix socket and gets it then,
  once; the seed comes from ``os.urandom`` (or, for a reproducible run, from the instructor's
  ``--seed``), so nothing the notebook could read before determines the inputs.
* **Sealed records.** The learner's process hands back its record over the same socket; the
  warden writes it, with the seed it issued, to the sealed folder: first write wins, and the
  learner's process sees an empty, read-only folder in its place (its own mount namespace).
* **Physical checks.** After the notebook has ended, each measured exercise's large case runs in
  a process the warden forks from its own clean state (:func:`_measured_process`): limits, no
  capabilities and a seccomp filter (:mod:`mhalib.grading.sandbox.seccomp`) come first, then the
  notebook's definitions (:mod:`mhalib.grading.sandbox.replay`), then the seed, then one call. The
  warden reads the kernel's counters of that process (peak resident memory, CPU time) and seals
  them with the output (:mod:`mhalib.checks.physical` judges them).

Messages are JSON lines; every size and count is capped, and a malformed message only closes its
own connection.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import select
import signal
import socket
import time

from mhalib.checks.physical import SEAL_FORMAT, seal_name

MAX_MESSAGE_BYTES = 24 * 1024 * 1024
SOCKET_NAME = "warden.sock"
SEALED_DIR = "sealed"
OUTCOME_FILE = "learner.json"
ENV_SOCKET = "MHALIB_WARDEN"
# the measured process: MiB its definitions may add before the seed, seconds they may take,
# and the address-space room above what it holds then (the kernel refuses more at once)
REPLAY_MB = 64
REPLAY_SECONDS = 20.0
ADDRESS_ROOM_MB = 1024


def _send_line(sock: socket.socket, message: dict) -> None:
    sock.setblocking(True)
    sock.sendall((json.dumps(message) + "\n").encode("utf-8"))
    sock.setblocking(False)


class Warden:
    """Issues seeds, seals records and runs the physical checks of one notebook."""

    def __init__(self, plan: dict, task_dir: str, shell):
        self.plan = plan
        self.shell = shell
        self.sealed_dir = os.path.join(task_dir, SEALED_DIR)
        os.makedirs(self.sealed_dir, mode=0o700, exist_ok=True)
        self.socket_path = os.path.join(task_dir, SOCKET_NAME)
        self.exercises = [name for step in plan.get("steps", ()) if step.get("kind") == "record"
                          for name in step.get("exercises", ())]
        self.base_seed = plan.get("seed")  # None: fresh seeds from os.urandom
        self.issued: dict[str, int] = {}
        self.sealed: set[str] = set()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        self.listener.bind(self.socket_path)
        os.chmod(self.socket_path, 0o666)
        self.listener.listen(8)
        self.listener.setblocking(False)

    # -- seeds and seals -------------------------------------------------------------------
    def seed_for(self, exercise: str, session: str) -> int:
        if self.base_seed is None:
            return int.from_bytes(os.urandom(7), "big")
        digest = hashlib.sha256(f"{self.base_seed}:{exercise}:{session}".encode()).digest()
        return int.from_bytes(digest[:7], "big")

    def seal(self, exercise: str, session: str, seed: int, record, facts: dict) -> None:
        """Write a seal once (first write wins); never follows a link.

        The warden writes each name once, so anything already at that name was planted there
        (by a process that could reach the sealed folder): it is removed, and the seal says so
        (``facts["planted"]``; the judge then asks for review)."""
        name = seal_name(exercise, session)
        if name in self.sealed:
            return
        self.sealed.add(name)
        path = os.path.join(self.sealed_dir, name)
        if _remove_planted(path):
            facts = {**facts, "planted": f"a file named {name} was already in the sealed folder "
                                         "before the grader wrote it"}
        data = json.dumps({"format": SEAL_FORMAT, "exercise": exercise, "session": session,
                           "seed": int(seed), "record": record, "facts": facts})
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError:
            return
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)

    def seal_outcome(self, outcome: dict) -> None:
        """Write how the learner's process ended (its exit code, whether it ran out of time)."""
        path = os.path.join(self.sealed_dir, OUTCOME_FILE)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError:
            return
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(outcome, handle)

    def handle(self, message) -> dict:
        """One request of the learner's process: ``seed`` or ``record`` for an exercise."""
        if not isinstance(message, dict):
            return {"error": "a request is a JSON object"}
        op, exercise = message.get("op"), message.get("exercise")
        if exercise not in self.exercises:
            return {"error": f"no exercise {str(exercise)[:60]!r} is graded here"}
        if op == "seed":
            if exercise in self.issued:
                return {"error": f"the seed of {exercise} was already issued"}
            self.issued[exercise] = self.seed_for(exercise, "generic")
            return {"seed": self.issued[exercise]}
        if op == "record":
            if exercise not in self.issued:
                return {"error": f"no seed was issued for {exercise}"}
            if seal_name(exercise, "generic") in self.sealed:
                return {"error": f"{exercise} is already recorded"}
            self.seal(exercise, "generic", self.issued[exercise], message.get("record"),
                      {"sealed_at": round(time.monotonic(), 3)})
            return {"sealed": True}
        return {"error": f"unknown op {str(op)[:30]!r}"}

    # -- the learner's process -------------------------------------------------------------
    def serve(self, learner: int, deadline: float) -> tuple[int, bool]:
        """Answer the learner's process until it ends (killed at ``deadline``); returns its
        exit code and whether it ran out of time. Other children are reaped as they end."""
        connections: dict[int, tuple[socket.socket, bytearray]] = {}
        code, timed_out = None, False
        while code is None:
            code = self._reap(learner)
            if code is not None:
                break
            if time.monotonic() >= deadline and not timed_out:
                timed_out = True
                _kill(learner)
            readable = [self.listener.fileno(), *connections]
            try:
                ready, _, _ = select.select(readable, [], [], 0.02)
            except InterruptedError:
                continue
            for fd in ready:
                if fd == self.listener.fileno():
                    self._accept(connections)
                else:
                    self._read(fd, connections)
        for sock, _ in connections.values():
            sock.close()
        return code, timed_out

    def _accept(self, connections) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        if len(connections) >= 16:
            sock.close()
            return
        sock.setblocking(False)
        connections[sock.fileno()] = (sock, bytearray())

    def _read(self, fd: int, connections) -> None:
        sock, buffer = connections[fd]
        try:
            chunk = sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk or len(buffer) + len(chunk) > MAX_MESSAGE_BYTES:
            sock.close()
            del connections[fd]
            return
        buffer += chunk
        while b"\n" in buffer:
            line, _, rest = bytes(buffer).partition(b"\n")
            buffer[:] = rest
            try:
                reply = self.handle(json.loads(line))
            except (ValueError, RecursionError):
                reply = {"error": "not a JSON request"}
            try:
                _send_line(sock, reply)
            except OSError:
                sock.close()
                del connections[fd]
                return

    @staticmethod
    def _reap(learner: int):
        """Reap every ended child; the learner's exit code once it has ended, else None."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if pid == 0:
                return None
            if pid == learner:
                code = os.waitstatus_to_exitcode(status)
                return code if code >= 0 else 128 - code

    def close(self) -> None:
        self.listener.close()
        try:
            os.unlink(self.socket_path)
        except OSError:
            pass

    # -- physical checks ---------------------------------------------------------------------
    def run_physical_checks(self, deadline: float) -> None:
        """The physical check of every measured exercise of the plan, one after the other."""
        from mhalib.checks.registry import get_exercise

        for exercise in dict.fromkeys(self.exercises):
            checker = get_exercise(exercise)
            if getattr(checker, "physical", None) is None:
                continue
            seed = self.seed_for(exercise, "physical")
            if time.monotonic() >= deadline:
                self.seal(exercise, "physical", seed, None,
                          {"refused": "the notebook used all of its time"})
                continue
            record, facts = self.measure(checker, seed, deadline)
            self.seal(exercise, "physical", seed, record, facts)

    def measure(self, checker, seed: int, deadline: float) -> tuple[dict | None, dict]:
        """Fork the measured process, let it replay the definitions, then give it the seed and
        read the kernel's counters; returns (its record, the facts)."""
        from mhalib.grading.sandbox.replay import replay_sources

        sources = replay_sources(self.plan.get("steps", []), checker.name)
        from_warden, to_child = os.pipe()  # the warden writes, the measured process reads
        from_child, to_warden = os.pipe()  # the measured process writes, the warden reads
        started = time.monotonic()
        vm_at_fork = _status_mb(os.getpid(), "VmSize")  # the child starts as a copy of us
        pid = os.fork()
        if pid == 0:
            os.close(to_child)
            os.close(from_child)
            _measured_process(self.shell, checker, sources, from_warden, to_warden)
        os.close(from_warden)
        os.close(to_warden)
        facts: dict = {"refused": None, "killed": None}
        try:
            return self._supervise(pid, checker, seed, to_child, from_child, facts, started,
                                   deadline, vm_at_fork)
        finally:
            for fd in (to_child, from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _supervise(self, pid, checker, seed, to_child, from_child, facts, started, deadline,
                   vm_at_fork):
        # the process says when its trusted set-up is done and waits: we note its size, then it
        # runs the notebook's definitions and says when it is ready for the seed
        locked = _read_message(from_child, min(started + REPLAY_SECONDS, deadline))
        vm_before_replay = _status_mb(pid, "VmSize")
        # the peak counts from here, before the definitions: memory they hold (a buffer in a
        # parameter default, filled before the call) is memory the call uses
        peak_reset = _reset_peak(pid)
        rss_start = _status_mb(pid, "VmRSS")
        os.write(to_child, b'{"go": true}\n')
        ready = _read_message(from_child, min(started + 2 * REPLAY_SECONDS, deadline))
        vm_start = _status_mb(pid, "VmSize")
        if not isinstance(locked, dict) or not isinstance(ready, dict) or not ready.get("ready"):
            _kill(pid)
            _wait(pid)
            said = ready if isinstance(ready, dict) else locked if isinstance(locked, dict) else {}
            facts["refused"] = ("the notebook's definitions could not be run again in the "
                                f"measured process ({said.get('error', 'no answer')})")
            return None, facts
        facts["replay"] = {k: ready.get(k) for k in ("seconds", "cells", "errors", "seccomp")}
        grown = vm_start - (vm_before_replay or vm_at_fork)
        if grown > REPLAY_MB:
            _kill(pid)
            _wait(pid)
            facts["refused"] = (f"the notebook's own definitions hold {grown:,.0f} MiB when the "
                                f"check starts (at most {REPLAY_MB} MiB are allowed): delete big "
                                "tensors you keep in globals or parameter defaults")
            return None, facts
        cpu_start = _cpu_seconds(pid)
        room = int((vm_start + checker.physical.memory_mb * 2) * 1024 * 1024)
        cpu_limit = checker.physical.cpu_seconds
        cpu_cap = int(cpu_start + cpu_limit) + 1
        try:
            resource.prlimit(pid, resource.RLIMIT_AS, (room, room))
            resource.prlimit(pid, resource.RLIMIT_CPU, (cpu_cap, cpu_cap + 1))
        except OSError:
            pass
        os.write(to_child, (json.dumps({"seed": seed}) + "\n").encode())
        call_deadline = min(deadline, time.monotonic() + 3 * cpu_limit + 10)
        record = _read_message(from_child, call_deadline)
        if record is None:
            facts["killed"] = "wall" if time.monotonic() >= call_deadline else None
            _kill(pid)
        status, usage = _wait(pid)
        peak_mb = usage.ru_maxrss / 1024 - rss_start  # the peak since before the definitions
        cpu = usage.ru_utime + usage.ru_stime - cpu_start
        if os.WIFSIGNALED(status) and facts["killed"] is None:
            number = os.WTERMSIG(status)
            facts["killed"] = "cpu" if number in (signal.SIGXCPU, signal.SIGKILL) and (
                cpu >= cpu_limit) else f"signal {number}"
        facts.update(peak_memory_mb=round(max(0.0, peak_mb), 1), cpu_seconds=round(cpu, 3),
                     cpu_limit_seconds=round(cpu_limit, 3),
                     wall_seconds=round(time.monotonic() - started, 3), peak_reset=peak_reset)
        return (record if isinstance(record, dict) else None), facts


def _remove_planted(path: str) -> bool:
    """Remove whatever is at ``path`` (a file, a link or a folder; links are never followed);
    True when something was there."""
    import shutil
    import stat

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError:
        return True
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass
    return True


def _measured_process(shell, checker, sources: list[str], from_warden: int, to_warden: int):
    """The measured process (never returns): trusted set-up, then the notebook's definitions,
    then the seed and one call."""
    try:
        _close_other_fds(keep=(from_warden, to_warden))
        _lock_down(checker, sources)
        seccomp_on = _install_filter()
        _write_message(to_warden, {"locked": True})
        _read_message(from_warden, time.monotonic() + 60.0)  # the warden notes our size first
        started = time.monotonic()
        errors = _replay(shell, sources)
        defined = callable(shell.user_ns.get(checker.name))
        _write_message(to_warden, {"ready": True, "cells": len(sources), "errors": errors[:5],
                                   "seconds": round(time.monotonic() - started, 3),
                                   "seccomp": seccomp_on, "defined": defined})
        message = _read_message(from_warden, time.monotonic() + 60.0)
        from mhalib.checks.physical import run_physical

        record = run_physical(checker, shell.user_ns.get(checker.name), int(message["seed"]))
        _write_message(to_warden, record)
    except BaseException as error:  # noqa: BLE001 - say why, then die
        try:
            _write_message(to_warden, {"ready": False, "error": f"{type(error).__name__}: "
                                                                f"{str(error)[:200]}"})
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(0)


def _lock_down(checker, sources: list[str]) -> None:
    """Trusted set-up of the measured process: one thread, installed imports, exact malloc,
    limits, no capabilities. Runs before any learner code."""
    import torch

    from mhalib.checks.physical import encode_output
    from mhalib.checks.torch_exercise import case_tensors
    from mhalib.grading.sandbox import sysns
    from mhalib.grading.sandbox.replay import imported_modules

    torch.set_num_threads(1)
    # build (and encode) a case once: what that imports is then imported
    sample = checker.physical.case(checker.name, 0)
    args, _ = case_tensors(sample)
    encode_output(args[0][..., :2, :])
    del args
    for module in imported_modules(sources):
        try:
            __import__(module)
        except Exception:  # noqa: BLE001 - the replay reports it where it matters
            pass
    warm_up()
    _exact_malloc()
    cpu = int(REPLAY_SECONDS + checker.physical.cpu_seconds + 2)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    vm = int((_status_mb(os.getpid(), "VmSize") + ADDRESS_ROOM_MB) * 1024 * 1024)
    resource.setrlimit(resource.RLIMIT_AS, (vm, vm))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        sysns.drop_all_capabilities()
    except OSError:
        pass  # no namespaces: an unprivileged process has none to drop


def warm_up() -> None:
    """Touch the kernels most attention code uses (and let torch read the CPU's features, which
    needs a file): their code pages are then resident before the peak-memory counter is reset,
    where they would count as the learner's memory."""
    import torch

    for dtype in (torch.float32, torch.float64):
        a = torch.randn(64, 64, dtype=dtype)
        b = a @ a
        torch.softmax(b, -1), torch.exp(b), b.amax(-1), torch.where(b > 0, b, a)
        torch.cat([a, b]), (a * b).sum(-1), torch.einsum("ij,jk->ik", a, b)
        torch.nn.functional.scaled_dot_product_attention(a[None, None], a[None, None],
                                                         a[None, None], is_causal=True)


def _exact_malloc() -> None:
    """Make glibc give every block of 1 MiB or more its own mapping, returned when freed, so the
    resident-memory peak follows what is alive (growing blocks would otherwise leave freed
    space resident in the heap: 180 MiB for a chunked prefill that holds 40 MiB)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD (fixed: no dynamic raising)
        libc.mallopt(-1, 2 << 20)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass  # not glibc: the peak may read higher than what was alive


def _install_filter() -> bool:
    from mhalib.grading.sandbox import seccomp

    if not seccomp.supported():
        return False
    seccomp.install()
    return True


def _replay(shell, sources: list[str]) -> list[str]:
    """Run the definitions; returns the errors (the checks say what is missing later)."""
    from mhalib.grading.sandbox.capture import OutputBudget

    budget = OutputBudget(10_000, 10_000)
    shell.display_pub.budget = budget
    shell.displayhook.budget = budget
    errors = []
    for source in sources:
        result = shell.run_cell(source, store_history=False, silent=True)
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec",
                                                                  None)
        if error is not None:
            errors.append(f"{type(error).__name__}: {str(error)[:120]}")
    return errors


def _close_other_fds(keep: tuple[int, ...]) -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    for fd in range(3, 1024):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _write_message(fd: int, message: dict) -> None:
    data = (json.dumps(message) + "\n").encode("utf-8")
    while data:
        data = data[os.write(fd, data):]


def _read_message(fd: int, deadline: float):
    """One JSON line from ``fd`` before ``deadline`` (None on timeout, EOF or garbage)."""
    buffer = bytearray()
    while b"\n" not in buffer:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk or len(buffer) + len(chunk) > MAX_MESSAGE_BYTES:
            return None
        buffer += chunk
    try:
        return json.loads(bytes(buffer).partition(b"\n")[0])
    except (ValueError, RecursionError):
        return None


def _status_mb(pid: int, key: str) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _reset_peak(pid: int) -> bool:
    """Reset the process's peak resident memory to its current value (True when it worked)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _wait(pid: int):
    """(status, rusage) of child ``pid``, waiting for it."""
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            return status, usage
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0, resource.struct_rusage((0.0,) * 16)
