"""Readings of an element-by-element operation whose operands do not line up (issue 22),
part of :mod:`mhalib.checks.explain_errors`: a .T on a batched tensor, the last, shorter block
sized as a full one, query heads against K/V heads, a size that belongs to another axis, two
rows compared where one must be a column."""

from __future__ import annotations

import math
import re

from mhalib.checks.case_inputs import parameter_names
from mhalib.checks.explain_sizes import as_many_as as _say
from mhalib.checks.explain_sizes import names_of

DOT_T = re.compile(r"\w\.T\b")  # x.T on a line: every axis reversed, not the last two


def broadcast(exercise, case, last, line, named):

    torch_style = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b "
                            r"\((\d+)\) at non-singleton dimension (\d+)", last)
    numpy_style = re.search(r"could not be broadcast together with shapes (.*)", last)
    if (torch_style or numpy_style) and DOT_T.search(line) and any(
            getattr(arg, "ndim", 0) >= 3 for arg in case.args):
        return ("broadcast", "two tensors combined element by element (or a batched matrix "
                "product's batch axes) do not line up, on a line that uses .T: .T reverses "
                "every axis of a batched tensor, so (B, H, N, d) becomes (d, N, H, B) and its "
                "batch axes no longer match; swap only the last two (x.transpose(-2, -1), "
                "x.mT, or np.swapaxes(x, -1, -2)).")
    if torch_style:
        a, b, dim = (int(g) for g in torch_style.groups())
        ragged = _last_block(a, b, named)
        if ragged:
            return ("broadcast", f"two tensors combined element by element disagree on "
                    f"dimension {dim}: {a} against {b}. {ragged}")
        heads, kv_heads = named.get("num_heads"), named.get("num_kv_heads")
        if isinstance(heads, int) and isinstance(kv_heads, int) and heads != kv_heads and \
                {a, b} == {heads, kv_heads}:
            return ("broadcast", f"two tensors combined element by element disagree on "
                    f"dimension {dim}: {_say(a, named)} against {_say(b, named)}. If these are "
                    "the query heads against the K/V heads, the K/V heads were not repeated "
                    "to the query heads: each serves num_heads // num_kv_heads of them "
                    "(repeat_interleave along the head axis, or enable_gqa=True in "
                    "F.scaled_dot_product_attention); otherwise one of the two was split into "
                    "the wrong number of heads or built along the wrong axis.")
        other = b if a == heads else a
        if dim == 1 and isinstance(heads, int) and "num_kv_heads" in parameter_names(exercise) and \
                heads in (a, b) and {a, b} != {heads} and kv_heads not in (a, b) and all(
                    "head" in name for name in names_of(other, named)):
            # (another axis's size there, such as N, says an axis moved: the reading below)
            return ("broadcast", f"two tensors combined element by element disagree on "
                    f"dimension 1, the head axis: {_say(a, named)} against {_say(b, named)}. "
                    f"The query side has num_heads heads, so {other} is a head count gone "
                    "wrong on the keys' or values' side: split into num_heads heads where "
                    "num_kv_heads belongs (and then repeated), repeated too many times, or a "
                    "cache grown along the head axis (torch.cat(..., dim=1)) where its tokens "
                    "are dim 2.")
        # (what the sizes also fit, said as "if": a transpose, a .T or a matrix product
        # permutes axes, and permuted neighbours fit these readings too, rounds K, L and T)
        fits = " ".join(f for f in (_one_axis_off(a, b, dim, named),
                                    _features_kept(a, b, dim, named), _pairs_meant(dim)) if f)
        return ("broadcast", f"two tensors combined element by element disagree on dimension "
                f"{dim}: {_say(a, named)} against {_say(b, named)}; one of them was built along "
                "the wrong axis or with the wrong count (heads, groups, tokens), or lost an axis "
                "to a sum, mean or max without keepdim=True, or is a value per row (a row's "
                "maximum, sum or log-sum-exp, an lse passed in) used without its trailing axis "
                "(x[..., None]), so that its other axes line up against the wrong ones."
                + (f" {fits}" if fits else ""))
    if numpy_style:
        same_side = _new_axis_on_the_same_side(numpy_style.group(1)) or _flattened(
            numpy_style.group(1))
        if same_side:
            return ("broadcast", same_side)
        return ("broadcast", f"two arrays combined element by element have shapes that do not "
                f"broadcast ({numpy_style.group(1)[:80]}); a keepdims=True, a new axis or a "
                "transpose is missing.")
    return None


