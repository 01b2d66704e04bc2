#!/usr/bin/env bash
# Issue 7 on a lent H100/H200: the host-overhead demo from its naive to its fixed variant, recorded
# under Nsight Systems, then Kernelscope's findings, walkthrough (predicted vs measured gain, Mann-
# Whitney verdict), comparison and gate on the two real reports.
#
#   mkdir -p .kit && cp -r ../shared/device-kit/libs .kit/libs      # QdstrmImporter's libdw & co
#   bash benchmarks/device_walkthrough.sh [OUTDIR] [ITERS]            # ~1 minute on an H200
#
# Needs: nvcc, an nsys (PATH, $NSYS, or the one inside Nsight Compute), python3 with numpy+pandas
# (PYTHON=...). The repo is used in place (PYTHONPATH), nothing is installed.
# Env: KS_APP=prebuilt host_overhead binary (skip nvcc); KS_REPORTS_DIR=folder with naive.sqlite
# and fixed.sqlite (skip recording: a dry run of the analysis half on any machine);
# KS_KIT_LIBS=folder with the importer's libs (default .kit/libs).
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-/tmp/kernelscope-walkthrough}
ITERS=${2:-20}
PY=${PYTHON:-python3}
KIT_LIBS=${KS_KIT_LIBS:-$HERE/.kit/libs}
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
export KERNELSCOPE_CACHE="$OUT/cache"
KS=("$PY" -m engine.cli)
mkdir -p "$OUT"
declare -a SUMMARY=()
step() {  # step NAME COMMAND...
    local name=$1; shift
    echo; echo "=== $name: $*"
    "$@"; local rc=$?
    SUMMARY+=("$(printf '%-22s %s' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")")")
    return $rc
}

find_nsys() {
    if [ -n "${NSYS:-}" ]; then echo "$NSYS"; return; fi
    command -v nsys && return
    ls -d /opt/nvidia/nsight-systems/*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys \
        2>/dev/null | sort -V | tail -1
}

record() {  # record NAME VARIANT -> $OUT/NAME.sqlite
    local name=$1 variant=$2 base="$OUT/$1"
    rm -f "$base".nsys-rep "$base".qdstrm "$base".sqlite
    "$NSYS_BIN" profile --trace=cuda,nvtx,osrt --sample=none --cpuctxsw=none --cuda-memory-usage=true \
        --output "$base" --force-overwrite true "$APP" "$variant" "$ITERS" || return 1
    if [ ! -s "$base.nsys-rep" ]; then
        # nsys's own import step fails on the lent machine: finish it with the importer beside it.
        local q="$base.qdstrm" imp
        [ -s "$q" ] || q=$(ls -t "$OUT"/*.qdstrm "$PWD"/report*.qdstrm 2>/dev/null | head -1)
        imp=$(ls -d "$(dirname "$(dirname "$NSYS_BIN")")"/*/QdstrmImporter 2>/dev/null | head -1)
        echo "(nsys left ${q:-no .qdstrm}; importing with ${imp:-no QdstrmImporter found})"
        [ -n "$q" ] && [ -n "$imp" ] || return 1
        LD_LIBRARY_PATH="$KIT_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$imp" -i "$q" -o "$base.nsys-rep" || return 1
    fi
    "$NSYS_BIN" export --type sqlite --force-overwrite true --output "$base.sqlite" "$base.nsys-rep"
}

echo "=== machine"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv 2>/dev/null || echo "(no nvidia-smi)"

if [ -n "${KS_REPORTS_DIR:-}" ]; then
    cp "$KS_REPORTS_DIR/naive.sqlite" "$KS_REPORTS_DIR/fixed.sqlite" "$OUT/"
else
    NSYS_BIN=$(find_nsys)
    [ -n "$NSYS_BIN" ] || { echo "no nsys found: set NSYS=/path/to/nsys"; exit 1; }
    "$NSYS_BIN" --version
    APP=${KS_APP:-$OUT/host_overhead}
    if [ -z "${KS_APP:-}" ]; then
        step build nvcc -O3 -arch=sm_90 -o "$APP" "$HERE/kernels/host_overhead/host_overhead.cu" -ldl || exit 1
    fi
    step record_naive record naive naive || exit 1
    step record_fixed record fixed fixed || exit 1
fi

N="$OUT/naive.sqlite"; F="$OUT/fixed.sqlite"; P="$OUT/project"
rm -rf "$P"
step findings_naive "${KS[@]}" findings "$N" --pinned-from "$F" --brief
step findings_fixed "${KS[@]}" findings "$F" --brief
step walkthrough_start "${KS[@]}" walkthrough start "$N" --project "$P" --pinned-from "$F"
step walkthrough_pick "${KS[@]}" walkthrough pick host.allocate-once host.async-copies copies.pinned --project "$P"
step walkthrough_verify "${KS[@]}" walkthrough verify "$F" --project "$P"
step compare "${KS[@]}" compare "$N" "$F"
cat > "$OUT/gates.toml" <<'TOML'
[[gate]]
name = "iteration time"
check = "iteration_time"
max_regression_pct = 5
TOML
step gate_fixed_vs_naive "${KS[@]}" gate "$F" --baseline "$N" --rules "$OUT/gates.toml"
"${KS[@]}" gate "$N" --baseline "$F" --rules "$OUT/gates.toml" >/dev/null
rc=$?; SUMMARY+=("$(printf '%-22s %s' gate_naive_vs_fixed "$([ $rc -eq 4 ] && echo "ok (failed as it must, rc=4)" || echo "UNEXPECTED rc=$rc")")")
step export_html "${KS[@]}" walkthrough report --project "$P" -o "$OUT/walkthrough.html"
step export_perfetto "${KS[@]}" export "$F" --format perfetto -o "$OUT/fixed.perfetto.json"
"${KS[@]}" walkthrough status --project "$P" --json > "$OUT/walkthrough.json"

echo; echo "=== summary ($OUT)"
printf '%s\n' "${SUMMARY[@]}"
"$PY" - "$OUT/walkthrough.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["runs"][-1]; s = r["stats"]
print(f"iteration median naive {s['median_ns_a']/1e6:.3f} ms -> fixed {s['median_ns_b']/1e6:.3f} ms "
      f"(n={s['n_a']}/{s['n_b']}), speedup {s['speedup']:.2f}x, p={s['p_value']:.2e}, {r['verdict']}")
print(f"gain per iteration: measured {r['measured_per_iteration_ns']/1e6:.3f} ms, predicted "
      f"{r['predicted_per_iteration_ns']/1e6:.3f} ms")
PY
