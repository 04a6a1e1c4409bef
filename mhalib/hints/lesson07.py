"""Hints of lesson 07 (online softmax and flash attention): ``merge_attention_states`` and
``online_softmax_attention``."""

HINTS: dict[str, tuple[str, ...]] = {
    "merge_attention_states": (
        "Both outputs are already normalised, so the merge is a weighted average of `out_a` "
        "and `out_b` in which each set counts in proportion to its share of the total sum of "
        "exponentials: w_A = e^(lse_A - lse) and w_B = e^(lse_B - lse), with "
        "lse = log(e^lse_A + e^lse_B). Not half each.",

        "Never compute e^lse_A itself: in float32 `torch.exp` gives `inf` from about 88.7 "
        "on. Subtract m = max(lse_A, lse_B) first: lse = m + log(e^(lse_A - m) + e^(lse_B - m)),"
        " every exponent is at most 0, and the larger term is exactly 1. Work in "
        "`torch.promote_types(out_a.dtype, torch.float32)` and cast back at the end.",

        "Empty sets: a set with lse = -inf gets weight e^(-inf) = 0, as it should. Where both "
        "are -inf, m is -inf and e^(-inf - (-inf)) is nan: subtract 0 there instead. Then "
        "both weights are 0 and their sum is 0: the merged row must be zeros with lse = "
        "log 0 = -inf, so divide by that sum only where it is positive. The weights are "
        "(..., N_q); `w[..., None]` lines them up with the outputs (..., N_q, d_v).",

        "In float32 or wider: `m = torch.maximum(lse_a, lse_b).nan_to_num(neginf=0.0)`; "
        "`w_a, w_b = torch.exp(lse_a - m), torch.exp(lse_b - m)`; `total = w_a + w_b`; "
        "`lse = m + torch.log(total)`; `total = torch.where(total == 0, 1.0, total)`; "
        "`out = (w_a / total)[..., None] * out_a + (w_b / total)[..., None] * out_b`; return "
        "`out` in `out_a`'s dtype and `lse` in `lse_a`'s.",
    ),
    "online_softmax_attention": (
        "It is section 2's loop written for whole tensors: for each block of keys "
        "`k[..., start:start + block_size, :]` (the last block may be shorter), compute that "
        "block's scores, of shape (B, H, N_q, block), update the running max m, running sum "
        "and running output with the three update rules, and divide the output by the sum "
        "once, after the last block.",

        "The rescale is the whole trick: when the max moves from m to m', multiply *both* the "
        "old running sum and the old running output by e^(m - m') before adding the new "
        "block's terms e^(s - m'). Forget either and the output depends on `block_size`: the "
        "checker also runs your function with all the keys in one block to see that.",

        "Start from m = -inf (shape (B, H, N_q, 1)), a sum of 0 and an output of 0. Scale `q` "
        "by 1 / sqrt(d) once, before the loop. With `causal=True` compare absolute positions: "
        "query i sits at i + N_k - N_q, key j of the block at `start + j`; a later key gets "
        "the score -inf. While a row has met only hidden keys, m' is -inf: subtract 0 instead "
        "(`nan_to_num(neginf=0.0)`), and at the end return zeros where the sum is still 0.",

        "Per block: `new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))`; "
        "`shift = new_max.nan_to_num(neginf=0.0)`; `p = torch.exp(scores - shift)`; "
        "`rescale = torch.exp(row_max - shift)`; "
        "`row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)`; "
        "`acc = acc * rescale + p @ v_block`; `row_max = new_max`. After the loop "
        "`out = acc / torch.where(row_sum == 0, 1.0, row_sum)`, cast to `q`'s dtype.",
    ),
}
