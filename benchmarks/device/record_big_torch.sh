#!/usr/bin/env bash
# A real multi-hundred-MB Kineto trace (issue 26), not a scaled one: the PyTorch workbench under
# torch.profiler for STEPS steps (shapes, stacks, memory, modules), with key_averages() and the program's
# own memory counters beside it. On the same machine, Kernelscope's first question (cold: the trace parsed,
# then the overview and every PyTorch table kept) and the later ones are timed, and its operator table and
# memory peaks are checked against the profiler's (benchmarks/check_kineto_oracle.py). The trace comes back
# xz-compressed in 15 MiB parts (cat TAG.json.xz.part-* | xz -d > TAG.json).
#   OUT=dir VARIANT=fixed STEPS=300 bash benchmarks/device/record_big_torch.sh     (carry .whl: orjson)
#   LAYERS=N (the TinyGPT's layers, default 4) and FIXES=tc,pinned,... (base with only these fixes) vary the program.
# SKIP_RECORD=1 with WORK holding TAG.json, TAG_key_averages.json and TAG_truth.json: the checks alone.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/bigtorch_out}; W=${WORK:-/dev/shm/bigtorch}; mkdir -p "$OUT" "$W"
VARIANT=${VARIANT:-fixed}; STEPS=${STEPS:-300}; LAYERS=${LAYERS:-4}; FIXES=${FIXES:-}
TAG=${TAG:-big_${VARIANT}_${STEPS}}
exec > >(tee -a "$OUT/$TAG.log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$REPO"/.whl/*.whl \
    || echo "(wheels not installed)"
export PYTHONPATH=/tmp/site:$REPO PYTHONUNBUFFERED=1 KERNELSCOPE_CACHE=$W/cache
echo "### $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); nproc $(nproc)"
python3 -c 'import sys, torch, numpy, orjson; print("python", sys.version.split()[0], "torch", torch.__version__,
"numpy", numpy.__version__, "orjson", orjson.__version__)'
cat > "$W/timed.py" <<'PY'
import resource, subprocess, sys, time
label, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
rc = subprocess.call(argv)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{label}: {time.perf_counter() - t0:.2f} s wall, {ru.ru_utime + ru.ru_stime:.2f} CPU s, "
      f"{ru.ru_maxrss / 1024:,.0f} MB peak (largest process), rc {rc}", file=sys.stderr)
sys.exit(rc)
PY
timed() {  # timed LABEL CMD... (its stdout is the command's): wall, CPU s and peak RSS on stderr
  python3 "$W/timed.py" "$@"
}
[ -n "${SKIP_RECORD:-}" ] || (cd "$W" && timed "record $TAG ($VARIANT, $STEPS steps under the profiler)" timeout 480 \
    python3 "$HERE/torch_workbench.py" kineto --variant "$VARIANT" --steps "$STEPS" --layers "$LAYERS" --fixes "$FIXES" \
    --out "$W" --tag "$TAG" \
    > "$W/$TAG.run.log") || { tail -20 "$W/$TAG.run.log"; exit 1; }
tail -2 "$W/$TAG.run.log"
ls -la "$W"
T=$W/$TAG.json
python3 - "$T" <<'PY'
import os, sys
print(f"trace: {os.path.getsize(sys.argv[1]) / 1e6:,.1f} MB")
PY
timed "summary, cold (parse + overview + PyTorch tables)" python3 -m engine.cli summary "$T" > "$W/summary.txt"
for q in findings summary "ops --json" "ops --by shapes --kernels" modules "memory --json"; do
  n=$(echo "$q" | tr ' ' '_' | tr -d '-')
  timed "$q (kept)" python3 -m engine.cli $q "$T" > "$W/ks_$n.txt"
done
rm -rf "$KERNELSCOPE_CACHE"
timed "open alone (parse into the column cache)" python3 -c \
  "import sys; from pathlib import Path; from engine.reports import open_report; print(open_report(Path(sys.argv[1])).events.n)" "$T"
python3 "$REPO/benchmarks/check_kineto_oracle.py" "$W/ks_ops_json.txt" "$W/${TAG}_key_averages.json" \
    --truth "$W/${TAG}_truth.json" --memory "$W/ks_memory_json.txt" > "$W/oracle.txt"
echo "oracle check rc=$?"; head -12 "$W/oracle.txt"; grep -c MISMATCH "$W/oracle.txt"
head -40 "$W/summary.txt"
tar -C "$W" -cJf "$OUT/${TAG}_results.tar.xz" "${TAG}_key_averages.json" "${TAG}_key_averages.txt" \
    "${TAG}_truth.json" summary.txt oracle.txt ks_ops_json.txt ks_memory_json.txt ks_modules.txt \
    ks_ops_by_shapes_kernels.txt ks_findings.txt "$TAG.run.log"
(cd "$W" && timed "xz of the trace" xz -T0 -6 -k "$TAG.json" && split -b 15M -d "$TAG.json.xz" "$OUT/$TAG.json.xz.part-")
ls -la "$OUT"
