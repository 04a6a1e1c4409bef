"""Keys of lesson 04's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_chunk_pairs": {
        "answer": "n_q * (n_k - n_q) + n_q * (n_q + 1) / 2",
        "explanation": "Query i of the chunk sits at position i + {cached} and sees keys 0 to "
                       "i + {cached}: that is i + {cached} + 1 keys. Summed over the {n_q} "
                       "queries: {n_q} x {cached} cached keys each, plus 1 + 2 + ... + {n_q} "
                       "= {n_q} x ({n_q} + 1) / 2 for the triangle over the chunk itself, "
                       "{value} pairs in all.",
        "hint": "Every query of the chunk sees all the cached keys, then a triangle over the "
                "chunk's own positions, diagonal included.",
        "mistakes": {
            "n_q * (n_q + 1) / 2": "That counts only the triangle over the chunk: the mask "
                                   "aligned top-left (is_causal=True in PyTorch), as if the "
                                   "cache were not there. Every query also sees all the "
                                   "cached keys.",
            "n_q * n_k / 2": "Half the rectangle is about right for a square mask "
                             "(n_q = n_k). This chunk is the bottom of the big triangle, "
                             "where the rows are nearly full.",
            "n_q * n_k": "That is the unmasked rectangle: a query of the chunk must not see "
                         "the later positions of the same chunk.",
            "n_q * (n_k - n_q) + n_q * (n_q - 1) / 2": "The diagonal is allowed: a token may "
                                                       "attend itself. Count 1 + ... + n_q, "
                                                       "not 0 + ... + (n_q - 1).",
        },
        "accepted": ["n_q * n_k - n_q * (n_q - 1) / 2",
                     "n_q * (2 * n_k - n_q + 1) / 2"],
    },
    "qc_query_mask_shape": {
        "answer": 1,
        "explanation": "Numpy lines shapes up from the right: (B, 1, n, 1) puts the batch "
                       "against B, the n positions against the query axis, and repeats them "
                       "over the heads and over the keys. keep[:, None, :, None] makes it.",
        "why_wrong": {
            0: "That is padding_mask's shape: n lines up with the keys, so it removes "
               "columns, not rows.",
            2: "Broadcasting pads missing axes on the left, so (B, n, 1) is read as "
               "(1, B, n, 1): the batch lands on the heads axis. That is an error, or silently "
               "wrong: with B = H each head takes another sequence's mask, and with one head "
               "the result grows to (B, B, n, n).",
            3: "Broadcasting adds the missing axes on the left: (B, n) is read as "
               "(1, 1, B, n), with the batch against the queries and the positions against "
               "the keys.",
        },
    },
    "qc_renormalise": {
        "answer": 3,
        "explanation": "The softmax gives allowed key j the weight exp(s_j) / Z. Keeping the "
                       "allowed ones and dividing by their sum cancels Z, leaving exp(s_j) "
                       "over the sum of exp(s) over allowed keys: exactly the masked softmax. "
                       "In floating point it is worse, not different in principle: a masked "
                       "score far above the others makes the allowed exponentials underflow "
                       "to 0, and the row becomes 0 / 0. That is why the mask goes on the "
                       "scores.",
        "why_wrong": {
            0: "The masked keys enter only through the common denominator Z, which cancels "
               "when the row is divided by its new sum; the ratios between allowed weights "
               "never depended on them.",
            1: "That happens when the weights are masked and not renormalised (the trap of "
               "section 3); dividing by the new sum brings every such row back to 1.",
            2: "In exact arithmetic the size of the masked scores cancels whatever it is. "
               "Large masked scores only hurt in floating point, where they can make the "
               "allowed exponentials underflow.",
        },
    },
    "qc_window_offset": {
        "answer": "n_k - n_q - w",
        "explanation": "Query i sits at position p = i + n_k - n_q and may attend p - w + 1 "
                       "to p, which is w keys: j > p - w = i + n_k - n_q - w. The upper edge "
                       "carries the same cache shift n_k - n_q.",
        "hint": "Find query i's absolute position first, then the lowest key the window "
                "keeps.",
        "mistakes": {
            "-w": "That is the window without the cache shift (query i at position i), "
                  "the top-left alignment: with a cache, query i sits at i + n_k - n_q.",
            "n_k - n_q - w + 1": "With j > p - w + 1 the window keeps only w - 1 keys: "
                                 "p - w + 2 to p.",
            "n_k - n_q - w - 1": "With j > p - w - 1 the window keeps w + 1 keys: p - w to "
                                 "p.",
            "n_k - w": "The shift of a query is n_k - n_q, not n_k: query 0 of the chunk "
                       "sits at position n_k - n_q.",
        },
        "accepted": ["-(w + n_q - n_k)", "(n_k - n_q) - w"],
    },
}
