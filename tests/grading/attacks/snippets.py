"""Learner code shared by several entries (sources, run only inside the grader's sandbox).

Each is the *forbidden method* an attack hides from the grader's work checks, written as a
learner would: right values, wrong method.
"""

# lesson 06: causal GQA in one pass over the whole sequence (what decode_with_cache must not
# do: every token projected at once). ``proj(t, w)`` is the projection used (default t @ w).
SINGLE_PASS_GQA = '''import math
import torch


def _single_pass_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, proj=None):
    """Causal GQA over the whole sequence at once: (B, N, d_model) -> (B, N, d_model)."""
    proj = proj or (lambda t, w: t @ w)
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads

    def split(t, heads):
        return t.reshape(batch, n, heads, d_head).transpose(1, 2)

    q = split(proj(x, w_q), num_heads)
    k = split(proj(x, w_k), num_kv_heads).repeat_interleave(rep, dim=1)
    v = split(proj(x, w_v), num_kv_heads).repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(d_head)  # (B, H, N, N)
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1).to(x.dtype)
    context = (weights @ v).transpose(1, 2).reshape(batch, n, d_model)
    return proj(context, w_o)
'''

# lesson 06: decoding step by step, but with every token's K/V (and Q) projected before the
# loop by ``proj`` (the rubric's projects_all_tokens_at_once); the output projection too.
PREPROJECTED_DECODE = '''import math
import torch


def _preprojected_decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, proj):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads

    def split(t, heads):
        return t.reshape(batch, n, heads, d_head).transpose(1, 2)

    q = split(proj(x, w_q), num_heads)  # every token at once
    k = split(proj(x, w_k), num_kv_heads).repeat_interleave(rep, dim=1)
    v = split(proj(x, w_v), num_kv_heads).repeat_interleave(rep, dim=1)
    steps = []
    for t in range(n):  # the "decoding" loop reads the precomputed cache
        scores = (q[:, :, t:t + 1] @ k[:, :, :t + 1].transpose(-2, -1)).float()
        weights = torch.softmax(scores / math.sqrt(d_head), dim=-1).to(x.dtype)
        steps.append((weights @ v[:, :, :t + 1]).transpose(1, 2).reshape(batch, 1, d_model))
    return proj(torch.cat(steps, dim=1), w_o)
'''

# lesson 07: exact attention that builds the whole (B, H, N_q, N_k) score matrix.
NAIVE_ATTENTION = '''import math
import torch


def _naive_attention(q, k, v, causal=False):
    """softmax(q k^T / sqrt(d)) v with the whole score matrix; bottom-right causal mask;
    rows with no visible key give zeros."""
    compute = torch.promote_types(q.dtype, torch.float32)
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q.to(compute) @ k.to(compute).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        hidden = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
        scores = scores.masked_fill(hidden, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    weights = torch.exp(scores - top)
    total = weights.sum(dim=-1, keepdim=True)
    total = torch.where(total == 0, torch.ones_like(total), total)
    return ((weights / total) @ v.to(compute)).to(q.dtype)
'''

# lesson 07: the same in numpy (what leaves torch).
NAIVE_ATTENTION_NUMPY = '''import math
import numpy as np


def _naive_attention_np(q, k, v, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        visible = np.tril(np.ones((n_q, n_k), dtype=bool), n_k - n_q)
        scores = np.where(visible, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isinf(top), 0.0, top)
    weights = np.exp(scores - top)
    total = weights.sum(axis=-1, keepdims=True)
    total[total == 0] = 1.0
    return (weights / total) @ v
'''

# lesson 11: causal MHA over the whole prompt at once (what chunked_prefill must not do).
WHOLE_PROMPT = '''import math
import torch


def _whole_prompt(x, w_q, w_k, w_v, w_o, num_heads, attend=None):
    """Causal MHA in one pass; ``attend(q, k, v)`` does the attention (default: explicit
    N x N scores)."""
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)

    def split(t):
        return t.reshape(batch, n, num_heads, d_head).transpose(1, 2).to(compute)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    if attend is None:
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (B, H, N, N)
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        ctx = torch.softmax(scores, dim=-1) @ v
    else:
        ctx = attend(q, k, v)
    return ctx.transpose(1, 2).reshape(batch, n, d_model).to(x.dtype) @ w_o
'''

# files the grader reads back: found by their content anywhere the notebook may write, not by
# a path or a name in the grader's source (a renamed folder is no defence)
FIND_FILES = '''import os


def _writable_roots():
    roots = []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if name not in ("proc", "sys", "dev", "usr") and os.path.isdir(path):
            roots.append(path)
    return roots + ["/dev/shm"]


def _find_files(wanted, limit=20_000_000):
    """Paths of the regular files, in folders this process may write, whose text contains
    every string of ``wanted``."""
    found = []
    for root in _writable_roots():
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.access(os.path.join(folder, d), os.W_OK | os.X_OK)
                       and not os.path.islink(os.path.join(folder, d))]
            for name in files:
                path = os.path.join(folder, name)
                try:
                    if os.path.islink(path) or os.path.getsize(path) > limit:
                        continue
                    with open(path, encoding="utf-8", errors="replace") as handle:
                        text = handle.read()
                except OSError:
                    continue
                if all(w in text for w in wanted):
                    found.append(path)
    return found


def _record_files(exercise):
    return [p for p in _find_files(['"exercise": "' + exercise + '"', '"cases"'])
            if p.endswith(".json")]
'''

# the grading seed: any int local named like a seed in any frame of the call stack, or the
# "seed" of any dict there
FIND_SEEDS = '''import sys


def _candidate_seeds():
    seeds = []
    frame = sys._getframe()
    while frame is not None:
        for name, value in list(frame.f_locals.items()):
            if isinstance(value, dict) and isinstance(value.get("seed"), int):
                value = value["seed"]
            elif not ("seed" in name.lower() and isinstance(value, int)):
                continue
            if not isinstance(value, bool) and value not in seeds:
                seeds.append(value)
        frame = frame.f_back
    return seeds
'''

# a measurement object the grader's probe keeps (any object with a largest_numel attribute)
RESET_MEASUREMENTS = '''

def _reset_measurements(values):
    """Zero every measurement object among ``values``; returns how many."""
    count = 0
    for value in values:
        if hasattr(value, "largest_numel") and not isinstance(value, type):
            try:
                value.largest_numel, value.largest_shape = 0, []
                count += 1
            except (AttributeError, TypeError):
                pass
    return count
'''
