"""Issue 21, mechanism 2 (and new ones beside it): work the grader's work checks do not see.

Three exercises are judged on *how* they compute as well as on their values:
``decode_with_cache`` (each step projects only the new token; the probe's ``ProductWatch``
records the shape of every matrix product), ``online_softmax_attention`` (never the whole
N_q x N_k scores; ``TensorWatch`` records the largest tensor an op allocates) and
``chunked_prefill`` (never N x N, and no fused SDPA call over more queries than a chunk). The
watches are ``TorchDispatchMode`` objects in the learner's own process and thread.

Each entry here computes the right values with the forbidden method and hides the method.
The honest slip it amounts to is priced by the default rubric at 1/3 of the exercise's
3 points (``projects_all_tokens_at_once``, ``builds_full_scores``, ``builds_n_by_n``,
``not_chunked``), so a trustworthy grader gives at most 1 point, or flags the notebook for
review.
"""

from __future__ import annotations

from tests.grading.attacks.snippets import (
    NAIVE_ATTENTION,
    PREPROJECTED_DECODE,
    RESET_MEASUREMENTS,
    SINGLE_PASS_GQA,
    WHOLE_PROMPT,
)
from tests.grading.attacks.spec import DECODE_IN_PROCESS, FUSED_SDPA, AtMost, Submission


def decode_slip() -> AtMost:
    return AtMost("decode_with_cache", 1.0, why="projects_all_tokens_at_once: 1/3 of 3")


def online_slip() -> AtMost:
    return AtMost("online_softmax_attention", 1.0, why="builds_full_scores: 1/3 of 3")


def chunked_slip() -> AtMost:
    return AtMost("chunked_prefill", 1.0, why="builds_n_by_n / not_chunked: 1/3 of 3")


MUL_SUM_DECODE = PREPROJECTED_DECODE + '''

def _mul_sum(t, w):
    """t @ w as a broadcast multiply and a sum: no matrix product for the watch to see."""
    return (t.float()[..., :, None] * w.float()).sum(dim=-2).to(t.dtype)


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _preprojected_decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, _mul_sum)
'''

CONV1D_DECODE = PREPROJECTED_DECODE + '''
import torch.nn.functional as F


def _conv(t, w):
    """t @ w as a width-1 convolution over the tokens."""
    out = F.conv1d(t.float().transpose(1, 2), w.float().T.unsqueeze(-1))
    return out.transpose(1, 2).to(t.dtype)


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _preprojected_decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, _conv)
'''

THREAD_DECODE = SINGLE_PASS_GQA + '''
import threading


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """One causal pass over the whole sequence, run in a thread of its own."""
    box = {}
    worker = threading.Thread(target=lambda: box.update(
        out=_single_pass_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)))
    worker.start()
    worker.join()
    return box["out"]
'''

NO_MODES_DECODE = SINGLE_PASS_GQA + '''
from torch.utils._python_dispatch import _disable_current_modes


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """One causal pass with the dispatch modes (the grader's watches) switched off."""
    with _disable_current_modes():
        return _single_pass_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)
'''

CTYPES_ONLINE = '''import ctypes
import math
import numpy as np
import torch

_CTYPES = {torch.float32: ctypes.c_float, torch.float64: ctypes.c_double}


def _as_numpy(t):
    """A numpy view of a contiguous tensor's memory, through its data pointer (no
    Tensor.numpy())."""
    raw = (_CTYPES[t.dtype] * t.numel()).from_address(t.data_ptr())
    return np.ctypeslib.as_array(raw).reshape(tuple(t.shape))


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """The whole score matrix, in numpy, reached through ctypes."""
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    qc, kc, vc = (t.to(compute).contiguous() for t in (q, k, v))
    qn, kn, vn = _as_numpy(qc), _as_numpy(kc), _as_numpy(vc)
    n_q, n_k = qn.shape[-2], kn.shape[-2]
    scores = qn @ np.swapaxes(kn, -1, -2) / math.sqrt(qn.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones((n_q, n_k), dtype=bool), n_k - n_q), scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isinf(top), 0.0, top))
    total = weights.sum(axis=-1, keepdims=True)
    total[total == 0] = 1.0
    out = torch.empty(q.shape, dtype=compute)
    _as_numpy(out)[...] = (weights / total) @ vn
    return out.to(q.dtype)
'''

