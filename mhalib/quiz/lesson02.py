"""Quick checks of lesson 02 (multi-head attention)."""

from __future__ import annotations

from mhalib.quiz.question import FillIn, MultipleChoice


def _model(d_model: int, num_heads: int) -> dict:
    return {"d_model": d_model, "num_heads": num_heads}


QUESTIONS = {
    "qc_head_dim": FillIn(
        id="qc_head_dim",
        prompt="Each head gets an equal share of the model width. Fill in the width of one head.",
        template="d_head = ____",
        scenarios=[_model(768, 12), _model(12288, 96), _model(512, 8), _model(4096, 32)],
        expected=lambda s: s["d_model"] / s["num_heads"],
        explanation="The heads split d_model between them: H * d_head == d_model, so GPT-2 "
                    "small (768 wide, 12 heads) has heads of 64 and GPT-3 (12288, 96 heads) "
                    "heads of 128.",
        hint="H heads side by side must add up to d_model.",
        examples=["d_model // num_heads", "d_model / num_heads"],
    ),
    "qc_gpt3_heads": MultipleChoice(
        id="qc_gpt3_heads",
        prompt="GPT-3 175B has d_model = 12288 and 96 heads of width 128. Someone doubles the "
               "heads to 192 and keeps d_model fixed. What changes in an attention layer?",
        options=["Its parameter count doubles: twice as many heads, twice the weights",
                 "Its FLOPs double: every head computes its own N x N scores",
                 "Each head is 64 wide instead of 128; the parameters (4 d_model^2) and the "
                 "matrix-product FLOPs stay the same",
                 "It can attend over twice as many tokens"],
        key="2c41725d4e0cfb2e3ccc",
        explanation="W_Q, W_K, W_V and W_O stay d_model x d_model whatever H is; the heads are "
                    "only a reshape of their outputs. Twice the heads means half the width per "
                    "head: 192 * 64 = 96 * 128 = 12288, so the matrix-product FLOPs of the "
                    "scores, 2 N^2 d_model, do not change either. What does grow: there are "
                    "192 N x N score matrices instead of 96, so the softmax work and the memory "
                    "of stored scores (B, H, N, N) double.",
        why_wrong={0: "The four projections are d_model x d_model for any H: 4 * 12288^2.",
                   1: "Each score costs d_head multiply-adds, and d_head halves as H doubles: "
                      "the product FLOPs stay put (only the per-score softmax work doubles, "
                      "a small part of the total).",
                   3: "The number of tokens is set by the sequence, not by the heads."},
    ),
    "qc_split_transpose": MultipleChoice(
        id="qc_split_transpose",
        prompt="y = x.reshape(B, N, H, d_head). Which call turns y into the (B, H, N, d_head) "
               "layout of split_heads?",
        options=["y.transpose(0, 1, 3, 2)", "y.transpose(0, 2, 1, 3)", "y.transpose(2, 0, 1, 3)",
                 "None: reshape x straight to (B, H, N, d_head) instead"],
        key="042470bef32ea497e977",
        explanation="Axis 2 (the heads) moves next to the batch axis and the tokens follow: "
                    "(0, 2, 1, 3). Each head then sees every token, with its own d_head "
                    "features.",
        why_wrong={0: "That swaps the heads with d_head: (B, N, d_head, H).",
                   2: "That puts the heads in front of the batch: (H, B, N, d_head).",
                   3: "A plain reshape reads the (N, d_model) block in memory order and mixes "
                      "tokens into heads."},
    ),
}
