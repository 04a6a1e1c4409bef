"""Checkers for lesson 07: ``merge_attention_states`` and ``online_softmax_attention`` (torch).

``merge_attention_states`` is judged on both returned tensors (the merged output and the
merged log-sum-exp): rows of lse near +-1e4, rows where one set or both sets are empty.

``online_softmax_attention`` is judged on its output, on its memory and on its independence of
``block_size``. The probe records the largest tensor any op allocated while it ran: exact
attention that materialises the (N_q, N_k) scores, even one block at a time glued back
together, allocates B * H * N_q * N_k elements at once; the online softmax never needs more
than B * H * N_q * max(block_size, d). It runs under :func:`mhalib.checks.work.torch_only`, so
the scores cannot be built in numpy where the watch would not see them. And it calls the
function a second time with all the keys in one block, where the case splits them into several:
exact attention does not depend on how the keys are split, and a function that is right with
one block but not with several combines its blocks wrongly (the rescale by
exp(old_max - new_max)).
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.attention_variants import online_softmax_variant
from mhalib.checks.compare import difference
from mhalib.checks.encoding import EncodingError, decode
from mhalib.checks.exercise import Symptom, WrongAnswer
from mhalib.checks.physical import PhysicalCheck, attention_rows
from mhalib.checks.torch_exercise import (
    MeasuredExercise,
    TorchCase,
    TorchExercise,
    case_tensors,
    one_thread,
    output_kind,
    torch_model,
)
from mhalib.checks.work import LeftTorch, largest_new_tensor

# the memory check applies when the keys span at least this many blocks (and head widths)
MIN_BLOCKS_FOR_MEMORY_CHECK = 4


# -- merge_attention_states ------------------------------------------------------------------

def partial_states(rng, lead, n_q, d_v, *, spread=3.0, offsets=0.0, empty_a=(), empty_b=()):
    """(out_a, lse_a, out_b, lse_b) for ``lead + (n_q, d_v)`` outputs: normalised outputs are
    convex combinations of values, here about unit size; lse = offset (per query, or one for
    all) + spread * N(0, 1). Queries in ``empty_a`` / ``empty_b`` see no key of that set:
    lse -inf and a zero output row."""
    shape = tuple(lead) + (n_q,)
    states = []
    for empty in (empty_a, empty_b):
        out = rng.normal(size=shape + (d_v,))
        lse = np.asarray(offsets, dtype=float) + spread * rng.normal(size=shape)
        rows = list(empty)
        lse[..., rows] = -np.inf
        out[..., rows, :] = 0.0
        states += [out, lse]
    return tuple(states)


def _both_empty_rows(case):
    """Bool (..., N_q): rows where neither set has a key."""
    return np.isneginf(case.args[1]) & np.isneginf(case.args[3])


def _merge_torch(out_a, lse_a, out_b, lse_b, *, shift=True, normalise=True, guard=True):
    """The merge with knobs, in torch: ``shift`` subtracts the larger lse before exp;
    ``normalise`` divides by the total weight; ``guard`` keeps rows with both sets empty
    from 0 / 0."""
    import torch

    if shift:
        top = torch.maximum(lse_a, lse_b)
        if guard:
            top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    else:
        top = torch.zeros_like(lse_a)
    w_a, w_b = torch.exp(lse_a - top), torch.exp(lse_b - top)
    total = w_a + w_b
    lse = top + torch.log(total)
    if normalise:
        denominator = torch.where(total == 0, torch.ones_like(total), total) if guard else total
        w_a, w_b = w_a / denominator, w_b / denominator
    return w_a, w_b, lse


def _merge_variant(change):
    """A mistake model: ``change(out_a, lse_a, out_b, lse_b) -> (out, lse)`` in float64."""
    return torch_model(change)


def _right_merge(out_a, lse_a, out_b, lse_b):
    w_a, w_b, lse = _merge_torch(out_a, lse_a, out_b, lse_b)
    return w_a[..., None] * out_a + w_b[..., None] * out_b, lse


def _no_max_shift(out_a, lse_a, out_b, lse_b):
    w_a, w_b, lse = _merge_torch(out_a, lse_a, out_b, lse_b, shift=False, guard=False)
    return w_a[..., None] * out_a + w_b[..., None] * out_b, lse


def _unnormalised(out_a, lse_a, out_b, lse_b):
    w_a, w_b, lse = _merge_torch(out_a, lse_a, out_b, lse_b, normalise=False)
    return w_a[..., None] * out_a + w_b[..., None] * out_b, lse


def _averaged(out_a, lse_a, out_b, lse_b):
    return (out_a + out_b) / 2, _right_merge(out_a, lse_a, out_b, lse_b)[1]


def _max_as_lse(out_a, lse_a, out_b, lse_b):
    import torch

    return _right_merge(out_a, lse_a, out_b, lse_b)[0], torch.maximum(lse_a, lse_b)


def _sum_as_lse(out_a, lse_a, out_b, lse_b):
    return _right_merge(out_a, lse_a, out_b, lse_b)[0], lse_a + lse_b


def _as_unnormalised_sums(out_a, lse_a, out_b, lse_b):
    import torch

    lse = _right_merge(out_a, lse_a, out_b, lse_b)[1]
    return (out_a + out_b) * torch.exp(-lse)[..., None], lse


def _swapped_weights(out_a, lse_a, out_b, lse_b):
    w_a, w_b, lse = _merge_torch(out_a, lse_a, out_b, lse_b)
    return w_b[..., None] * out_a + w_a[..., None] * out_b, lse


def _weights_on_feature_axis(out_a, lse_a, out_b, lse_b):
    """(..., N_q) weights times (..., N_q, d_v) outputs with no trailing axis: torch aligns the
    last axes, so N_q meets d_v (an error unless the shapes happen to broadcast)."""
    w_a, w_b, lse = _merge_torch(out_a, lse_a, out_b, lse_b)
    return w_a * out_a + w_b * out_b, lse


def _lse_first(out_a, lse_a, out_b, lse_b):
    out, lse = _right_merge(out_a, lse_a, out_b, lse_b)
    return lse, out


class MergeAttentionStates(TorchExercise):
    name = "merge_attention_states"
    assignment = "07-flash"
    answer_key_names = ("tiled_attention", "flash_attention", "attend")
    keeps_dtype = True  # the lesson: out in out_a's dtype, lse in lse_a's

    def visible_cases(self, rng):
        return [
            TorchCase("batch 2, 3 heads, 5 queries, d_v 8: lse of a few units",
                      partial_states(rng, (2, 3), 5, 8)),
            TorchCase("lse of about +1e4 and -1e4; rows where A, B or both are empty",
                      partial_states(rng, (1, 2), 6, 6, spread=40.0,
                                     offsets=[1e4, -1e4, 1e4, 1e4, -1e4, 0.0],
                                     empty_a=(2, 5), empty_b=(3, 5))),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("no batch or head axes: (N_q, d_v) outputs and (N_q,) lse",
                      partial_states(rng, (), 7, 3)),
            TorchCase("float64, lse of about 50", partial_states(rng, (2,), 4, 5, offsets=50.0),
                      dtype="float64"),
            TorchCase("lse of about 1e4 in every row", partial_states(rng, (2,), 5, 3,
                                                                      spread=30.0, offsets=1e4)),
            TorchCase("lse of about -1e4 (tiny sums), one row with A empty",
                      partial_states(rng, (3,), 4, 2, spread=30.0, offsets=-1e4, empty_a=(1,))),
            TorchCase("set A empty for every query", partial_states(rng, (2, 2), 3, 4,
                                                                    empty_a=(0, 1, 2))),
            TorchCase("float16", partial_states(rng, (1, 2), 5, 8, spread=2.0),
                      dtype="float16"),
            TorchCase("bfloat16, one row with B empty",
                      partial_states(rng, (2, 1), 4, 4, spread=2.0, empty_b=(0,)),
                      dtype="bfloat16"),
            TorchCase("both sets empty in every row",
                      partial_states(rng, (2,), 3, 4, empty_a=(0, 1, 2), empty_b=(0, 1, 2)),
                      degenerate=True),
            TorchCase("equal lse on both sides", _equal_lse(partial_states(rng, (1, 2), 4, 6)),
                      degenerate=True),
            # float64, both sets present: the shares can be read back from the output
            TorchCase("float64, 2 heads, 4 queries, d_v 6, lse of a few units",
                      partial_states(rng, (1, 2), 4, 6), dtype="float64"),
        ]

    def call(self, func, case):
        args, kwargs = case_tensors(case)
        with one_thread():
            output = func(*args, **kwargs)
        return output, self.with_dtypes(output, {"output_kind": _pair_kind(output)})

    def judge_case(self, case, received, meta):
        kind = meta.get("output_kind", "pair")
        if kind != "pair":
            return (f"output: returned {kind}; return the pair (out, lse), two torch.Tensors "
                    "(out like out_a, lse like lse_a)")
        return difference(self.expected_once(case), received, *self.tolerance(case)) or \
            self.dtype_problem(case, meta)

    def _nan_only_where_both_empty(self, case, received) -> bool:
        """NaN in the rows where both sets are empty, and the right values everywhere else."""
        out, lse = received
        empty = _both_empty_rows(case)
        if not empty.any() or out.shape[:-1] != empty.shape:
            return False
        nan_rows = np.isnan(out).any(axis=-1) | np.isnan(lse)
        if not (nan_rows == empty).all():
            return False
        want_out, want_lse = self.expected_once(case)
        tolerance = self.tolerance(case)
        return (difference(want_out[~empty], out[~empty], *tolerance) is None
                and difference(want_lse[~empty], lse[~empty], *tolerance) is None)

    def mistakes(self):
        return [
            WrongAnswer("no_max_shift", "exp(lse) overflows (lse of 1e4 gives inf, and inf / "
                        "inf is NaN) or underflows to 0 / 0: subtract the larger lse first, "
                        "w_a = exp(lse_a - m), w_b = exp(lse_b - m) with m = max(lse_a, lse_b), "
                        "so the larger weight is exactly 1.", _merge_variant(_no_max_shift)),
            WrongAnswer("weights_not_normalised", "the weights exp(lse_a - m) and exp(lse_b - m) "
                        "were used as they are: divide each by their sum, so that "
                        "w_a + w_b = 1 (w_a = exp(lse_a - lse) with the merged lse).",
                        _merge_variant(_unnormalised)),
            WrongAnswer("averaged_outputs", "the two outputs were averaged: each set counts in "
                        "proportion to its total weight e^lse, so weight out_a by "
                        "exp(lse_a - lse) and out_b by exp(lse_b - lse).",
                        _merge_variant(_averaged)),
            WrongAnswer("lse_is_max", "the returned lse is max(lse_a, lse_b), the shift, not the "
                        "log-sum-exp: add log(exp(lse_a - m) + exp(lse_b - m)) to it "
                        "(torch.logaddexp(lse_a, lse_b)).", _merge_variant(_max_as_lse)),
            WrongAnswer("lse_added", "the returned lse is lse_a + lse_b, the log of the product "
                        "of the two sums: the merged sum is e^lse_a + e^lse_b, so lse = "
                        "log(e^lse_a + e^lse_b) (torch.logaddexp).", _merge_variant(_sum_as_lse)),
            WrongAnswer("outputs_taken_as_unnormalised", "out_a and out_b were treated as "
                        "unnormalised sums (added, then divided by the total e^lse), but they "
                        "are already normalised: out_a = sum_A e^s v / e^lse_a. Multiply each "
                        "back by its share, exp(lse_a - lse) and exp(lse_b - lse), and add.",
                        _merge_variant(_as_unnormalised_sums)),
            WrongAnswer("swapped_weights", "out_a got B's weight and out_b got A's: out_a must be "
                        "weighted by exp(lse_a - lse) and out_b by exp(lse_b - lse).",
                        _merge_variant(_swapped_weights)),
            WrongAnswer("weights_on_feature_axis", "the (..., N_q) weights were multiplied into "
                        "the (..., N_q, d_v) outputs without a trailing axis, so they scale the "
                        "features instead of the rows: use w_a[..., None] * out_a.",
                        _merge_variant(_weights_on_feature_axis)),
            WrongAnswer("returns_lse_first", "the pair came back as (lse, out): return "
                        "(out, lse).", _merge_variant(_lse_first)),
            Symptom("nan_for_empty_rows", "rows where both sets are empty (lse_a = lse_b = -inf) "
                    "came out NaN: any difference of two -inf log-sum-exps is -inf - (-inf) = "
                    "NaN, whether it is a shift by max(lse_a, lse_b), lse_a - lse_b inside a "
                    "sigmoid, or a softmax over the pair; or the shift is guarded but the "
                    "division by the row's sum of weights, 0 there, is not (0 / 0). Such a row "
                    "needs a guard: it gets out = 0 and lse = -inf (shift by 0 where the max "
                    "is -inf, and divide only where the sum of weights is above 0).",
                    lambda case, received, meta: self._nan_only_where_both_empty(case,
                                                                                 received)),
        ]


def _equal_lse(states):
    out_a, lse_a, out_b, _ = states
    return out_a, lse_a, out_b, lse_a.copy()


def _pair_kind(output) -> str:
    """'pair' for a tuple or list of two tensors, else what it is (recorded in meta)."""
    if isinstance(output, (tuple, list)):
        kinds = [output_kind(o) for o in output]
        if len(kinds) == 2 and kinds == ["tensor", "tensor"]:
            return "pair"
        return f"a {type(output).__name__} of {len(kinds)} ({', '.join(kinds)})"
    kind = output_kind(output)
    return "one tensor" if kind == "tensor" else f"a {kind}"


# -- online_softmax_attention ----------------------------------------------------------------

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


def alternative_block_size(case) -> int | None:
    """The block size of the probe's second call: all the keys in one block, where the case
    splits them into several; None (no second call) where the case has one block already, so
    that a single-block case stays one that any loop passes (it is marked degenerate)."""
    n_k = case.args[1].shape[2]
    block = case.kwargs.get("block_size", 64)
    return n_k if block < n_k else None


def builds_full_scores(case, meta: dict) -> bool:
    """The probe measured a tensor as large as the whole (B, H, N_q, N_k) score matrix."""
    limit, numel = memory_limit(case), meta.get("largest_numel")
    return limit is not None and isinstance(numel, int) and numel >= limit


def _physical_inputs(rng):
    return TorchCase(PHYSICAL_LABEL, qkv(rng, 1, 1, PHYSICAL_N, PHYSICAL_N, 4),
                     {"block_size": 64}, dtype="float64")


def _physical_rows(case, rows):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in case.args)
    return attention_rows(q[..., rows, :], k, v)


# The large case: its (N, N) float64 scores take 128 MiB (float32: 64 MiB), and the kernel
# refuses the process more than twice PHYSICAL_MB of new address space; blocks of 64 keys need
# about 2 MiB each (honest answers peak at 9 to 12 MiB). At 64 MiB, float32 scores for all but
# the last 512 queries (57 MiB) passed: the limit is half the float32 scores.
PHYSICAL_N = 4096
PHYSICAL_MB = 32
PHYSICAL_LABEL = f"N = {PHYSICAL_N} queries and keys, d = 4, blocks of 64, float64"


class OnlineSoftmaxAttention(MeasuredExercise):
    name = "online_softmax_attention"
    assignment = "07-flash"
    answer_key_names = ("tiled_attention", "flash_attention", "attend")
    keeps_dtype = True  # the lesson: "return q's dtype"
    encoded_meta = ("alt_output",)
    physical = PhysicalCheck(
        PHYSICAL_LABEL, _physical_inputs, lambda case: case.args[0].shape, _physical_rows,
        memory_mb=PHYSICAL_MB, cpu_seconds=20.0, memory_mistake="builds_full_scores")

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
            # few keys, wide values: the weights can be read back from the output
            TorchCase("float64, 5 queries over 7 keys, causal, blocks of 3",
                      qkv(rng, 1, 2, 5, 7, 8), {"block_size": 3, "causal": True},
                      dtype="float64"),
        ]

    def measure(self, func, case, args, kwargs):
        alt = alternative_block_size(case)
        output, numel, shape = largest_new_tensor(func, *args, **kwargs)
        meta = {"output_kind": output_kind(output), "largest_numel": numel,
                "largest_shape": shape}
        other = None
        if alt is not None:
            meta["alt_block_size"] = alt
            try:
                other = func(*args, **{**kwargs, "block_size": alt})
            except LeftTorch:
                raise
            except Exception:  # judged on the case's own block size only
                other = None
            meta["alt_output"] = other  # encoded by ``call`` (a tensor, or dropped)
        return output, meta

    def work_problem(self, case, received, meta):
        if builds_full_scores(case, meta):
            limit, numel = memory_limit(case), meta.get("largest_numel")
            return (f"right output, but it allocated a tensor of shape "
                    f"{tuple(meta.get('largest_shape') or ())} ({numel:,} elements), as big as "
                    f"the whole (B, H, N_q, N_k) score matrix ({limit:,})")
        other = self._alt_problem(case, meta)
        if other is not None:
            return (f"right with block_size={case.kwargs.get('block_size', 64)}, but with "
                    f"block_size={meta.get('alt_block_size')} {other}: exact attention "
                    "does not depend on how the keys are split into blocks")
        return None

    def _alt_problem(self, case, meta) -> str | None:
        """How the output of the second call (another block size) differs from the right one;
        None when it is right or was not recorded."""
        if "alt_output" not in meta:
            return None
        try:
            other = decode(meta["alt_output"])
        except EncodingError:
            return None
        problem = difference(self.expected_once(case), other, *self.tolerance(case))
        return problem and problem.replace("output: ", "", 1)

    def _alt_right(self, case, meta) -> bool:
        return "alt_output" in meta and self._alt_problem(case, meta) is None

    def mistakes(self):
        def variant(**change):
            return torch_model(online_softmax_variant, **change)

        return [
            self.leaves_torch("the function took tensors out of torch (.numpy(), np.asarray, "
                              ".tolist() or .item()). Its memory is checked by watching the "
                              "tensors torch allocates, and an N x N score matrix built in numpy "
                              "could not be seen: keep every block in torch."),
            Symptom("builds_full_scores", "the result is right, but somewhere a tensor as large as "
                    "the whole N_q x N_k score matrix was built (all scores at once, or the blocks "
                    "concatenated). Keep only one block of scores, a running max, a running sum "
                    "and the running output.",
                    lambda case, received, meta: (builds_full_scores(case, meta)
                                                  and self.right(case, received))),
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
            WrongAnswer("nan_for_empty_rows", "a query that sees no key gives NaN: 0 / 0, or "
                        "exp(-inf - (-inf)) from a running max still at -inf; the contract wants "
                        "a row of zeros (shift by 0 where the max is -inf, and guard the "
                        "division).", variant(nan_empty_rows=True)),
            WrongAnswer("finite_fill_for_hidden_keys", "a query that sees no key got the average "
                        "of all the values instead of a zero row: the hidden keys' scores were a "
                        "finite number (a fill like -1e4 or torch.finfo(dtype).min, or -inf made "
                        "finite by nan_to_num), so a row whose keys are all hidden has equal "
                        "scores everywhere. Hide keys with -inf and give such rows zeros (shift "
                        "by 0 where the running max is -inf, and guard the division).",
                        variant(finite_fill=True)),
            # after the models above: where one of them explains a case too, it is named
            Symptom("blocks_combined_wrongly", "with all the keys in one block the output is "
                    "right, but split into blocks it is not, so the blocks are combined wrongly. "
                    "Each step must hold: a block's exponentials are taken against the new "
                    "running max (not the block's own max), the running sum and the running "
                    "output are both rescaled by exp(old_max - new_max) when a block raises the "
                    "max, no block is normalised on its own, and the division by the running sum "
                    "comes once, after the last block: check which of these your loop breaks.",
                    lambda case, received, meta: (not self.right(case, received)
                                                  and self._alt_right(case, meta)), vague=True),
            Symptom("depends_on_block_size", "the output changes with block_size (right with the "
                    "keys split into blocks, wrong with all of them in one block): exact attention "
                    "does not depend on how the keys are split. Look at what your loop does when "
                    "there is a single block (the first block starts from m = -inf, l = 0, "
                    "acc = 0, and the last one may be the first).",
                    lambda case, received, meta: (self.right(case, received)
                                                  and self._alt_problem(case, meta) is not None)),
        ]


EXERCISES = {e.name: e for e in (MergeAttentionStates(), OnlineSoftmaxAttention())}
