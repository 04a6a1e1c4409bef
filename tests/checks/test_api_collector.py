"""mhalib.checks.api.check pauses Python's cycle collector while it probes and judges (a full
collection landing inside the visible check was its slowest part), and leaves it as it was."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import mhalib.checks.api as api
from mhalib.checks import CheckFailed


def softmax_right(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_wrong(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum()


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("func", [softmax_right, softmax_wrong])
def test_the_collector_is_off_during_the_check_and_as_it_was_after(monkeypatch, enabled, func):
    seen = []
    real_probe = api.probe

    def probe(*args, **kwargs):
        seen.append(gc.isenabled())
        return real_probe(*args, **kwargs)

    monkeypatch.setattr(api, "probe", probe)
    (gc.enable if enabled else gc.disable)()
    try:
        try:
            api.check("softmax", func, seed=0, quiet=True)
        except CheckFailed:
            assert func is softmax_wrong
        assert seen == [False]
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
