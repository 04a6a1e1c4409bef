"""Checkers for lesson 05: ``mha_flops``, ``crossover_seq_len`` and ``mha_param_count``.

Plain Python numbers in and out, compared exactly (up to 1e-9 relative, so a float that holds
the right integer passes). The mistake models are the usual slips of FLOP accounting: a
multiply-add counted once, the output projection forgotten, one head's share of the N^2 terms
instead of all heads', and parameter counts with the biases wrong.
"""

from __future__ import annotations

import math

from mhalib.checks.exercise import Case, Exercise, Symptom, WrongAnswer
from mhalib.checks.search_spaces import CountSearch

EXACT = {"rtol": 1e-9, "atol": 0.0}


def _flops(n, d, *, per_mac=2, projections=3, output=True, n2_width=None, n2_terms=2,
           n2_scale=1):
    """The mha_flops dict with knobs; n2_width replaces d_model in the N^2 terms, n2_scale
    multiplies them (0.5: the causal half)."""
    width = d if n2_width is None else n2_width
    parts = {
        "qkv_projections": per_mac * projections * n * d * d,
        "scores": per_mac * n * n * width * n2_scale,
        "weighted_sum": per_mac * n * n * width * n2_scale,
        "output_projection": per_mac * n * d * d if output else 0,
    }
    parts["total"] = (parts["qkv_projections"] + parts["output_projection"]
                      + n2_terms * parts["scores"])
    return parts


def _only(*keys):
    """A mistake model judged only on some keys of the dict (the rest may be right or absent)."""
    def pick(parts):
        return {k: parts[k] for k in keys}
    return pick


class MhaFlops(CountSearch, Exercise):
    search_cap = 240  # single-factor changes of the count (mhalib.checks.search_spaces)

    int_counts = True  # a float count, even of the right value, fails
    name = "mha_flops"
    assignment = "05-flops"
    answer_key_names = ("gqa_flops",)
    rtol, atol = EXACT["rtol"], EXACT["atol"]

    def visible_cases(self, rng):
        n = int(rng.integers(100, 3000))
        return [
            Case("N=1024, d_model=768 (GPT-2 small)", (1024, 768)),
            Case(f"N={n}, d_model=512", (n, 512)),
        ]

    def hidden_cases(self, rng):
        return [
            Case("N=8192, d_model=4096 (N = 2 d_model)", (8192, 4096)),
            Case("N=131072, d_model=16384 (Llama-3.1 405B, 128k tokens)", (131072, 16384)),
            Case("a single token", (1, int(rng.integers(8, 200)) * 8)),
            Case("short sequence, wide model", (int(rng.integers(3, 30)), 2048)),
            Case("keyword arguments", (), {"seq_len": 77, "d_model": 96}),
            # (no head count divides it: a count through d_model // 8 * 8 is then wrong, round
            # AF's float d_model / 8 "mended" with // passed every other case)
            Case("N=5, d_model=97 (a prime width)", (5, 97)),
        ]

    def _nd(self, case):
        values = list(case.args) + [case.kwargs[k] for k in ("seq_len", "d_model")
                                    if k in case.kwargs]
        return values[0], values[1]

    def mistakes(self):
        def model(pick=lambda p: p, **knobs):
            return lambda c: pick(_flops(*self._nd(c), **knobs))

        return [
            WrongAnswer("multiply_add_as_one", "every count is half the expected: a multiply-add "
                        "is 2 FLOPs (one multiply, one add), so an (m, k) @ (k, n) product costs 2 "
                        "m k n.", model(per_mac=1)),
            WrongAnswer("no_output_projection", "the total leaves out the output projection "
                        "(concat of the heads) @ W_O, another 2 N d_model^2.",
                        model(_only("total"), output=False)),
            WrongAnswer("one_projection", "qkv_projections counts one projection: Q, K and V are "
                        "three (N, d) @ (d, d) products, 3 * 2 N d^2.",
                        model(_only("qkv_projections"), projections=1)),
            WrongAnswer("causal_halved", "the N^2 terms are half the expected (N^2 d_model "
                        "each): a multiply-add counted as 1 FLOP instead of 2, only the causal "
                        "half of the scores counted, or only one of two heads. This exercise "
                        "counts the dense N x N scores of all the heads together, 2 FLOPs per "
                        "multiply-add: 2 N^2 d_model each.", model(n2_scale=0.5)),
            Symptom("n2_with_d_head", "the N^2 terms look like one head's work (2 N^2 d_head): H "
                    "heads of width d_head = d_model / H together do 2 N^2 d_model.",
                    lambda c, received, meta: _looks_per_head(self._nd(c), received)),
            WrongAnswer("one_n2_term", "the total has only one N^2 term: the scores Q K^T and the "
                        "weighted sum weights @ V each cost 2 N^2 d_model.",
                        model(_only("scores", "weighted_sum", "total"), n2_terms=1)),
        ]


