"""Answers a learner could give to lesson 05's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT)."""

ACCEPT = {
    "qc_causal_skip": ["2*seq_len*(seq_len-block)*d_model",
                       "4 * d_model * block**2 * (seq_len // block) * (seq_len // block - 1) / 2",
                       "2 * d_model * (seq_len**2 - seq_len * block)"],
    "qc_decode_step": ["8*d_model**2 + 4*n*d_model", "4 * d_model * (n + 2 * d_model)",
                       "6 * d_model**2 + 2 * d_model**2 + 2 * n * d_model + 2 * n * d_model"],
    "qc_block_crossover": ["6 * d_model", "d_model * 6", "24 * d_model / 4"],
    "qc_mfu": ["6 * params * tokens_per_second / (gpus * peak_tflops * 1e12)",
               "tokens_per_second * 6 * params / (peak_tflops * 1e12 * gpus)"],
}
REJECT = {
    "qc_causal_skip": ["2 * seq_len**2 * d_model", "2 * seq_len * (seq_len - 1) * d_model",
                       "4 * seq_len**2 * d_model",
                       "2 * seq_len * (seq_len + block) * d_model",
                       "seq_len * (seq_len - block) * d_model"],
    "qc_decode_step": ["8 * n * d_model**2 + 4 * n**2 * d_model", "8 * d_model**2",
                       "4 * n * d_model", "8 * d_model**2 + 4 * n**2 * d_model"],
    "qc_block_crossover": ["2 * d_model", "4 * d_model", "d_model", "24 * d_model"],
    "qc_mfu": ["2 * params * tokens_per_second / (gpus * peak_tflops * 1e12)",
               "6 * params * tokens_per_second / (peak_tflops * 1e12)",
               "6 * params * tokens_per_second / (gpus * peak_tflops)", "1"],
}
