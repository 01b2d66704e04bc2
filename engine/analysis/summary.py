"""Where did the time go? The host-vs-GPU breakdown that the seeds drew by hand.

``summarize(trace)`` returns a plain, JSON-ready dict (schema ``kernelscope.summary/1``,
documented in the README): the capture's wall span; CUDA API time split into allocation, copies,
synchronization, launches, context/module setup and other; GPU busy time (union of intervals) split
into kernels, memcpy by direction and host memory kind, memset; GPU idle; achieved bandwidth per
direction x memory kind; and, when an NVTX range repeats, one-time vs per-iteration costs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

SCHEMA = "kernelscope.summary/1"
_API_COLS = ["start", "end", "baseName"]

#: API categories in display order, with a short human label.
API_CATEGORIES: dict[str, str] = {
    "allocation": "memory allocation / free",
    "copies": "memcpy / memset calls",
    "synchronization": "synchronization",
    "launches": "kernel and graph launches",
    "setup": "context, stream and module setup",
    "other": "other CUDA API calls",
}

_ALLOC = re.compile(
    r"^(cuda(Malloc|Free|HostAlloc|HostRegister|HostUnregister|MallocHost|FreeHost|MallocManaged|"
    r"MallocAsync|FreeAsync|MallocPitch|Malloc3D|MallocArray|FreeArray|Malloc3DArray|"
    r"MallocFromPoolAsync|MemPool\w*|MallocMipmappedArray|FreeMipmappedArray)\w*|"
    r"cu(MemAlloc|MemFree|MemHostAlloc|MemAllocHost|MemFreeHost|MemHostRegister|MemHostUnregister|"
    r"MemCreate|MemRelease|MemMap|MemUnmap|MemAddressReserve|MemAddressFree|MemSetAccess|MemPool|"
    r"ArrayCreate|ArrayDestroy|MipmappedArray)\w*)$"
)
_COPY = re.compile(r"^(cuda(Memcpy|Memset)\w*|cu(Memcpy|Memset|MemPrefetch)\w*|cudaMemPrefetch\w*)$")
_SYNC = re.compile(
    r"^(cuda(DeviceSynchronize|StreamSynchronize|EventSynchronize|StreamWaitEvent|ThreadSynchronize)|"
    r"cu(CtxSynchronize|StreamSynchronize|EventSynchronize|StreamWaitEvent|StreamWaitValue\w*))\w*$"
)
_LAUNCH = re.compile(
    r"^(cuda(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel\w*|GraphLaunch|LaunchHostFunc|"
    r"Launch\w*)|cu(LaunchKernel\w*|LaunchCooperativeKernel\w*|GraphLaunch|LaunchHostFunc|"
    r"LaunchGrid\w*))\w*$"
)
_SETUP = re.compile(
    r"^(cuInit|cuDriverGetVersion|cudaSetDevice|cudaGetDevice\w*|cudaDeviceReset|cudaSetDeviceFlags|"
    r"cudaDeviceGetAttribute|cudaDeviceSetLimit|cudaDeviceGet\w*|cudaRuntimeGetVersion|"
    r"cudaDriverGetVersion|cudaInitDevice|cudaStreamCreate\w*|cudaStreamDestroy\w*|cudaEventCreate\w*|"
    r"cudaEventDestroy\w*|cudaFuncGetAttributes|cudaFuncSetAttribute|cudaGraphInstantiate\w*|"
    r"cudaGraphCreate|cudaGraphDestroy|cudaGraphExecDestroy|cudaStreamBeginCapture\w*|"
    r"cudaStreamEndCapture|cudaGetFuncBySymbol|cudaGetDriverEntryPoint\w*|"
    r"cu(Ctx\w*|DevicePrimaryCtx\w*|Device\w*|Module\w*|Library\w*|Kernel\w*|Func\w*|Link\w*|"
    r"StreamCreate\w*|StreamDestroy\w*|EventCreate\w*|EventDestroy\w*|GraphInstantiate\w*|"
    r"GetProcAddress\w*|GetExportTable))$"
)


def api_category(name: str) -> str:
    """Category of a CUDA API call by its name (with or without the ``_vNNNN`` suffix)."""
    base = re.sub(r"_v\d+$", "", name)
    if _SYNC.match(base):
        return "synchronization"
    if _ALLOC.match(base):
        return "allocation"
    if _COPY.match(base):
        return "copies"
    if _LAUNCH.match(base):
        return "launches"
    if _SETUP.match(base):
        return "setup"
    return "other"


def interval_union_ns(starts: np.ndarray, ends: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Total length of the union of [start, end) intervals, and the merged blocks.

    Returns:
        (union length in ns, block starts, block ends), blocks sorted by start.

    """
    if len(starts) == 0:
        empty = np.array([], dtype=np.int64)
        return 0, empty, empty
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype=np.int64)[order]
    e = np.maximum.accumulate(np.asarray(ends, dtype=np.int64)[order])
    # A new block starts where an interval begins after everything before it ended.
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    block_idx = np.flatnonzero(new)
    block_starts = s[block_idx]
    block_ends = np.append(e[block_idx[1:] - 1], e[-1])
    return int((block_ends - block_starts).sum()), block_starts, block_ends


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def _host_kind(row_op: str, src: str, dst: str) -> str:
    """The memory kind that matters for a copy's speed: the host side (or Device for D2D)."""
    if row_op.startswith("Host-to") or row_op.startswith("Unified Host"):
        return str(src)
    if row_op.endswith("to-Host"):
        return str(dst)
    return str(src) if src == dst else f"{src}->{dst}"


