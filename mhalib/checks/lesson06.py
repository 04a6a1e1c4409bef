"""Checkers for lesson 06: ``repeat_kv``, ``grouped_query_attention``, ``kv_cache_bytes`` and
``decode_with_cache`` (torch, except the plain-int cache size).

``decode_with_cache`` is judged on its output *and* on its work. The probe watches every matrix
product (:func:`mhalib.checks.work.watch_products`): a decoder that projects the whole prefix
again at every step (or reruns the layer on it) does far more FLOPs than projecting one token
per step, and one that never decodes (a single causal pass, or every token projected before the
loop) has a projection that takes many tokens at once, though its output and FLOPs are right.
The probe runs under :func:`mhalib.checks.work.torch_only`, so the prefix cannot be recomputed
in numpy where the measurement would not see it.
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.attention_variants import gqa_variant, stepwise_decode
from mhalib.checks.causality import first_step_reading_the_last_token
from mhalib.checks.compare import difference
from mhalib.checks.exercise import Case, Exercise, Symptom, WrongAnswer, refusal_mistakes
from mhalib.checks.search_spaces import CountSearch
from mhalib.checks.slips import NO_HEAD_SCALE, WrongAnswers
from mhalib.checks.torch_exercise import (
    MeasuredExercise,
    TorchCase,
    TorchExercise,
    output_kind,
    torch_model,
)
from mhalib.checks.work import watch_products

# -- repeat_kv -------------------------------------------------------------------------------

class RepeatKV(TorchExercise):
    name = "repeat_kv"
    assignment = "06-gqa"

    def visible_cases(self, rng):
        return [
            TorchCase("2 groups repeated 3 times", (rng.normal(size=(1, 2, 5, 4)), 3)),
            TorchCase("batch 2, 4 groups, n_rep=2", (rng.normal(size=(2, 4, 3, 8)), 2)),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("n_rep=1 returns the same heads", (rng.normal(size=(2, 3, 4, 5)), 1),
                      degenerate=True),
            TorchCase("one group (MQA) repeated 4 times", (rng.normal(size=(1, 1, 6, 4)), 4)),
            TorchCase("float64, 3 groups x 2", (rng.normal(size=(2, 3, 7, 6)), 2),
                      dtype="float64"),
            TorchCase("float16, 2 groups x 4", (rng.normal(size=(1, 2, 5, 8)), 4),
                      dtype="float16"),
            TorchCase("bfloat16, 4 groups x 2", (rng.normal(size=(1, 4, 3, 2)), 2),
                      dtype="bfloat16"),
            # a decoder's cache before its first token: no tokens yet (a reshape with -1
            # cannot tell the heads from nothing)
            TorchCase("an empty cache (no tokens yet), 2 groups x 3",
                      (np.zeros((1, 2, 0, 4)), 3), degenerate=True),
        ]

    def reproduces(self, case, compute, received):
        """A wrong answer of the wrong shape (copies along the sequence or feature axis) is
        reproduced by any output of that shape, whatever order the copies come in."""
        try:
            wrong_shape = compute(case).shape
        except Exception:
            return False
        if wrong_shape != self.expected_once(case).shape:
            return getattr(received, "shape", None) == wrong_shape
        return super().reproduces(case, compute, received)

    def mistakes(self):
        import torch

        return [
            WrongAnswer("tiled_groups", "the groups come out tiled (g0, g1, g0, g1, ...) instead "
                        "of interleaved (g0, g0, g1, g1, ...): head h read group h % G (an index "
                        "h % num_groups, or copies made of the whole stack of groups: x.repeat, "
                        "torch.cat of whole copies, or a new axis inserted before the group axis "
                        "and then flattened), but query head h must read group h // n_rep: the "
                        "copies of each group must sit next to each other (repeat_interleave "
                        "along dim 1, an index h // n_rep, or a new axis after the group axis, "
                        "expanded, then reshaped).",
                        torch_model(lambda x, n: x.repeat(1, n, 1, 1))),
            WrongAnswer("sequence_axis", "the copies were stacked along the sequence axis (dim 2), "
                        "not the head axis (dim 1).",
                        torch_model(lambda x, n: torch.repeat_interleave(x, n, dim=2))),
            WrongAnswer("feature_axis", "the copies were stacked along the feature axis (dim -1), "
                        "not the head axis (dim 1).",
                        torch_model(lambda x, n: torch.repeat_interleave(x, n, dim=-1))),
            WrongAnswer("batch_axis", "the copies were stacked along the batch axis (dim 0), not "
                        "the head axis (dim 1).",
                        torch_model(lambda x, n: torch.repeat_interleave(x, n, dim=0))),
            WrongAnswer("not_flattened", "the result is 5-D (B, G, n_rep, N, d): after expanding "
                        "a new axis, reshape to (B, G * n_rep, N, d).",
                        torch_model(lambda x, n: x[:, :, None].expand(-1, -1, n, -1, -1))),
            WrongAnswer("flattened", "the result is 1-D: repeat_interleave without dim= "
                        "flattens the tensor first; pass dim=1.",
                        torch_model(lambda x, n: torch.repeat_interleave(x, n))),
            WrongAnswer("ignores_n_rep", "the groups came back unrepeated (B, G, N, d): repeat "
                        "each group n_rep times along dim 1 (if the code has a repeat, it was "
                        "skipped: an early return meant for n_rep == 1 whose test also holds for "
                        "larger n_rep, say).", torch_model(lambda x, n: x)),
        ]


# -- grouped_query_attention -----------------------------------------------------------------

def gqa_inputs(rng, batch, n, d_model, num_heads, num_kv_heads):
    """x (B, N, d_model) and the four weights, scaled so projections are about unit size."""
    d_head = d_model // num_heads
    scale = 1 / np.sqrt(d_model)
    x = rng.normal(size=(batch, n, d_model))
    w_q = rng.normal(size=(d_model, d_model)) * scale
    w_k = rng.normal(size=(d_model, num_kv_heads * d_head)) * scale
    w_v = rng.normal(size=(d_model, num_kv_heads * d_head)) * scale
    w_o = rng.normal(size=(d_model, d_model)) * scale
    return (x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)



class GroupedQueryAttention(TorchExercise):
    name = "grouped_query_attention"
    axes = {  # the case's sizes by name (diagnoses)
        "x": "B N d_model",
        "w_q": "d_model d_model",
        "w_k": "d_model G*d_head",
        "w_v": "d_model G*d_head",
        "w_o": "d_model d_model",
    }
    assignment = "06-gqa"
    answer_key_names = ("attend", "tiled_attention", "flash_attention")

    def visible_cases(self, rng):
        return [
            TorchCase("GQA: 4 query heads share 2 K/V heads",
                      gqa_inputs(rng, 1, 6, 16, 4, 2)),
            TorchCase("causal GQA, 6 heads over 2 K/V heads",
                      gqa_inputs(rng, 2, 7, 24, 6, 2), {"causal": True}),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("num_kv_heads == num_heads (MHA)", gqa_inputs(rng, 2, 5, 16, 4, 4)),
            TorchCase("num_kv_heads == 1 (MQA), causal", gqa_inputs(rng, 1, 8, 32, 4, 1),
                      {"causal": True}),
            TorchCase("float64, 8 heads over 4 groups, causal", gqa_inputs(rng, 1, 9, 32, 8, 4),
                      {"causal": True}, dtype="float64"),
            TorchCase("float16, 4 heads over 2 groups", gqa_inputs(rng, 1, 6, 32, 4, 2),
                      dtype="float16"),
            TorchCase("causal=False given explicitly", gqa_inputs(rng, 1, 5, 12, 6, 3),
                      {"causal": False}),
            TorchCase("a single token", gqa_inputs(rng, 2, 1, 16, 4, 2), {"causal": True},
                      degenerate=True),
            TorchCase("6 query heads over 4 K/V heads must raise ValueError",
                      gqa_inputs(rng, 1, 4, 24, 6, 4), must_raise="num_heads=6 is not a "
                      "multiple of num_kv_heads=4 (query heads cannot share the groups evenly)"),
            # as many tokens as a head is wide: the weights can be read back from the output
            TorchCase("float64, causal, 6 tokens, 4 heads of 8 over 2 K/V heads",
                      gqa_inputs(rng, 1, 6, 32, 4, 2), {"causal": True}, dtype="float64"),
        ]

    def mistakes(self):
        def variant(**change):
            def fn(*args, causal=False, **knobs):
                if "causal_shift" in knobs and not causal:
                    raise ValueError("this mistake needs a causal case")
                return gqa_variant(*args, causal=causal, **knobs)
            return torch_model(fn, **change)

        def first_group(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
            """GQA in which every query head reads K/V group 0 (MQA on the first group)."""
            if num_kv_heads == 1:
                raise ValueError("one group: this mistake makes no difference")
            d_head = x.shape[-1] // num_heads
            return gqa_variant(x, w_q, w_k[:, :d_head], w_v[:, :d_head], w_o, num_heads, 1,
                               causal=causal)

        def reused(keys, values):
            """GQA whose keys and values are projected with the weights named."""
            def fn(x, w_q, w_k, w_v, w_o, *heads, causal=False):
                weights = {"w_k": w_k, "w_v": w_v}
                return gqa_variant(x, w_q, weights[keys], weights[values], w_o, *heads,
                                   causal=causal)
            return torch_model(fn)

        return [
            WrongAnswer("tiled_groups", "query head h reads K/V group h % num_kv_heads instead of "
                        "h // (num_heads // num_kv_heads): the K/V heads were tiled (x.repeat, "
                        "np.tile, or an index h % num_kv_heads) rather than interleaved "
                        "(repeat_interleave, or h // (num_heads // num_kv_heads)).",
                        variant(tiled=True)),
            WrongAnswer("no_scale", NO_HEAD_SCALE,
                        variant(scale=1.0)),
            WrongAnswer("scale_d_model", "the scores were divided by sqrt(d_model); each head's "
                        "dot product has d_head = d_model / num_heads terms, so divide by "
                        "sqrt(d_head).", variant(scale="d_model")),
            WrongAnswer("scale_kv_width", "the scores were divided by sqrt(num_kv_heads * "
                        "d_head), the width of all the K/V heads together (w_k.shape[-1]); each "
                        "head's dot product has d_head = d_model / num_heads terms, so divide by "
                        "sqrt(d_head).", variant(scale="kv_width")),
            WrongAnswer("causal_ignored", "with causal=True every token still sees the future: "
                        "apply the causal mask (key j allowed only when j <= i).",
                        variant(causal=False)),
            WrongAnswer("always_causal", "the causal mask is applied even with causal=False.",
                        variant(causal=True)),
            WrongAnswer("causal_excludes_self", "the causal mask is off by one: each token must "
                        "see itself too (j <= i, not j < i).", variant(causal_shift=-1)),
            WrongAnswer("causal_sees_next", "the causal mask is off by one: token i also sees "
                        "token i + 1 (use j <= i).", variant(causal_shift=1)),
            WrongAnswer("split_without_transpose", "the heads were split with a reshape to (B, H, "
                        "N, d_head) and merged back with a reshape, both without a transpose, "
                        "which mixes positions and heads: to split, reshape to (B, N, H, d_head) "
                        "and transpose(1, 2); to merge, transpose(1, 2) back before the "
                        "reshape.",
                        variant(split_without_transpose=True)),
            WrongAnswers("kv_split_without_transpose", "the queries' heads are right, but the "
                         "keys' or the values' (or both) were split with a plain reshape to (B, "
                         "G, N, d_head), without a transpose, which mixes positions and K/V "
                         "heads: reshape to (B, N, G, d_head), then transpose(1, 2), as for q.",
                         variant(split_without_transpose="kv"),
                         lambda c: [variant(split_without_transpose="k")(c),
                                    variant(split_without_transpose="v")(c)]),
            WrongAnswer("no_output_projection", "the merged heads were returned without the output "
                        "projection w_o.", variant(output_projection=False)),
            WrongAnswer("swapped_k_v", "keys and values swapped roles (x @ w_v used as keys, x @ "
                        "w_k as values): the scores use the keys, the output mixes the values.",
                        variant(swap_kv=True)),
            WrongAnswer("softmax_over_queries", "the softmax ran over the queries (dim=-2): each "
                        "query's weights over the keys must sum to 1, dim=-1.",
                        variant(softmax_axis=-2)),
            WrongAnswer("merge_without_transpose", "the split is right but the heads were merged "
                        "by a plain reshape of (B, H, N, d_head), which mixes positions and "
                        "heads: transpose(1, 2) to (B, N, H, d_head) first, then reshape.",
                        variant(merge_without_transpose=True)),
            WrongAnswers("projection_weight_reused", "the keys or the values were projected "
                         "with the other's weight (v = x @ w_k, say: a copy-paste slip): keys "
                         "use w_k, values use w_v.", reused(keys="w_k", values="w_k"),
                         lambda c: [reused(keys="w_v", values="w_v")(c)]),
            WrongAnswer("first_group_only", "every query head read the first K/V group: head h "
                        "must read group h // (num_heads // num_kv_heads).",
                        torch_model(first_group)),
            Symptom("returns_weights_too", "the function returned a tuple whose first element is "
                    "the right output: return only the output tensor (B, N, d_model).",
                    lambda case, received, meta: self._first_is_right(case, received)),
            *refusal_mistakes(
                "num_heads is not a multiple of num_kv_heads",
                'if num_heads % num_kv_heads: raise ValueError(f"num_heads={num_heads} is not a '
                'multiple of num_kv_heads={num_kv_heads}")'),
        ]

    def _first_is_right(self, case, received) -> bool:
        return (isinstance(received, tuple) and len(received) >= 2
                and difference(self.expected_once(case), received[0],
                               *self.tolerance(case)) is None)


# -- kv_cache_bytes --------------------------------------------------------------------------

_CACHE_ARGS = ("num_layers", "num_kv_heads", "head_dim", "seq_len", "batch_size",
               "bytes_per_element")
_CACHE_DEFAULTS = {"batch_size": 1, "bytes_per_element": 2}


def _cache_args(case) -> dict:
    """The case's arguments by name, defaults filled in."""
    return case.arguments(_CACHE_ARGS, _CACHE_DEFAULTS)


