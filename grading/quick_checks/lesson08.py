"""Keys of lesson 08's quick checks (instructor data: never copied into the package).

See mhalib.quiz.keys for the format.
"""

KEYS = {
    "qc_period_two": {
        "answer": 3,
        "explanation": "With period 2 the induction target i - p + 1 is key i - 1, the "
                       "previous token: the two diagonals coincide, and induction_score cannot "
                       "tell the two jobs apart. A longer period (12 in this lesson) puts them "
                       "p - 2 diagonals apart.",
        "why_wrong": {
            0: "A duplicate-token head attends to the earlier copy of the current token, key "
               "i - p = i - 2 here, one step left of the induction target i - 1: it scores 0.",
            1: "At queries 2 and 3 the induction targets are keys 1 and 2; a head on key 0 "
               "(a sink) puts nothing there and scores 0.",
            2: "The score only reads one diagonal of the pattern; any head whose weight sits "
               "on that diagonal scores 1, whatever its job, and at period 2 that diagonal "
               "is the previous-token one.",
        },
    },
    "qc_induction_key": {
        "answer": "query - span + 1",
        "explanation": "The token at position {query} also sits one span earlier, at "
                       "{query} - {span}; the token that followed it there, at key {value}, is "
                       "the one that comes next. The prefix plays no part: within the repeats "
                       "every token recurs exactly one span back.",
        "hint": "Where was the query's token one span earlier? Then step one to the right.",
        "mistakes": {
            "query - span": "That key holds the earlier copy of the query's own token (a "
                            "duplicate-token head looks there); the token to copy is the one "
                            "after it.",
            "query - 2 * span + 1": "That is the key after the occurrence in the first copy: "
                                    "it predicts the same token, but the most recent "
                                    "occurrence is only one span back.",
            "query - prefix - span + 1": "The prefix does not enter: the earlier occurrence "
                                         "is one span back from the query wherever the "
                                         "repeats start.",
            "query - span - 1": "The token to copy follows the earlier occurrence, one step "
                                "to its right, not to its left.",
        },
        "accepted": ["query + 1 - span", "(query - span) + 1"],
    },
    "qc_induction_circuit": {
        "answer": 0,
        "explanation": "Attention moves information between positions; in an attention-only "
                       "model nothing else can. A previous-token head of layer 0 at query j "
                       "attends to key j - 1 and writes that token into position j. Layer 1's "
                       "induction head then builds its key at j from it and matches its query "
                       "(token i) against it, which is why removing the previous-token heads "
                       "breaks induction.",
        "why_wrong": {
            1: "A position embedding says where a token is, the same for every sequence; it "
               "knows nothing about which token came before.",
            2: "This model has no MLPs, and an MLP works on one position at a time anyway: it "
               "cannot bring in the token from position j - 1.",
            3: "A head's keys are computed from the residual stream as it was before the "
               "layer ran: what the head would need is not there yet.",
        },
    },
    "qc_sink_previous": {
        "answer": "(1 + (tokens - 2) / 2) / (tokens - 1)",
        "explanation": "At query 1 the previous token is key 0 itself, so both halves land "
                       "there: weight 1. Queries 2 to N - 1 put 1/2 on key i - 1. The mean over "
                       "the N - 1 queries i >= 1 is (1 + (N - 2)/2) / (N - 1) = "
                       "N / (2 (N - 1)) = {value} for N = {tokens}, a little above 1/2 because "
                       "of query 1.",
        "hint": "Look at query 1 on its own: which key is its previous token?",
        "mistakes": {
            "1 / 2": "Query 1's previous token is key 0, where both halves of its weight go: "
                     "it contributes 1, not 1/2 (and the mean runs over the N - 1 queries "
                     "i >= 1, not over N).",
            "(tokens - 2) / 2 / (tokens - 1)": "Query 1 counts: its previous token is key 0, "
                                               "so all of its weight is on the previous "
                                               "token and it contributes 1, not 0.",
            "(1 + (tokens - 2) / 2) / (tokens - 2)": "The mean runs over the N - 1 queries "
                                                     "i = 1 .. N - 1, query 1 included.",
        },
        "accepted": ["tokens / (2 * (tokens - 1))", "0.5 + 0.5 / (tokens - 1)"],
    },
}