def _looks_per_head(nd, received) -> bool:
    """True when the scores are 2 N^2 d_model / H for some head count H > 2 dividing d_model
    into heads of at least 2 values (a half is also a multiply-add counted as 1 FLOP or the
    causal half, which the count readings name; 1 / d_model is d_model left out, not a head)."""
    n, d = nd
    if not isinstance(received, dict):
        return False
    scores = received.get("scores")
    if isinstance(scores, bool) or not isinstance(scores, (int, float)) or scores <= 0:
        return False
    heads = 2 * n * n * d / scores
    return heads > 2.5 and abs(heads - round(heads)) < 1e-9 * heads and \
        d % round(heads) == 0 and d // round(heads) >= 2


class CrossoverSeqLen(Exercise):
    int_counts = True  # a float count, even of the right value, fails
    name = "crossover_seq_len"
    assignment = "05-flops"
    rtol, atol = EXACT["rtol"], EXACT["atol"]

    def visible_cases(self, rng):
        return [Case("d_model=4096 (Llama-3.1 8B)", (4096,)),
                Case("a random width", (int(rng.integers(2, 400)) * 8,))]

    def hidden_cases(self, rng):
        return [Case("d_model=768", (768,)), Case("d_model=1", (1,)),
                Case("keyword argument", (), {"d_model": 12288})]

    def mistakes(self):
        def times(factor):
            return lambda c: factor * (c.args[0] if c.args else c.kwargs["d_model"])

        return [
            WrongAnswer("crossover_d_model", "that is d_model, what the two sides give when "
                        "they are counted in different units or halves: the projections at 1 "
                        "FLOP per multiply-add (4 N d^2) against the N^2 terms at 2 (4 N^2 d), "
                        "only two projections, the N^2 terms counted twice, or one N^2 product "
                        "set equal to one projection (2 N^2 d = 2 N d^2). Setting 4 N^2 d "
                        "equal to 8 N d^2 gives N = 2 d_model (both N^2 terms against all four "
                        "projections, 2 FLOPs per multiply-add everywhere).",
                        times(1)),
            WrongAnswer("no_output_projection", "that solves 4 N^2 d = 6 N d^2 (the output "
                        "projection left out); with it, 4 N^2 d = 8 N d^2 and N = 2 d_model.",
                        times(1.5)),
            WrongAnswer("one_n2_term", "that solves 2 N^2 d = 8 N d^2: either one N^2 term was "
                        "left out (the scores and the weighted sum both grow like N^2), or the N^2 "
                        "products were counted at 1 FLOP per multiply-add while the projections "
                        "were counted at 2. With both N^2 terms at 2 FLOPs per multiply-add, "
                        "4 N^2 d = 8 N d^2 and N = 2 d_model.", times(4)),
            WrongAnswer("inverted_ratio", "that is d_model / 2: either the equation 4 N^2 d = "
                        "8 N d^2 was solved upside down, or the N^2 terms were compared with one "
                        "projection (4 N^2 d = 2 N d^2) where all four belong (Q, K, V and the "
                        "output: 8 N d^2). Divide both sides by 4 N d: N = 2 d.",
                        times(0.5)),
            WrongAnswer("zero_root", "that is 0, the other root of 4 N^2 d = 8 N d^2 (N = 0 "
                        "makes both sides 0): take the positive root, or divide both sides by "
                        "4 N d first, N = 2 d_model; or a quotient that // rounded down to 0.",
                        times(0)),
            WrongAnswer("n_squared_kept", "that is sqrt(2) d_model, which solves N^2 = 2 "
                        "d_model^2: from 4 N^2 d = 8 N d^2 only d was divided out, and the N of "
                        "the projections' side was dropped where it should cancel one N of the "
                        "N^2. Divide both sides by 4 N d: N = 2 d_model.",
                        times(math.sqrt(2))),
            WrongAnswer("first_n_past_crossover", "that is one more than the crossover: a search "
                        "that steps while the N^2 terms are <= the projections stops at the "
                        "first N past the point where they are equal, N = 2 d_model.",
                        lambda c: 2 * (c.args[0] if c.args else c.kwargs["d_model"]) + 1),
            WrongAnswer("no_output_projection_one_n2_term", "that solves 2 N^2 d = 6 N d^2: the "
                        "output projection is missing, and so is one of the two N^2 terms (or "
                        "they were counted at 1 FLOP per multiply-add where the projections got "
                        "2). With all four projections (8 N d^2) and both N^2 terms (4 N^2 d), "
                        "N = 2 d_model.", times(3)),
        ]

    def reproduces(self, case, compute, received):
        """A wrong equation solved and then rounded (int(), //, math.ceil) is the same slip."""
        try:
            wrong = compute(case)
        except Exception:
            return False
        forms = {wrong, math.floor(wrong), math.ceil(wrong), round(wrong)}
        return any(super(CrossoverSeqLen, self).reproduces(case, lambda c, f=form: f, received)
                   for form in forms)


