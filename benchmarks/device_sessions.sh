#!/usr/bin/env bash
# Proof of the session engine on a real GPU: doctor, then nsys and ncu sessions launched by
# `kernelscope run`, each report read back by the engine (stats / summary / ncu), numbers printed.
#
# Usage (repo root on the GPU machine, repo installed with `pip install -e .`):
#   benchmarks/device_sessions.sh [OUTDIR]
# Environment:
#   KERNELSCOPE_IMPORTER_LIBS  folder with libdw.so.1 & co for QdstrmImporter (default: .kit/libs)
#   LAUNCHES                   kernel launches of the launch-bound demo (default 20000)
# Needs: nvcc, ncu on PATH (nsys is found inside Nsight Compute), python3 with this repo importable;
# torch with CUDA only for the PyTorch workload step (skipped without it).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=${1:-/tmp/kernelscope-device-sessions}
launches=${LAUNCHES:-20000}
rm -rf "$out"
mkdir -p "$out"
export KERNELSCOPE_DATA="$out/data"
export KERNELSCOPE_CACHE="$out/cache"
export KERNELSCOPE_IMPORTER_LIBS=${KERNELSCOPE_IMPORTER_LIBS:-$here/.kit/libs}
PY=${PYTHON:-python3}
ks() { "$PY" -m engine.cli "$@"; }
status=0

echo "=== card"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

echo; echo "=== kernelscope doctor"
ks doctor || status=1

# run_session TOOL ARGS... : runs `kernelscope run --json`, prints the outcome, sets REPORTS
run_session() {
  local doc
  doc=$(ks run --json --out "$out/sessions" "$@" 2> >(tail -n 40 >&2)) || status=1
  echo "$doc"
  REPORTS=$(printf '%s' "$doc" | "$PY" -c 'import json,sys
try: d = json.load(sys.stdin)
except ValueError: sys.exit(0)
print("\n".join(d["reports"]))')
}

echo; echo "=== build the launch-bound demo (kernels/launch_bound)"
nvcc -O2 -arch=sm_90 -o "$out/launch_bound" kernels/launch_bound/launch_bound.cu || status=1

echo; echo "=== nsys session: launch_bound $launches"
run_session --tool nsys --name launch_bound --timeout 600 -- "$out/launch_bound" "$launches"
sqlite=$(printf '%s\n' "$REPORTS" | grep '\.sqlite$' | head -1)
if [ -n "$sqlite" ]; then
  ks stats --report cuda_gpu_kern_sum,cuda_api_sum --format csv "$sqlite" || status=1
  ks summary "$sqlite" || status=1
else
  echo "no .sqlite from the nsys session"; status=1
fi

echo; echo "=== ncu session: launch_bound 200, 5 launches, --clock-control none"
run_session --tool ncu --name launch_bound_ncu --launch-count 5 --timeout 600 -- "$out/launch_bound" 200
rep=$(printf '%s\n' "$REPORTS" | grep '\.ncu-rep$' | head -1)
if [ -n "$rep" ]; then ks ncu "$rep" || status=1; else echo "no .ncu-rep"; status=1; fi

echo; echo "=== ncu session of a kernels/ workload: host_overhead_cuda variant=fixed (sgemm, 2 launches)"
run_session host_overhead_cuda --param variant=fixed --tool ncu --kernel-name regex:sgemm \
  --launch-count 2 --timeout 600
rep=$(printf '%s\n' "$REPORTS" | grep '\.ncu-rep$' | head -1)
if [ -n "$rep" ]; then ks ncu "$rep" || status=1; else echo "no .ncu-rep"; status=1; fi

if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo; echo "=== nsys session of a kernels/ workload: host_overhead (PyTorch) naive vs fixed"
  for v in naive fixed; do
    run_session host_overhead --param variant=$v --param iters=5 --tool nsys --cuda-memory-usage \
      --name "host_overhead_$v" --timeout 600
    sqlite=$(printf '%s\n' "$REPORTS" | grep '\.sqlite$' | head -1)
    if [ -n "$sqlite" ]; then ks summary "$sqlite" || status=1; else status=1; fi
  done
else
  echo; echo "=== (no CUDA torch: PyTorch workload step skipped)"
fi

echo; echo "=== cancel: an nsys session killed after 5 s must leave a consistent store"
ks run --out "$out/sessions" --tool nsys --timeout 5 --name cancelled -- "$out/launch_bound" 100000000 \
  >/dev/null 2>&1
echo; echo "=== kernelscope sessions"
ks sessions
echo; echo "device_sessions: exit status $status"
exit $status
