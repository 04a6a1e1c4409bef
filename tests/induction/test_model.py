"""The tiny attention-only transformer: causal, patterns are distributions, head masks delete
heads exactly (checked against editing W_O by hand)."""

import pytest
import torch

from mhalib.induction.model import AttentionOnlyTransformer


@pytest.fixture
def model():
    torch.manual_seed(0)
    return AttentionOnlyTransformer(vocab_size=20, d_model=32, num_layers=2, num_heads=4,
                                    max_len=16).eval()


def test_shapes_and_patterns(model):
    tokens = torch.randint(20, (3, 10))
    logits, patterns = model(tokens, return_weights=True)
    assert logits.shape == (3, 10, 20)
    assert patterns.shape == (2, 3, 4, 10, 10)
    assert torch.allclose(patterns.sum(-1), torch.ones(2, 3, 4, 10))
    assert torch.all(patterns.triu(1) == 0)  # no weight on the future


def test_future_tokens_do_not_change_earlier_logits(model):
    tokens = torch.randint(20, (1, 12))
    changed = tokens.clone()
    changed[0, 8:] = (changed[0, 8:] + 1) % 20
    with torch.no_grad():
        assert torch.allclose(model(tokens)[0, :8], model(changed)[0, :8], atol=1e-6)
        assert not torch.allclose(model(tokens)[0, 8:], model(changed)[0, 8:])


def test_head_mask_equals_deleting_the_heads_slice_of_w_o(model):
    tokens = torch.randint(20, (2, 9))
    mask = torch.ones(2, 4)
    mask[1, 2] = 0.0
    with torch.no_grad():
        masked = model(tokens, head_mask=mask)
        d_head = 32 // 4
        model.layers[1].out.weight[:, 2 * d_head:3 * d_head] = 0.0  # (out, in) layout
        edited = model(tokens)
    assert torch.allclose(masked, edited, atol=1e-6)


def test_all_ones_mask_changes_nothing(model):
    tokens = torch.randint(20, (2, 7))
    with torch.no_grad():
        assert torch.allclose(model(tokens), model(tokens, head_mask=torch.ones(2, 4)))


def test_bad_inputs_name_the_argument(model):
    with pytest.raises(ValueError, match="max_len=16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="head_mask.shape"):
        model(torch.zeros(1, 5, dtype=torch.long), head_mask=torch.ones(4, 2))
    with pytest.raises(ValueError, match="tokens"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="d_model=30 is not divisible by num_heads=4"):
        AttentionOnlyTransformer(10, d_model=30, num_heads=4)
