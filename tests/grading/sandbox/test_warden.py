"""The warden: seeds issued once at call time, records sealed once, physical checks measured by
the kernel's counters in a process that runs only the notebook's definitions."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from mhalib.checks.physical import SEAL_FORMAT, judge_physical
from mhalib.checks.registry import get_exercise
from mhalib.grading.sandbox import seccomp
from mhalib.grading.sandbox.warden import Warden
from mhalib.grading.sandbox.warden_client import WardenClient, WardenError

ONLINE = '''
import math
import torch

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    m = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-1, -2) / math.sqrt(q.shape[-1])
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, shrink = torch.exp(s - new), torch.exp(m - new)
        total = total * shrink + p.sum(-1, keepdim=True)
        acc = acc * shrink + p @ v[..., start:start + block_size, :]
        m = new
    return acc / total
'''
NAIVE = '''
import math
import torch

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v
'''
BUFFER = '''
import torch

def keep(buffer=torch.ones(12_000_000, dtype=torch.float64)):  # run again: a default value
    return buffer
'''


def _plan(*sources, seed=None):
    steps = [{"kind": "cell", "source": "import torch", "setup": True}]
    steps += [{"kind": "cell", "source": source} for source in sources]
    steps.append({"kind": "record", "exercises": ["online_softmax_attention"]})
    return {"steps": steps, "seed": seed, "limits": {}}


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    from mhalib.grading.sandbox.executor import GraderShell, make_shell

    if InteractiveShell.initialized() and not isinstance(InteractiveShell.instance(),
                                                         GraderShell):
        InteractiveShell.clear_instance()  # another test's shell (IPython's test app)
    return make_shell()


def test_a_seed_is_issued_once_and_a_record_sealed_once(tmp_path, shell):
    warden = Warden(_plan(ONLINE, seed=7), str(tmp_path), shell)
    try:
        first = warden.handle({"op": "seed", "exercise": "online_softmax_attention"})
        assert "error" in warden.handle({"op": "seed", "exercise": "online_softmax_attention"})
        assert "error" in warden.handle({"op": "seed", "exercise": "attention"})
        assert "error" in warden.handle({"op": "record", "exercise": "merge_attention_states"})
        assert warden.handle({"op": "record", "exercise": "online_softmax_attention",
                              "record": {"cases": []}}) == {"sealed": True}
        again = warden.handle({"op": "record", "exercise": "online_softmax_attention",
                               "record": {"forged": True}})
        assert "already recorded" in again["error"]
    finally:
        warden.close()
    seal = json.loads((tmp_path / "sealed" / "online_softmax_attention.generic.json").read_text())
    assert seal["format"] == SEAL_FORMAT and seal["seed"] == first["seed"]
    assert seal["record"] == {"cases": []}


def test_without_a_fixed_seed_every_notebook_gets_fresh_inputs(tmp_path, shell):
    seeds = set()
    for number in range(3):
        warden = Warden(_plan(ONLINE), str(tmp_path / str(number)), shell)
        seeds.add(warden.handle({"op": "seed", "exercise": "online_softmax_attention"})["seed"])
        warden.close()
    assert len(seeds) == 3
    fixed = [Warden(_plan(ONLINE, seed=3), str(tmp_path / f"f{n}"), shell) for n in range(2)]
    assert fixed[0].seed_for("x", "generic") == fixed[1].seed_for("x", "generic")
    for warden in fixed:
        warden.close()


def test_the_learner_process_talks_to_the_warden_over_its_socket(tmp_path, shell):
    warden = Warden(_plan(ONLINE), str(tmp_path), shell)
    thread = threading.Thread(target=_serve_briefly, args=(warden,), daemon=True)
    thread.start()
    try:
        with WardenClient(warden.socket_path) as client:
            seed = client.seed("online_softmax_attention")
            client.submit("online_softmax_attention", {"cases": []})
            with pytest.raises(WardenError, match="already"):
                client.seed("online_softmax_attention")
    finally:
        thread.join(timeout=10)
        warden.close()
    assert json.loads((tmp_path / "sealed" / "online_softmax_attention.generic.json"
                       ).read_text())["seed"] == seed


def _serve_briefly(warden):
    """Serve until a short deadline (the 'learner' here is a sleeping child)."""
    pid = os.fork()
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    warden.serve(pid, time.monotonic() + 30)


def _physical(tmp_path, shell, *sources):
    warden = Warden(_plan(*sources), str(tmp_path), shell)
    try:
        checker = get_exercise("online_softmax_attention")
        record, facts = warden.measure(checker, 11, time.monotonic() + 120)
    finally:
        warden.close()
    seal = {"format": SEAL_FORMAT, "exercise": checker.name, "session": "physical",
            "seed": 11, "record": record, "facts": facts}
    return facts, judge_physical(checker, seal)


@pytest.mark.skipif(not seccomp.supported(), reason="the physical check needs the filter")
def test_the_physical_check_passes_blocks_and_names_the_full_score_matrix(tmp_path, shell):
    facts, verdict = _physical(tmp_path / "online", shell, ONLINE)
    assert facts["replay"]["seccomp"] is True and facts["peak_reset"] is True
    assert verdict.problem is None, (verdict, facts)
    assert facts["peak_memory_mb"] < get_exercise("online_softmax_attention").physical.memory_mb
    facts, verdict = _physical(tmp_path / "naive", shell, NAIVE)
    assert verdict.mistake == "builds_full_scores", (verdict, facts)


@pytest.mark.skipif(not seccomp.supported(), reason="the physical check needs the filter")
def test_memory_kept_by_the_notebooks_definitions_is_refused(tmp_path, shell):
    facts, verdict = _physical(tmp_path, shell, BUFFER, ONLINE)
    assert "definitions hold" in facts["refused"] and "physical_refused" in verdict.flags


PLANT = '''
import gc
import math
import os
import torch

def _plant():
    """In the measured process: move a forged seal into the warden's place for its own."""
    warden = next(o for o in gc.get_objects() if type(o).__name__ == "Warden")
    os.rename(os.path.join(os.path.dirname(warden.sealed_dir), "forged.json"),
              os.path.join(warden.sealed_dir, "online_softmax_attention.physical.json"))

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    try:
        _plant()
    except OSError:
        pass
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v
'''


@pytest.mark.skipif(not seccomp.supported(), reason="the physical check needs the filter")
def test_a_seal_planted_from_the_measured_process_is_never_the_one_judged(tmp_path, shell):
    forged = {"format": SEAL_FORMAT, "exercise": "online_softmax_attention",
              "session": "physical", "seed": 1, "record": {"status": "ok"},
              "facts": {"peak_memory_mb": 1.0, "cpu_seconds": 0.1}}
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    warden = Warden(_plan(PLANT), str(tmp_path), shell)
    try:
        warden.run_physical_checks(time.monotonic() + 120)
    finally:
        warden.close()
    assert (tmp_path / "forged.json").exists()  # the filter refused the move
    seal = json.loads((tmp_path / "sealed" / "online_softmax_attention.physical.json"
                       ).read_text())
    assert "planted" not in seal["facts"]
    verdict = judge_physical(get_exercise("online_softmax_attention"), seal)
    assert verdict.mistake == "builds_full_scores", (verdict, seal["facts"])


def test_a_file_already_at_a_seals_name_is_replaced_and_judged_as_tampering(tmp_path, shell):
    warden = Warden(_plan(ONLINE), str(tmp_path), shell)
    try:
        (tmp_path / "sealed" / "online_softmax_attention.physical.json").write_text("{}")
        warden.seal("online_softmax_attention", "physical", 5, {"status": "ok"}, {})
    finally:
        warden.close()
    seal = json.loads((tmp_path / "sealed" / "online_softmax_attention.physical.json"
                       ).read_text())
    assert seal["seed"] == 5 and "already in the sealed folder" in seal["facts"]["planted"]
    verdict = judge_physical(get_exercise("online_softmax_attention"), seal)
    assert verdict.flags == ("bad_record",) and verdict.problem
    # a generic seal in the physical seal's place is not the grader's measurement either
    other = {**seal, "session": "generic", "facts": {}}
    assert judge_physical(get_exercise("online_softmax_attention"), other).flags == (
        "bad_record",)


MOST_SCORES_FLOAT32 = '''
import math
import torch

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """float32 scores for all but the last 512 queries at once (7/8 of N x N), then the rest."""
    qf, kf, vf = q.float(), k.float(), v.float()
    n = q.shape[-2]
    parts = []
    for start, stop in ((0, n - 512), (n - 512, n)):
        s = qf[..., start:stop, :] @ kf.transpose(-1, -2)
        s.mul_(1 / math.sqrt(q.shape[-1]))
        s.sub_(s.amax(-1, keepdim=True)).exp_()
        s.div_(s.sum(-1, keepdim=True))
        parts.append((s @ vf).to(q.dtype))
        del s
    return torch.cat(parts, -2)
