"""Keys of lesson 07's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_merge_share": {
        "answer": "1 / (1 + np.exp(lse_b - lse_a))",
        "explanation": "Set A holds e^lse_a of the total weight e^lse_a + e^lse_b, so "
                       "w_a = exp(lse_a - lse) = 1 / (1 + exp(lse_b - lse_a)). Written with "
                       "the difference of the two log-sum-exps (or after subtracting the "
                       "larger one) no exponent is large; exp(lse_a) alone is inf at 1e4.",
        "hint": "The share of A is e^lse_a over e^lse_a + e^lse_b; divide the top and the "
                "bottom by e^lse_a (or by e^max(lse_a, lse_b)).",
        "mistakes": {
            "0.5": "Half each is right only when lse_a = lse_b: each set counts in proportion "
                   "to its share of the total weight, e^lse_a against e^lse_b.",
            "1 / (1 + np.exp(lse_a - lse_b))": "That is w_b, the share of set B: the "
                                               "exponent's sign is swapped.",
            "lse_a / (lse_a + lse_b)": "The weights are shares of e^lse, not of lse: a set's "
                                       "total weight is the exponential of its log-sum-exp.",
            "np.exp(lse_a - lse_b)": "That is the ratio of A's weight to B's, not A's share "
                                     "of both: divide by 1 + that ratio.",
        },
        "accepted": ["np.exp(lse_a - np.max((lse_a, lse_b))) / (np.exp(lse_a - np.max((lse_a, "
                     "lse_b))) + np.exp(lse_b - np.max((lse_a, lse_b))))",
                     "1 / (1 + math.exp(lse_b - lse_a))"],
    },
    "qc_block_state": {
        "answer": "l_old * np.exp(m_old - m_new) + l_blk * np.exp(m_blk - m_new)",
        "explanation": "Both sums have to be moved to the common maximum m_new before they are "
                       "added: exp(s - m_old) * exp(m_old - m_new) = exp(s - m_new), and the "
                       "same for the block with exp(m_blk - m_new). One of the two factors is "
                       "1 and the other at most 1, so nothing overflows. This is section 1's "
                       "merge written with (max, sum) instead of (output, log-sum-exp).",
        "hint": "l_old is relative to m_old and l_blk to m_blk: bring each to m_new with its "
                "own factor.",
        "mistakes": {
            "l_old * np.exp(m_old - m_new) + l_blk": "The block's sum is relative to its own "
                                                     "max m_blk, so it needs the factor "
                                                     "exp(m_blk - m_new) too; adding it as it "
                                                     "is only works when the block holds the "
                                                     "new max.",
            "l_old + l_blk": "The two sums are relative to different maxima: each needs its "
                             "factor exp(m - m_new) before they can be added.",
            "l_old * np.exp(m_new - m_old) + l_blk * np.exp(m_new - m_blk)":
                "The factors are upside down: moving to a larger max shrinks a sum, so the "
                "factor is exp(m - m_new), at most 1.",
        },
        "accepted": ["l_old * np.exp(m_old - np.max((m_old, m_blk))) + l_blk * "
                     "np.exp(m_blk - np.max((m_old, m_blk)))",
                     "np.exp(np.log(l_old) + m_old - m_new) + np.exp(np.log(l_blk) + m_blk - "
                     "m_new)"],
    },
    "qc_missing_rescale": {
        "answer": 1,
        "explanation": "If a row's maximum is in the first block, m' = m at every later block "
                       "and the missing factor is exp(0) = 1 (on the first block acc is still "
                       "0, so the factor does not matter there either). Whenever a later block "
                       "raises the maximum, the old part of acc keeps its larger scale while "
                       "row_sum shrinks, and the output is wrong.",
        "why_wrong": {
            0: "The factor exp(m - m') is not about overflow: it re-bases the old terms to the "
               "new maximum, and it differs from 1 whenever the maximum moves, however small "
               "the scores are.",
            2: "A ragged last block is handled by the same update as any other; the error "
               "comes from a later block raising the maximum, which can happen with any "
               "block_size.",
            3: "The missing factor is an error in the formula, not a rounding error: float64 "
               "computes the same wrong sum more precisely.",
        },
    },
    "qc_decode_memory": {
        "answer": 2,
        "explanation": "The running state is per query: row_max, row_sum (1 value each) and "
                       "acc (d values), plus one (N_q, block_size) block of scores that is "
                       "dropped after use. With N_q = 1 none of that depends on N_k; only the "
                       "loop runs longer.",
        "why_wrong": {
            0: "The naive path stores a (1, N_k) row of scores and of weights; the online "
               "softmax folds each block into the running state and keeps nothing per key.",
            1: "With one query the naive score matrix is only (1, N_k); and the online "
               "softmax stores no part of it beyond one block.",
            3: "That is split-KV decoding (flash-decoding), which keeps one partial "
               "(out, lse) per chunk to merge them in parallel; the sequential loop merges "
               "each block at once and drops it.",
        },
    },
    "qc_kv_reads": {
        "answer": "(tokens / block_m) * 2 * tokens * head_dim * bytes_per_value / 2 ** 20",
        "explanation": "There are {tokens} / {block_m} programs, and each reads all of K and V: "
                       "2 x {tokens} x {head_dim} values of {bytes_per_value} bytes. In all "
                       "{value} MiB: the traffic grows like N^2 d / BLOCK_M, which is why the "
                       "launch table prefers BLOCK_M = 128 (each K/V block loaded serves 128 "
                       "queries). BLOCK_N only sets how many pieces each program reads them "
                       "in. On a real GPU the L2 cache catches part of these re-reads.",
        "hint": "Count the programs (set by BLOCK_M), then the bytes of K and V each one reads.",
        "mistakes": {
            "2 * tokens * head_dim * bytes_per_value / 2 ** 20":
                "That is K and V read once; every one of the N / BLOCK_M programs reads them "
                "all again.",
            "(tokens / block_m) * tokens * head_dim * bytes_per_value / 2 ** 20":
                "A factor 2 short: each program reads V as well as K, as many values again.",
            "(tokens / block_n) * 2 * tokens * head_dim * bytes_per_value / 2 ** 20":
                "The number of programs is N / BLOCK_M (one per block of queries); BLOCK_N "
                "only sets the size of the pieces K and V are read in.",
            "(tokens / block_m) * 2 * tokens * head_dim * bytes_per_value / 10 ** 6":
                "That is megabytes (10**6 bytes); a MiB is 2**20 bytes.",
        },
        "accepted": ["tokens / block_m * 2 * tokens * head_dim * bytes_per_value / 1024 / 1024",
                     "2 * tokens ** 2 * head_dim * bytes_per_value / block_m / 2 ** 20"],
    },
}
