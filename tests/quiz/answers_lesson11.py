"""Answers a learner could type into lesson 11's quick checks (merged into bank_answers.py)."""

ACCEPT = {
    "qc_ridge_point": ["peak_flops / bandwidth", "peak_flops*bandwidth**-1",
                       "1 / (bandwidth / peak_flops)"],
    "qc_key_page": ["row[t // page_size]", "row[(t - t % page_size) // page_size]",
                    "row[math.floor(t / page_size)]"],
    "qc_page_waste": ["math.ceil(n / page_size) * page_size - n", "(-n) % page_size",
                      "(page_size - n % page_size) % page_size"],
    "qc_gqa_decode": ["c", "C", 2],
}
REJECT = {
    "qc_ridge_point": ["bandwidth / peak_flops", "peak_flops * bandwidth", "peak_flops",
                       "peak_flops / bandwidth / 8"],
    "qc_key_page": ["row[t % page_size]", "t // page_size", "row[t]", "t % page_size",
                    "row[t // page_size + 1]"],
    "qc_page_waste": ["page_size - n % page_size", "n % page_size", "page_size - 1",
                      "math.ceil(n / page_size)"],
    "qc_gqa_decode": ["a", "b", "d"],
}
