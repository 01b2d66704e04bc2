#!/usr/bin/env bash
# Issue 15 on the lent 2-GPU machine: `kernelscope run` end to end, ordinary and distributed.
#   (a) from a project folder: kernelscope run --tool nsys -- python3 src/tiny_cuda.py (relative path): the
#       program runs in the caller's folder, the report opens (kernelscope summary);
#   (b) kernelscope run --tool nsys --per-rank --telemetry -- torchrun --nproc_per_node 2 train_ddp.py
#       (rank 1 sleeps DELAY_MS per step): one report per rank, each imported by QdstrmImporter when
#       nsys's own import fails; then kernelscope ranks, which must name rank 1 and a wait near DELAY_MS;
#       telemetry of this node (telemetry.json says which);
#   (c) kernelscope run --tool ncu on the tiny script, then kernelscope ncu on the result.
# Usage (repo root on the GPU machine; .kit/libs = ../shared/device-kit/libs; .whl optional):
#   bash benchmarks/device_distributed.sh OUTDIR
# Env: PYTHON (python3), TORCHRUN (torchrun, else PYTHON -m torch.distributed.run), DELAY_MS (20),
#   STEPS (30), PARTS (abc: which of (a) (b) (c) to run), KS_DEVICE (cuda; cpu = a dry run of the flow with gloo, for machines without a GPU),
#   NSYS / NCU (else found by Kernelscope), KERNELSCOPE_IMPORTER_LIBS (default .kit/libs), NCU_REPORT_SITE.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: device_distributed.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
PY=${PYTHON:-python3}
DELAY_MS=${DELAY_MS:-20}
STEPS=${STEPS:-30}
PARTS=${PARTS:-abc}
export KS_DEVICE=${KS_DEVICE:-cuda}
export KERNELSCOPE_DATA="$out/data" KERNELSCOPE_CACHE="$out/cache"
export KERNELSCOPE_IMPORTER_LIBS=${KERNELSCOPE_IMPORTER_LIBS:-$here/.kit/libs}
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never multicast
# kernelscope ncu needs the ncu-report package (the lent machine has none). Do not fall back to
# Nsight Compute's own extras/python/ncu_report: on the lent H100s (2025.3.1) it segfaulted in
# Metric.unit() on a report the ncu-report 2025.3.1 and 2026.3.1 wheels read. NCU_REPORT_SITE: a folder
# holding an ncu_report package (abi3, e.g. copied from a venv) to put on the path.
[ -n "${NCU_REPORT_SITE:-}" ] && export PYTHONPATH="$PYTHONPATH:$NCU_REPORT_SITE"
ks() { "$PY" -m engine.cli "$@"; }
status=0
fail() { echo "FAILED: $*"; status=1; }
field() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }

echo "=== card, driver, versions"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 || true
"$PY" - <<'EOF'
import importlib, platform
print("python", platform.python_version())
for m in ("torch", "numpy", "pandas", "pynvml"):
    try:
        mod = importlib.import_module(m)
        extra = f" cuda {mod.version.cuda}, {mod.cuda.device_count()} GPU(s)" if m == "torch" else ""
        print(m, getattr(mod, "__version__", "?") + extra)
    except Exception as exc:  # noqa: BLE001
        print(m, "not importable:", exc)
EOF
ks doctor 2>&1 | head -30

# ---- (a) an ordinary session from a project folder, relative script path ----------------------------
proj="$out/proj"
mkdir -p "$proj/src"
cat > "$proj/src/tiny_cuda.py" <<'EOF'
import os
import torch
dev = "cuda" if os.environ.get("KS_DEVICE", "cuda") == "cuda" else "cpu"
with open("ran_in.txt", "w") as fh:  # relative: lands in the folder the program runs in
    fh.write(os.getcwd() + "\n")
a = torch.randn(2048, 2048, device=dev)
for i in range(20):
    if dev == "cuda":
        torch.cuda.nvtx.range_push(f"step {i}")
    b = (a @ a).relu_()
    a = b / b.norm()
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
print("tiny_cuda done on", dev, float(a.sum()))
EOF
if [[ $PARTS == *a* ]]; then
echo; echo "=== (a) cd $proj && kernelscope run --tool nsys -- python3 src/tiny_cuda.py"
(cd "$proj" && ks run --tool nsys --name tiny --out "$out/sessions" --timeout 300 --json --quiet \
   -- "$PY" src/tiny_cuda.py) > "$out/a.json" || fail "(a) run"
field "$out/a.json" '(d["kind"], d["message"], d["notes"], d["reports"])'
[ "$(cat "$proj/ran_in.txt" 2>/dev/null)" = "$proj" ] && echo "(a) the program ran in $proj" \
  || fail "(a) ran_in.txt says $(cat "$proj/ran_in.txt" 2>/dev/null)"
