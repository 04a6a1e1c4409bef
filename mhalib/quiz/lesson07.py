"""Quick checks of lesson 07 (merging partial attention states, the online softmax and the
flash kernel): what the learner sees, no answers.

The keys are instructor data in ``grading/quick_checks/lesson07.py``.
"""

from __future__ import annotations

import numpy as np

from mhalib.quiz.question import FillIn, MultipleChoice


def _lse_pairs(rng: np.random.Generator) -> list[dict]:
    """Log-sum-exps of two key sets: equal, far apart, and as large as 1e4 either way."""
    fixed = [(1.0, 1.0), (1e4, 1e4 - 2.0), (-1e4, -1e4 + 1.0), (-3.0, 0.5)]
    drawn = [tuple(rng.normal(size=2) * 4) for _ in range(3)]
    return [{"lse_a": float(a), "lse_b": float(b)} for a, b in fixed + drawn]


def _block_states(rng: np.random.Generator) -> list[dict]:
    """A running state (m_old, l_old) and a block's own (m_blk, l_blk): either max larger."""
    states = []
    for m_old, m_blk in [(1.0, 3.5), (4.0, -2.0), (0.5, 0.5),
                         *(tuple(rng.normal(size=2) * 3) for _ in range(3))]:
        states.append({"m_old": float(m_old), "l_old": float(rng.uniform(1.0, 40.0)),
                       "m_blk": float(m_blk), "l_blk": float(rng.uniform(1.0, 64.0)),
                       "m_new": float(max(m_old, m_blk))})
    return states


def _kernel_reads(rng: np.random.Generator) -> dict:
    # (head dim, BLOCK_M, BLOCK_N); 2 * head_dim != BLOCK_M, so the K/V traffic never equals
    # the size of the N x N score matrix by accident, and BLOCK_N is neither BLOCK_M nor
    # 2 * BLOCK_M, so counting programs by BLOCK_N gives neither the answer nor the "factor 2
    # short" slip (tests/quiz/test_distinct_slips.py)
    head_dim, block_m, block_n = [(128, 128, 32), (128, 128, 64), (128, 64, 32),
                                  (64, 64, 32), (32, 128, 64)][rng.integers(5)]
    return {"tokens": int(rng.choice([4096, 8192, 16384, 32768])), "head_dim": head_dim,
            "block_m": block_m, "block_n": block_n,
            "dtype": ["float16", "bfloat16"][rng.integers(2)], "bytes_per_value": 2}


QUESTIONS = {
    "qc_merge_share": FillIn(
        id="qc_merge_share",
        prompt="The same query attended over key set A gave (out_a, lse_a) and over key set B "
               "gave (out_b, lse_b). The merged output is w_a * out_a + w_b * out_b. What is "
               "w_a? It must not overflow when the log-sum-exps are about 1e4.",
        template="w_a = ____",
        names={"lse_a": "log-sum-exp of set A's scores",
               "lse_b": "log-sum-exp of set B's scores"},
        scenarios=_lse_pairs,
    ),
    "qc_block_state": FillIn(
        id="qc_block_state",
        prompt="After some key blocks a query keeps its running max m_old and running sum "
               "l_old (the sum of exp(s - m_old) over the keys seen). The next block arrives "
               "already summarised by its own max m_blk and its own sum l_blk of "
               "exp(s - m_blk) over its keys, as one split of a KV cache would report it. "
               "With m_new = max(m_old, m_blk), what is the running sum after this block?",
        template="l_new = ____",
        names={"m_old": "running max so far", "l_old": "running sum so far, relative to m_old",
               "m_blk": "the block's own max", "l_blk": "the block's sum, relative to m_blk",
               "m_new": "max(m_old, m_blk)"},
        scenarios=_block_states,
        transfer=True,
    ),
    "qc_missing_rescale": MultipleChoice(
        id="qc_missing_rescale",
        prompt="A learner's online softmax multiplies row_sum by exp(m - m') at every block "
               "but adds each block to acc without that factor (acc = acc + weights @ v_blk). "
               "On which inputs does it still return exact attention?",
        options=("When all scores are small, say between -1 and 1",
                 "When each row's largest score lies in its first block of keys",
                 "When block_size divides N_k, so that no block is ragged",
                 "When the loop runs in float64 instead of float32"),
        transfer=True,
    ),
    "qc_decode_memory": MultipleChoice(
        id="qc_decode_memory",
        prompt="Decoding: one new query (N_q = 1) attends to a cache of N_k keys with your "
               "online_softmax_attention, block_size fixed. How does its extra memory (beyond "
               "q, k, v and the output) change as N_k grows?",
        options=("It grows like N_k",
                 "It grows like N_k^2, as scores do",
                 "It does not grow: the same for every N_k",
                 "It grows like N_k / block_size"),
        transfer=True,
    ),
    "qc_kv_reads": FillIn(
        id="qc_kv_reads",
        prompt="The Triton kernel of section 4 runs one program per block of BLOCK_M queries "
               "of a (batch, head); each program loads its queries once, then every key block "
               "and value block. Take one (batch, head), no mask, N_q = N_k = {tokens}, head "
               "dim {head_dim}, BLOCK_M = {block_m}, BLOCK_N = {block_n}, {dtype} "
               "({bytes_per_value} bytes per value). Counting every load as a read from GPU "
               "memory (no cache), how many MiB of K and V does the kernel read in all "
               "(1 MiB = 2**20 bytes)?",
        template="mib = ____",
        names={"tokens": "N_q = N_k", "head_dim": "head dim", "block_m": "BLOCK_M",
               "block_n": "BLOCK_N", "bytes_per_value": "bytes per stored value"},
        variant=_kernel_reads,
        rtol=0.01,
        transfer=True,
    ),
}
