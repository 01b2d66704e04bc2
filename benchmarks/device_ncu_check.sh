#!/usr/bin/env bash
# On a machine with Nsight Compute (ncu): check Kernelscope's ncu pages against `ncu --import`
# for any reports, and time Kernelscope against `ncu --import` (bench_ncu.py prints the ratio).
#
#   benchmarks/device_ncu_check.sh [REPORT.ncu-rep ...]
#       default: bench-data/torch18_full.ncu-rep bench-data/torch18_sol.ncu-rep and the fixtures
#   env: PYTHON (default .venv/bin/python, needs this repo's dependencies), NCU (default: ncu on PATH,
#        then the newest /opt/nvidia/nsight-compute/*/ncu or /usr/local/cuda*/bin/ncu)
#
# Prints, per report: "details identical: yes|no (N differing lines)" and the same for the raw page,
# then bench_ncu.py's table including the "vs ncu --import" column. Exit status 1 if a page differs.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | sort -V | tail -1)}
if [ -z "$NCU" ] || [ ! -x "$NCU" ]; then
    echo "ncu was not found (set NCU=/path/to/ncu); nothing to compare against." >&2
    exit 2
fi
echo "ncu: $NCU ($("$NCU" --version | tail -1))"
reports=("$@")
if [ ${#reports[@]} -eq 0 ]; then
    for r in bench-data/torch18_full.ncu-rep bench-data/torch18_sol.ncu-rep \
             ../shared/fixtures/ncu/host_overhead_fixed.ncu-rep ../shared/fixtures/ncu/torch_sdpa.ncu-rep; do
        [ -f "$r" ] && reports+=("$r")
    done
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for r in "${reports[@]}"; do
    echo "== $r"
    for page in details raw; do
        "$NCU" --import "$r" --csv --page "$page" --print-units base > "$tmp/ncu.csv" 2> "$tmp/ncu.err" || {
            echo "  $page: ncu --import failed: $(tail -1 "$tmp/ncu.err")"; status=1; continue; }
        PATH="$(dirname "$PYTHON"):$PATH" "$PYTHON" -m engine.cli ncu "$r" --page "$page" > "$tmp/ks.csv" 2> "$tmp/ks.err" || {
            echo "  $page: kernelscope failed: $(tail -1 "$tmp/ks.err")"; status=1; continue; }
        if cmp -s "$tmp/ncu.csv" "$tmp/ks.csv"; then
            echo "  $page identical: yes ($(wc -l < "$tmp/ncu.csv") lines)"
        else
            n=$(diff "$tmp/ncu.csv" "$tmp/ks.csv" | grep -c '^[<>]')
            echo "  $page identical: no ($n differing lines; first differences below)"
            diff "$tmp/ncu.csv" "$tmp/ks.csv" | head -6 | cut -c1-300
            status=1
        fi
    done
done
PATH="$(dirname "$NCU"):$PATH" "$PYTHON" benchmarks/bench_ncu.py "${reports[@]}" --rounds 3
exit $status
