"""Checkers for lesson 10: ``mla_kv_cache_bytes`` (plain ints), ``mla_attention`` and
``absorb_mla_weights`` (torch).

The mistake models below are MLA written with one knob turned (a scale, a head layout, a
missing transpose...); they never call the answer key. Cases use sizes where the knobs show:
``num_heads * d_head`` different from ``d_model``, ``d_c`` different from ``d_head`` (and, in
one case each, equal to it, so that an untransposed ``w_uk`` still runs and can be named).
"""

from __future__ import annotations

import math

import numpy as np

from mhalib.checks.compare import difference
from mhalib.checks.exercise import Case, Exercise, WrongAnswer
from mhalib.checks.search_spaces import CountSearch
from mhalib.checks.slips import NO_HEAD_SCALE
from mhalib.checks.torch_exercise import (
    TorchCase,
    TorchExercise,
    case_tensors,
    one_thread,
    output_kind,
    torch_model,
)

# -- mla_kv_cache_bytes ------------------------------------------------------------------------

_CACHE_ARGS = ("num_layers", "kv_lora_rank", "rope_head_dim", "seq_len", "batch_size",
               "bytes_per_element")
_CACHE_DEFAULTS = {"batch_size": 1, "bytes_per_element": 2}


def _cache_args(case) -> dict:
    """The case's arguments by name, defaults filled in."""
    return case.arguments(_CACHE_ARGS, _CACHE_DEFAULTS)


def _mla_cache(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size, bytes_per_element,
               *, rank_copies=1, rope_copies=1, use_layers=True):
    per_token = rank_copies * kv_lora_rank + rope_copies * rope_head_dim
    return (num_layers if use_layers else 1) * per_token * seq_len * batch_size * bytes_per_element


class MLAKVCacheBytes(CountSearch, Exercise):
    search_cap = 240  # single-factor changes of the count (mhalib.checks.search_spaces)

    int_counts = True  # a float count, even of the right value, fails
    name = "mla_kv_cache_bytes"
    assignment = "10-mla"
    rtol, atol = 1e-9, 0.0
    answer_key_names = ("model_kv_cache_bytes",)

    def visible_cases(self, rng):
        n = int(rng.integers(100, 5000))
        return [
            Case("DeepSeek-V3: 61 layers, 512 + 64, one token", (61, 512, 64, 1)),
            Case(f"batch 4, float32 cache, {n} tokens", (27, 512, 64, n),
                 {"batch_size": 4, "bytes_per_element": 4}),
        ]

    def hidden_cases(self, rng):
        return [
            Case("60 layers, 128k tokens (DeepSeek-V2-like)", (60, 512, 64, 131072)),
            Case("no RoPE part (rope_head_dim=0), batch 8", (12, 256, 0, 2048, 8)),
            Case("positional batch and an 8-bit cache",
                 (int(rng.integers(2, 40)), 384, 32, int(rng.integers(10, 9000)), 3, 1)),
            Case("a single layer, float32", (1, 96, 16, 7), {"bytes_per_element": 4}),
        ]

    def mistakes(self):
        def wrong(rank_copies=1, rope_copies=1, use_layers=True, **override):
            return lambda case: _mla_cache(**{**_cache_args(case), **override},
                                           rank_copies=rank_copies, rope_copies=rope_copies,
                                           use_layers=use_layers)

        return [
            WrongAnswer("no_rope_key", "the shared RoPE key is missing: besides the latent, every "
                        "token and layer caches one rotated key of rope_head_dim numbers (it "
                        "carries the position, so it cannot be recomputed from the latent): "
                        "(kv_lora_rank + rope_head_dim) numbers per token and layer.",
                        wrong(rope_copies=0)),
            WrongAnswer("k_and_v_doubled", "the factor 2 of an MHA/GQA cache does not apply: MLA "
                        "stores no separate keys and values: both are up-projections of the one "
                        "cached latent, and the small RoPE key is stored once (there is no RoPE "
                        "value), so each token and layer costs kv_lora_rank + rope_head_dim "
                        "numbers, once.", wrong(rank_copies=2, rope_copies=2)),
            WrongAnswer("latent_doubled", "the latent was counted twice (once for keys, once for "
                        "values): keys and values are both up-projections of the same cached "
                        "latent, which is stored once.", wrong(rank_copies=2)),
            WrongAnswer("no_layers", "your count is one layer's cache: every layer keeps its "
                        "own latents and RoPE keys, so the count is num_layers times that (a "
                        "factor num_layers left out, or a loop over the layers that overwrites "
                        "its total where it adds to it).", wrong(use_layers=False)),
            WrongAnswer("ignores_batch_size", "your count is one sequence's cache: each sequence "
                        "in the batch has its own, so the count is batch_size times that (a "
                        "factor batch_size left out, or a loop over the batch that overwrites "
                        "its total where it adds to it).", wrong(batch_size=1)),
            WrongAnswer("elements_not_bytes", "that is the number of cached elements; multiply by "
                        "bytes_per_element to get bytes.", wrong(bytes_per_element=1)),
            WrongAnswer("fixed_bytes_per_element", "bytes_per_element was ignored (a fixed 2 "
                        "bytes per element was used).", wrong(bytes_per_element=2)),
        ]


