"""An exception raised by the learner's function, explained (issue 22: never a raw exception
alone): which sizes disagree and what they are in the case, or which Python/numpy/torch rule
the line broke, then the exception's last line (and the learner's line, as the probe recorded
it: ``... in your line `scores = q @ k.T```)."""

from __future__ import annotations

import ast
import re

import numpy as np

from mhalib.checks.case_inputs import answer_defaults, parameter_names
from mhalib.checks.explain_broadcast import DOT_T as _DOT_T
from mhalib.checks.explain_broadcast import broadcast as _broadcast
from mhalib.checks.explain_indexing import boolean_index as _boolean_index
from mhalib.checks.explain_indexing import index as _index
from mhalib.checks.explain_reshape import empty_reshape, reshape
from mhalib.checks.explain_sizes import as_many_as as _say
from mhalib.checks.explain_sizes import quotients

_LINE = re.compile(r" in your line `(.*)`$")


def explain_error(exercise, case, error: str, named: dict[str, int],
                  others=()) -> tuple[str, str] | None:
    """``(flag, message)`` for an exception text recorded by the probe, or None (``others``:
    ``(sizes, error text)`` of the other failing cases that raised the same error, which a
    reading of which size is wrong must fit too)."""
    line_match = _LINE.search(error)
    line = line_match.group(1) if line_match else ""
    last = _LINE.sub("", error).strip()
    others = [(their, _LINE.sub("", text).strip()) for their, text in others]
    for rule in _RULES:
        found = reshape(exercise, case, last, line, named, others) if rule is reshape else \
            rule(exercise, case, last, line, named)
        if found:
            flag, reason = found
            where = f" at `{line}`" if line else ""
            return f"raised:{flag}", (f"{reason} (it raised{where}: {last[:160]}, when called "
                                      f"with {case.signature()[:200]})")
    return None


def _numpy_transpose(exercise, case, last, line, named):
    if "axes don't match array" not in last:
        return None
    return ("transpose", "numpy's transpose takes the order of all the axes (x.transpose(0, 2, "
            "1, 3)); transpose(1, 2) with two axes is PyTorch's swap. Give the full order, or "
            "use np.swapaxes(x, 1, 2).")


def _float_size(exercise, case, last, line, named):
    if not ("'float' object cannot be interpreted as an integer" in last
            or re.search(r"must be tuple of (SymInts|ints), but found element of type float", last)
            or "'float' object cannot be interpreted" in last):
        return None
    return ("float_size", "a size computed with '/' is a float (d_model / num_heads = 4.0), "
            "and reshape and range want ints: divide sizes with //.")


def _none_default(exercise, case, last, line, named):
    if "NoneType" not in last:
        return None
    missing = [name for name in _none_defaults(exercise) if name not in case.kwargs]
    positional = len(case.args)
    params = list(parameter_names(exercise))
    missing = [name for name in missing if name not in params[:positional]]
    if not missing:
        return None
    names = " and ".join(missing)
    return ("none_default", f"{names} was left at its default None and then used as a number: "
            f"replace None by the value the contract gives (e.g. `if {missing[0]} is None: ...`) "
            "before using it.")


def _view(exercise, case, last, line, named):
    if "view size is not compatible" not in last:
        return None
    return ("view", ".view needs a tensor whose memory is laid out contiguously; after expand, "
            "transpose or permute it is not: use .reshape (or .contiguous().view).")


_MATMUL = (r"size (\d+) is different from (\d+)",
           r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)",
           r"Expected size for first two dimensions of batch2 tensor to be: \[[\d, ]+\] but got:")


