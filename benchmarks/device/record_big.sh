#!/usr/bin/env bash
# Record the big nsys reports for issue 16's scale tests on the lent GPU machine, and time NVIDIA's
# `ncu --import` on the 18-kernel --set full report (issue 14's reference).
#
#   OUT=dir bash benchmarks/device/record_big.sh
# Writes to $OUT: real400k.sqlite.xz.part-* (launch_bound, ~420k kernels), train400k.sqlite.xz.part-*
# (a PyTorch training loop, ~400k kernels), ncu_import.txt, log.txt. Parts are <= 15 MB (the device
# tool brings back files of <= 16 MB). Tools as in record.sh (NSYS, IMPORTER, KIT_LIBS).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/ks_out}
W=/dev/shm/ks_big; mkdir -p "$W" "$OUT"; export TMPDIR=$W
exec > >(tee -a "$OUT/log.txt") 2>&1
NSYS=${NSYS:-$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | sort -V | tail -1)}
IMPORTER=${IMPORTER:-$(ls -d "$(dirname "$(readlink -f "$NSYS")")"/../linux-desktop-*/QdstrmImporter | head -1)}
KIT_LIBS=${KIT_LIBS:-$REPO/.kit/libs}
echo "nsys $("$NSYS" --version); ncu $(ncu --version | tail -1); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"

rec() {  # rec NAME CMD...: nsys profile, import if needed, export sqlite, pack
  local name=$1; shift
  local t0=$SECONDS
  ( cd "$W" && timeout 240 "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none -f true -o "$name" "$@" ) \
    > "$W/$name.profile.log" 2>&1; echo "$name: profile rc=$? $((SECONDS-t0)) s"; tail -3 "$W/$name.profile.log"
  if [ ! -f "$W/$name.nsys-rep" ] && [ -f "$W/$name.qdstrm" ]; then
    LD_LIBRARY_PATH=$KIT_LIBS timeout 240 "$IMPORTER" -i "$W/$name.qdstrm" -o "$W/$name.nsys-rep" > "$W/$name.imp.log" 2>&1
    echo "$name: import rc=$? $((SECONDS-t0)) s"; rm -f "$W/$name.qdstrm"
  fi
  timeout 240 "$NSYS" export --type sqlite -f true -o "$W/$name.sqlite" "$W/$name.nsys-rep" > /dev/null 2>&1
  echo "$name: export rc=$? $((SECONDS-t0)) s"; ls -la "$W/$name.sqlite"
  python3 - "$W/$name.sqlite" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS"):
    try: print(t, c.execute(f"select count(*) from {t}").fetchone()[0])
    except Exception as e: print(t, e)
PY
  xz -T16 -6 -c "$W/$name.sqlite" | split -b 15M -d - "$OUT/$name.sqlite.xz.part-"
  ls -la "$OUT" | grep "$name"
}

nvcc -O2 -arch=sm_90 -o "$W/launch_bound" "$REPO/kernels/launch_bound/launch_bound.cu" && rec real400k "$W/launch_bound" 420000
rec train400k python3 "$REPO/benchmarks/device/train_single.py" --variant fixed --steps 10000 --batch 16 --hw 32 --warmup 3

xz -dc "$REPO/tests/data/ncu/torch18_full.ncu-rep.xz" > "$W/t18.ncu-rep"
{
  for page in details raw; do for i in 1 2 3; do
    /usr/bin/time -f "ncu --import --csv --page $page --print-units base: %e s, %M KB" ncu --import "$W/t18.ncu-rep" --csv --page $page --print-units base > /dev/null
  done; done
  for i in 1 2 3; do /usr/bin/time -f "ncu --import --page details (text): %e s, %M KB" ncu --import "$W/t18.ncu-rep" --page details > /dev/null; done
  nproc; lscpu | grep "Model name"
} > "$OUT/ncu_import.txt" 2>&1
cat "$OUT/ncu_import.txt"