# -- MLA with knobs (the mistake models of mla_attention and absorb_mla_weights) ----------------

def _heads_of(w, num_heads, *, strided=False, axis=1):
    """The per-head blocks of ``w`` along ``axis`` (columns by default): contiguous blocks of
    d_head, or with ``strided`` every num_heads-th column (h, h + H, h + 2H, ...)."""
    import torch

    width = w.shape[axis]
    d_head = width // num_heads
    if strided:
        index = [torch.arange(h, width, num_heads) for h in range(num_heads)]
    else:
        index = [torch.arange(h * d_head, (h + 1) * d_head) for h in range(num_heads)]
    return [w.index_select(axis, i) for i in index]


def mla_variant(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True, *, scale="d_head",
                strided=False, split_without_transpose=False, mask="right",
                value_weight="w_uv", key_weight="w_uk", softmax_dim=-1, output_projection=True):
    """Naive MLA, head by head, with knobs (all defaults: the right answer).

    ``scale``: "d_head", "d_c", "d_model" or "none"; ``strided``: head h takes columns h::H;
    ``split_without_transpose``: the (B, N, H*d) -> (B, H, N, d) split is a bare reshape;
    ``mask``: "right" (causal as asked), "none" (never), "always" (even when causal=False),
    "strict" (j < i); ``key_weight`` / ``value_weight``: which up-projection makes keys /
    values; ``softmax_dim``: -2 normalises over the queries.
    """
    import torch

    batch, n, d_model = x.shape
    d_head = w_q.shape[1] // num_heads
    weights = {"w_uk": w_uk, "w_uv": w_uv}
    c = x @ w_dkv  # (B, N, d_c)
    q_all, k_all, v_all = x @ w_q, c @ weights[key_weight], c @ weights[value_weight]
    if split_without_transpose:
        split = lambda t: t.reshape(batch, num_heads, n, d_head)  # noqa: E731
        q, k, v = split(q_all), split(k_all), split(v_all)
    else:
        def split(t):
            return torch.stack(_heads_of(t, num_heads, strided=strided, axis=2), dim=1)
        q, k, v = split(q_all), split(k_all), split(v_all)  # (B, H, N, d_head)
    divisor = {"d_head": d_head, "d_c": w_dkv.shape[1], "d_model": d_model, "none": 1}[scale]
    scores = q @ k.transpose(-2, -1) / math.sqrt(divisor)  # (B, H, N, N)
    apply_mask = {"right": causal, "none": False, "always": True, "strict": causal}[mask]
    if apply_mask:
        allowed = torch.ones(n, n, dtype=torch.bool).tril(-1 if mask == "strict" else 0)
        scores = scores.masked_fill(~allowed, -torch.inf)
    probs = torch.softmax(scores, dim=softmax_dim).nan_to_num(0.0)
    ctx = probs @ v  # (B, H, N, d_head)
    if split_without_transpose:
        merged = ctx.reshape(batch, n, num_heads * d_head)
    elif strided:  # put feature i of head h back at column h + i * H
        merged = ctx.permute(0, 2, 3, 1).reshape(batch, n, num_heads * d_head)
    else:
        merged = ctx.transpose(1, 2).reshape(batch, n, num_heads * d_head)
    return merged @ w_o if output_projection else merged


