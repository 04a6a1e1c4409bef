"""Every hint of lesson 07 is true: its numbers recomputed, its steps checked on an example,
its last step followed."""

from __future__ import annotations

import math

import torch

from tests.hints.claims import passes, says


def attend(q, k, v):
    """(out, lse) of q over the keys k, as each set of keys reports them."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)


def merge_attention_states(out_a, lse_a, out_b, lse_b):
    """The last hint of merge_attention_states, followed."""
    compute = torch.promote_types(out_a.dtype, torch.float32)
    lse_a32, lse_b32 = lse_a.to(compute), lse_b.to(compute)
    m = torch.maximum(lse_a32, lse_b32).nan_to_num(neginf=0.0)
    w_a, w_b = torch.exp(lse_a32 - m), torch.exp(lse_b32 - m)
    total = w_a + w_b
    lse = m + torch.log(total)
    total = torch.where(total == 0, 1.0, total)
    out = (w_a / total)[..., None] * out_a.to(compute) + \
        (w_b / total)[..., None] * out_b.to(compute)
    return out.to(out_a.dtype), lse.to(lse_a.dtype)


def test_the_shares_of_the_sum_give_attention_over_both_sets():
    says("merge_attention_states", 1, "w_A = e^(lse_A - lse)", "lse = log(e^lse_A + e^lse_B)",
         "Not half each")
    q, k, v = torch.randn(2, 5, 8, dtype=torch.float64), torch.randn(2, 9, 8,
                                                                     dtype=torch.float64), \
        torch.randn(2, 9, 3, dtype=torch.float64)
    (out_a, lse_a), (out_b, lse_b) = attend(q, k[:, :2], v[:, :2]), attend(q, k[:, 2:], v[:, 2:])
    whole, lse = attend(q, k, v)
    assert torch.allclose(torch.log(torch.exp(lse_a) + torch.exp(lse_b)), lse)
    w_a, w_b = torch.exp(lse_a - lse), torch.exp(lse_b - lse)
    assert torch.allclose(w_a[..., None] * out_a + w_b[..., None] * out_b, whole)
    assert not torch.allclose((out_a + out_b) / 2, whole)


def test_exp_overflows_float32_near_88_7_and_the_shift_avoids_it():
    says("merge_attention_states", 2, "about 88.7", "the larger term is exactly 1")
    assert torch.isfinite(torch.exp(torch.tensor(88.7))) and torch.isinf(torch.exp(
        torch.tensor(88.8)))
    lse_a, lse_b = torch.tensor(1e4), torch.tensor(1e4 - 3)
    m = torch.maximum(lse_a, lse_b)
    assert torch.exp(lse_a - m) == 1 and torch.isfinite(m + torch.log(
        torch.exp(lse_a - m) + torch.exp(lse_b - m)))


def test_empty_sets_as_the_third_hint_says():
    says("merge_attention_states", 3, "e^(-inf - (-inf)) is nan", "log 0 = -inf", "w[..., None]")
    both_empty = torch.tensor(-math.inf)
    assert torch.isnan(torch.exp(both_empty - both_empty))
    assert torch.log(torch.tensor(0.0)) == -math.inf
    zeros, value = torch.zeros(1, 2), torch.tensor([[1.0, 2.0]])
    out, lse = merge_attention_states(zeros, torch.tensor([-math.inf]), zeros,
                                      torch.tensor([-math.inf]))
    assert (out == 0).all() and lse.item() == -math.inf
    out, lse = merge_attention_states(value, torch.tensor([0.5]), zeros,
                                      torch.tensor([-math.inf]))
    assert torch.equal(out, value) and lse.item() == 0.5  # the empty set gets weight 0


def test_the_last_merge_hint_passes():
    says("merge_attention_states", -1,
         "m = torch.maximum(lse_a, lse_b).nan_to_num(neginf=0.0)",
         "w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)", "lse = m + torch.log(total)",
         "out = (w_a / total)[..., None] * out_a + (w_b / total)[..., None] * out_b")
    passes("merge_attention_states", merge_attention_states)


def online_softmax_attention(q, k, v, block_size=64, causal=False, rescale_sum=True,
                             rescale_output=True):
    """The last hint of online_softmax_attention, followed (the rescales can be left out)."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) / math.sqrt(d)
    row_max = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=compute)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros_like(q_scaled)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    for start in range(0, n_k, block_size):
        k_block = k[..., start:start + block_size, :].to(compute)
        v_block = v[..., start:start + block_size, :].to(compute)
        scores = q_scaled @ k_block.transpose(-2, -1)
        if causal:
            key_pos = torch.arange(start, start + k_block.shape[-2])
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        shift = new_max.nan_to_num(neginf=0.0)
        p = torch.exp(scores - shift)
        rescale = torch.exp(row_max - shift)
        row_sum = (row_sum * rescale if rescale_sum else row_sum) + p.sum(dim=-1, keepdim=True)
        acc = (acc * rescale if rescale_output else acc) + p @ v_block
        row_max = new_max
    out = acc / torch.where(row_sum == 0, 1.0, row_sum)
    return out.to(q.dtype)


def test_forgetting_either_rescale_makes_the_output_depend_on_the_block_size():
    says("online_softmax_attention", 2, "*both*", "depends on `block_size`")
    q, k, v = (torch.randn(1, 2, 6, 8, dtype=torch.float64) * 3 for _ in range(3))
    one_block = online_softmax_attention(q, k, v, block_size=6)
    assert torch.allclose(online_softmax_attention(q, k, v, block_size=2), one_block)
    for dropped in ({"rescale_sum": False}, {"rescale_output": False}):
        assert torch.allclose(online_softmax_attention(q, k, v, block_size=6, **dropped),
                              one_block)
        assert not torch.allclose(online_softmax_attention(q, k, v, block_size=2, **dropped),
                                  one_block)


def test_a_row_that_meets_only_hidden_keys_gives_zeros():
    says("online_softmax_attention", 3, "i + N_k - N_q", "start + j", "nan_to_num(neginf=0.0)")
    q = torch.randn(1, 1, 4, 8)
    k, v = torch.randn(1, 1, 2, 8), torch.randn(1, 1, 2, 8)
    out = online_softmax_attention(q, k, v, block_size=1, causal=True)  # 4 queries, 2 keys
    assert (out[..., :2, :] == 0).all() and not torch.isnan(out).any()


def test_the_last_online_softmax_hint_passes():
    says("online_softmax_attention", -1,
         "new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))",
         "shift = new_max.nan_to_num(neginf=0.0)", "rescale = torch.exp(row_max - shift)",
         "row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)",
         "acc = acc * rescale + p @ v_block",
         "out = acc / torch.where(row_sum == 0, 1.0, row_sum)")

    def follows_the_hint(q, k, v, block_size=64, causal=False):
        return online_softmax_attention(q, k, v, block_size, causal)

    passes("online_softmax_attention", follows_the_hint)
