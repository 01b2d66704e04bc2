#!/usr/bin/env bash
# Record the PyTorch workbench programs (issue 23) on the lent GPU: Kineto traces (shapes, stacks, memory,
# modules) with key_averages() beside them, a memory snapshot, and the same program under nsys with
# PyTorch NVTX and --cuda-memory-usage. Everything ends up in $OUT/torch.tar.xz (the plain tar is ~45 MB, over
# the device tool's 16 MiB per returned file; xz brings it to ~3 MB).
#   OUT=dir bash benchmarks/device/record_torch.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/torch_out}
W=${WORK:-/dev/shm/torchwb}
mkdir -p "$OUT" "$W"
PY=${PY:-python3}
NSYS=${NSYS:-$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | sort -V | tail -1)}
IMPORTER=$(ls -d "$(dirname "$(readlink -f "$NSYS")")"/../linux-desktop-*/QdstrmImporter 2>/dev/null | head -1)
KIT_LIBS=${KIT_LIBS:-$REPO/.kit/libs}
WB=$HERE/torch_workbench.py
{
echo "### $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$NSYS" --version
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
run() { local tag=$1; shift; (cd "$W" && timeout 300 "$PY" "$WB" "$@" --out "$W" --tag "$tag" > "$W/$tag.log" 2>&1)
        echo "=== $tag rc=$? $(tail -1 "$W/$tag.log")"; }
run torch_train kineto --variant base
run torch_train_fixed kineto --variant fixed
run torch_conv kineto --variant conv
run torch_train_snapshot snapshot --variant base --steps 6
run torch_train_plain plain --variant base
run torch_train_fixed_plain plain --variant fixed
for v in base fixed; do
  tag=torch_train_nsys_$v
  (cd "$W" && timeout 300 "$NSYS" profile --trace=cuda,nvtx --pytorch=autograd-shapes-nvtx --cuda-memory-usage=true \
     --sample=none --cpuctxsw=none -f true -o "$W/$tag" "$PY" "$WB" plain --variant $v --out "$W" --tag "$tag" \
     > "$W/$tag.log" 2>&1); echo "=== $tag rc=$? $(grep -h gpu_step "$W/$tag.log" | tail -1)"
  if [ ! -f "$W/$tag.nsys-rep" ] && [ -f "$W/$tag.qdstrm" ]; then
    LD_LIBRARY_PATH=$KIT_LIBS "$IMPORTER" -i "$W/$tag.qdstrm" -o "$W/$tag.nsys-rep" > "$W/$tag.import.log" 2>&1
  fi
  "$NSYS" export --type sqlite -f true -o "$W/$tag.sqlite" "$W/$tag.nsys-rep" > "$W/$tag.export.log" 2>&1
  echo "exported $tag rc=$? $(ls -la "$W/$tag.sqlite" 2>&1)"
done
ls -la "$W"
} 2>&1 | tee "$W/record.log"
(cd "$W" && rm -f ./*.qdstrm && tar cf "$OUT/torch.tar" ./*.json ./*.txt ./*.log ./*.pickle ./*.sqlite)
xz -9 -T0 -f "$OUT/torch.tar"
ls -la "$OUT"
