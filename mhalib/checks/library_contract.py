"""The contract's library for each lesson: numpy in and out for 01-05, torch for 06-12.

A result of the other library is refused even when its values are right, before any mistake
model is asked (the probe notes it in the case's meta: ``torch_output`` from a numpy exercise,
``output_kind == "ndarray"`` from a torch one).
"""

from __future__ import annotations

WRONG_LIBRARY = "but your function returned"


def library_problem(meta: dict) -> str | None:
    """The contract's library broken: a torch tensor from a numpy lesson, a numpy array from a
    torch lesson (the values may even be right)."""
    if meta.get("torch_output"):
        return (f"this is a numpy lesson (np.ndarray in and out), {WRONG_LIBRARY} a "
                "torch.Tensor: build the result with numpy, or return t.numpy()")
    if meta.get("output_kind") == "ndarray":
        return (f"this is a torch lesson (torch.Tensor in and out), {WRONG_LIBRARY} a numpy "
                "array: keep the computation in torch (a numpy round trip also fails for "
                "bfloat16 and for tensors on a GPU)")
    return None
