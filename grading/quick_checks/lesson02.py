"""Keys of lesson 02's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_seq_first_split": {
        "answer": 3,
        "explanation": "y has axes (N, B, H, d_head), numbered 0 to 3. The new order lists "
                       "them by position: batch (1), heads (2), tokens (0), features (3).",
        "why_wrong": {
            0: "That is the course's call for a batch-first x. Here axis 0 is the tokens, so "
               "it gives (N, H, B, d_head).",
            1: "That only brings the batch to the front: (B, N, H, d_head). The heads must "
               "also move in front of the tokens.",
            2: "A plain reshape reads x in memory order: it mixes tokens and sequences of "
               "the batch into the heads. The shape is right, the contents are not.",
        },
    },
    "qc_ablate_head": {
        "answer": 1,
        "explanation": "The concatenation puts head 3's output in columns 3·d_head to "
                       "4·d_head − 1, and they meet only rows 3·d_head to 4·d_head − 1 of "
                       "W_O: head 3 writes head_3 W_O^(3). Zero that block and it writes "
                       "nothing, while every other head keeps its own block.",
        "why_wrong": {
            0: "Columns of W_O are output features: zeroing them removes those features from "
               "every head's contribution, and head 3 still writes into all the others.",
            2: "With zero queries head 3's scores are all 0 and its weights uniform: it "
               "still writes the average of its values, not nothing.",
            3: "Those rows would be head 3's if heads took every H-th feature. With "
               "contiguous blocks they are d_model / H = d_head rows spread over all the "
               "heads, about d_head / H in each (5 or 6 of each head's 64 rows in GPT-2 "
               "small): every head loses part of what it writes, and head 3 keeps most of "
               "its block.",
        },
    },
    "qc_head_scale": {
        "answer": "math.sqrt(head_dim / d_model)",
        "explanation": "Each head's dot products add up d_head = {head_dim} unit-variance "
                       "terms, so their variance is {head_dim}. Divided by sqrt({d_model}) "
                       "their standard deviation is sqrt({head_dim} / {d_model}) = {value} "
                       "(1 / sqrt(H)): the scores come out too small and the weights flatter "
                       "than intended.",
        "hint": "A head's dot product sums d_head terms, not d_model. What is its standard "
                "deviation before and after the division?",
        "mistakes": {
            "head_dim / d_model": "That is the variance of the scores (d_head / d_model = "
                                  "1 / H); the question asks for the standard deviation, "
                                  "its square root.",
            "math.sqrt(d_model / head_dim)": "That is upside down: dividing by more than "
                                             "the scores' spread makes them smaller than 1, "
                                             "not larger.",
            "1": "The division restores unit variance only when the divisor's square is the "
                 "number of terms summed; each head sums d_head terms, not d_model.",
        },
        "accepted": ["1 / math.sqrt(num_heads)", "num_heads ** -0.5",
                     "math.sqrt(head_dim) / math.sqrt(d_model)"],
    },
    "qc_attention_weights": {
        "answer": "4 * d_model * num_heads * head_dim",
        "explanation": "W_Q, W_K and W_V map d_model = {d_model} features to H · d_head = "
                       "{num_heads} · {head_dim} and W_O maps them back: four matrices of "
                       "d_model x H · d_head, {value} weights.",
        "hint": "What are the shapes of W_Q and W_O when the heads together are H · d_head "
                "wide?",
        "mistakes": {
            "4 * d_model ** 2": "4 d_model^2 holds only when H · d_head = d_model. Here "
                                "W_Q, W_K, W_V are d_model x H · d_head and W_O the transpose "
                                "shape.",
            "3 * d_model * num_heads * head_dim": "That counts W_Q, W_K and W_V; W_O, "
                                                  "H · d_head x d_model, holds as many "
                                                  "again.",
            "4 * num_heads * head_dim ** 2": "Each head's block of W_Q is d_model x d_head, "
                                             "not d_head x d_head: the head reads all "
                                             "d_model features.",
            "4 * d_model * head_dim": "That is one head's share of the four matrices; there "
                                      "are H heads.",
        },
        "accepted": ["4 * d_model * (num_heads * head_dim)"],
    },
}
