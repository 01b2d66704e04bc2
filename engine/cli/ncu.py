"""The ``kernelscope ncu`` subcommand: Nsight Compute reports on the command line."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from engine.system.errors import KernelscopeError

PAGES = ["details", "raw", "rules", "roofline", "sections", "verdict"]

#: Summary columns: (header, metric name or kernels-table column).
_SUMMARY = [
    ("Compute (SM) %", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("Memory %", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("Achieved Occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
]


def register(subparsers: Any) -> None:
    """Register ``ncu REPORT [--kernel REGEX] [--page details|raw] [--csv|--json]``.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers``.

    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "ncu", help="Nsight Compute reports (.ncu-rep or ncu --csv exports): per-kernel summary and pages"
    )
    p.add_argument("input", metavar="REPORT")
    p.add_argument("--kernel", metavar="REGEX", help="only kernels whose name matches REGEX (re.search)")
    p.add_argument("--page", choices=PAGES,
                   help="details|raw: as `ncu --import REPORT --page PAGE --print-units base` prints them; "
                        "rules: rule results ranked by estimated speedup x duration; roofline: points and "
                        "ceilings; sections: every kernel's sections; verdict: the bottleneck per kernel")
    p.add_argument("--source", action="store_true",
                   help="--page sections: also the SASS text and file:line of each kernel's hottest "
                        "instructions (disassembles every kernel: about 1 s and 100 MB more on a big report)")
    p.add_argument("--print-units", choices=["base", "auto"], default="base",
                   help="--page details: base (default, as `--print-units base`) or auto (ncu's own default: "
                        "bytes, Hz and ns scaled, e.g. 31.00 Mbyte)")
    p.add_argument("--compare", metavar="AFTER", help="compare REPORT (before) with AFTER, kernel by kernel")
    p.add_argument("--rename-kernels", choices=["on", "off"], default="on",
                   help="on (ncu's default): kernel names simplified as ncu prints them; off: the demangled "
                        "names the report stores, as `ncu --rename-kernels off` prints them (.ncu-rep only)")
    p.add_argument("--ceilings", metavar="JSON",
                   help="measured ceilings for --page roofline: a JSON object name -> FLOP/s or byte/s "
                        '(e.g. {"DRAM": 4.0e12, "FP32": 6.0e13})')
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="CSV output (the default for --page details|raw)")
    fmt.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(func=cmd_ncu)

    c: argparse.ArgumentParser = subparsers.add_parser(
        "ncu-compare",
        help="two Nsight Compute reports side by side: kernels matched by name and launch order",
    )
    c.add_argument("before", metavar="BEFORE")
    c.add_argument("after", metavar="AFTER")
    c.add_argument("--kernel", metavar="REGEX", help="only kernels whose name matches REGEX (re.search)")
    c.add_argument("--rename-kernels", choices=["on", "off"], default="on",
                   help="off: match and print the demangled names the reports store (.ncu-rep only)")
    cfmt = c.add_mutually_exclusive_group()
    cfmt.add_argument("--csv", action="store_true", help="CSV output")
    cfmt.add_argument("--json", action="store_true", help="JSON output")
    c.set_defaults(func=cmd_ncu_compare)


def _summary_rows(report: Any) -> list[dict[str, Any]]:
    values = report.detail_values()
    rows = []
    for k in report.kernel_records():
        kid = str(k["ID"])
        row: dict[str, Any] = {
            "ID": int(k["ID"]), "Kernel Name": k["Kernel Name"], "duration_ns": k["duration_ns"],
            "Grid Size": k["Grid Size"], "Block Size": k["Block Size"],
            "Registers Per Thread": k["Registers Per Thread"],
        }
        for header, metric in _SUMMARY:
            v = values.get((kid, metric))
            row[header] = None if v is None or math.isnan(v) else round(float(v), 2)
        rows.append(row)
    return rows


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isnan(f):
        return None
    return int(f) if f == int(f) else f


