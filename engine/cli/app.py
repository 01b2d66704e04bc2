"""The ``kernelscope`` command line: a thin layer over engine.reports and engine.analysis.

Mirrors ``nsys stats`` / ``nsys analyze`` so users switch without relearning. Every failure is one
sentence on stderr and a nonzero exit status; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from engine import __version__
from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

EXIT_OK = 0
EXIT_ERROR = 1  # bad input, missing tool: a sentence was printed
EXIT_USAGE = 2  # argparse's own code for bad arguments
EXIT_INTERNAL = 3

DEFAULT_STATS = [
    "nvtx_sum", "cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum",
]
DEFAULT_RULES = [
    "cuda_memcpy_async", "cuda_memcpy_sync", "cuda_memset_sync", "cuda_api_sync", "gpu_gaps",
    "gpu_time_util",
]


# Progress of long steps (nsys export) is shown on a terminal, or with --progress; never in a pipe
# or log by default, and a pending progress line is wiped before an error sentence (see main).
_PROGRESS = {"forced": False, "pending": False}


def _progress_printer(stream: TextIO) -> Any:
    last = {"msg": ""}
    tty = stream.isatty()
    if not tty and not _PROGRESS["forced"]:
        return None

    def show(msg: str, fraction: float | None) -> None:
        stage = msg.split(" (")[0]
        if tty:
            stream.write(f"\r{msg:<60}")
            _PROGRESS["pending"] = fraction != 1.0
            if fraction == 1.0:
                stream.write("\n")
            stream.flush()
        elif stage != last["msg"]:
            stream.write(f"kernelscope: {msg}\n")
            stream.flush()
        last["msg"] = stage

    return show


def _end_progress_line(stream: TextIO) -> None:
    """Wipe an unfinished terminal progress line so an error sentence starts on a clean line."""
    if _PROGRESS["pending"]:
        stream.write("\r\x1b[K")
        _PROGRESS["pending"] = False


def _open(path: str) -> Trace:
    from engine.reports import open_report

    return open_report(Path(path), progress=_progress_printer(sys.stderr), cancel=threading.Event())


def _split_names(values: Sequence[str] | None, default: list[str]) -> list[str]:
    if not values:
        return list(default)
    names: list[str] = []
    for v in values:
        names += [n.strip() for n in v.split(",") if n.strip()]
    return names


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = json.loads(df.to_json(orient="records", double_precision=15))
    return out if isinstance(out, list) else []


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise KernelscopeError(
            f"Could not write {path} ({exc.strerror}); choose another --output prefix."
        ) from exc


def _ext(fmt: str) -> str:
    return {"csv": "csv", "json": "json", "table": "txt"}[fmt]


def _emit(args: argparse.Namespace, name: str, title: str, text: str, json_out: dict[str, Any]) -> None:
    """Send one report's or rule's text where the user asked: PREFIX_<name> file, JSON, stdout.

    An empty text stays an empty file (nsys writes 0-byte files for rules that found nothing).
    """
    if args.output:
        target = Path(f"{args.output}_{name}.{_ext(args.format)}")
        _write(target, text if not text or text.endswith("\n") else text + "\n")
        print(f"kernelscope: wrote {target}", file=sys.stderr)
    elif args.format == "json":
        json_out[name] = json.loads(text)
    else:
        if args.format == "table":
            print(f"\n ** {title} ({name}):\n")
        if text:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")


# -- stats -------------------------------------------------------------------------------------
def cmd_stats(args: argparse.Namespace) -> int:
    """Run nsys-style statistics reports (results are cached per file and engine version)."""
    from engine.analysis.nsys import stats
    from engine.reports.open import sniff_kind
    from engine.system.cache import file_identity, result_get

    names = [stats.resolve_report_name(n) for n in _split_names(args.report, DEFAULT_STATS)]
    path = Path(args.input).expanduser()
    sniff_kind(path)  # a clear sentence for missing paths, directories, empty files
    identity = file_identity(path)
    fmt = args.format
    texts: dict[str, str] = {}  # report -> output text, or "\0SKIP" + reason
    streams: dict[str, Any] = {}  # report -> a rendered CSV too big to hold as text
    todo = []
    for name in names:
        text = result_get(identity, f"stats-{name}.{_ext(fmt)}")
        if text is None:
            todo.append(name)
        texts[name] = text or ""
    if todo:
        trace = _open(args.input)
        for name, out in stats.run_many(trace, todo, fmt):
            if fmt == "csv" and len(out) > _STREAM_ROWS:
                streams[name] = out  # written chunk by chunk below, never held whole
                continue
            texts[name] = _stats_text(identity, name, fmt, out, trace)
    json_out: dict[str, Any] = {}
    for name, text in texts.items():
        if name in streams:
            _emit_stream(args, name, streams.pop(name))
            continue
        if text.startswith(_SKIP):
            print(f"kernelscope: {name}: skipped, {text[len(_SKIP):]}.", file=sys.stderr)
            if fmt == "json" and not args.output:
                json_out[name] = []
            if args.output:  # nsys writes the file even when the report has no rows
                _emit(args, name, stats.REPORTS[name], "[]" if fmt == "json" else "", json_out)
            continue
        _emit(args, name, stats.REPORTS[name], text, json_out)
    if fmt == "json" and not args.output:
        print(json.dumps(json_out, indent=1))
    return EXIT_OK


def _stats_text(identity: Any, name: str, fmt: str, out: Any, trace: Trace) -> str:
    """A report's text (or why it is empty), kept in the result cache unless it is huge."""
    from engine.analysis.nsys import stats
    from engine.system.cache import result_put

    text: str = _SKIP + stats.why_empty(trace, name) if out.empty else out.text
    if len(text) < _RESULT_CACHE_MAX:  # a 170 MB trace costs more to cache than to redo
        result_put(identity, f"stats-{name}.{_ext(fmt)}", text)
    return text


