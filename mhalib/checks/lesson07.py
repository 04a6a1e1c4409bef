"""Checker for lesson 07: ``online_softmax_attention`` (torch).

Judged on its output and on its memory: the probe records the largest tensor any op
allocated while it ran. Exact attention that materialises the (N_q, N_k) scores, even one
block at a time glued back together, allocates B * H * N_q * N_k elements at once; the online
softmax never needs more than B * H * N_q * max(block_size, d).
"""

from __future__ import annotations

from mhalib.checks.answer_key import answer_key
from mhalib.checks.attention_variants import online_softmax_variant
from mhalib.checks.exercise import Symptom, WrongAnswer
from mhalib.checks.torch_exercise import (
    TorchCase,
    TorchExercise,
    as_numpy,
    case_tensors,
    exact_inputs,
    one_thread,
    output_kind,
)
from mhalib.checks.work import largest_new_tensor

# the memory check applies when the keys span at least this many blocks (and head widths)
MIN_BLOCKS_FOR_MEMORY_CHECK = 4


def qkv(rng, batch, heads, n_q, n_k, d, logit_scale=1.0):
    """(B, H, N_q, d) queries and (B, H, N_k, d) keys and values."""
    return (rng.normal(size=(batch, heads, n_q, d)) * logit_scale,
            rng.normal(size=(batch, heads, n_k, d)), rng.normal(size=(batch, heads, n_k, d)))


def memory_limit(case) -> int | None:
    """Elements of one (B, H, N_q, N_k) tensor, or None when the case is too small to tell."""
    q, k = case.args[0], case.args[1]
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    block = case.kwargs.get("block_size", 64)
    if n_k < MIN_BLOCKS_FOR_MEMORY_CHECK * max(block, d):
        return None
    return batch * heads * n_q * n_k


def builds_full_scores(case, meta: dict) -> bool:
    """The probe measured a tensor as large as the whole (B, H, N_q, N_k) score matrix."""
    limit, numel = memory_limit(case), meta.get("largest_numel")
    return limit is not None and isinstance(numel, int) and numel >= limit


