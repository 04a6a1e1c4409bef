"""Quick checks of lesson 07 (merging partial attention states, and the online softmax behind
flash attention)."""

from __future__ import annotations

import math

from mhalib.quiz.question import FillIn, MultipleChoice


def _maxes(m_old: float, m_new: float) -> dict:
    return {"m_old": m_old, "m_new": m_new}


def _sets(lse_a: float, lse_b: float) -> dict:
    return {"lse_a": lse_a, "lse_b": lse_b}


def _share_of_a(s: dict) -> float:
    """exp(lse_a - lse) with lse = log(e^lse_a + e^lse_b), written without overflow."""
    return 1.0 / (1.0 + math.exp(s["lse_b"] - s["lse_a"]))


def _blocks(n_k: int, block_size: int) -> dict:
    return {"n_k": n_k, "block_size": block_size}


QUESTIONS = {
    "qc_merge_share": FillIn(
        id="qc_merge_share",
        prompt="The same query attended over key set A gave (out_a, lse_a) and over key set B "
               "gave (out_b, lse_b). The merged output is w_a * out_a + w_b * out_b. What is "
               "w_a? Use lse_a, lse_b, np and math; it must not overflow for lse of 1e4.",
        template="w_a = ____",
        scenarios=[_sets(1.0, 1.0), _sets(2.0, 2.0 + math.log(3.0)), _sets(-3.0, 0.5),
                   _sets(1e4, 1e4 - 2.0), _sets(-1e4, -1e4 + 1.0)],
        expected=_share_of_a,
        explanation="Set A holds e^lse_a of the total weight e^lse_a + e^lse_b, so "
                    "w_a = exp(lse_a - lse) = 1 / (1 + exp(lse_b - lse_a)). Written with the "
                    "difference of the two lse (or after subtracting the larger one) every "
                    "exponent stays small; exp(lse_a) alone is inf at 1e4.",
        hint="The share of A is e^lse_a over e^lse_a + e^lse_b; now divide top and bottom by "
             "e^lse_a.",
        examples=["1 / (1 + np.exp(lse_b - lse_a))",
                  "np.exp(lse_a - np.max((lse_a, lse_b))) / (np.exp(lse_a - np.max((lse_a, "
                  "lse_b))) + np.exp(lse_b - np.max((lse_a, lse_b))))"],
    ),
    "qc_rescale": FillIn(
        id="qc_rescale",
        prompt="The running sum was accumulated as sum of exp(s - m_old). A new block raises "
               "the running max to m_new. What factor brings the old sum to the new max?",
        template="running_sum = running_sum * ____ + block_sum",
        scenarios=[_maxes(1.0, 3.5), _maxes(-2.0, 0.25), _maxes(4.0, 4.0), _maxes(10.0, 30.0)],
        expected=lambda s: math.exp(s["m_old"] - s["m_new"]),
        explanation="exp(s - m_old) * exp(m_old - m_new) = exp(s - m_new): one multiplication "
                    "re-bases every old term, and since m_new >= m_old the factor is at most 1, "
                    "so nothing overflows. The running output gets the same factor.",
        hint="Which factor turns exp(s - m_old) into exp(s - m_new)?",
        examples=["np.exp(m_old - m_new)", "math.exp(m_old) / math.exp(m_new)"],
    ),
    "qc_num_blocks": FillIn(
        id="qc_num_blocks",
        prompt="How many key blocks does the loop visit for n_k keys in blocks of block_size "
               "(the last one may be shorter)?",
        template="blocks = ____",
        scenarios=[_blocks(256, 64), _blocks(200, 48), _blocks(1, 64), _blocks(65, 64)],
        expected=lambda s: -(-s["n_k"] // s["block_size"]),
        explanation="Ceiling division: range(0, n_k, block_size) has that many starts, and a "
                    "partial last block must not be dropped.",
        hint="256 keys in blocks of 64 make 4 blocks; 200 in blocks of 48 make 5.",
        examples=["math.ceil(n_k / block_size)", "(n_k + block_size - 1) // block_size"],
    ),
    "qc_flash_memory": MultipleChoice(
        id="qc_flash_memory",
        prompt="With block_size fixed, how does the extra memory of the online softmax (beyond "
               "q, k, v and the output) grow with the sequence length N, per batch and head?",
        options=["Like N^2, as the score matrix does",
                 "Like N: a running max and sum per query, and one N x block_size block of "
                 "scores",
                 "It stays constant",
                 "Like N log N"],
        key="aee5fc7928e227d5e53d",
        explanation="Nothing N x N is ever stored: each query keeps two numbers and its running "
                    "output, and only one block of scores exists at a time. (The Triton kernel "
                    "also tiles the queries, so its working set per program is constant.)",
        why_wrong={0: "That is the naive path, which stores all N x N scores and weights.",
                   2: "Each query needs its own running max and sum, so something grows with N.",
                   3: "No sorting or tree is involved: one pass over the key blocks."},
    ),
}
