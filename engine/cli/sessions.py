"""``kernelscope doctor``, ``kernelscope run`` and ``kernelscope sessions``."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from engine.system.errors import KernelscopeError


def register(sub: Any) -> None:
    """Register the session commands on the main parser's subparsers."""
    d = sub.add_parser("doctor",
                       help="which profiling tools, compilers and GPUs are here, and what is missing")
    d.add_argument("--host", metavar="[USER@]HOST[:PORT]", help="check an SSH host instead of this machine")
    d.add_argument("--identity", metavar="KEY", help="SSH private key for --host")
    d.add_argument("--known-hosts", metavar="FILE", help="known_hosts file for --host")
    d.add_argument("--json", action="store_true", help="print the checks as JSON")
    d.set_defaults(func=cmd_doctor)

    r = sub.add_parser(
        "run", help="run a program or kernels/ workload under nsys, ncu or as a plain benchmark",
        usage="kernelscope run [--tool bench|nsys|ncu] [options] (WORKLOAD [--param K=V ...] | -- CMD ...)",
    )
    r.add_argument("rest", nargs=argparse.REMAINDER, metavar="WORKLOAD | -- CMD",
                   help="a kernels/ workload name and its options, or -- and a command line")
    r.add_argument("--tool", choices=["bench", "nsys", "ncu"], default="bench")
    r.add_argument("--param", action="append", default=[], metavar="K=V", help="workload parameter")
    r.add_argument("--host", metavar="[USER@]HOST[:PORT]", help="run on an SSH host (keys/agent only)")
    r.add_argument("--identity", metavar="KEY", help="SSH private key for --host")
    r.add_argument("--known-hosts", metavar="FILE", help="known_hosts file for --host")
    r.add_argument("--cwd", metavar="DIR",
                   help="run the program in DIR (default: the current directory, as nsys and ncu do)")
    r.add_argument("--remote-cwd", metavar="DIR",
                   help="with --host: run the program in DIR there (default: the remote home; relative "
                        "paths are under it)")
    r.add_argument("--out", default="kernelscope-sessions", metavar="DIR",
                   help="folder for session folders (default: ./kernelscope-sessions)")
    r.add_argument("--name", help="report base name")
    r.add_argument("--timeout", type=float, default=3600.0, metavar="S", help="kill after S seconds")
    r.add_argument("--tool-path", metavar="PATH", help="the nsys/ncu executable to use")
    r.add_argument("--spec", metavar="FILE", help="read the session spec from a .json/.toml file")
    r.add_argument("--trace", default="cuda,nvtx,osrt", help="nsys --trace list")
    r.add_argument("--cuda-memory-usage", action="store_true", help="nsys: track GPU memory usage")
    r.add_argument("--gpu-metrics", metavar="DEVICES", help="nsys: sample GPU metrics on DEVICES (e.g. 0)")
    r.add_argument("--set", dest="ncu_set", default="full", help="ncu section set (default full)")
    r.add_argument("--section", action="append", default=[], help="ncu section (repeatable)")
    r.add_argument("--kernel-name", help="ncu: only kernels with this name (regex: prefix allowed)")
    r.add_argument("--launch-count", type=int, help="ncu: profile at most N launches")
    r.add_argument("--launch-skip", type=int, help="ncu: skip N launches first")
    r.add_argument("--clock-control", choices=["none", "base"], default="none",
                   help="ncu clock control (default none: leave clocks alone)")
    r.add_argument("--telemetry", action="store_true",
                   help="record GPU telemetry (NVML/GPM) to telemetry.csv in the session folder")
    r.add_argument("--telemetry-period", type=float, default=0.1, metavar="S",
                   help="seconds between telemetry samples (default 0.1)")
    r.add_argument("--per-rank", action="store_true",
                   help="the command is torchrun/srun/mpirun: profile inside every rank, one report per "
                        "rank (NAME_rank<N>); without it one report around the whole command")
    r.add_argument("--profile-ranks", metavar="LIST",
                   help="with --per-rank: profile only these ranks, e.g. 0,3 or 0-3 (implies --per-rank)")
    r.add_argument("--json", action="store_true", help="print the outcome as JSON at the end")
    r.add_argument("--quiet", action="store_true", help="do not echo the program's output")
    r.set_defaults(func=cmd_run, run_parser=r)

    s = sub.add_parser("sessions", help="list recorded sessions (or show one)")
    s.add_argument("session", nargs="?", help="a session id (or unique prefix) to show")
    s.add_argument("--limit", type=int, default=50)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_sessions)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print what is installed and what each absence means."""
    from engine.sessions.doctor import format_checks, run_doctor, run_remote_doctor

    if args.host:
        from pathlib import Path

        from engine.system.ssh import parse_target

        target = parse_target(args.host)
        from dataclasses import replace

        if args.identity:
            target = replace(target, identity_file=Path(args.identity))
        if args.known_hosts:
            target = replace(target, known_hosts=Path(args.known_hosts))
        checks = run_remote_doctor(target)
    else:
        checks = run_doctor()
    if args.json:
        print(json.dumps([c.as_dict() for c in checks], indent=1))
    else:
        print(format_checks(checks))
    return 0


def _spec_from_args(args: argparse.Namespace) -> Any:
    from engine.sessions.argv import parse_params
    from engine.sessions.spec import NcuOptions, NsysOptions, SessionSpec, TargetSpec
    from engine.system.ssh import parse_target

    command, workload = split_run_args(args)
    if args.remote_cwd and not args.host:
        raise KernelscopeError("--remote-cwd applies to --host; for this machine use --cwd (or run from "
                               "that folder).")
    if args.spec:
        from pathlib import Path

        loaded = SessionSpec.load(Path(args.spec))
        wd = args.remote_cwd if not loaded.target.is_local else args.cwd
        return loaded.with_(cwd=wd) if wd else loaded
    target = TargetSpec()
    if args.host:
        t = parse_target(args.host)
        target = TargetSpec(host=t.host, user=t.user, port=t.port, identity_file=args.identity,
                            known_hosts=args.known_hosts)
    return SessionSpec(
        tool=args.tool, command=tuple(command) if not workload else (), workload=workload,
        cwd=args.remote_cwd if args.host else args.cwd,
        params=parse_params(args.param), out_dir=args.out, name=args.name, timeout_s=args.timeout,
        target=target, tool_path=args.tool_path,
        telemetry=args.telemetry, telemetry_period_s=args.telemetry_period,
        per_rank=bool(args.per_rank or args.profile_ranks), profile_ranks=args.profile_ranks,
        nsys=NsysOptions(trace=tuple(t for t in args.trace.split(",") if t),
                         cuda_memory_usage=args.cuda_memory_usage, gpu_metrics_devices=args.gpu_metrics),
        ncu=NcuOptions(set=args.ncu_set or None, sections=tuple(args.section), kernel_name=args.kernel_name,
                       launch_count=args.launch_count, launch_skip=args.launch_skip,
                       clock_control=args.clock_control),
    ).validate()


def split_run_args(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """``-- CMD ...`` -> (CMD, None); ``WORKLOAD [options]`` -> ([], WORKLOAD), options parsed into args."""
    rest = list(args.rest or [])
    if not rest:
        if args.spec:
            return [], None
        raise KernelscopeError("Nothing to run; give a workload name or a command after --, e.g. "
                               "kernelscope run --tool nsys -- ./app 10.")
    if rest[0] == "--":
        if len(rest) == 1:
            raise KernelscopeError("The command after -- is empty; e.g. kernelscope run -- ./app 10.")
        return rest[1:], None
    workload, tail = rest[0], rest[1:]
    if "--" in tail:
        raise KernelscopeError("Give either a workload or a command after --, not both.")
    args.rest = []
    args.run_parser.parse_args(tail, namespace=args)
    if args.rest:
        raise KernelscopeError(f"Unexpected {' '.join(args.rest)!r} after the workload name; workload "
                               "parameters are given as --param K=V.")
    return [], workload


def cmd_run(args: argparse.Namespace) -> int:
    """Run one session, streaming its output; exit 0 only on success."""
    from engine.sessions.runner import LogLine, describe, run_session

    spec = _spec_from_args(args)
    cancel = threading.Event()

    from engine.sessions.outcome import OutcomeKind

    # The runner's last log line ("<kind>: <message>") is printed below as the session line and,
    # on failure, as the final sentence: do not echo it a third time.
    outcome_prefixes = tuple(f"{k.value}: " for k in OutcomeKind)

    def on_line(line: LogLine) -> None:
        if args.quiet and line.stream != "kernelscope":
            return
        if line.stream == "kernelscope" and line.text.startswith(outcome_prefixes):
            return
        out = sys.stderr if line.stream != "stdout" or args.json else sys.stdout
        prefix = "kernelscope: " if line.stream == "kernelscope" else ""
        out.write(f"{prefix}{line.text}\n")
        out.flush()

    try:
        outcome = run_session(spec, on_line=on_line, cancel=cancel)
    except KeyboardInterrupt:
        cancel.set()
        raise
    if args.json:
        print(json.dumps(describe(outcome), indent=1))
    else:
        for note in outcome.notes:
            print(f"kernelscope: note: {note}", file=sys.stderr)
        for rep in outcome.reports:
            print(f"kernelscope: report: {rep}", file=sys.stderr)
        print(f"kernelscope: session {outcome.session_id}: {outcome.kind.value} "
              f"({outcome.duration_s:.1f} s); log: {outcome.log_path}", file=sys.stderr)
    if not outcome.ok:
        if not args.json:
            print(f"kernelscope: {outcome.message}", file=sys.stderr)
        return 1
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    """List the store (newest first) or show one session."""
    from engine.sessions.store import SessionStore

    store = SessionStore()
    if args.session:
        rec = store.get(args.session)
        if rec is None:
            raise KernelscopeError(f"No session matches {args.session!r}; `kernelscope sessions` lists them.")
        records = [rec]
    else:
        records = store.list(limit=args.limit)
    if args.json:
        print(json.dumps([{
            "id": r.id, "state": r.state, "kind": r.kind, "message": r.message, "tool": r.tool,
            "target": r.target, "command": list(r.command), "session_dir": str(r.session_dir),
            "returncode": r.returncode, "duration_s": r.duration_s, "created": r.created,
            "reports": [str(p) for p in r.reports]} for r in records], indent=1))
        return 0
    if not records:
        print("No sessions yet; start one with `kernelscope run`.")
        return 0
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created))
        dur = f"{r.duration_s:7.1f} s" if r.duration_s is not None else "      - "
        print(f"{r.id:<48} {when}  {r.tool:<5} {r.kind or r.state:<15} {dur}  {r.target}")
        if args.session:
            print(f"  command: {' '.join(r.command)}\n  folder:  {r.session_dir}\n  message: {r.message}")
            for p in r.reports:
                print(f"  report:  {p}")
    return 0
