"""The warm grading process: imports numpy, torch and matplotlib once, forks one child per notebook.

It runs inside the sandbox (``python -m mhalib.grading.sandbox.zygote CONFIG_JSON``) and never
executes learner code itself. Per notebook it forks:

* with namespaces (the normal case under bubblewrap): an intermediate process that unshares
  mount, PID and IPC namespaces and forks a reaper, PID 1 of the new PID namespace. The reaper
  mounts a fresh size-capped tmpfs for the working folder, /tmp and /dev/shm and a fresh /proc,
  drops every capability and forks the learner's process. When the reaper exits or is killed,
  the kernel kills every process the learner started; nothing survives the notebook, and the
  learner cannot see or signal the zygote.
* without namespaces (no bubblewrap): a child in its own session; the zygote is a child
  subreaper, so orphans come back to it and are killed, with the process group, at the end.

Protocol on stdin/stdout: one JSON object per line. The zygote says ``{"ready": ...}`` once,
then answers every ``{"op": "run", ...}`` with ``{"op": "result", ...}``.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import shutil
import signal
import sys
import time

from mhalib.grading.sandbox import sysns, task_folder, warden

SCRATCH = "/scratch"
_REBIND: list[tuple[str, str]] = []  # (hold, prefix) pairs, from the sandbox's config
EXIT_SETUP_FAILED = 111


def _send(fd: int, message: dict) -> None:
    data = (json.dumps(message) + "\n").encode("utf-8")
    while data:
        data = data[os.write(fd, data):]


def _preimport(config: dict) -> list[str]:
    warnings = []
    fontcache = config.get("fontcache")
    mpldir = os.environ.get("MPLCONFIGDIR")
    if fontcache and mpldir and os.path.isfile(fontcache):
        os.makedirs(mpldir, exist_ok=True)
        shutil.copy(fontcache, os.path.join(mpldir, os.path.basename(fontcache)))
    for module in config.get("preimport", []):
        try:
            __import__(module)
        except Exception as error:  # a missing optional library must not stop grading
            warnings.append(f"could not pre-import {module}: {type(error).__name__}: {error}")
    try:
        import matplotlib.pyplot  # noqa: F401 - builds the font list once, before forking
    except Exception as error:
        warnings.append(f"matplotlib unavailable: {error}")
    try:  # torch reads the CPU's features on its first operation: once, before forking
        from mhalib.grading.sandbox.warden import warm_up

        warm_up()
    except Exception as error:
        warnings.append(f"torch warm-up failed: {type(error).__name__}: {error}")
    return warnings


def _isolation_works() -> str | None:
    """None if per-notebook namespaces can be made here, else the reason they cannot."""
    pid = os.fork()
    if pid == 0:
        try:
            sysns.unshare(sysns.CLONE_NEWNS | sysns.CLONE_NEWPID | sysns.CLONE_NEWIPC)
            inner = os.fork()
            if inner == 0:
                sysns.make_mounts_private()
                sysns.mount_tmpfs("/tmp", 1 << 20)
                os._exit(0)
            _, status = os.waitpid(inner, 0)
            os._exit(os.waitstatus_to_exitcode(status))
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return None if os.waitstatus_to_exitcode(status) == 0 else (
        "unshare/mount not permitted inside the sandbox")






def _vm_size_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _become_learner(shell, request: dict, task_dir: str, workdir: str,
                    isolated: bool = False) -> None:
    """Limits, environment and then the plan; this process never returns.

    With namespaces the learner's process first takes a mount namespace of its own in which the
    warden's sealed folder is an empty read-only tmpfs, then drops every capability: nothing it
    runs can read or change a sealed record, or undo either step."""
    if isolated:
        sysns.unshare(sysns.CLONE_NEWNS)
        sysns.make_mounts_private()
        sysns.mount("tmpfs", os.path.join(task_dir, warden.SEALED_DIR), "tmpfs",
                    sysns.MS_RDONLY | sysns.MS_NOSUID | sysns.MS_NODEV, "size=4k,mode=0500")
        sysns.drop_all_capabilities()
    limits = request["plan"]["limits"]
    address_space = _vm_size_bytes() + int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(limits["notebook_seconds"]) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    fsize = int(limits["scratch_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if os.getuid() != 0:  # root ignores RLIMIT_NPROC anyway
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        cap = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writing too much fails, it does not kill
    os.chdir(workdir)
    os.environ.update({"HOME": workdir, "TMPDIR": "/tmp", "PWD": workdir,
                       warden.ENV_SOCKET: os.path.join(task_dir, warden.SOCKET_NAME)})
    from mhalib.grading.sandbox.executor import run_plan

    run_plan(shell, request["plan"], task_dir)


def _quiet_stdio() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _close_fds(keep: tuple[int, ...] = ()) -> None:
    for fd in range(3, 256):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _note_setup_error(task_dir: str, error: BaseException) -> None:
    try:
        with open(os.path.join(task_dir, "setup_error.txt"), "w", encoding="utf-8") as handle:
            import traceback

            where = traceback.extract_tb(error.__traceback__)[-3:]
            trail = "; ".join(f"{f.name}:{f.lineno}" for f in where)
            handle.write(f"{type(error).__name__}: {error} (at {trail})"[:2000])
    except OSError:
        pass


def _rebind_python_prefixes() -> None:
    """Put back, read-only, a Python installation that the fresh /tmp just hid."""
    for hold, prefix in _REBIND:
        os.makedirs(prefix, exist_ok=True)
        sysns.mount(hold, prefix, None, sysns.MS_BIND | sysns.MS_REC, None)
        sysns.mount(None, prefix, None,
                    sysns.MS_REMOUNT | sysns.MS_BIND | sysns.MS_RDONLY | sysns.MS_NOSUID
                    | sysns.MS_NODEV, None)


def _reaper(shell, request: dict, task_dir: str) -> None:
    """PID 1 of the notebook's namespaces: fresh file systems, then the warden, which runs the
    learner's process (no capabilities) and, once it has ended, the physical checks."""
    scratch_bytes = int(request["plan"]["limits"]["scratch_mb"]) * 1024 * 1024
    sysns.make_mounts_private()
    sysns.mount("proc", "/proc", "proc", sysns.MS_NOSUID | sysns.MS_NODEV | sysns.MS_NOEXEC, None)
    sysns.mount_tmpfs(SCRATCH, scratch_bytes)
    for private, target in ((".tmp", "/tmp"), (".shm", "/dev/shm")):
        os.makedirs(os.path.join(SCRATCH, private), mode=0o1777, exist_ok=True)
        if os.path.isdir(target):
            sysns.mount(os.path.join(SCRATCH, private), target, None, sysns.MS_BIND, None)
    _rebind_python_prefixes()
    workdir = os.path.join(SCRATCH, "work")
    shutil.copytree(os.path.join(task_dir, "input"), workdir)
    sysns.prctl(sysns.PR_SET_DUMPABLE, 0)
    code = _supervise(shell, request, task_dir, workdir, isolated=True)
    os._exit(code)