def _matmul(exercise, case, last, line, named):
    if not any(re.search(p, last) for p in _MATMUL) and "core dimension" not in last:
        return None
    batch = re.search(r"batch2 tensor to be: \[(\d+), (\d+)\] but got: \[(\d+), (\d+)\]", last)
    if batch:  # torch's bmm: batch2 is (batch, inner, columns)
        want_batch, want_inner, got_batch, got_inner = (int(g) for g in batch.groups())
        if want_batch != got_batch:
            hint = (": when query heads share K/V heads, each K/V head must be repeated to its "
                    "query heads (repeat_kv) before the product" if "num_kv_heads" in named
                    else ": one of them was split into another number of heads, or lost an axis")
            return "matmul_heads", (
                f"the two operands of a batched matrix product hold different numbers of "
                f"matrices ({_say(want_batch, named)} against {_say(got_batch, named)}){hint}")
        joined = max(want_inner, got_inner) % min(want_inner, got_inner) == 0 if min(
            want_inner, got_inner) else False
        return "matmul_width", (
            f"the inner sizes of a batched matrix product differ ({want_inner} against "
            f"{got_inner}): the two operands' vectors have different widths, so one of them "
            "was built with another last axis than the other"
            + (" (one width is a multiple of the other: tensors joined along the last, "
               "feature axis where another axis was meant, or a head width computed from "
               "another tensor or another number of heads)" if joined else
               " (a head width computed from another tensor, or a split into another number "
               "of heads)"))
    shapes = re.search(_MATMUL[1], last)
    if shapes:
        rows_left, inner_left, inner_right, columns_right = (int(g) for g in shapes.groups())
        odd = _odd_operand(((inner_left,), (inner_right,)), named)  # (the sizes that clash;
        # an outer one can be a flattened batch, B * N, that no size of the case names)
        if odd is not None:
            side, size = odd
            return "matmul", (
                f"a matrix product's {side} operand ({rows_left}x{inner_left} and "
                f"{inner_right}x{columns_right}) has a size of {size}, which is no size of this "
                "case: that operand was cut short or built wrongly (a slice past the end of an "
                "axis, such as columns taken where rows were meant, or a width computed from "
                "the wrong sizes)")
        return "matmul", (
            f"a matrix product's left operand has {_say(inner_left, named)} columns where the "
            f"right one has {_say(inner_right, named)} rows: one of the two is the wrong tensor, "
            f"or has its axes the other way round (is it the right input for this projection, "
            "e.g. x or the latent, the right weight, and the right slice of it?)")
    numbers = re.search(_MATMUL[0], last)
    sizes = ""
    if numbers:
        a, b = int(numbers.group(1)), int(numbers.group(2))
        sizes = f" ({_say(a, named)} against {_say(b, named)})"
    reason = f"a matrix product got operands whose inner sizes differ{sizes}"
    if _DOT_T.search(line):
        reason += (": .T reverses every axis of a batched array, so (B, N, d) becomes "
                   "(d, N, B); swap only the last two (np.swapaxes(k, -1, -2) or "
                   "k.transpose(-2, -1)).")
    elif sliced := _block_on_the_other_axis(line):
        reason += f": {sliced}."
    else:
        reason += ": check which axes each operand has at that line (a transpose missing or "\
                  "one too many, or a tensor split into the wrong number of heads)."
    return "matmul", reason


def _block_on_the_other_axis(line: str) -> str:
    """A product on ``line`` with an operand that is a block of one axis of a matrix and the
    whole of the axis that meets the other operand (``w[:, cols]`` on the right, ``x[rows, :]``
    on the left), in words, with the block taken along the other axis offered (round AF: a
    head's block of w_o taken by its columns, where the head owns w_o's rows); '' for none."""
    try:
        tree = ast.parse(line.strip().rstrip(":"))
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.MatMult):
            continue
        for operand, side, meets in ((node.right, "right", "rows"), (node.left, "left",
                                                                     "columns")):
            if not (isinstance(operand, ast.Subscript) and isinstance(operand.slice, ast.Tuple)
                    and len(operand.slice.elts) == 2):
                continue
            first, second = operand.slice.elts
            if _whole(first) == _whole(second) or _whole(first) != (side == "right"):
                continue  # (only a whole axis that meets the other operand: the product's
                # inner size is then the matrix's full size; a cut one may be meant, v[:L, :])
            name = ast.unparse(operand.value)
            picked = ast.unparse(second if _whole(first) else first)
            cut, kept = ("columns", "rows") if _whole(first) else ("rows", "columns")
            other = f"{name}[{picked}, :]" if _whole(first) else f"{name}[:, {picked}]"
            return (f"`{ast.unparse(operand)}` takes a block of {name}'s {cut} and keeps all "
                    f"its {kept}, and as the {side} operand of a product it meets the other "
                    f"operand with its {meets}: if one head's block of {name} is meant, it is "
                    f"`{other}` here (which axis of a weight a head owns depends on the side of "
                    "the product the weight stands on)")
    return ""


def _whole(node) -> bool:
    return isinstance(node, ast.Slice) and node.lower is None and node.upper is None and \
        node.step is None


def _odd_operand(shapes, named) -> tuple[str, int] | None:
    """``("left" | "right", size)`` when exactly one operand of a failed matrix product has a
    size that no size of the case (or product or quotient of two) names, else None."""
    sizes = {v for v in named.values() if isinstance(v, int) and v > 0}
    known = sizes | {a * b for a in sizes for b in sizes} | set(quotients(named).values())
    odd = [(side, next(n for n in shape if n > 1 and n not in known))
           for side, shape in zip(("left", "right"), shapes)
           if any(n > 1 and n not in known for n in shape)]
    return odd[0] if len(odd) == 1 else None


