"""CI gates: thresholds on Nsight Compute metrics and on nsys timings against a baseline.

A rules file (TOML) holds a list of ``[[gate]]`` tables. Two kinds:

Metric gates (an Nsight Compute report)::

    [[gate]]
    name = "SM throughput"
    metric = "sm_throughput_pct"     # an alias below, or any ncu metric name
    op = ">="                        # >=, >, <=, <
    value = 85
    kernel = "sgemm"                 # optional regex on the kernel name (default: every kernel)

Timing gates (nsys reports, with ``--baseline``)::

    [[gate]]
    name = "iteration time"
    check = "iteration_time"          # or "kernel_time" (each kernel's instance durations)
    max_regression_pct = 5            # slower than this AND significant (Mann-Whitney p < alpha) fails
    alpha = 0.05

A timing gate fails only when the slowdown is both larger than the allowed regression and
statistically significant, so noise alone never fails a build. With an ncu report and a baseline
ncu report, ``check = "kernel_time"`` compares each kernel's ``gpu__time_duration.sum``.

:func:`run_gates` returns the results; :func:`to_markdown` renders the CI summary. The CLI exits 0
when every gate passes and :data:`EXIT_GATE_FAILED` otherwise.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.system.errors import KernelscopeError
from engine.system.tomlfile import read_toml

EXIT_GATE_FAILED = 4

#: Friendly names for the seeds' thresholds -> (ncu metric, transform of its value).
ALIASES: dict[str, tuple[str, Callable[[float], float]]] = {
    "sm_throughput_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", lambda v: v),
    "memory_throughput_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                              lambda v: v),
    "dram_throughput_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", lambda v: v),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", lambda v: v),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct", lambda v: v),
    "l1_miss_pct": ("l1tex__t_sector_hit_rate.pct", lambda v: 100.0 - v),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct", lambda v: v),
    "duration_ns": ("gpu__time_duration.sum", lambda v: v),
}
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt,
}


class GateError(KernelscopeError):
    """A gates file or its inputs are unusable."""


@dataclass
class GateResult:
    """The outcome of one gate on one subject (a kernel, or the iteration range)."""

    gate: str
    subject: str
    passed: bool
    value: float | None
    threshold: str
    detail: str


def load_rules(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate a gates TOML file.

    Raises:
        GateError: missing or malformed file, unknown op/check.

    """
    p = Path(path).expanduser()
    data = read_toml(p, "The gates file", "give a TOML file of [[gate]] tables", GateError)
    gates = data.get("gate", [])
    if not isinstance(gates, list) or not gates:
        raise GateError(f"The gates file {p} has no [[gate]] tables; see `kernelscope gate --help`.")
    for i, g in enumerate(gates, 1):
        g.setdefault("name", g.get("metric") or g.get("check") or f"gate {i}")
        if "check" in g:
            if g["check"] not in ("iteration_time", "kernel_time"):
                raise GateError(f"Gate {g['name']!r}: check must be iteration_time or kernel_time.")
        elif "metric" in g:
            if g.get("op", ">=") not in _OPS or not isinstance(g.get("value"), (int, float)):
                raise GateError(f"Gate {g['name']!r} needs op (>=, >, <=, <) and a numeric value.")
        else:
            raise GateError(f"Gate {g['name']!r} needs either metric = ... or check = ....")
    return gates


def _ncu_values(report: Any, metric: str, kernel: str | None) -> dict[str, list[float]]:
    """Kernel name -> values of ``metric`` (alias or raw name) over its profiled launches."""
    from engine.analysis.findings.ncu import parse_rule_args

    name, fn = ALIASES.get(metric, (metric, lambda v: v))
    raw = report.raw
    if name not in raw.columns:
        return {}
    k = report.kernels
    name_col = "Base Name" if "Base Name" in k else "Kernel Name"
    names = dict(zip(k["ID"].astype(str), k[name_col].astype(str), strict=False))
    out: dict[str, list[float]] = {}
    rx = re.compile(kernel) if kernel else None
    for rid, text in zip(raw["ID"].astype(str), raw[name], strict=False):
        kname = names.get(rid, rid)
        if rx and not rx.search(kname):
            continue
        v = parse_rule_args(text)
        if v is not None:
            out.setdefault(kname, []).append(fn(v))
    return out


def _metric_gate(g: dict[str, Any], report: Any) -> list[GateResult]:
    vals = _ncu_values(report, g["metric"], g.get("kernel"))
    op, thr = g.get("op", ">="), float(g["value"])
    if not vals:
        return [GateResult(g["name"], g.get("kernel") or "*", False, None, f"{op} {thr:g}",
                           f"metric {g['metric']} not in the report (or no kernel matches)")]
    out = []
    for kname, vs in vals.items():
        v = float(np.mean(vs))
        ok = _OPS[op](v, thr)
        out.append(GateResult(g["name"], kname, ok, round(v, 4), f"{op} {thr:g}",
                              f"mean of {len(vs)} launch(es)"))
    return out


