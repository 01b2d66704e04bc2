"""``kernelscope telemetry``: a live table of NVML readings, recorded to a file, or a replay.

Register with :func:`register`; the command returns an exit status like the other commands.
"""

from __future__ import annotations

import argparse
import importlib
import queue
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # (imported when a telemetry command runs, not by every command's start-up)
    from engine.telemetry.snapshot import GpuSample, Snapshot

EXIT_OK = 0
EXIT_ERROR = 1
DISPLAY_INTERVAL_S = 0.5


def register(subparsers: Any) -> None:
    """Register the ``telemetry`` command on an ``add_subparsers()`` object."""
    t = subparsers.add_parser(
        "telemetry", help="live GPU telemetry (NVML + Hopper GPM): show, record, replay",
        description="Sample NVML (and GPM on Hopper and newer) into a live table; optionally record "
        "to CSV/Parquet, or replay a recording.",
    )
    t.add_argument("--gpu", default="all", metavar="N|all", help="GPU index, comma list, or all (default)")
    t.add_argument("--period", type=float, default=0.1, metavar="S", help="seconds between samples (0.1)")
    t.add_argument("--record", metavar="FILE", help="write the samples to FILE (.csv, or .parquet)")
    t.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: Ctrl-C, "
                   "or the end of a replay)")
    t.add_argument("--replay", metavar="FILE", help="replay a recording instead of sampling NVML")
    t.add_argument("--speed", type=float, default=1.0, metavar="X",
                   help="replay speed: 1 real time, 10 ten times faster, 0 as fast as possible")
    t.add_argument("--host", metavar="[USER@]HOST[:PORT]",
                   help="sample that host's GPUs through ssh (runs python -m engine.telemetry.agent there)")
    t.add_argument("--remote-python", default="python3", metavar="PY",
                   help="the Python on --host that has Kernelscope and nvidia-ml-py (python3)")
    t.add_argument("--remote-dir", metavar="DIR",
                   help="a Kernelscope checkout on --host to run the agent from")
    t.set_defaults(func=cmd_telemetry)



