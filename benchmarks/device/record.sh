#!/usr/bin/env bash
# Record real Nsight Systems / Nsight Compute / Kineto fixtures on the lent GPU machine.
#
#   OUT=dir DEADLINE=540 bash benchmarks/device/record.sh PHASE...
#   phases (in the order given):
#     env         card, driver, tool versions, nsys/ncu help texts (report and rule lists)
#     ddp         2-GPU DDP job with a straggler: per-rank nsys, nsys around torchrun, Kineto per rank
#     single      single-GPU training loop, bad and fixed, under nsys; Kineto of both
#     multistream CUDA C++ 4-stream / NVTX / OS runtime / unified-memory program under nsys
#     twoproc     two processes sharing GPU 0 under one nsys
#     post        .qdstrm -> QdstrmImporter -> .nsys-rep -> sqlite -> every nsys stats report and
#                 every nsys analyze rule (all reports recorded so far, in parallel)
#     packnsys    archives of the nsys results into $OUT
#     ncu         Nsight Compute recordings of benchmarks/device/ncu_kernels.cu (+ one torch GEMM)
#     packncu     archive of the ncu results into $OUT
# Every step runs under `timeout`, logs its rc, and a failing step never stops the others. Steps are
# skipped when less than RESERVE seconds of DEADLINE (seconds since the script started) would remain,
# so that the pack phases always run. Work files go to $WORK (default /tmp/ks_rec); only archives and
# log.txt go to $OUT.
# Tools: NSYS (default: nsys on PATH, else the one inside Nsight Compute), IMPORTER (QdstrmImporter
# beside it), KIT_LIBS (libdw & co for the importer, default .kit/libs), NCU, PY (python3), NVCC.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/ks_out}
# nsys writes a ~2 GB .qdstrm per run on the lent machine (~90 s on its disk): use RAM when there is room
if [ -z "${WORK:-}" ] && [ "$(df --output=avail -B1G /dev/shm 2>/dev/null | tail -1 | tr -d ' ')" -gt 40 ] 2>/dev/null; then
    WORK=/dev/shm/ks_rec
    export TMPDIR=/dev/shm/ks_tmp
    mkdir -p "$TMPDIR"
fi
W=${WORK:-/tmp/ks_rec}
DEADLINE=${DEADLINE:-540}
RESERVE=${RESERVE:-45}
mkdir -p "$OUT" "$W/meta"
LOG=$OUT/log.txt
exec > >(tee -a "$LOG") 2>&1

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
NVCC=${NVCC:-nvcc}
NCU=${NCU:-ncu}
NSYS=${NSYS:-$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | sort -V | tail -1)}
IMPORTER=${IMPORTER:-$(ls -d "$(dirname "$(readlink -f "$NSYS")")"/../linux-desktop-*/QdstrmImporter 2>/dev/null | head -1)}
KIT_LIBS=${KIT_LIBS:-$REPO/.kit/libs}
TR=("$PY" -m torch.distributed.run --standalone --nproc_per_node 2)
DDP_EXTRA=${DDP_EXTRA:-}        # extra args for train_ddp.py (dry runs only), word-split
SINGLE_EXTRA=${SINGLE_EXTRA:-}  # extra args for train_single.py (dry runs only), word-split
NSYS_FLAGS=(--trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none --cuda-memory-usage=true -f true)
export KS_NSYS=$NSYS KS_NSYS_FLAGS="${NSYS_FLAGS[*]}" NSYS
declare -a SUMMARY=() POST_PIDS=() POST_DONE=() REPORTS=() RULES=()
echo "### record.sh $* (start $(date -u +%FT%TZ)); NSYS=$NSYS IMPORTER=$IMPORTER KIT_LIBS=$KIT_LIBS W=$W OUT=$OUT"

left() { echo $((DEADLINE - SECONDS)); }

