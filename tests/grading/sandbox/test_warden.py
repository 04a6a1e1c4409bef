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
KEEP = torch.ones(12_000_000, dtype=torch.float64)
'''


def _plan(*sources, seed=None):
    steps = [{"kind": "cell", "source": "import torch", "setup": True}]
    steps += [{"kind": "cell", "source": source} for source in sources]
    steps.append({"kind": "record", "exercises": ["online_softmax_attention"]})
    return {"steps": steps, "seed": seed, "limits": {}}


@pytest.fixture(scope="module")
def shell():
    from mhalib.grading.sandbox.executor import make_shell

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
