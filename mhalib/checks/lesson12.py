"""Checkers for lesson 12, the backward pass of attention (torch): ``softmax_backward``,
``attention_backward``, ``attention_backward_flops`` and ``flash_attention_backward`` (in
:mod:`mhalib.checks.flash_backward`).

The gradient exercises are compared with the answer key in float64 (itself checked against
torch.autograd by the tests) and are computed by hand: each probe runs the learner's function
under :func:`mhalib.checks.autograd_watch.watch_autograd`, and a case that used autograd fails
whatever its values. The mistake models are the slips of the chain rule
(:mod:`mhalib.reference.backward_variants`): a missing 1/sqrt(d), p not transposed, the softmax
gradient's row term dropped or summed over the queries, the mask forgotten or aligned top-left.
"""

from __future__ import annotations

import numpy as np

from mhalib.checks.autograd_watch import watch_autograd
from mhalib.checks.backward_common import (
    GradientExercise,
    qkv_grad,
    weights_and_grads,
)
from mhalib.checks.exercise import Case, Exercise, WrongAnswer
from mhalib.checks.flash_backward import FlashAttentionBackward
from mhalib.checks.search_spaces import CountSearch
from mhalib.checks.torch_exercise import (
    TorchCase,
    case_tensors,
    one_thread,
    torch_model,
)

ASSIGNMENT = "12-backward"
# other functions of the package that compute these gradients (the answer key, the kernel, and
# the mistake models, whose defaults are the answer): reaching one of them scores 0
GRADIENT_KEYS = ("attention_backward", "flash_attention_backward", "tiled_attention_backward",
                 "softmax_backward_variant", "attention_backward_variant",
                 "flash_backward_variant")
VARIANTS = "mhalib.reference.backward_variants"


def _variant(name: str, **change):
    """A mistake model: the variant ``name`` (imported on the judge's side only) on the case's
    float64 inputs with ``change``, as numpy."""
    return torch_model(f"{VARIANTS}.{name}", **change)


# -- softmax_backward ------------------------------------------------------------------------

def _masked_rows(rng, rows, n):
    """Weights (rows, n) with a causal-like pattern of zeros and row 0 fully masked."""
    allowed = np.tril(np.ones((rows, n), dtype=bool), n - rows)  # bottom-right, as lesson 04
    allowed[0] = False
    return weights_and_grads(rng, (rows, n), allowed=allowed)


