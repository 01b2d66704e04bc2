#!/usr/bin/env bash
# Record the step-detection zoo (issue 22) on a lent 4-GPU machine: single-GPU programs four at a time
# (one per GPU), then 2- and 4-rank DDP jobs with one nsys report per rank; then QdstrmImporter + export.
#   OUT=dir bash benchmarks/device/record_steps_zoo.sh [single] [ddp]
# Each run: nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node.
# Results in $OUT: NAME.sqlite.xz (and NAME_truth.json from the program: GPU step periods from CUDA events).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/zoo_out}
W=${WORK:-/dev/shm/zoo}
mkdir -p "$OUT" "$W"
export TMPDIR=$W/tmp; mkdir -p "$TMPDIR"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
NSYS=${NSYS:-$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | sort -V | tail -1)}
IMPORTER=$(ls -d "$(dirname "$(readlink -f "$NSYS")")"/../linux-desktop-*/QdstrmImporter 2>/dev/null | head -1)
KIT_LIBS=${KIT_LIBS:-$REPO/.kit/libs}
FLAGS="--trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node -f true"
export KS_NSYS=$NSYS KS_NSYS_FLAGS="$FLAGS"
ZOO=$HERE/steps_zoo.py
STEPS=${STEPS:-40}
PHASES=${*:-single ddp}
echo "### $(date -u +%FT%TZ) NSYS=$NSYS IMPORTER=$IMPORTER phases=$PHASES"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
"$NSYS" --version
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), torch.cuda.device_count(), "GPUs")'

one() {  # one GPU, one variant: one() GPU NAME VARIANT [ARGS...]
    local gpu=$1 name=$2 variant=$3; shift 3
    (cd "$W" && CUDA_VISIBLE_DEVICES=$gpu timeout 240 "$NSYS" profile $FLAGS -o "$W/$name" \
        "$PY" "$ZOO" "$variant" --out "$W" --tag "$name" --steps "$STEPS" "$@" > "$W/$name.log" 2>&1)
    echo "=== $name rc=$? $(tail -2 "$W/$name.log" | tr '\n' ' ')"
}

job() {  # a DDP job: job GPUS NAME NPROC ARGS...
    local gpus=$1 name=$2 n=$3; shift 3
    (cd "$W" && CUDA_VISIBLE_DEVICES=$gpus timeout 300 "$PY" -m torch.distributed.run --standalone \
        --nproc_per_node "$n" --no-python bash "$HERE/nsys_rank_wrap.sh" "$W/${name}_rank" \
        "$PY" "$ZOO" ddp --out "$W" --tag "$name" --steps "$STEPS" "$@" > "$W/$name.log" 2>&1)
    echo "=== $name rc=$? $(grep -h 'median' "$W/$name.log" | tr '\n' ' ')"
}

NG=$(nvidia-smi -L | wc -l)
SINGLES=("outer outer" "phases phases" "nonvtx nonvtx" "perop perop --batch 512" "ahead ahead --steps 30"
         "stall stall" "decode decode --steps 48" "graph graph" "infer infer" "launch launch"
         "launch_graph launch_graph" "outer_b outer --batch 1024")
# held out of the tuning (recorded after it): accumulation, DataLoader conv net, micro-benchmark, GPU stall
[[ $PHASES == *extra* ]] && SINGLES=("perop_busy perop_busy --batch 4096" "infer_layers infer_layers")
[[ $PHASES == *heldout* ]] && SINGLES=("accum accum --batch 1024" "conv conv" "bench bench" "gpu_stall gpu_stall --batch 1024"
                                      "outer_c outer --batch 512 --steps 60")
# held out of issue 26's cycle rule (recorded after it): inputs whose length cycles, trained and served
[[ $PHASES == *cycle* ]] && SINGLES=("varlen varlen --steps 48" "varlen_phases varlen_phases --steps 48"
                                    "varlen_accum varlen_accum --steps 48" "serve serve --steps 64")