def _dtype(exercise, case, last, line, named):
    if not re.search(r"expected (scalar type|m1 and m2 to have the same dtype)|dtype", last) \
            or "Expected" not in last and "expected" not in last:
        return None
    return ("dtype", "tensors of two different dtypes met in one operation: make new tensors "
            "with dtype=x.dtype (and device=x.device) so that they follow the inputs.")


# numpy's and torch's spellings of the same thing: a learner moving between the lessons' numpy
# and torch exercises writes one library's name on the other's objects
_NUMPY_FOR_TORCH = {"permute": "x.transpose(0, 2, 1, 3) (numpy's transpose takes every axis)",
                    "unsqueeze": "np.expand_dims(x, axis) or x[:, None]",
                    "masked_fill": "np.where(mask, value, x)", "clone": "x.copy()",
                    "expand": "np.broadcast_to(x, shape)", "repeat_interleave": "np.repeat",
                    "size": "x.shape", "dim": "x.ndim", "numel": "x.size",
                    "softmax": "a softmax written with np.exp", "exp": "np.exp(x)",
                    "float": "x.astype(np.float64)", "view": "x.reshape(...)",
                    "contiguous": "nothing (numpy needs no contiguous())", "to": "x.astype(...)",
                    "tril": "np.tril(x)", "triu": "np.triu(x)", "amax": "x.max(axis=...)",
                    "logsumexp": "a log-sum-exp written with np.log and np.exp",
                    "mT": "np.swapaxes(x, -1, -2)", "flip": "np.flip(x, axis)"}
_TORCH_FOR_NUMPY = {"astype": "x.to(dtype)", "copy": "x.clone()", "swapaxes": "x.transpose(a, b)",
                    "ndim": "x.dim()", "size": "x.numel() (x.size() is the shape in torch)",
                    "tolist": "x.tolist()", "ptp": "x.max() - x.min()",
                    "repeat": "x.repeat_interleave(n, dim) (x.repeat tiles)"}


def _library_mixup(exercise, case, last, line, named):
    on_numpy = re.search(r"'numpy\.ndarray' object has no attribute '(\w+)'", last)
    if on_numpy:
        name = on_numpy.group(1)
        instead = _NUMPY_FOR_TORCH.get(name, "the numpy function of the same idea")
        return ("torch_on_numpy", f"`.{name}` is a torch method, but this exercise gets numpy "
                f"arrays, which do not have it: use {instead}.")
    on_tensor = re.search(r"'Tensor' object has no attribute '(\w+)'", last)
    if on_tensor:
        name = on_tensor.group(1)
        instead = _TORCH_FOR_NUMPY.get(name, "torch's own method for it")
        return ("numpy_on_torch", f"`.{name}` is numpy's, but this exercise gets torch "
                f"tensors: use {instead}.")
    keyword = re.search(r"unexpected keyword argument '(\w+)'|invalid combination of arguments"
                        r".*?\b(keepdims|axis1|axis2|axis)=", last)
    if keyword:
        word = keyword.group(1) or keyword.group(2)
        torch_words = {"keepdim": "keepdims", "dim": "axis", "dim1": "axis1", "dim2": "axis2"}
        numpy_words = {v: k for k, v in torch_words.items()}
        if word in torch_words:
            return ("torch_keyword_in_numpy", f"`{word}=` is torch's keyword; numpy spells it "
                    f"`{torch_words[word]}=` (e.g. x.max(axis=-1, keepdims=True)).")
        if word in numpy_words:
            return ("numpy_keyword_in_torch", f"`{word}=` is numpy's keyword; torch spells it "
                    f"`{numpy_words[word]}=` (e.g. x.amax(dim=-1, keepdim=True)).")
    if re.search(r"\blinear\(", line) and "mat1 and mat2 shapes cannot be multiplied" in last:
        return ("linear_layout", "F.linear(x, w) computes x @ w.T: it takes the weight in "
                "nn.Linear's (out, in) layout, while this course's weights are (d_in, d_out) and "
                "applied as x @ w. Write x @ w (F.linear(x, w.T) also works).")
    if "diagonal(" in line and (
            "diag requires an array of at least two dimensions" in last or
            "Dimension out of range (expected to be in range of [-1, 0]" in last):
        return ("diagonal_for_diag", "diagonal() reads the diagonal out of a matrix (2-D at "
                "least), and the argument here is a vector: to build a diagonal matrix from a "
                "vector, use np.diag(v) (torch.diag(v), or torch.diag_embed for a batch).")
    if re.search(r"\b(diag|outer)\(", line) and re.search(
            r"diag\(\): Supports 1D or 2D tensors|Input must be 1- or 2-d|outer: Expected 1-D "
            r"argument", last):
        return ("one_row_recipe", "diag and outer take one vector (diag also one matrix): on "
                "a stack of rows (..., n) they raise, so a recipe written for one row (diag(p) - "
                "outer(p, p)) does not batch. Build the batch with the axes spelled out: "
                "torch.diag_embed(p) (or p[..., :, None] * eye(n)) for the diagonal matrices, "
                "p[..., :, None] * p[..., None, :] for the outer products.")
    if re.search(r"unsupported ScalarType|can't convert (cuda|mps)|Can't call numpy\(\) on "
                 r"Tensor", last):
        return ("numpy_round_trip", "a numpy function was applied to a torch tensor, which "
                "converts it to a numpy array: that fails for bfloat16 (numpy has no such "
                "type), for tensors on a GPU and for tensors that need gradients; use the torch "
                "function of the same name (torch.repeat_interleave, torch.exp, ...) so the "
                "tensor keeps its dtype and device.")
    return None


