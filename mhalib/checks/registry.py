"""Every contract exercise name -> its checker, loaded lazily from one module per lesson."""

from __future__ import annotations

import importlib

# assignment id -> (checker module, exercise names in notebook order)
LESSONS = {
    "01-single-head": ("mhalib.checks.lesson01", ("softmax", "attention")),
    "02-multi-head": ("mhalib.checks.lesson02", ("split_heads", "merge_heads",
                                                  "multi_head_attention")),
    "03-scaling": ("mhalib.checks.lesson03", ("dot_product_variance", "softmax_entropy",
                                               "softmax_jacobian")),
    "04-masks": ("mhalib.checks.lesson04", ("causal_mask", "padding_mask", "masked_attention")),
    "05-flops": ("mhalib.checks.lesson05", ("mha_flops", "crossover_seq_len", "mha_param_count")),
    "06-gqa": ("mhalib.checks.lesson06", ("repeat_kv", "grouped_query_attention",
                                          "kv_cache_bytes", "decode_with_cache")),
    "07-flash": ("mhalib.checks.lesson07", ("online_softmax_attention",)),
    "08-heads": ("mhalib.checks.lesson08", ("previous_token_score", "induction_score")),
}

NOTEBOOKS = {
    "01-single-head": "single_head_attention.ipynb",
    "02-multi-head": "multi_head_attention.ipynb",
    "03-scaling": "scaling.ipynb",
    "04-masks": "masks.ipynb",
    "05-flops": "flops.ipynb",
    "06-gqa": "gqa_kv_cache.ipynb",
    "07-flash": "flash_attention.ipynb",
    "08-heads": "what_heads_learn.ipynb",
}

EXERCISE_LESSON = {name: lesson for lesson, (_, names) in LESSONS.items() for name in names}


def exercises_of(assignment: str) -> list[str]:
    """Contract exercise names of an assignment id, in notebook order."""
    if assignment not in LESSONS:
        raise ValueError(f"assignment={assignment!r} is not one of {sorted(LESSONS)}")
    return list(LESSONS[assignment][1])


def get_exercise(name: str):
    """The checker object of exercise ``name``."""
    if name not in EXERCISE_LESSON:
        raise ValueError(f"exercise={name!r} is not a contract exercise; "
                         f"known: {sorted(EXERCISE_LESSON)}")
    module = importlib.import_module(LESSONS[EXERCISE_LESSON[name]][0])
    return module.EXERCISES[name]
