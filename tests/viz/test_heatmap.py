"""plot_attention draws exactly the weights it is given, labelled and scaled as documented."""

import numpy as np
import pytest
import torch

from mhalib.viz import plot_attention


def image_of(ax) -> np.ndarray:
    return np.asarray(ax.images[0].get_array())


def test_draws_the_weights_row_per_query():
    weights = np.random.default_rng(0).dirichlet(np.ones(5), size=3)  # (3, 5)
    ax = plot_attention(weights, title="w")
    assert np.array_equal(image_of(ax), weights)
    assert ax.get_title() == "w" and ax.get_xlabel() == "key j" and ax.get_ylabel() == "query i"
    assert ax.images[0].get_clim() == (0.0, 1.0)
    assert len(ax.texts) == 15  # small matrices are annotated


def test_accepts_torch_tensors_and_an_existing_axes():
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    weights = torch.softmax(torch.randn(4, 4, dtype=torch.float16), dim=-1)
    assert plot_attention(weights, ax=ax) is ax
    assert np.allclose(image_of(ax), weights.float().numpy())


def test_tokens_label_keys_and_bottom_right_queries():
    weights = np.full((2, 4), 0.25)
    ax = plot_attention(weights, tokens=["a", "b", "c", "d"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c", "d"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["c", "d"]
    ax = plot_attention(weights, tokens=(["q1", "q2"], ["a", "b", "c", "d"]))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["q1", "q2"]


def test_large_matrices_are_not_annotated():
    ax = plot_attention(np.full((20, 20), 0.05))
    assert len(ax.texts) == 0


@pytest.mark.parametrize("bad", [np.ones((2, 3, 3)), np.ones(4)])
def test_wrong_rank_is_refused_with_the_shape(bad):
    with pytest.raises(ValueError, match=r"weights must have shape \(N_q, N_k\)"):
        plot_attention(bad)


def test_token_count_must_match():
    with pytest.raises(ValueError, match="tokens give"):
        plot_attention(np.ones((3, 3)) / 3, tokens=["a", "b"])
