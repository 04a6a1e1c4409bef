"""Hints of lesson 05 (where the FLOPs go): ``mha_flops``, ``crossover_seq_len`` and
``mha_param_count``."""

HINTS: dict[str, tuple[str, ...]] = {
    "mha_flops": (
        "Each value is one row of the table in section 2, for N = `seq_len` and "
        "d = `d_model`, and \"total\" is the sum of the four. One sequence, no causal saving: "
        "every query meets every key.",

        "Every row is a matrix product, and an (m, k) by (k, n) product costs 2 * m * k * n "
        "FLOPs (one multiply-add is 2). The heads do not appear: H heads of width d / H do the "
        "matrix-product work of one head of width d. Check on N = 4, d = 8: the three input "
        "projections together are 1536 FLOPs, the scores 256, the output projection 512, and "
        "the total 2560.",

        "Use only integer arithmetic (`*` and `+`, no `/`, `**` with a float, or `math`), so "
        "that every value is a plain Python int.",

        "With `n, d = seq_len, d_model`: `\"qkv_projections\": 6 * n * d * d`, "
        "`\"scores\": 2 * n * n * d`, `\"weighted_sum\": 2 * n * n * d`, "
        "`\"output_projection\": 2 * n * d * d`, and `\"total\"` their sum.",
    ),
    "crossover_seq_len": (
        "Write both parts as functions of N: the two N^2 terms together are 4 * N^2 * d, the "
        "four projections 8 * N * d^2. The crossover is the N where they are equal.",

        "Both sides share the factor 4 * N * d. Divide it out (N > 0) and N stands alone on "
        "one side; the answer does not depend on the number of heads.",

        "4 * N^2 * d = 8 * N * d^2 gives N = 2 * d: `return 2 * d_model` (an int; 1536 for "
        "d_model = 768).",
    ),
    "mha_param_count": (
        "Count the numbers in each weight matrix and each bias vector of section 4 and add "
        "them up; the number of heads does not matter.",

        "W_Q, W_K, W_V and W_O are each d x d. With `bias=True` each of the four projections "
        "adds one vector of d numbers; with `bias=False`, none. Check: "
        "`torch.nn.MultiheadAttention(8, 2)` has 288 parameters, and 256 without bias.",

        "`return 4 * d_model * d_model + (4 * d_model if bias else 0)`.",
    ),
}
