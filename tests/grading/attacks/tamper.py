"""Issue 21, mechanism 4 (and new ones beside it): a writable checker, writable records and a
writable step log.

The probe that measures the learner's function runs in the learner's own process; the records
it writes (``<exchange>/task/records/<exercise>.json``) and the step log the grader reads the
integrity flags from (``steps.jsonl``) sit in a folder that process can write. The integrity
check compares two checker functions and a list of numpy/torch names, nothing else.

Rules: the exercise earns at most the price of the honest slip the unpatched function shows
(1/3 of 3 points here), or the notebook is flagged for review; the log-rewrite entry patches
numpy (which the README promises to flag as ``integrity``) and must be flagged.
"""

from __future__ import annotations

from tests.grading.attacks.snippets import (
    FIND_FILES,
    NAIVE_ATTENTION,
    NAIVE_ATTENTION_NUMPY,
    SINGLE_PASS_GQA,
    WHOLE_PROMPT,
)
from tests.grading.attacks.spec import (
    DECODE_IN_PROCESS,
    INTEGRITY_IN_PROCESS,
    AtMost,
    Review,
    Submission,
)

SINGLE_PASS_DECODE = SINGLE_PASS_GQA + '''

def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _single_pass_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)
'''

PATCH_CHECKER_METHOD = '''from mhalib.checks.registry import get_exercise

# learner cell before the test: the checker's probe method, replaced on its class
_checker_class = type(get_exercise("decode_with_cache"))
_original_call = _checker_class.call


def _call(self, func, case):
    output, meta = _original_call(self, func, case)
    if "projection_tokens" in meta:
        meta.update(flops=0, projection_tokens=case.args[0].shape[0])
    return output, meta


_checker_class.call = _call
print("[attack] armed: replaced", _checker_class.__name__ + ".call")
'''

SWAP_CHECKER_MODULE = '''import importlib
import sys
import types

from mhalib import course

_real = importlib.import_module(course.lesson_of_exercise("decode_with_cache").checker)

# learner cell before the test: a module of my own stands in for the checker module, and the
# grader's registry (importlib.import_module) hands it out
_fake = types.ModuleType(_real.__name__)
_fake.__dict__.update(_real.__dict__)


class _Decode(_real.DecodeWithCache):
    def call(self, func, case):
        output, meta = super().call(func, case)
        if "projection_tokens" in meta:
            meta.update(flops=0, projection_tokens=case.args[0].shape[0])
        return output, meta


_fake.EXERCISES = {**_real.EXERCISES, "decode_with_cache": _Decode()}
sys.modules[_real.__name__] = _fake
print("[attack] armed: sys.modules[" + repr(_real.__name__) + "] replaced")
'''

NAIVE_ONLINE = NAIVE_ATTENTION + '''

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    return _naive_attention(q, k, v, causal)
'''

REWRITE_RECORD_CELL = FIND_FILES + '''
import json

# learner cell after the test: the record the probe just wrote (found by its content), edited
for _path in _record_files("online_softmax_attention"):
    with open(_path, encoding="utf-8") as _handle:
        _record = json.load(_handle)
    for _case in _record.get("cases", []):
        if isinstance(_case.get("meta"), dict) and "largest_numel" in _case["meta"]:
            _case["meta"].update(largest_numel=1, largest_shape=[1])
    with open(_path, "w", encoding="utf-8") as _handle:
        json.dump(_record, _handle)
    print("[attack] armed: rewrote", _path)
'''

FUSED_WHOLE_PROMPT = WHOLE_PROMPT + '''
import torch.nn.functional as F


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """One fused SDPA call over the whole prompt (the rubric's not_chunked)."""
    return _whole_prompt(x, w_q, w_k, w_v, w_o, num_heads,
                         attend=lambda q, k, v: F.scaled_dot_product_attention(
                             q, k, v, is_causal=True))
'''

