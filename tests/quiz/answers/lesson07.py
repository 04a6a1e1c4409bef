"""Answers a learner could give to lesson 07's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_merge_share": ["1 / (1 + np.exp(lse_b - lse_a))", "1/(1+np.exp(-(lse_a-lse_b)))",
                       "np.exp(lse_a - lse_a) / (1 + np.exp(lse_b - lse_a))",
                       "np.exp(lse_a - np.log(1 + np.exp(lse_b - lse_a)) - lse_a)"],
    "qc_block_state": ["l_old * np.exp(m_old - m_new) + l_blk * np.exp(m_blk - m_new)",
                       "l_blk * math.exp(m_blk - m_new) + l_old * math.exp(m_old - m_new)",
                       "l_old * np.exp(m_old - np.max((m_old, m_blk))) + l_blk * "
                       "np.exp(m_blk - np.max((m_old, m_blk)))"],
    "qc_missing_rescale": [1, "When each row's largest score lies in its first block of keys"],
    "qc_decode_memory": [2, "It does not grow: the same for every N_k"],
    "qc_kv_reads": ["tokens / block_m * 2 * tokens * head_dim * bytes_per_value / 2**20",
                    "2 * tokens**2 * head_dim * 2 / block_m / 1048576",
                    "(tokens // block_m) * (2 * tokens * head_dim * bytes_per_value) / 1024**2"],
}
REJECT = {
    "qc_merge_share": ["np.exp(lse_a) / (np.exp(lse_a) + np.exp(lse_b))", "0.5",
                       "1 / (1 + np.exp(lse_a - lse_b))", "lse_a / (lse_a + lse_b)",
                       "np.exp(lse_a - lse_b)"],
    "qc_block_state": ["l_old + l_blk", "l_old * np.exp(m_old - m_new) + l_blk",
                       "l_old * np.exp(m_new - m_old) + l_blk * np.exp(m_new - m_blk)",
                       "l_old * np.exp(m_old - m_blk) + l_blk",
                       "(l_old + l_blk) * np.exp(m_old - m_new)"],
    "qc_missing_rescale": [0, 2, 3, "When all scores are small, say between -1 and 1"],
    "qc_decode_memory": [0, 1, 3, "It grows like N_k"],
    "qc_kv_reads": ["2 * tokens * head_dim * bytes_per_value / 2**20",
                    "tokens / block_m * tokens * head_dim * bytes_per_value / 2**20",
                    "tokens / block_n * 2 * tokens * head_dim * bytes_per_value / 2**20",
                    "tokens / block_m * 2 * tokens * head_dim * bytes_per_value / 1e6",
                    "tokens**2 * bytes_per_value / 2**20",
                    "tokens / block_m * 2 * tokens * head_dim * bytes_per_value"],
}
