"""Checker for lesson 12's ``flash_attention_backward``: the blocked backward of FlashAttention-2.

Judged on its three gradients, on its work and on its independence of ``block_size``. The
measured call (:meth:`FlashAttentionBackward.call`) runs the learner's function under four
watches at once:

- :func:`mhalib.checks.autograd_watch.watch_autograd`: no torch.autograd, and nothing that
  switches the watches off;
- :func:`mhalib.checks.work.torch_only`: the tensors stay in torch, where the next two see them;
- a ``TensorWatch``: the largest tensor any op allocated. A backward that builds the
  (B, H, N, N) probabilities, even glued from blocks, allocates B H N^2 elements at once; the
  blocked one needs at most B H N block_size. The autograd watch's mode adds the largest
  storage any op wrote into, so a buffer grown in place or made before the call counts too;
- a ``ProductWatch``: the FLOPs of its matrix products. One recomputation of the scores is
  10 N^2 d per head (five products per block); recomputing ``out`` for delta, or the scores
  twice (a first pass for delta = rowsum(grad_p * p), a second for the gradients), is 12 or 14
  N^2 d and fails.

Then it calls the function again with all the keys in one block: exact gradients do not depend
on how the keys are split, and a function right with one block but not with several combines
its blocks wrongly (grad_q overwritten, delta per block, p normalised inside each block).
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.autograd_watch import watch_autograd
from mhalib.checks.backward_common import GradientExercise, WrongAnswerEither, flash_inputs
from mhalib.checks.compare import difference
from mhalib.checks.encoding import EncodingError, decode, encode, to_plain
from mhalib.checks.exercise import Symptom, WrongAnswer
from mhalib.checks.physical import PhysicalCheck
from mhalib.checks.torch_exercise import (
    TorchCase,
    as_numpy,
    case_tensors,
    exact_inputs,
    one_thread,
)
from mhalib.checks.work import LeftTorch, torch_only, watch_products, watch_tensors

# the memory check applies when the keys span at least this many blocks (and head widths)
MIN_BLOCKS_FOR_MEMORY_CHECK = 4
# products of one recomputation (10 N^2 d per head), with room for lower-order terms; a
# second pass over the scores or a recomputed out adds at least 2 N^2 d
PRODUCTS_PER_PAIR = 10
FLOP_SLACK_PER_PAIR = 1


def memory_limit(case) -> int | None:
    """Elements of one (B, H, N, N) tensor, or None when the case is too small to tell."""
    batch, heads, n, d = case.args[0].shape
    block = case.kwargs.get("block_size", 64)
    if n < MIN_BLOCKS_FOR_MEMORY_CHECK * max(block, d):
        return None
    return batch * heads * n * n


def flop_limit(case) -> int:
    """Most matrix-product FLOPs a right answer may spend: one recomputation (10 N^2 d per
    head) plus N^2 d of slack for lower-order terms."""
    batch, heads, n, d = case.args[0].shape
    return (PRODUCTS_PER_PAIR + FLOP_SLACK_PER_PAIR) * batch * heads * n * n * d


def alternative_block_size(case) -> int | None:
    """The block size of the second call: all keys in one block, where the case has several."""
    n = case.args[0].shape[2]
    block = case.kwargs.get("block_size", 64)
    return n if block < n else None


def largest_tensor(meta: dict) -> int | None:
    """Elements of the largest tensor the call allocated or wrote into (a buffer grown in
    place or made before the call counts too)."""
    sizes = [meta.get(key) for key in ("largest_numel", "largest_written")]
    sizes = [size for size in sizes if isinstance(size, int) and not isinstance(size, bool)]
    return max(sizes) if sizes else None


def builds_full_scores(case, meta: dict) -> bool:
    limit, numel = memory_limit(case), largest_tensor(meta)
    return limit is not None and numel is not None and numel >= limit


def too_many_products(case, meta: dict) -> bool:
    flops = meta.get("flops")
    return isinstance(flops, int) and flops > flop_limit(case)


def _physical_inputs(rng):
    # the forward that gives out and lse runs 64 queries at a time: it is built inside the
    # measured window (after the seed), so it must stay far below the memory limit itself
    return TorchCase(PHYSICAL_LABEL, flash_inputs(rng, 1, 1, PHYSICAL_N, 4, block=64),
                     {"block_size": 64}, dtype="float64")


def _physical_shapes(case):
    q, k, v = case.args[:3]
    return (q.shape, k.shape, v.shape)


def _physical_rows(case, rows):
    """(grad_q, grad_k, grad_v) at the chosen query rows (grad_q) and key rows (grad_k,
    grad_v), from the exact probabilities p = exp(s - lse): N x len(rows) work, no N x N."""
    q, k, v, out, lse, grad_out = (np.asarray(a, dtype=np.float64) for a in case.args[:6])
    scale = 1.0 / np.sqrt(q.shape[-1])
    delta = (grad_out * out).sum(axis=-1)  # (B, H, N)

    def grad_scores(p, grad_p, delta_rows):
        return p * (grad_p - delta_rows)

    p_rows = np.exp(q[..., rows, :] @ np.swapaxes(k, -1, -2) * scale - lse[..., rows, None])
    grad_s_rows = grad_scores(p_rows, grad_out[..., rows, :] @ np.swapaxes(v, -1, -2),
                              delta[..., rows, None])  # (B, H, R, N)
    grad_q = grad_s_rows @ k * scale
    p_cols = np.exp(q @ np.swapaxes(k[..., rows, :], -1, -2) * scale - lse[..., None])
    grad_s_cols = grad_scores(p_cols, grad_out @ np.swapaxes(v[..., rows, :], -1, -2),
                              delta[..., None])  # (B, H, N, R)
    grad_k = np.swapaxes(grad_s_cols, -1, -2) @ q * scale
    grad_v = np.swapaxes(p_cols, -1, -2) @ grad_out
    return grad_q, grad_k, grad_v


# The large case: its (N, N) float64 probabilities take 128 MiB (float32: 64 MiB), and the
# kernel refuses the process more than twice the memory limit of new address space; blocks of 64
# keys need a few MiB (the instructor's answer peaks at 12 MiB). The limit is half the float32
# probabilities, so most of them at once in float32 do not pass either.
PHYSICAL_N = 4096
PHYSICAL_LABEL = f"N = {PHYSICAL_N} queries and keys, d = 4, blocks of 64, float64"


# (index, name, why) of a gradient that alone is wrong once the keys are split into blocks
_ONE_GRADIENT_OFF = (
    (0, "grad_q", "grad_q of a block of queries adds up over every block of keys (grad_q += "
                  "grad_s_blk @ k_blk * scale): an = where += belongs keeps only the last key "
                  "block's share; a mean over the blocks, or a share scaled or taken from the "
                  "wrong keys, counts it wrongly."),
    (1, "grad_k", "grad_k of a block of keys adds up over every block of queries (grad_k += "
                  "grad_s_blk^T @ q_blk * scale): an = where += belongs keeps only the last "
                  "query block's share; a mean over the blocks, or a share scaled or taken from "
                  "the wrong queries, counts it wrongly."),
    (2, "grad_v", "grad_v of a block of keys adds up over every block of queries (grad_v += "
                  "p_blk^T @ grad_out_blk): an = where += belongs keeps only the last query "
                  "block's share; a mean over the blocks, or a share scaled or taken from the "
                  "wrong queries, counts it wrongly."),
)

class FlashAttentionBackward(GradientExercise):
    name = "flash_attention_backward"
    assignment = "12-backward"
    answer_key_names = ("attention_backward", "tiled_attention_backward",
                        "flash_backward_variant", "attention_backward_variant")
    returns = "triple"
    keeps_dtype = True
    physical = PhysicalCheck(
        PHYSICAL_LABEL, _physical_inputs, _physical_shapes, _physical_rows, memory_mb=32,
        cpu_seconds=30.0, memory_mistake="builds_full_scores")

    def visible_cases(self, rng):
        return [
            TorchCase("N=128 in blocks of 32", flash_inputs(rng, 1, 2, 128, 16),
                      {"block_size": 32}),
            TorchCase("causal, N=100 (last block partial), blocks of 24",
                      flash_inputs(rng, 2, 2, 100, 8, causal=True),
                      {"block_size": 24, "causal": True}),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("default block_size=64, N=256", flash_inputs(rng, 1, 2, 256, 16)),
            TorchCase("float64, causal, blocks of 1", flash_inputs(rng, 1, 1, 12, 4, True),
                      {"block_size": 1, "causal": True}, dtype="float64"),
            TorchCase("logits of about 30 (p = exp(s - lse) must be exact)",
                      flash_inputs(rng, 1, 2, 64, 8, logit_scale=10.0), {"block_size": 16}),
            TorchCase("causal, N=160 in blocks of 40, d 32",
                      flash_inputs(rng, 1, 1, 160, 32, causal=True),
                      {"block_size": 40, "causal": True}),
            TorchCase("float16, N=64 in blocks of 16", flash_inputs(rng, 1, 2, 64, 8),
                      {"block_size": 16}, dtype="float16"),
            TorchCase("bfloat16, causal", flash_inputs(rng, 1, 2, 48, 8, causal=True),
                      {"block_size": 16, "causal": True}, dtype="bfloat16"),
            TorchCase("block_size larger than N", flash_inputs(rng, 2, 1, 20, 8),
                      {"block_size": 128}, degenerate=True),
        ]

    def call(self, func, case):
        args, kwargs = case_tensors(case)
        alt = alternative_block_size(case)
        other = None
        try:
            with one_thread(), torch_only(self.name), \
                    watch_autograd(self.name, exits=True) as report:
                (output, products), tensors = watch_tensors(watch_products, report.run, func,
                                                            *args, **kwargs)
                written = report.largest_storage  # the second call's one block is N x N
                if alt is not None:
                    try:
                        other = report.run(func, *args, **{**kwargs, "block_size": alt})
                    except LeftTorch:
                        raise
                    except Exception:  # judged on the case's own block size only
                        other = None
        except LeftTorch as error:
            return None, {"output_kind": "left_torch", "left_torch": str(error)}
        meta = {**self.output_meta(output, report), "largest_numel": tensors.largest_numel,
                "largest_shape": tensors.largest_shape, "flops": int(products.flops),
                "largest_written": written}
        if alt is not None and isinstance(other, (tuple, list)):
            try:
                meta["alt_output"] = encode(to_plain(other))
                meta["alt_block_size"] = alt
            except (EncodingError, TypeError, ValueError):
                pass
        return output, meta

    def judge_case(self, case, received, meta):
        problem = super().judge_case(case, received, meta)
        if problem is not None:
            return problem
        if builds_full_scores(case, meta):
            return (f"right gradients, but a tensor of {largest_tensor(meta):,} elements was "
                    f"allocated or written into (largest new one: shape "
                    f"{tuple(meta.get('largest_shape') or ())}), as big as the whole "
                    f"(B, H, N, N) probability matrix ({memory_limit(case):,})")
        if too_many_products(case, meta):
            batch, heads, n, d = case.args[0].shape
            per_head = meta["flops"] / (batch * heads * n * n * d)
            return (f"right gradients, but its matrix products cost {per_head:.1f} N^2 d per "
                    f"head; one recomputation of the scores needs {PRODUCTS_PER_PAIR} N^2 d")
        other = self._alt_problem(case, meta)
        if other is not None:
            return (f"right with block_size={case.kwargs.get('block_size', 64)}, but with "
                    f"block_size={meta.get('alt_block_size')} {other}: exact gradients do "
                    "not depend on how the keys are split into blocks")
        return None

    def _right(self, case, received) -> bool:
        return difference(self.expected_once(case), received, *self.tolerance(case)) is None

    def _alt_problem(self, case, meta) -> str | None:
        if "alt_output" not in meta:
            return None
        try:
            other = decode(meta["alt_output"])
        except EncodingError:
            return None
        problem = difference(self.expected_once(case), other, *self.tolerance(case))
        return problem and problem.replace("output", "the gradients", 1)

    def _last_block_skipped(self, case, received) -> bool:
        """grad_k and grad_v exactly zero for the keys of the last, shorter block and right
        for every other key: the loop visited N_k // block_size whole blocks only (none, when
        block_size is larger than N_k)."""
        n_k = case.args[1].shape[-2]
        whole = n_k // case.kwargs.get("block_size", 64) * case.kwargs.get("block_size", 64)
        if not 0 <= whole < n_k or not isinstance(received, (tuple, list)) or len(received) != 3:
            return False
        _, grad_k, grad_v = (np.asarray(part, dtype=np.float64) for part in received)
        _, want_k, want_v = self.expected_once(case)
        tolerance = self.tolerance(case)
        return all(got.shape == want.shape and not got[..., whole:, :].any()
                   and np.asarray(want)[..., whole:, :].any()
                   and difference(np.asarray(want)[..., :whole, :], got[..., :whole, :],
                                  *tolerance) is None
                   for got, want in ((grad_k, want_k), (grad_v, want_v)))

    def _only_wrong(self, case, received, which: int) -> bool:
        """Of the three gradients, only ``received[which]`` differs from the right one."""
        if not isinstance(received, (tuple, list)) or len(received) != 3:
            return False
        tolerance = self.tolerance(case)
        wrong = [difference(want, got, *tolerance) is not None
                 for want, got in zip(self.expected_once(case), received)]
        return wrong == [i == which for i in range(3)]

    def _alt_right(self, case, meta) -> bool:
        return "alt_output" in meta and self._alt_problem(case, meta) is None

    def mistakes(self):
        def model(**change):
            def compute(case):
                from mhalib.reference.backward_variants import flash_backward_variant

                args, kwargs = exact_inputs(case)
                return as_numpy(flash_backward_variant(*args, **{**kwargs, **change}))
            return compute

        measured = [
            Symptom("leaves_torch", "the function took tensors out of torch (.numpy(), "
                    "np.asarray, .tolist() or .item()). Its memory and its products are "
                    "measured by watching torch, and work done in numpy could not be seen: keep "
                    "every block in torch.", lambda case, received, meta:
                    bool(meta.get("left_torch"))),
            Symptom("builds_full_scores", "the gradients are right, but a tensor as large as "
                    "the whole N x N probability matrix was built (all of p at once, or the "
                    "blocks glued together). Keep one block of keys at a time: its scores, "
                    "p = exp(s - lse), grad_p and grad_s are (N, block_size).",
                    lambda case, received, meta: (builds_full_scores(case, meta)
                                                  and self._right(case, received))),
            Symptom("too_many_products", "the gradients are right, but the matrix products "
                    "cost more than one recomputation (10 N^2 d per head): a first pass over "
                    "the key blocks to recompute the lse (it is an argument: the forward's lse, "
                    "to use as given), or one for rowsum(grad_p * p), or out recomputed for "
                    "delta, before the pass for the gradients. Take lse as given and delta = "
                    "rowsum(grad_out * out) (no pass for either), and visit each block of keys "
                    "once, with five products: s, grad_p, grad_v, grad_q and grad_k.",
                    lambda case, received, meta: (too_many_products(case, meta)
                                                  and self._right(case, received))),
        ]
        models = [
            WrongAnswer("delta_from_grad_out", "delta was computed from grad_out alone; the "
                        "row term is delta = rowsum(grad_out * out) (= rowsum(grad_p * p)), "
                        "so multiply by out before summing.", model(delta="grad_out")),
            WrongAnswer("delta_per_block", "the row term was summed over each block of keys "
                        "only; it is a sum over all the keys of the row. Take it from the "
                        "forward's output instead: delta = rowsum(grad_out * out), once, before "
                        "the loop.", model(delta="block")),
            WrongAnswer("lse_base_2", "the probabilities were recomputed with exp2 (2^(s - "
                        "lse)), but lse is a natural log-sum-exp: p = exp(s - lse). (Kernels "
                        "that use exp2 keep lse in base 2 and scale s by log2(e).)",
                        model(exp_base="2")),
            WrongAnswerEither("softmax_within_block", "each block's probabilities were "
                              "normalised within the block (a softmax of the block's scores); "
                              "the forward normalised over all keys, and lse holds that: "
                              "p = exp(s - lse).", model(block_softmax=True),
                              (model(block_softmax=True, nan_empty_rows=True),)),
            WrongAnswer("grad_q_overwritten", "grad_q keeps only the last key block's share: "
                        "each block of keys adds grad_s_blk @ k_blk to grad_q, so accumulate "
                        "(grad_q += ...) over the blocks.", model(accumulate_q=False)),
            WrongAnswer("grad_kv_overwritten", "grad_k and grad_v hold only the last block of "
                        "queries' share: every query that sees a key adds to that key's "
                        "gradient, so sum over the query blocks (or use all the queries at "
                        "once).", model(kv_from_last_query_block=True)),
            WrongAnswer("mask_forgotten_in_recompute", "with causal=True the recomputed "
                        "scores were not masked (or masked with an offset so large that it "
                        "hides no key), so exp(s - lse) gives future keys weight: mask the "
                        "block's scores (-inf where key j > query i) before the exp.",
                        model(causal_mode="none")),
            WrongAnswer("causal_block_local_keys", "the causal mask compares queries with key "
                        "positions inside the block (0..block_size-1); use absolute positions "
                        "start + j.", model(causal_mode="local")),
            WrongAnswer("scores_unscaled", "the scores were recomputed without 1/sqrt(d): "
                        "p = exp(q k^T / sqrt(d) - lse), with the scale the forward used.",
                        model(scale_scores=False)),
            WrongAnswer("no_scale_in_backward", "grad_q and grad_k are sqrt(d) times too "
                        "large: both carry the scores' 1/sqrt(d).",
                        model(scale_q=False, scale_k=False)),
            WrongAnswer("grad_q_unscaled", "grad_q is sqrt(d) times too large: grad_q = "
                        "sum over blocks of grad_s k / sqrt(d).", model(scale_q=False)),
            WrongAnswer("grad_k_unscaled", "grad_k is sqrt(d) times too large: grad_k = "
                        "grad_s^T q / sqrt(d).", model(scale_k=False)),
        ]
        # after the models: where one of them explains a case too, it is named
        split = [
            Symptom("last_block_skipped", "grad_k and grad_v are zero for the keys of the last, "
                    "shorter block (N_k is not a multiple of block_size there), and grad_q "
                    "misses their share: the loop visits only the N_k // block_size whole "
                    "blocks. Loop over range(0, N_k, block_size) and clip each block's end at "
                    "N_k.", lambda case, received, meta: self._last_block_skipped(
                        case, received)),
            *(Symptom(f"blocks_combined_wrongly_{name}", f"with all the keys in one block the "
                      f"gradients are right, but split into blocks {name} is wrong while the "
                      f"other two are right: {why}",
                      lambda case, received, meta, i=i: (self._only_wrong(case, received, i)
                                                         and self._alt_right(case, meta)))
              for i, name, why in _ONE_GRADIENT_OFF),
            Symptom("blocks_combined_wrongly", "with all the keys in one block the gradients "
                    "are right, but split into blocks they are not: a block's share is lost or "
                    "counted wrongly. p = exp(s - lse) needs no rescaling between blocks; "
                    "grad_q adds up over the key blocks, grad_k and grad_v of a block are "
                    "finished in that block, and delta comes from out, not from the blocks.",
                    lambda case, received, meta: (not self._right(case, received)
                                                  and self._alt_right(case, meta))),
            Symptom("depends_on_block_size", "the gradients change with block_size (right "
                    "with the keys split into blocks, wrong with all of them in one block): "
                    "look at what your loop does when a single block holds every key.",
                    lambda case, received, meta: (self._right(case, received)
                                                  and self._alt_problem(case, meta)
                                                  is not None)),
        ]
        return self.watch_symptoms() + measured + models + split
