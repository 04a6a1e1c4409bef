"""Issue 21, mechanism 1: answer-key equivalents outside the stubbed packages.

The grader's sandbox stubs ``mhalib.reference`` and the answer-key functions the manifest names,
and a profile hook (``AnswerKeyWatch``) refuses calls into functions of ``reference``,
``accounting``, ``kernels`` and ``nn`` whose *name* is one of the exercise's answer-key names.
Everything else that computes an answer ships in the package the sandbox imports: the lessons'
plotting helpers (``mhalib.viz``), the torch modules and kernels (reachable once the profile
hook is switched off, from another thread or under another code name) and the checkers' own
mistake models, which compute the right answer with their default knobs.

The contract (../shared/curriculum.md, "What counts as a correct answer"): calling mhalib's own
answer for the same exercise, or anything that reaches it, scores 0 for that exercise. So every
rule here is ``<= 0`` with no review alternative.
"""

from __future__ import annotations

from tests.grading.attacks.spec import AtMost, Submission


def zero(item: str) -> AtMost:
    return AtMost(item, 0.0, or_review=False, why="the answer key: 0 by the contract")


VIZ06_SDPA_GQA = '''from mhalib.viz.lesson06 import sdpa_gqa


def grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """The lesson's own oracle (mhalib.viz.lesson06.sdpa_gqa) does the whole layer."""
    return sdpa_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=causal)
'''

VIZ10_ROPE_MLA = '''import math
import torch
from mhalib.viz.lesson10 import rope_mla_attention


def mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Causal cases: the lesson's RoPE-MLA helper with zero RoPE weights (its scale
    1/sqrt(d_head + d_rope) undone by stretching w_q). Non-causal: written out."""
    d_head = w_q.shape[1] // num_heads
    wide = [t.double() for t in (x, w_dkv, w_uk, w_uv, w_q, w_o)]
    if causal:
        d_rope = 2
        w_qr = torch.zeros(x.shape[-1], num_heads * d_rope, dtype=torch.float64)
        w_kr = torch.zeros(x.shape[-1], d_rope, dtype=torch.float64)
        wide[4] = wide[4] * math.sqrt((d_head + d_rope) / d_head)
        return rope_mla_attention(*wide, w_qr, w_kr, num_heads).to(x.dtype)
    x64, w_dkv64, w_uk64, w_uv64, w_q64, w_o64 = wide
    batch, n, _ = x.shape
    split = lambda t: t.reshape(batch, n, num_heads, d_head).transpose(1, 2)  # noqa: E731
    c = x64 @ w_dkv64
    q, k, v = split(x64 @ w_q64), split(c @ w_uk64), split(c @ w_uv64)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head), dim=-1)
    return ((weights @ v).transpose(1, 2).reshape(batch, n, -1) @ w_o64).to(x.dtype)
'''

NN_DECODE_NO_PROFILE = '''import sys
import torch
from mhalib.nn import GroupedQueryAttention


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """mhalib.nn's GQA layer and its KVCache, one token per step; the answer-key watch is a
    profile hook, so it is switched off first."""
    sys.setprofile(None)
    batch, n, d_model = x.shape
    layer = GroupedQueryAttention(d_model, num_heads, num_kv_heads, dtype=x.dtype)
    with torch.no_grad():
        layer.qkv_proj.weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
        layer.out_proj.weight.copy_(w_o.T)
        cache = layer.new_kv_cache(batch, n)
        steps = [layer(x[:, t:t + 1], causal=True, kv_cache=cache) for t in range(n)]
    return torch.cat(steps, dim=1)
'''

KERNEL_IN_THREAD = '''import threading
from mhalib.kernels import tiled_attention


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """mhalib's tiled online-softmax kernel, called from a thread (the profile hook that
    watches for it is per thread)."""
    box = {}
    worker = threading.Thread(target=lambda: box.update(out=tiled_attention(q, k, v,
                                                                            causal=causal)))
    worker.start()
    worker.join()
    return box["out"]
'''