class MhaParamCount(CountSearch, Exercise):
    search_cap = 240  # single-factor changes of the count (mhalib.checks.search_spaces)

    int_counts = True  # a float count, even of the right value, fails
    name = "mha_param_count"
    assignment = "05-flops"
    answer_key_names = ("gqa_param_count", "mqa_param_count")
    rtol, atol = EXACT["rtol"], EXACT["atol"]

    def visible_cases(self, rng):
        return [Case("d_model=768, default bias", (768,)),
                Case("d_model=4096, bias=False", (4096,), {"bias": False})]

    def hidden_cases(self, rng):
        return [
            Case("a random width, bias=True", (int(rng.integers(2, 300)) * 4,), {"bias": True}),
            Case("bias passed positionally", (512, False)),
            Case("d_model=1", (1,), degenerate=True),
            # (a learner may count by building nn.MultiheadAttention: at d_model=16384 that
            # is 1.07e9 parameters, 4.3 GB, past the grader's 2 GB and 10 s per call)
            Case("d_model=8192, no bias (Llama-3.1 70B-sized MHA)", (8192,), {"bias": False}),
        ]

    def mistakes(self):
        def count(weights=4, biases=4, bias_size="d", honour_flag=True, force=None):
            def compute(case):
                d = case.args[0]
                bias = case.args[1] if len(case.args) > 1 else case.kwargs.get("bias", True)
                use_bias = force if force is not None else (bias if honour_flag else True)
                size = d * d if bias_size == "d^2" else d
                return weights * d * d + (biases * size if use_bias else 0)
            return compute

        return [
            WrongAnswer("no_bias", "with bias=True each of the four projections also has a bias "
                        "vector of d_model entries: add 4 d_model.", count(force=False)),
            WrongAnswer("bias_ignores_flag", "with bias=False there are no bias vectors: only the "
                        "4 d_model^2 weights. The biases were counted whatever the flag says (a "
                        "test such as `bias is not None` is true for False too: test `if "
                        "bias`).", count(force=True)),
            WrongAnswer("bias_d_squared", "a bias is a vector of d_model entries, not a d_model x "
                        "d_model matrix.", count(bias_size="d^2")),
            WrongAnswer("three_matrices", "W_O was left out: attention has four d_model x d_model "
                        "matrices (W_Q, W_K, W_V, W_O), each with a bias.",
                        count(weights=3, biases=3)),
            WrongAnswer("no_output_bias", "the output projection has a bias too: 4 biases of "
                        "d_model entries.", count(biases=3)),
            WrongAnswer("one_bias", "only one bias vector was counted: each of the four "
                        "projections has its own, 4 d_model bias entries in all.",
                        count(biases=1)),
            WrongAnswer("bias_flag_inverted", "the biases are counted when bias=False and left "
                        "out when bias=True: the flag is inverted (add 4 d_model only if bias).",
                        lambda c: _inverted_flag(c)),
        ]


def _inverted_flag(case) -> int:
    d = case.args[0]
    bias = case.args[1] if len(case.args) > 1 else case.kwargs.get("bias", True)
    return 4 * d * d + (0 if bias else 4 * d)


EXERCISES = {e.name: e for e in (MhaFlops(), CrossoverSeqLen(), MhaParamCount())}
