#!/usr/bin/env bash
# Issue 26's last row, on the lent GPU machine: is Kernelscope's columnar cache built faster than
# `nsys export` builds the SQLite it is made from? One fresh recording of many kernels, then, on the
# same machine and in the same run:
#   - `nsys export --type sqlite` of the .nsys-rep, twice (the reference);
#   - `kernelscope summary` and `kernelscope stats` (the 5 core reports) cold on that export: each
#     builds the columns it reads (the cache) and then computes; a second run from the cache;
#   - `nsys stats` of the same 5 reports on a copy of the export (it may add to the file).
#   OUT=dir LAUNCHES=2000000 bash benchmarks/device/export_vs_cache.sh      (carry .kit and .whl)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/ks_out}; W=/dev/shm/ks_exp; mkdir -p "$W" "$OUT"; export TMPDIR=$W
LAUNCHES=${LAUNCHES:-2000000}
exec > >(tee -a "$OUT/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$REPO"/.whl/*.whl \
    || echo "(wheels not installed)"
export PYTHONPATH=/tmp/site:$REPO PYTHONUNBUFFERED=1 KERNELSCOPE_CACHE=$W/cache
NSYS=$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | sort -V | tail -1)
IMPORTER=$(ls -d "$(dirname "$(readlink -f "$NSYS")")"/../linux-desktop-*/QdstrmImporter | head -1)
KIT_LIBS=${KIT_LIBS:-$REPO/.kit/libs}
echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); nsys $("$NSYS" --version); nproc $(nproc)"
python3 -c 'import sys, numpy, pandas; print("python", sys.version.split()[0], "numpy", numpy.__version__, "pandas", pandas.__version__)'
python3 -c 'import pyarrow; print("pyarrow", pyarrow.__version__)' 2>&1 | tail -1
REPORTS=cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,nvtx_sum

cat > "$W/timed.py" <<'PY'
import resource, subprocess, sys, time
label, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
with open(sys.argv[0] + ".out", "wb") as out, open(sys.argv[0] + ".err", "wb") as err:
    rc = subprocess.call(argv, stdout=out, stderr=err)
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{label}: {wall:.2f} s wall, {ru.ru_utime + ru.ru_stime:.2f} CPU s, {ru.ru_maxrss / 1024:.0f} MB peak (largest process), rc {rc}")
if rc:
    print(open(sys.argv[0] + ".err", errors="replace").read()[-800:])
sys.exit(rc)
PY
timed() {  # timed LABEL CMD...: wall and CPU seconds and peak RSS of one command (stdout: $W/timed.py.out)
  python3 "$W/timed.py" "$@"
}

nvcc -O2 -arch=sm_90 -o "$W/launch_bound" "$REPO/kernels/launch_bound/launch_bound.cu" || exit 1
cd "$W" || exit 1
timed "profile $LAUNCHES launches" timeout 200 "$NSYS" profile --trace=cuda,nvtx --sample=none --cpuctxsw=none \
    -f true -o big ./launch_bound "$LAUNCHES"
if [ ! -f big.nsys-rep ] && [ -f big.qdstrm ]; then
  timed "import (QdstrmImporter)" env LD_LIBRARY_PATH="$KIT_LIBS" timeout 240 "$IMPORTER" -i big.qdstrm -o big.nsys-rep
  rm -f big.qdstrm
fi
ls -la big.nsys-rep || exit 1
for r in 1 2; do
  rm -f "big$r.sqlite"
  timed "nsys export --type sqlite, run $r" timeout 240 "$NSYS" export --type sqlite -f true -o "big$r.sqlite" big.nsys-rep
done
ls -la big1.sqlite
python3 - big1.sqlite <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
    print(t, c.execute(f"select count(*) from {t}").fetchone()[0])
PY
cd "$REPO" || exit 1
for cmd in summary stats; do
  rm -rf "$W/cache"
  if [ $cmd = stats ]; then args=(stats "$W/big1.sqlite" --report "$REPORTS" --format csv); else args=(summary "$W/big1.sqlite"); fi
  timed "kernelscope $cmd, cold (columns built)" python3 -m engine.cli "${args[@]}" && cp "$W/timed.py.out" "$OUT/ks_$cmd.txt"
  timed "kernelscope $cmd, cached" python3 -m engine.cli "${args[@]}"
  du -sh "$W/cache"
done
timed "nsys stats (same 5 reports, a copy of the export)" "$NSYS" stats --report "$REPORTS" --format csv \
    --force-overwrite true --output "$W/nsys_stats" "$W/big2.sqlite"
head -c 1500 "$OUT/ks_summary.txt"
