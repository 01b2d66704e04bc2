#!/usr/bin/env bash
# On the lent GPU: record the 18-kernel `--set full` report and a SpeedOfLight-only one for bench_ncu.py.
# Usage: OUT=dir bash benchmarks/device_record_ncu.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ncu --version | tail -1
python3 -c "import torch; print('torch', torch.__version__)"
time ncu --set full --import-source yes --clock-control none --launch-count 18 -f -o "$OUT/torch18_full" \
    python3 benchmarks/ncu_workload18.py 2>&1 | grep -v '^==PROF== Profiling' | tail -5
time ncu --section SpeedOfLight --clock-control none --launch-count 18 -f -o "$OUT/torch18_sol" \
    python3 benchmarks/ncu_workload18.py 2>&1 | tail -3
ncu --import "$OUT/torch18_full.ncu-rep" --csv --page details --print-units base > "$OUT/torch18_full.details.csv"
ncu --import "$OUT/torch18_full.ncu-rep" --csv --page raw --print-units base > "$OUT/torch18_full.raw.csv"
ncu --import "$OUT/torch18_sol.ncu-rep" --csv --page details --print-units base > "$OUT/torch18_sol.details.csv"
# time ncu's own import of the full report (the reference for our loader's speed)
for i in 1 2 3; do /usr/bin/time -f "ncu --import details: %e s, %M KB" ncu --import "$OUT/torch18_full.ncu-rep" --csv --page details --print-units base > /dev/null; done
ls -la "$OUT"