_SCORES_IN_BUFFER = '''

def _attention_into(scores, q, k, v, causal):
    """Exact attention whose (B, H, N_q, N_k) scores live in ``scores`` (given), filled by
    bmm(out=...) and normalised in place."""
    compute = scores.dtype
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q3 = q.to(compute).reshape(-1, n_q, d)
    k3 = k.to(compute).reshape(-1, n_k, d)
    torch.bmm(q3, k3.transpose(1, 2), out=scores.view(-1, n_q, n_k))
    scores.mul_(1.0 / math.sqrt(d))
    if causal:
        scores.masked_fill_(torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1),
                            float("-inf"))
    top = scores.amax(dim=-1, keepdim=True).nan_to_num_(neginf=0.0)
    scores.sub_(top).exp_()
    total = scores.sum(dim=-1, keepdim=True)
    total.masked_fill_(total == 0, 1.0)
    scores.div_(total)
    return (scores @ v.to(compute)).to(q.dtype)
'''

RESIZE_ONLINE = '''import math
import torch
''' + _SCORES_IN_BUFFER + '''

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """The whole score matrix in a tensor grown with resize_ from an empty one."""
    scores = torch.empty(0, dtype=torch.promote_types(q.dtype, torch.float32))
    scores.resize_(*q.shape[:-1], k.shape[-2])
    return _attention_into(scores, q, k, v, causal)
'''

FUSED_SDPA_ONLINE = '''import torch
import torch.nn.functional as F


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """One fused F.scaled_dot_product_attention call over all the keys (block_size unused)."""
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, n_k = q.shape[-2], k.shape[-2]
    qc, kc, vc = q.to(compute), k.to(compute), v.to(compute)
    if not causal or n_q == n_k:
        out = F.scaled_dot_product_attention(qc, kc, vc, is_causal=causal)
    else:
        visible = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        out = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=visible)
        out = out.masked_fill(~visible.any(dim=-1)[:, None], 0.0)
    return out.to(q.dtype)
'''

THREAD_CHUNKED = WHOLE_PROMPT + '''
import threading


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """The whole prompt at once (N x N scores), in a thread of its own."""
    box = {}
    worker = threading.Thread(target=lambda: box.update(
        out=_whole_prompt(x, w_q, w_k, w_v, w_o, num_heads)))
    worker.start()
    worker.join()
    return box["out"]
'''

# -- new mechanisms (not in issue 21) ----------------------------------------------------------

POOL_CELL = '''import torch

# learner cell before the exercise: a scratch pool allocated once, outside any measured call
_POOL = {dtype: torch.empty(2_000_000, dtype=dtype) for dtype in (torch.float32, torch.float64)}
'''

POOL_ONLINE = '''import math
import torch
''' + _SCORES_IN_BUFFER + '''

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """The whole score matrix, written with out= into a view of a pool made in an earlier
    cell: no op inside the call allocates it."""
    compute = torch.promote_types(q.dtype, torch.float32)
    shape = (*q.shape[:-1], k.shape[-2])
    numel = math.prod(shape)
    return _attention_into(_POOL[compute][:numel].view(shape), q, k, v, causal)
'''

EARLIER_THREAD_CELL = SINGLE_PASS_GQA + '''
import queue
import threading

# learner cell before the exercise: a worker thread that does the work when asked
_JOBS = queue.Queue()


def _worker():
    while True:
        args, box, done = _JOBS.get()
        try:
            box["out"] = _single_pass_gqa(*args)
        except Exception as error:  # handed back to the caller
            box["error"] = error
        done.set()


threading.Thread(target=_worker, daemon=True).start()
'''

EARLIER_THREAD_DECODE = '''import threading


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Hands the whole sequence to the thread started in an earlier cell and waits."""
    box, done = {}, threading.Event()
    _JOBS.put(((x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads), box, done))
    done.wait()
    if "error" in box:
        raise box["error"]
    return box["out"]
'''

