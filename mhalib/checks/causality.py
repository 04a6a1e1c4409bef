"""A decoder's causality, probed (issue 22): step t of a decode may read tokens 0..t only, so
changing the last token must leave every earlier step's output as it was. The learner's
function is called a second time with only the last token changed; the first earlier step
whose output moved says that some step read a later token (round W: every step's query taken
from x[:, -1:]), whatever the code looks like."""

from __future__ import annotations


def first_step_reading_the_last_token(func, output, args, kwargs) -> int | None:
    """The first step whose output changes when only the last token of ``x`` changes (the
    learner's function called again), or None: none does, there is one token, or the second
    call fails. Step t of a decoder reads tokens 0..t only."""
    import torch

    x = args[0]
    if not torch.is_tensor(output) or not torch.is_tensor(x) or x.ndim != 3 or x.shape[1] < 2 \
            or output.shape[:2] != x.shape[:2]:
        return None
    changed = x.clone()
    changed[:, -1] = -1.5 * x[:, -1].flip(-1) + 0.5
    try:
        again = func(changed, *args[1:], **kwargs)
    except Exception:
        return None
    if not torch.is_tensor(again) or again.shape != output.shape:
        return None
    before, after = output[:, :-1].double(), again[:, :-1].double()
    scale = float(before.abs().max()) if before.numel() else 0.0
    moved = ((before - after).abs() > 1e-3 * (1.0 + scale)).flatten(2).any(-1).any(0)  # (N-1,)
    steps = torch.nonzero(moved).flatten()
    return int(steps[0]) if steps.numel() else None
