#!/usr/bin/env bash
# The GPU checks of a session, in one short run on a machine with a CUDA GPU (no network: its
# own torch, PYTHONPATH=.): the CUDA tests, the big preset's MFU (eager, compiled, two micro-batch
# sizes), and a CUDA sweep of the reference workload for the GPU sample report.
#     OUT=/tmp/gpu scripts/gpu_check.sh        # results under $OUT
set -u
export PYTHONPATH=.
OUT=${OUT:-/tmp/gpu}
mkdir -p "$OUT"
{ nvidia-smi -L; python -c "import torch; print('torch', torch.__version__)"
  python -c "import numpy, jinja2, matplotlib; print('report deps ok')"; } > "$OUT/machine.txt" 2>&1
timeout 80 python -m pytest -q -m cuda -p no:cacheprovider tests/test_strategies.py \
    tests/test_main_grad.py tests/test_runner.py tests/test_core.py > "$OUT/cuda_tests.txt" 2>&1
for batch in 64 256; do
    timeout 40 python -m benches mfu --preset big --batch-size "$batch" --min-len 32 --max-len 128 \
        --fused-only >> "$OUT/mfu.jsonl" 2>> "$OUT/mfu.err"
done
timeout 100 python -m benches mfu --preset big --batch-size 256 --min-len 32 --max-len 128 \
    --compile >> "$OUT/mfu.jsonl" 2>> "$OUT/mfu.err"
timeout 200 python -m benches run --device cuda --preset base --accumulate 4 --live-tensors 0 --budget 150 \
    --precision fp32,bf16-autocast --strategies native,flat,main_grad --repeat 6 --warmup 1 \
    --control native --out "$OUT/sweep" > "$OUT/sweep.txt" 2>&1
rm -rf "$OUT/sweep/memray" "$OUT/sweep/cases"
echo "done" >> "$OUT/machine.txt"
