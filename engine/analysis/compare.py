"""Compare two nsys runs: iteration statistics, deltas by kernel / API / NVTX range, fairness.

Statistics (numpy only): the Mann-Whitney U test (exact p-value for small samples without ties,
normal approximation with tie correction otherwise) and a percentile bootstrap confidence interval
of the difference of medians. Per-iteration durations come from each report's repeating NVTX range
(the one ``summary`` picks); the first iteration is left out as warm-up when there are at least 3.

The fairness check warns when runs are not comparable: other GPU or driver, different clocks or
power limit or co-tenant processes (from telemetry recordings when given), different launch counts,
grid sizes or bytes copied (a different problem size).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.reports.trace_columns import NVTX_PUSH_POP, NVTX_START_END
from engine.system.arrays import distinct

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

SCHEMA = "kernelscope.compare/1"
ALPHA = 0.05


# -- statistics ----------------------------------------------------------------------------------
def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), ties sharing their mean rank."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=float)
    sv = values[order]
    i = 0
    while i < len(sv):
        j = i
        while j + 1 < len(sv) and sv[j + 1] == sv[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _exact_u_cdf(n1: int, n2: int) -> np.ndarray:
    """Number of arrangements giving each U in 0..n1*n2 (no ties), by the usual recurrence."""
    # counts[m][n] as polynomials; build iteratively over n1 with n2 fixed via DP on (i, j).
    from functools import cache

    @cache
    def f(i: int, j: int) -> tuple[int, ...]:
        if i == 0 or j == 0:
            return (1,)
        a = f(i - 1, j)  # largest element from sample 1 contributes j
        b = f(i, j - 1)
        out = [0] * (i * j + 1)
        for u, c in enumerate(a):
            out[u + j] += c
        for u, c in enumerate(b):
            out[u] += c
        return tuple(out)

    return np.array(f(n1, n2), dtype=float)


@dataclass(frozen=True)
class MannWhitney:
    """Result of a two-sided Mann-Whitney U test."""

    u: float  # U of the first sample
    p_value: float
    method: str  # "exact" or "normal approximation (tie-corrected)"
    n1: int
    n2: int


def mann_whitney_u(x: np.ndarray | list[float], y: np.ndarray | list[float]) -> MannWhitney:
    """Two-sided Mann-Whitney U test of x vs y.

    Exact p-value when both samples have at most 25 values and there are no ties; otherwise the
    normal approximation with tie and continuity correction.
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return MannWhitney(float("nan"), float("nan"), "no data", n1, n2)
    allv = np.concatenate([a, b])
    r = _ranks(allv)
    u1 = float(r[:n1].sum() - n1 * (n1 + 1) / 2)
    ties = len(distinct(allv)) < len(allv)
    if not ties and n1 <= 25 and n2 <= 25:
        counts = _exact_u_cdf(n1, n2)
        total = counts.sum()
        u_small = min(u1, n1 * n2 - u1)
        p = 2 * counts[: int(math.floor(u_small)) + 1].sum() / total
        return MannWhitney(u1, float(min(p, 1.0)), "exact", n1, n2)
    n = n1 + n2
    _, tcounts = np.unique(allv, return_counts=True)
    tie_term = float(((tcounts ** 3) - tcounts).sum()) / (n * (n - 1)) if n > 1 else 0.0
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term))
    if sigma == 0:
        return MannWhitney(u1, 1.0, "normal approximation (tie-corrected)", n1, n2)
    z = (abs(u1 - n1 * n2 / 2) - 0.5) / sigma
    p = math.erfc(max(z, 0) / math.sqrt(2))
    return MannWhitney(u1, float(min(p, 1.0)), "normal approximation (tie-corrected)", n1, n2)


