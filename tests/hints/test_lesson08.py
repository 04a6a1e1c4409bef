"""Every hint of lesson 08 is true: its entries and diagonals checked on examples, its last step
followed."""

from __future__ import annotations

import torch

from mhalib.reference import induction_score as reference_induction
from mhalib.reference import previous_token_score as reference_previous
from tests.hints.claims import passes, says


def perfect_previous_token_head(n: int) -> torch.Tensor:
    weights = torch.zeros(1, n, n)
    weights[0, 0, 0] = 1.0
    weights[0, torch.arange(1, n), torch.arange(n - 1)] = 1.0
    return weights


def test_a_perfect_previous_token_head_scores_1():
    says("previous_token_score", 1, "N - 1 entries", "scores exactly 1")
    assert reference_previous(perfect_previous_token_head(7)).tolist() == [1.0]


def test_torch_diagonal_takes_dims_0_and_1_by_default():
    says("previous_token_score", 2, "dims 0 and 1", "(H, N - 1)")
    assert "diagonal(input, offset=0, dim1=0, dim2=1)" in torch.diagonal.__doc__
    weights = torch.rand(3, 5, 5)
    assert torch.diagonal(weights, offset=-1).shape == (5, 2)  # over (H, N): not what we want
    assert torch.equal(torch.diagonal(weights, offset=-1),
                       torch.diagonal(weights, offset=-1, dim1=0, dim2=1))
    assert torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).shape == (3, 4)


def test_the_last_previous_token_hint_passes():
    says("previous_token_score", -1,
         "torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float().mean(dim=-1)")
    passes("previous_token_score",
           lambda weights: torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).float()
           .mean(dim=-1))


def test_the_entries_for_period_3():
    says("induction_score", 2, "weights[h, 3, 1]", "weights[h, 4, 2]", "weights[h, 5, 3]",
         "weights[h, 3, 0]")
    weights = torch.zeros(1, 6, 6)
    weights[0, 3, 1] = weights[0, 4, 2] = weights[0, 5, 3] = 1.0
    assert reference_induction(weights, 3).tolist() == [1.0]
    duplicate = torch.zeros(1, 6, 6)
    duplicate[0, 3, 0] = duplicate[0, 4, 1] = duplicate[0, 5, 2] = 1.0
    assert reference_induction(duplicate, 3).tolist() == [0.0]


def test_the_diagonal_starts_one_row_too_early():
    says("induction_score", 3, "offset 1 - period", "query period - 1 (key 0)",
         "drop its first entry", "(H, period)")
    period = 4
    weights = torch.rand(2, 2 * period, 2 * period)
    diagonal = torch.diagonal(weights, offset=1 - period, dim1=-2, dim2=-1)
    assert diagonal.shape == (2, period + 1)
    assert torch.equal(diagonal[:, 0], weights[:, period - 1, 0])
    assert torch.allclose(diagonal[:, 1:].mean(dim=-1), reference_induction(weights, period))
    queries = torch.arange(period, 2 * period)
    assert weights[:, queries, queries - period + 1].shape == (2, period)


def test_the_last_induction_hint_passes():
    says("induction_score", -1, "queries = torch.arange(period, 2 * period)",
         "keys = queries - period + 1", "return weights[:, queries, keys].float().mean(dim=-1)")

    def induction_score(weights, period):
        queries = torch.arange(period, 2 * period)
        keys = queries - period + 1
        return weights[:, queries, keys].float().mean(dim=-1)

    passes("induction_score", induction_score)