def _supervise(shell, request: dict, task_dir: str, workdir: str, isolated: bool) -> int:
    """Run the learner's process under a :class:`~mhalib.grading.sandbox.warden.Warden`, then the
    physical checks; returns the learner's exit code (its outcome is in ``learner.json``)."""
    limits = request["plan"]["limits"]
    started = time.monotonic()
    keeper = warden.Warden(request["plan"], task_dir, shell)
    learner = os.fork()
    if learner == 0:
        try:
            keeper.listener.close()
            if not isolated:
                _quiet_stdio()
                _close_fds()
                os.setsid()
                sysns.prctl(sysns.PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the zygote
            _become_learner(shell, request, task_dir, workdir, isolated)
        finally:
            os._exit(0)
    code, timed_out = keeper.serve(learner, started + float(limits["notebook_seconds"]))
    keeper.close()
    if isolated:
        _kill_namespace()
    else:
        _kill_descendants(learner)
    outcome = {"exit_code": code, "timed_out": timed_out,
               "seconds": round(time.monotonic() - started, 4)}
    keeper.seal_outcome(outcome)
    keeper.run_physical_checks(started + float(limits["notebook_seconds"])
                               + physical_seconds(request["plan"]))
    return code


def physical_seconds(plan: dict) -> float:
    """Seconds after the notebook for its physical checks (each measured exercise's share)."""
    from mhalib.checks.registry import get_exercise

    per_check = float(plan.get("limits", {}).get("physical_seconds", 30.0))
    names = {name for step in plan.get("steps", ()) if step.get("kind") == "record"
             for name in step.get("exercises", ())}
    return per_check * sum(getattr(get_exercise(n), "physical", None) is not None
                           for n in names)


def _kill_namespace() -> None:
    """As PID 1 of the namespace: kill every other process in it and reap them."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def _spawn_isolated(shell, request: dict, task_dir: str) -> tuple[int, int | None]:
    """Fork the intermediate; returns (its pid, the reaper's pid in our namespace)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            _quiet_stdio()
            _close_fds(keep=(write_end,))
            sysns.unshare(sysns.CLONE_NEWNS | sysns.CLONE_NEWPID | sysns.CLONE_NEWIPC)
            reaper = os.fork()
            if reaper == 0:
                os.close(write_end)
                try:
                    _reaper(shell, request, task_dir)
                except BaseException as error:  # noqa: BLE001 - reported to the grader
                    _note_setup_error(task_dir, error)
                finally:
                    os._exit(EXIT_SETUP_FAILED)
            os.write(write_end, str(reaper).encode())
            os.close(write_end)
            _, status = os.waitpid(reaper, 0)
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
        except BaseException as error:  # noqa: BLE001 - reported to the grader
            _note_setup_error(task_dir, error)
        finally:
            os._exit(EXIT_SETUP_FAILED)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], 10.0)
    reaper = int(os.read(read_end, 32) or b"0") if ready else 0
    os.close(read_end)
    return pid, reaper or None


