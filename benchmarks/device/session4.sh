#!/usr/bin/env bash
# Session 4 on the GPU host, one call:
#  1. issue 14: bench_ncu.py with ncu on PATH (our own .ncu-rep decoder against `ncu --import`, one run);
#     two reports recorded now (the training loop --set full, 40 kernels; two processes with
#     --target-processes all --set detailed) compared page by page with ncu --import (ncu-report
#     2025.3.1 wheel, the one matching this ncu).
#  2. issue 16: a fresh two-process nsys recording and a training loop: `kernelscope findings/summary
#     --json` and `stats` (all reports) with the SQLite page reader on and off must print the same bytes.
#   OUT=dir bash benchmarks/device/session4.sh      (carry .whl and .kit)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/ks_out}; W=/dev/shm/ks_s4; mkdir -p "$W" "$OUT"; export TMPDIR=$W
exec > >(tee -a "$OUT/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$REPO"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$REPO PYTHONUNBUFFERED=1 KERNELSCOPE_CACHE=$W/cache
cd "$REPO"
NSYS=$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | sort -V | tail -1)
IMPORTER=$(ls -d "$(dirname "$(readlink -f "$NSYS")")"/../linux-desktop-*/QdstrmImporter | head -1)
echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); ncu $(ncu --version | tail -1); nsys $("$NSYS" --version); python $(python3 -c 'import sys,numpy,pandas; print(sys.version.split()[0], numpy.__version__, pandas.__version__)'); nproc $(nproc)"
python3 -c "import pyarrow, isal" 2>&1 | tail -1
ks() { python3 -m engine.cli.app "$@"; }

echo "== 1. ncu speed"
xz -dc tests/data/ncu/torch18_full.ncu-rep.xz > "$W/torch18_full.ncu-rep"
timeout 240 python3 benchmarks/bench_ncu.py --rounds 3 --pages details,raw,sections,rules,roofline,verdict "$W/torch18_full.ncu-rep" | tee "$OUT/bench_ncu.txt"
echo "== 1b. fresh ncu reports vs ncu --import"
( cd "$W" && timeout 150 ncu --set full --clock-control none --launch-skip 200 --launch-count 40 -o train40 -f \
    python3 "$REPO/benchmarks/device/train_single.py" --variant fixed --steps 20 --batch 16 --hw 32 > ncu1.log 2>&1 ); echo "record train40 rc=$?"
( cd "$W" && timeout 150 ncu --set detailed --target-processes all --clock-control none --launch-count 24 -o twoproc -f \
    python3 "$REPO/benchmarks/device/two_proc.py" > ncu2.log 2>&1 ); echo "record twoproc rc=$?"; tail -2 "$W/ncu2.log"
for r in train40 twoproc; do
  [ -f "$W/$r.ncu-rep" ] || { echo "$r: no report"; continue; }
  for page in details raw; do
    ncu --import "$W/$r.ncu-rep" --csv --page $page --print-units base > "$W/nv_${r}_$page.csv" 2>/dev/null
    ks ncu "$W/$r.ncu-rep" --page $page --csv > "$W/ks_${r}_$page.csv" 2> "$W/ks_${r}_$page.err"
    if cmp -s "$W/nv_${r}_$page.csv" "$W/ks_${r}_$page.csv"; then echo "$r $page: identical ($(wc -l < "$W/nv_${r}_$page.csv") lines)";
    else echo "$r $page: DIFFERENT"; diff "$W/nv_${r}_$page.csv" "$W/ks_${r}_$page.csv" | head -12; tail -3 "$W/ks_${r}_$page.err"; fi
  done
  xz -c "$W/$r.ncu-rep" > "$OUT/$r.ncu-rep.xz"; cp "$W/nv_${r}_details.csv" "$W/nv_${r}_raw.csv" "$OUT/"
done
timeout 120 python3 benchmarks/bench_ncu.py --rounds 3 --pages details,raw "$W/train40.ncu-rep" | tail -12 | tee "$OUT/bench_ncu_train40.txt"