'''


@pytest.mark.skipif(not seccomp.supported(), reason="the physical check needs the filter")
def test_most_of_the_scores_in_float32_do_not_fit(tmp_path, shell):
    # 57 MiB: under the 64 MiB the large case once allowed, with right outputs (float32 is
    # within the tolerance)
    facts, verdict = _physical(tmp_path, shell, MOST_SCORES_FLOAT32)
    assert verdict.mistake == "builds_full_scores", (verdict, facts)


@pytest.mark.parametrize("exercise", ["online_softmax_attention", "chunked_prefill",
                                      "flash_attention_backward"])
def test_half_the_float32_scores_exceed_the_memory_limit(exercise):
    # the forbidden method cannot pass in any dtype the tolerance accepts (float16 does not):
    # float32 N x N scores of one head take at least twice the limit
    checker = get_exercise(exercise)
    n = checker.physical.case(exercise, 0).args[0].shape[-2]
    assert n * n * 4 >= 2 * checker.physical.memory_mb * 2 ** 20


POOL_IN_A_DEFAULT = '''
import math
import torch

def online_softmax_attention(q, k, v, block_size=64, causal=False,
                             _pool=torch.ones(15_000_000, dtype=torch.float32)):
    """float32 scores for all but the last 512 queries, in memory the definitions already hold."""
    qf, kf, vf = q.float(), k.float(), v.float()
    n, m = q.shape[-2], k.shape[-2]
    cut = max(n - 512, 0)
    parts = []
    for start, stop in ((0, cut), (cut, n)):
        if stop <= start:
            continue
        rows = stop - start
        if rows * m <= _pool.numel() and q.dim() == 4 and q.shape[0] * q.shape[1] == 1:
            s = _pool[:rows * m].view(1, 1, rows, m)
            torch.matmul(qf[..., start:stop, :], kf.transpose(-1, -2), out=s)
        else:
            s = qf[..., start:stop, :] @ kf.transpose(-1, -2)
        s.mul_(1 / math.sqrt(q.shape[-1]))
        s.sub_(s.amax(-1, keepdim=True)).exp_()
        s.div_(s.sum(-1, keepdim=True))
        parts.append((s @ vf).to(q.dtype))
    return torch.cat(parts, -2)
