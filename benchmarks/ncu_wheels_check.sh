#!/usr/bin/env bash
# Issue 14: the pages printed with ncu-report 2026.3.1 (the venv's) and 2025.3.1 (the wheel matching the
# GPU host's ncu, in .whl/) must be the same bytes, on the 25 public reports and the 16 H100 recordings.
#   bash benchmarks/ncu_wheels_check.sh      (from the repository root; ../shared beside it)
# Each page runs in a fresh process with an empty cache, so the units are asked of that wheel.
set -u
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
.venv/bin/python -m pip install -q --no-deps --target "$W/old" .whl/ncu_report-2025.3.1-*.whl || exit 1
mkdir -p "$W/rep"; tar xJf ../shared/fixtures/ncu_public.tar.xz -C "$W/rep"
for f in tests/data/recordings/ncu/*.ncu-rep.xz; do xz -dc "$f" > "$W/rep/$(basename "$f" .xz)"; done
n=0; bad=0
for r in "$W"/rep/ncu_public/*.ncu-rep "$W"/rep/*.ncu-rep; do
  for page in details raw; do
    a=$(KERNELSCOPE_CACHE=$W/a .venv/bin/kernelscope ncu "$r" --page $page --csv 2>&1 | md5sum)
    b=$(KERNELSCOPE_CACHE=$W/b PYTHONPATH=$W/old .venv/bin/kernelscope ncu "$r" --page $page --csv 2>&1 | md5sum)
    n=$((n+1)); [ "$a" = "$b" ] || { bad=$((bad+1)); echo "DIFFERENT: $(basename "$r") $page"; }
  done
  rm -rf "$W/a" "$W/b"
done
echo "$n pages compared (ncu-report $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("ncu-report"))') vs 2025.3.1): $bad differ"