RACE_THREAD_CELL = FIND_FILES + '''
import json
import threading
import time

# learner cell before the test: a thread that rewrites the record as soon as it appears. The
# records of the exercises tested earlier show which folder to watch.
_RACE = {"folders": sorted({os.path.dirname(p) for p in
                            _find_files(['"format": "mhalib-record/1"'])}), "done": []}


def _rewrite(path):
    with open(path, encoding="utf-8") as handle:
        record = json.load(handle)
    for case in record.get("cases", []):
        meta = case.get("meta")
        if isinstance(meta, dict) and "largest_numel" in meta:
            meta.update(largest_numel=1, largest_shape=[1], fused_queries=0)
    with open(path + ".new", "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(path + ".new", path)


def _watch_for_record():
    deadline = time.monotonic() + 100
    while time.monotonic() < deadline and not _RACE["done"]:
        candidates = []
        for folder in _RACE["folders"]:
            for name in os.listdir(folder) if os.path.isdir(folder) else []:
                candidates.append(os.path.join(folder, name))
        if not _RACE["folders"]:
            candidates = _record_files("chunked_prefill")
        for path in candidates:
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                if '"exercise": "chunked_prefill"' in text and path.endswith(".json"):
                    _rewrite(path)
                    _RACE["done"].append(path)
            except (OSError, ValueError):
                continue
        time.sleep(0.01)


threading.Thread(target=_watch_for_record, daemon=True).start()
print("[attack] watching", _RACE["folders"])
'''

SLEEP_CELL = '''import time

time.sleep(2)  # the end of the notebook: let background work finish
print("[attack] armed: rewrote", _RACE["done"])
'''

NUMPY_ONLINE = NAIVE_ATTENTION_NUMPY + '''
import torch


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """The whole score matrix in numpy."""
    wide = [t.double().numpy() for t in (q, k, v)]
    return torch.from_numpy(_naive_attention_np(*wide, causal)).to(q.dtype)
'''

PATCH_CHECKER_GLOBALS = '''import contextlib
import importlib

from mhalib import course

# learner cell before the test: the checker module's helpers, replaced where it looks them up
_checker = importlib.import_module(course.lesson_of_exercise("online_softmax_attention").checker)
_checker.torch_only = lambda exercise: contextlib.nullcontext()
_checker.largest_new_tensor = lambda fn, *args, **kwargs: (fn(*args, **kwargs), 1, [1])
print("[attack] armed: patched", _checker.__name__, "torch_only, largest_new_tensor")
'''

PATCH_NUMPY_CELL = '''import numpy as np

np.allclose = lambda *args, **kwargs: True  # tampering the grader promises to flag
print("[attack] armed: np.allclose replaced")
'''

ERASE_LOG_CELL = FIND_FILES + '''
import json

# last learner cell: the step log the grader reads the integrity flags from (found by its
# content), rewritten without them
for _log in _find_files(['"tampering"', '"kind"']):
    _lines = []
    with open(_log, encoding="utf-8") as _handle:
        for _line in _handle:
            try:
                _entry = json.loads(_line)
            except ValueError:
                _lines.append(_line.rstrip("\\n"))
                continue
            if isinstance(_entry, dict) and _entry.get("tampering"):
                _entry["tampering"] = []
            _lines.append(json.dumps(_entry))
    with open(_log, "w", encoding="utf-8") as _handle:
        _handle.write("".join(line + "\\n" for line in _lines))
    print("[attack] armed: rewrote", _log)
'''

ORPHAN_CELL = FIND_FILES + '''
import json
import time

# learner cell after the test: a child process that outlives the notebook and rewrites the
# record once the notebook's own process has ended
_paths = _record_files("online_softmax_attention")
print("[attack] armed: a child will rewrite", _paths)
_parent = os.getpid()
if _paths and os.fork() == 0:
    try:
        os.setsid()
        while os.getppid() == _parent:
            time.sleep(0.002)
        for path in _paths:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
            for case in record["cases"]:
                if isinstance(case.get("meta"), dict) and "largest_numel" in case["meta"]:
                    case["meta"].update(largest_numel=1, largest_shape=[1])
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(record, handle)
    finally:
        os._exit(0)
'''

