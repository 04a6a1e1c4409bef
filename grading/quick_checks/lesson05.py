"""Keys of lesson 05's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_causal_skip": {
        "answer": "2 * seq_len * (seq_len - block) * d_model",
        "explanation": "There are T = seq_len / block = {seq_len} / {block} tiles per side, "
                       "and the T (T - 1) / 2 tiles above the diagonal are fully masked. A "
                       "tile costs 2 block^2 d_model FLOPs of scores plus as many of weighted "
                       "sum (all heads together), 4 block^2 d_model. In all 2 N (N - block) "
                       "d_model = {value} FLOPs: a fraction (N - block) / (2 N) of the N^2 "
                       "terms, just under half, because the diagonal tiles are paid in full.",
        "hint": "Count the tiles above the diagonal, then the FLOPs of the scores and of the "
                "weighted sum of one block x block tile.",
        "mistakes": {
            "2 * seq_len ** 2 * d_model": "That is half of the 4 N^2 d_model, as if half of "
                                          "all (query, key) pairs were masked. Only the N "
                                          "(N - 1) / 2 pairs above the diagonal are: "
                                          "skipping exactly those would save 2 N (N - 1) "
                                          "d_model, nearly the same here. The kernel skips "
                                          "whole tiles only, and the tiles on the diagonal "
                                          "are half masked and computed in full.",
            "2 * seq_len * (seq_len + block) * d_model": "That is what is still computed "
                                                         "(the T (T + 1) / 2 tiles on and "
                                                         "below the diagonal), not what is "
                                                         "saved.",
            "seq_len * (seq_len - block) * d_model": "That counts one product per tile. "
                                                     "Each skipped tile saves its scores and "
                                                     "its weighted sum, 2 block^2 d_model "
                                                     "FLOPs each (a multiply-add is 2).",
            "(seq_len / block) * (seq_len / block - 1) / 2": "That is the number of skipped "
                                                             "tiles, not their FLOPs.",
        },
        "accepted": ["(seq_len / block) * (seq_len / block - 1) / 2 * 4 * block**2 * d_model",
                     "4 * seq_len**2 * d_model * (seq_len - block) / (2 * seq_len)"],
    },
    "qc_decode_step": {
        "answer": "8 * d_model ** 2 + 4 * n * d_model",
        "explanation": "The four projections of one token are (1, d) by (d, d) products, "
                       "2 d^2 FLOPs each: 8 d^2. One query against n keys costs 2 n d for the "
                       "scores and 2 n d for the weighted sum (all heads together). So 8 d^2 + "
                       "4 n d: the layer's formula with N = 1 query, but n keys.",
        "hint": "Take the table of section 2 with 1 query row instead of N, but n keys and "
                "values.",
        "mistakes": {
            "8 * n * d_model ** 2 + 4 * n ** 2 * d_model": "That reruns the whole layer on "
                                                          "the n tokens: without the kept "
                                                          "keys and values. Only the new "
                                                          "token is projected, and only its "
                                                          "query meets the keys.",
            "8 * d_model ** 2 + 4 * n ** 2 * d_model": "Only one query meets the keys: n "
                                                       "scores, not n^2.",
            "6 * d_model ** 2 + 4 * n * d_model": "The output projection runs on the new "
                                                  "token too: four projections, 8 d^2.",
            "8 * d_model ** 2 + 2 * n * d_model": "The weighted sum of the n values costs as "
                                                  "much as the n scores: 4 n d in all.",
            "4 * d_model ** 2 + 2 * n * d_model": "A multiply-add counts as 2 FLOPs; that "
                                                  "count is in multiply-adds.",
        },
        "accepted": ["4 * d_model * (2 * d_model + n)", "2 * 4 * d_model**2 + 2 * 2 * n * d_model"],
    },
    "qc_block_crossover": {
        "answer": "6 * d_model",
        "explanation": "The MLP's products cost 2 N d (4 d) twice: 16 N d^2. With the "
                       "projections' 8 N d^2 that is 24 N d^2 of linear work, and 4 N^2 d = "
                       "24 N d^2 at N = 6 d: three times the attention-only crossover, "
                       "24,576 tokens for a 4096-wide model.",
        "hint": "Write the MLP's FLOPs as a multiple of N d^2, add the projections' 8 N d^2, "
                "and set the sum equal to 4 N^2 d.",
        "mistakes": {
            "2 * d_model": "That is the crossover of attention alone: the MLP adds 16 N d^2 of "
                           "linear work on top of the projections' 8 N d^2.",
            "4 * d_model": "Count both MLP products: each costs 2 N d (4 d) = 8 N d^2, so "
                           "16 N d^2 together.",
            "8 * d_model": "That counts three MLP products of width 4 d_model. A SwiGLU "
                           "MLP (Llama) does have three, but its width is usually cut to "
                           "about 8/3 d_model (3.5 d_model in Llama-3.1 8B) so that it costs "
                           "about as much as two of width 4 d_model; this block's MLP has "
                           "two, 16 N d^2 together.",
        },
        "accepted": ["(8 + 16) * d_model / 4", "3 * 2 * d_model"],
    },
    "qc_mfu": {
        "answer": "6 * params * tokens_per_second / (gpus * peak_tflops * 1e12)",
        "explanation": "The model needs 6 x {params} FLOPs per token, {tokens_per_second} "
                       "times a second, against {gpus} x {peak_tflops}e12 FLOP/s of peak: "
                       "MFU = {value}. (The Llama 3 paper reports 0.38 to "
                       "0.43 for its 405B model on H100s.)",
        "hint": "Achieved FLOP/s (6 x params per token, times tokens per second) over the "
                "peak of all the GPUs together, in FLOP/s.",
        "mistakes": {
            "2 * params * tokens_per_second / (gpus * peak_tflops * 1e12)": "2 x params is "
                "the forward pass alone; training also runs the backward pass, about twice "
                "as much again: 6 x params.",
            "6 * params * tokens_per_second / (peak_tflops * 1e12)": "The throughput is the "
                "whole cluster's: divide by the peak of all {gpus} GPUs, not of one.",
            "6 * params * tokens_per_second / (gpus * peak_tflops)": "The peak is in TFLOP/s: "
                "multiply by 1e12 to get FLOP/s before dividing FLOPs by it.",
            "100 * 6 * params * tokens_per_second / (gpus * peak_tflops * 1e12)": "The "
                "question asks for a fraction (0.4), not a percentage (40).",
        },
        "accepted": ["params * 6 * tokens_per_second / gpus / peak_tflops / 1e12",
                     "6 * params * tokens_per_second / (gpus * peak_tflops * 10**12)"],
    },
}