def _filter(report: Any, pattern: str | None) -> Any:
    """Keep only the kernels whose name matches ``pattern`` (re.search)."""
    if not pattern:
        return report
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise KernelscopeError(f"--kernel {pattern!r} is not a valid regular expression ({exc}).") from exc
    keep = {str(i) for i, n in zip(report.kernels["ID"], report.kernels["Kernel Name"], strict=True)
            if rx.search(str(n))}
    if not keep:
        raise KernelscopeError(f"No kernel name matches {pattern!r}; run without --kernel to list them.")
    report.kernels = report.kernels[report.kernels["ID"].astype(str).isin(keep)]
    report.metrics = report.metrics[report.metrics["ID"].isin(keep)]
    if len(report.raw):
        report.raw = report.raw[report.raw["ID"].isin(keep)]
    if report.rules is not None and len(report.rules):
        report.rules = report.rules[report.rules["ID"].astype(str).isin(keep)]
    return report


def _named(report: Any, path: str, rename: str) -> Any:
    """The report with ``--rename-kernels off`` applied: kernels named as the report stores them."""
    if rename != "off":
        return report
    stored = getattr(report, "stored_names", None)
    if not stored:
        raise KernelscopeError(
            f"{path} is a CSV export, which holds only the names ncu printed; "
            "use the .ncu-rep for --rename-kernels off."
        )
    by_id = {str(i): n for i, n in enumerate(stored)}
    report.kernels = report.kernels.assign(**{"Kernel Name": report.kernels["ID"].astype(str).map(by_id)})
    for attr in ("metrics", "raw"):
        table = getattr(report, attr)
        if "Kernel Name" in table.columns:
            setattr(report, attr, table.assign(**{"Kernel Name": table["ID"].astype(str).map(by_id)}))
    return report


def _read_ceilings(path: str | None) -> dict[str, float] | None:
    if not path:
        return None
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KernelscopeError(f"--ceilings {path} is not a readable JSON file ({exc}).") from exc
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) for v in data.values()):
        raise KernelscopeError(
            f"--ceilings {path} must be a JSON object of numbers, "
            'e.g. {"DRAM": 4.0e12, "FP32": 6.0e13}.'
        )
    return {str(k): float(v) for k, v in data.items()}


def cmd_ncu(args: argparse.Namespace) -> int:
    """Print an Nsight Compute report's per-kernel summary, one of its pages, or a comparison."""
    from engine.reports.ncu import NO_RESULTS_LINE, NoResultsError, read_ncu

    if args.compare:
        args.before, args.after = args.input, args.compare
        return cmd_ncu_compare(args)
    cached = _page_cache_key(args)
    if cached is not None:
        text = _cached_page(args.input, cached)
        if text is not None:
            sys.stdout.write(text)
            return 0
    # every kernel's hottest SASS, disassembled in children (only when asked: it doubles the work)
    sources = args.page == "sections" and args.source and not args.kernel
    try:
        report = _filter(_named(read_ncu(args.input, sources=sources), args.input, args.rename_kernels),
                         args.kernel)
    except NoResultsError:
        if args.page not in ("details", "raw") or args.json or args.kernel:
            raise
        sys.stdout.write(NO_RESULTS_LINE)  # ncu prints this line (on stdout) as either page, exit code 0
        return 0
    if cached is not None and not report.notes:
        import io

        buf = io.StringIO()
        rc = _page(report, args, buf)
        if rc == 0:
            _store_page(args.input, cached, buf.getvalue())
        sys.stdout.write(buf.getvalue())
        return rc
    return _page(report, args, sys.stdout)


def _page_cache_key(args: argparse.Namespace) -> str | None:
    """The results-cache key of a page that depends on the report file alone, else None.

    Every page and the summary of a ``.ncu-rep`` (without --kernel, --json or --ceilings) is kept
    in the results cache (keyed by the file and the engine code): printing one again skips reading
    the report (0.1 s instead of 0.5-3 s for an 80 MB report).
    """
    if args.kernel or args.json or args.ceilings or str(args.input).lower().endswith(".csv"):
        return None
    page = args.page or ("summary-csv" if args.csv else "summary")
    if page == "sections" and args.source:
        page = "sections-source"
    return f"ncu-page-{page}-{args.print_units}-{args.rename_kernels}.txt"