PATCH_INTEGRITY_CELL = '''import sys

import numpy as np

# learner cell: numpy patched, and every tamper check of mhalib loaded in this kernel (the
# checks run in this same kernel) told to find nothing
np.allclose = lambda *args, **kwargs: True
_patched = []
for _name, _module in list(sys.modules.items()):
    if _name.startswith("mhalib") and _module is not None:
        for _attr, _value in list(vars(_module).items()):
            if "tamper" in _attr.lower() and callable(_value) and not isinstance(_value, type):
                setattr(_module, _attr, lambda *args, **kwargs: [])
                _patched.append(_name + "." + _attr)
print("[attack] armed: patched", _patched)
'''

FORGE_SEAL_CELL = NAIVE_ATTENTION + """
import json
import os

from torch.utils._python_dispatch import TorchDispatchMode

# learner cell before the test. 1. The in-process watches see nothing (as in
# new-online-no-dispatch-modes). 2. A forged measurement of the large case: its inputs are a
# function of a seed, so pick one, compute the right output (N x N is fine here) and write a
# seal the way the grader writes one, beside the sealed folder (the same file system)
TorchDispatchMode.__enter__ = lambda self: self
TorchDispatchMode.__exit__ = lambda self, *exc: None

from mhalib.checks.physical import SEAL_FORMAT, encode_output  # noqa: E402
from mhalib.checks.registry import get_exercise  # noqa: E402
from mhalib.checks.torch_exercise import case_tensors  # noqa: E402

_exercise = get_exercise("online_softmax_attention")
_args, _kwargs = case_tensors(_exercise.physical.case(_exercise.name, 424242))
_seal = {"format": SEAL_FORMAT, "exercise": _exercise.name, "session": "physical",
         "seed": 424242,
         "record": {"status": "ok", "error": None,
                    "output": encode_output(_naive_attention(*_args[:3]))},
         "facts": {"refused": None, "killed": None, "peak_memory_mb": 3.0, "cpu_seconds": 0.05,
                   "cpu_limit_seconds": 20.0, "wall_seconds": 0.4, "peak_reset": True}}
_task = os.path.dirname(os.environ.get("MHALIB_WARDEN", "/nonexistent/x"))
try:
    with open(os.path.join(_task, "planted-seal.json"), "w", encoding="utf-8") as _handle:
        json.dump(_seal, _handle)
    print("[attack] armed: forged seal written in", _task)
except OSError as _error:
    print("[attack] could not write the forged seal:", _error)
del _args, _kwargs, _seal
"""

PLANT_ONLINE = NAIVE_ATTENTION + """
import gc
import os


def _plant():
    # in the measured process (a fork of the grader's warden): find the object that knows the
    # sealed folder, and move the forged seal into the place of the one the warden will write
    for obj in gc.get_objects():
        try:
            sealed = vars(obj).get("sealed_dir")
        except Exception:  # no __dict__, or a proxy that refuses
            continue
        if isinstance(sealed, str) and os.path.isdir(sealed):
            os.rename(os.path.join(os.path.dirname(sealed), "planted-seal.json"),
                      os.path.join(sealed, "online_softmax_attention.physical.json"))
            return True
    return False


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    try:
        open(os.devnull).close()
    except OSError:  # no file can be opened: the measured process
        try:
            if _plant():
                return q.clone()  # the warden's own seal of this will not be written
        except OSError:
            pass
    return _naive_attention(q, k, v, causal)
"""