def _cache(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element, *,
           factor=2, use_layers=True):
    return (factor * (num_layers if use_layers else 1) * num_kv_heads * head_dim * seq_len
            * batch_size * bytes_per_element)


class KVCacheBytes(CountSearch, Exercise):
    search_cap = 240  # single-factor changes of the count (mhalib.checks.search_spaces)

    int_counts = True  # a float count, even of the right value, fails
    name = "kv_cache_bytes"
    assignment = "06-gqa"
    rtol, atol = 1e-9, 0.0
    answer_key_names = ("kv_cache_bytes_per_token", "max_cached_tokens",
                        "model_kv_cache_bytes")

    def visible_cases(self, rng):
        n = int(rng.integers(100, 5000))
        return [
            Case("32 layers, 8 K/V heads of 128, 8192 tokens", (32, 8, 128, 8192)),
            Case(f"batch 4, float32 cache, {n} tokens", (12, 12, 64, n),
                 {"batch_size": 4, "bytes_per_element": 4}),
        ]

    def hidden_cases(self, rng):
        return [
            Case("126 layers, 8 K/V heads, 128k tokens (Llama-3.1 405B-like)",
                 (126, 8, 128, 131072)),
            Case("one K/V head (MQA), batch 16", (32, 1, 64, 2048, 16)),
            Case("positional batch and an 8-bit cache",
                 (int(rng.integers(2, 40)), 4, 128, int(rng.integers(10, 9000)), 3, 1)),
            Case("a single token, float32", (2, 3, 16, 1), {"bytes_per_element": 4}),
        ]

    def mistakes(self):
        def wrong(**change):
            return lambda c: _cache(**{**_cache_args(c), **change})

        return [
            WrongAnswer("no_factor_2", "the cache holds keys AND values: multiply by 2.",
                        wrong(factor=1)),
            WrongAnswer("no_layers", "your count is one layer's cache: every layer keeps its "
                        "own K and V cache, so the count is num_layers times that (a factor "
                        "num_layers left out, or a loop over the layers that overwrites its "
                        "total, total = ..., where it adds to it, total += ...).",
                        wrong(use_layers=False)),
            WrongAnswer("ignores_batch_size", "your count is one sequence's cache: each sequence "
                        "in the batch has its own, so the count is batch_size times that (a "
                        "factor batch_size left out, or a loop over the batch that overwrites "
                        "its total where it adds to it).", wrong(batch_size=1)),
            WrongAnswer("elements_not_bytes", "that is the number of cached elements; multiply by "
                        "bytes_per_element to get bytes.", wrong(bytes_per_element=1)),
            WrongAnswers("fixed_bytes_per_element", "bytes_per_element was ignored (a fixed 2 or "
                         "4 bytes per element was used): multiply by the bytes_per_element "
                         "given.", wrong(bytes_per_element=2),
                         lambda c: [wrong(bytes_per_element=4)(c)]),
            WrongAnswer("bits_not_bytes", "that is bits, not bytes (8 times too many).",
                        wrong(factor=16)),
            WrongAnswers("per_token", "that is the cache of ONE token (per sequence), an "
                         "intermediate: multiply by seq_len (and batch_size) for the whole "
                         "cache.", wrong(seq_len=1, batch_size=1),
                         lambda c: [wrong(seq_len=1)(c)]),
            WrongAnswers("wrong_unit", "the size came back in GiB, GB, MiB or KiB: return it in "
                         "bytes (do not divide by 2**30 or 1e9).",
                         lambda c: _cache(**_cache_args(c)) / 2**30,
                         lambda c: [_cache(**_cache_args(c)) / unit
                                    for unit in (1e9, 2**20, 1e6, 2**10, 1e3)]),
            WrongAnswer("divided_by_8", "that is 8 times too few: bytes_per_element is already "
                        "in bytes, do not divide by 8.", wrong(factor=2 / 8)),
            WrongAnswer("no_kv_heads", "the cache of ONE K/V head: every layer caches "
                        "num_kv_heads heads of head_dim each (the factor num_kv_heads left out, "
                        "or a per-head size such as head_dim divided by num_kv_heads as if it "
                        "were the width of all the heads).",
                        wrong(num_kv_heads=1)),
            WrongAnswer("no_head_dim", "the cache of one number per K/V head: each cached key "
                        "or value is a vector of head_dim entries, multiply by head_dim.",
                        wrong(head_dim=1)),
        ]


