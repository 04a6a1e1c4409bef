"""Answers a learner could type into each quick check, per question id, for all eight lessons.

``ACCEPT``: right answers written differently; ``REJECT``: the slips the lessons warn about.
Every question of every bank must appear in both tables (tests/quiz/test_banks.py checks it),
so a new question cannot go untested. A lesson added after 08 keeps its own tables in
``tests/quiz/answers_lessonNN.py`` (``ACCEPT`` and ``REJECT`` alike), merged in here.
"""

import importlib
import pkgutil
from pathlib import Path

ACCEPT = {
    # lessons 01-04
    "qc_scale_divisor": ["np.sqrt(d_k)", "d_k ** 0.5", "math.sqrt(q.shape[-1])"],
    "qc_weights_shape": ["a", "A", 0],
    "qc_softmax_shift": ["np.max(x, axis=-1, keepdims=True)", "x.max(axis=1, keepdims=True)",
                         "x.max(-1, keepdims=True)", "np.max(x, -1, keepdims=True)"],
    "qc_head_dim": ["d_model // num_heads", "d_model / num_heads", "d_model * num_heads ** -1"],
    "qc_split_transpose": ["b", "y.transpose(0, 2, 1, 3)", 1],
    "qc_gpt3_heads": ["c", 2],
    "qc_dot_variance": ["d_k * s2 ** 2", "d_k * s2 * s2", "s2 ** 2 * d_k"],
    "qc_saturated_gradient": ["b", 1],
    "qc_max_entropy": ["np.log(N)", "math.log(N)", "-np.log(1 / N)", "np.log2(N) * np.log(2)"],
    "qc_cache_offset": ["n_k - n_q", "-(n_q - n_k)", "n_k-n_q"],
    "qc_mask_fill": ["b", 1],
    "qc_padding_shape": ["c", 2],
    # lessons 05-08
    "qc_matmul_flops": ["2 * m * k * n", "2*k*m*n", "m * n * (2 * k)"],
    "qc_attention_share": ["seq_len / (seq_len + 2 * d_model)",
                           "4*seq_len**2*d_model / (8*seq_len*d_model**2 + 4*seq_len**2*d_model)"],
    "qc_mfu": ["tokens_per_second * flops_per_token / peak_flops",
               "flops_per_token / (peak_flops / tokens_per_second)"],
    "qc_kv_group": ["h // (num_heads // num_kv_heads)", "h * num_kv_heads // num_heads",
                    "np.floor(h / (num_heads / num_kv_heads))"],
    "qc_cache_shrink": ["num_heads / num_kv_heads", "num_heads // num_kv_heads"],
    "qc_decode_growth": ["c", "C", 2],
    "qc_rescale": ["np.exp(m_old - m_new)", "math.exp(m_old) / math.exp(m_new)",
                   "1 / np.exp(m_new - m_old)"],
    "qc_num_blocks": ["math.ceil(n_k / block_size)", "(n_k + block_size - 1) // block_size",
                      "-(-n_k // block_size)"],
    "qc_flash_memory": ["b", 1],
    "qc_merge_share": ["1 / (1 + np.exp(lse_b - lse_a))",
                       "np.exp(-np.log(1 + np.exp(lse_b - lse_a)))",
                       "np.exp(lse_a - np.max((lse_a, lse_b))) / (np.exp(lse_a - np.max((lse_a, "
                       "lse_b))) + np.exp(lse_b - np.max((lse_a, lse_b))))"],
    "qc_induction_key": ["i - period + 1", "i + 1 - period"],
    "qc_uniform_previous": ["1 / (i + 1)", "(i + 1) ** -1"],
    "qc_induction_circuit": ["a", 0],
}
REJECT = {
    # lessons 01-04
    "qc_scale_divisor": ["d_k", "np.sqrt(q.shape[0])", "np.sqrt(k.shape[0])", "1"],
    "qc_weights_shape": ["b", "c", "d", 3, "z", None],
    "qc_softmax_shift": ["x.max()", "x.max(axis=-1)", "x.max(axis=0, keepdims=True)",
                         "x.min(axis=-1, keepdims=True)", "x.mean(axis=-1, keepdims=True)"],
    "qc_head_dim": ["d_model", "num_heads", "d_model * num_heads", "np.sqrt(d_model)", "64"],
    "qc_split_transpose": ["a", "c", "d", "(0, 2, 1, 3)"],
    "qc_gpt3_heads": ["a", "b", "d"],
    "qc_dot_variance": ["d_k", "d_k * s2", "np.sqrt(d_k) * s2", "1"],
    "qc_saturated_gradient": ["a", "c", "d"],
    "qc_max_entropy": ["N", "np.log2(N)", "1", "np.log(N - 1)"],
    "qc_cache_offset": ["0", "n_q - n_k", "n_k", "1", "n_k - n_q - 1"],
    "qc_mask_fill": ["a", "c", "d"],
    "qc_padding_shape": ["a", "b", "d"],
    # lessons 05-08
    "qc_matmul_flops": ["m * k * n", "2 * m * n", "m * k + k * n"],
    "qc_attention_share": ["seq_len / (2 * d_model)", "4 * seq_len**2 * d_model",
                           "seq_len / (seq_len + d_model)"],
    "qc_mfu": ["tokens_per_second / peak_flops",
               "peak_flops / (tokens_per_second * flops_per_token)"],
    "qc_kv_group": ["h % num_kv_heads", "h // num_kv_heads", "h"],
    "qc_cache_shrink": ["num_heads", "num_kv_heads / num_heads", "2"],
    "qc_decode_growth": ["a", "b", "d"],
    "qc_rescale": ["np.exp(m_new - m_old)", "m_old - m_new", "1"],
    "qc_num_blocks": ["n_k // block_size", "n_k / block_size", "n_k // block_size + 1"],
    "qc_flash_memory": ["a", "c", "d"],
    "qc_merge_share": ["np.exp(lse_a) / (np.exp(lse_a) + np.exp(lse_b))", "0.5",
                       "lse_a / (lse_a + lse_b)", "np.exp(lse_a - lse_b)",
                       "1 / (1 + np.exp(lse_a - lse_b))"],
    "qc_induction_key": ["i - period", "i - period - 1", "i + 1"],
    "qc_uniform_previous": ["1 / i", "1", "1 / (i - 1)"],
    "qc_induction_circuit": ["b", "c", "d"],
}


for _module in pkgutil.iter_modules([str(Path(__file__).parent)]):
    if _module.name.startswith("answers_lesson"):
        _tables = importlib.import_module(f"tests.quiz.{_module.name}")
        ACCEPT.update(_tables.ACCEPT)
        REJECT.update(_tables.REJECT)
