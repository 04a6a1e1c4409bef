"""The course's default rubric: the share of an exercise's points each diagnosed mistake earns.

Same shape as an instructor's rubric file (see :mod:`mhalib.grading.rubric` and
grading/README.md); an instructor's file changes entries one by one. A mistake not listed
earns 0, and a wrong answer the checker cannot name earns 0 (``unnamed_cap``).

How the shares were chosen:

- **1/2 to 2/3**: the method is right and one detail is off that shows only on some inputs or
  in the form of the result: a missing max shift that only overflows for large logits, an
  off-by-one at an edge, NaN only on empty rows, a right mask of the wrong dtype or shape,
  values right but returned in the wrong order.
- **1/3 to 1/4**: the computation has the right structure but a constant or a term is wrong
  everywhere: a missing or wrong 1/sqrt(d_k) scale, a missing output projection or bias, bits
  instead of nats, a factor forgotten in a count.
- **0**: the concept the exercise teaches is wrong: a transposed or strided head split,
  softmax over the wrong axis, an inverted or ignored mask, the wrong group per head, no
  online rescaling, a score that reads the wrong diagonal, an answer that is not measured; and
  catch-all symptoms that also cover degenerate answers (attention's ``wrong_scale`` matches
  uniform weights, a scale of 0, that ignore q and k).
- ``leaves_torch`` (the same computation moved to numpy or plain Python, where the work checks
  cannot see it) never earns more than the cheapest method slip of its exercise (the N x N
  scores, the prefix recomputed, ...): moving a method slip out of torch must not pay.

Every mistake the checkers had when this was written is rated; one added later earns 0 until
it is rated here (tests/grading/test_rubric.py lists the unrated ones and fails on names the
checkers do not know).
"""

from __future__ import annotations

HALF, THIRD, QUARTER, TWO_THIRDS = "1/2", "1/3", "1/4", "2/3"