class SoftmaxBackward(GradientExercise):
    name = "softmax_backward"
    assignment = ASSIGNMENT
    answer_key_names = GRADIENT_KEYS
    keeps_dtype = True  # the lesson: "return weights' dtype"

    def visible_cases(self, rng):
        return [
            TorchCase("rows of a softmax, shape (3, 4, 7)", weights_and_grads(rng, (3, 4, 7))),
            TorchCase("a square (6, 6) block of rows, the first fully masked (zeros)",
                      _masked_rows(rng, 6, 6)),
        ]

    def hidden_cases(self, rng):
        peaked = weights_and_grads(rng, (2, 5, 9), spread=8.0)
        return [
            TorchCase("one row, shape (11,)", weights_and_grads(rng, (11,))),
            TorchCase("float64, (B, H, N, N) causal weights with a fully masked row",
                      _masked_rows(rng, 8, 8), dtype="float64"),
            TorchCase("peaked rows (one weight near 1)", peaked),
            TorchCase("large upstream gradients (about 1e3)",
                      weights_and_grads(rng, (4, 6), grad_scale=1e3)),
            TorchCase("float16", weights_and_grads(rng, (2, 3, 8)), dtype="float16"),
            TorchCase("bfloat16, 5 rows of 5 with masked entries", _masked_rows(rng, 5, 5),
                      dtype="bfloat16"),
            TorchCase("uniform weights (every row the same value)",
                      weights_and_grads(rng, (3, 4), spread=0.0)),
            # float64 rows without zeros: the row term can be read back from the output
            TorchCase("float64, rows of a softmax, shape (2, 3, 6)",
                      weights_and_grads(rng, (2, 3, 6)), dtype="float64"),
        ]

    def call(self, func, case):
        args, kwargs = case_tensors(case)
        with one_thread(), watch_autograd(self.name) as report:
            output = report.run(func, *args, **kwargs)
        return output, self.output_meta(output, report)

    def mistakes(self):
        model = lambda **change: _variant("softmax_backward_variant", **change)  # noqa: E731
        return self.watch_symptoms() + [
            WrongAnswer("row_term_dropped", "the row term is missing: weights * grad_weights is "
                        "only the diagonal diag(p) g of the Jacobian diag(p) - p p^T. Subtract "
                        "the row term too: weights * (grad_weights - (grad_weights * "
                        "weights).sum(-1, keepdim=True)).", model(row="none")),
            WrongAnswer("row_term_unweighted", "the row term is the plain sum of grad_weights; "
                        "it is the sum of grad_weights * weights (the p^T g of p p^T g), a "
                        "weighted average of the upstream gradient.", model(row="unweighted")),
            WrongAnswer("row_term_is_mean", "the row term is a mean over the row; it is the sum "
                        "of grad_weights * weights (the weights already sum to 1).",
                        model(row="mean")),
            WrongAnswer("row_term_wrong_axis", "the row term was summed across the rows (over "
                        "axis -2, or over the first axis, which is axis -2 only for 2-D weights) "
                        "instead of along each row: sum over the last axis, the one the "
                        "softmax normalised.", model(axis=-2)),
            WrongAnswer("row_term_no_keepdim", "the row sum lost its axis (keepdim=False), so "
                        "it broadcast along the columns: row i got row j's term. Keep the axis: "
                        "(grad_weights * weights).sum(-1, keepdim=True).", model(keepdim=False)),
            WrongAnswer("sign_flipped", "the sign is flipped: grad_scores = weights * "
                        "(grad_weights - rowsum), not weights * (rowsum - grad_weights).",
                        model(sign=-1)),
            WrongAnswer("diagonal_only", "that is grad_weights * p * (1 - p), the Jacobian's "
                        "diagonal alone (the sigmoid's derivative); a softmax output depends "
                        "on every input of its row, so subtract p * rowsum(grad_weights * p) "
                        "instead of p^2 * grad_weights.", model(diagonal_only=True)),
            WrongAnswer("arguments_swapped", "weights and grad_weights were used the other way "
                        "round: the first argument is the softmax's output p, the second the "
                        "upstream gradient g.", model(swapped=True)),
            WrongAnswer("log_softmax_backward", "that is g - p * rowsum(g), the backward of "
                        "log_softmax (its Jacobian is I - 1 p^T): the softmax's Jacobian is "
                        "diag(p) - p p^T, so grad_scores = p * (g - rowsum(g * p)).",
                        model(log_softmax=True)),
        ]


# -- attention_backward ----------------------------------------------------------------------

def _backward_changes(model) -> list:
    """Single changes of attention's backward (issue 22's search): its scale, its mask."""
    from mhalib.checks.search import Change

    return [
        Change("scale=d_v", "the scale uses d_v (v's width); the scores are q k^T / sqrt(d) with "
               "d the width of q and k, in the forward and in grad_q and grad_k",
               model(scale="d_v")),
        Change("scale=1/d", "the scale is 1/d instead of 1/sqrt(d) (applied twice, or d for "
               "sqrt(d)), in the forward and in the gradients", model(scale="1/d")),
        Change("causal_shift=-1", "the causal mask hides the diagonal: query i may see key j "
               "<= i + N_k - N_q, its own position included", model(causal_shift=-1)),
        Change("causal_shift=+1", "the causal mask lets each query see one future key: key j "
               "is allowed only when j <= i + N_k - N_q", model(causal_shift=1)),
        Change("mask_fill=-1e9", "masked scores were filled with a finite -1e9: a query that sees "
               "no key then spreads its weight over the masked keys and passes them gradient; "
               "fill with -inf and give such rows zero weights", model(mask_fill=-1e9)),
        Change("mask_in_forward=False", "the mask was applied only in the backward pass (grad_s "
               "zeroed): p itself must come from the masked scores, or grad_v and the row term "
               "see the hidden keys", model(mask_in_forward=False)),
    ]


