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


def test_flops_of_cpu_attention_ops_match_the_accounting_counter():
    from mhalib.accounting.flop_counter import count_flops as accounting_flops

    q, k, v = (torch.randn(2, 3, 8, 4) for _ in range(3))
    attend = torch.nn.functional.scaled_dot_product_attention
    assert count_flops(attend, q, k, v)[1] == accounting_flops(attend, q, k, v).total > 0
    layer = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        ours = count_flops(lambda t: layer(t, t, t, need_weights=False), x)[1]
        theirs = accounting_flops(lambda t: layer(t, t, t, need_weights=False), x).total
    assert ours == theirs > 0


def test_the_measurements_run_in_the_graders_sandbox_copy(tmp_path):
    # the sandbox's copy of mhalib keeps no function body of a computing package
    # (mhalib.grading.stubbing); the product watch once called one, and every decode_with_cache
    # answer, the instructor's included, failed while grading
    import subprocess
    import sys

    from mhalib.grading.sandbox_package import write_answer_free_copy

    copy = write_answer_free_copy(tmp_path / "package", "06-gqa")
    script = ("import torch\nfrom mhalib.checks.work import count_flops\n"
              "q = torch.ones(1, 2, 8, 4)\n"
              "print(count_flops(torch.nn.functional.scaled_dot_product_attention, q, q, q)[1])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin"},
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) == 2 * 2 * (2 * 8 * 8 * 4)
