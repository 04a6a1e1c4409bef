"""The sandbox itself: what learner code can see, reach and leave behind."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from mhalib.grading import sandbox_host as sandbox_module
from mhalib.grading.sandbox.limits import Limits
from mhalib.grading.sandbox_host import Sandbox, SandboxError, choose_mode

LIMITS = Limits(notebook_seconds=20, cell_seconds=5, memory_mb=256).to_dict()


def _run(sandbox: Sandbox, *sources: str, limits: dict = LIMITS) -> list[dict]:
    plan = {"seed": 1, "limits": limits,
            "steps": [{"kind": "cell", "index": i, "source": s} for i, s in enumerate(sources)]}
    reply = sandbox.run(plan)
    return [json.loads(line) for line in reply["steps"].splitlines()]


def _text(step: dict) -> str:
    parts = []
    for output in step.get("outputs", []):
        parts.append(output.get("text") or output.get("evalue") or "")
        parts.append(output.get("ename") or "")
        parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


@pytest.fixture(scope="module")
def jail(bwrap_usable):
    if not bwrap_usable:
        pytest.skip("bubblewrap is not usable here")
    with Sandbox("bwrap") as sandbox:
        info = sandbox.start()
        assert info["isolation"] == "namespaces", info
        yield sandbox


def test_no_network(jail):
    steps = _run(jail, "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), "
                       "timeout=2)\n    print('open')\n"
                       "except OSError as e:\n    print('closed', e)")
    assert "closed" in _text(steps[0]) and "open" not in _text(steps[0]).replace("closed", "")


def test_sees_no_repository_home_or_gradebook(jail):
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    secrets = [repo + "/solutions", repo + "/grading", here, "/home", "/tmp/pytest-of-root"]
    secrets += [str(p) for p in Path.home().iterdir() if p.name != ".pyenv"][:5]
    probe = f"import os\nfor p in {secrets!r}:\n    print(p, os.path.exists(p))"
    text = _text(_run(jail, probe)[0])
    assert "True" not in text, text


def test_answer_key_unreachable_but_checks_import(jail):
    steps = _run(jail, "import mhalib, mhalib.checks\nprint(mhalib.__file__)",
                 "import mhalib.reference", "from mhalib.reference import softmax")
    assert sandbox_module.PACKAGE_MOUNT in _text(steps[0])
    assert "ImportError" in _text(steps[1]) and "answer key" in _text(steps[1])
    assert "ImportError" in _text(steps[2])


def test_answer_key_functions_elsewhere_import_but_do_not_answer(jail):
    from mhalib.grading.sandbox_package import answer_key_functions

    outside = [(module, name) for module, names in answer_key_functions().items()
               if not module.startswith("mhalib.reference") for name in sorted(names)]
    if not outside:
        pytest.skip("every answer-key function lives in mhalib.reference")
    calls = "\n".join(f"_f = importlib.import_module({m!r}).{n}\n"
                      "_args = [1] * len(inspect.signature(_f).parameters)\n"
                      f"try:\n    _f(*_args)\nexcept (NotImplementedError, RuntimeError) as e:\n"
                      f"    print('blocked', {n!r})" for m, n in outside)
    steps = _run(jail, "import importlib, inspect\n" + calls)
    for _, name in outside:
        assert f"blocked {name}" in _text(steps[0])


def test_each_notebook_starts_from_fresh_files_and_processes(jail):
    _run(jail, "open('/tmp/left', 'w').write('x')\nopen('/dev/shm/left', 'w').write('x')\n"
               "open('left-in-work', 'w').write('x')\n"
               "import subprocess\nsubprocess.Popen(['sleep', '677'], start_new_session=True)")
    steps = _run(jail, "import os\nprint(os.path.exists('/tmp/left'), "
                       "os.path.exists('/dev/shm/left'), os.path.exists('left-in-work'))\n"
                       "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))")
    text = _text(steps[0])
    assert "False False False" in text
    assert "['1', '2']" in text  # only the reaper and this notebook's process exist


def test_cannot_see_or_signal_the_zygote(jail):
    zygote = jail.info["pid"]
    steps = _run(jail, f"import os, signal\ntry:\n    os.kill({zygote}, 0)\n    print('visible')\n"
                       "except OSError as e:\n    print('hidden', type(e).__name__)\n"
                       "print('caps', open('/proc/self/status').read().split('CapEff:')[1]"
                       ".split()[0])")
    text = _text(steps[0])
    assert "caps 0000000000000000" in text
    assert jail.running


def test_memory_cap_gives_memory_error(jail):
    steps = _run(jail, "import numpy as np\nx = np.ones((1024, 1024, 512))\nprint('allocated')")
    assert "MemoryError" in _text(steps[0])


def test_output_is_capped(jail):
    limits = {**LIMITS, "output_bytes": 10_000, "cell_output_bytes": 5_000}
    steps = _run(jail, "print('y' * 1_000_000)", "import os\nos.write(1, b'z' * 1_000_000)",
                 limits=limits)
    assert len(_text(steps[0])) <= 5_000 and steps[0]["dropped_bytes"] > 900_000


def test_notebook_budget_kills_a_process_that_ignores_signals(jail):
    limits = {**LIMITS, "notebook_seconds": 2, "cell_seconds": 1}
    started = time.monotonic()
    reply = jail.run({"seed": 1, "limits": limits, "steps": [
        {"kind": "cell", "index": 0, "source": "import signal\nfor s in (signal.SIGALRM, "
         "signal.SIGINT, signal.SIGTERM):\n    signal.signal(s, signal.SIG_IGN)\nwhile True:\n"
         "    pass"}]})
    assert reply["timed_out"] and time.monotonic() - started < 10
    assert jail.running  # the zygote survives for the next student


def test_auto_without_bwrap_falls_back_loudly(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    said = []
    assert choose_mode("auto", echo=said.append) == "none"
    assert "WARNING" in said[0] and "WITHOUT" in said[0] and "apt-get install" in said[0]
    with pytest.raises(SandboxError, match="not installed"):
        choose_mode("bwrap", echo=said.append)


def test_unsandboxed_mode_still_limits_and_cleans_up():
    with Sandbox("none") as plain:
        info = plain.start()
        assert info["isolation"] == "process"
        steps = _run(plain, "import subprocess, os\nsubprocess.Popen(['sleep', '679'], "
                            "start_new_session=True)\nprint(os.environ.get('MHALIB_GRADING'))",
                     "import numpy as np\nx = np.ones((1024, 1024, 512))",
                     "import mhalib.reference")
        assert "1" in _text(steps[0])
        assert "MemoryError" in _text(steps[1])
        assert "ImportError" in _text(steps[2])
    time.sleep(0.2)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                assert b"sleep\x00679" not in handle.read()
        except OSError:
            continue


def test_a_notebook_imports_modules_the_zygote_did_not_preimport(jail):
    steps = _run(jail, "import sympy, scipy.special\nprint('imported', sympy.__name__)")
    assert "imported sympy" in _text(steps[0]), _text(steps[0])


def test_a_python_installation_under_tmp_is_bound_again_after_the_fresh_tmp(monkeypatch):
    monkeypatch.setattr(sandbox_module.sys, "prefix", "/tmp/course/.venv")
    monkeypatch.setattr(sandbox_module.sys, "exec_prefix", "/tmp/course/.venv")
    monkeypatch.setattr(sandbox_module.sys, "base_prefix", "/opt/python")
    monkeypatch.setattr(sandbox_module.sys, "base_exec_prefix", "/opt/python")
    rebind = sandbox_module.prefixes_under_private_tops()
    assert rebind == [(f"{sandbox_module.PREFIX_HOLD}/1", "/tmp/course/.venv")]
    binds = sandbox_module._system_binds()
    assert binds[-3:] == ["--ro-bind", "/tmp/course/.venv", rebind[0][0]]
