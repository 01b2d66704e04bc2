"""The ``kernelscope ncu`` subcommand: Nsight Compute reports on the command line."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from typing import Any

from engine.errors import KernelscopeError

#: Summary columns: (header, metric name or kernels-table column).
_SUMMARY = [
    ("Compute (SM) %", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("Memory %", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("Achieved Occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``ncu REPORT [--kernel REGEX] [--page details|raw] [--csv|--json]``.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers``.

    Returns:
        The new subcommand's parser.
    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "ncu", help="Nsight Compute reports (.ncu-rep or ncu --csv exports): per-kernel summary and pages"
    )
    p.add_argument("input", metavar="REPORT")
    p.add_argument("--kernel", metavar="REGEX", help="only kernels whose name matches REGEX (re.search)")
    p.add_argument("--page", choices=["details", "raw"],
                   help="print this page as `ncu --import REPORT --page PAGE --print-units base` does")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="CSV output (the default for --page)")
    fmt.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(func=cmd_ncu)
    return p


def _summary_rows(report: Any) -> list[dict[str, Any]]:
    m = report.metrics
    rows = []
    for k in report.kernels.itertuples(index=False):
        kid = str(k.ID)
        mine = m[(m["ID"] == kid) & (m["metric"] != "")]
        values = dict(zip(mine["metric"], mine["value"], strict=True))
        row: dict[str, Any] = {
            "ID": int(k.ID), "Kernel Name": k[1], "duration_ns": k.duration_ns,
            "Grid Size": k[8], "Block Size": k[9], "Registers Per Thread": k[16],
        }
        for header, metric in _SUMMARY:
            v = values.get(metric)
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


def cmd_ncu(args: argparse.Namespace) -> int:
    """Print an Nsight Compute report's per-kernel summary, or its details/raw page."""
    from engine.analysis.ncu_pages import details_csv, raw_csv
    from engine.reports.ncu import read_ncu

    report = read_ncu(args.input)
    if args.kernel:
        try:
            rx = re.compile(args.kernel)
        except re.error as exc:
            raise KernelscopeError(f"--kernel {args.kernel!r} is not a valid regular expression ({exc}).") \
                from exc
        keep = {str(i) for i, n in zip(report.kernels["ID"], report.kernels["Kernel Name"], strict=True)
                if rx.search(str(n))}
        if not keep:
            raise KernelscopeError(
                f"No kernel name matches {args.kernel!r}; run without --kernel to list them."
            )
        report.kernels = report.kernels[report.kernels["ID"].astype(str).isin(keep)]
        report.metrics = report.metrics[report.metrics["ID"].isin(keep)]
        if len(report.raw):
            report.raw = report.raw[report.raw["ID"].isin(keep)]
    out = sys.stdout
    if args.page:
        if args.page == "raw" and not len(report.raw.columns) > 11:
            raise KernelscopeError(
                f"{args.input} is a details export and has no raw page; "
                "use the .ncu-rep or a --page raw export."
            )
        if args.json:
            table = report.metrics if args.page == "details" else report.raw
            cols = [c for c in table.columns if c not in ("value", "metric")]
            json.dump(table[cols].to_dict(orient="records"), out, indent=1)
            out.write("\n")
        else:
            out.write(details_csv(report) if args.page == "details" else raw_csv(report))
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