def _cached_page(path: str, key: str) -> str | None:
    from pathlib import Path

    from engine.system.cache import file_identity, result_get

    try:
        return result_get(file_identity(Path(path)), key)
    except OSError:
        return None  # a missing file: read_ncu says so in its own words


def _store_page(path: str, key: str, text: str) -> None:
    from pathlib import Path

    from engine.system.cache import file_identity, result_put

    try:
        result_put(file_identity(Path(path)), key, text)
    except OSError:
        pass  # a read-only cache only costs speed


def _details_page(report: Any, print_units: str) -> str:
    """The details page as ncu prints it (:func:`engine.analysis.ncu.pages.details_csv`)."""
    from engine.analysis.ncu.pages import details_csv

    return details_csv(report, print_units)


def _page(report: Any, args: argparse.Namespace, out: Any) -> int:
    """Print the page, the summary or the analysis page ``args`` ask for."""
    from engine.analysis.ncu.pages import raw_csv

    for note in report.notes:
        sys.stderr.write(f"kernelscope: {note}\n")
    if args.page in ("rules", "roofline", "sections", "verdict"):
        return _analysis_page(report, args, out)
    if args.page:
        if args.page == "raw" and not len(report.raw_table()[0]) > 11:
            raise KernelscopeError(
                f"{args.input} is a details export and has no raw page; "
                "use the .ncu-rep or a --page raw export."
            )
        if args.print_units != "base" and (args.page != "details" or args.json):
            raise KernelscopeError(
                "--print-units auto is available for --page details as CSV only; "
                "drop it or use --page details --csv."
            )
        if args.json:
            table = report.metrics if args.page == "details" else report.raw
            cols = [c for c in table.columns if c not in ("value", "metric")]
            json.dump(table[cols].to_dict(orient="records"), out, indent=1)
            out.write("\n")
        else:
            out.write(_details_page(report, args.print_units) if args.page == "details" else raw_csv(report))
        return 0
    rows = _summary_rows(report)
    if args.json:
        json.dump([{k: _jsonable(v) for k, v in r.items()} for r in rows], out, indent=1)
        out.write("\n")
        return 0
    headers = list(rows[0]) if rows else []
    if args.csv:
        import csv

        w = csv.writer(out, lineterminator="\n")
        w.writerow(headers)
        for r in rows:
            w.writerow(["" if _jsonable(v) is None else _jsonable(v) for v in r.values()])
        return 0
    _print_table(rows, out)
    return 0


def _print_table(rows: list[dict[str, Any]], out: Any) -> None:
    def cell(k: str, v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        if k == "duration_ns":
            return f"{float(v) / 1000:,.2f}"
        if isinstance(v, float):
            return f"{v:.2f}"
        s = str(v)
        return s if len(s) <= 60 else s[:57] + "..."

    headers = ["ID", "Kernel Name", "duration_ns", "Grid Size", "Block Size", "Registers Per Thread",
               *(h for h, _ in _SUMMARY)]
    titles = {"duration_ns": "Duration (us)", "Registers Per Thread": "Regs"}
    table = [[titles.get(h, h) for h in headers]] + [[cell(h, r[h]) for h in headers] for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(headers))]
    for n, t in enumerate(table):
        out.write("  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths,
                                                                                           strict=True)))
                  .rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _emit(df: Any, args: argparse.Namespace, out: Any, widths: dict[str, int] | None = None) -> None:
    """A table as CSV, JSON records or aligned text (long cells cut in text only)."""
    if args.csv:
        df.to_csv(out, index=False, lineterminator="\n")
        return
    if args.json:
        json.dump([{str(k): _jsonable(v) for k, v in r.items()} for r in df.to_dict("records")], out,
                  indent=1)
        out.write("\n")
        return
    _emit_rows([str(c) for c in df.columns], df.itertuples(index=False, name=None), out, widths)


