"""Hints of lesson 09 (rotary embeddings): ``rope_angles`` and ``apply_rope``."""

HINTS: dict[str, tuple[str, ...]] = {
    "rope_angles": (
        "Two factors: the position of each row, and one frequency per pair, "
        "theta_i = base^(-2i / head_dim) for i = 0 ... head_dim / 2 - 1. The table of angles is "
        "their outer product: positions down the rows, frequencies across the columns.",

        "Check the frequencies for head_dim = 8 and base 10000: 1, 0.1, 0.01 and 0.001 (the "
        "exponent uses 2i, not i, and it is negative). So position 1 gives the row "
        "[1, 0.1, 0.01, 0.001] and position 0 a row of zeros.",

        "Raise `ValueError` first when `head_dim` is odd (`head_dim % 2`). `positions` is an "
        "integer tensor: convert it to float64 or float32 before multiplying (not to a "
        "half-precision dtype: bfloat16 turns position 257 into 256), make the frequencies on "
        "the device of `positions`, and return float angles of shape (N, head_dim // 2).",

        "`i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)`; "
        "`inv_freq = base ** (-2 * i / head_dim)`; "
        "`return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()`.",
    ),
    "apply_rope": (
        "Cut the last axis into halves, x1 = `x[..., :d // 2]` and x2 = `x[..., d // 2:]`: "
        "feature i pairs with feature i + d/2, not with its neighbour i + 1. Pair i of row n "
        "turns by `angles[n, i]` from your `rope_angles(positions, d, base)`.",

        "The angles are (N, d/2) and the halves (..., N, d/2), so cos and sin of the angles "
        "broadcast against them whatever the leading axes of x. Check the signs on one pair: "
        "with head_dim = 2 the angle is the position itself, in radians, so "
        "`apply_rope(torch.tensor([[1.0, 0.0]]), torch.tensor([1]))` must be "
        "[[0.540, 0.841]] (cos 1, sin 1); the minus sign in the wrong place gives "
        "[[0.540, -0.841]].",

        "Compute in `torch.promote_types(x.dtype, torch.float32)`, put the rotated halves "
        "back together along the last axis (first half first) with `torch.cat`, and cast the "
        "result back to `x.dtype`. Pass `base` on to `rope_angles`, with `positions` on the "
        "device of `x`.",

        "With `cos, sin = torch.cos(angles), torch.sin(angles)` of "
        "`angles = rope_angles(positions.to(x.device), x.shape[-1], base)`: "
        "`y1 = x1 * cos - x2 * sin`, "
        "`y2 = x1 * sin + x2 * cos`, `return torch.cat([y1, y2], dim=-1).to(x.dtype)`.",
    ),
}