def bootstrap_median_diff_ci(x: np.ndarray | list[float], y: np.ndarray | list[float], *,
                             rounds: int = 10_000, level: float = 0.95, seed: int = 0
                             ) -> tuple[float, float]:
    """Percentile bootstrap CI of ``median(y) - median(x)`` (fixed seed: reproducible)."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if not len(a) or not len(b):
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, len(a), size=(rounds, len(a)))], axis=1)
    mb = np.median(b[rng.integers(0, len(b), size=(rounds, len(b)))], axis=1)
    d = mb - ma
    lo, hi = np.quantile(d, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def median_ci(x: np.ndarray | list[float], *, rounds: int = 10_000, level: float = 0.95,
              seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of a sample's median."""
    a = np.asarray(x, dtype=float)
    if not len(a):
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    m = np.median(a[rng.integers(0, len(a), size=(rounds, len(a)))], axis=1)
    lo, hi = np.quantile(m, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


# -- per-iteration samples -----------------------------------------------------------------------
@dataclass
class Iterations:
    """Per-iteration durations of a report's repeating NVTX range."""

    range: str
    durations_ns: list[int]
    warmup_dropped: int
    #: how the steps were found (``Steps.method``: gpu, gpu+nvtx, nvtx, marker)
    method: str = ""

    @property
    def sample(self) -> np.ndarray:
        """Durations used for statistics (warm-up dropped)."""
        return np.asarray(self.durations_ns[self.warmup_dropped:], dtype=float)


def iterations(trace: Trace, range_name: str | None = None, *, drop_warmup: bool = True
               ) -> Iterations | None:
    """Durations of the step range, found by structure or named by ``range_name``.

    The range is the one :func:`engine.analysis.steps.find_steps` picks, or ``range_name`` (raw or
    normalised, with or without ``domain:``).

    The warm-up steps that ``find_steps`` flags are dropped; with none flagged, the first of at
    least 3 steps still is (it pays one-time costs more often than not).
    """
    from engine.analysis.steps import find_steps

    st = find_steps(trace, range_name=range_name)
    if st is None:
        return None
    d = st.durations_ns
    warm = st.warmup_count or (1 if len(d) >= 3 else 0)
    return Iterations(st.range_name, d, warm if drop_warmup else 0, st.method)


# -- deltas --------------------------------------------------------------------------------------
def _group(df: pd.DataFrame, key: str) -> pd.DataFrame:
    d = df.assign(duration_ns=df["end"].astype(np.int64) - df["start"].astype(np.int64))
    out: pd.DataFrame = d.groupby(key)["duration_ns"].agg(["sum", "count", "median"])
    return out.rename(columns={"sum": "total_ns", "median": "median_ns"})


def _delta_table(a: pd.DataFrame, b: pd.DataFrame, key: str, limit: int = 20) -> list[dict[str, Any]]:
    ga, gb = _group(a, key), _group(b, key)
    j = ga.merge(gb, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b")).fillna(0)
    j["delta_ns"] = j["total_ns_b"] - j["total_ns_a"]
    j = j.reindex(j["delta_ns"].abs().sort_values(ascending=False).index)
    out = []
    for name, row in j.head(limit).iterrows():
        ta, tb = float(row["total_ns_a"]), float(row["total_ns_b"])
        out.append({
            "name": str(name), "total_ns_a": int(ta), "total_ns_b": int(tb),
            "count_a": int(row["count_a"]), "count_b": int(row["count_b"]),
            "median_ns_a": float(row["median_ns_a"]), "median_ns_b": float(row["median_ns_b"]),
            "delta_ns": int(tb - ta), "delta_pct": round(100 * (tb - ta) / ta, 2) if ta else None,
        })
    return out


def _nvtx(trace: Trace) -> pd.DataFrame:
    nv = trace.table("nvtx", ["start", "end", "eventType", "text"])
    r = nv[nv["eventType"].isin([NVTX_PUSH_POP, NVTX_START_END]) & nv["end"].notna()]
    return r.assign(text=r["text"].fillna("").astype(str))


# -- fairness ------------------------------------------------------------------------------------
def _driver(trace: Trace) -> str | None:
    return trace.system_env("NvDriverVersion")


def _telemetry_facts(path: Any) -> dict[str, Any]:
    from engine.analysis.findings.telemetry import BUSY_UTIL_PCT, process_pids
    from engine.telemetry.recording import read_recording

    df = read_recording(path)
    busy = df[df["util_gpu_pct"].fillna(0) >= BUSY_UTIL_PCT]
    procs: set[tuple[int, str]] = set()
    for v in df["processes"]:
        procs |= process_pids(v)
    lim = df["power_limit_w"].dropna()
    return {
        "busy_sm_clock_mhz": float(busy["sm_clock_mhz"].median()) if len(busy) else None,
        "power_limit_w": float(lim.median()) if len(lim) else None,
        "processes": sorted(procs),
    }


@dataclass
class Comparison:
    """The result of comparing run A (baseline) with run B."""

    a: str
    b: str
    iterations: dict[str, Any] | None
    kernels: list[dict[str, Any]]
    api: list[dict[str, Any]]
    nvtx: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (schema ``kernelscope.compare/1``)."""
        return {"schema": SCHEMA, "a": self.a, "b": self.b, "iterations": self.iterations,
                "kernels": self.kernels, "api": self.api, "nvtx": self.nvtx,
                "warnings": self.warnings, "facts": self.facts}


def _step_base(name: str) -> str:
    """A step range's name without what a fix may change: a variant in brackets, numbers, case."""
    n = re.sub(r"\(.*?\)|\[.*?\]", "", name)
    n = re.sub(r"\d+|\bN\b", "", n)
    return " ".join(n.lower().split())


def steps_comparable(ia: Iterations, ib: Iterations) -> bool:
    """Whether A's and B's steps are the same part of the program, so their times compare.

    The same range; two repeats of the GPU's work (a fix may change how many operations a step
    runs); or ranges of one kind whose names differ only in a variant ("iteration(naive)" vs
    "iteration(fixed)"). Composed phases vs one range, an NVTX range vs a GPU repeat or two
    different ranges ("forward+backward" vs "data") are not.
    """
    if ia.range == ib.range:
        return True
    gpu = [x.range.startswith("GPU repeat of ") for x in (ia, ib)]
    if all(gpu):
        return True
    kinds = {("→" in x.range, x.method == "nvtx", x.method == "marker") for x in (ia, ib)}
    return len(kinds) == 1 and not any(gpu) and _step_base(ia.range) == _step_base(ib.range)


def iteration_stats(ia: Iterations, ib: Iterations) -> dict[str, Any]:
    """Medians, 95 % CIs, Mann-Whitney test and the bootstrap CI of the change, for B vs A.

    ``significant`` is the test's result at ``ALPHA`` (p < alpha), ``test_result`` its direction
    and the verdict follows it; ``ci_excludes_zero`` says whether the bootstrap CI of the change
    agrees. When the steps are not the same part of the program (:func:`steps_comparable`), the
    verdict says "not comparable" (:func:`compare_traces` also drops the speedup: two different
    ranges' durations make none).
    """
    a, b = ia.sample, ib.sample
    mw = mann_whitney_u(a, b)
    lo, hi = bootstrap_median_diff_ci(a, b)
    ma, mb = float(np.median(a)), float(np.median(b))
    significant = bool(mw.p_value < ALPHA)
    comparable = steps_comparable(ia, ib)
    result = ("faster" if significant and mb < ma else "slower" if significant and mb > ma
              else "no significant change")
    return {
        "range_a": ia.range, "range_b": ib.range,
        "n_a": len(a), "n_b": len(b), "warmup_dropped_a": ia.warmup_dropped,
        "warmup_dropped_b": ib.warmup_dropped,
        "durations_ns_a": ia.durations_ns, "durations_ns_b": ib.durations_ns,
        "median_ns_a": ma, "median_ns_b": mb,
        "median_ci95_ns_a": list(median_ci(a)), "median_ci95_ns_b": list(median_ci(b)),
        "delta_median_ns": mb - ma, "delta_median_ci95_ns": [lo, hi],
        "speedup": ma / mb if mb else None,
        "change_pct": round(100 * (mb - ma) / ma, 2) if ma else None,
        "mann_whitney_u": mw.u, "p_value": mw.p_value, "test": f"Mann-Whitney U, {mw.method}",
        "significant": significant, "alpha": ALPHA, "ci_excludes_zero": bool(hi < 0 or lo > 0),
        "steps_comparable": comparable, "test_result": result,
        "verdict": result if comparable else "not comparable (the steps are different ranges)",
    }


def result_sentence(it: dict[str, Any]) -> str:
    """The test's result in words, at the stated alpha: ``p=0.0286 < 0.05 -> faster``."""
    alpha = it.get("alpha", ALPHA)
    p = it["p_value"]
    if p is None or not math.isfinite(p):
        return "no test (no samples)"
    rel = "<" if it["significant"] else ">="
    out = f"p={p:.4f} {rel} {alpha:g} -> {it.get('test_result', it['verdict'])}"
    if it["significant"] and not it.get("ci_excludes_zero", True):
        out += " (the 95% CI of the change includes 0: its size is uncertain)"
    if not it.get("steps_comparable", True):
        out += "; but the steps are different ranges: not comparable"
    return out


def speedup_sentence(it: dict[str, Any]) -> str:
    """``speedup 4.52x``, or why there is none (steps of different ranges)."""
    if it.get("speedup") is not None:
        return f"speedup {it['speedup']:.2f}x"
    if not it.get("steps_comparable", True):
        return f"no speedup: A's steps ({it['range_a']}) and B's ({it['range_b']}) are different ranges"
    return "no speedup (B's median is 0)"


#: Fairness tolerances: smaller differences are facts, not warnings (each warning names its own).
BYTES_TOLERANCE = 0.01  # relative, of the larger total
CLOCK_TOLERANCE = 0.05  # relative
POWER_TOLERANCE_W = 1.0


def _diff(a: float, b: float, scale: float, unit: str) -> str:
    """B minus A, absolute and relative: ``B +80.7 MB, +8.6 %``."""
    d = (b - a) / scale
    rel = f", {(b - a) / a * 100:+.1f} %" if a else ""
    return f"B {d:+,.1f} {unit}{rel}"


def _steps_compared(ia: Iterations | None, ib: Iterations | None, warnings: list[str],
                    facts: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`iteration_stats` of A's and B's steps, with the warnings (and facts) they call for."""
    if not (ia and ib):
        warnings.append("No repeating steps in both reports (the GPU's work does not repeat and no NVTX "
                        "range does): no per-iteration statistics; record more than one iteration, or "
                        "name a range or a marker operation with --range.")
        return None
    it_stats = iteration_stats(ia, ib)
    if len(ia.durations_ns) != len(ib.durations_ns):
        warnings.append(f"Different iteration counts: A {len(ia.durations_ns)}, B {len(ib.durations_ns)}.")
    if ia.range != ib.range:
        facts["iteration_ranges_differ"] = [ia.range, ib.range]
        # a fix may change a GPU repeat's length or an NVTX range's name ("iteration(naive)" vs
        # "iteration(fixed)"); other steps (phases vs one range, NVTX vs the GPU's, "data" vs
        # "forward+backward") may not be the same part of the program
        if not it_stats["steps_comparable"]:
            it_stats["speedup"] = None
            warnings.append(f"The steps are different ranges: A {ia.range!r}, B {ib.range!r}; the times "
                            "do not compare like with like, so no speedup is given (pick one with "
                            "--range).")
    if min(len(ia.sample), len(ib.sample)) < 4:
        warnings.append("Fewer than 4 iterations per run after warm-up: the test has little power; "
                        "record more iterations.")
    return it_stats


def compare_traces(a: Trace, b: Trace, *, range_name: str | None = None,
                   telemetry_a: Any = None, telemetry_b: Any = None) -> Comparison:
    """Compare run B against baseline A."""
    warnings: list[str] = []
    facts: dict[str, Any] = {}
    ga = [str(n) for n in a.table("gpus", ["name"])["name"]]
    gb = [str(n) for n in b.table("gpus", ["name"])["name"]]
    facts["gpus"] = [ga, gb]
    if ga and gb and ga != gb:
        warnings.append(f"Different GPUs: A ran on {', '.join(ga)}, B on {', '.join(gb)}.")
    da, db = _driver(a), _driver(b)
    facts["driver"] = [da, db]
    if da and db and da != db:
        warnings.append(f"Different drivers: A {da}, B {db}.")
    if telemetry_a is not None and telemetry_b is not None:
        ta, tb = _telemetry_facts(telemetry_a), _telemetry_facts(telemetry_b)
        facts["telemetry"] = [ta, tb]
        ca, cb = ta["busy_sm_clock_mhz"], tb["busy_sm_clock_mhz"]
        if ca and cb and abs(ca - cb) > CLOCK_TOLERANCE * max(ca, cb):
            warnings.append(f"Different SM clocks under load: A {ca:.0f} MHz, B {cb:.0f} MHz "
                            f"({_diff(ca, cb, 1, 'MHz')}; tolerance {CLOCK_TOLERANCE:.0%}).")
        pa, pb = ta["power_limit_w"], tb["power_limit_w"]
        if pa and pb and abs(pa - pb) > POWER_TOLERANCE_W:
            warnings.append(f"Different power limits: A {pa:.0f} W, B {pb:.0f} W ({_diff(pa, pb, 1, 'W')}; "
                            f"tolerance {POWER_TOLERANCE_W:.0f} W).")
        for label, t in (("A", ta), ("B", tb)):
            if len(t["processes"]) > 1:
                names = ", ".join(f"{n} ({p})" for p, n in t["processes"])
                warnings.append(f"Several processes used the GPU during {label}: {names}.")
    elif telemetry_a is not None or telemetry_b is not None:
        warnings.append("Telemetry was given for only one run; clocks and co-tenants are not compared.")
    # Problem size: launches per kernel grid, bytes copied, iteration counts.
    ka = a.table("kernels", ["gridX", "gridY", "gridZ"])
    kb = b.table("kernels", ["gridX", "gridY", "gridZ"])
    facts["kernel_launches"] = [len(ka), len(kb)]
    if len(ka) != len(kb):
        warnings.append(f"Different kernel launch counts: A {len(ka)}, B {len(kb)}; the runs may not do "
                        "the same work.")
    else:
        grids_a = sorted(map(tuple, ka.to_numpy().tolist()))
        grids_b = sorted(map(tuple, kb.to_numpy().tolist()))
        if grids_a != grids_b:
            warnings.append("The kernels' grid sizes differ between A and B: check the problem size.")
    ba = int(a.table("memcpy", ["bytes"])["bytes"].sum())
    bb = int(b.table("memcpy", ["bytes"])["bytes"].sum())
    facts["bytes_copied"] = [ba, bb]
    if abs(ba - bb) > BYTES_TOLERANCE * max(ba, bb):
        warnings.append(f"Different bytes copied: A {ba / 1e6:,.1f} MB, B {bb / 1e6:,.1f} MB "
                        f"({_diff(ba, bb, 1e6, 'MB')}; tolerance {BYTES_TOLERANCE:.0%}).")
    it_stats = _steps_compared(iterations(a, range_name), iterations(b, range_name), warnings, facts)
    api_cols = ["start", "end", "baseName"]
    return Comparison(
        a=str(a.info.path), b=str(b.info.path), iterations=it_stats,
        kernels=_delta_table(a.table("kernels", ["start", "end", "name"]),
                             b.table("kernels", ["start", "end", "name"]), "name"),
        api=_delta_table(a.table("api", api_cols), b.table("api", api_cols), "baseName"),
        nvtx=_delta_table(_nvtx(a), _nvtx(b), "text"),
        warnings=warnings, facts=facts,
    )


def _t(ns: float) -> str:
    from engine.analysis.findings.model import fmt_time

    return fmt_time(ns)


def format_comparison(c: Comparison) -> str:
    """Readable text for a terminal."""
    lines = [f"A (baseline) {c.a}", f"B            {c.b}", ""]
    it = c.iterations
    if it:
        lines.append(f"Iteration time ({it['range_a']} vs {it['range_b']}; warm-up dropped: "
                     f"{it['warmup_dropped_a']}/{it['warmup_dropped_b']})")
        lines.append(f"  A median {_t(it['median_ns_a'])}  95% CI [{_t(it['median_ci95_ns_a'][0])}, "
                     f"{_t(it['median_ci95_ns_a'][1])}]  n={it['n_a']}")
        lines.append(f"  B median {_t(it['median_ns_b'])}  95% CI [{_t(it['median_ci95_ns_b'][0])}, "
                     f"{_t(it['median_ci95_ns_b'][1])}]  n={it['n_b']}")
        change = f" ({it['change_pct']:+.1f} %)" if it["change_pct"] is not None else ""
        lines.append(f"  change {_t(it['delta_median_ns'])}{change}, 95% CI "
                     f"[{_t(it['delta_median_ci95_ns'][0])}, {_t(it['delta_median_ci95_ns'][1])}]; "
                     f"{speedup_sentence(it)}")
        lines.append(f"  {it['test']}: U={it['mann_whitney_u']:.1f}, {result_sentence(it)}")
        lines.append("")
    for title, rows in (("Kernels", c.kernels), ("CUDA API", c.api), ("NVTX ranges", c.nvtx)):
        if not rows:
            continue
        lines.append(f"{title} (largest changes; total time A -> B)")
        for r in rows[:10]:
            pct = f"{r['delta_pct']:+.1f} %" if r["delta_pct"] is not None else "new"
            lines.append(f"  {r['name'][:60]:<60} {_t(r['total_ns_a']):>11} -> {_t(r['total_ns_b']):>11} "
                         f"({pct}; calls {r['count_a']} -> {r['count_b']})")
        lines.append("")
    if c.warnings:
        lines.append("Fairness warnings")
        lines += [f"  ! {w}" for w in c.warnings]
    else:
        lines.append("Fairness: same GPU and driver, same launches, grids and bytes copied.")
    return "\n".join(lines) + "\n"
