"""Check engine.reports.ncu.kernel_names against ncu's own kernel names in a report.

Usage: python benchmarks/ncu_names_check.py REPORT.ncu-rep RAW.csv [RAW_RENAME_OFF.csv] [--dump PAIRS.json]
RAW.csv is `ncu --import REPORT --csv --page raw` (kernel renaming on, ncu's default): compared with
simplify_names() of all the report's stored names (ncu's renaming depends on the whole report). The
optional RAW_RENAME_OFF.csv is the same with `--rename-kernels off`: compared with the stored names
verbatim. Prints one line per kernel that we name differently and a summary; exit 1 on any mismatch.
--dump writes every kernel's stored, ncu-printed and our names as JSON (the full data for the next rule).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys

import ncu_report

from engine.reports.ncu.kernel_names import simplify_names


def _names(raw_csv: str) -> list[str]:
    with open(raw_csv, newline="", encoding="utf-8") as f:
        return [r[4] for r in list(csv.reader(f))[2:]]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("raw")
    ap.add_argument("raw_rename_off", nargs="?")
    ap.add_argument("--dump", metavar="JSON")
    args = ap.parse_args(argv[1:])
    ctx = ncu_report.load_report(args.report)
    ranges = [ctx.range_by_idx(i) for i in range(ctx.num_ranges())]
    stored = [str(a.name(a.NameBase_DEMANGLED))
              for r in ranges for a in (r.action_by_idx(j) for j in range(r.num_actions()))]
    checks = [("renamed", _names(args.raw), simplify_names(stored))]
    if args.raw_rename_off:
        checks.append(("rename-off", _names(args.raw_rename_off), list(stored)))
    bad = 0
    for label, expected, ours in checks:
        n_bad = 0
        for i, (s, e, o) in enumerate(zip(stored, expected, ours, strict=True)):
            if o != e:
                n_bad += 1
                print(f"{label} kernel {i}:\n  stored {s}\n  ncu    {e}\n  ours   {o}")
        print(f"{label}: {len(stored) - n_bad}/{len(stored)} kernel names as ncu prints them")
        bad += n_bad
    if args.dump:
        rows = [{"id": i, "stored": s, **{f"{label}_ncu": e[i] for label, e, _ in checks},
                 **{f"{label}_ours": o[i] for label, _, o in checks}} for i, s in enumerate(stored)]
        with open(args.dump, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1, ensure_ascii=False)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