def _durations(df: pd.DataFrame) -> np.ndarray:
    d: np.ndarray = df["end"].to_numpy(dtype=np.int64) - df["start"].to_numpy(dtype=np.int64)
    return d


def capture_window(trace: Trace) -> tuple[int, int]:
    """The capture's (start, end) in ns: the span of everything the trace recorded."""
    starts: list[int] = []
    ends: list[int] = []
    for name in ("api", "kernels", "memcpy", "memset", "nvtx", "cpu_ops"):
        df = trace.table(name, ["start", "end"])
        if len(df):
            st = df["start"].dropna()
            en = df["end"].dropna()
            if len(st):
                starts.append(int(st.min()))
            if len(en):
                ends.append(int(en.max()))
    if not starts:
        return 0, 0
    return min(starts), max(ends or starts)


def _api_breakdown(api: pd.DataFrame, wall_ns: int) -> dict[str, Any]:
    if not len(api):
        return {"total_ns": 0, "calls": 0, "pct_of_wall": None, "categories": []}
    d = api.assign(duration_ns=_durations(api))
    names = d["baseName"].unique()
    d["category"] = d["baseName"].map({n: api_category(str(n)) for n in names})
    total = int(d["duration_ns"].sum())
    cats = []
    for cat, label in API_CATEGORIES.items():
        sub = d[d["category"] == cat]
        if not len(sub):
            continue
        by_name = sub.groupby("baseName")["duration_ns"].agg(["sum", "count"])
        by_name = by_name.sort_values("sum", ascending=False)
        cat_total = int(sub["duration_ns"].sum())
        cats.append({
            "category": cat,
            "label": label,
            "total_ns": cat_total,
            "calls": len(sub),
            "pct_of_api": _pct(cat_total, total),
            "pct_of_wall": _pct(cat_total, wall_ns),
            "top_calls": [
                {"name": str(n), "total_ns": int(r["sum"]), "calls": int(r["count"])}
                for n, r in by_name.head(5).iterrows()
            ],
        })
    return {"total_ns": total, "calls": len(d), "pct_of_wall": _pct(total, wall_ns), "categories": cats}


