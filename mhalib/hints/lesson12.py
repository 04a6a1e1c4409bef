"""Hints of lesson 12 (the backward pass of attention): ``softmax_backward``,
``attention_backward``, ``attention_backward_flops`` and ``flash_attention_backward``."""

HINTS: dict[str, tuple[str, ...]] = {
    "softmax_backward": (
        "Each entry of a softmax row depends on every input of that row, so the gradient of "
        "input j collects a term from every output i: dL/ds_j = sum_i g_i dp_i/ds_j, with "
        "lesson 03's dp_i/ds_j = p_i (delta_ij - p_j). Work row by row along the last axis.",

        "Split the sum. The delta_ij part gives p_j g_j. The - p_i p_j part gives "
        "- p_j sum_i g_i p_i: the same number for the whole row (a weighted average of the "
        "upstream gradient), times p_j. No (n, n) matrix is needed.",

        "The row term is one number per row: sum the product of the two arguments over the "
        "last axis and keep that axis (`keepdim=True`) so that it lines up with the row. A row "
        "of zero weights then gives zeros by itself.",

        "`row = (grad_weights * weights).sum(dim=-1, keepdim=True)`, then "
        "`weights * (grad_weights - row)`; compute in at least float32 and return "
        "`weights`' dtype.",
    ),
    "attention_backward": (
        "Redo the forward first (scores, mask, softmax), keeping p, then walk back through the "
        "three steps in reverse order: out = p v, p = softmax(s), s = q k^T / sqrt(d). Each "
        "step's gradient is one product or your softmax_backward.",

        "For out = p v: grad_v = p^T grad_out (out sums over keys, so its gradient with "
        "respect to v sums over queries) and grad_p = grad_out v^T. Check the shapes: grad_v is "
        "(..., N_k, d_v) like v, grad_p is (..., N_q, N_k) like p.",

        "grad_s = p * (grad_p - rowsum(grad_p * p)) along the keys. The scores carry the factor "
        "1/sqrt(d), so it appears in both remaining gradients: grad_q uses grad_s with k, "
        "grad_k uses grad_s transposed with q. With causal=True the mask goes into the "
        "recomputed scores, bottom-right as in lesson 04; a row with no visible key needs p = 0, "
        "not NaN.",

        "`grad_q = grad_s @ k / sqrt(d)`, `grad_k = grad_s.transpose(-2, -1) @ q / sqrt(d)`, "
        "`grad_v = p.transpose(-2, -1) @ grad_out`; return them in this order, cast to the "
        "inputs' dtype.",
    ),
    "attention_backward_flops": (
        "Count matrix products only, 2 FLOPs per multiply-add: an (N, d) @ (d, N) or an "
        "(N, N) @ (N, d) product costs 2 N^2 d. List the products the backward runs.",

        "Without recomputation the backward has four of them, one per gradient it builds: "
        "grad_v, grad_p, grad_q and grad_k. With recompute=True the probabilities were not "
        "kept, so the scores q k^T must be computed once more (only the scores: the forward's "
        "p v is not needed).",

        "4 x 2 N^2 d, plus one more 2 N^2 d when recompute is True: 2x or 2.5x the forward's "
        "4 N^2 d. Return a plain int.",
    ),
    "flash_attention_backward": (
        "Loop over the keys in blocks, as in lesson 07, but with no running max: the forward "
        "already found each row's normaliser, its log-sum-exp lse, so a block's exact "
        "probabilities come straight from its scores: p = exp(s - lse).",

        "The softmax gradient's row term sums over all the keys of a row, which one block does "
        "not have. Take it from the forward's output instead, once, before the loop: "
        "delta = rowsum(grad_out * out), which equals rowsum(grad_p * p).",

        "Per block of keys: recompute s (scaled, masked by absolute key positions if causal), "
        "p = exp(s - lse[..., None]), grad_p = grad_out @ v_blk^T, grad_s = p * (grad_p - "
        "delta). That block's grad_v and grad_k are finished right there; grad_q receives a "
        "share from every block, so add to it. Where lse is -inf (a row with no visible key), "
        "make p zero rather than exp(-inf - (-inf)).",

        "`grad_v[..., blk, :] = p.transpose(-2, -1) @ grad_out`; "
        "`grad_k[..., blk, :] = grad_s.transpose(-2, -1) @ q / sqrt(d)`; "
        "`grad_q += grad_s @ k_blk / sqrt(d)`: five products per block, nothing N x N.",
    ),
}