FORK_CHUNKED = WHOLE_PROMPT + '''
import ctypes
import os
import torch


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """The whole prompt at once, computed by a forked child process; the result comes back
    as bytes through a pipe."""
    out = torch.empty(x.shape, dtype=torch.float64)
    nbytes = out.numel() * 8
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            result = _whole_prompt(x.double(), w_q.double(), w_k.double(), w_v.double(),
                                   w_o.double(), num_heads).contiguous()
            data = memoryview(ctypes.string_at(result.data_ptr(), nbytes))
            while data:
                data = data[os.write(write_end, data):]
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    data = b"".join(chunks)
    if len(data) != nbytes:
        raise RuntimeError("the child process failed")
    ctypes.memmove(out.data_ptr(), data, nbytes)
    return out.to(x.dtype)
'''

NO_ENTER_CELL = '''from torch.utils._python_dispatch import TorchDispatchMode

# learner cell before the exercise: every dispatch mode (the grader's watches are ones)
# now does nothing when entered
TorchDispatchMode.__enter__ = lambda self: self
TorchDispatchMode.__exit__ = lambda self, *exc: None
print("[attack] armed: TorchDispatchMode.__enter__/__exit__ replaced")
'''

MOST_SCORES_FLOAT32 = '''import math

import torch


def _scores_into(s, q, k, start, stop, causal):
    """softmax(q k^T / sqrt(d)) of query rows start:stop, in place in s (float32)."""
    torch.matmul(q[..., start:stop, :], k.transpose(-1, -2), out=s)
    s.mul_(1 / math.sqrt(q.shape[-1]))
    if causal:
        rows = torch.arange(start, stop)[:, None] + (k.shape[-2] - q.shape[-2])
        s.masked_fill_(torch.arange(k.shape[-2])[None, :] > rows, float("-inf"))
    s.sub_(s.amax(-1, keepdim=True).nan_to_num(neginf=0.0)).exp_()
    total = s.sum(-1, keepdim=True)
    s.div_(torch.where(total == 0, torch.ones_like(total), total))
    return s


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """float32 scores for all but the last 512 queries at once (7/8 of N x N), then the rest."""
    qf, kf, vf = q.float(), k.float(), v.float()
    n, m = q.shape[-2], k.shape[-2]
    cut = max(n - 512, 0)
    parts = []
    for start, stop in ((0, cut), (cut, n)):
        if stop > start:
            s = torch.empty(*q.shape[:-2], stop - start, m)
            parts.append((_scores_into(s, qf, kf, start, stop, causal) @ vf).to(q.dtype))
            del s
    return torch.cat(parts, -2)
'''

POOL_DEFAULT_ONLINE = '''import math

import torch


def _scores_into(s, q, k, start, stop, causal):
    """softmax(q k^T / sqrt(d)) of query rows start:stop, in place in s (float32)."""
    torch.matmul(q[..., start:stop, :], k.transpose(-1, -2), out=s)
    s.mul_(1 / math.sqrt(q.shape[-1]))
    if causal:
        rows = torch.arange(start, stop)[:, None] + (k.shape[-2] - q.shape[-2])
        s.masked_fill_(torch.arange(k.shape[-2])[None, :] > rows, float("-inf"))
    s.sub_(s.amax(-1, keepdim=True).nan_to_num(neginf=0.0)).exp_()
    total = s.sum(-1, keepdim=True)
    s.div_(torch.where(total == 0, torch.ones_like(total), total))
    return s


def online_softmax_attention(q, k, v, block_size=64, causal=False,
                             _pool=torch.ones(15_000_000, dtype=torch.float32)):
    """The same, in a 60 MB buffer that the parameter default filled when defined."""
    qf, kf, vf = q.float(), k.float(), v.float()
    n, m = q.shape[-2], k.shape[-2]
    lead = q.shape[:-2]
    cut = max(n - 512, 0)
    parts = []
    for start, stop in ((0, cut), (cut, n)):
        if stop <= start:
            continue
        size = math.prod(lead) * (stop - start) * m
        if size <= _pool.numel():
            s = _pool[:size].view(*lead, stop - start, m)
        else:
            s = torch.empty(*lead, stop - start, m)
        parts.append((_scores_into(s, qf, kf, start, stop, causal) @ vf).to(q.dtype))
        del s
    return torch.cat(parts, -2)
'''

NAIVE_ONLINE = NAIVE_ATTENTION + '''

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    return _naive_attention(q, k, v, causal)
'''