def absorb_variant(w_uk, w_uv, w_q, w_o, num_heads, *, strided=False, uk_transposed=True,
                   q_latent_transposed=False, o_latent_transposed=False, cross_heads=False,
                   scale_folded=False, swapped=False, heads_axis=0):
    """Absorbed weights with knobs (all defaults: the right answer).

    ``uk_transposed=False``: w_q_h @ w_uk_h (only runs when d_c == d_head);
    ``q_latent_transposed`` / ``o_latent_transposed``: each head's matrix transposed;
    ``cross_heads``: every head gets the whole w_q @ w_uk.T (and w_uv @ w_o);
    ``scale_folded``: w_q_latent already divided by sqrt(d_head); ``swapped``: the tuple
    returned as (w_o_latent, w_q_latent); ``heads_axis``: where the head axis is stacked.
    """
    import torch

    d_head = w_q.shape[1] // num_heads
    q_heads = _heads_of(w_q, num_heads, strided=strided)  # (d_model, d_head) each
    uk_heads = _heads_of(w_uk, num_heads, strided=strided)  # (d_c, d_head) each
    uv_heads = _heads_of(w_uv, num_heads, strided=strided)  # (d_c, d_head) each
    o_heads = _heads_of(w_o, num_heads, strided=strided, axis=0)  # (d_head, d_model) each
    if cross_heads:
        q_lat = [w_q @ w_uk.T] * num_heads
        o_lat = [w_uv @ w_o] * num_heads
    else:
        q_lat = [q_h @ (uk_h.T if uk_transposed else uk_h) for q_h, uk_h in zip(q_heads, uk_heads)]
        o_lat = [uv_h @ o_h for uv_h, o_h in zip(uv_heads, o_heads)]
    if q_latent_transposed:
        q_lat = [m.T for m in q_lat]
    if o_latent_transposed:
        o_lat = [m.T for m in o_lat]
    if scale_folded:
        q_lat = [m / math.sqrt(d_head) for m in q_lat]
    w_q_latent = torch.stack(q_lat, dim=heads_axis)
    w_o_latent = torch.stack(o_lat, dim=heads_axis)
    return (w_o_latent, w_q_latent) if swapped else (w_q_latent, w_o_latent)




def _needs_causal(fn, **change):
    """Like :func:`_model`, for a mask slip that only shows on causal cases."""
    def compute(case):
        if not case.kwargs.get("causal", True):
            raise ValueError("this mistake needs a causal case")
        return torch_model(fn, **change)(case)
    return compute


# -- mla_attention -----------------------------------------------------------------------------

def mla_inputs(rng, batch, n, d_model, num_heads, d_head, d_c):
    """x (B, N, d_model) and the five weights, scaled so every projection is about unit size."""
    width = num_heads * d_head
    x = rng.normal(size=(batch, n, d_model))
    w_dkv = rng.normal(size=(d_model, d_c)) / np.sqrt(d_model)
    w_uk = rng.normal(size=(d_c, width)) / np.sqrt(d_c)
    w_uv = rng.normal(size=(d_c, width)) / np.sqrt(d_c)
    w_q = rng.normal(size=(d_model, width)) / np.sqrt(d_model)
    w_o = rng.normal(size=(width, d_model)) / np.sqrt(width)
    return (x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads)


