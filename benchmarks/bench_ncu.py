#!/usr/bin/env python3
"""Time loading and summarizing Nsight Compute reports.

    python benchmarks/bench_ncu.py REPORT.ncu-rep [REPORT ...] [--rounds 3]

"Summary" = read the report + kernel table + every kernel's sections + rules ranked + roofline +
verdicts: what `kernelscope ncu` and the Kernels view show when a report is opened. Each
measurement runs in a fresh Python process (so import and native-library costs are real) with
its own empty Kernelscope cache:

- cold: the first open (ncu_report decodes every kernel);
- warm: the same report opened again (tables from Kernelscope's cache);
- +SASS: additionally disassembling every kernel's hottest instructions (done per kernel when
  someone opens its Source Counters; shown to say what that costs).

Peak memory is the child's max RSS (includes Python, pandas and ncu_report, ~100 MB; the `import
only` row is that baseline). With `ncu` on PATH, `ncu --import R --csv --page details` is timed
too and the ratio printed; without it the script says so.

Targets (issue 3, "Speed"): a cold summary of the 6 MB fixture ``torch_sdpa.ncu-rep`` in <= 0.3 s and
of the 18-kernel ``--set full`` report ``torch18_full.ncu-rep`` in <= 1 s. For a report with one of
those file names (or one given with ``--target NAME=SECONDS``) the script prints PASS or FAIL for
the median cold summary, and the fastest round beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Report file name -> the most seconds a cold summary may take (issue 3).
TARGETS = {"torch_sdpa.ncu-rep": 0.3, "torch18_full.ncu-rep": 1.0}
SUMMARY_KEYS = ("read", "kernel_table+verdicts", "sections", "rules", "roofline")


def child(mode: str, path: str) -> None:
    """Run one measurement in this process and print its timings as JSON."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(REPO))
    import pandas  # noqa: F401

    from engine.analysis.ncu.roofline import roofline
    from engine.analysis.ncu.sections import kernel_sections, kernel_table, rules_table
    from engine.reports.ncu import read_ncu

    t_import = time.perf_counter() - t0
    out: dict[str, float] = {"import": t_import}
    if mode == "import":
        print(json.dumps(out))
        return
    t = time.perf_counter()
    report = read_ncu(path)
    out["read"] = time.perf_counter() - t
    t = time.perf_counter()
    kt = kernel_table(report)  # includes the verdicts and each kernel's top rule
    out["kernel_table+verdicts"] = time.perf_counter() - t
    t = time.perf_counter()
    for kid in kt["id"]:
        kernel_sections(report, int(kid), resolve_source=(mode == "sass"))
    out["sections"] = time.perf_counter() - t
    t = time.perf_counter()
    rules_table(report)
    out["rules"] = time.perf_counter() - t
    t = time.perf_counter()
    rf = roofline(report)
    out["roofline"] = time.perf_counter() - t
    out["kernels"] = float(len(kt))
    out["points"] = float(len(rf.points))
    print(json.dumps(out))


def measure_rss(mode: str, path: str, cache: str) -> tuple[dict[str, float], float, float]:
    """measure() with the child's own peak RSS (os.wait4 gives per-child rusage)."""
    env = dict(os.environ, KERNELSCOPE_CACHE=cache)
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, __file__, "--child", mode, path], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout = p.stdout.read() if p.stdout else ""
    stderr = p.stderr.read() if p.stderr else ""
    _pid, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"child failed ({p.returncode}): {stderr[-2000:]}")
    return json.loads(stdout.strip().splitlines()[-1]), wall, usage.ru_maxrss / 1024


