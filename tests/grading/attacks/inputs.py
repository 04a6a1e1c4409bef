"""Issue 21, mechanism 3: predictable grading inputs.

The grader draws a fresh seed per notebook, but hands it into the learner's process: the
executor's ``run_plan`` keeps it in a local (and in the plan dict) while learner cells run.
The checkers' cases are a pure function of the seed and are importable, so a cell that runs
before the exercise's test can regenerate every graded input, compute the answers with any
method (here the forbidden one) outside the measured call, and leave the function a table
lookup that does no work the watches could see.

Honest slip price: the method actually used (N x N scores: ``builds_full_scores``; one pass
over the whole sequence: ``projects_all_tokens_at_once``), 1/3 of 3 points, or review.
"""

from __future__ import annotations

from tests.grading.attacks.snippets import FIND_SEEDS, NAIVE_ATTENTION, SINGLE_PASS_GQA
from tests.grading.attacks.spec import AtMost, Submission

FRAME_SEED_CELL = NAIVE_ATTENTION + FIND_SEEDS + '''
from mhalib.checks.registry import get_exercise
from mhalib.checks.torch_exercise import case_tensors

# learner cell before the test: every seed-like value on the call stack (the grader's executor
# is up there), the graded cases regenerated from each, the answers computed now
_TABLE = []
for _seed in _candidate_seeds():
    try:
        _cases = get_exercise("online_softmax_attention").cases(_seed, "grading")
    except Exception:
        continue
    for _case in _cases:
        _args, _kwargs = case_tensors(_case)
        _TABLE.append((_args[0], _naive_attention(*_args[:3], _kwargs.get("causal", False))))
print("[attack] armed:", len(_TABLE), "answers precomputed")
'''

LOOKUP_ONLINE = NAIVE_ATTENTION + '''

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    for stored, out in _TABLE:  # filled by a later cell, before the test runs
        if stored.shape == q.shape and stored.dtype == q.dtype and torch.equal(stored, q):
            return out.clone()
    return _naive_attention(q, k, v, causal)
'''

GC_SEED_CELL = SINGLE_PASS_GQA + '''
import gc

# learner cell before the test: every live dict with an int "seed" (the grader's plan is one),
# the graded inputs regenerated from it and decoded in one pass each
_DECODED = []
_seeds = []
for _object in gc.get_objects():
    if isinstance(_object, dict) and isinstance(_object.get("seed"), int) \\
            and not isinstance(_object["seed"], bool) and _object["seed"] not in _seeds:
        _seeds.append(_object["seed"])
from mhalib.checks.registry import get_exercise  # noqa: E402
from mhalib.checks.torch_exercise import case_tensors  # noqa: E402

for _seed in _seeds[:20]:
    for _case in get_exercise("decode_with_cache").cases(_seed, "grading"):
        _args, _ = case_tensors(_case)
        _DECODED.append((_args[0], _single_pass_gqa(*_args)))
print("[attack] armed:", len(_DECODED), "answers precomputed from", len(_seeds), "seed(s)")
'''

LOOKUP_DECODE = SINGLE_PASS_GQA + '''

def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    for stored, out in _DECODED:  # filled by a later cell, before the test runs
        if stored.shape == x.shape and stored.dtype == x.dtype and torch.equal(stored, x):
            return out.clone()
    return _single_pass_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)
'''

SUBMISSIONS = [
    Submission("seed-frame-precompute", "07-flash", "3 predictable inputs",
               "a cell before the test reads the seed from the executor's frame, regenerates the "
               "cases and precomputes N x N attention; the function is a lookup",
               [AtMost("online_softmax_attention", 1.0, why="builds_full_scores: 1/3 of 3")],
               answers={"online_softmax_attention": LOOKUP_ONLINE},
               after={"online_softmax_attention": FRAME_SEED_CELL}),
    Submission("new-seed-gc-plan", "06-gqa", "new: gc finds the plan",
               "a cell before the test finds the grader's plan dict with gc.get_objects(), "
               "regenerates the cases and decodes each in one pass; the function is a lookup",
               [AtMost("decode_with_cache", 1.0, why="projects_all_tokens_at_once: 1/3 of 3")],
               issue21=False, answers={"decode_with_cache": LOOKUP_DECODE},
               after={"decode_with_cache": GC_SEED_CELL}),
]
