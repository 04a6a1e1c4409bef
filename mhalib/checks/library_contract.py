"""The contract's library for each lesson: numpy in and out for 01-05, torch for 06-12.

A result of the other library is refused even when its values are right, before any mistake
model is asked (the probe notes it in the case's meta: ``torch_output`` from a numpy exercise,
``output_kind == "ndarray"`` from a torch one).
"""

from __future__ import annotations

WRONG_LIBRARY = "but your function returned"


def library_problem(meta: dict, counts: bool = False) -> str | None:
    """The contract's library broken: a torch tensor from a numpy lesson, a numpy array from a
    torch lesson (the values may even be right); for ``counts`` (plain Python ints due), a
    tensor said as a count that is not an int."""
    if meta.get("torch_output") and counts:  # (round AI: torch.prod's 0-d tensor, in lesson 06)
        return (f"counts are plain Python ints, {WRONG_LIBRARY} a torch.Tensor (torch.prod, "
                "torch.sum or torch.tensor give a 0-d tensor, not a number): compute with "
                "Python ints (math.prod, *, **), or return int(...) of the tensor")
    if meta.get("torch_output"):
        return (f"this is a numpy lesson (np.ndarray in and out), {WRONG_LIBRARY} a "
                "torch.Tensor: build the result with numpy, or return t.numpy()")
    if meta.get("output_kind") == "ndarray":
        return (f"this is a torch lesson (torch.Tensor in and out), {WRONG_LIBRARY} a numpy "
                "array: keep the computation in torch (a numpy round trip also fails for "
                "bfloat16 and for tensors on a GPU)")
    return None
