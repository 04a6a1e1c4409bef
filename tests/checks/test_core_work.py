"""mhalib.checks.work: the measurements behind the measured checks, and the torch-only guard."""

import numpy as np
import pytest
import torch

from mhalib.checks.work import LeftTorch, count_flops, torch_only, watch_tensors


def test_flops_count_matrix_products_only():
    a, b = torch.ones(4, 8), torch.ones(8, 3)
    result, flops = count_flops(lambda: (a @ b).exp())
    assert flops == 2 * 4 * 8 * 3 and result.shape == (4, 3)


def test_watch_sees_largest_and_peak_but_not_views_or_inputs():
    x = torch.ones(64, 64)

    def two_products(t):
        first = t @ t  # 4096 floats
        second = first @ t  # 4096 more while first is alive
        return second.T[:3]

    _, watch = watch_tensors(two_products, x)
    assert watch.largest_numel == 64 * 64 and watch.largest_shape == [64, 64]
    assert watch.peak_bytes >= 2 * 64 * 64 * 4
    _, idle = watch_tensors(lambda t: t.T[:, :3], x)
    assert idle.largest_numel == 0 and idle.peak_bytes == 0


@pytest.mark.parametrize("leave", [lambda t: t.numpy(), np.asarray, lambda t: t.tolist(),
                                   lambda t: t.sum().item()],
                         ids=["numpy", "asarray", "tolist", "item"])
def test_torch_only_refuses_every_exit_and_restores_them(leave):
    t = torch.ones(3)
    with torch_only("chunked_prefill"), pytest.raises(LeftTorch, match="chunked_prefill"):
        leave(t)
    assert leave(t) is not None  # restored afterwards


def test_torch_only_allows_python_scalars_for_sizes_and_scales():
    t = torch.ones(3)
    with torch_only("paged_attention"):
        assert (float(t.sum()), int(t[0]), bool(t[0] > 0)) == (3.0, 1, True)
