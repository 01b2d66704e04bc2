# Fake ncu. FAKE_MODE: ok | perm | nokernels. Runs the target, prints ==PROF== lines, writes $FAKE_NCU_REP.
import json
import os
import shutil
import subprocess
import sys

args = sys.argv[1:]
if os.environ.get("FAKE_ARGV_LOG"):
    with open(os.environ["FAKE_ARGV_LOG"], "a") as fh:
        fh.write(json.dumps(["ncu", *args]) + "\n")
if args[:1] == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
          "Version 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
VALUED = {"--set", "--section", "--kernel-name", "--launch-skip", "--launch-count", "--nvtx-include",
          "--clock-control", "--import-source", "--export", "-o"}
opts, i = {}, 0
while i < len(args) and args[i].startswith("-"):
    if args[i] in VALUED:
        opts.setdefault(args[i], []).append(args[i + 1])
        i += 2
    else:
        opts[args[i]] = True
        i += 1
target = args[i:]
mode = os.environ.get("FAKE_MODE", "ok")
proc = subprocess.Popen(target)
print(f"==PROF== Connected to process {proc.pid} ({target[0]})", flush=True)
count = int(opts.get("--launch-count", ["2"])[0])
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
          "Counters on the target device 0. For instructions on enabling permissions and to get more "
          "information see https://developer.nvidia.com/ERR_NVGPUCTRPERM", flush=True)
    count = 0
elif mode == "nokernels":
    count = 0
for k in range(count):
    name = ["sgemm_tiled", "saxpy"][k % 2]
    print(f'==PROF== Profiling "{name}" - {k}: 0%....50%....100% - 39 passes', flush=True)
rc = proc.wait()
print(f"==PROF== Disconnected from process {proc.pid}", flush=True)
if rc < 0:
    print(f"==ERROR== The application terminated with signal {-rc}.", flush=True)
elif rc > 0:
    print(f"==ERROR== The application returned an error code ({rc}).", flush=True)
if count == 0:
    print("==WARNING== No kernels were profiled.", flush=True)
    sys.exit(1 if mode == "perm" else 0)
out = opts["--export"][0]
shutil.copyfile(os.environ["FAKE_NCU_REP"], out + ".ncu-rep")
print(f"==PROF== Report: {out}.ncu-rep", flush=True)
sys.exit(rc if rc > 0 else 0)
