#!/usr/bin/env bash
# On the lent GPU (ncu installed): does engine.reports.ncu_names print kernel names as ncu does, for
# kernels beyond the 18 of tests/data/ncu? Records ~40 launches of benchmarks/ncu_names_workload.py
# (SpeedOfLight only: names are all we need), exports the raw page with ncu's default kernel renaming
# and with --rename-kernels off, and compares both with our functions.
# Usage (repository root, ncu_report and pandas importable): OUT=dir bash benchmarks/device_ncu_names.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
ncu --version | tail -1
ncu --section SpeedOfLight --clock-control none --launch-count 40 -f -o "$OUT/names40" \
    python3 benchmarks/ncu_names_workload.py 2>&1 | tail -2
ncu --import "$OUT/names40.ncu-rep" --csv --page raw --print-units base > "$OUT/names40.raw.csv"
ncu --import "$OUT/names40.ncu-rep" --csv --page raw --print-units base --rename-kernels off \
    > "$OUT/names40.raw_rename_off.csv"
PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} python3 benchmarks/ncu_names_check.py "$OUT/names40.ncu-rep" "$OUT/names40.raw.csv" \
    "$OUT/names40.raw_rename_off.csv" | tee "$OUT/names40.check.txt"
