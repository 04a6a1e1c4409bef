import sys, math, numpy as np, torch
import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verify as V
from catalogue import ENTRIES
R = V.reference
rng = np.random.default_rng(123)
n = rng.normal
def T(a, dt="float64"): return V._t(a, dt)
neg = n(size=(3, 5)); neg[1] = -np.inf; neg[0, 2] = -np.inf
allneg = neg.astype(np.float32) * 1
big = (1e4 * n(size=(3, 4))).astype(np.float32)
extra = {
 "softmax": [V.Case((neg,)), V.Case((big,), dtype="float32"), V.Case((neg.T.copy(),), {"axis": 0})],
 "attention": [V.Case(((100 * n(size=(2, 3, 4))).astype(np.float32), (100*n(size=(2, 5, 4))).astype(np.float32), n(size=(2, 5, 3)).astype(np.float32)), dtype="float32"),
               V.Case((n(size=(3, 4)), n(size=(2, 5, 4)), n(size=(2, 5, 3))))],
 "masked_attention": [V.Case((n(size=(4, 8)), n(size=(4, 8)), n(size=(4, 2)), rng.random(size=(2, 4, 4)) < 0.3)),
                      V.Case((30*n(size=(4, 8)), 30*n(size=(5, 8)), n(size=(5, 2)), np.zeros((4, 5), bool)))],
 "merge_attention_states": [V.Case((T(n(size=(3, 4)), "float16"), T(np.array([1e4, -np.inf, 5.0]), "float16"),
                                    T(n(size=(3, 4)), "float16"), T(np.array([-np.inf, -np.inf, -1e4]), "float16")), dtype="float16")],
 "online_softmax_attention": [V.Case(V._qkv(5, 1, 2, 9, 9, 8, scale=30.0), {"block_size": 2, "causal": True}),
                              V.Case(V._qkv(6, 1, 1, 9, 3, 8), {"block_size": 2, "causal": True}),
                              V.Case(V._qkv(7, 1, 1, 5, 5, 8, "bfloat16", scale=10.0), {"block_size": 3}, dtype="bfloat16")],
 "grouped_query_attention": [V.Case(V._gqa_args(9, 1, 5, 16, 4, 2, scale=20.0), {"causal": True})],
 "decode_with_cache": [V.Case(V._gqa_args(8, 1, 5, 16, 4, 2, scale=20.0))],
 "softmax_backward": [V.Case(V._sb_args(9, (3, 6), masked=0.5, empty_rows=(0,), dtype="float16"), dtype="float16"),
                      V.Case(V._sb_args(10, (2, 6), sharp=50.0, masked=0.3, empty_rows=(1,)))],
 "attention_backward": [V.Case(V._ab_args(11, (2,), 6, 3, 4, 5, scale=8.0), {"causal": True}),
                        V.Case(V._ab_args(12, (2,), 5, 5, 4, 5, "bfloat16"), {"causal": True}, dtype="bfloat16")],
 "flash_attention_backward": [V.Case(V._fb_args(13, 1, 2, 9, 3, 4, causal=True, scale=8.0), {"block_size": 2, "causal": True}),
                              V.Case(V._fb_args(14, 1, 1, 7, 7, 4, causal=True, dtype="float32"), {"block_size": 100, "causal": True}, dtype="float32")],
 "apply_rope": [V.Case((T(n(size=(2, 4, 8)), "float32"), V._pos([100000, 5, 77777, 3], torch.int32)), dtype="float32")],
 "paged_attention": [V.Case(V._paged_args(15, 4, 2, 8, 4, [0, 0], 2)), V.Case(V._paged_args(16, 4, 1, 8, 3, [1, 12], 4))],
 "chunked_prefill": [V.Case(V._prefill_args(17, 1, 7, 8, 2, 2, scale=10.0))],
 "mla_attention": [V.Case(V._mla_args(18, 1, 5, 8, 4, 2, 3, scale=10.0))],
}
bad = 0
for e in ENTRIES:
    if e.kind != "right" or e.exercise not in extra: continue
    spec = V.SPECS[e.exercise]
    for c in extra[e.exercise]:
        ok, ref = V._call(getattr(R, e.exercise), c, spec.no_autograd)
        assert ok, (e.exercise, ref)
        ok2, out = V._call(e.func, c, spec.no_autograd)
        why = V.compare(ref, out, c.dtype, spec.check_dtype) if ok2 else repr(out)
        if why:
            bad += 1; print(e.exercise, e.label, why)
print("extra bad:", bad)