def ncu_import_seconds(path: str) -> float | None:
    ncu = shutil.which("ncu")
    if not ncu:
        return None
    t = time.perf_counter()
    subprocess.run([ncu, "--import", path, "--csv", "--page", "details"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="*", metavar="REPORT")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target", action="append", default=[], metavar="NAME=SECONDS",
                    help="cold-summary target for reports with that file name (besides the built-in "
                         + ", ".join(f"{k}={v:g}" for k, v in TARGETS.items()) + ")")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    if not a.reports:
        ap.error("give at least one REPORT")
    targets = dict(TARGETS)
    for t in a.target:
        name, sep, secs = t.partition("=")
        try:
            targets[name] = float(secs)
        except ValueError:
            ap.error(f"--target takes NAME=SECONDS, e.g. torch18_full.ncu-rep=1.0 (got {t!r})")
        if not sep:
            ap.error(f"--target takes NAME=SECONDS (got {t!r})")
    rows = []
    verdicts: list[str] = []
    for path in a.reports:
        size_mb = Path(path).stat().st_size / 1e6
        runs: dict[str, list[tuple[dict[str, float], float, float]]] = {
            "import only": [], "cold": [], "warm": [], "cold +SASS": []}
        for _ in range(a.rounds):  # alternate modes so machine load drifts hit all alike
            with tempfile.TemporaryDirectory() as cache:
                runs["import only"].append(measure_rss("import", path, cache))
                runs["cold"].append(measure_rss("summary", path, cache))
                runs["warm"].append(measure_rss("summary", path, cache))
            with tempfile.TemporaryDirectory() as cache:
                runs["cold +SASS"].append(measure_rss("sass", path, cache))
        ncu_s = ncu_import_seconds(path)
        target = targets.get(Path(path).name)
        if target is not None:
            cold = [sum(r[0].get(k, 0.0) for k in SUMMARY_KEYS) for r in runs["cold"]]
            med_s = statistics.median(cold)
            verdicts.append(
                f"{'PASS' if med_s <= target else 'FAIL'}: {Path(path).name} cold summary median "
                f"{med_s:.3f} s (fastest round {min(cold):.3f} s) vs target {target:g} s"
            )
        kernels = int(runs["cold"][0][0].get("kernels", 0))
        for mode, rs in runs.items():
            def med(key: str, rs: list[tuple[dict[str, float], float, float]] = rs) -> float:
                return statistics.median(r[0].get(key, 0.0) for r in rs)
            summary = sum(med(k) for k in SUMMARY_KEYS)
            rows.append({
                "report": f"{Path(path).name} ({size_mb:.1f} MB, {kernels} kernels)",
                "mode": mode, "summary_s": summary, "read_s": med("read"), "sections_s": med("sections"),
                "roofline_s": med("roofline"), "import_s": med("import"),
                "process_s": statistics.median(r[1] for r in rs),
                "peak_rss_mb": statistics.median(r[2] for r in rs),
                "ncu_s": ncu_s,
            })
    hdr = ["report", "mode", "summary (s)", "read", "sections", "roofline", "imports", "whole process",
           "peak RSS MB", "vs ncu --import"]
    table = [hdr]
    for r in rows:
        ratio = "-" if r["mode"] == "import only" else (
            f"{r['summary_s'] / r['ncu_s']:.2f}" if r["ncu_s"] else "no ncu here")
        table.append([r["report"], r["mode"], "-" if r["mode"] == "import only" else f"{r['summary_s']:.3f}",
                      f"{r['read_s']:.3f}", f"{r['sections_s']:.3f}", f"{r['roofline_s']:.3f}",
                      f"{r['import_s']:.3f}", f"{r['process_s']:.3f}", f"{r['peak_rss_mb']:.0f}", ratio])
    widths = [max(len(t[i]) for t in table) for i in range(len(hdr))]
    print(f"median of {a.rounds} rounds, each in a fresh process; summary = read + kernel table + verdicts "
          "+ all sections + rules + roofline (imports not included)")
    for n, t in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    for v in verdicts:
        print(v)
    if not shutil.which("ncu"):
        print("ncu is not installed on this machine: no ratio against `ncu --import` (install Nsight Compute "
              "and rerun to get one).")


if __name__ == "__main__":
    main()