def _gpu_breakdown(trace: Trace, wall_ns: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    k = trace.table("kernels", ["start", "end"])
    mc = trace.table("memcpy", ["start", "end", "bytes", "operation", "srcKindName", "dstKindName"])
    ms = trace.table("memset", ["start", "end", "bytes"])
    parts: list[dict[str, Any]] = []
    starts = [df["start"].to_numpy(dtype=np.int64) for df in (k, mc, ms) if len(df)]
    ends = [df["end"].to_numpy(dtype=np.int64) for df in (k, mc, ms) if len(df)]
    busy, _, _ = interval_union_ns(
        np.concatenate(starts) if starts else np.array([], dtype=np.int64),
        np.concatenate(ends) if ends else np.array([], dtype=np.int64),
    )
    if len(k):
        kd = _durations(k)
        parts.append({"part": "kernels", "total_ns": int(kd.sum()), "count": len(k)})
    bandwidth: list[dict[str, Any]] = []
    if len(mc):
        m = mc.assign(duration_ns=_durations(mc))
        # Classify the few distinct (operation, src, dst) combinations, then map back to rows.
        keys = m[["operation", "srcKindName", "dstKindName"]].astype(str)
        combos = keys.drop_duplicates()
        combos["memory"] = [
            _host_kind(o, s, t)
            for o, s, t in zip(combos["operation"], combos["srcKindName"], combos["dstKindName"],
                               strict=False)
        ]
        m["memory"] = keys.merge(combos, how="left", on=list(keys.columns))["memory"].to_numpy()
        for (op, mem), g in m.groupby(["operation", "memory"], sort=False):
            tot = int(g["duration_ns"].sum())
            nbytes = int(g["bytes"].sum())
            parts.append({"part": f"memcpy {op} ({mem})", "total_ns": tot, "count": len(g),
                          "bytes": nbytes})
            per = g["bytes"].to_numpy(dtype=float) / np.maximum(g["duration_ns"].to_numpy(float), 1)
            bandwidth.append({
                "direction": str(op), "memory": str(mem), "count": len(g), "bytes": nbytes,
                "total_ns": tot,
                "bytes_per_s": round(nbytes / tot * 1e9, 1) if tot else None,
                "gb_per_s": round(nbytes / tot, 3) if tot else None,
                "median_gb_per_s": round(float(np.median(per)), 3),
                "min_gb_per_s": round(float(per.min()), 3),
                "max_gb_per_s": round(float(per.max()), 3),
            })
    if len(ms):
        parts.append({"part": "memset", "total_ns": int(_durations(ms).sum()), "count": len(ms),
                      "bytes": int(ms["bytes"].fillna(0).sum())})
    parts.sort(key=lambda p: -p["total_ns"])
    for p in parts:
        p["pct_of_busy"] = _pct(p["total_ns"], busy)
        p["pct_of_wall"] = _pct(p["total_ns"], wall_ns)
    gpu = {
        "busy_ns": busy,
        "idle_ns": max(wall_ns - busy, 0),
        "busy_pct_of_wall": _pct(busy, wall_ns),
        "parts": parts,
    }
    bandwidth.sort(key=lambda b: (b["direction"], b["memory"]))
    return gpu, bandwidth


def _iterations(trace: Trace) -> dict[str, Any] | None:
    """One-time vs per-iteration costs, using the repeating NVTX range with the largest total."""
    nv = trace.table("nvtx")
    if not len(nv):
        return None
    r = nv[nv["eventType"].isin([59, 60]) & nv["end"].notna()].copy()
    if not len(r):
        return None
    r["range"] = r["domain"].fillna("").astype(str) + ":" + r["text"].fillna("").astype(str)
    r["duration_ns"] = r["end"].astype(np.int64) - r["start"].astype(np.int64)
    counts = r.groupby("range")["duration_ns"].agg(["count", "sum"])
    repeating = counts[counts["count"] >= 2].sort_values("sum", ascending=False)
    if not len(repeating):
        return None
    name = str(repeating.index[0])
    it = r[r["range"] == name].sort_values("start")
    durs = it["duration_ns"].to_numpy(dtype=np.int64)
    starts = it["start"].to_numpy(dtype=np.int64)
    ends = it["end"].to_numpy(dtype=np.int64)
    rest = durs[1:]

    def inside(df: pd.DataFrame) -> np.ndarray:
        if not len(df):
            return np.zeros(0, dtype=bool)
        s = df["start"].to_numpy(dtype=np.int64)
        idx = np.searchsorted(starts, s, side="right") - 1
        ok = idx >= 0
        res = np.zeros(len(s), dtype=bool)
        res[ok] = s[ok] < ends[idx[ok]]
        return res

    api = trace.table("api", _API_COLS)
    per_iter_api: list[dict[str, Any]] = []
    one_time_api: list[dict[str, Any]] = []
    if len(api):
        d = api.assign(duration_ns=_durations(api), inside=inside(api))
        d["category"] = d["baseName"].map({n: api_category(str(n)) for n in d["baseName"].unique()})
        for flag, out in ((True, per_iter_api), (False, one_time_api)):
            g = d[d["inside"] == flag].groupby("category")["duration_ns"].agg(["sum", "count"])
            for cat, row in g.sort_values("sum", ascending=False).iterrows():
                entry = {"category": str(cat), "total_ns": int(row["sum"]), "calls": int(row["count"])}
                if flag:
                    entry["per_iteration_ns"] = int(row["sum"]) // len(durs)
                out.append(entry)
    phases: list[dict[str, Any]] = []
    others = r[(r["range"] != name)]
    if len(others):
        o = others[inside(others)]
        for rng, g in o.groupby("range"):
            phases.append({
                "range": str(rng), "count": len(g), "total_ns": int(g["duration_ns"].sum()),
                "per_iteration_ns": int(g["duration_ns"].sum()) // len(durs),
                "first_ns": int(g.sort_values("start")["duration_ns"].iloc[0]),
                "median_ns": float(np.median(g["duration_ns"])),
            })
        phases.sort(key=lambda p: -p["total_ns"])
    return {
        "range": name,
        "count": len(durs),
        "total_ns": int(durs.sum()),
        "first_ns": int(durs[0]),
        "median_ns": float(np.median(durs)),
        "median_after_first_ns": float(np.median(rest)) if len(rest) else None,
        "first_iteration_extra_ns": int(durs[0] - np.median(rest)) if len(rest) else None,
        "api_per_iteration": per_iter_api,
        "api_one_time": one_time_api,
        "phases": phases,
    }


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e5 else f"{ns / 1e3:,.1f} µs"


def _findings(s: dict[str, Any]) -> list[str]:
    out: list[tuple[float, str]] = []
    wall = s["wall"]["span_ns"] or 1
    for c in s["host"]["categories"]:
        if c["category"] == "other" or not c["pct_of_wall"] or c["pct_of_wall"] < 5:
            continue
        top = ", ".join(f"{t['name']} ×{t['calls']}" for t in c["top_calls"][:3])
        out.append((c["total_ns"], (
            f"{c['label'].capitalize()} took {_ms(c['total_ns'])} of CUDA API time "
            f"({c['pct_of_wall']:.1f} % of the {_ms(wall)} capture): {top}."
        )))
    g = s["gpu"]
    for p in g["parts"]:
        if p["part"] == "kernels":
            out.append((p["total_ns"] * 0.5, (
                f"Kernels ran for {_ms(p['total_ns'])}, {p['pct_of_wall'] or 0:.1f} % of the capture; "
                f"the GPU was idle {_ms(g['idle_ns'])} ({100 - (g['busy_pct_of_wall'] or 0):.1f} %)."
            )))
    for b in s["bandwidth"]:
        if b["gb_per_s"] is not None and b["memory"] == "Pageable" and b["total_ns"] > 0.01 * wall:
            out.append((b["total_ns"], (
                f"{b['count']} {b['direction']} copies from pageable memory moved "
                f"{b['bytes'] / 1e6:,.1f} MB at {b['gb_per_s']:.1f} GB/s; pinned memory "
                "(cudaMallocHost) with cudaMemcpyAsync is usually several times faster."
            )))
    it = s.get("iterations")
    if it:
        alloc = next((a for a in it["api_per_iteration"] if a["category"] == "allocation"), None)
        if alloc and alloc["total_ns"] > 0.02 * it["total_ns"]:
            out.append((alloc["total_ns"] * 1.5, (
                f"Memory is allocated inside every {it['range']} iteration: "
                f"{_ms(alloc['per_iteration_ns'])} per iteration in {alloc['calls']} calls; allocate "
                "buffers once, outside the loop."
            )))
    if s["host"]["calls"] and not any(p["part"] == "kernels" for p in g["parts"]) and any(
        "kernels" in m for m in s["missing"]
    ):
        out.append((float("inf"), (
            f"This capture has {s['host']['calls']} CUDA API calls but no kernels: it is partial. "
            f"It was recorded by Nsight Systems {s['report']['product_version'] or '(unknown)'}; an "
            "nsys older than the CUDA driver records only part of the activity, so profile again "
            "with a current nsys."
        )))
    out.sort(key=lambda t: -t[0])
    return [text for _, text in out[:6]]


def summarize(trace: Trace) -> dict[str, Any]:
    """Compute the host-vs-GPU breakdown of a trace (JSON-ready, schema ``kernelscope.summary/1``).

    Args:
        trace: any loaded trace (nsys sqlite/.nsys-rep or Kineto).

    Returns:
        A dict with keys ``schema``, ``report``, ``missing``, ``wall``, ``host``, ``gpu``,
        ``bandwidth``, ``iterations`` (or None) and ``findings`` (plain sentences).

    """
    start, end = capture_window(trace)
    wall_ns = end - start
    gpus = trace.table("gpus")
    gpu_list = [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        for row in gpus[["id", "name", "smCount", "memoryBandwidth", "totalMemory",
                         "computeMajor", "computeMinor"]].to_dict("records")
    ] if len(gpus) else []
    gpu, bandwidth = _gpu_breakdown(trace, wall_ns)
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "report": {
            "path": str(trace.info.path),
            "kind": trace.info.kind,
            "product_version": trace.info.product_version,
            "schema_version": trace.info.schema_version,
            "gpus": gpu_list,
        },
        "missing": trace.missing_report(),
        "wall": {"start_ns": start, "end_ns": end, "span_ns": wall_ns},
        "host": _api_breakdown(trace.table("api", _API_COLS), wall_ns),
        "gpu": gpu,
        "bandwidth": bandwidth,
        "iterations": _iterations(trace),
    }
    result["findings"] = _findings(result)
    return result


