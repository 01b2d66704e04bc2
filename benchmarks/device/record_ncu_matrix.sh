#!/usr/bin/env bash
# On the lent GPU (ncu 2025.3.1 on the PATH): record the ncu flag matrix of tests/data/ncu/matrix and
# NVIDIA's own pages of each report (the oracles `kernelscope ncu` must reproduce byte for byte).
#   OUT=dir bash benchmarks/device/record_ncu_matrix.sh [matrix|probe]...   (default: matrix)
# Programs: benchmarks/device/ncu_matrix.cu (templates, namespaces, anonymous namespaces, a lambda,
# an extern "C" kernel; modes all|app|range|fork|graph) and benchmarks/device/ncu_matrix_torch.py
# (SDPA, bf16 GEMM, ATen element-wise/reduce/softmax/layer-norm/scan kernels).
# For each report R: R.details.csv and R.raw.csv (`ncu --import R --csv --page details|raw
# --print-units base`) and R.raw_rename_off.csv (the same raw page with --rename-kernels off: the
# stored names). cpp_full and torch_full also get R.details_auto.csv (`--print-units auto`) and
# R.renames.yaml (`--rename-kernels-export yes`). Every step runs under `timeout`; a failing one never
# stops the others, and steps are skipped past DEADLINE seconds so that the archive is always written:
# $OUT/ncu_matrix.tar.xz (reports, oracles, COMMANDS) and $OUT/log.txt.
# Phase probe (a second, short call): reports of one or two kernel names (how ncu's renaming treats
# scopes that every kernel name holds), a report without any section (an empty --section-folder), and
# ncu's pages of a copy of cpp_sol whose results were all removed (benchmarks/device/ncu_strip_results.py).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/ncu_matrix_out}
W=${WORK:-/dev/shm/ncu_matrix}
DEADLINE=${DEADLINE:-400}
PY=${PY:-python3}
NCU=${NCU:-ncu}
mkdir -p "$OUT" "$W/matrix"
exec > >(tee -a "$OUT/log.txt") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
M=$W/matrix
BIN=$W/ncu_matrix
COMMON=(--clock-control none -f)

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$NCU" --version | tail -1
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
nvcc -O2 -arch=sm_90 -lineinfo --extended-lambda -o "$BIN" "$HERE/ncu_matrix.cu" || echo "nvcc failed"

# rec NAME SECS NCU-ARGS... -- PROGRAM...: profile into $M/NAME.ncu-rep, then write its oracles
rec() {
    local name=$1 secs=$2; shift 2
    local left=$((DEADLINE - SECONDS))
    if [ "$left" -lt 20 ]; then echo "=== SKIP $name (t=${SECONDS}s)"; return 0; fi
    [ "$secs" -gt "$left" ] && secs=$left
    echo "$name: ncu ${COMMON[*]} -o $name $*" | sed "s#$W/##g; s#$HERE/##g" >> "$M/COMMANDS"
    echo "=== [t=${SECONDS}s] $name: $*"
    (cd "$W" && timeout -k 5 "$secs" "$NCU" "${COMMON[@]}" -o "$M/$name" "$@" > "$W/$name.log" 2>&1)
    local rc=$? log=$W/$name.log
    echo "=== $name rc=$rc $(grep -c '^==PROF== Profiling' "$log") profiled;" \
         "$(grep -v '^==PROF== Profiling' "$log" | tail -2 | tr '\n' ' ')"
    local r=$M/$name.ncu-rep
    [ -f "$r" ] || { echo "no report for $name"; return 0; }
    timeout 60 "$NCU" --import "$r" --csv --page details --print-units base > "$M/$name.details.csv"
    timeout 60 "$NCU" --import "$r" --csv --page raw --print-units base > "$M/$name.raw.csv"
    timeout 60 "$NCU" --import "$r" --csv --page raw --print-units base --rename-kernels off \
        > "$M/$name.raw_rename_off.csv"
    echo "    $(ls -la "$r" | awk '{print $5}') bytes, details $(wc -l < "$M/$name.details.csv") lines"
}

extras() {  # auto units and ncu's own kernel-rename export for one report
    local r=$M/$1.ncu-rep
    [ -f "$r" ] || return 0
    timeout 60 "$NCU" --import "$r" --csv --page details --print-units auto > "$M/$1.details_auto.csv"
    timeout 60 "$NCU" --import "$r" --csv --page raw --rename-kernels-export yes \
        --rename-kernels-path "$M/$1.renames.yaml" > /dev/null 2> "$W/$1.export.log"
    echo "    extras $1: $(ls "$M/$1".* | tr '\n' ' ')"
}