CUSTOM_OP_CHUNKED = WHOLE_PROMPT + '''
import math
import torch


@torch.library.custom_op("learner::causal_attention", mutates_args=())
def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The whole N x N attention inside one custom operator: a dispatch mode sees the
    operator, not what it does inside."""
    n = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# the first call of a custom operator imports a good deal: pay for it here, not in the grader's
# timed call
torch.ops.learner.causal_attention(*torch.zeros(3, 1, 1, 2, 2))


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _whole_prompt(x, w_q, w_k, w_v, w_o, num_heads,
                         attend=torch.ops.learner.causal_attention)
'''

SETTRACE_CELL = RESET_MEASUREMENTS + '''
import sys

# learner cell before the exercise: a trace function that, whenever a function of the grader's
# checkers returns, zeroes any measurement object among its locals
_RESETS = [0]


def _tracer(frame, event, arg):
    if event == "call" and "/mhalib/checks/" in frame.f_code.co_filename:
        def _on_return(inner, inner_event, inner_arg):
            if inner_event == "return":
                _RESETS[0] += _reset_measurements(list(inner.f_locals.values()))
            return _on_return
        return _on_return
    return None


sys.settrace(_tracer)
'''

SETTRACE_REPORT = '''print("[attack] armed:", _RESETS[0], "measurements zeroed")
'''

FRAME_RESET_ONLINE = NAIVE_ATTENTION + RESET_MEASUREMENTS + '''
import sys

_RESETS = [0]


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """N x N attention; then up its own call stack to the grader's probe, zeroing any
    measurement object it finds there before returning."""
    out = _naive_attention(q, k, v, causal)
    frame = sys._getframe(1)
    while frame is not None:
        _RESETS[0] += _reset_measurements(list(frame.f_locals.values()))
        frame = frame.f_back
    return out
'''

DEFERRED_ONLINE = NAIVE_ATTENTION + '''
import torch


class _Deferred(torch.Tensor):
    """A tensor of the output's shape and dtype whose values are computed only when the
    caller detaches it (the grader does, to record the output: after the measured call)."""

    @staticmethod
    def __new__(cls, q, k, v, causal):
        self = torch.Tensor._make_subclass(cls, torch.empty(q.shape, dtype=q.dtype))
        self._inputs = (q, k, v, causal)
        return self

    def detach(self):
        return _naive_attention(*self._inputs)


_Deferred.__module__ = "torch.deferred"  # recorded like a torch tensor


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    return _Deferred(q, k, v, causal)
'''