def _expand(exercise, case, last, line, named):
    match = re.search(r"expanded size of the tensor \((\d+)\) must match the existing size "
                      r"\((\d+)\) at non-singleton dimension (\d+)", last)
    if not match:
        return None
    want, have, dim = (int(g) for g in match.groups())
    return ("expand", f"expand can only stretch axes of size 1, and dimension {dim} has "
            f"{_say(have, named)} (asked for {_say(want, named)}): insert a new axis of size 1 "
            "where the copies go (x[:, :, None].expand(B, G, n_rep, N, d)), then reshape, or "
            "use repeat_interleave.")


def _assertion(exercise, case, last, line, named):
    if not last.startswith("AssertionError"):
        return None
    return ("assert", "an `assert` in your function failed on a valid input: the condition it "
            "checks is not one the contract promises (check which sizes it compares).")


def _empty_reduction(exercise, case, last, line, named):
    if not re.search(r"reduction dim -?\d+ to have non-zero size|zero-size array to reduction|"
                     r"on tensor with no elements|empty sequence", last):
        return None
    empty = _empty_inputs(exercise, case)
    return ("empty_reduction", "a maximum (or another reduction with no value for nothing) was "
            "taken over an axis with 0 entries: the tensor was empty along it at that point. "
            + (f"This case holds {empty}, which the contract allows: that row has nothing to "
               "reduce, so it needs a guard before the reduction (skip it and give it what "
               "the contract gives an empty row, such as zeros), or a reduction that accepts "
               "an empty axis. Otherwise, " if empty else "Usually ")
            + "a slice or a loop range that is empty (a stop at or before its start, a "
            "bound off by one), or keys read before the new token's own key was added")


def _empty_inputs(exercise, case) -> str:
    """``"a length of 0 (seq_lens)"`` or ``"an input with an axis of 0 entries (k)"``, for
    a case whose inputs hold one (round AH: a sequence of length 0 reached a max), else ''."""
    from mhalib.checks.case_inputs import named_inputs

    try:
        values = named_inputs(exercise, case) if case is not None else {}
    except Exception:
        return ""
    for name, value in values.items():
        shape = getattr(value, "shape", None)
        if shape is not None and 0 in tuple(shape):
            return f"an input with an axis of 0 entries ({name})"
        kind = getattr(getattr(value, "dtype", None), "kind", "")
        if kind in ("i", "u") and len(shape) == 1 and "len" in name and \
                (np.asarray(value) == 0).any():
            return f"a length of 0 ({name})"
    return ""


def _own_refusal(exercise, case, last, line, named):
    if not line.lstrip().startswith("raise") or getattr(case, "must_raise", "") or \
            not last.startswith(("ValueError", "TypeError")):
        return None  # (NotImplementedError: the exercise is not written yet)
    return ("own_refusal", "your own argument check refused a valid input (the contract "
            "accepts this case): the condition that raises is wrong, e.g. written the wrong "
            "way round (num_heads % d_model for d_model % num_heads), comparing the wrong "
            "sizes, or == where != is meant")


def _none_defaults(exercise) -> list[str]:
    return [name for name, value in answer_defaults(exercise).items() if value is None]


_RULES = (_library_mixup, _own_refusal, _numpy_transpose, _float_size, _none_default, _view,
          empty_reshape, reshape, _matmul, _expand, _index, _boolean_index, _empty_reduction,
          _broadcast, _dtype, _assertion)
