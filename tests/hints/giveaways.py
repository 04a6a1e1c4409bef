"""The decisive expressions of every exercise's answer: what no hint before the last may say.

The rule (tests/hints/test_no_giveaway.py): a hint before the last may name the idea, the steps
in words, the shapes, the pitfalls and the numbers of an example to check against, but not the
*code* of the answer, the expression that, typed into the function, leaves nothing to work
out. It is enforced two ways, both on the hint's text without spaces or backticks:

1. no statement of the answer key (the solution cell in ``solutions/``, comments dropped) whose
   expression has at least :data:`MIN_EXPRESSION_CHARS` characters appears in it, unless the
   lesson's own text already writes that expression (``torch.promote_types(x.dtype,
   torch.float32)``, ``np.random.default_rng(seed)``: the lesson gives them, a hint may repeat
   them). Shorter expressions are plumbing such as ``d_model // num_heads``, or are covered by 2;
2. none of the patterns below matches it. They are written by hand for each exercise because a
   hint can spell the answer with other names than the solution's (``2 * d_model`` or
   ``N = 2 * d``); each must match the answer key or the exercise's last hint, so that none of
   them is a pattern that could never fire.

The last hint, nearly the answer, must contain one of them: that is where the code is given.
A new lesson adds its exercises here (the tests say which ones are missing).
"""

MIN_EXPRESSION_CHARS = 20

# exercise -> regular expressions, matched against the hint's text without whitespace/backticks
GIVEAWAYS: dict[str, tuple[str, ...]] = {
    "softmax": (r"x-np\.max\(x", r"e/np\.sum\(e,axis=axis"),
    "attention": (r"q@np\.swapaxes\(k,-1,-2\)/np\.sqrt", r"returnweights@v,weights"),
    "split_heads": (r"transpose\(0,2,1,3\)",),
    "merge_heads": (r"transpose\(0,2,1,3\)\.reshape",),
    "multi_head_attention": (r"split_heads\(x@w_q", r"merge_heads\(weights@v\)@w_o"),
    "dot_product_variance": (r"np\.sum\(q\*k,axis=1\)", r"np\.var\(np\.sum"),
    "softmax_entropy": (r"np\.where\(p>0,p,1", r"-np\.sum\(p\*np\.log"),
    "softmax_jacobian": (r"np\.outer\(p,p\)", r"np\.diag\(p\)-"),
    "causal_mask": (r"np\.arange\(n_q\)\[:,None\]\+\(n_k-n_q\)", r"key_pos<=query_pos",
                    r"k=n_k-n_q\)"),
    "padding_mask": (r"np\.arange\(n\)\[None,:\]<", r"keep\[:,None,None,:\]"),
    "masked_attention": (r"np\.where\(np\.isfinite\(top\),top,0", r"where=total>0"),
    "mha_flops": (r"6\*n\*d\*d", r"2\*n\*n\*d"),
    "crossover_seq_len": (r"N=2\*d", r"return2\*d_model"),
    "mha_param_count": (r"4\*d_model\*d_model", r"ifbiaselse"),
    "repeat_kv": (r"repeat_interleave\(x,n_rep,dim=1\)", r"\.expand\(B,G,n_rep"),
    "grouped_query_attention": (r"repeat_kv\(split\(x@w_k", r"\.reshape\(B,N,d_model\)@w_o"),
    "kv_cache_bytes": (r"2\*num_layers\*num_kv_heads\*head_dim",),
    "decode_with_cache": (r"torch\.cat\(k_cache", r"k_cache\.append\(split\(x_t@w_k"),
    "merge_attention_states": (r"m\+torch\.log\(total\)", r"\(w_a/total\)\[\.\.\.,None\]"),
    "online_softmax_attention": (r"row_sum\*rescale", r"acc\*rescale"),
    "previous_token_score": (r"diagonal\(weights,offset=-1,dim1=-2,dim2=-1\)",),
    "induction_score": (r"keys=queries-period\+1", r"weights\[:,queries,keys\]"),
    "rope_angles": (r"base\*\*\(-2\*i/head_dim\)", r"\[:,None\]\*inv_freq"),
    "apply_rope": (r"x1\*cos-x2\*sin", r"torch\.cat\(\[y1,y2\]"),
    "mla_kv_cache_bytes": (r"num_layers\*\(kv_lora_rank\+rope_head_dim\)",),
    "mla_attention": (r"split\(c@w_uk\)", r"reshape\(B,N,num_heads\*d_head\)@w_o"),
    "absorb_mla_weights": (r"w_q\[:,cols\]@w_uk\[:,cols\]\.T", r"w_uv\[:,cols\]@w_o\[cols\]",
                           r"einsum\("),
    "decode_attention_intensity": (r"4\*batch_size\*num_heads", r"flops/cache_bytes"),
    "paged_attention": (r"k_pages\[pages,:", r"repeat_interleave\(H//G"),
    "chunked_prefill": (r"masked_fill\(~causal_mask", r"k_cache\[:,:,:stop\]"),
    "softmax_backward": (r"\(grad_weights\*weights\)\.sum\(dim=-1,keepdim=True\)",
                         r"weights\*\(grad_weights-row\)"),
    "attention_backward": (r"grad_s@k/sqrt\(d\)", r"grad_s\.transpose\(-2,-1\)@q",
                           r"p\.transpose\(-2,-1\)@grad_out"),
    "attention_backward_flops": (r"4x2N\^2d", r"4\+\(1ifrecompute"),
    "flash_attention_backward": (r"grad_q\+=grad_s@k_blk", r"p\.transpose\(-2,-1\)@grad_out"),
}
