"""Honest slips: the forbidden methods the attacks hide, written plainly, with no trick.

Each earns exactly the default rubric's price for its slip (1 of 3 points). They calibrate
the catalogue: an attack that uses the same method and earns more owes the difference to its
trick, and a defence that closes the tricks must still give an honest slip its price (credit
follows the diagnosis, not a crash under some new limit).
"""

from __future__ import annotations

from tests.grading.attacks.snippets import NAIVE_ATTENTION, SINGLE_PASS_GQA, WHOLE_PROMPT
from tests.grading.attacks.spec import Exactly, Submission

NAIVE_ONLINE = NAIVE_ATTENTION + '''

def online_softmax_attention(q, k, v, block_size=64, causal=False):
    return _naive_attention(q, k, v, causal)
'''

SINGLE_PASS_DECODE = SINGLE_PASS_GQA + '''

def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _single_pass_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)
'''

EXPLICIT_WHOLE_PROMPT = WHOLE_PROMPT + '''

def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _whole_prompt(x, w_q, w_k, w_v, w_o, num_heads)
'''

FUSED_WHOLE_PROMPT = WHOLE_PROMPT + '''
import torch.nn.functional as F


def chunked_prefill(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    return _whole_prompt(x, w_q, w_k, w_v, w_o, num_heads,
                         attend=lambda q, k, v: F.scaled_dot_product_attention(
                             q, k, v, is_causal=True))
'''

SUBMISSIONS = [
    Submission("slip-online-full-scores", "07-flash", "honest slip",
               "online_softmax_attention written as plain attention (N x N scores)",
               [Exactly("online_softmax_attention", 1.0, "builds_full_scores: 1/3 of 3")],
               kind="slip", answers={"online_softmax_attention": NAIVE_ONLINE}),
    Submission("slip-decode-single-pass", "06-gqa", "honest slip",
               "decode_with_cache written as one causal pass over the whole sequence",
               [Exactly("decode_with_cache", 1.0, "projects_all_tokens_at_once: 1/3 of 3")],
               kind="slip", answers={"decode_with_cache": SINGLE_PASS_DECODE}),
    Submission("slip-chunked-n-by-n", "11-serving", "honest slip",
               "chunked_prefill written as causal attention over the whole prompt (N x N)",
               [Exactly("chunked_prefill", 1.0, "builds_n_by_n: 1/3 of 3")], kind="slip",
               answers={"chunked_prefill": EXPLICIT_WHOLE_PROMPT}),
    Submission("slip-chunked-fused", "11-serving", "honest slip",
               "chunked_prefill written as one fused SDPA call over the whole prompt",
               [Exactly("chunked_prefill", 1.0, "not_chunked: 1/3 of 3")], kind="slip",
               answers={"chunked_prefill": FUSED_WHOLE_PROMPT}),
]
