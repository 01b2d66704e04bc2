#!/usr/bin/env bash
# Proof on a real GPU of the session-engine gaps closed after issue 4:
#   1. an nsys session on an SSH host (a real sshd on 127.0.0.1 of this machine) whose import step fails:
#      Kernelscope runs QdstrmImporter on the host with target.remote_importer_libs, exports SQLite
#      there and copies .nsys-rep/.sqlite back; the copied .sqlite is read back (kernel summary);
#   2. a runner SIGKILLed mid-session (nsys + the program): the program must be gone within 5 s.
#
# Usage (repo root on the GPU machine): benchmarks/device_sessions_gaps.sh [OUTDIR]
# Environment:
#   PYTHON       python with this repo importable, pandas and pytest (default python3)
#   NSYS         nsys to use (default: the copy inside Nsight Compute 2025.3.1)
#   KIT_LIBS     folder with libdw.so.1 & co for QdstrmImporter (default: .kit/libs)
#   APP          a CUDA program + args to profile (default: kernels/launch_bound built with nvcc, 20000)
# Needs openssh-server (/usr/sbin/sshd) for step 1; step 1 is skipped with a sentence without it.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=${1:-/tmp/kernelscope-device-gaps}
rm -rf "$out"
mkdir -p "$out"
export KERNELSCOPE_DATA="$out/data"
PY=${PYTHON:-python3}
export GAPS_OUT="$out"
export GAPS_NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export GAPS_LIBS=${KIT_LIBS:-$here/.kit/libs}
if [ -z "${APP:-}" ]; then
  nvcc -O2 -arch=sm_90 -o "$out/launch_bound" kernels/launch_bound/launch_bound.cu || exit 1
  export GAPS_APP="$out/launch_bound 20000"
  export GAPS_LONG_APP="$out/launch_bound 100000000"
else
  export GAPS_APP="$APP"
  export GAPS_LONG_APP="${LONG_APP:-$APP}"
fi
"$PY" - <<'EOF'
import json, os, shlex, signal, subprocess, sys, time
from pathlib import Path

sys.path.insert(0, os.getcwd())
from engine.sessions.runner import describe, run_session
from engine.sessions.spec import SessionSpec, TargetSpec
from engine.sessions.store import SessionStore

out = Path(os.environ["GAPS_OUT"])
nsys, libs = os.environ["GAPS_NSYS"], os.environ["GAPS_LIBS"]
app = shlex.split(os.environ["GAPS_APP"])
status = 0

print("=== 1. remote nsys session through sshd on 127.0.0.1, importer recovered on the host")
try:
    from tests.engine.sshd_fixture import find_sshd, start_sshd, stop_sshd
except ImportError as exc:
    find_sshd = None
    print(f"skipped: the sshd test fixture cannot be imported ({exc}); install pytest")
if find_sshd is not None and find_sshd() is None:
    print("skipped: sshd is not installed here (apt-get install -y openssh-server)")
elif find_sshd is not None:
    server = start_sshd(out / "sshd")
    try:
        # sshd gives the session a clean environment: pass the CUDA paths (and the stand-ins' FAKE_*
        # variables when this script is tried without a GPU)
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH") or k.startswith("FAKE_")}
        spec = SessionSpec(
            tool="nsys", command=tuple(app), name="remote_app", out_dir=str(out / "sessions"),
            timeout_s=600, tool_path=nsys, env=env,
            target=TargetSpec(host="127.0.0.1", user=server.user, port=server.port,
                              identity_file=str(server.client_key), known_hosts=str(server.known_hosts),
                              remote_dir=str(out / "remote"), remote_importer_libs=libs),
        )
        o = run_session(spec, on_line=lambda ln: print(("kernelscope: " if ln.stream == "kernelscope" else "")
                                                      + ln.text, flush=True))
        print(json.dumps(describe(o), indent=1))
        sqlite = [p for p in o.reports if p.suffix == ".sqlite"]
        if not o.ok or not sqlite:
            status = 1
        else:
            from engine.analysis.nsys.stats import run_report, to_csv
            from engine.reports import open_report
            print(to_csv(run_report(open_report(sqlite[0]), "cuda_gpu_kern_sum")))
    finally:
        stop_sshd(server)

print("=== 2. SIGKILL the runner mid-session: the profiled program must not survive")
long_app = shlex.split(os.environ["GAPS_LONG_APP"])
script = f"""
import sys
sys.path.insert(0, {os.getcwd()!r})
from engine.sessions.runner import run_session
from engine.sessions.spec import SessionSpec
run_session(SessionSpec(tool="nsys", command={tuple(long_app)!r}, tool_path={nsys!r},
                        out_dir={str(out / 'killed')!r}, timeout_s=600),
            on_line=lambda ln: print(ln.stream, ln.text, flush=True))
"""
runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def program_pids() -> list[int]:
    pids = []
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmd.read_bytes().split(b"\0")
        except OSError:
            continue
        if words and words[0] == long_app[0].encode() and int(cmd.parent.name) != runner.pid:
            pids.append(int(cmd.parent.name))
    return pids


deadline = time.monotonic() + 120
while time.monotonic() < deadline and not program_pids():
    time.sleep(0.2)
time.sleep(2.0)
before = program_pids()
print(f"program pids under nsys before the kill: {before}")
runner.send_signal(signal.SIGKILL)
runner.wait()
t0 = time.monotonic()
while time.monotonic() - t0 < 10 and program_pids():
    time.sleep(0.1)
left = program_pids()
print(f"after SIGKILL of the runner: {'program gone after %.1f s' % (time.monotonic() - t0) if not left else f'STILL RUNNING: {left}'}")
if not before or left:
    status = 1
for pid in left:  # never leave them behind
    os.kill(pid, signal.SIGKILL)
rows = SessionStore().list()
print("store:", [(r.id, r.state, r.kind) for r in rows])
print(f"device_sessions_gaps: exit status {status}")
sys.exit(status)
EOF