class MLAAttention(TorchExercise):
    name = "mla_attention"
    axes = {  # the case's sizes by name (diagnoses)
        "x": "B N d_model",
        "w_dkv": "d_model d_c",
        "w_uk": "d_c H*d_head",
        "w_uv": "d_c H*d_head",
        "w_q": "d_model H*d_head",
        "w_o": "H*d_head d_model",
    }
    assignment = "10-mla"
    answer_key_names = ("attend", "tiled_attention", "flash_attention",
                        "grouped_query_attention", "absorbed_mla_attention",
                        "mla_rope_attention", "mla_rope_decode")

    def visible_cases(self, rng):
        return [
            TorchCase("4 heads of 8 (width 32 != d_model 24), latent 12, causal",
                      mla_inputs(rng, 1, 6, 24, 4, 8, 12)),
            TorchCase("batch 2, 3 heads of 4, latent 10, causal=False",
                      mla_inputs(rng, 2, 5, 16, 3, 4, 10), {"causal": False}),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("8 heads of 4, latent 16, causal=True given", mla_inputs(rng, 1, 9, 32, 8, 4,
                                                                                16),
                      {"causal": True}),
            TorchCase("one head (d_head 6), latent 5", mla_inputs(rng, 2, 7, 12, 1, 6, 5)),
            TorchCase("latent wider than d_model (d_c 20 > 16)",
                      mla_inputs(rng, 1, 8, 16, 2, 8, 20)),
            TorchCase("float64, 4 heads of 6", mla_inputs(rng, 1, 7, 20, 4, 6, 9),
                      dtype="float64"),
            TorchCase("float16, 4 heads of 8", mla_inputs(rng, 1, 6, 32, 4, 8, 16),
                      dtype="float16"),
            TorchCase("bfloat16, causal=False", mla_inputs(rng, 1, 5, 16, 2, 8, 8),
                      {"causal": False}, dtype="bfloat16"),
            TorchCase("a single token", mla_inputs(rng, 2, 1, 16, 4, 4, 8), degenerate=True),
            # fewer tokens than a head is wide: the weights can be read back from the output
            TorchCase("float64, 2 heads of 8 (width 16 < d_model 32), latent 12, 6 tokens",
                      mla_inputs(rng, 1, 6, 32, 2, 8, 12), dtype="float64"),
        ]

    def mistakes(self):
        return [
            WrongAnswer("scale_d_c", "the scores were divided by sqrt(d_c). The latent's width "
                        "is not the length of the dot product: each head compares a query and a "
                        "key of d_head = w_q.shape[1] // num_heads numbers, so divide by "
                        "sqrt(d_head).", torch_model(mla_variant, scale="d_c")),
            WrongAnswer("scale_d_model", "the scores were divided by sqrt(d_model); here "
                        "num_heads * d_head need not equal d_model, and each head's dot product "
                        "has d_head = w_q.shape[1] // num_heads terms: divide by sqrt(d_head).",
                        torch_model(mla_variant, scale="d_model")),
            WrongAnswer("no_scale", NO_HEAD_SCALE,
                        torch_model(mla_variant, scale="none")),
            WrongAnswer("strided_heads", "head h took every num_heads-th column (h, h + H, ...): "
                        "head h owns the contiguous columns h*d_head:(h+1)*d_head of w_q, w_uk "
                        "and w_uv. Reshape to (B, N, num_heads, d_head), then transpose(1, 2).",
                        torch_model(mla_variant, strided=True)),
            WrongAnswer("split_without_transpose", "the heads were split with a reshape to (B, H, "
                        "N, d_head) and merged back with a reshape, both without a transpose, "
                        "which mixes positions and heads: to split, reshape to (B, N, H, d_head) "
                        "and transpose(1, 2); to merge, transpose(1, 2) back before the "
                        "reshape.",
                        torch_model(mla_variant, split_without_transpose=True)),
            WrongAnswer("causal_ignored", "causal=True (the default here) was ignored: every "
                        "token sees the future. Mask key j for query i when j > i.",
                        _needs_causal(mla_variant, mask="none")),
            WrongAnswer("always_causal", "the causal mask is applied even with causal=False.",
                        torch_model(mla_variant, mask="always")),
            WrongAnswer("causal_excludes_self", "the causal mask is off by one: each token must "
                        "see itself too (j <= i, not j < i).",
                        _needs_causal(mla_variant, mask="strict")),
            WrongAnswer("values_from_w_uk", "the values were made with w_uk: keys are c @ w_uk, "
                        "values c @ w_uv (the same latent, two different up-projections).",
                        torch_model(mla_variant, value_weight="w_uk")),
            WrongAnswer("swapped_up_projections", "keys and values swapped their up-projections: "
                        "keys are c @ w_uk, values c @ w_uv.",
                        torch_model(mla_variant, key_weight="w_uv", value_weight="w_uk")),
            WrongAnswer("softmax_over_queries", "the softmax ran over the queries (dim -2): each "
                        "query's weights over the keys must sum to 1, so normalise along the last "
                        "axis.", torch_model(mla_variant, softmax_dim=-2)),
            WrongAnswer("no_output_projection", "the merged heads were returned without the output "
                        "projection w_o (the result must be (B, N, d_model)).",
                        torch_model(mla_variant, output_projection=False)),
        ]


# -- absorb_mla_weights ------------------------------------------------------------------------

def absorb_inputs(rng, d_model, num_heads, d_head, d_c):
    """w_uk, w_uv (d_c, H*d_head), w_q (d_model, H*d_head), w_o (H*d_head, d_model), num_heads."""
    x, _w_dkv, w_uk, w_uv, w_q, w_o, heads = mla_inputs(rng, 1, 1, d_model, num_heads, d_head,
                                                         d_c)
    del x
    return (w_uk, w_uv, w_q, w_o, heads)