# -- decode_with_cache -----------------------------------------------------------------------

# Allowed FLOPs: one projection of every token (linear in N) plus up to 1.5 times the dense
# N x N attention. Projecting the prefix again at every step adds about
# 2 B d_model kv_width N (N - 1) FLOPs, far above that slack whenever kv_width >= 8.
ATTENTION_SLACK = 1.5
MIN_STEPS_FOR_WORK_CHECK = 4


def decode_flop_budget(case) -> int:
    x, w_k = case.args[0], case.args[2]
    batch, n, d_model = x.shape
    kv_width = w_k.shape[1]
    projections = 2 * batch * n * d_model * (2 * d_model + 2 * kv_width)
    dense_attention = 4 * batch * n * n * d_model
    return int(projections + ATTENTION_SLACK * dense_attention)


def projection_tokens(products, d_model: int) -> int:
    """The most tokens one projection took before the last step's attention: over the matrix
    products that contract over d_model (x @ w_q, w_k, w_v, a fused QKV, an output @ w_o;
    attention contracts over d_head or over the keys, fewer than d_model in every case), batch *
    the smaller free side. The outputs of every step projected by w_o at once after the loop
    are not counted: that still projects each token once, and no step waits for it (the
    contract asks that each step project only the new token, with projection work linear in
    N), whereas keys, values or queries projected at once come before some step's attention."""
    attention = [i for i, (_, _, _, k, _) in enumerate(products) if k != d_model]
    last = attention[-1] if attention else len(products)
    sizes = [batch * min(m, n) for i, (_, batch, m, k, n) in enumerate(products)
             if k == d_model and i < last]
    return max(sizes, default=0)


