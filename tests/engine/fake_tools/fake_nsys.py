# Fake nsys. FAKE_MODE: ok | importer_fail | importer_fail_rc | paranoid | export_fail.
# Writes $FAKE_NSYS_REP / _SQLITE.
# importer_fail_rc is what nsys 2025.3 did on the lent H100 when the program failed: no word about the
# program's exit status, the import step fails, and nsys exits with the program's status.
import json
import os
import re
import shutil
import subprocess
import sys

args = sys.argv[1:]
if os.environ.get("FAKE_ARGV_LOG"):
    with open(os.environ["FAKE_ARGV_LOG"], "a") as fh:
        fh.write(json.dumps(["nsys", *args]) + "\n")
mode = os.environ.get("FAKE_MODE", "ok")
if args[:1] == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0")
    sys.exit(0)
VALUED = {"--output", "-o", "--force-overwrite", "-f", "--type"}


def split(argv):
    opts, i = {}, 0
    while i < len(argv) and argv[i].startswith("-"):
        a = argv[i]
        if "=" in a:
            k, v = a.split("=", 1)
            opts[k] = v
            i += 1
        elif a in VALUED:
            opts[a] = argv[i + 1]
            i += 2
        else:
            opts[a] = True
            i += 1
    return opts, argv[i:]


if args[:1] == ["export"]:
    opts, rest = split(args[1:])
    if mode == "export_fail":
        print("Error: the report is damaged", file=sys.stderr)
        sys.exit(1)
    shutil.copyfile(os.environ["FAKE_NSYS_SQLITE"], opts["--output"])
    sys.exit(0)
if args[:1] != ["profile"]:
    print(f"unknown command {args[:1]}", file=sys.stderr)
    sys.exit(1)
opts, target = split(args[1:])
# like nsys: %q{VAR} in the output name is the variable's value (per-rank reports), %p the pid
out = re.sub(r"%q\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), opts["--output"])
out = out.replace("%p", str(os.getpid()))
if mode == "paranoid":
    print("The perf_event_paranoid level is 4; CPU sampling and context switch tracing need it to be 2 or "
          "lower.", file=sys.stderr)
    print("Error: cannot continue.", file=sys.stderr)
    sys.exit(1)
print("Collecting data...", flush=True)
rc = subprocess.call(target)
print("Generating '/tmp/nsys-report-5f1e.qdstrm'", flush=True)
if rc < 0:
    print(f"The target application terminated with signal {-rc} (SIGSEGV).", file=sys.stderr)
elif rc > 0 and mode != "importer_fail_rc":
    print(f"The target application returned non-zero exit code {rc}", file=sys.stderr)
if mode in ("importer_fail", "importer_fail_rc"):
    with open(out + ".qdstrm", "wb") as fh:
        fh.write(b"QDSTRM fake stream")
    print("Importer error status: An unknown error occurred.", file=sys.stderr)
    print(f"Generated:\n    {out}.qdstrm")
    sys.exit(rc if mode == "importer_fail_rc" and rc > 0 else 0)
print(f"[1/1] [========================100%] {os.path.basename(out)}.nsys-rep\r", end="", flush=True)
print(f"[1/1] [========================100%] {os.path.basename(out)}.nsys-rep")
shutil.copyfile(os.environ["FAKE_NSYS_REP"], out + ".nsys-rep")
print(f"Generated:\n    {out}.nsys-rep")
sys.exit(0)