def _new_axis_on_the_same_side(shapes_text: str) -> str:
    """Two shapes (``(1,5) (1,3)``) whose axes of size 1 stand in the same places, and that
    would broadcast with one of them reversed: each operand got its new axis on the same side,
    where an outer comparison wants one as a column and the other as a row (round AA:
    ``arange(n)[None, :] < lengths[None, :]``)."""
    shapes = [tuple(int(n) for n in re.findall(r"\d+", one))
              for one in re.findall(r"\(([\d, ]*)\)", shapes_text)]
    if len(shapes) != 2 or len(shapes[0]) != 2 or len(shapes[1]) != 2:
        return ""
    (a, b) = shapes
    ones_a, ones_b = [n == 1 for n in a], [n == 1 for n in b]
    if ones_a != ones_b or sum(ones_a) != 1 or a == b:
        return ""
    return (f"two arrays combined element by element have shapes {a} and {b}: both have their "
            "new axis of size 1 on the same side, so their other sizes meet and clash. To pair "
            "every entry of one with every entry of the other, make one a column and the other "
            "a row (x[:, None] against y[None, :]).")


def _tensor_axis(name: str) -> tuple[str, int | None]:
    """``("x", 2)`` for a size named ``x.shape[2]``; ``(name, None)`` for any other name."""
    match = re.fullmatch(r"(\w+)\.shape\[(\d+)\]", name)
    return (match.group(1), int(match.group(2))) if match else (name, None)


def _one_axis_off(a: int, b: int, dim: int, named: dict[str, int]) -> str:
    """When one of ``a``, ``b`` is an input's own size at the clashing dimension ``dim``
    (``x.shape[dim]``) and the other that input's size one axis over: the other operand's axis
    may stand one place off (round AG: cos of (N, 1, d/2) against x (B, H, N, d/2), its N met x's
    H; a per-row weight (B, H, N) against out (B, H, N, d) meets d), in words; else ''."""
    for own, other in ((a, b), (b, a)):
        for name in names_of(own, named):
            tensor, axis = _tensor_axis(name)
            if axis != dim:
                continue
            for j in (dim - 1, dim + 1):
                if f"{tensor}.shape[{j}]" not in names_of(other, named):
                    continue
                if j > dim:
                    cause = ("an axis of size 1 put after it (x[:, None], unsqueeze(-2), a "
                             "reshape to (N, 1, ...)) pushes it there")
                else:
                    cause = ("an axis of size 1 missing after it (x[..., None], unsqueeze(-1), "
                             "keepdim=True left out) leaves it there")
                return (f"If the operand with {other} entries (as many as {tensor}'s axis "
                        f"{j}) is meant to line up with {tensor}'s axis {j}, it stands one place "
                        f"off, at axis {dim}: broadcasting lines axes up from the right, so "
                        f"{cause}.")
    return ""


def _pairs_meant(dim: int) -> str:
    """At dimension 0, two vectors may have been meant as a table of every pair (round AT:
    positions (N,) times frequencies (head_dim/2,), where positions[:, None] belongs)."""
    if dim != 0:
        return ""
    return ("If both operands are vectors (one value per position, one per frequency, say) and "
            "a table of every pair was meant, put one of them on a new axis: a[:, None] * "
            "b[None, :] (torch.outer(a, b)).")