SET_METRICS=smsp__inst_executed.sum,smsp__thread_inst_executed.sum
SET_METRICS=$SET_METRICS,smsp__thread_inst_executed_per_inst_executed.ratio
SET_METRICS=$SET_METRICS,sm__sass_thread_inst_executed_op_fadd_pred_on.sum
SET_METRICS=$SET_METRICS,smsp__sass_inst_executed_op_global_ld.sum
SET_METRICS=$SET_METRICS,launch__thread_count,smsp__warps_launched.sum
SET_METRICS=$SET_METRICS,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
SET_METRICS=$SET_METRICS,gpu__time_duration.sum,dram__bytes.sum.per_second

matrix() {
    rec cpp_basic 60 --set basic "$BIN" all
    rec cpp_full 120 --set full --import-source yes "$BIN" all
    extras cpp_full
    rec torch_full 150 --set full --nvtx --nvtx-include "torch_matrix/" \
        "$PY" "$HERE/ncu_matrix_torch.py"
    extras torch_full
    rec torch_skip 120 --launch-skip 3 --launch-count 8 --set basic \
        "$PY" "$HERE/ncu_matrix_torch.py"
    rec cpp_detailed 90 --set detailed "$BIN" all
    rec cpp_sol 60 --section SpeedOfLight "$BIN" all
    rec cpp_memtables 60 --section MemoryWorkloadAnalysis_Tables "$BIN" all
    rec cpp_source 60 --section SourceCounters --import-source yes "$BIN" all
    rec cpp_instr 60 --section InstructionStats --section WarpStateStats --section LaunchStats \
        --section Occupancy "$BIN" all
    rec cpp_metrics 60 --metrics "$SET_METRICS" "$BIN" all
    rec cpp_nvtx 60 --nvtx --nvtx-include "work/phase_add/" --nvtx-include "work/phase_reduce/" \
        --section SpeedOfLight "$BIN" all
    rec cpp_nvtx_excl 60 --nvtx --nvtx-include "work/" --nvtx-exclude "work/phase_mul/" \
        --section SpeedOfLight "$BIN" all
    rec cpp_skip 60 --launch-skip 2 --launch-count 3 --set basic "$BIN" all
    rec cpp_kfilter 60 --kernel-name "regex:scale|reduce" --section SpeedOfLight --section Occupancy \
        "$BIN" all
    rec cpp_app_replay 90 --replay-mode application --set basic "$BIN" app
    rec cpp_range 60 --replay-mode range --section SpeedOfLight "$BIN" range
    rec cpp_app_range 90 --replay-mode app-range --section SpeedOfLight "$BIN" range
    rec cpp_from_start_off 60 --profile-from-start off --set basic "$BIN" range
    rec cpp_fork_all 60 --target-processes all --section SpeedOfLight --section LaunchStats \
        "$BIN" fork
    rec cpp_graph_node 60 --set basic "$BIN" graph
    rec cpp_graph_whole 60 --graph-profiling graph --section SpeedOfLight "$BIN" graph
}

probe() {
    mkdir -p "$W/empty_sections"
    rec cpp_one_scale 60 --kernel-name "regex:scale" -c 1 --section SpeedOfLight "$BIN" all
    rec cpp_one_reduce 60 --kernel-name "regex:deep_reduce" --section SpeedOfLight "$BIN" all
    rec cpp_two_binary 60 --kernel-name "regex:binary_kernel" --section SpeedOfLight "$BIN" all
    rec cpp_no_sections 60 --section-folder "$W/empty_sections" -c 2 "$BIN" all
    # (recorded nothing on 2026-11-27 without --kernel-name-base demangled: the regex met the function name)
    rec torch_one_gelu 120 --kernel-name-base demangled --kernel-name "regex:Gelu" -c 1 \
        --section SpeedOfLight "$PY" "$HERE/ncu_matrix_torch.py"
    [ -f "$M/cpp_sol.ncu-rep" ] || rec cpp_sol 60 --section SpeedOfLight "$BIN" all
    "$PY" "$HERE/ncu_strip_results.py" "$M/cpp_sol.ncu-rep" "$M/stripped_no_results.ncu-rep"
    for page in details raw; do
        timeout 60 "$NCU" --import "$M/stripped_no_results.ncu-rep" --csv --page $page --print-units base \
            > "$M/stripped_no_results.$page.csv" 2> "$M/stripped_no_results.$page.err"
        echo "stripped_no_results $page rc=$? $(wc -c < "$M/stripped_no_results.$page.csv") bytes"
    done
}

for phase in "${@:-matrix}"; do "$phase"; done

echo "=== pack (t=${SECONDS}s)"
ls -la "$M"
(cd "$W" && tar cf - matrix | xz -T1 --lzma2=preset=6,dict=192MiB > "$OUT/ncu_matrix.tar.xz")
ls -la "$OUT"
echo "=== done (t=${SECONDS}s)"
