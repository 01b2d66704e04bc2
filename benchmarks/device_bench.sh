#!/usr/bin/env bash
# Proof run of issue 4 part B on a lent H100/H200: calibrate, then benchmark the kernels/ workloads.
#
#   pip install -e '.[bench]'          # torch (a CUDA build brings triton) + this repo
#   bash benchmarks/device_bench.sh [OUTDIR]          # < 5 minutes on an H100/H200
#
# Prints each table, writes OUTDIR/<step>/bench.{json,csv} and OUTDIR/calibration.json, and ends
# with one line per step (ok / FAILED rc). KS_DEVICE=cpu runs the same steps at tiny sizes on the CPU
# (a smoke test of this script on a machine with no GPU).
set -u
OUT=${1:-/tmp/kernelscope-device-bench}
PY=${PYTHON:-python3}
DEV=${KS_DEVICE:-cuda}
KS=("$PY" -m engine.cli)
mkdir -p "$OUT"
export KERNELSCOPE_DATA="$OUT/data"
declare -a SUMMARY=()

step() {  # step NAME COMMAND...
    local name=$1; shift
    echo
    echo "=== $name: $*"
    local t0=$SECONDS
    "$@"
    local rc=$?
    SUMMARY+=("$(printf '%-22s %s (%ss)' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")" $((SECONDS - t0)))")
}

bench() {  # bench NAME WORKLOAD ARGS...
    local name=$1; shift
    step "$name" "${KS[@]}" bench "$@" --param device="$DEV" --out "$OUT/$name"
}

echo "=== machine"
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null \
    || echo "(no nvidia-smi)"
"$PY" - <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
try:
    import triton
    print("triton", triton.__version__)
except ImportError:
    print("triton not installed")
PY

if [ "$DEV" = cuda ]; then
    step calibrate "${KS[@]}" calibrate --budget 2
    cp "$KERNELSCOPE_DATA"/calibration/*.json "$OUT/calibration.json" 2>/dev/null
    B=(--budget 4 --target-ci 0.01)
    bench sdpa_seed sdpa "${B[@]}"                                     # B=32 H=8 S=512 D=64 fp16
    bench sdpa_long sdpa "${B[@]}" --param B=16 --param H=96 --param S=4096 --sweep D=128,64
    bench gemm_bf16 gemm "${B[@]}"                                     # 8192^3 bf16
    bench gemm_bf16_l2flush gemm --budget 2 --param M=4096 --param N=4096 --param K=4096 --sweep dtype=bf16,fp16 --flush-l2
    bench host_overhead host_overhead --budget 8 --target-ci 0.02 --sweep variant=naive,fixed
    bench bandwidth bandwidth --budget 1.5 --target-ci 0.02 --sweep direction=h2d,d2h \
        --sweep memory=pageable,pinned --sweep size_mb=1,16,256
    bench triton_matmul triton_matmul "${B[@]}" --sweep dtype=fp16,bf16
    if command -v nvcc >/dev/null; then
        bench host_overhead_cuda host_overhead_cuda --budget 20 --warmup 1 --max-repeats 5 --target-ci 0.05 \
            --param iters=5 --sweep variant=naive,fixed
    else
        echo "(nvcc not on PATH: skipping the CUDA C++ host-overhead demo)"
    fi
else
    step calibrate "${KS[@]}" calibrate --device cpu --budget 0.3
    B=(--budget 0.3 --target-ci 0.5 --max-repeats 20 --cpu-threads 1)
    bench sdpa_seed sdpa "${B[@]}" --param B=2 --param H=2 --param S=64 --param dtype=fp32
    bench sdpa_long sdpa "${B[@]}" --param B=1 --param H=4 --param S=128 --param dtype=fp32 --sweep D=32,16
    bench gemm_bf16 gemm "${B[@]}" --param M=128 --param N=128 --param K=128
    bench gemm_bf16_l2flush gemm "${B[@]}" --param M=64 --param N=64 --param K=64 --sweep dtype=bf16,fp32 --flush-l2
    bench host_overhead host_overhead "${B[@]}" --param n=64 --param vec=4096 --sweep variant=naive,fixed
    bench bandwidth bandwidth "${B[@]}" --sweep direction=h2d,d2h --param memory=pageable --sweep size_mb=1,4
fi

echo
echo "=== summary ($OUT)"
printf '%s\n' "${SUMMARY[@]}"
