"""Check engine.reports.ncu_names against ncu's own kernel names in a report.

Usage: python benchmarks/ncu_names_check.py REPORT.ncu-rep RAW.csv [RAW_RENAME_OFF.csv]
RAW.csv is `ncu --import REPORT --csv --page raw` (kernel renaming on, ncu's default); the optional
RAW_RENAME_OFF.csv is the same with `--rename-kernels off`. Prints one line per kernel that we name
differently and a summary; exit 1 on any mismatch.
"""

from __future__ import annotations

import csv
import sys

import ncu_report

from engine.reports.ncu_names import simplify_demangled, strip_literal_casts


def _names(raw_csv: str) -> list[str]:
    return [r[4] for r in list(csv.reader(open(raw_csv, newline="", encoding="utf-8")))[2:]]


def main(argv: list[str]) -> int:
    ctx = ncu_report.load_report(argv[1])
    ranges = [ctx.range_by_idx(i) for i in range(ctx.num_ranges())]
    stored = [str(a.name(a.NameBase_DEMANGLED))
              for r in ranges for a in (r.action_by_idx(j) for j in range(r.num_actions()))]
    checks = [("renamed", _names(argv[2]), simplify_demangled)]
    if len(argv) > 3:
        checks.append(("rename-off", _names(argv[3]), strip_literal_casts))
    bad = 0
    for label, expected, fn in checks:
        n_bad = 0
        for i, (s, e) in enumerate(zip(stored, expected, strict=True)):
            if fn(s) != e:
                n_bad += 1
                print(f"{label} kernel {i}:\n  stored {s}\n  ncu    {e}\n  ours   {fn(s)}")
        print(f"{label}: {len(stored) - n_bad}/{len(stored)} kernel names as ncu prints them")
        bad += n_bad
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