def cmd_telemetry(args: argparse.Namespace) -> int:
    """Run the telemetry command; errors in files raise KernelscopeError (one sentence)."""
    from engine.system.nvml import nvml_available
    from engine.telemetry.errors import TelemetryError
    from engine.telemetry.recording import Recorder
    from engine.telemetry.sampler import Sampler
    from engine.telemetry.sources import NvmlSource, ReplaySource, Source

    try:
        from engine.telemetry.snapshot import parse_gpu_selection

        gpus = parse_gpu_selection(args.gpu)
    except ValueError as exc:
        print(f"kernelscope: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not args.period > 0:
        print(f"kernelscope: --period must be more than 0 seconds, not {args.period}.", file=sys.stderr)
        return EXIT_ERROR
    source: Source
    if args.replay:
        source = ReplaySource(args.replay, speed=args.speed)
    elif args.host:
        from engine.system.ssh import parse_target
        from engine.telemetry.remote import RemoteSource

        gpu_arg = "all" if gpus is None else ",".join(map(str, sorted(gpus)))
        source = RemoteSource.over_ssh(parse_target(args.host), period_s=args.period, gpus=gpu_arg,
                                       python=args.remote_python, remote_dir=args.remote_dir)
    else:
        ok, reason = nvml_available()
        if not ok:
            print(f"kernelscope: {reason}", file=sys.stderr)
            return EXIT_ERROR
        source = NvmlSource()
    recorder = Recorder(args.record) if args.record else None
    inbox: queue.Queue[Snapshot] = queue.Queue()
    sampler = Sampler(source, period_s=args.period, gpus="all" if gpus is None else gpus)
    sampler.subscribe(inbox.put)  # runs on the sampler thread: only hand over
    display = _Display(sys.stdout)
    deadline = None if args.duration is None else time.monotonic() + args.duration
    try:
        try:
            sampler.start()
        except TelemetryError as exc:
            print(f"kernelscope: {exc}", file=sys.stderr)
            return EXIT_ERROR
        with display:
            while True:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                try:
                    snap = inbox.get(timeout=0.05)
                except queue.Empty:
                    if not sampler.running and inbox.empty():
                        break
                    continue
                if recorder is not None:
                    recorder.write(snap)
                display.show(snap)
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
        while recorder is not None and not inbox.empty():
            recorder.write(inbox.get_nowait())
        if recorder is not None:
            recorder.close()
            print(f"kernelscope: wrote {recorder.rows_written} rows to {recorder.path}", file=sys.stderr)
    return EXIT_OK


def _fmt(v: float | int | None, scale: float = 1.0, digits: int = 0) -> str:
    return "-" if v is None else f"{v / scale:.{digits}f}"


COLUMNS: list[tuple[str, Any]] = [
    ("GPU", lambda s: str(s.gpu)),
    ("util %", lambda s: _fmt(s.util_gpu_pct)),
    ("mem GiB", lambda s: f"{_fmt(s.mem_used_bytes, 2**30, 1)}/{_fmt(s.mem_total_bytes, 2**30, 0)}"),
    ("SM MHz", lambda s: _fmt(s.sm_clock_mhz)),
    ("power W", lambda s: f"{_fmt(s.power_w)}/{_fmt(s.power_limit_w)}"),
    ("temp C", lambda s: _fmt(s.temp_c)),
    ("PCIe tx/rx MB/s", lambda s: f"{_fmt(s.pcie_tx_bytes_per_s, 1e6)}/{_fmt(s.pcie_rx_bytes_per_s, 1e6)}"),
    ("SM util %", lambda s: _fmt(s.gpm_sm_util_pct, digits=1)),
    ("occup %", lambda s: _fmt(s.gpm_sm_occupancy_pct, digits=1)),
    ("tensor %", lambda s: _fmt(s.gpm_tensor_util_pct, digits=1)),
    ("DRAM BW %", lambda s: _fmt(s.gpm_dram_bw_util_pct, digits=1)),
    ("throttle", lambda s: "-" if s.throttle_reasons is None else ",".join(s.throttle_reasons) or "none"),
]


def _cells(s: GpuSample) -> list[str]:
    return [str(fn(s)) for _, fn in COLUMNS]


class _Display:
    """A live table with rich when it is installed and stdout is a terminal, else plain lines."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live: Any = None
        self.last = 0.0
        self.header_done = False
        if stream.isatty():
            try:
                live = importlib.import_module("rich.live")  # optional: rich is not a dependency
                self.live = live.Live(refresh_per_second=4, transient=False)
            except ImportError:
                self.live = None

    def __enter__(self) -> _Display:
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def show(self, snap: Snapshot) -> None:
        now = time.monotonic()
        if not snap.gap and now - self.last < DISPLAY_INTERVAL_S:
            return
        self.last = now
        stamp = time.strftime("%H:%M:%S", time.localtime(snap.timestamp_ns / 1e9))
        stamp += f".{snap.timestamp_ns // 1_000_000 % 1000:03d}"
        if self.live is not None:
            table_mod = importlib.import_module("rich.table")
            title = f"Kernelscope telemetry {stamp}" + (f"  GAP: {snap.gap_reason}" if snap.gap else "")
            table = table_mod.Table(title=title)
            for name, _ in COLUMNS:
                table.add_column(name, justify="right")
            for s in snap.gpus:
                table.add_row(*_cells(s))
            self.live.update(table)
            return
        if not self.header_done:
            self.stream.write("time          " + " ".join(f"{n:>12}" for n, _ in COLUMNS) + "\n")
            self.header_done = True
        if snap.gap:
            self.stream.write(f"{stamp}  gap: {snap.gap_reason}\n")
        for s in snap.gpus:
            self.stream.write(f"{stamp}  " + " ".join(f"{c:>12}" for c in _cells(s)) + "\n")
        self.stream.flush()
