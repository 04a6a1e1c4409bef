"""Quick checks of lesson 03 (why the scores are scaled)."""

from __future__ import annotations

import math

from mhalib.quiz.question import FillIn, MultipleChoice

QUESTIONS = {
    "qc_dot_variance": FillIn(
        id="qc_dot_variance",
        prompt="q and k have d_k independent entries, each with mean 0 and variance s2. "
               "Fill in the variance of their dot product.",
        template="Var(q . k) = ____",
        scenarios=[{"d_k": 64, "s2": 1.0}, {"d_k": 16, "s2": 0.5}, {"d_k": 3, "s2": 2.0},
                   {"d_k": 128, "s2": 0.1}],
        expected=lambda s: s["d_k"] * s["s2"] ** 2,
        explanation="Each product q_i k_i has mean 0 and variance E[q_i^2] E[k_i^2] = s2^2, and "
                    "the d_k products are independent, so their variances add: d_k * s2^2. "
                    "With unit variance that is d_k, which 1/sqrt(d_k) undoes.",
        hint="Find the variance of one product q_i k_i first, then add up d_k of them.",
        examples=["d_k * s2 ** 2", "d_k * s2 * s2", "s2**2 * d_k"],
    ),
    "qc_saturated_gradient": MultipleChoice(
        id="qc_saturated_gradient",
        prompt="A softmax row has saturated: one weight is almost 1 and the others are almost "
               "0. What is its Jacobian diag(p) - p p^T close to?",
        options=["The identity matrix: gradients pass through unchanged",
                 "The zero matrix: almost no gradient reaches the scores",
                 "-p p^T, with entries near -1 everywhere",
                 "Undefined, because log(0) appears"],
        key="2cb8cf59f0508c5566ee",
        explanation="With p = e_j, diag(p) and p p^T are both the matrix with a single 1 at (j, "
                    "j), and they cancel. The scores stop learning: this is why unscaled "
                    "attention with wide heads trains badly.",
        why_wrong={0: "The identity would need every p_i = 1 on the diagonal and no outer "
                      "term.",
                   2: "p p^T is near zero except the single entry p_j^2 near 1, which diag(p) "
                      "cancels.",
                   3: "The Jacobian is built from p only, no logarithm is involved."},
    ),
    "qc_max_entropy": FillIn(
        id="qc_max_entropy",
        prompt="Attention weights over N keys: fill in the largest entropy (in nats) a row of "
               "weights can have.",
        template="H_max = ____",
        scenarios=[{"N": 16}, {"N": 2}, {"N": 1000}],
        expected=lambda s: math.log(s["N"]),
        explanation="The uniform row, 1/N on every key, has entropy log N: the most spread "
                    "attention there is. A saturated row has entropy near 0.",
        hint="Which row of weights is the most spread out, and what is -sum p log p for it?",
        examples=["np.log(N)", "math.log(N)", "-np.log(1 / N)"],
    ),
}
