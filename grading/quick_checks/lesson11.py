"""Keys of lesson 11's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

_CACHE = "2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value"

KEYS = {
    "qc_decode_read_time": {
        "answer": f"{_CACHE} / bandwidth * 1e3",
        "explanation": "The step does 2 x {num_heads} / ({kv_heads} x {bytes_per_value}) FLOPs "
                       "per byte of cache, far below the H100's ridge of about 295, so its time "
                       "is the time to read the cache: 2 x {layers} x {kv_heads} x {head_dim} x "
                       "{tokens} x {batch} x {bytes_text} at 3.35e12 bytes/s, "
                       "{value} ms. The arithmetic alone would take far less.",
        "hint": "Decide first which roof limits a decode step, then count what it has to move.",
        "mistakes": {
            "4 * batch * num_heads * tokens * head_dim * layers / peak_flops * 1e3":
                "That is the time of the step's FLOPs at the peak rate. Decode attention is far "
                "left of the ridge: memory cannot feed the arithmetic that fast, so the time to "
                "read the cache is the bound.",
            _CACHE.replace("kv_heads", "num_heads") + " / bandwidth * 1e3":
                "The cache holds K and V of the K/V heads only; the query heads that share them "
                "read the same bytes.",
            _CACHE.replace("2 * ", "", 1) + " / bandwidth * 1e3":
                "The cache holds a key and a value per K/V head: count both.",
            _CACHE.replace("layers * ", "") + " / bandwidth * 1e3":
                "That is one layer; the step runs the attention of every layer, each over its "
                "own cache.",
            _CACHE.replace("batch * ", "") + " / bandwidth * 1e3":
                "That is one sequence. Unlike the weights, the cache is not shared: every "
                "sequence of the batch has its own to read.",
            f"{_CACHE} / bandwidth": "That is in seconds; the question asks for milliseconds.",
            f"{_CACHE} / bandwidth * 1e6": "That is in microseconds; the question asks for "
                                           "milliseconds.",
        },
        "accepted": [f"{_CACHE} / 3.35e12 * 1000",
                     "2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_value / "
                     "3.35e9"],
    },
    "qc_h200_ridge": {
        "answer": 1,
        "explanation": "The ridge is peak / bandwidth: 989e12 / 4.8e12 = about 206 FLOPs per "
                       "byte on the H200. The step's intensity depends only on what it computes "
                       "and reads, so it stays at about 242, now right of the ridge: the step is "
                       "limited by arithmetic, and faster memory alone would not speed it up "
                       "further.",
        "why_wrong": {
            0: "The ridge is where memory can just feed the arithmetic, peak / bandwidth: with "
               "the same peak and faster memory it moves left.",
            2: "More bandwidth makes memory feed the arithmetic at a lower intensity, so the "
               "ridge moves left, to 989 / 4.8, not up by the ratio of the bandwidths.",
            3: "Intensity is FLOPs per byte of the computation itself: the same FLOPs and bytes "
               "give the same 242 on any machine. What moves is the ridge.",
        },
    },
    "qc_gqa_decode": {
        "answer": 0,
        "explanation": "Decode attention does 2 H / (G s) FLOPs per byte: 1 for MHA in bf16, 8 "
                       "for this GQA, both far below the H100's ridge of about 295. The step's "
                       "time is the time to read the cache, which shrinks with G: 40 -> 5 K/V "
                       "heads is 8 times fewer bytes, for the same FLOPs.",
        "why_wrong": {
            1: "The FLOPs are the same, but the step is limited by memory traffic, not by "
               "FLOPs: it sits far below the ridge point.",
            2: "Every query head still does the same dot products; sharing a K/V head changes "
               "what is read, not how much is computed.",
            3: "5 K/V heads are read, each once: the cache shrinks by H / G = 8, not by H = 40 "
               "(that would be MQA).",
        },
    },
    "qc_page_waste": {
        "answer": "math.ceil(n / page_size) * page_size - n",
        "explanation": "The sequence holds ceil(n / page_size) pages and fills n of their slots, "
                       "so fewer than page_size slots are unused, all in its last page: with "
                       "16-token pages that is under 8% of any sequence of 200 tokens or more, "
                       "against the whole unused maximum length a contiguous reservation "
                       "wastes.",
        "hint": "13 tokens in pages of 4 take 4 pages (16 slots); 16 tokens take exactly 4.",
        "mistakes": {
            "page_size - n % page_size": "Right unless n fills its last page exactly: then "
                                         "nothing is unused, not a whole page.",
            "n % page_size": "That is the number of used slots in the last page; the unused ones "
                             "are the rest of it.",
            "page_size - 1": "That is the worst case; most sequences waste less.",
            "math.ceil(n / page_size)": "That is the number of pages the sequence holds, not "
                                        "the slots it leaves empty.",
        },
        "accepted": ["(-n) % page_size", "(page_size - n % page_size) % page_size",
                     "-(-n // page_size) * page_size - n"],
    },
    "qc_chunk_scores": {
        "answer": "N * (N + C) / 2",
        "explanation": "Chunk k (k = 1 .. N / C) scores its C queries against the k C keys up to "
                       "its end, so the chunks compute C^2 (1 + 2 + ... + N / C) = N (N + C) / "
                       "2 scores: the causal triangle, N (N + 1) / 2, plus the masked upper part "
                       "of each chunk's own C x C block. Chunking skips the future chunks' "
                       "blocks and never holds N x N scores at once, but the work stays about "
                       "half the full matrix.",
        "hint": "Chunk 1 sees C keys, chunk 2 sees 2 C keys, ...; add up C x (keys) over the "
                "chunks.",
        "mistakes": {
            "N ** 2": "That is the full N x N matrix; a chunk never scores keys after its own "
                      "end.",
            "N * (N + 1) / 2": "That counts only the scores the mask keeps; each chunk also "
                               "computes the masked upper part of its own C x C block.",
            "N ** 2 / 2": "Close, but each chunk also computes the diagonal and the masked part "
                          "of its own C x C block: N C / 2 more.",
            "N * C": "That is the size of the last chunk's score tensor (C queries by N keys), "
                     "the largest one, not the total over all chunks.",
        },
        "accepted": ["N ** 2 / 2 + N * C / 2", "C ** 2 * (N / C) * (N / C + 1) / 2"],
    },
}