class AttentionBackward(GradientExercise):
    name = "attention_backward"
    assignment = ASSIGNMENT
    answer_key_names = GRADIENT_KEYS
    returns = "triple"
    keeps_dtype = True

    def visible_cases(self, rng):
        return [
            TorchCase("batch 2, 3 heads, 6 queries and keys, d 8, d_v 5",
                      qkv_grad(rng, (2, 3), 6, 6, 8, d_v=5)),
            TorchCase("causal, 5 queries over 9 keys (bottom-right)",
                      qkv_grad(rng, (1, 2), 5, 9, 4), {"causal": True}),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("no leading axes: 7 queries, 4 keys", qkv_grad(rng, (), 7, 4, 3)),
            TorchCase("float64, causal, N = 10, d 16", qkv_grad(rng, (2, 2), 10, 10, 16),
                      {"causal": True}, dtype="float64"),
            TorchCase("causal, 6 queries over 3 keys: the first 3 queries see no key",
                      qkv_grad(rng, (2,), 6, 3, 4), {"causal": True}),
            TorchCase("logits of about 30", qkv_grad(rng, (1, 2), 8, 8, 8, logit_scale=10.0)),
            TorchCase("three leading axes, causal", qkv_grad(rng, (2, 1, 2), 5, 5, 4),
                      {"causal": True}),
            TorchCase("float16", qkv_grad(rng, (1, 2), 8, 8, 8), dtype="float16"),
            TorchCase("bfloat16, causal", qkv_grad(rng, (1, 2), 6, 6, 8), {"causal": True},
                      dtype="bfloat16"),
            TorchCase("a single key", qkv_grad(rng, (2,), 3, 1, 4), degenerate=True),
        ]

    def call(self, func, case):
        args, kwargs = case_tensors(case)
        with one_thread(), watch_autograd(self.name) as report:
            output = report.run(func, *args, **kwargs)
        return output, self.output_meta(output, report)

    def search_space(self):
        return _backward_changes(lambda **change: _variant("attention_backward_variant",
                                                           **change))

    def mistakes(self):
        model = lambda **change: _variant("attention_backward_variant", **change)  # noqa: E731
        return self.watch_symptoms() + [
            WrongAnswer("no_scale_in_backward", "grad_q and grad_k are sqrt(d) times too large: "
                        "the scores are q k^T / sqrt(d), so both carry the factor 1/sqrt(d): "
                        "grad_q = grad_s k / sqrt(d), grad_k = grad_s^T q / sqrt(d).",
                        model(scale_q=False, scale_k=False)),
            WrongAnswer("grad_q_unscaled", "grad_q is sqrt(d) times too large: it needs the "
                        "1/sqrt(d) of the scores, grad_q = grad_s k / sqrt(d) (grad_k has it).",
                        model(scale_q=False)),
            WrongAnswer("grad_k_unscaled", "grad_k is sqrt(d) times too large: it needs the "
                        "1/sqrt(d) of the scores, grad_k = grad_s^T q / sqrt(d) (grad_q has it).",
                        model(scale_k=False)),
            WrongAnswer("no_scale", "the scores were computed without 1/sqrt(d) (and so were "
                        "the gradients): s = q k^T / sqrt(d).",
                        model(scale_scores=False, scale_q=False, scale_k=False)),
            WrongAnswer("p_not_transposed", "grad_v = p @ grad_out; out = p v sums over the "
                        "keys, so grad_v sums over the queries: grad_v = p^T @ grad_out "
                        "(p.transpose(-2, -1)).", model(transpose_p=False)),
            WrongAnswer("grad_k_not_transposed", "grad_k = grad_s @ q; the keys are the columns "
                        "of grad_s, so grad_k = grad_s^T @ q / sqrt(d).",
                        model(transpose_grad_s=False)),
            WrongAnswer("row_term_dropped", "the softmax gradient lost its row term: grad_s = "
                        "p * grad_p is only diag(p) grad_p. Subtract the row term: grad_s = p * "
                        "(grad_p - (grad_p * p).sum(-1, keepdim=True)).", model(row="none")),
            WrongAnswer("row_term_over_queries", "the softmax gradient's row term was summed "
                        "over the queries (axis -2); each query's softmax runs over the keys, so "
                        "sum over the last axis.", model(row="queries")),
            WrongAnswer("mask_ignored", "with causal=True the probabilities were computed "
                        "without the mask, so future keys get weight and gradient: mask the "
                        "scores (-inf where key j > i + N_k - N_q) before the softmax.",
                        model(causal_mode="none")),
            WrongAnswer("mask_after_softmax", "the mask was applied after the softmax: p is the "
                        "softmax of all the scores with the hidden keys' weights then zeroed, so "
                        "a row's visible weights no longer sum to 1. Mask the scores (-inf where "
                        "key j > i + N_k - N_q) before the softmax.",
                        model(mask_after_softmax=True)),
            WrongAnswer("causal_top_left", "the causal mask is aligned top-left: with N_q != "
                        "N_k, query i sits at position i + N_k - N_q and sees keys j <= i + "
                        "N_k - N_q (lesson 04's bottom-right mask).",
                        model(causal_mode="top_left")),
            WrongAnswer("nan_for_empty_rows", "a query that sees no key gives NaN (its softmax "
                        "is 0 / 0); it has out = 0 and contributes no gradient: give such rows "
                        "zero weights.", model(nan_empty_rows=True)),
            WrongAnswer("softmax_over_queries", "p was normalised over the queries (dim -2): "
                        "each query's weights over the keys sum to 1, so softmax over the last "
                        "axis.", model(softmax_dim=-2)),
            WrongAnswer("grad_q_grad_k_swapped", "the first two gradients came back swapped: "
                        "return (grad_q, grad_k, grad_v).", model(order="kqv")),
        ]


