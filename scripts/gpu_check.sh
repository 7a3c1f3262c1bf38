#!/usr/bin/env bash
# The GPU checks of a session, in one run of at most 10 minutes on a machine with one CUDA GPU
# (no network: its own torch, PYTHONPATH=.; the timeouts add up to 555 s, sized from what an H200
# took on 2026-12-04): the CUDA tests, the big preset's MFU (eager,
# compiled, two micro-batch sizes), one big-preset case with its gradient check (the chunked
# float64 reference), --profile on one case, and a CUDA sweep of the base preset with every
# strategy, whose report is the refreshed reports/samples/base-cuda.
#     OUT=/tmp/gpu scripts/gpu_check.sh        # results under $OUT
#     DEVICE=cpu OUT=/tmp/gpu scripts/gpu_check.sh   # its CPU parts, tiny (tests/test_docs.py)
set -u
export PYTHONPATH=.
OUT=${OUT:-/tmp/gpu}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
if [ "$DEVICE" = cuda ]; then BIG=big; BASE=base; BUDGET=240; STRATEGIES=all
else BIG=tiny; BASE=tiny; BUDGET=0; STRATEGIES=native,flat; fi
{ nvidia-smi -L; python -c "import torch; print('torch', torch.__version__)"
  python -c "import numpy, jinja2, matplotlib; print('report deps ok')"; } > "$OUT/machine.txt" 2>&1
if [ "$DEVICE" = cuda ]; then
    timeout 40 python -m pytest -q -m cuda -p no:cacheprovider tests/test_strategies.py \
        tests/test_main_grad.py tests/test_runner.py tests/test_core.py tests/test_byo_workload.py \
        tests/test_workload.py > "$OUT/cuda_tests.txt" 2>&1
    for batch in 64 256; do
        timeout 25 python -m benches mfu --preset big --batch-size "$batch" --min-len 32 \
            --max-len 128 --fused-only >> "$OUT/mfu.jsonl" 2>> "$OUT/mfu.err"
    done
    timeout 75 python -m benches mfu --preset big --batch-size 256 --min-len 32 --max-len 128 \
        --compile >> "$OUT/mfu.jsonl" 2>> "$OUT/mfu.err"
fi
# one case of the big preset: its window and its gradient check's reference on one GPU
timeout 85 python -m benches run --device "$DEVICE" --preset "$BIG" --accumulate 2 \
    --live-tensors 0 --strategies native --control none --rounds 1 --budget 0 --repeat 2 \
    --warmup 1 --out "$OUT/big" > "$OUT/big.txt" 2>&1
# operators per phase against the plain loop
timeout 55 python -m benches run --device "$DEVICE" --preset "$BASE" --accumulate 4 \
    --live-tensors 0 --strategies flat --control none --rounds 1 --budget 0 --repeat 2 \
    --profile --out "$OUT/profile" > "$OUT/profile.txt" 2>&1
# the sample: every strategy, two precisions (its first round took 233 s on an H200)
timeout 250 python -m benches run --device "$DEVICE" --preset "$BASE" --accumulate 4 \
    --live-tensors 0 --budget "$BUDGET" --precision fp32,bf16-autocast --strategies "$STRATEGIES" --repeat 4 \
    --warmup 1 --control native --out "$OUT/sweep" > "$OUT/sweep.txt" 2>&1
rm -rf "$OUT/sweep/memray" "$OUT/sweep/cases" "$OUT/big/cases" "$OUT/profile/cases"
echo "done" >> "$OUT/machine.txt"