class AbsorbMLAWeights(TorchExercise):
    name = "absorb_mla_weights"
    axes = {  # the case's sizes by name (diagnoses)
        "w_uk": "d_c H*d_head",
        "w_uv": "d_c H*d_head",
        "w_q": "d_model H*d_head",
        "w_o": "H*d_head d_model",
    }
    assignment = "10-mla"
    answer_key_names = ("mla_rope_decode",)

    def visible_cases(self, rng):
        return [
            TorchCase("4 heads of 6, d_model 20, latent 9", absorb_inputs(rng, 20, 4, 6, 9)),
            TorchCase("2 heads of 8, latent 8 (d_c == d_head)", absorb_inputs(rng, 12, 2, 8, 8)),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("8 heads of 4, d_model 24, latent 16", absorb_inputs(rng, 24, 8, 4, 16)),
            TorchCase("one head", absorb_inputs(rng, 10, 1, 5, 7)),
            TorchCase("3 heads of 5, latent 5 (d_c == d_head)", absorb_inputs(rng, 14, 3, 5, 5)),
            TorchCase("float64, latent wider than d_model", absorb_inputs(rng, 8, 2, 6, 11),
                      dtype="float64"),
            TorchCase("float16, 4 heads of 8", absorb_inputs(rng, 16, 4, 8, 12), dtype="float16"),
            TorchCase("bfloat16, 2 heads of 4", absorb_inputs(rng, 12, 2, 4, 6), dtype="bfloat16"),
        ]

    def call(self, func, case):
        args, kwargs = case_tensors(case)
        with one_thread():
            output = func(*args, **kwargs)
        return output, {"output_kind": _pair_kind(output)}

    def judge_case(self, case, received, meta):
        kind = meta.get("output_kind", "tensor pair")
        if kind != "tensor pair":
            return (f"output: returned {kind}; return a tuple of two torch.Tensors "
                    "(w_q_latent, w_o_latent), keeping the computation in torch")
        return difference(self.expected_once(case), received, *self.tolerance(case))

    def mistakes(self):
        return [
            WrongAnswer("w_uk_not_transposed", "w_uk_h was used without its transpose: the scores "
                        "are q_h . k_h = (x @ w_q_h) @ (c @ w_uk_h).T = x @ (w_q_h @ w_uk_h.T) @ "
                        "c.T, so w_q_latent[h] = w_q_h @ w_uk_h.T (this only ran because d_c "
                        "happens to equal d_head here).",
                        torch_model(absorb_variant, uk_transposed=False)),
            WrongAnswer("q_latent_transposed", "w_q_latent[h] came out (d_c, d_model), the "
                        "transpose of what is needed: the query of head h over the latents is x "
                        "@ w_q_latent[h], so w_q_latent[h] = w_q_h @ w_uk_h.T, of shape (d_model, "
                        "d_c).", torch_model(absorb_variant, q_latent_transposed=True)),
            WrongAnswer("o_latent_transposed", "w_o_latent[h] came out (d_model, d_c), the factors "
                        "multiplied in the wrong order: the output of head h is (weights @ c) @ "
                        "w_uv_h @ w_o_h, so w_o_latent[h] = w_uv_h @ w_o_h, of shape (d_c, "
                        "d_model).", torch_model(absorb_variant, o_latent_transposed=True)),
            WrongAnswer("outputs_swapped", "the two matrices were returned in the wrong order: "
                        "return (w_q_latent, w_o_latent).",
                        torch_model(absorb_variant, swapped=True)),
            WrongAnswer("strided_heads", "head h took every num_heads-th column (h, h + H, ...) "
                        "of w_q, w_uk, w_uv (and rows of w_o): head h owns the contiguous block "
                        "h*d_head:(h+1)*d_head.", torch_model(absorb_variant, strided=True)),
            WrongAnswer("cross_head_sum", "every head got the whole product w_q @ w_uk.T (and w_uv "
                        "@ w_o). That product is the sum over heads of w_q_h @ w_uk_h.T: every "
                        "head would score with the sum of all heads' scores, and the heads' "
                        "different attention patterns collapse into one. Absorb head by head: "
                        "w_q_h @ w_uk_h.T with the d_head-wide slices of the same head.",
                        torch_model(absorb_variant, cross_heads=True)),
            WrongAnswer("scale_folded_in", "w_q_latent was divided by sqrt(d_head): the contract "
                        "keeps the scale outside, scores = (x @ w_q_latent[h]) @ c.T / "
                        "sqrt(d_head). Return the plain products.",
                        torch_model(absorb_variant, scale_folded=True)),
            WrongAnswer("heads_not_first", "the head axis is not the first one: stack the heads "
                        "on dim 0 so that w_q_latent is (num_heads, d_model, d_c) and w_o_latent "
                        "(num_heads, d_c, d_model).", torch_model(absorb_variant, heads_axis=1)),
        ]


def _pair_kind(output) -> str:
    """"tensor pair" for a tuple of two tensors, else a description of what came back."""
    import torch

    if isinstance(output, (tuple, list)):
        kinds = ", ".join("Tensor" if torch.is_tensor(o) else type(o).__name__ for o in output)
        if isinstance(output, tuple) and len(output) == 2 and kinds == "Tensor, Tensor":
            return "tensor pair"
        return f"a {type(output).__name__} of ({kinds})"
    return f"a {output_kind(output)}"


EXERCISES = {e.name: e for e in (MLAKVCacheBytes(), MLAAttention(), AbsorbMLAWeights())}