if [[ $PHASES == *single* || $PHASES == *heldout* || $PHASES == *extra* || $PHASES == *cycle* ]]; then
    t0=$SECONDS
    i=0
    pids=()
    for spec in "${SINGLES[@]}"; do
        # shellcheck disable=SC2086
        one $((i % NG)) $spec &
        pids+=($!)
        i=$((i + 1))
        [ $((i % NG)) -eq 0 ] && { wait "${pids[@]}"; pids=(); }
    done
    [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
    echo "single: $((SECONDS - t0)) s"
fi
if [[ $PHASES == *ddp4* ]]; then
    job 0,1,2,3 ddp4_gemm 4 --nvtx phases --straggler 3 --extra-gemm 2
    job 0,1,2,3 ddp4_moving 4 --nvtx none --moving --sleep-ms 8 --sync-every 1
    job 0,1,2,3 ddp4_base 4 --nvtx phases
elif [[ $PHASES == *heldout* ]]; then
    job 0,1 ddp2_ho 2 --nvtx outer --straggler 0 --extra-gemm 1 --width 2048 --batch 4096
    job 0,1 ddp2_ho_none 2 --nvtx none --straggler 1 --sleep-ms 10 --sync-every 1 --width 2048
    # the same jobs without a straggler: what the straggler really costs is the difference
    job 0,1 ddp2_ho_base 2 --nvtx outer --width 2048 --batch 4096
    job 0,1 ddp2_ho_none_base 2 --nvtx none --sync-every 1 --width 2048
elif [[ $PHASES == *ddp* ]]; then
    t0=$SECONDS
    if [ "$NG" -ge 4 ]; then
        job 0,1 ddp2_gemm 2 --nvtx phases --straggler 1 --extra-gemm 2 &
        job 2,3 ddp2_sleep 2 --nvtx phases --straggler 1 --sleep-ms 6 & wait
        job 0,1 ddp2_nonvtx 2 --nvtx none --straggler 0 --extra-gemm 3 &
        job 2,3 ddp2_outer_ahead 2 --nvtx outer --straggler 1 --sleep-ms 5 & wait
    else
        job 0,1 ddp2_gemm 2 --nvtx phases --straggler 1 --extra-gemm 2
        job 0,1 ddp2_sleep 2 --nvtx phases --straggler 1 --sleep-ms 6
        job 0,1 ddp2_nonvtx 2 --nvtx none --straggler 0 --extra-gemm 3
        job 0,1 ddp2_outer_ahead 2 --nvtx outer --straggler 1 --sleep-ms 5
        job 0,1 ddp2_moving 2 --nvtx none --moving --sleep-ms 8 --sync-every 1
    fi
    if [ "$NG" -ge 4 ]; then
        job 0,1,2,3 ddp4_gemm 4 --nvtx phases --straggler 3 --extra-gemm 2
        job 0,1,2,3 ddp4_moving 4 --nvtx none --moving --sleep-ms 8 --sync-every 1
    fi
    echo "ddp: $((SECONDS - t0)) s"
fi

# .qdstrm -> .nsys-rep (nsys's own import fails on the lent machine) -> .sqlite, all in parallel
t0=$SECONDS
for q in "$W"/*.qdstrm; do
    [ -e "$q" ] || continue
    n=${q%.qdstrm}
    (
        [ -s "$n.nsys-rep" ] || LD_LIBRARY_PATH=$KIT_LIBS "$IMPORTER" -i "$q" -o "$n.nsys-rep" > "$n.import.log" 2>&1
        "$NSYS" export --type sqlite -f true -o "$n.sqlite" "$n.nsys-rep" > "$n.export.log" 2>&1
        xz -T1 -6 -k -f "$n.sqlite" && cp "$n.sqlite.xz" "$OUT/"
        echo "post $(basename "$n"): $(stat -c %s "$n.sqlite" 2>/dev/null) bytes"
    ) &
done
wait
for f in "$W"/*.nsys-rep; do  # reports nsys imported itself
    n=${f%.nsys-rep}
    [ -e "$OUT/$(basename "$n").sqlite.xz" ] && continue
    "$NSYS" export --type sqlite -f true -o "$n.sqlite" "$f" > /dev/null 2>&1 && xz -T1 -k -f "$n.sqlite" && cp "$n.sqlite.xz" "$OUT/"
done
echo "post: $((SECONDS - t0)) s"
cp "$W"/*_truth.json "$W"/*.log "$OUT/" 2>/dev/null
ls -la "$OUT" | head -80
