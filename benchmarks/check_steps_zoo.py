"""Step detection and stragglers on the zoo recordings (issue 22), against the truth measured on the GPU.

    python benchmarks/check_steps_zoo.py [--set tuned|heldout|ddp4|cycle|all] [--json OUT]

For every recording in tests/data/recordings/zoo/{tuned,heldout,ddp4,cycle} (recorded on H200s with
benchmarks/device/record_steps_zoo.sh), the table compares the steady median step found (timed on
the GPU) with the GPU's own step period (CUDA events at the top of each step, *_truth.json), for the
report as recorded and for a copy with every NVTX range deleted. For each 2- and 4-rank job it names the
straggler and compares its cost with what was injected (extra GEMM time measured apart, or the
sleep), and with the job's step minus the same job's without a straggler where that was recorded;
then it repeats the job with one rank's clock moved (+37.5 ms and 50 µs/s of drift) and checks that
the straggler, steps and cost stay the same.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ZOO = ROOT / "tests" / "data" / "recordings" / "zoo"
WORK = Path(tempfile.gettempdir()) / "ks_zoo"
#: per-step period within this of the GPU's; straggler cost within this of the injected
STEP_TOL, COST_TOL = 0.15, 0.30
#: recordings without steps (a single pass, a micro-benchmark)
NO_STEPS = {"infer", "bench", "infer_layers"}
#: 2-rank jobs: (straggler rank, injected ms or None for "no straggler", baseline job)
JOBS = {
    "tuned": {"ddp2_gemm": (1, "extra_gemm", None), "ddp2_nonvtx": (0, "extra_gemm", None),
              "ddp2_moving": (None, "sleep", None), "ddp2_sleep": (-1, None, None),
              "ddp2_outer_ahead": (-1, None, None)},
    "ddp4": {"ddp4_gemm": (3, "extra_gemm", "ddp4_base"), "ddp4_moving": (None, "sleep", None),
             "ddp4_base": (-1, None, None)},
    "heldout": {"ddp2_ho": (0, "extra_gemm", "ddp2_ho_base"),
                "ddp2_ho_none": (1, "sleep", "ddp2_ho_none_base"),
                "ddp2_ho_base": (-1, None, None), "ddp2_ho_none_base": (-1, None, None)},
    "cycle": {},
}


def sqlite_of(xz: Path) -> Path:
    """The recording decompressed once into WORK."""
    out = WORK / xz.parent.name / xz.name[:-3]
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        with lzma.open(xz) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        tmp.rename(out)
    return out


def without_nvtx(path: Path) -> Path:
    """A copy of the report with every NVTX event deleted."""
    out = path.with_name(path.stem + ".nonvtx.sqlite")
    if not out.exists():
        shutil.copy(path, out)
        con = sqlite3.connect(out)
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone():
            con.execute("DELETE FROM NVTX_EVENTS")
        con.commit()
        con.close()
    return out


def shifted(path: Path, offset_ns: int = 37_500_000, drift: float = 50e-6) -> Path:
    """A copy whose event times are moved: t + offset + drift × (t − first start) (another host's clock)."""
    out = path.with_name(path.stem + ".shifted.sqlite")
    if out.exists():
        return out
    shutil.copy(path, out)
    con = sqlite3.connect(out)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    t0 = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    for t in tables:
        cols = {r[1] for r in con.execute(f"PRAGMA table_info({t})")}
        for c in ("start", "end", "timestamp"):
            if c in cols and t.startswith(("CUPTI_", "NVTX_", "OSRT_", "CUDA_")):
                con.execute(f'UPDATE {t} SET "{c}" = "{c}" + ? + CAST((("{c}" - ?) * ?) AS INTEGER) '
                            f'WHERE "{c}" IS NOT NULL', (offset_ns, t0, drift))
    con.commit()
    con.close()
    return out


def truth_of(xz: Path) -> dict | None:
    p = xz.with_name(xz.name.replace(".sqlite.xz", "_truth.json"))
    return json.loads(p.read_text()) if p.exists() else None


def gpu_period_ms(truth: dict | None) -> float | None:
    p = (truth or {}).get("gpu_period_ms") or []
    return statistics.median(p[3:]) if len(p) > 3 else None


def steps_row(path: Path) -> dict:
    from engine.analysis.stepfind import no_steps_reason
    from engine.analysis.steps import find_steps
    from engine.reports import open_report

    t = open_report(path)
    st = find_steps(t)
    if st is None:
        return {"steps": 0, "why": no_steps_reason(t)}
    return {"steps": st.count, "median_ms": st.steady_median_ns / 1e6, "method": st.method,
            "step": st.range_name,
            "confidence": st.confidence, "outliers": st.outlier_count,
            "host_ms": (st.host_steady_median_ns or 0) / 1e6}


def check_steps(which: list[str]) -> list[dict]:
    rows = []
    for sub in which:
        for xz in sorted((ZOO / sub).glob("*.sqlite.xz")):
            name = xz.name[:-len(".sqlite.xz")]
            path = sqlite_of(xz)
            truth = gpu_period_ms(truth_of(xz))
            row = {"set": sub, "name": name, "truth_ms": truth}
            for tag, p in (("", path), ("nonvtx_", without_nvtx(path))):
                got = steps_row(p)
                row.update({tag + k: v for k, v in got.items()})
            base = name.split("_rank")[0]
            if base in NO_STEPS:
                row["ok"] = row["steps"] == 0 and row["nonvtx_steps"] == 0
            elif truth is None:
                row["ok"] = row["steps"] > 0
            else:
                row["ok"] = all(abs(row.get(k + "median_ms", 0) / truth - 1) <= STEP_TOL
                                for k in ("", "nonvtx_"))
            rows.append(row)
    return rows


def check_jobs(which: list[str]) -> list[dict]:
    from engine.analysis.ranks.analyze import analyze_paths

    rows = []
    for sub in which:
        for job, (want, kind, base) in JOBS[sub].items():
            xzs = sorted((ZOO / sub).glob(f"{job}_rank*.sqlite.xz"))
            paths = [sqlite_of(x) for x in xzs]
            truths = [truth_of(x) or {} for x in xzs]
            injected = None
            if kind == "extra_gemm":
                injected = max(t.get("extra_gemm_ms_per_step") or 0 for t in truths)
            elif kind == "sleep":
                injected = truths[0].get("sleep_ms")
            job_delta = None
            if base:
                b = gpu_period_ms(truth_of(ZOO / sub / f"{base}_rank0.sqlite.xz"))
                job_delta = (gpu_period_ms(truths[0]) or 0) - (b or 0)
            row: dict = {"set": sub, "job": job, "injected_ms": injected, "job_delta_ms": job_delta}
            for tag, ps in (("", paths), ("shifted_", [paths[0], shifted(paths[1]), *paths[2:]])):
                res = analyze_paths([str(p) for p in ps])
                s = res.straggler
                row[tag + "straggler"] = None if s is None else s.rank
                row[tag + "cost_ms"] = None if s is None else s.cost_per_step_ns / 1e6
                row[tag + "cause"] = None if s is None else s.cause
                row[tag + "steps"] = [r.steps for r in res.ranks]
                row[tag + "step_ms"] = [round((r.step_median_ns or 0) / 1e6, 3) for r in res.ranks]
                row[tag + "clock"] = res.clock.sentence
            if want == -1:
                ok = row["straggler"] is None and row["shifted_straggler"] is None
            else:
                ok = ((want is None or row["straggler"] == want)
                      and row["shifted_straggler"] == row["straggler"])
                ref = job_delta if job_delta else injected
                ok = ok and ref is not None and all(
                    row[k] is not None and abs(row[k] / ref - 1) <= COST_TOL
                    for k in ("cost_ms", "shifted_cost_ms"))
                ok = ok and row["steps"] == row["shifted_steps"]
            row["ok"] = bool(ok)
            rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="all", choices=("tuned", "heldout", "ddp4", "cycle", "all"))
    ap.add_argument("--json")
    a = ap.parse_args()
    which = ["tuned", "heldout", "ddp4", "cycle"] if a.set == "all" else [a.set]
    steps = check_steps(which)
    print(f"{'set':8} {'recording':24} {'truth ms':>9} {'found ms':>9} {'err':>6} {'no-NVTX ms':>10} "
          f"{'steps':>5}  {'method':8} {'conf':>5}  step")
    for r in steps:
        t = r["truth_ms"]
        f = r.get("median_ms")
        err = f"{(f / t - 1) * 100:+.1f}%" if t and f else ""
        nv = r.get("nonvtx_median_ms")
        print(f"{r['set']:8} {r['name']:24} {t or float('nan'):9.3f} {f or float('nan'):9.3f} {err:>6} "
              f"{nv or float('nan'):10.3f} {r['steps']:5d}  {r.get('method', '-'):8} "
              f"{r.get('confidence', 0):5.2f}  "
              f"{r.get('step') if 'median_ms' in r else r.get('why', '')[:60]}  "
              f"{'ok' if r['ok'] else 'WRONG'}")
    jobs = check_jobs(which)
    print()
    print(f"{'set':8} {'job':18} {'straggler':>9} {'cost ms':>8} {'injected':>8} {'job Δ':>6} {'shifted':>8} "
          f"{'cost ms':>8}  cause")
    for r in jobs:
        def fmt(v: object) -> str:
            return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)
        print(f"{r['set']:8} {r['job']:18} {fmt(r['straggler']):>9} {fmt(r['cost_ms']):>8} "
              f"{fmt(r['injected_ms']):>8} "
              f"{fmt(r['job_delta_ms']):>6} {fmt(r['shifted_straggler']):>8} {fmt(r['shifted_cost_ms']):>8}  "
              f"{(r['cause'] or '')[:70]}  {'ok' if r['ok'] else 'WRONG'}")
    bad = [r for r in steps + jobs if not r["ok"]]
    print(f"\n{len(steps) + len(jobs) - len(bad)} of {len(steps) + len(jobs)} right")
    if a.json:
        Path(a.json).write_text(json.dumps({"steps": steps, "jobs": jobs}, indent=1, default=str))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
