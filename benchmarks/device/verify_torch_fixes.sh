#!/usr/bin/env bash
# Each PyTorch finding's fix applied alone on the lent GPU: the GPU step time (CUDA events) of the
# base program, of each single fix, and of all of them, three runs each. Prints one JSON line per run.
#   bash benchmarks/device/verify_torch_fixes.sh > fixes.jsonl
HERE=$(cd "$(dirname "$0")" && pwd)
W=${WORK:-/dev/shm/torchfix}; mkdir -p "$W"
PY=${PY:-python3}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >&2
for rep in 1 2 3; do
  for fx in "" tc gelu noitem pinned len; do
    "$PY" "$HERE/torch_workbench.py" plain --variant base --fixes "$fx" --steps 12 --out "$W" --tag "fix_${fx:-none}_$rep" | tail -1
  done
  "$PY" "$HERE/torch_workbench.py" plain --variant fixed --steps 12 --out "$W" --tag "fix_all_$rep" | tail -1
done