def _emit_rows(cols: list[str], rows: Any, out: Any, widths: dict[str, int] | None = None) -> None:
    """Rows (sequences in ``cols`` order) as aligned text, long cells cut (what :func:`_emit` prints)."""
    widths = widths or {}

    def cell(c: str, v: Any) -> str:
        j = _jsonable(v)
        if j is None:
            return "-"
        text = f"{j:,.2f}" if isinstance(j, float) else (f"{j:,}" if isinstance(j, int) else str(j))
        w = widths.get(c, 60)
        return text if len(text) <= w else text[: w - 3] + "..."

    table = [cols] + [[cell(c, v) for c, v in zip(cols, r, strict=True)] for r in rows]
    ws = [max(len(t[i]) for t in table) for i in range(len(cols))]
    for n, t in enumerate(table):
        out.write("  ".join(x.ljust(w) for x, w in zip(t, ws, strict=True)).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in ws) + "\n")


def _no_rules_sentence(report: Any) -> str:
    """Why a report has no rule results, by what kind of file it is."""
    name = Path(report.path).name
    if report.source == "csv-raw":
        return (f"{name} holds no rule results: `--page raw` CSV exports have none; use the .ncu-rep or a "
                "`--page details` export.")
    if report.source == "csv-details":
        return (f"{name} holds no rule results: the details export has no rule rows; open the .ncu-rep "
                "itself (if it has none either, profile again with `ncu --set full`).")
    return (f"{name} holds no rule results: ncu did not apply its rules when it profiled (--apply-rules "
            "no, or sections without rules); profile again with `ncu --set full` (rules are applied by "
            "default) to get them.")


def _analysis_page(report: Any, args: argparse.Namespace, out: Any) -> int:
    """The rules, verdict, roofline or sections page; as text without pandas (CSV/JSON go through it)."""
    from engine.analysis.ncu.roofline import roofline_rows
    from engine.analysis.ncu.sections import (
        KERNEL_TABLE_COLUMNS,
        RULES_TABLE_COLUMNS,
        SECTION_COLUMNS,
        kernel_rows,
        rules_rows,
        section_rows,
    )

    frame = args.csv or args.json
    if args.page == "rules":
        rows = rules_rows(report)
        if not rows:
            sys.stderr.write(f"kernelscope: {_no_rules_sentence(report)}\n")
        cols = ["rank", *RULES_TABLE_COLUMNS]
        ranked = [[n, *r] for n, r in enumerate(rows, 1)]
        if frame:
            _emit(_frame(ranked, cols), args, out)
            return 0
        keep = ["rank", "id", "kernel", "rule", "type", "speedup_pct", "weighted_ns", "message"]
        _emit_rows(keep, _pick(ranked, cols, keep), out, {"kernel": 40, "message": 90})
    elif args.page == "verdict":
        keep = ["id", "name", "duration_ns", "sm_throughput_pct", "memory_throughput_pct", "verdict",
                "verdict_reason"]
        rows = _pick(kernel_rows(report), KERNEL_TABLE_COLUMNS, keep)
        if frame:
            _emit(_frame(rows, keep), args, out)
            return 0
        _emit_rows(keep, rows, out, {"name": 40, "verdict_reason": 110})
    elif args.page == "roofline":
        return _roofline_page(report, args, out, roofline_rows(report, _read_ceilings(args.ceilings)))
    else:  # sections
        cols = ["id", "kernel", "section", *SECTION_COLUMNS]
        allrows = [[int(k["ID"]), k["Kernel Name"], title, *r]
                   for k in report.kernel_records()
                   for title, rs in section_rows(report, int(k["ID"]), resolve_source=args.source).items()
                   for r in rs]
        if frame:
            keep = ["id", "kernel", "section", "metric", "value", "unit", "name", "note"]
            _emit(_frame(allrows, cols)[keep], args, out)
            return 0
        groups: dict[tuple[int, str], list[list[Any]]] = {}
        for r in allrows:
            groups.setdefault((r[0], r[2]), []).append(r)
        for (kid, sec), rs in groups.items():
            name = str(rs[0][1])
            out.write(f"\n== [{kid}] {name[:70]} : {sec}\n")
            shown = ["metric", "text", "note"]
            _emit_rows(shown, _pick(rs, cols, shown), out, {"note": 90})
    return 0


