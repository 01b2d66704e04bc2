#!/usr/bin/env bash
# Telemetry sampler on the lent GPU: per-call NVML costs, steady-state CPU % at 10 Hz over 60 s
# (target <= 1 % of one core) against the old every-group-every-tick plan, jitter, highest sustained
# rate, and GPM values idle vs under a torch bf16 GEMM. About 2 minutes; hard limit 170 s.
# Usage (from the repository root): bash benchmarks/device_telemetry.sh [SECONDS]
# Needs python3 with nvidia-ml-py (installed with pip --user if missing) and torch with CUDA for --load.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
"$py" -c "import pynvml" 2>/dev/null || "$py" -m pip install -q --user "nvidia-ml-py>=12.535,<14"
nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader || true
load=--load
"$py" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null || {
  echo "torch with CUDA is not importable: skipping the GEMM load part"; load=; }
cd "$here"
timeout 170 "$py" benchmarks/bench_telemetry.py --seconds "${1:-60}" --gpu 0 $load
