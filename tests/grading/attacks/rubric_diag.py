"""Issue 21, mechanism 6: rubric prices and diagnoses.

- **leaves_torch above the method slips.** The default rubric gives ``leaves_torch`` 1/2 of
  the points and the method slips it stands in for (``builds_full_scores``,
  ``projects_all_tokens_at_once``, ``builds_n_by_n``) 1/3: moving the same forbidden method to
  numpy earns more than writing it in torch. A submission that leaves torch may earn at most
  what the method slip earns (1 of 3 points); here the function is plain numpy, so no review
  flag is owed: the rule is on the points.
- **A meta-device output** (a tensor with a shape and no data) earns 0 and must not be told
  "not written yet" (it still raises NotImplementedError): the diagnosis has to be true.
"""

from __future__ import annotations

from tests.grading.attacks.snippets import NAIVE_ATTENTION_NUMPY
from tests.grading.attacks.spec import AtMost, DiagnosisNot, Submission

NUMPY_ONLINE = NAIVE_ATTENTION_NUMPY + '''
import torch


def online_softmax_attention(q, k, v, block_size=64, causal=False):
    """The whole score matrix, in numpy."""
    wide = [t.double().numpy() for t in (q, k, v)]
    return torch.from_numpy(_naive_attention_np(*wide, causal)).to(q.dtype)
'''

NUMPY_DECODE = '''import math
import numpy as np
import torch


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Every token projected at once, then a step loop, all in numpy."""
    x64, wq, wk, wv, wo = (t.double().numpy() for t in (x, w_q, w_k, w_v, w_o))
    batch, n, d_model = x64.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    split = lambda t, h: t.reshape(batch, n, h, d_head).transpose(0, 2, 1, 3)  # noqa: E731
    q = split(x64 @ wq, num_heads)
    k = np.repeat(split(x64 @ wk, num_kv_heads), rep, axis=1)
    v = np.repeat(split(x64 @ wv, num_kv_heads), rep, axis=1)
    out = np.zeros((batch, n, d_model))
    for t in range(n):
        scores = q[:, :, t:t + 1] @ np.swapaxes(k[:, :, :t + 1], -1, -2) / math.sqrt(d_head)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        out[:, t] = (weights @ v[:, :, :t + 1]).transpose(0, 2, 1, 3).reshape(batch, d_model)
    return torch.from_numpy(out @ wo).to(x.dtype)
'''

NUMPY_CHUNKED = '''import math
import numpy as np
import torch


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    """The whole causal attention at once (N x N scores), in numpy."""
    x64, wq, wk, wv, wo = (t.double().numpy() for t in (x, w_q, w_k, w_v, w_o))
    batch, n, d_model = x64.shape
    d_head = d_model // num_heads
    split = lambda t: t.reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(x64 @ wq), split(x64 @ wk), split(x64 @ wv)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, n, d_model)
    return torch.from_numpy(context @ wo).to(x.dtype)
'''

META_GQA = '''import torch


def grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """A tensor of the right shape on the meta device: a shape, no values."""
    return torch.empty(x.shape, dtype=x.dtype, device="meta")
'''

SUBMISSIONS = [
    Submission("rubric-leaves-torch-online", "07-flash", "6 rubric price",
               "online_softmax_attention builds the N x N scores in numpy (.numpy())",
               [AtMost("online_softmax_attention", 1.0, or_review=False,
                       why="no more than builds_full_scores, 1/3 of 3")],
               answers={"online_softmax_attention": NUMPY_ONLINE}),
    Submission("rubric-leaves-torch-decode", "06-gqa", "6 rubric price",
               "decode_with_cache projects every token at once, in numpy",
               [AtMost("decode_with_cache", 1.0, or_review=False,
                       why="no more than projects_all_tokens_at_once, 1/3 of 3")],
               answers={"decode_with_cache": NUMPY_DECODE}),
    Submission("rubric-leaves-torch-chunked", "11-serving", "6 rubric price",
               "chunked_prefill computes the whole N x N attention in numpy",
               [AtMost("chunked_prefill", 1.0, or_review=False,
                       why="no more than builds_n_by_n, 1/3 of 3")],
               answers={"chunked_prefill": NUMPY_CHUNKED}),
    Submission("diag-meta-device", "06-gqa", "6 diagnosis",
               "grouped_query_attention returns torch.empty(shape, device='meta')",
               [AtMost("grouped_query_attention", 0.0, or_review=False, why="no values"),
                DiagnosisNot("grouped_query_attention", "not written yet")],
               answers={"grouped_query_attention": META_GQA}),
]