a_sqlite=$(field "$out/a.json" 'next((r for r in d["reports"] if r.endswith(".sqlite")), "")')
if [ -n "$a_sqlite" ]; then ks summary "$a_sqlite" || fail "(a) summary"; else fail "(a) no .sqlite"; fi
fi

# ---- (b) per-rank DDP job with a straggler, telemetry on --------------------------------------------
if [[ $PARTS == *b* ]]; then
if [ -n "${TORCHRUN:-}" ]; then read -r -a TR <<< "$TORCHRUN"
elif command -v torchrun >/dev/null; then TR=(torchrun)
else TR=("$PY" -m torch.distributed.run); fi
echo; echo "=== (b) kernelscope run --tool nsys --per-rank --telemetry -- ${TR[*]} --standalone --nproc_per_node 2 benchmarks/device/train_ddp.py --steps $STEPS --slow-rank 1 --delay-ms $DELAY_MS"
(cd "$here" && ks run --tool nsys --per-rank --telemetry --name ddp --out "$out/sessions" --timeout 600 \
   --json --quiet -- "${TR[@]}" --standalone --nproc_per_node 2 benchmarks/device/train_ddp.py \
   --steps "$STEPS" --warmup 3 --slow-rank 1 --delay-ms "$DELAY_MS" --out-dir "$out/ddp_steps") \
   > "$out/b.json" || fail "(b) run"
field "$out/b.json" '(d["kind"], d["message"], d["notes"], d["reports"])'
b_dir=$(field "$out/b.json" 'd["session_dir"]')
grep -E "QdstrmImporter|telemetry|importing" "$b_dir/session.log" | cut -c1-300
cat "$b_dir/telemetry.json" 2>/dev/null || echo "(b) no telemetry.json"
[ -f "$b_dir/telemetry.csv" ] && "$PY" - "$b_dir/telemetry.csv" <<'EOF'
import sys
from engine.telemetry.recording import read_recording
r = read_recording(sys.argv[1])
print(f"telemetry: {len(r)} rows, GPUs {sorted(set(r['gpu'].dropna().astype(int)))}, "
      f"max power {r['power_w'].max():.0f} W, max util {r['util_gpu_pct'].max():.0f} %")
EOF
mapfile -t ranks < <(ls "$b_dir"/ddp_rank*.sqlite 2>/dev/null | sort -V)
echo "per-rank reports: ${ranks[*]:-none}"
if [ "${#ranks[@]}" -eq 2 ]; then
  ks ranks "${ranks[@]}" || fail "(b) ranks"
  ks ranks "${ranks[@]}" --json > "$out/ranks.json" || fail "(b) ranks --json"
  "$PY" - "$out/ranks.json" "$DELAY_MS" <<'EOF' || fail "(b) straggler check"
import json, sys
d, injected = json.load(open(sys.argv[1])), float(sys.argv[2]) * 1e6
s = d["straggler"]
print("straggler:", None if s is None else {k: s[k] for k in ("rank", "device", "wait_per_step_ns")})
for r in d["ranks"]:
    print(f"rank {r['rank']} device {r['device']} steps {r['steps']} step_median {r['step_median_ns']/1e6:.2f} ms "
          f"nccl_wait {r['nccl_wait_ns']/1e6:.2f} ms")
ok = s is not None and s["rank"] == 1 and abs(s["wait_per_step_ns"] - injected) <= 0.2 * injected
print(f"injected {injected/1e6:.1f} ms/step, measured wait {s['wait_per_step_ns']/1e6 if s else float('nan'):.2f} ms/step:",
      "within 20 %" if ok else "NOT within 20 %")
sys.exit(0 if ok else 1)
EOF
else
  fail "(b) expected 2 per-rank .sqlite reports"
fi
fi

# ---- (c) ncu session + kernelscope ncu --------------------------------------------------------------
if [[ $PARTS == *c* ]]; then
echo; echo "=== (c) cd $proj && kernelscope run --tool ncu --launch-count 3 -- python3 src/tiny_cuda.py"
(cd "$proj" && ks run --tool ncu --name tiny_ncu --launch-count 3 --out "$out/sessions" --timeout 600 --json \
   --quiet -- "$PY" src/tiny_cuda.py) > "$out/c.json" || fail "(c) run"
field "$out/c.json" '(d["kind"], d["message"], d["reports"])'
c_rep=$(field "$out/c.json" 'next((r for r in d["reports"] if r.endswith(".ncu-rep")), "")')
if [ -n "$c_rep" ]; then
  "$PY" -X faulthandler -m engine.cli ncu "$c_rep" > "$out/c_ncu.txt" 2>&1 || fail "(c) kernelscope ncu (exit $?)"
  head -60 "$out/c_ncu.txt"
else fail "(c) no .ncu-rep"; fi
fi

echo; echo "=== kernelscope sessions"
ks sessions 2>&1 | head -10
echo; echo "device_distributed: exit status $status"
exit $status
