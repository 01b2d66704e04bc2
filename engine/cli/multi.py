"""``kernelscope ranks`` (line up the ranks of a job) and ``kernelscope batch`` (many reports on Dask)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

from engine.system.errors import KernelscopeError


def register(sub: Any) -> None:
    """Add ``ranks`` and ``batch`` to the ``kernelscope`` parser."""
    r = sub.add_parser("ranks", help="a multi-GPU job: ranks on one clock, NCCL waits, the straggler")
    r.add_argument("reports", nargs="+", metavar="REPORT",
                   help="per-rank reports of one job, or one report holding several processes")
    r.add_argument("--range", dest="range_name", metavar="NAME",
                   help="the step range (NVTX or record_function name; default: found by structure)")
    r.add_argument("--json", action="store_true", help="print kernelscope.ranks/1 JSON")
    r.add_argument("--workers", type=int, metavar="N",
                   help="processes reading the reports not cached yet (default 2 a core, at most 4; 0: here)")
    r.set_defaults(func=cmd_ranks)

    b = sub.add_parser("batch", help="run summary, stats, findings or ranks over many reports on Dask")
    b.add_argument("analysis", choices=["summary", "stats", "findings", "ranks"])
    b.add_argument("reports", nargs="+", metavar="REPORT")
    where = b.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, metavar="N",
                       help="local worker processes (default 2; 0: in this process, without Dask)")
    where.add_argument("--scheduler", metavar="ADDR", help="an existing Dask scheduler, tcp://HOST:PORT")
    where.add_argument("--scheduler-file", metavar="F", help="a Dask scheduler file (dask-jobqueue, ...)")
    b.add_argument("-o", "--output", metavar="TABLE", help="write the table to TABLE.parquet or TABLE.csv")
    b.add_argument("--stats-report", default="cuda_gpu_kern_sum", metavar="NAME",
                   help="for stats: which nsys stats report (default cuda_gpu_kern_sum)")
    b.add_argument("--json", action="store_true", help="print the rows as JSON")
    b.set_defaults(func=cmd_batch)


def cmd_ranks(args: argparse.Namespace) -> int:
    """Print the rank table, the straggler and the clock note (or the JSON document)."""
    from engine.analysis.ranks import analyze_paths, format_ranks

    if args.workers is not None and args.workers < 0:
        raise KernelscopeError(f"--workers must be 0 or more, not {args.workers}.")
    res = analyze_paths(args.reports, range_name=args.range_name, workers=args.workers)
    if args.json:
        print(json.dumps(res.to_json(), indent=1, allow_nan=False))
    else:
        print(format_ranks(res))
    return 0


def _progress(stream: Any) -> Any:
    tty = hasattr(stream, "isatty") and stream.isatty()

    def show(done: int, total: int, report: str) -> None:
        width = 30
        filled = int(width * done / max(1, total))
        line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {Path(report.split(', ')[0]).name}"
        stream.write(("\r" + line[:120].ljust(120)) if tty else line + "\n")
        if tty and done == total:
            stream.write("\n")
        stream.flush()

    return show


def _records(df: Any) -> list[dict[str, Any]]:
    import pandas as pd

    out = []
    for rec in df.to_dict("records"):
        row = {}
        for k, v in rec.items():
            if v is None or (not isinstance(v, (list, dict, str)) and bool(pd.isna(v))):
                v = None  # NaN / <NA>: a column this row does not have
            elif hasattr(v, "item"):
                v = v.item()
            row[str(k)] = v
        out.append(row)
    return out


def cmd_batch(args: argparse.Namespace) -> int:
    """Run the batch; print or write the table; exit 0 even when some reports failed (their rows say why)."""
    from engine.sessions.batch import run_batch

    if args.workers is not None and args.workers < 0:
        raise KernelscopeError(f"--workers must be 0 or more, not {args.workers}.")
    out = Path(args.output).expanduser() if args.output else None
    if out is not None and out.suffix.lower() not in (".parquet", ".pq", ".csv"):
        raise KernelscopeError(f"-o {args.output}: give a .parquet or .csv file name.")
    cancel = threading.Event()
    try:
        df = run_batch(args.analysis, args.reports, workers=args.workers, scheduler=args.scheduler,
                       scheduler_file=args.scheduler_file, stats_report=args.stats_report,
                       on_progress=_progress(sys.stderr), cancel=cancel)
    except KeyboardInterrupt:
        cancel.set()
        print("kernelscope: batch cancelled.", file=sys.stderr)
        return 130
    failed = int(df["error"].notna().sum()) if "error" in df.columns else 0
    if out is not None:
        try:
            if out.suffix.lower() == ".csv":
                df.to_csv(out, index=False)
            else:
                df.to_parquet(out, index=False)
        except ImportError as exc:
            raise KernelscopeError("Writing Parquet needs pyarrow (pip install pyarrow); or write a .csv.") \
                from exc
        except OSError as exc:
            raise KernelscopeError(f"Could not write {out} ({exc.strerror}); choose another path.") from exc
        print(f"kernelscope: wrote {len(df)} rows to {out}", file=sys.stderr)
    if args.json:
        print(json.dumps(_records(df), indent=1, allow_nan=False))
    elif out is None:
        import pandas as pd

        with pd.option_context("display.max_columns", None, "display.width", 200,
                               "display.max_colwidth", 60):
            print(df.to_string(index=False))
    if failed:
        print(f"kernelscope: {failed} of the reports failed; their rows carry the reason in 'error'.",
              file=sys.stderr)
    return 0