_SKIP = "\0SKIP"
_STREAM_ROWS = 200_000  # CSV reports with more rows (~30 MB of text) are streamed to their file


def _emit_stream(args: argparse.Namespace, name: str, table: Any) -> None:
    """Write a big CSV report chunk by chunk: to PREFIX_<name>.csv, or to stdout."""
    if not args.output:
        sys.stdout.flush()
        table.write_to(sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    target = Path(f"{args.output}_{name}.csv")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as fh:
            table.write_to(fh)
    except OSError as exc:
        raise KernelscopeError(
            f"Could not write {target} ({exc.strerror}); choose another --output prefix."
        ) from exc
    print(f"kernelscope: wrote {target}", file=sys.stderr)
_RESULT_CACHE_MAX = 32 << 20  # characters; bigger texts are recomputed from the columnar cache


# -- analyze -----------------------------------------------------------------------------------
def cmd_analyze(args: argparse.Namespace) -> int:
    """Run nsys-style expert-system rules."""
    from engine.analysis.nsys import analyze as expert

    specs = [expert.parse_rule_spec(s) for s in _split_names(args.rule, DEFAULT_RULES)]
    trace = _open(args.input)
    fmt = args.format
    json_out: dict[str, Any] = {}
    for name, options in specs:
        result = expert.run(trace, name, options)
        found = not result.table.empty
        if fmt == "csv":
            text = expert.to_csv(result)
        elif fmt == "json":
            text = json.dumps({"rows": _records(result.table), "explanation": result.explanation,
                               "fix": result.fix}, indent=1)
        else:
            text = (_table_text(result.table) if found else "") + _explain(result)
        _emit(args, name, expert.RULES[name], text, json_out)
        if fmt == "csv" and not args.output:
            print(f"kernelscope: {name}: {result.explanation}", file=sys.stderr)
    if fmt == "json" and not args.output:
        print(json.dumps(json_out, indent=1))
    return EXIT_OK


def _table_text(df: pd.DataFrame) -> str:
    from engine.analysis.nsys import stats

    return stats.format_table(df) + "\n"


def _explain(result: Any) -> str:
    text = f"\n{result.explanation}\n"
    if result.fix and not result.table.empty:
        text += f"Fix: {result.fix}\n"
    return text


# -- summary -----------------------------------------------------------------------------------
def cmd_summary(args: argparse.Namespace) -> int:
    """Print the host-vs-GPU breakdown."""
    from engine.analysis.summary import format_summary
    from engine.cli.cached import overview_of

    s, _ = overview_of(args.input, args.range)
    if args.json:
        print(json.dumps(s.to_json(), indent=1, allow_nan=False))
    else:
        print(format_summary(s))
    return EXIT_OK


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    return str(o)


# -- info --------------------------------------------------------------------------------------
def cmd_info(args: argparse.Namespace) -> int:
    """Describe a report: producer, schema, tables and row counts, what was not captured."""
    from engine.reports.base import TABLES

    trace = _open(args.input)
    info = trace.info
    print(f"file:    {info.path}")
    print(f"kind:    {info.kind}")
    print(f"written: {info.product_version or 'unknown'} (schema {info.schema_version or '-'})")
    for note in info.notes:
        print(f"note:    {note}")
    for name in TABLES:
        df = trace.table(name)
        state = f"{len(df):>10,} rows" if trace.has(name) else f"{'-':>15}  ({trace.missing[name]})"
        print(f"  {name:<13} {state}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    p = argparse.ArgumentParser(
        prog="kernelscope",
        description="Kernelscope: read Nsight Systems (.nsys-rep, .sqlite), Nsight Compute (.ncu-rep, "
        "CSV) and PyTorch profiler traces; run benchmarks, nsys and ncu sessions here or over SSH; "
        "sample GPU telemetry; find what to fix and verify it.",
    )
    p.add_argument("--version", action="version", version=f"kernelscope {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    p.add_argument("--progress", action="store_true",
                   help="print progress lines of long steps even when stderr is not a terminal")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("stats", help="nsys-style statistics reports (like `nsys stats`)")
    s.add_argument("input", metavar="REPORT")
    s.add_argument("-r", "--report", action="append", metavar="NAMES",
                   help="comma-separated report names (default: " + ",".join(DEFAULT_STATS) + ")")
    s.add_argument("-f", "--format", choices=["csv", "json", "table"], default="table")
    s.add_argument("-o", "--output", metavar="PREFIX", help="write PREFIX_<report>.<ext> files")
    s.set_defaults(func=cmd_stats)

    a = sub.add_parser("analyze", help="expert-system rules (like `nsys analyze`)")
    a.add_argument("input", metavar="REPORT")
    a.add_argument("-r", "--rule", action="append", metavar="NAMES",
                   help="comma-separated rules, each optionally RULE:key=value[:key=value] "
                   "(e.g. gpu_gaps:gap=100, gpu_time_util:chunks=10:threshold=40)")
    a.add_argument("-f", "--format", choices=["csv", "json", "table"], default="table")
    a.add_argument("-o", "--output", metavar="PREFIX", help="write PREFIX_<rule>.<ext> files")
    a.set_defaults(func=cmd_analyze)

    m = sub.add_parser("summary", help="where the time went: host API vs GPU breakdown")
    m.add_argument("input", metavar="REPORT")
    m.add_argument("--json", action="store_true", help="print the JSON document (schema in README)")
    m.add_argument("--range", metavar="NAME", help="the step range (e.g. 'train_step N') instead of the "
                   "steps found from the GPU's work; 'marker:TEXT' starts a step at each GPU operation "
                   "whose name holds TEXT (e.g. 'marker:memcpy HtoD', 'marker:multi_tensor_apply')")
    m.set_defaults(func=cmd_summary)

    i = sub.add_parser("info", help="what a report contains and what it lacks")
    i.add_argument("input", metavar="REPORT")
    i.set_defaults(func=cmd_info)

    from engine.cli import bench, findings, multi, ncu, pytorch, sessions, telemetry

    for module in (ncu, telemetry, sessions, findings, bench, multi, pytorch):
        module.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernelscope`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    _PROGRESS["forced"] = bool(getattr(args, "progress", False))
    try:
        rc: int = args.func(args)
        return rc
    except KernelscopeError as exc:
        _end_progress_line(sys.stderr)
        if args.debug:
            traceback.print_exc()
        print(f"kernelscope: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("kernelscope: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - last line of defence: never a raw traceback
        _end_progress_line(sys.stderr)
        if args.debug:
            traceback.print_exc()
        print(
            f"kernelscope: internal error ({type(exc).__name__}: {exc}); please report it, and "
            "run again with --debug for details.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