DEFAULT_RUBRIC: dict = {
    "unnamed_cap": 0,
    # -- 01 single head ------------------------------------------------------------------------
    "softmax": {"mistakes": {
        "no_max_shift": HALF, "global_max_shift": HALF, "returns_log_probabilities": HALF,
        "axis_not_moved_back": HALF, "shift_by_mean": HALF, "ignores_axis": THIRD,
        "max_no_keepdims": QUARTER, "max_along_wrong_axis": QUARTER,
        "denominator_not_shifted": QUARTER, "sum_no_keepdims": 0, "whole_array": 0,
        "sum_over_whole_array": 0, "no_normalisation": 0, "negated_logits": 0,
        "sum_along_wrong_axis": 0, "wrong_axis": 0, "sigmoid": 0}},
    "attention": {"mistakes": {
        "swapped_outputs": TWO_THIRDS, "scale_by_d_v": HALF, "no_max_shift": HALF,
        "returns_only_output": HALF, "returns_log_weights": HALF, "no_scale": THIRD,
        "scale_by_d_k": THIRD, "scale_multiplied": THIRD, "returns_scores": THIRD,
        "weights_transposed": THIRD, "output_from_scores": QUARTER, "wrong_scale": 0,
        "softmax_over_queries": 0, "scale_after_softmax": 0, "negated_scores": 0,
        "swapped_q_k": 0, "softmax_over_first_axis": 0, "swapped_k_v": 0}},
    # -- 02 multi-head: the layout is the lesson -----------------------------------------------
    "split_heads": {"mistakes": {
        "refusal_without_values": TWO_THIRDS, "refusal_by_assert": TWO_THIRDS,
        "no_argument_check": HALF,
        "heads_last": QUARTER, "heads_folded_into_batch": QUARTER, "no_transpose": 0,
        "heads_before_batch": 0, "features_before_tokens": 0, "strided_heads": 0,
        "sizes_swapped": 0}},
    "merge_heads": {"mistakes": {
        "no_reshape": QUARTER, "tokens_last": QUARTER, "no_transpose": 0, "strided_heads": 0,
        "batch_and_heads_swapped": 0, "heads_summed": 0, "concatenated_along_tokens": 0}},
    "multi_head_attention": {"mistakes": {
        "returns_weights_too": TWO_THIRDS, "residual_added": TWO_THIRDS,
        "scale_by_d_model": HALF, "no_output_projection": THIRD, "no_scale": THIRD,
        "scale_by_d_head": THIRD, "projection_weight_reused": THIRD,
        "causal_mask_applied": QUARTER, "split_without_transpose": 0,
        "merge_without_transpose": 0, "strided_heads": 0, "single_head": 0,
        "transposed_weights": 0, "single_head_d_head_scale": 0, "softmax_over_queries": 0,
        "swapped_q_k": 0, "swapped_k_v": 0, "softmax_over_heads": 0,
        "heads_and_width_swapped": 0}},
    # -- 03 scaling ----------------------------------------------------------------------------
    "dot_product_variance": {"mistakes": {
        "standard_deviation": HALF, "ignores_seed": HALF, "scaled": THIRD,
        "scaled_by_d_k": THIRD, "same_vector": QUARTER, "uniform_draws": QUARTER,
        "exact_value": 0}},
    "softmax_entropy": {"mistakes": {
        "keepdims": TWO_THIRDS, "bits": HALF, "log10": HALF, "nan_for_zeros": HALF,
        "normalised_by_log_n": HALF, "no_minus_sign": THIRD, "ignores_axis": THIRD,
        "wrong_axis": THIRD, "mean_not_sum": QUARTER, "terms_not_summed": QUARTER,
        "softmax_of_weights": QUARTER, "whole_array": 0}},
    "softmax_jacobian": {"mistakes": {
        "sign_flipped": HALF, "softmax_of_p": THIRD, "outer_only": QUARTER,
        "diagonal_only": QUARTER, "diag_p_only": QUARTER, "identity_not_diag_p": QUARTER,
        "elementwise_square": QUARTER, "log_softmax_jacobian": QUARTER, "outer_positive": 0,
        "inner_product": 0}},
    # -- 04 masks ------------------------------------------------------------------------------
    "causal_mask": {"mistakes": {
        "not_boolean": TWO_THIRDS, "strict": HALF, "top_left": HALF, "sees_next": HALF,
        "additive_mask": HALF, "inverted": THIRD, "ignores_n_k": QUARTER,
        "offset_sign_flipped": QUARTER, "square_n_k": QUARTER, "upside_down": 0,
        "transposed": 0}},
    "padding_mask": {"mistakes": {
        "not_boolean": TWO_THIRDS, "off_by_one": HALF, "flat_shape": HALF, "three_dims": HALF,
        "one_short": HALF, "width_from_lengths": HALF, "inverted": THIRD,
        "batch_not_first": THIRD, "masks_queries_and_keys": QUARTER, "left_padding": QUARTER,
        "masks_queries": 0}},
    "masked_attention": {"mistakes": {
        "nan_on_empty_rows": TWO_THIRDS, "finite_fill_on_empty_rows": TWO_THIRDS,
        "shift_by_masked_max": HALF, "no_max_shift": HALF, "returns_only_output": HALF,
        "no_scale": THIRD,
        "mask_after_softmax": 0, "zero_fill": 0, "inverted_mask": 0, "ignores_mask": 0,
        "mask_added": 0, "negated_scores": 0, "softmax_over_queries": 0}},
    # -- 05 flops ------------------------------------------------------------------------------
    "mha_flops": {"mistakes": {
        "multiply_add_as_one": HALF, "no_output_projection": HALF, "causal_halved": HALF,
        "one_projection": THIRD, "one_n2_term": THIRD, "n2_with_d_head": QUARTER}},
    "crossover_seq_len": {"mistakes": {
        "first_n_past_crossover": TWO_THIRDS, "no_output_projection": HALF,
        "one_n2_term": THIRD, "crossover_d_model": QUARTER,
        "no_output_projection_one_n2_term": QUARTER, "inverted_ratio": 0}},
    "mha_param_count": {"mistakes": {
        "no_output_bias": TWO_THIRDS, "no_bias": HALF, "bias_ignores_flag": HALF,
        "one_bias": HALF, "bias_d_squared": QUARTER, "three_matrices": QUARTER,
        "bias_flag_inverted": QUARTER}},
    # -- 06 grouped-query attention and the KV cache -------------------------------------------
    "repeat_kv": {"mistakes": {
        "not_flattened": QUARTER, "tiled_groups": 0, "sequence_axis": 0, "feature_axis": 0,
        "flattened": 0, "batch_axis": 0, "ignores_n_rep": 0}},
    "grouped_query_attention": {"mistakes": {
        "refusal_without_values": TWO_THIRDS, "refusal_by_assert": TWO_THIRDS,
        "no_argument_check": HALF,
        "returns_weights_too": TWO_THIRDS, "causal_excludes_self": HALF,
        "causal_sees_next": HALF, "scale_d_model": HALF, "no_scale": THIRD,
        "no_output_projection": THIRD, "always_causal": THIRD,
        "projection_weight_reused": THIRD, "tiled_groups": 0, "causal_ignored": 0,
        "split_without_transpose": 0, "merge_without_transpose": 0, "softmax_over_queries": 0,
        "swapped_k_v": 0}},
    "kv_cache_bytes": {"mistakes": {
        "wrong_unit": TWO_THIRDS, "ignores_batch_size": HALF, "elements_not_bytes": HALF,
        "fixed_bytes_per_element": HALF, "bits_not_bytes": HALF, "divided_by_8": HALF,
        "no_factor_2": THIRD, "no_layers": THIRD, "per_token": THIRD, "no_kv_heads": THIRD,
        "no_head_dim": THIRD}},
    "decode_with_cache": {"mistakes": {
        "leaves_torch": THIRD, "recomputes_prefix": THIRD, "projects_all_tokens_at_once": THIRD,
        "top_left_causal": THIRD, "excludes_current_token": THIRD, "no_scale": THIRD,
        "not_causal": 0, "tiled_groups": 0}},
    # -- 07 flash attention --------------------------------------------------------------------
    "merge_attention_states": {"mistakes": {
        "returns_lse_first": TWO_THIRDS, "nan_for_empty_rows": TWO_THIRDS, "no_max_shift": HALF,
        "lse_is_max": HALF, "lse_added": THIRD, "weights_on_feature_axis": QUARTER,
        "weights_not_normalised": 0, "averaged_outputs": 0, "outputs_taken_as_unnormalised": 0,
        "swapped_weights": 0}},
    "online_softmax_attention": {"mistakes": {
        "nan_for_empty_rows": TWO_THIRDS, "no_max_subtraction": HALF, "drops_last_block": HALF,
        "causal_top_left": HALF, "leaves_torch": THIRD, "builds_full_scores": THIRD,
        "no_final_division": THIRD, "no_scale": THIRD, "rescale_sum_only": QUARTER,
        "rescale_output_only": QUARTER, "causal_block_local_keys": QUARTER, "no_rescale": 0,
        "rescale_inverted": 0, "causal_ignored": 0, "blocks_combined_wrongly": 0,
        "depends_on_block_size": 0}},
    # -- 08 what heads learn -------------------------------------------------------------------
    "previous_token_score": {"mistakes": {
        "keepdim": TWO_THIRDS, "wraps_query_0": HALF, "includes_query_0": HALF,
        "sum_not_mean": HALF, "not_averaged": QUARTER, "single_number": QUARTER,
        "next_token": 0, "self_token": 0, "mean_over_heads": 0, "two_back": 0}},
    "induction_score": {"mistakes": {
        "keepdim": TWO_THIRDS, "includes_query_period_minus_1": HALF, "divides_by_n": HALF,
        "skips_first_query": HALF, "sum_not_mean": HALF, "shifted_query_range": HALF,
        "all_queries": THIRD, "key_after_next": QUARTER, "not_averaged": QUARTER,
        "single_number": QUARTER, "duplicate_token": 0, "mean_over_heads": 0, "transposed": 0,
        "key_before_duplicate": 0}},
    # -- 09 rotary position embeddings ---------------------------------------------------------
    "rope_angles": {"mistakes": {
        "odd_head_dim_accepted": TWO_THIRDS, "odd_head_dim_by_assert": TWO_THIRDS,
        "pairs_from_one": HALF, "base_ignored": HALF,
        "both_halves": HALF, "exponent_i_over_d": THIRD, "exponent_doubled": THIRD,
        "ignores_positions": THIRD, "transposed": THIRD, "positive_exponent": QUARTER}},
    "apply_rope": {"mistakes": {
        "refusal_without_values": TWO_THIRDS, "refusal_by_assert": TWO_THIRDS,
        "no_argument_check": HALF,
        "angles_in_low_precision": TWO_THIRDS, "dtype_changed": TWO_THIRDS,
        "base_not_passed": HALF, "rotates_backwards": THIRD, "ignores_positions": THIRD,
        "exponent_i_over_d": THIRD, "adjacent_pairs": QUARTER,
        "rotate_half_without_minus": QUARTER, "tables_repeat_interleave": QUARTER,
        "first_half_only": QUARTER, "second_half_unrotated": QUARTER}},
    # -- 10 multi-head latent attention --------------------------------------------------------
    "mla_kv_cache_bytes": {"mistakes": {
        "no_rope_key": HALF, "ignores_batch_size": HALF, "elements_not_bytes": HALF,
        "fixed_bytes_per_element": HALF, "latent_doubled": THIRD, "no_layers": THIRD,
        "k_and_v_doubled": QUARTER}},
    "mla_attention": {"mistakes": {
        "scale_d_c": HALF, "scale_d_model": HALF, "causal_excludes_self": HALF,
        "no_scale": THIRD, "always_causal": THIRD, "no_output_projection": THIRD,
        "strided_heads": 0, "split_without_transpose": 0, "causal_ignored": 0,
        "values_from_w_uk": 0, "swapped_up_projections": 0, "softmax_over_queries": 0}},
    "absorb_mla_weights": {"mistakes": {
        "outputs_swapped": TWO_THIRDS, "scale_folded_in": HALF, "heads_not_first": HALF,
        "q_latent_transposed": THIRD, "o_latent_transposed": THIRD, "w_uk_not_transposed": 0,
        "strided_heads": 0, "cross_head_sum": 0}},
    # -- 11 serving ----------------------------------------------------------------------------
    "decode_attention_intensity": {"mistakes": {
        "integer_division": TWO_THIRDS, "bits_not_bytes": HALF, "fixed_bytes_per_element": HALF,
        "keys_only": THIRD, "scores_flops_only": THIRD, "per_query_head": QUARTER}},
    "paged_attention": {"mistakes": {
        "nan_for_empty_sequence": TWO_THIRDS, "drops_last_key": HALF, "one_key_too_many": HALF,
        "reads_whole_last_page": THIRD, "no_scale": THIRD, "tiled_groups": 0, "pages_sorted": 0,
        "page_slot_swapped": 0}},
    "chunked_prefill": {"mistakes": {
        "leaves_torch": THIRD, "top_left_mask": HALF, "causal_excludes_self": HALF,
        "drops_last_partial_chunk": HALF, "builds_n_by_n": THIRD, "no_scale": THIRD,
        "no_output_projection": THIRD, "not_chunked": THIRD, "chunk_ignores_cache": 0,
        "no_mask_in_chunk": 0}},
    # -- 12 the backward pass: written by hand, so autograd (or hiding from the watch) earns 0 -
    "softmax_backward": {"mistakes": {
        "row_term_no_keepdim": HALF, "sign_flipped": HALF, "arguments_swapped": HALF,
        "row_term_is_mean": THIRD, "row_term_unweighted": QUARTER, "diagonal_only": QUARTER,
        "row_term_dropped": 0, "row_term_wrong_axis": 0, "uses_autograd": 0,
        "measurement_evaded": 0}},
    "attention_backward": {"mistakes": {
        "grad_q_grad_k_swapped": TWO_THIRDS, "nan_for_empty_rows": TWO_THIRDS,
        "grad_q_unscaled": HALF, "grad_k_unscaled": HALF, "causal_top_left": HALF,
        "no_scale_in_backward": THIRD, "no_scale": THIRD, "p_not_transposed": THIRD,
        "grad_k_not_transposed": THIRD, "row_term_dropped": 0, "row_term_over_queries": 0,
        "mask_ignored": 0, "softmax_over_queries": 0, "uses_autograd": 0,
        "measurement_evaded": 0}},
    "attention_backward_flops": {"mistakes": {
        "recompute_ignored": HALF, "multiply_add_as_one": HALF, "recompute_full_forward": THIRD,
        "forward_added": THIRD, "three_products": THIRD, "recompute_flag_inverted": QUARTER}},
    "flash_attention_backward": {"mistakes": {
        "grad_q_unscaled": HALF, "grad_k_unscaled": HALF, "leaves_torch": THIRD,
        "builds_full_scores": THIRD, "too_many_products": THIRD, "lse_base_2": THIRD,
        "scores_unscaled": THIRD, "no_scale_in_backward": THIRD,
        "causal_block_local_keys": QUARTER, "delta_from_grad_out": 0, "delta_per_block": 0,
        "softmax_within_block": 0, "grad_q_overwritten": 0, "grad_kv_overwritten": 0,
        "mask_forgotten_in_recompute": 0, "blocks_combined_wrongly": 0,
        "depends_on_block_size": 0, "uses_autograd": 0, "measurement_evaded": 0}},
}