def _timing(g: dict[str, Any], subject: str, a: np.ndarray, b: np.ndarray) -> GateResult:
    from engine.analysis.compare import mann_whitney_u

    allowed = float(g.get("max_regression_pct", 0.0))
    alpha = float(g.get("alpha", 0.05))
    ma, mb = float(np.median(a)), float(np.median(b))
    change = 100 * (mb - ma) / ma if ma else 0.0
    mw = mann_whitney_u(a, b)
    significant = bool(mw.p_value < alpha) if not np.isnan(mw.p_value) else False
    failed = change > allowed and significant
    why = (f"median {ma / 1e6:.4f} ms -> {mb / 1e6:.4f} ms ({change:+.2f} %), Mann-Whitney p="
           f"{mw.p_value:.4f} (n={len(a)}/{len(b)})")
    if change > allowed and not significant:
        why += "; slower but within noise"
    return GateResult(g["name"], subject, not failed, round(change, 3),
                      f"<= +{allowed:g} % or not significant (p >= {alpha:g})", why)


def _timing_gate(g: dict[str, Any], report: Path, baseline: Path | None) -> list[GateResult]:
    if baseline is None:
        raise GateError(f"Gate {g['name']!r} compares with a baseline: pass --baseline BASE.")
    from engine.analysis.findings import is_ncu

    if is_ncu(report):
        from engine.reports.ncu import read_ncu

        cur = _ncu_values(read_ncu(report), "duration_ns", g.get("kernel"))
        base = _ncu_values(read_ncu(baseline), "duration_ns", g.get("kernel"))
        return [_timing(g, k, np.asarray(base[k]), np.asarray(v)) for k, v in cur.items() if k in base]
    from engine.analysis.compare import iterations
    from engine.reports import open_report

    tr, tb = open_report(report), open_report(baseline)
    if g["check"] == "iteration_time":
        ir, ib = iterations(tr, g.get("range")), iterations(tb, g.get("range"))
        if ir is None or ib is None:
            return [GateResult(g["name"], "iterations", False, None, "", "no repeating NVTX range in "
                               "both reports; wrap the loop body in an NVTX range")]
        return [_timing(g, ir.range, ib.sample, ir.sample)]
    out = []
    kr = tr.table("kernels", ["start", "end", "name"])
    kb = tb.table("kernels", ["start", "end", "name"])
    rx = re.compile(g["kernel"]) if g.get("kernel") else None
    for name, cur_k in kr.groupby("name"):
        if rx and not rx.search(str(name)):
            continue
        base_k = kb[kb["name"] == name]
        if not len(base_k):
            continue
        d = (cur_k["end"] - cur_k["start"]).to_numpy(float)
        db = (base_k["end"] - base_k["start"]).to_numpy(float)
        out.append(_timing(g, str(name), db, d))
    return out


def run_gates(report: str | Path, rules: list[dict[str, Any]], baseline: str | Path | None = None
              ) -> list[GateResult]:
    """Evaluate every gate on ``report`` (and ``baseline`` for timing gates)."""
    from engine.analysis.findings import is_ncu

    rp = Path(report).expanduser()
    bp = Path(baseline).expanduser() if baseline else None
    ncu_report = None
    out: list[GateResult] = []
    for g in rules:
        if "metric" in g:
            if ncu_report is None:
                if not is_ncu(rp):
                    raise GateError(f"Gate {g['name']!r} reads Nsight Compute metrics, but {rp} is not "
                                    "an ncu report; run it on an .ncu-rep or drop the metric gates.")
                from engine.reports.ncu import read_ncu

                ncu_report = read_ncu(rp)
            out += _metric_gate(g, ncu_report)
        else:
            out += _timing_gate(g, rp, bp)
    return out


def to_markdown(report: str | Path, results: list[GateResult], baseline: str | Path | None = None) -> str:
    """The CI summary: a verdict line and a table of gates."""
    failed = [r for r in results if not r.passed]
    head = "PASSED" if not failed else f"FAILED ({len(failed)} of {len(results)} checks)"
    lines = [f"## Kernelscope gates: {head}", "", f"Report: `{report}`"]
    if baseline:
        lines.append(f"Baseline: `{baseline}`")
    lines += ["", "| result | gate | subject | value | threshold | detail |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        val = "n/a" if r.value is None else f"{r.value:g}"
        subj = r.subject if len(r.subject) <= 60 else r.subject[:57] + "..."
        lines.append(f"| {'pass' if r.passed else '**FAIL**'} | {r.gate} | `{subj}` | {val} | "
                     f"{r.threshold} | {r.detail} |")
    return "\n".join(lines) + "\n"
