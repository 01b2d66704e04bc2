#!/usr/bin/env bash
# Make the >=400k-kernel nsys report used by benchmarks/bench_stats.py, on a machine with a GPU.
# Usage: benchmarks/device_make_big_report.sh OUTDIR [LAUNCHES]
# Needs nvcc and an nsys (PATH, $NSYS, or the copy inside Nsight Compute). If nsys's own import step
# fails and leaves a .qdstrm (seen on the lent machine), the QdstrmImporter beside it is run; set
# KIT_LIBS to a folder with libdw.so.1 and friends if the importer needs them.
set -euo pipefail
out=${1:?OUTDIR}; launches=${2:-420000}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
nsys=${NSYS:-$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | sort | tail -1)}
echo "nsys: $nsys ($("$nsys" --version))"
nvcc -O2 -arch=sm_90 -o "$out/launch_bound" "$here/kernels/launch_bound/launch_bound.cu"
rm -f "$out"/big.*
( cd "$out" && "$nsys" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none -o big -f true \
    ./launch_bound "$launches" ) || true
if [ ! -f "$out/big.nsys-rep" ] && [ -f "$out/big.qdstrm" ]; then
  imp=$(ls "$(dirname "$(readlink -f "$nsys")")"/../linux-desktop-*/QdstrmImporter 2>/dev/null | head -1)
  echo "nsys left big.qdstrm; importing with $imp"
  LD_LIBRARY_PATH=${KIT_LIBS:-} "$imp" -i "$out/big.qdstrm" -o "$out/big.nsys-rep"
fi
"$nsys" export --type sqlite -f true -o "$out/big.sqlite" "$out/big.nsys-rep"
ls -la "$out"
