"""Quick checks of lesson 05 (FLOPs, the N^2 crossover and MFU)."""

from __future__ import annotations

from mhalib.quiz.question import FillIn


def _product(m: int, k: int, n: int) -> dict:
    return {"m": m, "k": k, "n": n}


def _layer(seq_len: int, d_model: int) -> dict:
    return {"seq_len": seq_len, "d_model": d_model}


def _run(tokens_per_second: float, flops_per_token: float, peak_flops: float) -> dict:
    return {"tokens_per_second": tokens_per_second, "flops_per_token": flops_per_token,
            "peak_flops": peak_flops}


QUESTIONS = {
    "qc_matmul_flops": FillIn(
        id="qc_matmul_flops",
        prompt="How many FLOPs does the product of an (m, k) matrix with a (k, n) matrix take?",
        template="flops = ____",
        scenarios=[_product(3, 5, 7), _product(1024, 768, 768), _product(1, 4096, 11)],
        expected=lambda s: 2 * s["m"] * s["k"] * s["n"],
        explanation="Each of the m * n outputs is a dot product of length k: k multiplies and "
                    "k adds (k - 1 plus the accumulation), 2 k FLOPs, so 2 m k n in all.",
        hint="Count one multiply and one add per term of every output's dot product.",
        examples=["2 * m * k * n", "m * n * 2 * k"],
    ),
    "qc_attention_share": FillIn(
        id="qc_attention_share",
        prompt="What fraction of one attention layer's FLOPs are the two N^2 terms "
               "(scores and weighted sum)? Use seq_len for N.",
        template="share = ____",
        scenarios=[_layer(1024, 768), _layer(8192, 4096), _layer(131072, 4096), _layer(7, 3)],
        expected=lambda s: 4 * s["seq_len"] ** 2 * s["d_model"] / (
            8 * s["seq_len"] * s["d_model"] ** 2 + 4 * s["seq_len"] ** 2 * s["d_model"]),
        explanation="4 N^2 d / (8 N d^2 + 4 N^2 d) = N / (N + 2 d): a half exactly at the "
                    "crossover N = 2 d, and most of the layer's work far beyond it.",
        hint="Divide the N^2 terms by the total 8 N d^2 + 4 N^2 d, then simplify.",
        examples=["seq_len / (seq_len + 2 * d_model)",
                  "4*seq_len**2*d_model / (8*seq_len*d_model**2 + 4*seq_len**2*d_model)"],
    ),
    "qc_mfu": FillIn(
        id="qc_mfu",
        prompt="A training run processes tokens_per_second tokens per second; the model needs "
               "flops_per_token FLOPs per token; the hardware's peak is peak_flops FLOP/s. "
               "Fill in the model FLOPs utilisation.",
        template="mfu = ____",
        scenarios=[_run(3000.0, 6 * 8e9, 989e12), _run(1.0, 2.0, 4.0), _run(50.0, 7.0, 1e3)],
        expected=lambda s: s["tokens_per_second"] * s["flops_per_token"] / s["peak_flops"],
        explanation="MFU is the FLOP rate the model's own arithmetic needs at the measured "
                    "speed, divided by what the chip could do at best. For training, "
                    "flops_per_token is about 6 x params (6 * 8e9 for an 8B model): the forward "
                    "pass costs about 2 FLOPs per parameter per token (one multiply-add per "
                    "weight), and the backward pass about twice that (gradients with respect to "
                    "the activations and to the weights).",
        hint="Achieved FLOP/s (tokens per second times FLOPs per token) over the peak.",
        examples=["tokens_per_second * flops_per_token / peak_flops"],
    ),
}
