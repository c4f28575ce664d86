#!/usr/bin/env bash
# One device call for the foundation: bits, GPU tests, timer overhead, a run, the torch table.
# On the GPU machine: source .device/activate.sh && bash benchmarks/device_foundation.sh
set -u
OUT=${OUT:-/tmp/nvgg-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
python benchmarks/competition_bits.py --competition .device/competition 2>&1 | tail -4 | tee "$OUT/bits.txt"
python -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tail -8 | tee "$OUT/pytest_gpu.txt"
python benchmarks/timer_overhead.py 2>&1 | tee "$OUT/timer.txt"
python -m nvgg run --case 3 --backend torch 2>&1 | tee "$OUT/run3.txt"
python -m nvgg compare strategies --backend torch --json "$OUT/torch_compare.json" 2>&1 | tee "$OUT/compare.txt"