class OnlineSoftmaxAttention(TorchExercise):
    name = "online_softmax_attention"
    assignment = "07-flash"
    answer_key_names = ("tiled_attention", "flash_attention", "attend")

    def visible_cases(self, rng):
        return [
            TorchCase("N=256 in blocks of 32", qkv(rng, 1, 2, 256, 256, 16),
                      {"block_size": 32}),
            TorchCase("causal, N=200 (last block partial), blocks of 48",
                      qkv(rng, 2, 2, 200, 200, 8), {"block_size": 48, "causal": True}),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("default block_size=64, N=300", qkv(rng, 1, 2, 300, 300, 16)),
            TorchCase("N_q=40 queries over N_k=160 keys, causal (bottom-right)",
                      qkv(rng, 1, 3, 40, 160, 8), {"block_size": 16, "causal": True}),
            TorchCase("N_q=50 > N_k=30, causal: early queries see no key",
                      qkv(rng, 1, 2, 50, 30, 8), {"block_size": 8, "causal": True}),
            TorchCase("logits of about 1e3 (a running max is needed)",
                      qkv(rng, 1, 2, 64, 64, 16, logit_scale=250.0), {"block_size": 16}),
            TorchCase("float64, blocks of 1", qkv(rng, 1, 1, 12, 12, 4),
                      {"block_size": 1, "causal": True}, dtype="float64"),
            TorchCase("block_size larger than N", qkv(rng, 2, 1, 20, 20, 8),
                      {"block_size": 128}, degenerate=True),
            TorchCase("float16, N=128 in blocks of 32", qkv(rng, 1, 2, 128, 128, 16),
                      {"block_size": 32}, dtype="float16"),
            TorchCase("bfloat16, causal", qkv(rng, 1, 2, 96, 96, 8),
                      {"block_size": 16, "causal": True}, dtype="bfloat16"),
        ]

    def call(self, func, case):
        args, kwargs = case_tensors(case)
        with one_thread():
            output, numel, shape = largest_new_tensor(func, *args, **kwargs)
        return output, {"output_kind": output_kind(output), "largest_numel": numel,
                        "largest_shape": shape}

    def expected(self, case):
        args, kwargs = exact_inputs(case)
        return as_numpy(answer_key(self.name)(*args, **kwargs))

    def judge_case(self, case, received, meta):
        problem = super().judge_case(case, received, meta)
        if problem is None and builds_full_scores(case, meta):
            limit, numel = memory_limit(case), meta.get("largest_numel")
            return (f"right output, but it allocated a tensor of shape "
                    f"{tuple(meta.get('largest_shape') or ())} ({numel:,} elements), as big as "
                    f"the whole (B, H, N_q, N_k) score matrix ({limit:,})")
        return problem

    def mistakes(self):
        def variant(**change):
            def compute(case):
                args, kwargs = exact_inputs(case)
                return as_numpy(online_softmax_variant(*args, **{**kwargs, **change}))
            return compute

        return [
            Symptom("builds_full_scores", "the result is right, but somewhere a tensor as large as "
                    "the whole N_q x N_k score matrix was built (all scores at once, or the blocks "
                    "concatenated). Keep only one block of scores, a running max, a running sum "
                    "and the running output.",
                    lambda case, received, meta: builds_full_scores(case, meta)),
            WrongAnswer("no_rescale", "when a block raises the running max, the running sum and "
                        "output computed with the old max must be multiplied by exp(old_max - "
                        "new_max); without it earlier blocks are over-weighted.",
                        variant(rescale="none")),
            WrongAnswer("rescale_sum_only", "the running sum is rescaled when the max changes, but "
                        "the running output is not: multiply both by exp(old_max - new_max).",
                        variant(rescale="sum")),
            WrongAnswer("rescale_output_only", "the running output is rescaled when the max "
                        "changes, but the running sum is not: multiply both by exp(old_max - "
                        "new_max).",
                        variant(rescale="acc")),
            WrongAnswer("no_max_subtraction", "exp of the raw scores overflows for large logits: "
                        "subtract the running max before exponentiating.",
                        variant(subtract_max=False)),
            WrongAnswer("rescale_inverted", "the rescale factor is upside down: shrink the old "
                        "totals by exp(old_max - new_max) (at most 1), not exp(new_max - old_max).",
                        variant(inverted_rescale=True)),
            WrongAnswer("no_final_division", "the running output was returned without dividing by "
                        "the running sum at the end.", variant(divide=False)),
            WrongAnswer("no_scale", "the scores were not multiplied by 1/sqrt(d).",
                        variant(scale=1.0)),
            WrongAnswer("drops_last_block", "the last, shorter block of keys is skipped when N_k "
                        "is not a multiple of block_size: loop over range(0, N_k, block_size) and "
                        "clip the block's end at N_k.", variant(drop_last_block=True)),
            WrongAnswer("causal_top_left", "the causal mask is aligned top-left: with N_q != N_k, "
                        "query i sits at position i + N_k - N_q and sees keys j <= i + N_k - N_q.",
                        variant(causal_mode="top_left")),
            WrongAnswer("causal_block_local_keys", "the causal mask compares queries with key "
                        "positions inside the block (0..block_size-1); use absolute positions "
                        "start + j.", variant(causal_mode="local")),
            WrongAnswer("causal_ignored", "with causal=True the queries still see future keys.",
                        variant(causal=False)),
            WrongAnswer("nan_for_empty_rows", "a query that sees no key gives NaN (0 / 0); the "
                        "contract wants a row of zeros.", variant(nan_empty_rows=True)),
        ]


EXERCISES = {e.name: e for e in (OnlineSoftmaxAttention(),)}