DECODE = AtMost("decode_with_cache", 1.0, why="projects_all_tokens_at_once: 1/3 of 3")
ONLINE = AtMost("online_softmax_attention", 1.0, why="builds_full_scores: 1/3 of 3")
CHUNKED = AtMost("chunked_prefill", 1.0, why="not_chunked: 1/3 of 3")

SUBMISSIONS = [
    Submission("tamper-checker-method", "06-gqa", "4 writable checker",
               "DecodeWithCache.call replaced from a cell (reports one token per projection); "
               "decode_with_cache = one causal pass", [DECODE],
               answers={"decode_with_cache": SINGLE_PASS_DECODE},
               after={"decode_with_cache": PATCH_CHECKER_METHOD},
               known_limit=DECODE_IN_PROCESS),
    Submission("tamper-checker-globals", "07-flash", "4 writable checker",
               "mhalib.checks.lesson07.torch_only and .largest_new_tensor replaced from a "
               "cell; online_softmax_attention = N x N in numpy", [ONLINE],
               answers={"online_softmax_attention": NUMPY_ONLINE},
               after={"online_softmax_attention": PATCH_CHECKER_GLOBALS}),
    Submission("tamper-record-rewrite", "07-flash", "4 writable records",
               "a cell after the test edits records/online_softmax_attention.json "
               "(largest_numel = 1); the function builds N x N", [ONLINE],
               answers={"online_softmax_attention": NAIVE_ONLINE},
               after={"test_online_softmax_attention": REWRITE_RECORD_CELL}),
    Submission("tamper-record-race", "11-serving", "4 writable records",
               "a thread started before the test rewrites records/chunked_prefill.json the "
               "moment it appears; chunked_prefill = one fused SDPA over the prompt", [CHUNKED],
               answers={"chunked_prefill": FUSED_WHOLE_PROMPT},
               after={"chunked_prefill": RACE_THREAD_CELL, "end": SLEEP_CELL}),
    Submission("new-checker-module-swap", "06-gqa", "new: sys.modules",
               "a cell puts a module of its own in sys.modules['mhalib.checks.lesson06'] whose "
               "decode checker reports one token per projection; one causal pass", [DECODE],
               issue21=False, answers={"decode_with_cache": SINGLE_PASS_DECODE},
               after={"decode_with_cache": SWAP_CHECKER_MODULE},
               known_limit=DECODE_IN_PROCESS),
    Submission("new-step-log-rewrite", "06-gqa", "new: step log rewritten",
               "np.allclose patched (integrity), then the last cell rewrites steps.jsonl "
               "without the tampering entries", [Review()], issue21=False,
               after={"imports": PATCH_NUMPY_CELL, "end": ERASE_LOG_CELL},
               known_limit=INTEGRITY_IN_PROCESS),
    Submission("new-integrity-check-patched", "06-gqa", "new: tamper check patched",
               "np.allclose patched, and mhalib.checks.integrity.tampering replaced by a "
               "function that finds nothing", [Review()], issue21=False,
               after={"imports": PATCH_INTEGRITY_CELL},
               known_limit=INTEGRITY_IN_PROCESS),
    Submission("new-physical-seal-planted", "07-flash", "new: seal planted by the replay",
               "the dispatch-mode watches disabled; a cell writes a forged physical seal "
               "(chosen seed, right output, small counters) beside the sealed folder, and the "
               "function, run again in the measured process (a fork of the warden), moves it "
               "into the sealed folder; the function builds N x N", [ONLINE], issue21=False,
               answers={"online_softmax_attention": PLANT_ONLINE},
               after={"imports": FORGE_SEAL_CELL}),
    Submission("new-orphan-rewrites-record", "07-flash", "new: process outlives notebook",
               "a forked, setsid child waits for the notebook to end, then edits the "
               "record; the function builds N x N", [ONLINE], issue21=False,
               answers={"online_softmax_attention": NAIVE_ONLINE},
               after={"test_online_softmax_attention": ORPHAN_CELL}),
]
