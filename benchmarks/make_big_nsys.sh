#!/usr/bin/env bash
# Make the big nsys exports of issue 26 from a real recording, by repeating its activity along time.
# Usage: benchmarks/make_big_nsys.sh [OUTDIR]   (default /work/bigdata)
#   big400k.sqlite: host_overhead_gpumetrics x 40000 (400k kernels, 800k copies, 2.76M CUDA API calls, ~261 MB)
#   big10m.sqlite:  big400k x 25 (10M kernels, 20M copies and 5M memsets on one stream, 69M CUDA API
#                   calls, 20M NVTX events, ~6.8 GB; needs ~14 GB free while SQLite vacuums it)
# Each file is written under NAME.part beside a NAME.MAKING note and renamed when complete, so a reader
# never opens a half-written file; a file already there is kept.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/work/bigdata}
scale="$here/../shared/tools/scale_nsys_sqlite.py"
src="$here/../shared/fixtures/nsys/host_overhead_gpumetrics.sqlite"
mkdir -p "$out"

make() {  # make NAME FROM K
  local dst="$out/$1" from=$2 k=$3
  if [ -f "$dst" ]; then echo "$dst: already there"; return; fi
  echo "being made by benchmarks/make_big_nsys.sh, started $(date -u +%H:%M)" > "$dst.MAKING"
  rm -f "$dst.part" "$dst.part-journal"
  python3 "$scale" "$from" "$dst.part" "$k"
  mv "$dst.part" "$dst"
  rm -f "$dst.MAKING"
  ls -la "$dst"
}

make big400k.sqlite "$src" 40000
make big10m.sqlite "$out/big400k.sqlite" 25