def format_summary(s: dict[str, Any]) -> str:
    """Render a summary dict as readable terminal text."""
    lines = [
        f"Report   {s['report']['path']}  ({s['report']['kind']}, "
        f"{s['report']['product_version'] or 'unknown version'})",
    ]
    for g in s["report"]["gpus"]:
        lines.append(f"GPU      {g['name']} ({g['smCount']} SMs)")
    lines.append(f"Capture  {_ms(s['wall']['span_ns'])} wall span")
    h = s["host"]
    lines.append("")
    lines.append(f"CUDA API time {_ms(h['total_ns'])} in {h['calls']} calls "
                 f"({h['pct_of_wall'] or 0:.1f} % of wall)")
    for c in h["categories"]:
        lines.append(f"  {c['label']:<36} {_ms(c['total_ns']):>14} {c['pct_of_api'] or 0:6.1f} %"
                     f"  {c['calls']:>8} calls")
    g = s["gpu"]
    lines.append("")
    lines.append(f"GPU busy {_ms(g['busy_ns'])} ({g['busy_pct_of_wall'] or 0:.1f} % of wall), "
                 f"idle {_ms(g['idle_ns'])}")
    for p in g["parts"]:
        lines.append(f"  {p['part']:<36} {_ms(p['total_ns']):>14} {p['pct_of_wall'] or 0:6.1f} % of wall")
    if s["bandwidth"]:
        lines.append("")
        lines.append("Achieved copy bandwidth")
        for b in s["bandwidth"]:
            lines.append(f"  {b['direction']:<18} {b['memory']:<10} {b['gb_per_s'] or 0:8.2f} GB/s"
                         f"  ({b['count']} copies, {b['bytes'] / 1e6:,.1f} MB)")
    it = s.get("iterations")
    if it:
        lines.append("")
        lines.append(f"Iterations of {it['range']}: {it['count']}, first {_ms(it['first_ns'])}, "
                     f"median after first {_ms(it['median_after_first_ns'] or 0)}")
        for a in it["api_per_iteration"]:
            lines.append(f"  per iteration  {a['category']:<16} {_ms(a['per_iteration_ns']):>12}")
        for a in it["api_one_time"]:
            lines.append(f"  one-time       {a['category']:<16} {_ms(a['total_ns']):>12}")
    if s["missing"]:
        lines.append("")
        lines.append("Not in this capture: " + "; ".join(s["missing"]) + ".")
    if s["findings"]:
        lines.append("")
        lines.append("Findings")
        lines += [f"  - {f}" for f in s["findings"]]
    return "\n".join(lines)