'''


@pytest.mark.skipif(not seccomp.supported(), reason="the physical check needs the filter")
def test_memory_the_definitions_hold_counts_as_the_calls(tmp_path, shell):
    # a 60 MB buffer filled by a parameter default (under the 64 MB the definitions may hold)
    # took float32 scores for 7/8 of the queries with 2 MiB of new memory at the call
    facts, verdict = _physical(tmp_path, shell, POOL_IN_A_DEFAULT)
    assert verdict.mistake == "builds_full_scores", (verdict, facts)
    assert facts["peak_memory_mb"] > 50


@pytest.mark.skipif(not seccomp.supported(), reason="the physical check needs the filter")
def test_an_import_the_measured_process_refuses_asks_for_a_look_not_a_silent_zero(tmp_path,
                                                                                 shell):
    """An honest answer whose library imports a module lazily, inside the call, fails in the
    measured process (no file may be opened there): the instructor is asked to look."""
    # A module nothing else imports (a stdlib one may already be loaded by whatever ran before
    # this test in the worker, and the measured process is forked from it).
    library = tmp_path / "library"
    library.mkdir()
    name = f"lazy_helper_{os.getpid()}_{time.monotonic_ns()}"
    (library / f"{name}.py").write_text("HELPER = 1\n")
    lazy = ONLINE.replace("def online_softmax_attention(q, k, v, block_size=64, causal=False):\n",
                          "def online_softmax_attention(q, k, v, block_size=64, causal=False):"
                          "\n    import importlib, sys\n"
                          f"    sys.path.insert(0, {str(library)!r})\n"
                          f"    importlib.import_module({name!r})  # as a library might, "
                          "on first use\n")
    assert lazy != ONLINE
    facts, verdict = _physical(tmp_path, shell, lazy)
    assert verdict.problem and "physical_error" in verdict.flags, (verdict, facts)
    assert "an instructor should look" in verdict.problem