# -- attention_backward_flops ----------------------------------------------------------------

class AttentionBackwardFlops(CountSearch, Exercise):
    search_cap = 240  # single-factor changes of the count (mhalib.checks.search_spaces)

    int_counts = True  # a float count, even of the right value, fails
    name = "attention_backward_flops"
    assignment = ASSIGNMENT
    answer_key_names = ("attention_forward_flops", "backward_flops_variant")
    rtol, atol = 1e-9, 0.0

    def visible_cases(self, rng):
        n = int(rng.integers(100, 3000))
        return [
            Case("N=1024, d=64 (GPT-2 small's heads), recompute by default", (1024, 64)),
            Case(f"N={n}, d=128, recompute=False (p kept from the forward)", (n, 128),
                 {"recompute": False}),
        ]

    def hidden_cases(self, rng):
        return [
            Case("N=8192, d=128, recompute=True", (8192, 128), {"recompute": True}),
            Case("N=131072, d=128, no recompute", (131072, 128), {"recompute": False}),
            Case("recompute passed positionally (False)", (512, 64, False)),
            Case("keyword arguments", (), {"seq_len": 300, "head_dim": 96}),
            Case("a single token", (1, int(rng.integers(8, 200)))),
            Case("a random length, d=16", (int(rng.integers(2, 5000)), 16)),
        ]

    def _args(self, case):
        return case.arguments(("seq_len", "head_dim", "recompute"), {"recompute": True})

    def mistakes(self):
        def model(**knobs):
            def compute(case):
                from mhalib.reference.backward_variants import backward_flops_variant

                return backward_flops_variant(**self._args(case), **knobs)
            return compute

        return [
            WrongAnswer("recompute_ignored", "recompute=True should add the recomputed scores "
                        "q k^T, 2 N^2 d: FlashAttention keeps no p, so its backward runs five "
                        "products (10 N^2 d), not four.", model(honour_flag=False)),
            WrongAnswer("recompute_flag_inverted", "with recompute=False the count still "
                        "includes the recomputed scores (2 N^2 d): add that term only if "
                        "recompute is True (the flag is ignored or inverted).",
                        model(invert_flag=True)),
            WrongAnswer("recompute_full_forward", "recompute adds 4 N^2 d, a whole forward; "
                        "the backward needs p, so only the scores q k^T are recomputed (2 N^2 d), "
                        "not p v: with recompute the total is 10 N^2 d.",
                        model(recompute_products=2)),
            WrongAnswer("forward_added", "the forward's 4 N^2 d is included: count the "
                        "backward's products only (8 N^2 d, plus 2 N^2 d with recompute).",
                        model(forward_added=True)),
            WrongAnswer("three_products", "one of the four products is missing: grad_v = p^T "
                        "grad_out, grad_p = grad_out v^T, grad_q = grad_s k and grad_k = grad_s^T "
                        "q are 2 N^2 d each, 8 N^2 d.", model(products=3)),
            WrongAnswer("multiply_add_as_one", "every count is half the expected: a multiply-add "
                        "counted as 1 FLOP (it is 2, so an (N, d) @ (d, N) product costs "
                        "2 N^2 d), or the count halved for a causal mask (this count is the "
                        "dense backward: no saving for masked entries).",
                        model(per_mac=1)),
        ]


EXERCISES = {e.name: e for e in (SoftmaxBackward(), AttentionBackward(),
                                 AttentionBackwardFlops(), FlashAttentionBackward())}