KERNEL_RENAMED = '''import types
from mhalib.kernels.tiled import tiled_attention as _tiled

# the same code object under another name: the watch matches functions by co_name
_blocks = types.FunctionType(_tiled.__code__.replace(co_name="blocks"), _tiled.__globals__,
                             "blocks", _tiled.__defaults__, _tiled.__closure__)


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    return _blocks(q, k, v, causal=causal)
'''

CHECKS_ONLINE_VARIANT = '''import torch
from mhalib.checks.attention_variants import online_softmax_variant


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """The checker's mistake model with every knob at its default: the right answer."""
    compute = torch.promote_types(q.dtype, torch.float32)
    out = online_softmax_variant(q.to(compute), k.to(compute), v.to(compute), block_size,
                                 causal)
    return out.to(q.dtype)
'''

CHECKS_MERGE = '''from mhalib.checks.lesson07 import _right_merge


def merge_attention_states(out_a, lse_a, out_b, lse_b):
    """The checker's reference merge (its mistake models are built on it)."""
    out, lse = _right_merge(out_a.double(), lse_a.double(), out_b.double(), lse_b.double())
    return out.to(out_a.dtype), lse.to(lse_a.dtype)
'''

CHECKS_MLA_CACHE = '''from mhalib.checks.lesson10 import _mla_cache


def mla_kv_cache_bytes(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return _mla_cache(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size,
                      bytes_per_element)
'''

CHECKS_MLA = '''from mhalib.checks.lesson10 import mla_variant


def mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    wide = [t.double() for t in (x, w_dkv, w_uk, w_uv, w_q, w_o)]
    return mla_variant(*wide, num_heads, causal=causal).to(x.dtype)
'''

CHECKS_ABSORB = '''from mhalib.checks.lesson10 import absorb_variant


def absorb_mla_weights(w_uk, w_uv, w_q, w_o, num_heads):
    q_latent, o_latent = absorb_variant(w_uk.double(), w_uv.double(), w_q.double(),
                                        w_o.double(), num_heads)
    return q_latent.to(w_q.dtype), o_latent.to(w_q.dtype)
'''

CHECKS_INTENSITY = '''from mhalib.checks.lesson11 import _intensity


def decode_attention_intensity(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    return _intensity(num_heads, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element)
'''

CHECKS_PAGED = '''from mhalib.checks.lesson11 import paged_variant


def paged_attention(q, k_pages, v_pages, block_table, seq_lens):
    out = paged_variant(q.double(), k_pages.double(), v_pages.double(), block_table,
                        seq_lens)
    return out.to(q.dtype)
'''

CHECKS_CHUNKED = '''from mhalib.checks.lesson11 import chunked_variant


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    wide = [t.double() for t in (x, w_q, w_k, w_v, w_o)]
    return chunked_variant(*wide, num_heads, chunk_size).to(x.dtype)
'''

NN_ROPE_NO_PROFILE = '''import sys
from mhalib.nn.rope import apply_rotary


def apply_rope(x, positions, base=10000.0):
    """mhalib.nn's rotary embedding (rotate-half layout), with the profile hook off."""
    sys.setprofile(None)
    return apply_rotary(x, positions, base)
'''

INSTALLED_COPY = '''import glob
import importlib.util
import os
import sys


def _installed_answer_key(name):
    """The answer key's own file, wherever an installed (non-editable) copy of mhalib sits
    on a path the sandbox can read (the grader's own answer-free copy excepted)."""
    roots = {sys.prefix, sys.base_prefix, *[p for p in sys.path if os.path.isdir(p)]}
    for root in sorted(roots):
        if root.startswith("/opt/mhalib-grader") or root in ("/", "/usr"):
            continue
        pattern = os.path.join(root, "**", "mhalib", "reference", name + ".py")
        for path in glob.glob(pattern, recursive=True):
            text = open(path, encoding="utf-8").read()
            if "not available while grading" in text:
                continue
            spec = importlib.util.spec_from_file_location("_found_key_" + name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return None


_KEY = _installed_answer_key("gqa")
print("answer key found:", _KEY is not None)


def grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if _KEY is None:
        raise NotImplementedError("no installed copy of the answer key on this machine")
    return _KEY.grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal)
'''