SUBMISSIONS = [
    Submission("work-decode-mul-sum", "06-gqa", "2 work check",
               "decode_with_cache projects every token before the loop with a broadcast "
               "multiply-and-sum (no matrix product)", [decode_slip()],
               answers={"decode_with_cache": MUL_SUM_DECODE},
               known_limit=DECODE_IN_PROCESS),
    Submission("work-decode-conv1d", "06-gqa", "2 work check",
               "decode_with_cache projects every token before the loop with F.conv1d",
               [decode_slip()], answers={"decode_with_cache": CONV1D_DECODE}),
    Submission("work-decode-thread", "06-gqa", "2 work check",
               "decode_with_cache = one causal pass over the whole sequence, in a thread "
               "started inside the call", [decode_slip()],
               answers={"decode_with_cache": THREAD_DECODE},
               known_limit=DECODE_IN_PROCESS),
    Submission("work-decode-disable-modes", "06-gqa", "2 work check",
               "decode_with_cache = one causal pass inside "
               "torch.utils._python_dispatch._disable_current_modes()", [decode_slip()],
               answers={"decode_with_cache": NO_MODES_DECODE},
               known_limit=DECODE_IN_PROCESS),
    Submission("work-online-ctypes-numpy", "07-flash", "2 work check",
               "online_softmax_attention builds the N x N scores in numpy, reached through "
               "data_ptr() and ctypes (no Tensor.numpy())", [online_slip()],
               answers={"online_softmax_attention": CTYPES_ONLINE}),
    Submission("work-online-resize", "07-flash", "2 work check",
               "online_softmax_attention: N x N scores in torch.empty(0).resize_(...), filled "
               "by bmm(out=...) and normalised in place", [online_slip()],
               answers={"online_softmax_attention": RESIZE_ONLINE}),
    Submission("work-online-fused-sdpa", "07-flash", "2 work check",
               "online_softmax_attention = one fused F.scaled_dot_product_attention over all "
               "keys, block_size ignored", [online_slip()],
               answers={"online_softmax_attention": FUSED_SDPA_ONLINE},
               known_limit=FUSED_SDPA),
    Submission("work-chunked-thread", "11-serving", "2 work check",
               "chunked_prefill = the whole prompt at once (N x N scores), in a thread",
               [chunked_slip()], answers={"chunked_prefill": THREAD_CHUNKED}),
    # -- new ----------------------------------------------------------------------------------
    Submission("new-online-out-buffer", "07-flash", "new: buffer from an earlier cell",
               "online_softmax_attention writes the N x N scores with bmm(out=) into a view "
               "of a pool allocated in an earlier cell", [online_slip()], issue21=False,
               answers={"online_softmax_attention": POOL_ONLINE},
               after={"merge_attention_states": POOL_CELL}),
    Submission("new-decode-earlier-thread", "06-gqa", "new: thread from an earlier cell",
               "decode_with_cache hands the whole sequence to a worker thread started in an "
               "earlier cell (one causal pass)", [decode_slip()], issue21=False,
               answers={"decode_with_cache": EARLIER_THREAD_DECODE},
               after={"imports": EARLIER_THREAD_CELL},
               known_limit=DECODE_IN_PROCESS),
    Submission("new-chunked-fork", "11-serving", "new: os.fork",
               "chunked_prefill: the whole prompt computed by a forked child process, the "
               "result piped back as bytes", [chunked_slip()], issue21=False,
               answers={"chunked_prefill": FORK_CHUNKED}),
    Submission("new-online-no-dispatch-modes", "07-flash", "new: torch patched",
               "an earlier cell makes TorchDispatchMode.__enter__/__exit__ no-ops; "
               "online_softmax_attention builds the N x N scores", [online_slip()],
               issue21=False, answers={"online_softmax_attention": NAIVE_ONLINE},
               after={"imports": NO_ENTER_CELL}),
    Submission("new-online-float32-most-scores", "07-flash", "new: float32 under the limit",
               "an earlier cell disables the dispatch-mode watches; online_softmax_attention "
               "builds float32 scores for all but the last 512 queries at once (7/8 of N x N: "
               "57 MiB at the large case's N = 4096), then the rest", [online_slip()],
               issue21=False, answers={"online_softmax_attention": MOST_SCORES_FLOAT32},
               after={"imports": NO_ENTER_CELL}),
    Submission("new-online-pool-default", "07-flash", "new: buffer held by the definitions",
               "an earlier cell disables the dispatch-mode watches; online_softmax_attention "
               "writes float32 scores for 7/8 of the queries into a 60 MB buffer its parameter "
               "default filled (the definitions, run again in the measured process, may hold "
               "64 MB)", [online_slip()], issue21=False,
               answers={"online_softmax_attention": POOL_DEFAULT_ONLINE},
               after={"imports": NO_ENTER_CELL}),
    Submission("new-chunked-custom-op", "11-serving", "new: opaque custom op",
               "chunked_prefill: the whole N x N attention inside a torch.library.custom_op "
               "(the watches see one opaque op)", [chunked_slip()], issue21=False,
               answers={"chunked_prefill": CUSTOM_OP_CHUNKED}),
    Submission("new-online-settrace", "07-flash", "new: sys.settrace",
               "a sys.settrace hook from an earlier cell zeroes the tensor watch's "
               "measurement before it is read; online_softmax_attention builds N x N",
               [online_slip()], issue21=False,
               answers={"online_softmax_attention": NAIVE_ONLINE},
               after={"imports": SETTRACE_CELL,
                      "test_online_softmax_attention": SETTRACE_REPORT}),
    Submission("new-online-frame-reset", "07-flash", "new: inspect the caller",
               "online_softmax_attention builds N x N, then walks up its own call stack to "
               "the grader's TensorWatch and zeroes it", [online_slip()], issue21=False,
               answers={"online_softmax_attention": FRAME_RESET_ONLINE},
               after={"test_online_softmax_attention": SETTRACE_REPORT}),
    Submission("new-online-deferred-tensor", "07-flash", "new: work deferred to recording",
               "online_softmax_attention returns a torch.Tensor subclass whose detach() "
               "computes N x N attention: the work happens when the grader records the "
               "output, after the measured call", [online_slip()], issue21=False,
               answers={"online_softmax_attention": DEFERRED_ONLINE}),
]