# step NAME SECS CMD...: run CMD under timeout (clamped to the deadline), log rc and duration
step() {
    local name=$1 secs=$2; shift 2
    local avail=$(( $(left) - RESERVE ))
    if [ "$avail" -lt 15 ]; then
        echo "=== SKIP $name: only $(left)s of the deadline left"
        SUMMARY+=("$name SKIPPED (deadline)")
        return 0
    fi
    [ "$secs" -gt "$avail" ] && secs=$avail
    echo "=== [$(date +%T) t=${SECONDS}s] $name (timeout ${secs}s): $*"
    local t0=$SECONDS
    timeout -k 10 "$secs" "$@"
    local rc=$?
    echo "=== $name rc=$rc ($((SECONDS - t0))s)"
    SUMMARY+=("$name rc=$rc $((SECONDS - t0))s")
    return 0
}

phase_env() {
    local m=$W/meta
    {
        echo "date: $(date -u +%FT%TZ)"; uname -a
        nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm,pci.bus_id --format=csv
        nvidia-smi | head -20
        nvidia-smi topo -m
        echo "--- nsys: $NSYS"; "$NSYS" --version
        echo "--- importer: $IMPORTER"
        echo "--- ncu: $(command -v "$NCU")"; "$NCU" --version
        echo "--- nvcc"; "$NVCC" --version
        echo "--- python"; "$PY" - <<'PYEOF'
import sys, torch
print("python", sys.version.split()[0])
try:
    nccl = ".".join(map(str, torch.cuda.nccl.version()))
except Exception as e:  # noqa: BLE001
    nccl = f"? ({e})"
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(),
      "nccl", nccl, "gpus", torch.cuda.device_count())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(i, p.name, f"sm_{p.major}{p.minor}", p.multi_processor_count, "SMs", p.total_memory // 2**20, "MiB")
PYEOF
        env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA)' | sort
    } > "$m/versions.txt" 2>&1
    cat "$m/versions.txt"
    "$NSYS" --version > "$m/nsys_version.txt" 2>&1
    "$NCU" --version > "$m/ncu_version.txt" 2>&1
    "$NSYS" profile --help > "$m/nsys_profile_help.txt" 2>&1
    "$NSYS" stats --help > "$m/nsys_stats_help.txt" 2>&1
    "$NSYS" stats --help-reports > "$m/nsys_stats_help_reports.txt" 2>&1
    "$NSYS" analyze --help > "$m/nsys_analyze_help.txt" 2>&1
    "$NSYS" analyze --help-rules > "$m/nsys_analyze_help_rules.txt" 2>&1
    "$NSYS" export --help > "$m/nsys_export_help.txt" 2>&1
    "$NCU" --help > "$m/ncu_help.txt" 2>&1
    "$NCU" --list-sets > "$m/ncu_list_sets.txt" 2>&1
    "$NCU" --list-sections > "$m/ncu_list_sections.txt" 2>&1
    SUMMARY+=("env done")
}