def _cases_batch_and_length(case) -> tuple[int, int]:
    batch, n, _ = case.args[0].shape
    return batch, n


class DecodeWithCache(MeasuredExercise):
    name = "decode_with_cache"
    axes = {  # the case's sizes by name (diagnoses)
        "x": "B N d_model",
        "w_q": "d_model d_model",
        "w_k": "d_model G*d_head",
        "w_v": "d_model G*d_head",
        "w_o": "d_model d_model",
    }
    assignment = "06-gqa"
    answer_key_names = ("attend", "tiled_attention", "flash_attention",
                        "grouped_query_attention")

    def visible_cases(self, rng):
        return [
            TorchCase("8 tokens, 4 heads over 2 K/V heads", gqa_inputs(rng, 1, 8, 32, 4, 2)),
            TorchCase("batch 2, 10 tokens, MHA (4 K/V heads)", gqa_inputs(rng, 2, 10, 32, 4, 4)),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("MQA (1 K/V head), 12 tokens", gqa_inputs(rng, 1, 12, 32, 4, 1)),
            TorchCase("float64, 8 heads over 2 groups", gqa_inputs(rng, 1, 9, 64, 8, 2),
                      dtype="float64"),
            TorchCase("float16, 6 tokens", gqa_inputs(rng, 1, 6, 32, 4, 2), dtype="float16"),
            TorchCase("a single token", gqa_inputs(rng, 2, 1, 16, 2, 1), degenerate=True),
            TorchCase("16 tokens, wide K/V (d_model 48, 6 heads over 3)",
                      gqa_inputs(rng, 1, 16, 48, 6, 3)),
            # as many tokens as a head is wide: the weights can be read back from the output
            TorchCase("float64, 6 tokens, 4 heads of 8 over 2 K/V heads",
                      gqa_inputs(rng, 1, 6, 32, 4, 2), dtype="float64"),
        ]

    def measure(self, func, case, args, kwargs):
        output, watch = watch_products(func, *args, **kwargs)
        return output, {"output_kind": output_kind(output), "flops": watch.flops,
                        "projection_tokens": projection_tokens(watch.products,
                                                               case.args[0].shape[-1]),
                        "step_read_later_token": first_step_reading_the_last_token(
                            func, output, args, kwargs)}

    def work_problem(self, case, received, meta):
        if self._over_budget(case, meta):
            return (f"right output, but {meta['flops']:,} FLOPs where projecting one token per "
                    f"step needs at most {decode_flop_budget(case):,}")
        if self._not_stepwise(case, meta):
            batch, n = _cases_batch_and_length(case)
            return (f"right output, but one projection took {meta['projection_tokens']} tokens "
                    f"at once; decoding {n} tokens (batch {batch}) one per step projects "
                    f"{batch} at a time")
        return None

    @staticmethod
    def _over_budget(case, meta) -> bool:
        n = case.args[0].shape[1]
        flops = meta.get("flops")
        return (isinstance(flops, int) and n >= MIN_STEPS_FOR_WORK_CHECK
                and flops > decode_flop_budget(case))

    @staticmethod
    def _not_stepwise(case, meta) -> bool:
        batch, n = _cases_batch_and_length(case)
        tokens = meta.get("projection_tokens")
        return isinstance(tokens, int) and n >= 2 and tokens > batch

    def mistakes(self):
        def stepwise(**change):
            return torch_model(stepwise_decode, **change)

        return [
            self.leaves_torch("the function took tensors out of torch (.numpy(), "
                              "np.asarray, .tolist() or .item()). This exercise is checked by "
                              "watching the work done in torch, and work done in numpy or Python "
                              "could not be seen: keep the cache and every step in torch."),
            Symptom("recomputes_prefix", "the output is right, but every step projects the whole "
                    "prefix again (or reruns the layer on it): the work grows like N^2 projections "
                    "(N^3 attention) instead of N. Keep the K and V of past tokens in a cache and "
                    "project only the new token.",
                    lambda case, received, meta: (self._over_budget(case, meta)
                                                  and self.right(case, received))),
            Symptom("projects_all_tokens_at_once", "the output is right, but it does not decode: "
                    "one projection took many tokens at once (a single causal pass over the "
                    "whole sequence, or every token's keys and values projected before the loop). "
                    "When decoding, token t + 1 only exists after step t has produced its output, "
                    "so step t projects only token t (x[:, t:t+1] @ w_q, w_k, w_v), appends its "
                    "key and value to the cache, and attends over the cache (its output may go "
                    "through w_o then, or with every step's after the loop).",
                    lambda case, received, meta: (self._not_stepwise(case, meta)
                                                  and self.right(case, received))),
            WrongAnswer("top_left_causal", "each step's query only sees the first key: either "
                        "a causal mask aligned top-left (F.scaled_dot_product_attention(is_causal="
                        "True) with one query over t keys lets it see key 0 only: the newest token "
                        "may see the whole cache, so no mask is needed when decoding), or the "
                        "cache never grew along the token axis (new keys and values appended "
                        "along another axis, or overwritten, so each step attends to one key).",
                        stepwise(visible="first")),
            WrongAnswer("excludes_current_token", "each step attends only to earlier tokens, "
                        "not to itself: the new token's key and value must be among the keys it "
                        "attends to (appended to the cache before attending, and not sliced away: "
                        "the first t + 1 entries at step t, not t).",
                        stepwise(visible="past")),
            WrongAnswer("replaced_cache", "each step attends only to the token it adds, as if "
                        "the cache held the newest key and value alone: the step attends over "
                        "k_new and v_new where the grown cache belongs (the cache kept but not "
                        "read), or the cache was assigned (k_cache = k_new) where it should "
                        "grow (k_cache = torch.cat([k_cache, k_new], dim=2)), or it was read "
                        "from slot t only ([:, :, t:t + 1] where [:, :, :t + 1] belongs).",
                        stepwise(visible="self")),
            WrongAnswer("not_causal", "every token sees the whole sequence, future included: at "
                        "step t attend only to the cache of tokens 0..t.",
                        stepwise(visible="all")),
            WrongAnswer("tiled_groups", "query head h reads K/V group h % num_kv_heads instead of "
                        "h // (num_heads // num_kv_heads) (tiled instead of interleaved).",
                        stepwise(tiled=True)),
            WrongAnswer("no_scale", NO_HEAD_SCALE,
                        stepwise(scale=1.0)),
            WrongAnswer("scale_d_model", "the scores were divided by sqrt(d_model); each head's "
                        "dot product has d_head = d_model / num_heads terms, so divide by "
                        "sqrt(d_head).", stepwise(scale="d_model")),
            WrongAnswer("scale_by_cache_length", "each step's scores were divided by the square "
                        "root of the cache's length (t + 1 keys at step t: k.shape[-2]) where "
                        "the head width belongs: scale by 1/sqrt(d_head), k.shape[-1].",
                        stepwise(scale="keys")),
            # (after the models, which say more; not said where attending to every token,
            # future included, reproduces the output: not_causal names that)
            Symptom("reads_a_later_token", "a step's output depends on a token after it: with "
                    "only the last token changed, the output of an earlier step changed too. "
                    "Step t may read tokens 0..t only: its query, key and value come from the "
                    "new token x[:, t:t + 1] (not from x, or x[:, -1:]), and it attends over the "
                    "cache of tokens 0..t.",
                    lambda case, received, meta: isinstance(
                        meta.get("step_read_later_token"), int) and not self.reproduces(
                        case, stepwise(visible="all"), received), vague=True),
        ]


EXERCISES = {e.name: e for e in (RepeatKV(), GroupedQueryAttention(), KVCacheBytes(),
                                 DecodeWithCache())}
