#!/usr/bin/env bash
# Issue 14 on the GPU host: `kernelscope ncu` against NVIDIA's `ncu --import` on the same machine, and
# page parity on a report recorded there and then.
#
#   OUT=dir bash benchmarks/device/ncu_speed.sh      (carry .whl with the ncu-report wheel matching ncu)
# Writes bench_ncu.txt (bench_ncu.py with ncu on PATH: both tools timed in one run), parity.txt, log.txt.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/ks_out}; W=/dev/shm/ks_ncu; mkdir -p "$W" "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$REPO"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$REPO PYTHONUNBUFFERED=1
cd "$REPO"
echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); ncu $(ncu --version | tail -1); $(python3 -c 'import ncu_report,sys; print(sys.version.split()[0])'); nproc $(nproc)"
xz -dc tests/data/ncu/torch18_full.ncu-rep.xz > "$W/torch18_full.ncu-rep"
timeout 300 python3 benchmarks/bench_ncu.py --rounds 3 --pages details,raw,sections,rules,roofline,verdict "$W/torch18_full.ncu-rep" | tee "$OUT/bench_ncu.txt"
# a report recorded now: the PyTorch training loop, 40 kernels, --set full
( cd "$W" && timeout 200 ncu --set full --clock-control none --launch-skip 200 --launch-count 40 -o fresh -f \
    python3 "$REPO/benchmarks/device/train_single.py" --variant fixed --steps 20 --batch 16 --hw 32 > ncu.log 2>&1 ); echo "ncu record rc=$?"; tail -2 "$W/ncu.log"
{
  for page in details raw; do
    ncu --import "$W/fresh.ncu-rep" --csv --page $page --print-units base > "$W/nv_$page.csv" 2>/dev/null
    python3 -m engine.cli.app ncu "$W/fresh.ncu-rep" --page $page --csv > "$W/ks_$page.csv"
    if cmp -s "$W/nv_$page.csv" "$W/ks_$page.csv"; then echo "fresh.ncu-rep $page: identical ($(wc -l < "$W/nv_$page.csv") lines)";
    else echo "fresh.ncu-rep $page: DIFFERENT"; diff "$W/nv_$page.csv" "$W/ks_$page.csv" | head -20; fi
  done
  timeout 200 python3 benchmarks/bench_ncu.py --rounds 3 --pages details,raw "$W/fresh.ncu-rep"
} 2>&1 | tee "$OUT/parity.txt"
xz -c "$W/fresh.ncu-rep" > "$OUT/fresh_train40.ncu-rep.xz"; ls -la "$OUT"