phase_ddp() {
    local d=$W/ddp; mkdir -p "$d"
    # (a) one nsys report per rank
    cd "$d" || return 0
    step ddp_per_rank 240 "${TR[@]}" --no-python bash "$HERE/nsys_rank_wrap.sh" "$d/ddp_rank" \
            "$PY" "$HERE/train_ddp.py" --out-dir "$d" --tag ddp_per_rank --steps 40 --warmup 3 \
            --slow-rank 1 --delay-ms 20 $DDP_EXTRA
    # (b) one nsys report around torchrun
    step ddp_torchrun 240 "$NSYS" profile "${NSYS_FLAGS[@]}" -o "$d/ddp_torchrun" \
        "${TR[@]}" "$HERE/train_ddp.py" --out-dir "$d" --tag ddp_torchrun --steps 40 --warmup 3 \
        --slow-rank 1 --delay-ms 20 $DDP_EXTRA
    # (c) Kineto traces per rank (no nsys: CUPTI is not shared), steps 10..13
    step ddp_kineto 180 "${TR[@]}" "$HERE/train_ddp.py" --out-dir "$d" --tag ddp_kineto \
        --steps 40 --warmup 3 --slow-rank 1 --delay-ms 20 --kineto --kineto-start 10 --kineto-active 4 $DDP_EXTRA
    cd "$W" || true
    post_bg ddp
    cat > "$d/MANIFEST" <<EOF
DDP straggler recordings (benchmarks/device/train_ddp.py, torch DDP over NCCL, 2 GPUs, 1 process per GPU)
model: MLP 1024 -> 4096 -> 4096 -> 4096 -> 1024 (ReLU), fp32, batch 512 per rank, SGD momentum 0.9
steps: 40 per run, NVTX range "train_step N" per step, N = 0..39; steps 0, 1, 2 are warm-up
straggler: rank 1 sleeps 20 ms on the host (time.sleep(0.020)) after the forward pass and before
  backward, in EVERY step (warm-up steps included); rank 0 has no delay, so rank 0 waits for rank 1
  inside the NCCL all-reduce kernels that DDP launches during backward.
each step ends with torch.cuda.synchronize(); per-step wall times: <tag>_steps_rank{0,1}.json
env: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
runs:
  ddp_rank0 / ddp_rank1 : ${TR[*]} --no-python bash nsys_rank_wrap.sh ddp_rank python3 train_ddp.py --tag ddp_per_rank ...
                          (wrapper = $NSYS profile ${NSYS_FLAGS[*]} -o ddp_rank%q{RANK} ...)
  ddp_torchrun          : $NSYS profile ${NSYS_FLAGS[*]} -o ddp_torchrun ${TR[*]} train_ddp.py --tag ddp_torchrun ...
  ddp_kineto_rank{0,1}_kineto.json : ${TR[*]} train_ddp.py --tag ddp_kineto --kineto --kineto-start 10 --kineto-active 4
                          (torch.profiler CPU+CUDA, ProfilerStep#10..#13, no nsys)
EOF
}

phase_single() {
    local d=$W/single; mkdir -p "$d"
    local v
    for v in bad fixed; do
        cd "$d" || return 0
        step "single_$v" 180 "$NSYS" profile "${NSYS_FLAGS[@]}" -o "$d/train_$v" \
            "$PY" "$HERE/train_single.py" --variant "$v" --steps 40 --warmup 3 --json "$d/train_${v}_steps.json" $SINGLE_EXTRA
    done
    post_bg single
    phase_singlekineto
}

phase_singlekineto() {  # Kineto traces of the bad and fixed loops (no nsys)
    local d=$W/single v; mkdir -p "$d"
    cd "$d" || return 0
    for v in bad fixed; do
        step "single_${v}_kineto" 120 "$PY" "$HERE/train_single.py" --variant "$v" --steps 40 \
            --warmup 3 --json "$d/train_${v}_kineto_steps.json" --kineto "$d/train_${v}_kineto.json" $SINGLE_EXTRA
    done
    cd "$W" || true
}

phase_multistream() {
    local d=$W/multistream; mkdir -p "$d"
    step build_multistream 120 "$NVCC" -O2 -arch=sm_90 -lineinfo -o "$d/multistream" "$HERE/multistream.cu" -lpthread
    local um=()
    "$NSYS" profile --help > "$d/nsys_profile_help.txt" 2>&1
    grep -q -- '--cuda-um-cpu-page-faults' "$d/nsys_profile_help.txt" && um+=(--cuda-um-cpu-page-faults=true)
    grep -q -- '--cuda-um-gpu-page-faults' "$d/nsys_profile_help.txt" && um+=(--cuda-um-gpu-page-faults=true)
    echo "unified-memory flags: ${um[*]:-(none found in nsys profile --help)}"
    cd "$d" || return 0
    step multistream 120 "$NSYS" profile "${NSYS_FLAGS[@]}" "${um[@]}" -o "$d/multistream" \
        "$d/multistream" 6
    cd "$W" || true
    post_bg multistream
    echo "$NSYS profile ${NSYS_FLAGS[*]} ${um[*]} -o multistream ./multistream 6" > "$d/COMMAND"
}

phase_redo() {  # re-run the post step for reports carried back in .kit/redo/SUBDIR/*.nsys-rep
    local f sub
    for f in "$REPO"/.kit/redo/*/*.nsys-rep; do
        [ -e "$f" ] || continue
        sub=$(basename "$(dirname "$f")")
        mkdir -p "$W/$sub"
        cp "$f" "$W/$sub/"
        echo "redo: $f"
    done
    for sub in "$REPO"/.kit/redo/*/; do [ -d "$sub" ] && post_bg "$(basename "$sub")"; done
}

phase_twoproc() {
    local d=$W/twoproc; mkdir -p "$d"
    cd "$d" || return 0
    step twoproc 180 "$NSYS" profile "${NSYS_FLAGS[@]}" -o "$d/twoproc" \
        "$PY" "$HERE/two_proc.py" --iters 30
    cd "$W" || true
    post_bg twoproc
    echo "$NSYS profile ${NSYS_FLAGS[*]} -o twoproc python3 two_proc.py --iters 30" > "$d/COMMAND"
}

# one nsys stats report / analyze rule on one sqlite (run by xargs -P)
oracle_one() {  # oracle_one stats|analyze NAME SQLITE ODIR
    local kind=$1 name=$2 db=$3 odir=$4
    local base; base=$(basename "$db" .sqlite)
    local t0=$SECONDS rc
    if [ "$kind" = stats ]; then
        timeout -k 5 180 "$NSYS" stats --report "$name" --format csv --output "$odir/${base}" "$db" \
            > "$odir/${base}_${name}.stdout" 2>&1
    else
        timeout -k 5 180 "$NSYS" analyze -r "$name" --format csv --output "$odir/${base}" "$db" \
            > "$odir/${base}_${name}.stdout" 2>&1
    fi
    rc=$?
    echo "$kind $name rc=$rc $((SECONDS - t0))s"
}
export -f oracle_one

post_one() {  # post_one PATH_WITHOUT_EXTENSION
    local p=$1 name; name=$(basename "$1")
    local odir; odir=$(dirname "$p")/oracles_$name
    mkdir -p "$odir"
    {
        echo "## post $name (t=${SECONDS}s)"
        if [ ! -s "$p.nsys-rep" ] && [ -f "$p.qdstrm" ]; then
            echo "importing $p.qdstrm"
            LD_LIBRARY_PATH=$KIT_LIBS timeout -k 5 300 nice -n 10 "$IMPORTER" -i "$p.qdstrm" -o "$p.nsys-rep"
            echo "importer rc=$?"
            [ -s "$p.nsys-rep" ] && rm -f "$p.qdstrm"
        fi
        if [ ! -s "$p.nsys-rep" ]; then echo "NO .nsys-rep for $name"; return 0; fi
        timeout -k 5 300 nice -n 10 "$NSYS" export --type sqlite -f true -o "$p.sqlite" "$p.nsys-rep"
        echo "export rc=$?"
        if [ ! -s "$p.sqlite" ]; then echo "NO .sqlite for $name"; return 0; fi
        printf '%s\n' "${REPORTS[@]}" | nice -n 10 xargs -P 4 -I{} bash -c 'oracle_one stats "$1" "$2" "$3"' _ {} "$p.sqlite" "$odir"
        printf '%s\n' "${RULES[@]}" | nice -n 10 xargs -P 4 -I{} bash -c 'oracle_one analyze "$1" "$2" "$3"' _ {} "$p.sqlite" "$odir"
        ls -la "$odir" | awk '{print $5, $9}'
        echo "## post $name done (t=${SECONDS}s)"
    } > "$(dirname "$p")/post_$name.log" 2>&1
}

post_lists() {  # parse the stats report / analyze rule names once
    [ ${#REPORTS[@]} -gt 0 ] && return 0
    local m=$W/meta
    [ -s "$m/nsys_stats_help_reports.txt" ] || "$NSYS" stats --help-reports > "$m/nsys_stats_help_reports.txt" 2>&1
    [ -s "$m/nsys_analyze_help_rules.txt" ] || "$NSYS" analyze --help-rules > "$m/nsys_analyze_help_rules.txt" 2>&1
    # report / rule names: indented lines "  name[:opts] -- description" (or "  name -- ...")
    mapfile -t REPORTS < <(grep -E '^\s+[a-z][a-z0-9_]*(\[|\s+--|$)' "$m/nsys_stats_help_reports.txt" \
        | sed -E 's/^\s+([a-z][a-z0-9_]*).*/\1/' | awk '!seen[$0]++')
    mapfile -t RULES < <(grep -E '^\s+[a-z][a-z0-9_]*(\[|\s+--|$)' "$m/nsys_analyze_help_rules.txt" \
        | sed -E 's/^\s+([a-z][a-z0-9_]*).*/\1/' | awk '!seen[$0]++')
    if [ ${#REPORTS[@]} -lt 5 ]; then
        echo "report list parse gave ${#REPORTS[@]} names; using a fixed list"
        REPORTS=(cuda_api_gpu_sum cuda_api_sum cuda_api_trace cuda_gpu_kern_gb_sum cuda_gpu_kern_sum
                 cuda_gpu_mem_size_sum cuda_gpu_mem_time_sum cuda_gpu_sum cuda_gpu_trace cuda_kern_exec_sum
                 cuda_kern_exec_trace nvtx_gpu_proj_sum nvtx_gpu_proj_trace nvtx_kern_sum nvtx_pushpop_sum
                 nvtx_pushpop_trace nvtx_startend_sum nvtx_sum osrt_sum um_cpu_page_faults_sum um_sum um_total_sum)
    fi
    if [ ${#RULES[@]} -lt 2 ]; then
        echo "rule list parse gave ${#RULES[@]} names; using a fixed list"
        RULES=(cuda_memcpy_async cuda_memcpy_sync cuda_memset_sync cuda_api_sync gpu_gaps gpu_time_util)
    fi
    printf '%s\n' "${REPORTS[@]}" > "$m/stats_reports_used.txt"
    printf '%s\n' "${RULES[@]}" > "$m/analyze_rules_used.txt"
    echo "post: ${#REPORTS[@]} stats reports: ${REPORTS[*]}"
    echo "post: ${#RULES[@]} analyze rules: ${RULES[*]}"
}

post_bg() {  # post_bg SUBDIR: start post_one (niced, in the background) for each report recorded there
    [ "${POST:-1}" = 1 ] || return 0
    post_lists
    local q
    for q in "$W/$1"/*.qdstrm "$W/$1"/*.nsys-rep; do
        [ -e "$q" ] || continue
        q=${q%.qdstrm}; q=${q%.nsys-rep}
        [[ " ${POST_DONE[*]} " == *" $q "* ]] && continue
        POST_DONE+=("$q")
        echo "post: starting $q in the background"
        post_one "$q" &
        POST_PIDS+=($!)
    done
}

kill_tree() {  # kill_tree PID: the process and its descendants, by id
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
    kill "$1" 2>/dev/null
}

phase_post() {  # start any report not started yet, then wait for all (not past the deadline)
    local sub
    for sub in ddp single multistream twoproc; do [ -d "$W/$sub" ] && post_bg "$sub"; done
    local t0=$SECONDS p n
    while :; do
        n=0
        for p in "${POST_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
        [ "$n" -eq 0 ] && break
        if [ $(( $(left) - RESERVE )) -le 0 ]; then
            echo "post: deadline, killing $n unfinished post jobs"
            for p in "${POST_PIDS[@]}"; do kill_tree "$p"; done
            break
        fi
        sleep 2
    done
    for p in "${POST_DONE[@]}"; do
        local lg; lg=$(dirname "$p")/post_$(basename "$p").log
        grep -vE '^(stats|analyze) .* rc=0 ' "$lg" 2>/dev/null | grep -vE '^[0-9]+ ' | head -60
        echo "post $(basename "$p"): $(grep -c ' rc=0 ' "$lg" 2>/dev/null) oracle runs with rc=0, $(grep -cE '^(stats|analyze) .* rc=[1-9]' "$lg" 2>/dev/null) failed"
    done
    SUMMARY+=("post ${#POST_DONE[@]} reports, waited $((SECONDS - t0))s")
}

# pack NAME DIR...: tar.xz DIR... (relative to $W) into $OUT/NAME.tar.xz, without .qdstrm/.nsys-rep/binaries;
# split into 15 MiB parts if needed
pack() {
    local name=$1; shift
    local dirs=() x
    for x in "$@"; do [ -e "$W/$x" ] && dirs+=("$x"); done
    [ ${#dirs[@]} -gt 0 ] || { echo "pack $name: nothing"; return 0; }
    tar -C "$W" --exclude='*.qdstrm' --exclude='*.nsys-rep' --exclude='multistream/multistream' \
        --exclude='ncu/ncu_kernels' -cf - "${dirs[@]}" | xz -T0 -6 > "$OUT/$name.tar.xz"
    split_big "$OUT/$name.tar.xz"
}

split_big() {
    local f=$1
    local sz; sz=$(stat -c %s "$f")
    if [ "$sz" -gt $((15 * 1024 * 1024 + 900 * 1024)) ]; then
        split -b 15M -d "$f" "$f.part"
        rm -f "$f"
    fi
    ls -la "$f"* 
}

phase_packnsys() {
    cp "$W/meta/versions.txt" "$OUT/versions.txt" 2>/dev/null
    pack nsys_ddp meta ddp
    pack nsys_single single
    pack nsys_misc multistream twoproc
    # the .nsys-rep files themselves, smallest first, up to ~14 MiB in all (one archive)
    local list=() tot=0 f sz
    while read -r sz f; do
        [ $((tot + sz)) -gt $((14 * 1024 * 1024)) ] && { echo "nsys-rep not packed (size): $f $sz"; continue; }
        list+=("${f#"$W"/}"); tot=$((tot + sz))
    done < <(find "$W" -name '*.nsys-rep' -printf '%s %p\n' | sort -n)
    if [ ${#list[@]} -gt 0 ]; then
        tar -C "$W" -cf "$OUT/nsys_reps.tar" "${list[@]}"
        split_big "$OUT/nsys_reps.tar"
    fi
    find "$W" -name '*.nsys-rep' -o -name '*.qdstrm' -o -name '*.sqlite' | xargs -r ls -la
    ls -la "$OUT"
}

phase_ncu() {
    local d=$W/ncu; mkdir -p "$d"
    step build_ncu_kernels 120 "$NVCC" -O3 -arch=sm_90 -lineinfo -o "$d/ncu_kernels" "$HERE/ncu_kernels.cu"
    local K=$d/ncu_kernels
    local C=("$NCU" --clock-control none -f)
    local METRICS=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
    cd "$d" || return 0
    : > "$d/COMMANDS"
    rec() {  # rec NAME SECS NCU-ARGS... APP...  (uses d and C of the calling phase)
        local n=$1 s=$2; shift 2
        echo "$n: ncu --clock-control none -f -o $n $*" >> "$d/COMMANDS"
        step "ncu_$n" "$s" "${C[@]}" -o "$d/$n" "$@"
    }
    rec full 150 --set full "$K" all
    rec basic 60 --set basic "$K" all
    rec detailed 120 --set detailed "$K" all
    rec sol_occ 60 --section SpeedOfLight --section Occupancy "$K" all
    rec metrics 60 --metrics "$METRICS" "$K" all
    rec source 120 --section SourceCounters --import-source yes "$K" all
    rec nvtx_include 60 --nvtx --nvtx-include "phase_strided/" --nvtx-include "phase_copy/" \
        --section SpeedOfLight --section Occupancy "$K" all
    rec range_replay 60 --replay-mode range --section SpeedOfLight "$K" range
    rec app_replay 120 --replay-mode application --set basic "$K" app
    rec fork_all 60 --target-processes all --section SpeedOfLight "$K" fork
    if grep -q PmSampling "$W/meta/ncu_list_sections.txt" 2>/dev/null || "$NCU" --list-sections 2>/dev/null | grep -q PmSampling; then
        rec pmsampling 90 --section PmSampling "$K" all
    else
        echo "PmSampling section not listed by ncu --list-sections: skipped"; SUMMARY+=("ncu_pmsampling not available")
    fi
}

phase_ncu2() {  # the lower-priority ncu recordings
    local d=$W/ncu K=$W/ncu/ncu_kernels
    local C=("$NCU" --clock-control none -f)
    cd "$d" || return 0
    rec fork_apponly 60 --target-processes application-only --section SpeedOfLight "$K" fork
    rec forkonly_all 60 --target-processes all --section SpeedOfLight "$K" forkonly
    rec profile_from_start_off 60 --profile-from-start off --section SpeedOfLight "$K" range
    rec torch_fp32_gemm 150 --set full --nvtx --nvtx-include "torch_fp32_gemm/" "$PY" -c \
        "import torch; torch.backends.cuda.matmul.allow_tf32=False; a=torch.randn(4096,4096,device='cuda'); b=torch.randn(4096,4096,device='cuda'); torch.cuda.synchronize(); torch.cuda.nvtx.range_push('torch_fp32_gemm'); c=a@b; torch.cuda.synchronize(); torch.cuda.nvtx.range_pop(); print('torch', torch.__version__, float(c.sum()))"
}

phase_ncuoracles() {  # ncu --import for every report, in parallel
    local d=$W/ncu
    cd "$d" || return 0
    local r pids=()
    for r in "$d"/*.ncu-rep; do
        [ -e "$r" ] || continue
        (
            b=${r%.ncu-rep}
            timeout -k 5 120 "$NCU" --import "$r" --csv --page details --print-units base > "$b.details.csv" 2> "$b.details.err"; echo "$(basename "$b") details csv rc=$?"
            timeout -k 5 120 "$NCU" --import "$r" --csv --page raw --print-units base > "$b.raw.csv" 2> "$b.raw.err"; echo "$(basename "$b") raw csv rc=$?"
            timeout -k 5 120 "$NCU" --import "$r" --page details --print-units base > "$b.details.txt" 2> "$b.details_txt.err"; echo "$(basename "$b") details txt rc=$?"
        ) &
        pids+=($!)
    done
    [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}" 2>/dev/null
    if [ -e "$d/source.ncu-rep" ]; then
        timeout -k 5 120 "$NCU" --import "$d/source.ncu-rep" --csv --page source --print-source sass > "$d/source.source_sass.csv" 2> "$d/source.source_sass.err"
        echo "source page (sass) csv rc=$?"
    fi
    find "$d" -name '*.err' -size 0 -delete
    for r in "$d"/*.err; do [ -e "$r" ] && { echo "--- $r"; head -5 "$r"; }; done
    ls -la "$d"
    cd "$W" || true
}

phase_packncu() {
    cp "$W/meta/versions.txt" "$OUT/versions.txt" 2>/dev/null
    pack ncu ncu meta
    ls -la "$OUT"
}

for ph in "$@"; do
    echo; echo "##### phase $ph (t=${SECONDS}s)"
    "phase_$ph"
done
echo; echo "##### summary (t=${SECONDS}s)"
printf '%s\n' "${SUMMARY[@]}"
sleep 1
