"""Quick checks of lesson 11 (decode on a roofline, the paged KV cache, chunked prefill)."""

from __future__ import annotations

from mhalib.quiz.question import FillIn, MultipleChoice


def _machine(peak_flops: float, bandwidth: float) -> dict:
    return {"peak_flops": peak_flops, "bandwidth": bandwidth}


def _lookup(row: list, t: int, page_size: int) -> dict:
    return {"row": row, "t": t, "page_size": page_size}


def _tokens(n: int, page_size: int) -> dict:
    return {"n": n, "page_size": page_size}


QUESTIONS = {
    "qc_ridge_point": FillIn(
        id="qc_ridge_point",
        prompt="A processor does at most peak_flops FLOP/s and moves at most bandwidth bytes/s "
               "to and from memory. Below which arithmetic intensity (FLOPs per byte) is a "
               "kernel limited by memory rather than by compute? Use peak_flops and bandwidth.",
        template="ridge = ____",
        scenarios=[_machine(989e12, 3.35e12), _machine(312e12, 2.039e12),
                   _machine(2.0e11, 2.5e10), _machine(1.0e9, 1.0e9)],
        expected=lambda s: s["peak_flops"] / s["bandwidth"],
        explanation="At intensity I the memory can feed I * bandwidth FLOP/s; that falls short "
                    "of peak_flops exactly when I < peak_flops / bandwidth, the ridge of the "
                    "roofline (about 295 FLOPs per byte on an H100 SXM in BF16).",
        hint="Set intensity * bandwidth equal to peak_flops and solve for the intensity.",
        examples=["peak_flops / bandwidth", "peak_flops * bandwidth ** -1"],
    ),
    "qc_key_page": FillIn(
        id="qc_key_page",
        prompt="row is one sequence's row of the block table (a list of page numbers, in the "
               "sequence's order) and each page holds page_size tokens. Which physical page "
               "holds the sequence's key t? Use row, t and page_size.",
        template="page = ____",
        scenarios=[_lookup([7, 2, 9, 4], 13, 4), _lookup([3, 0, 5], 5, 4),
                   _lookup([11, 6, 1, 8, 0], 0, 16), _lookup([5, 1, 4, 2], 31, 8),
                   _lookup([9, 3], 1, 1)],
        expected=lambda s: s["row"][s["t"] // s["page_size"]],
        explanation="Tokens fill a page before moving on, so key t is in the sequence's page "
                    "number t // page_size, which the block table maps to a physical page: "
                    "row[t // page_size], at slot t % page_size inside it.",
        hint="First find which of the sequence's pages (0, 1, 2, ...) it is, then look it up.",
        examples=["row[t // page_size]", "row[(t - t % page_size) // page_size]"],
    ),
    "qc_page_waste": FillIn(
        id="qc_page_waste",
        prompt="A paged cache hands out whole pages of page_size slots. How many slots does a "
               "sequence of n >= 1 tokens leave unused? Use n and page_size.",
        template="unused = ____",
        scenarios=[_tokens(13, 4), _tokens(16, 4), _tokens(1, 16), _tokens(100, 16),
                   _tokens(33, 32)],
        expected=lambda s: -(-s["n"] // s["page_size"]) * s["page_size"] - s["n"],
        explanation="The sequence holds ceil(n / page_size) pages and fills n of their slots, "
                    "so at most page_size - 1 slots are wasted, all in its last page: with "
                    "16-token pages that is under 8% of any sequence of 200 tokens or more, "
                    "against the whole unused maximum length a contiguous reservation wastes.",
        hint="13 tokens in pages of 4 take 4 pages (16 slots); 16 tokens take exactly 4.",
        examples=["math.ceil(n / page_size) * page_size - n", "(-n) % page_size",
                  "(page_size - n % page_size) % page_size"],
    ),
    "qc_gqa_decode": MultipleChoice(
        id="qc_gqa_decode",
        prompt="A model with 40 query heads of 128 is changed from MHA to GQA with 5 K/V heads "
               "(cache in bf16). At 16k tokens of context on an H100, what happens to the time "
               "of one decode step's attention?",
        options=["Nothing: the number of FLOPs is the same",
                 "It grows: each K/V head now serves 8 query heads, so there is more work",
                 "It drops about 8x: the step is memory-bound, and reads 8x fewer bytes",
                 "It drops 40x: only one K/V head is read per group of heads"],
        key="446822dc3c1257d32e35",
        explanation="Decode attention does 2 * H / (G * bytes) FLOPs per byte: 1 for MHA in "
                    "BF16, 8 for this GQA, both far below the H100's ridge of about 295. The "
                    "step's time is the time to read the cache, which shrinks with G: 40 -> 5 "
                    "K/V heads is 8x fewer bytes, with the same FLOPs.",
        why_wrong={0: "The FLOPs are the same, but the step is limited by memory traffic, not "
                      "by FLOPs, far below the ridge point.",
                   1: "Every query head still does the same dot products; sharing a K/V head "
                      "changes what is read, not how much is computed.",
                   3: "5 K/V heads are read, each once: the cache shrinks by H / G = 8, not by "
                      "H = 40 (that would be MQA)."},
    ),
}