echo "== 2. fresh nsys recordings: page reader on/off"
rec() {
  local name=$1; shift; local t0=$SECONDS
  ( cd "$W" && timeout 200 "$NSYS" profile --trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none -f true -o "$name" "$@" ) > "$W/$name.profile.log" 2>&1
  if [ ! -f "$W/$name.nsys-rep" ] && [ -f "$W/$name.qdstrm" ]; then
    LD_LIBRARY_PATH=$REPO/.kit/libs timeout 200 "$IMPORTER" -i "$W/$name.qdstrm" -o "$W/$name.nsys-rep" > "$W/$name.imp.log" 2>&1
  fi
  timeout 200 "$NSYS" export --type sqlite -f true -o "$W/$name.sqlite" "$W/$name.nsys-rep" > /dev/null 2>&1
  echo "$name: $((SECONDS-t0)) s, $(ls -la "$W/$name.sqlite" 2>&1 | awk '{print $5}') bytes"
}
rec twoproc python3 "$REPO/benchmarks/device/two_proc.py"
rec train3k python3 "$REPO/benchmarks/device/train_single.py" --variant bad --steps 3000 --batch 16 --hw 32 --warmup 3
for r in twoproc train3k; do
  [ -f "$W/$r.sqlite" ] || continue
  for pages in 1 0; do
    rm -rf "$W/cache"
    for cmd in findings summary; do KERNELSCOPE_SQLITE_PAGES=$pages ks $cmd "$W/$r.sqlite" --json > "$W/${r}_${cmd}_$pages.json" 2> "$W/${r}_${cmd}_$pages.err"; done
    KERNELSCOPE_SQLITE_PAGES=$pages ks stats -r cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,nvtx_sum,cuda_gpu_trace,cuda_api_trace,cuda_kern_exec_trace,cuda_gpu_kern_gb_sum,nvtx_kern_sum,nvtx_pushpop_sum,nvtx_pushpop_trace,osrt_sum,cuda_gpu_sum,cuda_api_gpu_sum -f csv "$W/$r.sqlite" > "$W/${r}_stats_$pages.csv" 2> "$W/${r}_stats_$pages.err"
  done
  for f in findings summary stats; do
    e=json; [ $f = stats ] && e=csv
    if cmp -s "$W/${r}_${f}_1.$e" "$W/${r}_${f}_0.$e"; then echo "$r $f: same bytes with and without the page reader ($(wc -c < "$W/${r}_${f}_1.$e") bytes)";
    else echo "$r $f: DIFFERENT"; diff "$W/${r}_${f}_1.$e" "$W/${r}_${f}_0.$e" | head -8; tail -2 "$W/${r}_${f}_1.err"; fi
  done
  python3 - "$W/$r.sqlite" <<'PY'
import sys, sqlite3, numpy as np
from engine.reports.nsys.pages import read_columns
db = sys.argv[1]; con = sqlite3.connect(db); bad = n = 0
for (t,) in con.execute("select name from sqlite_master where type='table'"):
    cols = [c[1] for c in con.execute(f'pragma table_info("{t}")') if not (c[5] and c[2].upper() == "INTEGER")]
    cols = [c for c in cols if not con.execute(f'select count(*) from "{t}" where typeof("{c}") not in (\'integer\',\'null\')').fetchone()[0]]
    if not cols: continue
    got = read_columns(db, t, {c: f'"{c}"' for c in cols}, -(2**62))
    if got is None: print("  not read from pages:", t); continue
    rows = con.execute("select " + ",".join(f'coalesce("{c}", {-(2**62)})' for c in cols) + f' from "{t}" order by rowid').fetchall()
    for i, c in enumerate(cols):
        n += 1
        if got[c].tolist() != [r[i] for r in rows]: bad += 1; print("  MISMATCH", t, c)
print(f"{db.rsplit('/',1)[-1]}: {n} integer columns compared with SQLite, {bad} differ")
PY
  xz -T8 -c "$W/$r.sqlite" | split -b 15M -d - "$OUT/$r.sqlite.xz.part-"
done
ls -la "$OUT"
