"""Verify the catalogue against the answer key (mhalib.reference).

Run from this folder with the course's interpreter:

    cd /work/catalogues/round_au && /work/main/.venv/bin/python verify.py [lesson01 lesson02 ...]

Without arguments it verifies ``catalogue.ENTRIES``; with lesson module names, only those.

For every exercise a list of seeded cases is drawn that satisfies the contract (edge cases
included: fully masked rows, N_q != N_k, batch and head axes, zero-length sequences, float16 /
bfloat16 where the torch lessons allow any float dtype), plus the cases where the contract
requires a ValueError (or TypeError). Each entry is called on every case, next to the answer key:

- a WRONG entry is verified when at least one case differs from the answer key: a different
  value, shape, dtype (where the lesson fixes the dtype) or type, an exception where the key
  returns, no ValueError/TypeError where the contract requires one, or a violation of the work
  the contract fixes (decode_with_cache projects more than the new token per step;
  online_softmax_attention / chunked_prefill allocate an N x N score-sized tensor or run one
  SDPA call over more than chunk_size queries; flash_attention_backward allocates an
  N_q x N_k tensor, spends more matrix-product FLOPs than one recomputation, 10 N_q N_k d per
  head, or calls a fused SDPA kernel);
- lesson 12 forbids torch.autograd: every lesson-12 call runs with torch.autograd.grad /
  torch.autograd.backward (so Tensor.backward, torch.func.grad / vjp) replaced by functions
  that raise, so an answer that differentiates with autograd differs;
- a RIGHT entry is verified when it agrees with the key on every case within the tolerance of
  the case's dtype and passes the same work checks.

Every entry's signature must also be the contract's (same parameter names and defaults).
``dot_product_variance`` is random: its cases accept any value within 5 standard errors of
d_k that a second call with the same seed reproduces (what the lesson says its test does).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import math
import numbers
import os
import sys
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mhalib.reference as reference  # noqa: E402  (only verify.py may import mhalib)

warnings.filterwarnings("ignore")
VERBOSE = bool(os.environ.get("VERBOSE"))
torch.manual_seed(0)

TOL = {  # (rtol, atol) by the dtype a case is drawn in
    "float64": (1e-4, 1e-5),
    "float32": (1e-4, 1e-5),
    "float16": (2e-2, 2e-2),
    "bfloat16": (6e-2, 6e-2),
    "exact": (0.0, 0.0),
}


@dataclass
class Case:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    dtype: str = "float64"  # picks the tolerance
    must_raise: bool = False  # the contract requires ValueError / TypeError here
    work: dict | None = None  # parameters of the exercise's work check, if any
    tag: str = ""


# ============================================================================ comparison helpers
def _is_tensor(x):
    return isinstance(x, torch.Tensor)


def _to_numpy(x):
    if _is_tensor(x):
        x = x.detach().cpu()
        if x.is_floating_point():
            return x.to(torch.float64).numpy()
        return x.numpy()
    return np.asarray(x)


def compare(ref, out, dtype, check_dtype=False, path="result"):
    """None if ``out`` matches ``ref``, else a short reason."""
    rtol, atol = TOL[dtype]
    if isinstance(ref, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            return f"{path}: expected a tuple of {len(ref)}, got {type(out).__name__}"
        for i, (r, o) in enumerate(zip(ref, out)):
            why = compare(r, o, dtype, check_dtype, f"{path}[{i}]")
            if why:
                return why
        return None
    if isinstance(ref, dict):
        if not isinstance(out, dict):
            return f"{path}: expected a dict, got {type(out).__name__}"
        if set(out) != set(ref):
            return f"{path}: keys {sorted(out)} != {sorted(ref)}"
        for key in ref:
            why = compare(ref[key], out[key], dtype, check_dtype, f"{path}[{key!r}]")
            if why:
                return why
        return None
    if isinstance(ref, bool):
        return None if out is ref else f"{path}: {out!r} != {ref!r}"
    if isinstance(ref, int):  # plain Python ints: type and value exactly
        if type(out) is not int:
            return f"{path}: expected a plain int, got {type(out).__name__} {out!r}"
        return None if out == ref else f"{path}: {out} != {ref}"
    if isinstance(ref, float):
        if isinstance(out, bool) or not isinstance(out, numbers.Real) or _is_tensor(out):
            return f"{path}: expected a float, got {type(out).__name__}"
        if not math.isclose(float(out), ref, rel_tol=1e-9, abs_tol=1e-12):
            return f"{path}: {out!r} != {ref!r}"
        return None
    if _is_tensor(ref):
        if not _is_tensor(out):
            return f"{path}: expected a torch.Tensor, got {type(out).__name__}"
        if tuple(out.shape) != tuple(ref.shape):
            return f"{path}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
        if check_dtype and out.dtype != ref.dtype:
            return f"{path}: dtype {out.dtype} != {ref.dtype}"
        if ref.dtype == torch.bool:
            if out.dtype != torch.bool or not torch.equal(out.cpu(), ref.cpu()):
                return f"{path}: boolean values differ"
            return None
        return _compare_values(_to_numpy(ref), _to_numpy(out), rtol, atol, path)
    if isinstance(ref, np.ndarray):
        if _is_tensor(out):
            return f"{path}: expected an ndarray, got a torch.Tensor"
        try:
            out = np.asarray(out)
        except Exception as exc:  # noqa: BLE001
            return f"{path}: not an array ({exc})"
        if out.shape != ref.shape:
            return f"{path}: shape {out.shape} != {ref.shape}"
        if ref.dtype == np.bool_:
            if out.dtype != np.bool_:
                return f"{path}: dtype {out.dtype}, expected bool"
            return None if np.array_equal(out, ref) else f"{path}: boolean values differ"
        if out.dtype == object or not np.issubdtype(out.dtype, np.number):
            return f"{path}: dtype {out.dtype} is not numeric"
        return _compare_values(ref.astype(np.float64), out.astype(np.float64), rtol, atol, path)
    raise TypeError(f"no comparison for reference type {type(ref)}")


def _compare_values(r, o, rtol, atol, path):
    if np.any(np.isnan(o) & ~np.isnan(r)):
        return f"{path}: NaN where the answer key has numbers"
    fin = np.isfinite(r)
    if np.any(np.isfinite(o) != fin) or np.any(o[~fin & ~np.isnan(r)] != r[~fin & ~np.isnan(r)]):
        return f"{path}: infinities differ"
    diff = np.abs(o[fin] - r[fin])
    scale = max(1.0, float(np.abs(r[fin]).max())) if fin.any() else 1.0
    bad = diff > atol * scale + rtol * np.abs(r[fin])  # atol relative to the result's size
    if np.any(bad):
        return f"{path}: max abs diff {diff.max():.3g} (tol rtol={rtol}, atol={atol})"
    return None


# ============================================================================ work watching
class Watch(TorchDispatchMode):
    """Records the largest tensor any op produces, matmul operands, and SDPA query lengths."""

    def __init__(self):
        super().__init__()
        self.max_numel = 0
        self.matmuls = []  # (a, b) operand pairs of mm / bmm / addmm
        self.sdpa_queries = []  # query lengths of fused attention calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.max_numel = max(self.max_numel, t.numel())
        if name.startswith(("aten.mm", "aten.bmm")):
            self.matmuls.append((args[0], args[1]))
        elif name.startswith("aten.addmm"):
            self.matmuls.append((args[1], args[2]))
        if "scaled_dot_product" in name and args and isinstance(args[0], torch.Tensor):
            self.sdpa_queries.append(args[0].shape[-2])
        return out


def _watched(fn, args, kwargs):
    with Watch() as watch:
        fn(*args, **kwargs)
    return watch


def work_decode(fn, case):
    """Each step may project only the new token: no product with w_q/w_k/w_v over more rows
    than the batch (projecting the prefix again, or all tokens up front)."""
    x, w_q, w_k, w_v = case.args[:4]
    weights = {w.data_ptr() for w in (w_q, w_k, w_v)}
    batch = x.shape[0]
    watch = _watched(fn, case.args, case.kwargs)
    for a, b in watch.matmuls:
        if b.data_ptr() in weights and a.numel() // a.shape[-1] > batch:
            return (f"projects {a.numel() // a.shape[-1]} token rows with w_q/w_k/w_v in one "
                    f"product (batch {batch}): not only the new token")
    return None


def work_online(fn, case):
    q, k = case.args[0], case.args[1]
    limit = q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]
    watch = _watched(fn, case.args, case.kwargs)
    if watch.max_numel >= limit:
        return f"allocates a tensor of {watch.max_numel} elements >= B*H*N_q*N_k = {limit}"
    if watch.sdpa_queries:
        return "calls a fused SDPA kernel instead of the online softmax"
    return None


def work_chunked(fn, case):
    x = case.args[0]
    n = x.shape[1]
    chunk = case.args[6] if len(case.args) > 6 else case.kwargs["chunk_size"]
    watch = _watched(fn, case.args, case.kwargs)
    if watch.max_numel >= n * n:
        return f"allocates a tensor of {watch.max_numel} elements >= N*N = {n * n}"
    if any(nq > chunk for nq in watch.sdpa_queries):
        return f"one SDPA call over {max(watch.sdpa_queries)} > chunk_size={chunk} queries"
    return None


# ============================================================================ case generators
def _rng(seed):
    return np.random.default_rng(seed)


# -- lesson 01 ---------------------------------------------------------------------------------
def cases_softmax():
    r = _rng(1)
    big_rows = np.stack([r.normal(size=6), 5000 + r.normal(size=6), -3000 + r.normal(size=6)])
    with_neg_inf = r.normal(size=(3, 5))
    with_neg_inf[0, 1] = with_neg_inf[2, 0] = with_neg_inf[2, 4] = -np.inf
    return [
        Case((r.normal(size=(3, 5)),), tag="2-D"),
        Case((r.normal(size=(4, 4)),), tag="square"),
        Case((r.normal(size=(2, 3, 4)),), {"axis": 0}, tag="axis=0"),
        Case((r.normal(size=(2, 3, 4)),), {"axis": 1}, tag="axis=1"),
        Case((r.normal(size=(2, 3, 4)),), {"axis": -2}, tag="axis=-2"),
        Case((r.normal(size=(4, 4)) * 3,), {"axis": 0}, tag="square axis=0"),
        Case((1e4 * r.normal(size=(4, 6)),), tag="1e4"),
        Case((np.array([1000.0, 1001.0, 999.0]),), tag="vector 1000"),
        Case((big_rows,), tag="rows thousands apart"),
        Case((with_neg_inf,), tag="-inf entries"),
        Case((r.normal(size=(3, 7)).astype(np.float32),), dtype="float32", tag="float32"),
        Case((r.normal(size=7),), tag="vector"),
    ]


def cases_attention():
    r = _rng(2)
    n = r.normal
    big_q = 2.0 * r.integers(-30, 31, size=(3, 4))
    big_k = 2.0 * r.integers(-30, 31, size=(5, 4))
    return [
        Case((n(size=(5, 16)), n(size=(7, 16)), n(size=(7, 3))), tag="N_q!=N_k, d_v!=d_k"),
        Case((n(size=(2, 3, 5, 16)), n(size=(2, 3, 6, 16)), n(size=(2, 3, 6, 2))),
             tag="batch+heads"),
        Case((n(size=(4, 3, 8)), n(size=(4, 6, 8)), n(size=(4, 6, 5))), tag="one batch axis"),
        Case((n(size=(1, 9)), n(size=(4, 9)), n(size=(4, 9))), tag="N_q=1"),
        Case((n(size=(6, 6)), n(size=(6, 6)), n(size=(6, 6))), tag="square"),
        Case((n(size=(2, 4, 8)).astype(np.float32), n(size=(2, 5, 8)).astype(np.float32),
              n(size=(2, 5, 3)).astype(np.float32)), dtype="float32", tag="float32"),
        Case((big_q, big_k, n(size=(5, 2))), tag="large integer scores"),
    ]


# -- lesson 02 ---------------------------------------------------------------------------------
def cases_split_heads():
    r = _rng(3)
    n = r.normal
    return [
        Case((n(size=(2, 5, 12)), 3)), Case((n(size=(2, 5, 12)), 4)),
        Case((n(size=(2, 5, 12)), 1)), Case((n(size=(2, 5, 12)), 12)),
        Case((n(size=(1, 1, 6)), 2)), Case((n(size=(3, 4, 8)).astype(np.float32), 2),
                                           dtype="float32"),
        Case((n(size=(2, 3, 10)), 4), must_raise=True, tag="10 % 4"),
        Case((n(size=(2, 3, 6)), 4), must_raise=True, tag="6 % 4"),
    ]


def cases_merge_heads():
    r = _rng(4)
    n = r.normal
    return [
        Case((n(size=(2, 3, 5, 4)),)), Case((n(size=(1, 1, 1, 7)),)),
        Case((n(size=(3, 4, 2, 2)),)), Case((n(size=(2, 5, 3, 1)),)),
        Case((n(size=(2, 2, 3, 4)).astype(np.float32),), dtype="float32"),
    ]


def _mha_weights(r, d, scale=1.5):
    return tuple(r.normal(size=(d, d)) * scale / math.sqrt(d) for _ in range(4))


def cases_multi_head_attention():
    r = _rng(5)
    n = r.normal
    return [
        Case((n(size=(2, 5, 8)), *_mha_weights(r, 8), 2)),
        Case((n(size=(2, 5, 8)), *_mha_weights(r, 8), 4)),
        Case((n(size=(1, 6, 8)), *_mha_weights(r, 8), 1)),
        Case((n(size=(2, 4, 8)), *_mha_weights(r, 8), 8)),
        Case((n(size=(3, 1, 6)), *_mha_weights(r, 6), 3), tag="N=1"),
        Case((n(size=(2, 7, 12)), *_mha_weights(r, 12, 3.0), 3), tag="bigger scores"),
        Case(tuple(a.astype(np.float32) for a in (n(size=(2, 5, 8)), *_mha_weights(r, 8)))
             + (2,), dtype="float32"),
        Case((n(size=(2, 3, 6)), *_mha_weights(r, 6), 4), must_raise=True, tag="6 % 4"),
    ]


# -- lesson 03 ---------------------------------------------------------------------------------
def cases_dot_product_variance():
    return [
        Case((1,)), Case((4,)), Case((16,)), Case((64,)), Case((128,)),
        Case((16,), {"n_samples": 20_000, "seed": 3}), Case((8,), {"seed": 7}),
        Case((32,), {"n_samples": 50_000, "seed": 11}),
    ]


def _prob_rows(r, shape, axis=-1, zeros=0.0):
    w = np.exp(2 * r.normal(size=shape))
    if zeros:
        w[r.random(size=shape) < zeros] = 0.0
    s = w.sum(axis=axis, keepdims=True)
    return np.divide(w, s, out=np.zeros_like(w), where=s > 0)


def cases_softmax_entropy():
    r = _rng(6)
    one_hot = np.eye(5)[[0, 3, 3]]
    with_zero_row = _prob_rows(r, (4, 6), zeros=0.3)
    with_zero_row[1] = 0.0
    return [
        Case((_prob_rows(r, (3, 6)),)),
        Case((_prob_rows(r, (2, 4, 5), axis=0),), {"axis": 0}),
        Case((_prob_rows(r, (2, 4, 5), axis=1),), {"axis": 1}),
        Case((_prob_rows(r, (3, 4, 4), axis=-2),), {"axis": -2}),
        Case((_prob_rows(r, (4, 4), axis=0),), {"axis": 0}, tag="square axis=0"),
        Case((one_hot,), tag="one-hot"),
        Case((with_zero_row,), tag="zeros and an all-zero row"),
        Case((np.full((2, 8), 1 / 8),), tag="uniform"),
        Case((_prob_rows(r, (3, 5)).astype(np.float32),), dtype="float32"),
        Case((_prob_rows(r, (7,)),), tag="vector"),
    ]


def cases_softmax_jacobian():
    r = _rng(7)
    return [
        Case((_prob_rows(r, (5,)),)), Case((np.array([1.0]),)), Case((np.eye(4)[2],)),
        Case((np.full(6, 1 / 6),)), Case((_prob_rows(r, (3,)),)),
        Case((_prob_rows(r, (8,)).astype(np.float32),), dtype="float32"),
    ]


# -- lesson 04 ---------------------------------------------------------------------------------
def cases_causal_mask():
    return [Case((4,), dtype="exact"), Case((4, None), dtype="exact"),
            Case((3, 7), dtype="exact"), Case((1, 5), dtype="exact"),
            Case((1,), dtype="exact"), Case((5, 5), dtype="exact"),
            Case((6, 3), dtype="exact", tag="n_q > n_k"), Case((2, 9), dtype="exact")]


def cases_padding_mask():
    return [
        Case((np.array([3, 0, 5]), 5), dtype="exact"),
        Case((np.array([1, 2]), 4), dtype="exact"),
        Case((np.array([6, 6, 6, 6]), 6), dtype="exact"),
        Case((np.array([2]), 7), dtype="exact"),
        Case((np.array([4, 1, 0], dtype=np.int32), 4), dtype="exact"),
    ]


def cases_masked_attention():
    r = _rng(8)
    n = r.normal
    causal = np.arange(6)[None, :] <= np.arange(3)[:, None] + 3  # (3, 6) bottom-right
    pad = (np.arange(4)[None, :] < np.array([4, 2, 0])[:, None])[:, None, None, :]  # (3,1,1,4)
    rand_mask = r.random(size=(2, 5, 6)) < 0.5
    rand_mask[0, 2] = False  # a fully masked row
    rand_mask[1, 4] = False
    top_rows_empty = np.arange(4)[None, :] <= np.arange(6)[:, None] - 2  # first rows empty
    return [
        Case((n(size=(3, 8)), n(size=(6, 8)), n(size=(6, 5)), causal), tag="causal N_q!=N_k"),
        Case((n(size=(3, 2, 4, 8)), n(size=(3, 2, 4, 8)), n(size=(3, 2, 4, 8)), pad),
             tag="padding with a length-0 sequence"),
        Case((n(size=(2, 5, 4)), n(size=(2, 6, 4)), n(size=(2, 6, 3)), rand_mask),
             tag="random with empty rows"),
        Case((n(size=(6, 4)), n(size=(4, 4)), n(size=(4, 2)), top_rows_empty),
             tag="n_q > n_k, empty first rows"),
        Case((n(size=(2, 3, 4, 8)), n(size=(2, 3, 4, 8)), n(size=(2, 3, 4, 8)),
              np.ones((4, 4), dtype=bool)), tag="all allowed"),
        Case(tuple(a.astype(np.float32) for a in (n(size=(2, 3, 8)), n(size=(2, 5, 8)),
                                                  n(size=(2, 5, 4))))
             + (r.random(size=(2, 3, 5)) < 0.6,), dtype="float32"),
        Case((4 * n(size=(4, 16)), 4 * n(size=(4, 16)), n(size=(4, 3)),
              np.tril(np.ones((4, 4), dtype=bool))), tag="large scores, square causal"),
    ]


# -- lesson 05 ---------------------------------------------------------------------------------
def cases_mha_flops():
    return [Case(a, dtype="exact") for a in [(1, 1), (128, 64), (1000, 512), (7, 3),
                                             (2048, 4096), (3, 10)]]


def cases_crossover_seq_len():
    return [Case((d,), dtype="exact") for d in (1, 3, 64, 768, 4096, 5)]


def cases_mha_param_count():
    return [Case((1,), {"bias": True}, dtype="exact"), Case((1,), {"bias": False}, dtype="exact"),
            Case((768,), dtype="exact"), Case((768, False), dtype="exact"),
            Case((512, True), dtype="exact"), Case((3,), {"bias": False}, dtype="exact")]


# ============================================================================ specs
@dataclass
class Spec:
    cases: callable
    check_dtype: bool = False
    work: callable = None
    custom: callable = None  # custom comparison (replaces the answer-key comparison)
    no_autograd: bool = False  # lesson 12: calls run with torch.autograd disabled


def _variance_check(fn, case):
    d_k = case.args[0]
    n_samples = case.kwargs.get("n_samples", 100_000)
    first = fn(*case.args, **case.kwargs)
    if isinstance(first, bool) or not isinstance(first, (numbers.Real, np.floating)):
        if not (isinstance(first, np.ndarray) and first.shape == ()):
            return f"expected a float, got {type(first).__name__}"
    value = float(first)
    se = math.sqrt((2 * d_k * d_k + 6 * d_k) / n_samples)
    if not math.isfinite(value) or abs(value - d_k) > 5 * se:
        return f"{value:.4g} is more than 5 standard errors ({se:.3g}) from d_k={d_k}"
    second = fn(*case.args, **case.kwargs)
    if float(second) != value:
        return f"not reproducible with the same seed: {value!r} then {float(second)!r}"
    return None


SPECS = {
    "softmax": Spec(cases_softmax),
    "attention": Spec(cases_attention),
    "split_heads": Spec(cases_split_heads),
    "merge_heads": Spec(cases_merge_heads),
    "multi_head_attention": Spec(cases_multi_head_attention),
    "dot_product_variance": Spec(cases_dot_product_variance, custom=_variance_check),
    "softmax_entropy": Spec(cases_softmax_entropy),
    "softmax_jacobian": Spec(cases_softmax_jacobian),
    "causal_mask": Spec(cases_causal_mask),
    "padding_mask": Spec(cases_padding_mask),
    "masked_attention": Spec(cases_masked_attention),
    "mha_flops": Spec(cases_mha_flops),
    "crossover_seq_len": Spec(cases_crossover_seq_len),
    "mha_param_count": Spec(cases_mha_param_count),
}


# ============================================================================ torch lessons
TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
                "bfloat16": torch.bfloat16}


def _t(array, dtype="float64"):
    return torch.tensor(np.asarray(array), dtype=TORCH_DTYPES[dtype])


# -- lesson 06 ---------------------------------------------------------------------------------
def cases_repeat_kv():
    r = _rng(9)
    n = r.normal
    return [
        Case((_t(n(size=(2, 3, 4, 5))), 2)), Case((_t(n(size=(2, 3, 4, 5))), 1)),
        Case((_t(n(size=(1, 2, 3, 4))), 4)), Case((_t(n(size=(2, 1, 5, 3))), 3), tag="G=1"),
        Case((_t(n(size=(2, 2, 3, 4)), "float16"), 2), dtype="float16"),
        Case((_t(n(size=(2, 2, 3, 4)), "bfloat16"), 3), dtype="bfloat16"),
        Case((_t(n(size=(2, 3, 0, 4))), 2), tag="N=0"),
        Case((_t(n(size=(3, 2, 2, 2)), "float32"), 2), dtype="float32"),
    ]


def _gqa_args(seed, b, n_tok, d_model, heads, kv_heads, dtype="float64", scale=1.5):
    r = _rng(seed)
    d_head = d_model // heads
    kv = kv_heads * d_head
    x = r.normal(size=(b, n_tok, d_model))
    ws = [r.normal(size=shape) * scale / math.sqrt(d_model)
          for shape in ((d_model, d_model), (d_model, kv), (d_model, kv), (d_model, d_model))]
    return tuple(_t(a, dtype) for a in (x, *ws)) + (heads, kv_heads)


def cases_grouped_query_attention():
    C = Case
    return [
        C(_gqa_args(10, 2, 6, 16, 4, 2), {"causal": False}, tag="GQA"),
        C(_gqa_args(11, 2, 6, 16, 4, 2), {"causal": True}, tag="GQA causal"),
        C(_gqa_args(12, 2, 5, 16, 4, 1), {"causal": True}, tag="MQA causal"),
        C(_gqa_args(13, 2, 5, 16, 4, 4), tag="MHA"),
        C(_gqa_args(14, 1, 7, 16, 8, 2, scale=3.0), {"causal": True}, tag="8 heads, 2 groups"),
        C(_gqa_args(15, 3, 1, 12, 3, 1), {"causal": True}, tag="N=1"),
        C(_gqa_args(16, 2, 5, 16, 4, 2, "float16"), {"causal": True}, dtype="float16"),
        C(_gqa_args(17, 2, 5, 16, 4, 2, "bfloat16"), {"causal": False}, dtype="bfloat16"),
        C(_gqa_args(18, 2, 6, 16, 4, 2, "float32"), {"causal": True}, dtype="float32"),
        C(_gqa_args(19, 1, 4, 12, 4, 3), must_raise=True, tag="num_heads=4, num_kv_heads=3"),
    ]


def cases_kv_cache_bytes():
    return [Case(a, k, dtype="exact") for a, k in [
        ((32, 8, 128, 4096), {}), ((1, 1, 1, 1), {}), ((80, 8, 128, 131072, 4, 2), {}),
        ((2, 4, 64, 10, 3, 4), {}), ((3, 2, 16, 7), {"bytes_per_element": 1}),
        ((5, 1, 8, 9), {"batch_size": 2})]]


def cases_decode_with_cache():
    C = Case
    return [
        C(_gqa_args(20, 2, 6, 16, 4, 2), work={}, tag="GQA"),
        C(_gqa_args(21, 2, 5, 16, 4, 1), work={}, tag="MQA"),
        C(_gqa_args(22, 1, 7, 16, 4, 4, scale=3.0), tag="MHA"),
        C(_gqa_args(23, 3, 1, 12, 3, 1), tag="N=1"),
        C(_gqa_args(24, 2, 5, 16, 4, 2, "float16"), dtype="float16"),
        C(_gqa_args(25, 2, 5, 16, 4, 2, "bfloat16"), dtype="bfloat16"),
        C(_gqa_args(26, 2, 6, 16, 4, 2, "float32"), dtype="float32"),
    ]


# -- lesson 07 ---------------------------------------------------------------------------------
def _split_key_states(seed, lead, n_q, n_a, n_b, d, empty_a=(), empty_b=()):
    """Genuine (out, lse) of the same queries over two disjoint key sets, in float64.

    Rows listed in empty_a / empty_b see no key of that set (lse -inf, out zeros)."""
    r = _rng(seed)
    q = torch.tensor(r.normal(size=lead + (n_q, d)) * 1.5)
    states = []
    for n_k, empty in ((n_a, empty_a), (n_b, empty_b)):
        k = torch.tensor(r.normal(size=lead + (n_k, d)) * 1.5)
        v = torch.tensor(r.normal(size=lead + (n_k, d)))
        s = q @ k.transpose(-2, -1) / math.sqrt(d)
        for row in empty:
            s[..., row, :] = -math.inf
        lse = torch.logsumexp(s, dim=-1)
        w = torch.nan_to_num(torch.exp(s - lse[..., None]), nan=0.0)
        states += [w @ v, lse]
    return tuple(states)


def _cast_states(states, dtype):
    return tuple(t.to(TORCH_DTYPES[dtype]) for t in states)


def cases_merge_attention_states():
    r = _rng(27)
    base = _split_key_states(30, (2, 3), 5, 4, 6, 8)
    shifted = list(_split_key_states(31, (2,), 4, 3, 5, 6))
    shifted[1] = shifted[1] + 1e4
    shifted[3] = shifted[3] + 1e4
    opposite = list(_split_key_states(32, (), 3, 4, 4, 5))
    opposite[1] = opposite[1] + 1e4
    opposite[3] = opposite[3] - 1e4
    random_states = (_t(r.normal(size=(4, 6))), _t(3 * r.normal(size=4)),
                     _t(r.normal(size=(4, 6))), _t(3 * r.normal(size=4)))
    return [
        Case(base, tag="(B, H, N_q, d_v)"),
        Case(shifted, tag="lse + 1e4 on both"),
        Case(tuple(opposite), tag="lse +1e4 and -1e4"),
        Case(_split_key_states(33, (2,), 5, 3, 3, 4, empty_a=(0, 2)), tag="A empty on rows"),
        Case(_split_key_states(34, (2,), 5, 3, 3, 4, empty_a=(1,), empty_b=(1, 3)),
             tag="both empty on a row"),
        Case(random_states, tag="random states, 2-D"),
        Case(_cast_states(_split_key_states(35, (2, 2), 4, 5, 3, 8, empty_b=(2,)), "float32"),
             dtype="float32"),
        Case(_cast_states(_split_key_states(36, (2, 2), 4, 5, 3, 8, empty_a=(1,),
                                            empty_b=(1, 3)), "float16"), dtype="float16"),
        Case(_cast_states(_split_key_states(37, (2, 2), 4, 5, 3, 8, empty_a=(0,)), "bfloat16"),
             dtype="bfloat16"),
        Case(_cast_states(tuple(opposite), "float16"), dtype="float16", tag="float16 +-1e4"),
    ]


def _qkv(seed, b, h, n_q, n_k, d, dtype="float64", scale=1.5):
    r = _rng(seed)
    return (_t(r.normal(size=(b, h, n_q, d)) * scale, dtype),
            _t(r.normal(size=(b, h, n_k, d)) * scale, dtype),
            _t(r.normal(size=(b, h, n_k, d)), dtype))


def cases_online_softmax_attention():
    C = Case
    return [
        C(_qkv(40, 2, 3, 10, 10, 8), {"block_size": 4}),
        C(_qkv(41, 2, 3, 10, 10, 8), {"block_size": 4, "causal": True}, tag="causal"),
        C(_qkv(42, 1, 2, 5, 13, 8), {"block_size": 4, "causal": True}, tag="N_q < N_k causal"),
        C(_qkv(43, 1, 2, 7, 4, 8), {"block_size": 3, "causal": True},
          tag="N_q > N_k causal: empty rows"),
        C(_qkv(44, 2, 2, 12, 12, 4, scale=3.0), {"block_size": 1}, tag="block 1"),
        C(_qkv(45, 2, 2, 9, 9, 8), tag="default block > N"),
        C(_qkv(46, 1, 2, 100, 100, 8), {"causal": True}, tag="default block, ragged"),
        C(_qkv(47, 1, 1, 6, 11, 4), {"block_size": 11}, tag="one block"),
        C(_qkv(48, 2, 2, 10, 10, 8, "float16"), {"block_size": 4, "causal": True},
          dtype="float16"),
        C(_qkv(49, 2, 2, 10, 10, 8, "bfloat16"), {"block_size": 4}, dtype="bfloat16"),
        C(_qkv(50, 2, 2, 10, 10, 8, "float32"), {"block_size": 3, "causal": True},
          dtype="float32"),
        C(_qkv(51, 2, 2, 40, 48, 4), {"block_size": 8}, work={}, tag="work"),
        C(_qkv(52, 2, 2, 40, 48, 4), {"block_size": 8, "causal": True}, work={},
          tag="work causal"),
    ]


SPECS.update({
    "merge_attention_states": Spec(cases_merge_attention_states, check_dtype=True),
    "online_softmax_attention": Spec(cases_online_softmax_attention, check_dtype=True,
                                     work=work_online),
})


# -- lesson 08 ---------------------------------------------------------------------------------
def _patterns(seed, heads, n, causal=True, dtype="float64"):
    """(H, N, N) rows of attention weights (causal or not), peaked differently in each head."""
    r = _rng(seed)
    s = r.normal(size=(heads, n, n)) * r.uniform(0.5, 4.0, size=(heads, 1, 1))
    if causal:
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return _t(w / w.sum(axis=-1, keepdims=True), dtype)


def cases_previous_token_score():
    return [
        Case((_patterns(60, 4, 6),)), Case((_patterns(61, 3, 10, causal=False),)),
        Case((_patterns(62, 1, 2),), tag="N=2"), Case((_patterns(63, 2, 5),)),
        Case((_patterns(64, 3, 8, dtype="float32"),), dtype="float32"),
        Case((_patterns(65, 3, 8, dtype="float16"),), dtype="float16"),
        Case((_patterns(66, 2, 7, causal=False, dtype="bfloat16"),), dtype="bfloat16"),
    ]


def cases_induction_score():
    return [
        Case((_patterns(70, 4, 12), 6)), Case((_patterns(71, 2, 2), 1), tag="period 1"),
        Case((_patterns(72, 3, 16, causal=False), 8)), Case((_patterns(73, 2, 6), 3)),
        Case((_patterns(74, 3, 10, dtype="float32"), 5), dtype="float32"),
        Case((_patterns(75, 2, 8, dtype="float16"), 4), dtype="float16"),
        Case((_patterns(76, 2, 12, causal=False, dtype="bfloat16"), 6), dtype="bfloat16"),
    ]


SPECS.update({
    "previous_token_score": Spec(cases_previous_token_score),
    "induction_score": Spec(cases_induction_score),
})


# -- lesson 09 ---------------------------------------------------------------------------------
def _pos(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def cases_rope_angles():
    r = _rng(80)
    return [
        Case((_pos(list(range(8))), 16)),
        Case((_pos(r.integers(0, 100_000, size=12).tolist()), 64), tag="large positions"),
        Case((_pos([5, 0, 100, 3]), 8), {"base": 500000.0}, tag="unsorted, base 5e5"),
        Case((_pos([0, 1, 2]), 2), tag="head_dim 2"),
        Case((_pos([7, 3, 9, 12], torch.int32), 6), tag="int32, head_dim 6"),
        Case((_pos([], torch.int64), 8), tag="N=0"),
        Case((_pos(list(range(5))), 10), {"base": 100.0}),
        Case((_pos(list(range(4))), 7), must_raise=True, tag="odd head_dim 7"),
        Case((_pos([1, 2]), 3), must_raise=True, tag="odd head_dim 3"),
    ]


def cases_apply_rope():
    r = _rng(81)
    n = r.normal
    return [
        Case((_t(n(size=(2, 3, 5, 8))), _pos(list(range(5)))), tag="(B, H, N, d)"),
        Case((_t(n(size=(5, 16))), _pos(r.integers(0, 1000, size=5).tolist())), tag="2-D"),
        Case((_t(n(size=(4, 6))), _pos([3, 7, 11, 2])), tag="unsorted positions"),
        Case((_t(n(size=(1, 2, 3, 4))), _pos([0, 1, 2])), {"base": 500000.0}),
        Case((_t(n(size=(2, 2, 6, 8)), "float16"), _pos([0, 300, 600, 900, 1500, 2000])),
             dtype="float16", tag="float16, large positions"),
        Case((_t(n(size=(2, 6, 8)), "bfloat16"), _pos([1, 257, 513, 1000, 1500, 2047])),
             dtype="bfloat16", tag="bfloat16, large positions"),
        Case((_t(n(size=(3, 4, 12)), "float32"), _pos([10, 20, 30, 40])), dtype="float32"),
        Case((_t(n(size=(2, 0, 8))), _pos([], torch.int64)), tag="N=0"),
        Case((_t(n(size=(3, 5))), _pos([0, 1, 2])), must_raise=True, tag="odd head_dim"),
    ]


SPECS.update({
    "rope_angles": Spec(cases_rope_angles),
    "apply_rope": Spec(cases_apply_rope, check_dtype=True),
})


# -- lesson 10 ---------------------------------------------------------------------------------
def cases_mla_kv_cache_bytes():
    return [Case(a, k, dtype="exact") for a, k in [
        ((61, 512, 64, 1), {}), ((2, 16, 0, 10, 3, 4), {}), ((1, 1, 1, 1), {}),
        ((27, 512, 64, 4096), {"batch_size": 8}), ((3, 8, 4, 5), {"bytes_per_element": 1}),
        ((60, 512, 64, 128, 2, 2), {})]]


def _mla_weights(r, d_model, d_c, heads, d_head, scale=1.5):
    width = heads * d_head
    return (r.normal(size=(d_model, d_c)) * scale / math.sqrt(d_model),  # w_dkv
            r.normal(size=(d_c, width)) * scale / math.sqrt(d_c),  # w_uk
            r.normal(size=(d_c, width)) / math.sqrt(d_c),  # w_uv
            r.normal(size=(d_model, width)) * scale / math.sqrt(d_model),  # w_q
            r.normal(size=(width, d_model)) / math.sqrt(width))  # w_o


def _mla_args(seed, b, n_tok, d_model, d_c, heads, d_head, dtype="float64", scale=1.5):
    r = _rng(seed)
    x = r.normal(size=(b, n_tok, d_model))
    ws = _mla_weights(r, d_model, d_c, heads, d_head, scale)
    return tuple(_t(a, dtype) for a in (x, *ws)) + (heads,)


def cases_mla_attention():
    C = Case
    return [
        C(_mla_args(90, 2, 6, 16, 8, 4, 6), tag="H*d_head != d_model, causal default"),
        C(_mla_args(91, 2, 6, 16, 8, 4, 6), {"causal": False}, tag="not causal"),
        C(_mla_args(92, 1, 5, 12, 6, 1, 10, scale=3.0), {"causal": True}, tag="one head"),
        C(_mla_args(93, 3, 1, 8, 4, 2, 4), tag="N=1"),
        C(_mla_args(94, 2, 7, 16, 12, 4, 4), tag="H*d_head == d_model"),
        C(_mla_args(95, 2, 5, 16, 8, 4, 6, "float16"), dtype="float16"),
        C(_mla_args(96, 2, 5, 16, 8, 4, 6, "bfloat16"), {"causal": False}, dtype="bfloat16"),
        C(_mla_args(97, 2, 6, 16, 8, 2, 12, "float32"), dtype="float32"),
    ]


def _absorb_args(seed, d_model, d_c, heads, d_head, dtype="float64"):
    r = _rng(seed)
    w_dkv, w_uk, w_uv, w_q, w_o = _mla_weights(r, d_model, d_c, heads, d_head)
    return tuple(_t(a, dtype) for a in (w_uk, w_uv, w_q, w_o)) + (heads,)


def cases_absorb_mla_weights():
    return [
        Case(_absorb_args(100, 12, 8, 3, 5)), Case(_absorb_args(101, 6, 4, 1, 7), tag="H=1"),
        Case(_absorb_args(102, 6, 4, 2, 4)), Case(_absorb_args(103, 16, 16, 4, 4),
                                                  tag="d_c == d_model"),
        Case(_absorb_args(104, 10, 6, 5, 2, "float32"), dtype="float32"),
        Case(_absorb_args(105, 12, 8, 3, 4, "float16"), dtype="float16"),
    ]


SPECS.update({
    "mla_kv_cache_bytes": Spec(cases_mla_kv_cache_bytes),
    "mla_attention": Spec(cases_mla_attention),
    "absorb_mla_weights": Spec(cases_absorb_mla_weights),
})


# -- lesson 11 ---------------------------------------------------------------------------------
def cases_decode_attention_intensity():
    return [Case(a, k, dtype="exact") for a, k in [
        ((32, 8, 128, 4096), {}), ((1, 1, 1, 1), {}), ((64, 64, 64, 10, 4, 2), {}),
        ((8, 2, 16, 5, 3, 1), {}), ((128, 1, 128, 32768), {"bytes_per_element": 4}),
        ((2, 2, 8, 7), {"bytes_per_element": 4}), ((12, 4, 64, 3), {"batch_size": 5}),
        ((6, 3, 32, 100, 2, 1), {})]]


def _paged_args(seed, heads, groups, d, page_size, seq_lens, max_pages, extra_pages=3,
                dtype="float64", table_dtype=torch.int64):
    """A shuffled pool full of large stale values; each sequence's keys in its own pages."""
    r = _rng(seed)
    b = len(seq_lens)
    used = [math.ceil(n / page_size) for n in seq_lens]
    num_pages = sum(used) + extra_pages
    k_pages = 30.0 * r.normal(size=(num_pages, groups, page_size, d))  # stale everywhere
    v_pages = 30.0 * r.normal(size=(num_pages, groups, page_size, d))
    order = r.permutation(num_pages)
    table = r.integers(0, num_pages, size=(b, max_pages))  # arbitrary past each length
    nxt = 0
    for i, n in enumerate(seq_lens):
        pages = order[nxt:nxt + used[i]]
        nxt += used[i]
        table[i, :used[i]] = pages
        for t in range(n):
            p, slot = pages[t // page_size], t % page_size
            k_pages[p, :, slot] = r.normal(size=(groups, d))
            v_pages[p, :, slot] = r.normal(size=(groups, d))
    q = 1.5 * r.normal(size=(b, heads, d))
    return (_t(q, dtype), _t(k_pages, dtype), _t(v_pages, dtype),
            torch.tensor(table, dtype=table_dtype), torch.tensor(seq_lens, dtype=table_dtype))


def cases_paged_attention():
    C = Case
    return [
        C(_paged_args(110, 4, 2, 8, 4, [5, 0, 8], 3), tag="lengths 5, 0, 8"),
        C(_paged_args(111, 2, 2, 4, 3, [1, 7], 4), tag="MHA pages of 3"),
        C(_paged_args(112, 6, 1, 8, 5, [10, 3], 2), tag="MQA, full pages"),
        C(_paged_args(113, 4, 4, 16, 2, [9], 6), tag="B=1"),
        C(_paged_args(114, 4, 2, 8, 4, [6, 2, 11, 4], 3, table_dtype=torch.int32),
          tag="int32 table"),
        C(_paged_args(115, 4, 2, 8, 4, [5, 0, 7], 2, dtype="float16"), dtype="float16"),
        C(_paged_args(116, 4, 2, 8, 4, [3, 8], 2, dtype="bfloat16"), dtype="bfloat16"),
        C(_paged_args(117, 8, 2, 8, 4, [13, 1], 4, dtype="float32"), dtype="float32"),
    ]


def _prefill_args(seed, b, n_tok, d_model, heads, chunk, dtype="float64", scale=1.5):
    r = _rng(seed)
    x = r.normal(size=(b, n_tok, d_model))
    ws = [r.normal(size=(d_model, d_model)) * scale / math.sqrt(d_model) for _ in range(4)]
    return tuple(_t(a, dtype) for a in (x, *ws)) + (heads, chunk)


def cases_chunked_prefill():
    C = Case
    return [
        C(_prefill_args(120, 2, 10, 8, 2, 3), tag="ragged last chunk"),
        C(_prefill_args(121, 2, 10, 8, 2, 1), tag="chunk 1"),
        C(_prefill_args(122, 1, 10, 8, 4, 10), tag="chunk = N"),
        C(_prefill_args(123, 2, 6, 8, 2, 16), tag="chunk > N"),
        C(_prefill_args(124, 2, 12, 12, 3, 4, scale=3.0), tag="N multiple of chunk"),
        C(_prefill_args(125, 1, 7, 12, 3, 4)),
        C(_prefill_args(126, 2, 9, 8, 2, 4, "float16"), dtype="float16"),
        C(_prefill_args(127, 2, 9, 8, 2, 4, "bfloat16"), dtype="bfloat16"),
        C(_prefill_args(128, 2, 11, 8, 2, 3, "float32"), dtype="float32"),
        C(_prefill_args(129, 2, 24, 8, 2, 5), work={}, tag="work"),
        C(_prefill_args(130, 1, 30, 6, 3, 4), work={}, tag="work 2"),
    ]


SPECS.update({
    "decode_attention_intensity": Spec(cases_decode_attention_intensity),
    "paged_attention": Spec(cases_paged_attention),
    "chunked_prefill": Spec(cases_chunked_prefill, work=work_chunked),
})


SPECS.update({
    "repeat_kv": Spec(cases_repeat_kv),
    "grouped_query_attention": Spec(cases_grouped_query_attention),
    "kv_cache_bytes": Spec(cases_kv_cache_bytes),
    "decode_with_cache": Spec(cases_decode_with_cache, work=work_decode),
})


# -- lesson 12 ---------------------------------------------------------------------------------
def _softmax_rows_np(s):
    """Softmax over the last axis in float64; all -inf rows give zeros."""
    top = np.max(s, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def _sb_args(seed, shape, sharp=1.0, masked=0.0, empty_rows=(), grad_scale=1.0,
             dtype="float64"):
    r = _rng(seed)
    s = sharp * r.normal(size=shape)
    if masked:
        s[r.random(size=shape) < masked] = -np.inf
    for row in empty_rows:
        s[row] = -np.inf
    w = _softmax_rows_np(s)
    g = grad_scale * r.normal(size=shape)
    return _t(w, dtype), _t(g, dtype)


def cases_softmax_backward():
    C = Case
    return [
        C(_sb_args(130, (3, 6)), tag="rows"),
        C(_sb_args(131, (7,)), tag="one row (n,)"),
        C(_sb_args(132, (2, 3, 4, 5)), tag="4-D"),
        C(_sb_args(133, (4, 4)), tag="square"),
        C(_sb_args(134, (4, 8), masked=0.4, empty_rows=(2,)),
          tag="masked entries and a fully masked row"),
        C(_sb_args(135, (3, 5), sharp=8.0), tag="peaked rows"),
        C(_sb_args(136, (2, 6), grad_scale=1e4), tag="large upstream gradient"),
        C(_sb_args(137, (5, 1)), tag="n=1"),
        C(_sb_args(138, (2, 3, 9), masked=0.3, dtype="float32"), dtype="float32"),
        C(_sb_args(139, (2, 4, 8), masked=0.3, dtype="float16"), dtype="float16"),
        C(_sb_args(140, (3, 8), sharp=3.0, dtype="bfloat16"), dtype="bfloat16"),
    ]


def _ab_args(seed, lead, n_q, n_k, d, d_v, dtype="float64", scale=1.5):
    r = _rng(seed)
    return (_t(r.normal(size=lead + (n_q, d)) * scale, dtype),
            _t(r.normal(size=lead + (n_k, d)) * scale, dtype),
            _t(r.normal(size=lead + (n_k, d_v)), dtype),
            _t(r.normal(size=lead + (n_q, d_v)), dtype))


def cases_attention_backward():
    C = Case
    return [
        C(_ab_args(150, (2, 3), 5, 7, 8, 4), tag="N_q < N_k, d_v != d"),
        C(_ab_args(151, (2, 3), 5, 7, 8, 4), {"causal": True}, tag="causal N_q < N_k"),
        C(_ab_args(152, (2,), 7, 4, 6, 6), {"causal": True},
          tag="causal N_q > N_k: rows with no key"),
        C(_ab_args(153, (2,), 7, 4, 6, 3), tag="N_q > N_k"),
        C(_ab_args(154, (), 6, 6, 4, 4), tag="2-D square"),
        C(_ab_args(155, (), 6, 6, 4, 5), {"causal": True}, tag="2-D causal square"),
        C(_ab_args(156, (1, 2), 1, 5, 8, 8), {"causal": True}, tag="N_q=1 causal"),
        C(_ab_args(157, (2, 2), 6, 6, 4, 4, scale=3.0), {"causal": True},
          tag="large scores"),
        C(_ab_args(158, (2, 2), 6, 8, 8, 8, "float32"), {"causal": True}, dtype="float32"),
        C(_ab_args(159, (2, 2), 6, 6, 8, 8, "float16"), {"causal": True}, dtype="float16"),
        C(_ab_args(160, (2, 2), 5, 7, 8, 4, "bfloat16"), dtype="bfloat16"),
    ]


def cases_attention_backward_flops():
    return [Case(a, k, dtype="exact") for a, k in [
        ((1, 1), {}), ((128, 64), {}), ((1000, 128), {"recompute": False}), ((7, 3), {}),
        ((4096, 128), {"recompute": True}), ((3, 5, False), {}), ((2, 1), {}),
        ((8192, 64), {"recompute": False}), ((5, 9), {})]]


def _fb_args(seed, b, h, n_q, n_k, d, causal=False, dtype="float64", scale=1.5):
    """q, k, v, out, lse, grad_out of a genuine forward (float64, then cast)."""
    r = _rng(seed)
    q = r.normal(size=(b, h, n_q, d)) * scale
    k = r.normal(size=(b, h, n_k, d)) * scale
    v = r.normal(size=(b, h, n_k, d))
    g = r.normal(size=(b, h, n_q, d))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    if causal:
        s = np.where(np.tril(np.ones((n_q, n_k), dtype=bool), n_k - n_q), s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    top_ = np.where(np.isfinite(top), top, 0.0)
    tot = np.exp(s - top_).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = (np.log(tot) + top_)[..., 0]
    out = _softmax_rows_np(s) @ v
    lse_dtype = "float64" if dtype == "float64" else "float32"
    return (_t(q, dtype), _t(k, dtype), _t(v, dtype), _t(out, dtype), _t(lse, lse_dtype),
            _t(g, dtype))


def cases_flash_attention_backward():
    C = Case
    return [
        C(_fb_args(170, 2, 3, 10, 10, 8), {"block_size": 4}, tag="blocks of 4, ragged"),
        C(_fb_args(171, 2, 3, 10, 10, 8, causal=True), {"block_size": 4, "causal": True},
          tag="causal"),
        C(_fb_args(172, 2, 2, 9, 9, 8), tag="default block > N"),
        C(_fb_args(173, 1, 2, 100, 100, 8, causal=True), {"causal": True},
          tag="default block, ragged, causal"),
        C(_fb_args(174, 2, 2, 12, 12, 4, scale=3.0), {"block_size": 1}, tag="block 1"),
        C(_fb_args(175, 1, 2, 8, 8, 4, causal=True), {"block_size": 8, "causal": True},
          tag="one block causal"),
        C(_fb_args(176, 1, 2, 5, 13, 8, causal=True), {"block_size": 4, "causal": True},
          tag="N_q < N_k causal"),
        C(_fb_args(177, 1, 2, 7, 4, 8, causal=True), {"block_size": 3, "causal": True},
          tag="N_q > N_k causal: rows with no key, lse -inf"),
        C(_fb_args(178, 2, 2, 10, 10, 8, True, "float32"), {"block_size": 3, "causal": True},
          dtype="float32"),
        C(_fb_args(179, 2, 2, 10, 10, 8, True, "float16"), {"block_size": 4, "causal": True},
          dtype="float16"),
        C(_fb_args(180, 2, 2, 10, 10, 8, False, "bfloat16"), {"block_size": 4},
          dtype="bfloat16"),
        C(_fb_args(181, 2, 2, 40, 40, 4), {"block_size": 8}, work={}, tag="work"),
        C(_fb_args(182, 2, 2, 40, 40, 4, causal=True), {"block_size": 8, "causal": True},
          work={}, tag="work causal"),
    ]


def _matmul_flops(a, b):
    """2 * m * k * n (times the batch) of one mm / bmm."""
    return 2 * (a.numel() // a.shape[-1]) * a.shape[-1] * b.shape[-1]


def work_flash_backward(fn, case):
    q, k = case.args[0], case.args[1]
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    limit = b * h * n_q * n_k
    watch = _watched(fn, case.args, case.kwargs)
    if watch.max_numel >= limit:
        return f"allocates a tensor of {watch.max_numel} elements >= B*H*N_q*N_k = {limit}"
    if watch.sdpa_queries:
        return "calls a fused SDPA kernel (recomputes the forward) inside the backward"
    flops = sum(_matmul_flops(x, y) for x, y in watch.matmuls)
    budget = 10 * b * h * n_q * n_k * d
    if flops > 1.05 * budget:
        return (f"matrix products of {flops} FLOPs > one recomputation, "
                f"10 N_q N_k d per head = {budget}")
    return None


SPECS.update({
    "softmax_backward": Spec(cases_softmax_backward, check_dtype=True, no_autograd=True),
    "attention_backward": Spec(cases_attention_backward, check_dtype=True, no_autograd=True),
    "attention_backward_flops": Spec(cases_attention_backward_flops, no_autograd=True),
    "flash_attention_backward": Spec(cases_flash_attention_backward, check_dtype=True,
                                     work=work_flash_backward, no_autograd=True),
})


# ============================================================================ running
class AutogradUsed(RuntimeError):
    pass


class _NoAutograd:
    """Replaces torch.autograd.grad / backward by functions that raise (lesson 12)."""

    def __enter__(self):
        self.saved = (torch.autograd.grad, torch.autograd.backward)

        def banned(*args, **kwargs):
            raise AutogradUsed("torch.autograd used: lesson 12 computes gradients explicitly")

        torch.autograd.grad = banned
        torch.autograd.backward = banned
        return self

    def __exit__(self, *exc):
        torch.autograd.grad, torch.autograd.backward = self.saved
        return False


def _call(fn, case, no_autograd=False):
    args = copy.deepcopy(case.args)
    kwargs = copy.deepcopy(case.kwargs)
    try:
        if no_autograd:
            with _NoAutograd():
                return True, fn(*args, **kwargs)
        return True, fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        return False, exc


def _signature_problem(fn, name):
    want = inspect.signature(getattr(reference, name))
    got = inspect.signature(fn)
    w = [(p.name, p.default) for p in want.parameters.values()]
    g = [(p.name, p.default) for p in got.parameters.values()]
    return None if w == g else f"signature {got} != contract {want}"


def check_entry(entry, cases, ref_results, spec):
    """Return (differs, reasons): differs = some case differs; reasons per differing case."""
    reasons = []
    why = _signature_problem(entry.func, entry.exercise)
    if why:
        return None, [why]
    for i, case in enumerate(cases):
        label = case.tag or f"case {i}"
        if spec.custom is not None:
            try:
                why = spec.custom(entry.func, case)
            except Exception as exc:  # noqa: BLE001
                why = f"raised {type(exc).__name__}: {exc}"
            if why:
                reasons.append(f"{label}: {why}")
            continue
        ok_ref, ref = ref_results[i]
        ok, out = _call(entry.func, case, spec.no_autograd)
        if case.must_raise:
            if ok:
                reasons.append(f"{label}: no ValueError/TypeError where the contract requires one")
            elif not isinstance(out, (ValueError, TypeError)):
                reasons.append(f"{label}: raised {type(out).__name__} instead of ValueError")
            continue
        if not ok:
            reasons.append(f"{label}: raised {type(out).__name__}: {str(out)[:80]}")
            continue
        why = compare(ref, out, case.dtype, spec.check_dtype)
        if why:
            reasons.append(f"{label}: {why}")
            continue
        if case.work is not None and spec.work is not None:
            try:
                why = spec.work(entry.func, case)
            except Exception as exc:  # noqa: BLE001
                why = f"raised under the work watch: {type(exc).__name__}: {exc}"
            if why:
                reasons.append(f"{label}: work: {why}")
    return bool(reasons), reasons


def load_entries(argv):
    if argv:
        entries = []
        for name in argv:
            entries += importlib.import_module(name).ENTRIES
        return entries
    return importlib.import_module("catalogue").ENTRIES


def main(argv):
    entries = load_entries(argv)
    labels = {}
    for e in entries:
        key = (e.exercise, e.label)
        if key in labels:
            raise SystemExit(f"duplicate label {key}")
        labels[key] = e
        if e.exercise not in SPECS:
            raise SystemExit(f"no spec for exercise {e.exercise!r}")
    order = list(dict.fromkeys(e.exercise for e in entries))
    table, failures = [], []
    for name in order:
        spec = SPECS[name]
        cases = spec.cases()
        ref_fn = getattr(reference, name)
        ref_results = []
        for case in cases:
            ok, out = _call(ref_fn, case, spec.no_autograd)
            if case.must_raise:
                assert not ok and isinstance(out, (ValueError, TypeError)), (name, case.tag)
            elif spec.custom is None:
                assert ok, f"answer key raised on {name} {case.tag}: {out!r}"
            ref_results.append((ok, out))
        if spec.work is not None:  # the answer key itself must pass the work checks
            for case in cases:
                if case.work is not None:
                    assert spec.work(ref_fn, case) is None, (name, case.tag)
        if spec.custom is not None:  # the answer key itself must pass a custom check
            for case in cases:
                assert spec.custom(ref_fn, case) is None, (name, case)
        counts = {"wrong": [0, 0], "right": [0, 0]}
        for e in (e for e in entries if e.exercise == name):
            try:
                differs, reasons = check_entry(e, cases, ref_results, spec)
            except Exception:  # noqa: BLE001
                differs, reasons = None, [traceback.format_exc(limit=3)]
            counts[e.kind][1] += 1
            good = differs is True if e.kind == "wrong" else differs is False
            if good:
                counts[e.kind][0] += 1
                if VERBOSE and e.kind == "wrong":
                    print(f"  {name} {e.label}: {reasons[0]}")
            else:
                why = reasons if e.kind == "right" or differs is None else ["agrees on every case"]
                failures.append((name, e.kind, e.label, why))
        table.append((name, counts))
    width = max(len(n) for n in order)
    print(f"{'exercise':<{width}}  wrong verified  right verified")
    tw = tr = vw = vr = 0
    for name, c in table:
        print(f"{name:<{width}}  {c['wrong'][0]:>6} / {c['wrong'][1]:<6} {c['right'][0]:>6} / "
              f"{c['right'][1]:<6}")
        vw, tw = vw + c["wrong"][0], tw + c["wrong"][1]
        vr, tr = vr + c["right"][0], tr + c["right"][1]
    print(f"{'TOTAL':<{width}}  {vw:>6} / {tw:<6} {vr:>6} / {tr:<6}")
    if failures:
        print("\nNOT VERIFIED:")
        for name, kind, label, why in failures:
            print(f"  {name} [{kind}] {label}:")
            for w in why[:3]:
                print(f"      {w}")
        return 1
    print("\nall entries verified")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