def _features_kept(a: int, b: int, dim: int, named: dict[str, int]) -> str:
    """When one of ``a``, ``b`` is an input's feature width (its last axis, at the clashing
    ``dim``): a value meant per row that may have kept its features (round AG: delta =
    (dO * O).sum(dim=-2, keepdim=True), (..., 1, d), against the (..., N_q, block) scores), or
    a per-row value that kept the other operand's last axis (round AN: the
    running sum l = p.sum(dim=-2, keepdim=True), (..., 1, block), against the (..., N, d)
    output), in words; else ''."""
    for own in (a, b):
        for name in names_of(own, named):
            tensor, axis = _tensor_axis(name)
            # (at dimension 0 the operand has no row axis before: a vector's only axis is no
            # feature width; round AT's positions (N,) against the frequencies)
            if axis != dim or dim == 0 or f"{tensor}.shape[{dim + 1}]" in named:
                continue
            other = b if own == a else a
            other_names = [n for n in names_of(other, named) if n != name]
            called = f" ({other_names[0]})" if other_names else ""
            # (an axis just before the features, the rows themselves, is one place off, a
            # per-row value that lost its trailing axis: round AL's l.sum(-1) without keepdim)
            rows = any(_tensor_axis(n)[1] == dim - 1 for n in other_names)
            kept = (f" If instead the operand with {other}{called} on the last axis is the "
                    "per-row value, it kept that axis: it was reduced over another axis "
                    "(dim=-2) where dim=-1 belongs." if other > 1 and not rows else "")
            return (f"If the operand with {own} ({name}, the feature width) on the last "
                    "axis is meant to hold one value per row (a row sum, maximum or log-sum-exp "
                    "kept with keepdim=True), it still has its features: a sum over another "
                    "axis (dim=-2) where the features (dim=-1) belong leaves them." + kept)
    return ""


def _flattened(shapes_text: str) -> str:
    """Two shapes, one of them a single axis holding as many entries as the other (``(5,5)
    (25,)``): a table of every pair made flat (round AF: ``np.kron(p, p)`` for the outer
    product, (n * n,) where (n, n) belongs)."""
    shapes = [tuple(int(n) for n in re.findall(r"\d+", one))
              for one in re.findall(r"\(([\d, ]*)\)", shapes_text)]
    if len(shapes) != 2 or sorted(len(shape) for shape in shapes)[0] != 1:
        return ""
    flat, table = sorted(shapes, key=len)
    if len(table) < 2 or min(table) < 2 or flat[0] != math.prod(table):
        return ""
    return (f"two arrays combined element by element have shapes {table} and {flat}: the "
            f"second holds the {' x '.join(map(str, table))} entries of the first in one flat "
            "axis. A table of every pair was made flat: np.kron of two vectors gives their "
            "products in a row (so do ravel, flatten and reshape(-1)); the outer product is "
            "np.outer(a, b), or a[:, None] * b[None, :].")


def _last_block(a: int, b: int, named: dict[str, int]) -> str:
    """What a block size against a smaller size says when the smaller is what a length leaves
    after whole blocks (``N % block_size``): the last, shorter block was sized as a full one
    (round V: ``arange(start, start + block_size)`` against the last block's 8 keys)."""
    for name, size in named.items():
        if not name.endswith("_size") or size not in (a, b) or a == b:
            continue
        rest = b if a == size else a
        for length_name, length in named.items():
            if 0 < rest < size < length and length % size == rest:
                return (f"{size} is {name} and {rest} is what {length_name} = {length} leaves "
                        f"after whole blocks of {size} ({length} % {size}): the last block is "
                        f"shorter, and something sized by {name} (arange(start, start + "
                        f"{name}), a mask or a buffer of {name}) must take the block's own "
                        f"length, min(start + {name}, {length_name}) - start.")
    for name, size in named.items():  # the last block's end against the length itself
        if not name.endswith("_size") or not isinstance(size, int) or size < 2:
            continue
        for length_name, length in named.items():
            if not isinstance(length, int) or length % size == 0 or length not in (a, b):
                continue
            end = -(-length // size) * size  # (where the last block ends unclipped)
            if {a, b} == {end, length}:
                return (f"{end} is where the last block ends, {end - size} + {name} = "
                        f"{end - size} + {size}, past {length_name} = {length}: the last block "
                        f"was given a full {name} of positions; clip its end, "
                        f"min(start + {name}, {length_name}).")
    return ""