SUBMISSIONS = [
    Submission("answer-viz06-sdpa-gqa", "06-gqa", "1 answer path",
               "grouped_query_attention = mhalib.viz.lesson06.sdpa_gqa (the lesson's oracle)",
               [zero("grouped_query_attention")],
               answers={"grouped_query_attention": VIZ06_SDPA_GQA}),
    Submission("answer-viz10-rope-mla", "10-mla", "1 answer path",
               "mla_attention (causal cases) = mhalib.viz.lesson10.rope_mla_attention with zero "
               "RoPE weights, its scale undone", [zero("mla_attention")],
               answers={"mla_attention": VIZ10_ROPE_MLA}),
    Submission("answer-nn-decode-setprofile", "06-gqa", "1 answer path",
               "decode_with_cache = mhalib.nn.GroupedQueryAttention + KVCache after "
               "sys.setprofile(None) (the answer-key watch is a profile hook)",
               [zero("decode_with_cache")], answers={"decode_with_cache": NN_DECODE_NO_PROFILE}),
    Submission("answer-kernel-thread", "07-flash", "1 answer path",
               "online_softmax_attention = mhalib.kernels.tiled_attention run in a thread "
               "(profile hooks are per thread)", [zero("online_softmax_attention")],
               answers={"online_softmax_attention": KERNEL_IN_THREAD}),
    Submission("answer-kernel-renamed", "07-flash", "1 answer path",
               "online_softmax_attention = tiled_attention's code object renamed "
               "(co_name 'blocks')", [zero("online_softmax_attention")],
               answers={"online_softmax_attention": KERNEL_RENAMED}),
    Submission("answer-checks-online-variant", "07-flash", "1 answer path (checks)",
               "online_softmax_attention = mhalib.checks.attention_variants."
               "online_softmax_variant with default knobs", [zero("online_softmax_attention")],
               issue21=False, answers={"online_softmax_attention": CHECKS_ONLINE_VARIANT}),
    Submission("answer-checks-merge", "07-flash", "1 answer path (checks)",
               "merge_attention_states = mhalib.checks.lesson07._right_merge",
               [zero("merge_attention_states")], issue21=False,
               answers={"merge_attention_states": CHECKS_MERGE}),
    Submission("answer-checks-mla", "10-mla", "1 answer path (checks)",
               "all three lesson-10 exercises from mhalib.checks.lesson10 (_mla_cache, "
               "mla_variant, absorb_variant with default knobs)",
               [zero("mla_kv_cache_bytes"), zero("mla_attention"), zero("absorb_mla_weights")],
               issue21=False,
               answers={"mla_kv_cache_bytes": CHECKS_MLA_CACHE, "mla_attention": CHECKS_MLA,
                        "absorb_mla_weights": CHECKS_ABSORB}),
    Submission("answer-checks-serving", "11-serving", "1 answer path (checks)",
               "all three lesson-11 exercises from mhalib.checks.lesson11 (_intensity, "
               "paged_variant, chunked_variant with default knobs)",
               [zero("decode_attention_intensity"), zero("paged_attention"),
                zero("chunked_prefill")], issue21=False,
               answers={"decode_attention_intensity": CHECKS_INTENSITY,
                        "paged_attention": CHECKS_PAGED, "chunked_prefill": CHECKS_CHUNKED}),
    Submission("answer-installed-copy", "06-gqa", "1 answer path (installed files)",
               "grouped_query_attention loaded from mhalib/reference/gqa.py of any installed "
               "copy the sandbox can read (a non-editable install, e.g. a hub's class "
               "environment; none in an editable checkout)", [zero("grouped_query_attention")],
               issue21=False, answers={"grouped_query_attention": INSTALLED_COPY}),
    Submission("answer-nn-rope-setprofile", "09-rope", "1 answer path",
               "apply_rope = mhalib.nn.rope.apply_rotary after sys.setprofile(None) "
               "(lesson 09)", [zero("apply_rope")], issue21=False,
               answers={"apply_rope": NN_ROPE_NO_PROFILE}),
]