def _frame(rows: list[list[Any]], cols: list[str]) -> Any:
    """Rows as a DataFrame with columns ``cols`` (for CSV and JSON output)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(columns=cols)


def _pick(rows: list[list[Any]], cols: list[str], keep: list[str]) -> list[list[Any]]:
    """The ``keep`` columns of rows laid out as ``cols``."""
    at = [cols.index(c) for c in keep]
    return [[r[i] for i in at] for r in rows]


def _roofline_page(report: Any, args: argparse.Namespace, out: Any, rf: Any) -> int:
    """The roofline page: points and ceilings (text, CSV or JSON)."""
    from engine.analysis.ncu.roofline import CEILING_COLUMNS, POINT_COLUMNS

    points, ceilings, _per_kernel, notes = rf
    for note in notes:
        sys.stderr.write(f"kernelscope: {note}\n")
    if args.json:
        json.dump({"points": [{k: _jsonable(v) for k, v in zip(POINT_COLUMNS, r, strict=True)}
                              for r in points],
                   "ceilings": [{k: _jsonable(v) for k, v in zip(CEILING_COLUMNS, r, strict=True)}
                                for r in ceilings],
                   "notes": notes}, out, indent=1)
        out.write("\n")
        return 0
    if args.csv:
        _emit(_frame(points, POINT_COLUMNS), args, out, {"kernel": 40})
        return 0
    keep = ["id", "kernel", "precision", "path", "level", "flops_per_s", "bytes_per_s",
            "intensity_flop_per_byte", "pct_of_roof", "bound"]
    shown = [[*r[:5], r[5] / 1e9, r[6] / 1e9, *r[7:]] for r in _pick(points, POINT_COLUMNS, keep)]
    _emit_rows(["id", "kernel", "precision", "path", "level", "GFLOP/s", "GB/s", "FLOP/byte", "% of roof",
                "bound"], shown, out, {"kernel": 40})
    out.write("\nCeilings\n")
    _emit_rows(CEILING_COLUMNS, [[*r[:2], f"{r[2]:.4g}", *r[3:]] for r in ceilings], out)
    return 0


def cmd_ncu_compare(args: argparse.Namespace) -> int:
    """Print two reports side by side: kernels matched by name and launch order, with deltas."""
    from engine.analysis.ncu.compare import compare_reports
    from engine.reports.ncu import read_ncu

    rename = getattr(args, "rename_kernels", "on")
    before = _filter(_named(read_ncu(args.before), args.before, rename), getattr(args, "kernel", None))
    after = _filter(_named(read_ncu(args.after), args.after, rename), getattr(args, "kernel", None))
    df = compare_reports(before, after)
    if not (args.csv or args.json):
        df = df.assign(before_us=df["duration_ns_before"] / 1e3, after_us=df["duration_ns_after"] / 1e3)[
            ["name", "occurrence", "status", "before_us", "after_us", "duration_delta_pct", "speedup",
             "sm_throughput_pct_delta", "memory_throughput_pct_delta", "verdict_before", "verdict_after"]
        ].rename(columns={"before_us": "before (us)", "after_us": "after (us)",
                          "duration_delta_pct": "delta %", "sm_throughput_pct_delta": "d SM %",
                          "memory_throughput_pct_delta": "d mem %"})
    _emit(df, args, sys.stdout, {"name": 50})
    return 0
