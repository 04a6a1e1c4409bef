"""The lesson 08 answer key against hand-built patterns and a plain-Python oracle."""

import numpy as np
import pytest
import torch

from mhalib.reference import induction_score, previous_token_score


def oracle_previous(w: np.ndarray) -> np.ndarray:
    heads, n, _ = w.shape
    return np.array([sum(w[h, i, i - 1] for i in range(1, n)) / (n - 1) for h in range(heads)])


def oracle_induction(w: np.ndarray, period: int) -> np.ndarray:
    return np.array([sum(w[h, i, i - period + 1] for i in range(period, 2 * period)) / period
                     for h in range(w.shape[0])])


def random_patterns(heads, n, seed=0, causal=True):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(heads, n, n)) * 2
    if causal:
        logits = np.where(np.tri(n, dtype=bool), logits, -np.inf)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


def test_perfect_heads_score_one_and_others_zero():
    n, period = 12, 6
    previous = torch.zeros(n, n)
    previous[0, 0] = 1
    previous[torch.arange(1, n), torch.arange(n - 1)] = 1
    induction = torch.eye(n)
    i = torch.arange(period, n)
    induction[i] = 0
    induction[i, i - period + 1] = 1
    weights = torch.stack([previous, induction, torch.eye(n)])  # (3, N, N)
    assert torch.allclose(previous_token_score(weights), torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(induction_score(weights, period), torch.tensor([0.0, 1.0, 0.0]))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("period", [1, 2, 7, 16])
def test_matches_the_plain_python_oracle(period, causal):
    w = random_patterns(5, 2 * period, seed=period, causal=causal)
    t = torch.from_numpy(w)
    assert np.allclose(previous_token_score(t).numpy(), oracle_previous(w))
    assert np.allclose(induction_score(t, period).numpy(), oracle_induction(w, period))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_half_precision_inputs_keep_their_dtype_and_are_accurate(dtype):
    w = random_patterns(4, 20, seed=3)
    t = torch.from_numpy(w).to(dtype)
    exact = oracle_previous(t.double().numpy())
    score = previous_token_score(t)
    assert score.dtype == dtype and score.shape == (4,)
    assert np.allclose(score.double().numpy(), exact, atol=1e-2)
    assert induction_score(t, 10).dtype == dtype


def test_uniform_causal_head_scores_the_harmonic_mean():
    n = 10
    w = torch.tril(torch.ones(n, n))
    w = (w / w.sum(-1, keepdim=True))[None]  # query i spreads 1 / (i + 1) over keys 0..i
    expected = sum(1 / (i + 1) for i in range(1, n)) / (n - 1)
    assert torch.isclose(previous_token_score(w), torch.tensor(expected, dtype=w.dtype)).all()


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="weights"):
        previous_token_score(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="period=3"):
        induction_score(torch.zeros(2, 8, 8), 3)
    with pytest.raises(TypeError, match="period"):
        induction_score(torch.zeros(2, 8, 8), 4.0)
    with pytest.raises(TypeError, match="weights"):
        previous_token_score(np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match="at least 2"):
        previous_token_score(torch.ones(2, 1, 1))