def _spawn_plain(shell, request: dict, task_dir: str) -> int:
    """Without namespaces the zygote's own child is the warden (it runs no learner code)."""
    workdir = os.path.join(task_dir, "input")
    pid = os.fork()
    if pid == 0:
        try:
            _quiet_stdio()
            _close_fds()
            os.setsid()
            sysns.prctl(sysns.PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the zygote
            sysns.prctl(sysns.PR_SET_CHILD_SUBREAPER, 1)
            os._exit(_supervise(shell, request, task_dir, workdir, isolated=False))
        finally:
            os._exit(EXIT_SETUP_FAILED)
    return pid


def _kill_descendants(group: int | None) -> None:
    """Kill a process group and every child left to us (we are a subreaper), until none remain."""
    if group:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    me = str(os.getpid())
    for _ in range(50):
        children = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if fields[1] == me:
                    children.append(int(entry))
        if not children:
            return
        for child in children:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        for child in children:
            try:
                os.waitpid(child, 0)
            except ChildProcessError:
                pass


def _wait(pid: int, deadline: float, on_timeout) -> tuple[int, int, bool, float]:
    """(exit code, max RSS in KiB, timed out, CPU seconds of it and the children it reaped)
    of child ``pid``, killing it at ``deadline``."""
    timed_out = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done == pid:
            code = os.waitstatus_to_exitcode(status)
            return ((code if code >= 0 else 128 - code), usage.ru_maxrss, timed_out,
                    usage.ru_utime + usage.ru_stime)
        if time.monotonic() >= deadline and not timed_out:
            timed_out = True
            on_timeout()
            deadline = float("inf")
        time.sleep(0.005)


def run_task(shell, request: dict, exchange_dir: str, isolated: bool) -> dict:
    """Run one notebook plan in a fresh child; returns the reply sent to the grader."""
    task_folder.wipe(exchange_dir)
    task_dir = os.path.join(exchange_dir, "task")
    os.makedirs(os.path.join(task_dir, "input"))
    task_folder.write_inputs(request.get("files", {}), os.path.join(task_dir, "input"))
    task_folder.write_inputs(request.get("class_cache", {}), os.path.join(task_dir, "class_cache"))
    started = time.monotonic()
    deadline = started + float(request["plan"]["limits"]["notebook_seconds"]) + (
        physical_seconds(request["plan"]) + 10.0)
    if isolated:
        pid, reaper = _spawn_isolated(shell, request, task_dir)

        def on_timeout():
            for target in (reaper, pid):
                if target:
                    try:
                        os.kill(target, signal.SIGKILL)
                    except OSError:
                        pass
    else:
        pid = _spawn_plain(shell, request, task_dir)

        def on_timeout():
            _kill_descendants(pid)
    code, max_rss, timed_out, cpu = _wait(pid, deadline, on_timeout)
    _kill_descendants(None if isolated else pid)
    learner = task_folder.learner_outcome(task_dir)
    if learner is not None and code != EXIT_SETUP_FAILED:
        code, timed_out = learner["exit_code"], learner["timed_out"] or timed_out
    result = {"op": "result", "exit_code": code, "timed_out": timed_out,
              "setup_failed": code == EXIT_SETUP_FAILED,
              "seconds": round(time.monotonic() - started, 4), "max_rss_kb": max_rss,
              "cpu_seconds": round(cpu, 4)}
    result.update(task_folder.collect(task_dir, request["plan"]["limits"]))
    task_folder.wipe(exchange_dir)
    return result


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    _REBIND[:] = [tuple(pair) for pair in config.get("rebind", [])]
    protocol_out = os.dup(1)
    os.dup2(2, 1)  # anything printed while importing goes to the log, not the protocol
    warnings = _preimport(config)
    from mhalib.grading.sandbox.executor import make_shell

    shell = make_shell()
    isolated = False
    if config.get("namespaces"):
        reason = _isolation_works()
        isolated = reason is None
        if reason:
            warnings.append(f"per-notebook namespaces unavailable: {reason}")
    sysns.prctl(sysns.PR_SET_DUMPABLE, 0)
    sysns.prctl(sysns.PR_SET_CHILD_SUBREAPER, 1)
    gc.collect()
    gc.freeze()  # pre-imported objects stay shared: no copy-on-write from garbage collection
    _send(protocol_out, {"ready": True, "isolation": "namespaces" if isolated else "process",
                         "warnings": warnings, "pid": os.getpid()})
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if request.get("op") != "run":
            break
        try:
            reply = run_task(shell, request, config["exchange"], isolated)
        except Exception as error:  # report and stay alive for the next student
            reply = {"op": "result", "error": f"{type(error).__name__}: {error}"}
        _send(protocol_out, reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
