"""Answers a learner could give to lesson 03's quick checks: right ones written differently
(ACCEPT) and the slips the lesson warns about (REJECT). Multiple-choice answers are canonical
option indexes or option texts."""

ACCEPT = {
    "qc_dot_variance": ["var_q * var_k * d_k", "d_k * (var_q * var_k)", "var_k*d_k*var_q"],
    "qc_unscaled_ratio": ["np.exp(gap * d_k ** 0.5)", "math.e ** (gap * math.sqrt(d_k))",
                          "math.exp(gap) ** math.sqrt(d_k)"],
    "qc_sink_entropy": ["-a * np.log(a) - (1 - a) * np.log(1 - a) + (1 - a) * np.log(N - 1)",
                        "-(a * math.log(a) + (N - 1) * ((1 - a) / (N - 1)) * "
                        "math.log((1 - a) / (N - 1)))"],
    "qc_entropy_direction": [2, "It falls, though it stays above 0"],
    "qc_split_jacobian": [3],
}
REJECT = {
    "qc_dot_variance": ["d_k", "d_k * (var_q + var_k)", "var_q * var_k",
                        "math.sqrt(d_k * var_q * var_k)", "d_k * var_q ** 2"],
    "qc_unscaled_ratio": ["math.exp(gap)", "gap * math.sqrt(d_k)", "math.exp(gap * d_k)",
                          "math.exp(gap / math.sqrt(d_k))", "math.sqrt(d_k)"],
    "qc_sink_entropy": ["math.log(N)", "-a * math.log(a) - (1 - a) * math.log(1 - a)",
                        "-a * math.log(a)", "-a * math.log(a) - (1 - a) * math.log(1 / (N - 1))",
                        "math.log(N - 1)"],
    "qc_entropy_direction": [0, 1, 3, "It stays the same: only score differences matter"],
    "qc_split_jacobian": [0, 1, 2],
}
