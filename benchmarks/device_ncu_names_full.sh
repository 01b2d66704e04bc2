#!/usr/bin/env bash
# On the lent GPU (ncu installed): check engine.reports.ncu_names.simplify_names against ncu on EVERY
# kernel of benchmarks/ncu_names_workload.py (device_ncu_names.sh stops at 40 launches, before the
# index_select / embedding / bincount / nonzero / cuBLAS / softmax / max kernels), with ncu's default
# renaming and with --rename-kernels off, and write every kernel's stored / printed / our names to
# $OUT/names_all.pairs.json (copy it to tests/data/ncu/ to extend tests/engine/reports/test_ncu_names40.py).
# Usage (repository root, ncu_report and pandas importable): OUT=dir bash benchmarks/device_ncu_names_full.sh
# Prints "renamed: N/M kernel names as ncu prints them" and the same for rename-off; exit 1 on a mismatch.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
ncu --version | tail -1
ncu --section SpeedOfLight --clock-control none -f -o "$OUT/names_all" \
    python3 benchmarks/ncu_names_workload.py 2>&1 | tail -2
ncu --import "$OUT/names_all.ncu-rep" --csv --page raw --print-units base > "$OUT/names_all.raw.csv"
ncu --import "$OUT/names_all.ncu-rep" --csv --page raw --print-units base --rename-kernels off \
    > "$OUT/names_all.raw_rename_off.csv"
PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} python3 benchmarks/ncu_names_check.py "$OUT/names_all.ncu-rep" \
    "$OUT/names_all.raw.csv" "$OUT/names_all.raw_rename_off.csv" --dump "$OUT/names_all.pairs.json" \
    | tee "$OUT/names_all.check.txt"
exit "${PIPESTATUS[0]}"
