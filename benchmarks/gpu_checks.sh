#!/usr/bin/env bash
# Everything the course checks on a CUDA GPU, in one go (a lent GPU machine is held by the
# minute): the CUDA tests, the Triton kernel against SDPA, and `mhalib bench` on the GPU.
# Uses the machine's own python3 (torch with CUDA, triton); writes logs to ${OUT:-gpu_out}.
#   bash benchmarks/gpu_checks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu_out}"; mkdir -p "$out"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
{
  date -u; nvidia-smi -L
  python3 -c "import sys, torch, triton, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, torch.cuda.get_device_name())"
} 2>&1 | tee "$out/info.log"
# 1. the tests that skip without a GPU (and the rest of their folders), the kernel compiled for
#    the real device; the CPU-only compile report of test_triton_compile.py is left out
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs -n 8 --timeout 150 \
  tests/kernels tests/reference tests/nn --ignore=tests/kernels/test_triton_compile.py \
  2>&1 | tee "$out/cuda_tests.log"
# 2. the Triton kernel against SDPA: the course's target shape, then a sweep
timeout 150 python3 benchmarks/triton_vs_sdpa.py --sweep 2>&1 | tee "$out/triton_vs_sdpa.md"
# 3. mhalib bench on the GPU (float16), without the CPU-bound numpy and pure-Python rows
timeout 150 python3 -m mhalib bench --device cuda --no-progress --only "torch explicit" \
  "nn.MultiheadAttention" "mhalib MultiHeadAttention" "mhalib tiled" "mhalib triton" \
  2>&1 | tee "$out/mhalib_bench.md"
