#!/usr/bin/env bash
# On the lent GPU: an nsys session with GPU telemetry recorded beside it (`kernelscope run --telemetry`),
# then the recording placed on the report's timeline (engine.telemetry.align) and summarised.
# Usage (repo root; .kit/libs carried for QdstrmImporter): bash benchmarks/device_session_telemetry.sh [OUTDIR]
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd); cd "$here"
out=${1:-/tmp/ks-session-telemetry}; rm -rf "$out"; mkdir -p "$out"
export KERNELSCOPE_DATA="$out/data" KERNELSCOPE_IMPORTER_LIBS=${KERNELSCOPE_IMPORTER_LIBS:-$here/.kit/libs}
PY=${PYTHON:-python3}
nvcc -O2 -arch=sm_90 -o "$out/launch_bound" kernels/launch_bound/launch_bound.cu || exit 1
"$PY" -m engine.cli run --tool nsys --telemetry --telemetry-period 0.05 --out "$out/sessions" --json \
    -- "$out/launch_bound" 400000 > "$out/outcome.json" || { cat "$out/outcome.json"; exit 1; }
"$PY" - "$out" <<'PYEOF'
import json, sys
from pathlib import Path
from engine.telemetry.recording import read_recording
from engine.telemetry.align import align_to_report
from engine.reports import open_report
out = Path(sys.argv[1])
doc = json.loads((out / "outcome.json").read_text())
print("outcome:", doc["kind"], "-", doc["message"])
sdir = Path(doc["session_dir"])
print([ln for ln in (sdir / "session.log").read_text().splitlines() if "telemetry" in ln])
rep = next(p for p in map(Path, doc["reports"]) if p.suffix == ".sqlite")
rec = align_to_report(read_recording(sdir / "telemetry.csv"), str(rep))
tr = open_report(rep)
k = tr.table("kernels", columns=["start", "end"])
k0, k1 = int(k["start"].min()), int(k["end"].max())
inside = rec[(rec["session_time_ns"] >= k0) & (rec["session_time_ns"] <= k1)]
outside = rec[(rec["session_time_ns"] < k0) | (rec["session_time_ns"] > k1)]
print(f"telemetry rows {len(rec)}, session time {rec['session_time_ns'].min()/1e6:.1f} .. "
      f"{rec['session_time_ns'].max()/1e6:.1f} ms; kernels from {k0/1e6:.1f} to {k1/1e6:.1f} ms")
for col in ("util_gpu_pct", "power_w", "sm_clock_mhz"):
    if col in rec:
        print(f"{col}: while kernels ran median {inside[col].median():.1f} (n={len(inside)}), "
              f"outside median {outside[col].median():.1f} (n={len(outside)})")
PYEOF
