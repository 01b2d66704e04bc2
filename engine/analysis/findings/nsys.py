"""Findings from an Nsight Systems trace (also Kineto traces, where the tables exist).

Each rule reads the common tables (``api``, ``memcpy``, ``kernels``, ``nvtx`` ...) and the
``summary`` breakdown, and returns zero or more :class:`~engine.analysis.findings.model.Finding`.
Gains are computed from the report's own numbers; each states its formula.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.findings.model import Evidence, Finding, Gain, fmt_time, pct, severity_for
from engine.analysis.summary import api_category, interval_union_ns, summarize

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

_DIRECTIONS = ("Host-to-Device", "Device-to-Host")


@dataclass
class Context:
    """What the rules share: the trace, its summary and an optional reference for ceilings."""

    trace: Trace
    summary: dict[str, Any]
    reference: Trace | None = None

    @property
    def wall_ns(self) -> int:
        """Wall span of the capture in ns."""
        return int(self.summary["wall"]["span_ns"])


def _gain(ns: float, wall_ns: int, formula: str, kind: str = "estimate") -> Gain:
    ns = max(float(ns), 0.0)
    return Gain(seconds=round(ns / 1e9, 9), pct_of_wall=pct(ns, wall_ns), formula=formula, kind=kind)


def _durations(df: pd.DataFrame) -> np.ndarray:
    d: np.ndarray = df["end"].to_numpy(dtype=np.int64) - df["start"].to_numpy(dtype=np.int64)
    return d


def _iteration_ranges(trace: Trace, summary: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the repeating NVTX range the summary picked (empty when none)."""
    it = summary.get("iterations")
    empty = np.array([], dtype=np.int64)
    if not it:
        return empty, empty
    nv = trace.table("nvtx", ["start", "end", "eventType", "text", "domain"])
    r = nv[nv["eventType"].isin([59, 60]) & nv["end"].notna()]
    name = r["domain"].fillna("").astype(str) + ":" + r["text"].fillna("").astype(str)
    r = r[name == it["range"]].sort_values("start")
    return r["start"].to_numpy(dtype=np.int64), r["end"].to_numpy(dtype=np.int64)


def _inside(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Which times ``t`` fall inside one of the sorted, non-overlapping ranges."""
    if not len(starts) or not len(t):
        return np.zeros(len(t), dtype=bool)
    idx = np.searchsorted(starts, t, side="right") - 1
    ok = idx >= 0
    res = np.zeros(len(t), dtype=bool)
    res[ok] = t[ok] < ends[idx[ok]]
    return res


def copies_with_calls(trace: Trace) -> pd.DataFrame:
    """Every memcpy joined with the API call that issued it (correlationId + process).

    Columns: the memcpy's ``start``, ``end``, ``bytes``, ``operation``, ``srcKindName``,
    ``dstKindName``, ``streamId`` plus ``api`` (call name without ``_vNNNN``), ``api_start``,
    ``api_end``; calls that are not in the capture give NaN.
    """
    mc = trace.table("memcpy", ["start", "end", "bytes", "operation", "srcKindName", "dstKindName",
                                "streamId", "correlationId", "pid"])
    api = trace.table("api", ["start", "end", "correlationId", "pid", "baseName"])
    a = api.rename(columns={"start": "api_start", "end": "api_end", "baseName": "api"})
    if not len(mc):
        return mc.assign(api=[], api_start=[], api_end=[])
    return mc.merge(a, how="left", on=["correlationId", "pid"])


def _host_memory(row_op: str, src: str, dst: str) -> str:
    if row_op.startswith("Host-to"):
        return str(src)
    if row_op.endswith("to-Host"):
        return str(dst)
    return str(src)


def _calibrated_rate(direction: str, trace: Trace) -> tuple[float, str] | None:
    """Pinned copy rate from ``kernelscope calibrate`` for the GPU the trace ran on (by UUID)."""
    uuids = [str(u) for u in trace.table("gpus", ["uuid"])["uuid"].dropna() if str(u)]
    if len(uuids) != 1:
        return None  # no UUID (or several GPUs): never borrow another machine's calibration
    try:
        from engine.system.calibration import load_calibration

        cal: Any = load_calibration(uuids[0])
    except Exception:  # noqa: BLE001 - a missing or broken calibration means: use another source
        return None
    if cal is None:
        return None
    key = {"Host-to-Device": "h2d_pinned_bytes_per_s", "Device-to-Host": "d2h_pinned_bytes_per_s"}[direction]
    value = cal.get(key) if isinstance(cal, dict) else getattr(cal, key, None)
    if value:
        return float(value), f"the calibration of GPU {uuids[0]} (kernelscope calibrate)"
    return None


def pinned_rates(trace: Trace) -> dict[str, tuple[float, int, int]]:
    """Measured pinned copy rates in a trace: direction -> (bytes/s, bytes, ns)."""
    out: dict[str, tuple[float, int, int]] = {}
    c = copies_with_calls(trace)
    if not len(c):
        return out
    for direction in _DIRECTIONS:
        sub = c[c["operation"] == direction]
        mem = [_host_memory(direction, s, d) for s, d in zip(sub["srcKindName"], sub["dstKindName"],
                                                             strict=False)]
        sub = sub[np.array([m == "Pinned" for m in mem], dtype=bool)]
        if len(sub):
            nbytes = int(sub["bytes"].sum())
            ns = int(_durations(sub).sum())
            if ns > 0:
                out[direction] = (nbytes / ns * 1e9, nbytes, ns)
    return out


def pinned_ceiling(direction: str, trace: Trace, reference: Trace | None = None
                   ) -> tuple[float, str] | None:
    """The pinned-memory copy rate to compare pageable copies with, and where it came from.

    Order: pinned copies in ``reference`` (a run of the fixed program on the same machine), this
    GPU's calibration, pinned copies in the same report, the GPU's PCIe specification
    (``resources/gpu_specs.toml``, shared with the Bandwidth view).

    Returns:
        (bytes per second, a sentence naming the source), or None when nothing is known.

    """
    if reference is not None:
        rates = pinned_rates(reference)
        if direction in rates:
            return rates[direction][0], (
                f"pinned {direction} copies measured in {reference.info.path.name}")
    cal = _calibrated_rate(direction, trace)
    if cal:
        return cal
    rates = pinned_rates(trace)
    if direction in rates:
        return rates[direction][0], f"pinned {direction} copies measured in this report"
    from engine.analysis.bandwidth import gpu_spec  # resources/gpu_specs.toml, as the Bandwidth view

    for name in trace.table("gpus", ["name"])["name"].astype(str):
        spec = gpu_spec(name)
        if spec is not None and spec.pcie_bytes_per_s_per_direction:
            return spec.pcie_bytes_per_s_per_direction, (
                f"the PCIe Gen{spec.pcie_gen} x16 specification of the {name} ({spec.source}; no measured "
                "pinned rate: an upper bound)")
    return None


# -- rules ---------------------------------------------------------------------------------------
def rule_capture_incomplete(ctx: Context) -> list[Finding]:
    """A capture with API calls (launches) but no kernels: the recording is partial."""
    t = ctx.trace
    if t.has("kernels"):
        return []
    api = t.table("api", ["baseName"])
    if not len(api):
        return []
    launches = int(api["baseName"].map(lambda n: api_category(str(n)) == "launches").sum())
    memcpy = len(t.table("memcpy", ["start"]))
    version = t.info.product_version or "an unknown version"
    why = t.missing.get("kernels", "no CUDA kernels were recorded")
    reason = (
        f"It was recorded by Nsight Systems {version} (export schema {t.info.schema_version or '?'}); "
        "an nsys older than the CUDA driver it traces records only part of the activity."
    )
    return [Finding(
        id="capture.incomplete",
        title="The capture is incomplete",
        severity="critical",
        source="capture",
        summary=(
            f"The report has {len(api)} CUDA API calls ({launches} kernel launches) and {memcpy} copies "
            f"but no kernel records: {why}. {reason} Numbers from this report understate the GPU work, "
            "so no gains are computed from it."
        ),
        evidence=[
            Evidence("CUDA API calls recorded", len(api), "calls", "CUPTI_ACTIVITY_KIND_RUNTIME"),
            Evidence("kernel launch calls", launches, "calls", "CUPTI_ACTIVITY_KIND_RUNTIME"),
            Evidence("kernels recorded", 0, "kernels", "CUPTI_ACTIVITY_KIND_KERNEL (absent)"),
            Evidence("copies recorded", memcpy, "copies", "CUPTI_ACTIVITY_KIND_MEMCPY"),
            Evidence("recorded by Nsight Systems", version, "", "EXPORT_META_DATA / META_DATA_EXPORT"),
        ],
        fix="Profile again with an Nsight Systems release at least as new as the CUDA driver "
            "(nsys 2025.3 or newer for driver 580 / CUDA 13), with --trace=cuda,nvtx.",
        fix_cuda="nsys profile --trace=cuda,nvtx,osrt -o run ./app",
        fix_torch="nsys profile --trace=cuda,nvtx -o run python train.py",
        gain=None,
        verify="`kernelscope info REPORT` lists a kernels table with rows, and this finding is gone.",
    )]


def rule_per_iteration_alloc(ctx: Context) -> list[Finding]:
    """cudaMalloc/cudaFree (and friends) inside every iteration of the repeating NVTX range."""
    it = ctx.summary.get("iterations")
    if not it:
        return []
    alloc = next((a for a in it["api_per_iteration"] if a["category"] == "allocation"), None)
    n = int(it["count"])
    if not alloc or alloc["calls"] < n or alloc["total_ns"] < 0.01 * it["total_ns"]:
        return []
    starts, ends = _iteration_ranges(ctx.trace, ctx.summary)
    api = ctx.trace.table("api", ["start", "end", "baseName"])
    inside = api[_inside(starts, ends, api["start"].to_numpy(dtype=np.int64))]
    inside = inside[inside["baseName"].map(lambda s: api_category(str(s)) == "allocation")]
    by_name = inside.assign(d=_durations(inside)).groupby("baseName")["d"].agg(["sum", "count"])
    total = int(alloc["total_ns"])
    gain_ns = total * (n - 1) / n
    ev = [
        Evidence("iterations", n, "", f"NVTX range {it['range']}"),
        Evidence("allocation API time inside iterations", total, "ns", "CUPTI_ACTIVITY_KIND_RUNTIME"),
        Evidence("allocation calls inside iterations", int(alloc["calls"]), "calls",
                 "CUPTI_ACTIVITY_KIND_RUNTIME"),
        Evidence("allocation time per iteration", int(alloc["per_iteration_ns"]), "ns",
                 "CUPTI_ACTIVITY_KIND_RUNTIME"),
        Evidence("share of iteration time", pct(total, it["total_ns"]) or 0.0, "%", "NVTX_EVENTS"),
    ]
    for name, row in by_name.sort_values("sum", ascending=False).iterrows():
        ev.append(Evidence(f"{name} inside iterations", int(row["sum"]), "ns",
                           f"cuda_api_sum ({int(row['count'])} calls)"))
    gain = _gain(gain_ns, ctx.wall_ns,
                 f"allocation time in iterations × (N−1)/N = {fmt_time(total)} × {n - 1}/{n} = "
                 f"{fmt_time(gain_ns)} (one allocation remains, outside the loop)")
    return [Finding(
        id="nsys.per-iteration-alloc",
        title="Memory is allocated and freed in every iteration",
        # A per-iteration cost grows with the run: never below "warning".
        severity=severity_for(pct(gain_ns, it["total_ns"])).replace("info", "warning"),
        source="nsys",
        summary=(
            f"{alloc['calls']} allocation/free calls inside the {n} {it['range']} iterations took "
            f"{fmt_time(total)} ({fmt_time(alloc['per_iteration_ns'])} per iteration); cudaFree also "
            "synchronizes the device. Allocating once outside the loop saves about "
            f"{fmt_time(gain_ns)}."
        ),
        evidence=ev,
        fix="Allocate the buffers once before the loop and reuse them; free them after it "
            "(or use a stream-ordered pool: cudaMallocAsync / cudaMemPool).",
        fix_cuda=("float *dA;\ncudaMalloc(&dA, bytes);          // once, before the loop\n"
                  "for (int it = 0; it < iters; ++it) { /* use dA */ }\ncudaFree(dA);"),
        fix_torch=("buf = torch.empty(n, device='cuda')   # once\nfor step in range(iters):\n"
                   "    torch.mm(a, b, out=buf)          # reuse; the caching allocator avoids cudaMalloc"),
        gain=gain,
        verify="Re-run: cuda_api_sum shows cudaMalloc/cudaFree only a few times (not per "
               "iteration) and the iteration median drops by about the predicted time.",
    )]


def rule_pageable_copies(ctx: Context) -> list[Finding]:
    """Copies from/to pageable host memory, compared with the measured pinned ceiling."""
    c = copies_with_calls(ctx.trace)
    out: list[Finding] = []
    if not len(c):
        return out
    for direction in _DIRECTIONS:
        sub = c[c["operation"] == direction]
        mem = np.array([_host_memory(direction, s, d) == "Pageable"
                        for s, d in zip(sub["srcKindName"], sub["dstKindName"], strict=False)], dtype=bool)
        sub = sub[mem]
        if not len(sub):
            continue
        nbytes = int(sub["bytes"].sum())
        ns = int(_durations(sub).sum())
        if ns <= 0:
            continue
        achieved = nbytes / ns * 1e9
        ceiling = pinned_ceiling(direction, ctx.trace, ctx.reference)
        ev = [
            Evidence("copies", len(sub), "copies", "cuda_gpu_mem_size_sum"),
            Evidence("bytes", nbytes, "B", "cuda_gpu_mem_size_sum"),
            Evidence("GPU copy time", ns, "ns", "cuda_gpu_mem_time_sum"),
            Evidence("achieved rate", round(achieved / 1e9, 3), "GB/s", "CUPTI_ACTIVITY_KIND_MEMCPY"),
        ]
        if ceiling is None:
            gain = Gain(None, None, "no pinned rate is known for this machine: run "
                        "`kernelscope calibrate` or pass --pinned-from a report with pinned copies")
            at_pinned = None
        else:
            rate, where = ceiling
            at_pinned = nbytes / rate * 1e9
            ev.append(Evidence("pinned ceiling", round(rate / 1e9, 3), "GB/s", where))
            ev.append(Evidence("time at pinned ceiling", int(round(at_pinned)), "ns",
                               "bytes ÷ pinned ceiling"))
            gain = _gain(ns - at_pinned, ctx.wall_ns,
                         f"copy time − bytes ÷ pinned rate = {fmt_time(ns)} − {nbytes / 1e6:,.1f} MB ÷ "
                         f"{rate / 1e9:.2f} GB/s = {fmt_time(ns - at_pinned)}")
        word = "from" if direction == "Host-to-Device" else "to"
        out.append(Finding(
            id="nsys.pageable-copies",
            title=f"{direction} copies use pageable host memory",
            severity=severity_for(gain.pct_of_wall),
            source="nsys",
            subject=direction,
            summary=(
                f"{len(sub)} {direction} copies {word} pageable memory moved {nbytes / 1e6:,.1f} MB at "
                f"{achieved / 1e9:.2f} GB/s" + (
                    f"; at the pinned rate of {ceiling[0] / 1e9:.2f} GB/s they would take "
                    f"{fmt_time(at_pinned or 0)} instead of {fmt_time(ns)}." if ceiling else ".")
            ),
            evidence=ev,
            fix="Allocate the host buffers as pinned (page-locked) memory so the DMA engine reads them "
                "directly, without a staging copy by the driver.",
            fix_cuda=("float *hA;\ncudaMallocHost(&hA, bytes);   // instead of malloc\n"
                      "cudaMemcpyAsync(dA, hA, bytes, cudaMemcpyHostToDevice, stream);"),
            fix_torch=("x = x.pin_memory()                       # or DataLoader(pin_memory=True)\n"
                       "x_gpu = x.to('cuda', non_blocking=True)"),
            gain=gain,
            verify=f"Re-run: the summary's bandwidth table shows {direction} copies as Pinned at "
                   "close to the ceiling, and the copy time drops by about the predicted gain.",
        ))
    return out


_SYNC_COPY = re.compile(r"^(cudaMemcpy(?!.*Async)\w*)$")


def rule_sync_copies(ctx: Context) -> list[Finding]:
    """Synchronous cudaMemcpy calls: the host blocks for the copy and the work before it."""
    c = copies_with_calls(ctx.trace)
    if not len(c):
        return []
    c = c[c["api"].notna()]
    c = c[c["api"].map(lambda s: bool(_SYNC_COPY.match(str(s))))]
    if not len(c):
        return []
    api_ns = int((c["api_end"].astype(np.int64) - c["api_start"].astype(np.int64)).sum())
    gpu_ns = int(_durations(c).sum())
    blocked_extra = api_ns - gpu_ns
    # Copy/compute overlap that async copies allow, bounded by kernel time.
    k = ctx.trace.table("kernels", ["start", "end"])
    kernel_ns = int(_durations(k).sum()) if len(k) else 0
    names = ", ".join(f"{n} ×{m}" for n, m in c["api"].value_counts().items())
    gain_ns = max(blocked_extra, 0)
    ev = [
        Evidence("synchronous copy calls", len(c), "calls", f"CUPTI_ACTIVITY_KIND_RUNTIME ({names})"),
        Evidence("host time blocked in these calls", api_ns, "ns", "cuda_api_sum"),
        Evidence("GPU time of these copies", gpu_ns, "ns", "cuda_gpu_mem_time_sum"),
        Evidence("host time beyond the copies", blocked_extra, "ns", "API duration − GPU copy duration"),
        Evidence("kernel time (overlap bound)", kernel_ns, "ns", "cuda_gpu_kern_sum"),
    ]
    gain = _gain(gain_ns, ctx.wall_ns,
                 f"Σ(call duration − copy duration) = {fmt_time(api_ns)} − {fmt_time(gpu_ns)} = "
                 f"{fmt_time(gain_ns)} of host blocking that async calls return from at once; "
                 f"overlapping the copies with kernels could hide up to a further "
                 f"{fmt_time(min(gpu_ns, kernel_ns))} (min of copy and kernel time)")
    return [Finding(
        id="nsys.sync-copies",
        title="Synchronous copies serialize the host and the GPU",
        severity=severity_for(pct(api_ns, ctx.wall_ns)),
        source="nsys",
        summary=(
            f"{len(c)} synchronous cudaMemcpy calls blocked the CPU thread for {fmt_time(api_ns)}, "
            f"{fmt_time(blocked_extra)} more than the copies themselves took on the GPU "
            f"({fmt_time(gpu_ns)}); while blocked, the CPU queues no work, so copies and kernels run "
            "one after another."
        ),
        evidence=ev,
        fix="Use cudaMemcpyAsync on a non-default stream from pinned memory and synchronize once, "
            "when the results are needed.",
        fix_cuda=("cudaStream_t s; cudaStreamCreate(&s);\n"
                  "cudaMemcpyAsync(dA, hA, bytes, cudaMemcpyHostToDevice, s);\n"
                  "kernel<<<grid, block, 0, s>>>(...);\n"
                  "cudaMemcpyAsync(hC, dC, bytes, cudaMemcpyDeviceToHost, s);\n"
                  "cudaStreamSynchronize(s);                 // once"),
        fix_torch=("x_gpu = x_cpu_pinned.to('cuda', non_blocking=True)\n"
                   "y_cpu = y_gpu.to('cpu', non_blocking=True); torch.cuda.current_stream().synchronize()"),
        gain=gain,
        verify="Re-run: `kernelscope analyze -r cuda_memcpy_sync REPORT` finds nothing and the "
               "cudaMemcpy* time in cuda_api_sum is microseconds per call.",
    )]


def rule_copy_compute_overlap(ctx: Context) -> list[Finding]:
    """Copies and kernels never run at the same time."""
    k = ctx.trace.table("kernels", ["start", "end"])
    m = ctx.trace.table("memcpy", ["start", "end"])
    if not len(k) or not len(m):
        return []
    k_ns, ks, ke = interval_union_ns(k["start"].to_numpy(np.int64), k["end"].to_numpy(np.int64))
    m_ns, _, _ = interval_union_ns(m["start"].to_numpy(np.int64), m["end"].to_numpy(np.int64))
    both = np.concatenate([k["start"].to_numpy(np.int64), m["start"].to_numpy(np.int64)])
    both_e = np.concatenate([k["end"].to_numpy(np.int64), m["end"].to_numpy(np.int64)])
    union, _, _ = interval_union_ns(both, both_e)
    overlap = k_ns + m_ns - union
    bound = min(k_ns, m_ns)
    if bound <= 0 or overlap > 0.1 * bound or bound < 0.02 * ctx.wall_ns:
        return []
    streams = ctx.trace.table("kernels", ["streamId"])["streamId"].nunique()
    mstreams = ctx.trace.table("memcpy", ["streamId"])["streamId"].nunique()
    gain = _gain(bound - overlap, ctx.wall_ns,
                 f"min(copy time, kernel time) − overlap = min({fmt_time(m_ns)}, {fmt_time(k_ns)}) − "
                 f"{fmt_time(overlap)} = {fmt_time(bound - overlap)} (perfect pipelining)", "upper bound")
    return [Finding(
        id="nsys.no-copy-compute-overlap",
        title="Copies and kernels never overlap",
        severity=severity_for(gain.pct_of_wall, critical=50.0),
        source="nsys",
        summary=(
            f"The GPU copied for {fmt_time(m_ns)} and computed for {fmt_time(k_ns)}, overlapping for "
            f"only {fmt_time(overlap)}. Splitting the work into chunks on two or more streams lets the "
            f"next chunk's copy run under the current chunk's kernels: up to {fmt_time(bound - overlap)}."
        ),
        evidence=[
            Evidence("copy time (union)", m_ns, "ns", "CUPTI_ACTIVITY_KIND_MEMCPY"),
            Evidence("kernel time (union)", k_ns, "ns", "CUPTI_ACTIVITY_KIND_KERNEL"),
            Evidence("copy/kernel overlap", overlap, "ns", "interval intersection"),
            Evidence("streams with kernels", int(streams), "streams", "CUPTI_ACTIVITY_KIND_KERNEL"),
            Evidence("streams with copies", int(mstreams), "streams", "CUPTI_ACTIVITY_KIND_MEMCPY"),
        ],
        fix="Pipeline: split the data into chunks, issue copy(i+1) and kernel(i) on different "
            "streams (pinned memory required), and order them with events.",
        fix_cuda=("for (int c = 0; c < chunks; ++c) {\n  cudaStream_t s = st[c % 2];\n"
                  "  cudaMemcpyAsync(d + c*n, h + c*n, n*sizeof(float), cudaMemcpyHostToDevice, s);\n"
                  "  kernel<<<g, b, 0, s>>>(d + c*n, n);\n}"),
        fix_torch=("copy_stream = torch.cuda.Stream()\nwith torch.cuda.stream(copy_stream):\n"
                   "    nxt = batch_pinned.to('cuda', non_blocking=True)\n"
                   "torch.cuda.current_stream().wait_stream(copy_stream)"),
        gain=gain,
        verify="Re-run: in the timeline (or `kernelscope export --format perfetto`) copies sit under "
               "kernels; copy/kernel overlap in this finding's evidence grows.",
    )]


def rule_default_stream(ctx: Context) -> list[Finding]:
    """Work on the legacy default stream next to other streams: implicit serialization."""
    c = copies_with_calls(ctx.trace)
    k = ctx.trace.table("kernels", ["streamId"])
    if not len(c) or not len(k):
        return []
    sync_calls = c[c["api"].notna() & c["api"].map(lambda s: bool(_SYNC_COPY.match(str(s))))]
    if not len(sync_calls):
        return []
    default_ids = set(int(s) for s in sync_calls["streamId"].unique())
    other = set(int(s) for s in k["streamId"].unique()) - default_ids
    if not other:
        return []
    ops_default = int((c["streamId"].isin(default_ids)).sum())
    return [Finding(
        id="nsys.default-stream",
        title="The legacy default stream serializes the other streams",
        severity="warning",
        source="nsys",
        summary=(
            f"{ops_default} copies ran on the legacy default stream (stream "
            f"{', '.join(map(str, sorted(default_ids)))}) while kernels ran on stream(s) "
            f"{', '.join(map(str, sorted(other)))}; every default-stream operation waits for all "
            "blocking streams and blocks them, so nothing can overlap."
        ),
        evidence=[
            Evidence("operations on the default stream", ops_default, "ops", "CUPTI_ACTIVITY_KIND_MEMCPY"),
            Evidence("default stream id", ",".join(map(str, sorted(default_ids))), "",
                     "streamId of synchronous cudaMemcpy"),
            Evidence("other streams with kernels", ",".join(map(str, sorted(other))), "",
                     "CUPTI_ACTIVITY_KIND_KERNEL"),
        ],
        fix="Issue every copy and kernel on explicit streams (or compile with "
            "--default-stream per-thread; create streams with cudaStreamNonBlocking).",
        fix_cuda=("cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);\n"
                  "cudaMemcpyAsync(dA, hA, bytes, cudaMemcpyHostToDevice, s);   // not cudaMemcpy"),
        fix_torch="with torch.cuda.stream(torch.cuda.Stream()):\n    y = model(x)",
        gain=Gain(None, None, "not separately additive: it is what blocks the overlap counted in "
                              "nsys.no-copy-compute-overlap"),
        verify="Re-run: no memcpy or kernel rows on the default stream (cuda_gpu_trace Strm column).",
    )]


def rule_launch_bound(ctx: Context) -> list[Finding]:
    """Many kernels shorter than the CPU time it takes to launch them."""
    k = ctx.trace.table("kernels", ["start", "end", "correlationId", "pid"])
    api = ctx.trace.table("api", ["start", "end", "correlationId", "pid", "baseName"])
    if len(k) < 50 or not len(api):
        return []
    launches = api[api["baseName"].map(lambda s: api_category(str(s)) == "launches")]
    j = k.merge(launches.rename(columns={"start": "a0", "end": "a1"}), on=["correlationId", "pid"])
    if not len(j):
        return []
    kd = _durations(j)
    ld = j["a1"].to_numpy(np.int64) - j["a0"].to_numpy(np.int64)
    short = kd < ld
    if short.mean() < 0.5:
        return []
    excess = int((ld[short] - kd[short]).sum())
    return [Finding(
        id="nsys.launch-bound",
        title="Kernels are shorter than their launch overhead",
        severity=severity_for(pct(excess, ctx.wall_ns)),
        source="nsys",
        summary=(
            f"{int(short.sum())} of {len(j)} kernels ran for less time than their launch call took "
            f"(median kernel {fmt_time(float(np.median(kd)))}, median launch "
            f"{fmt_time(float(np.median(ld)))}): the CPU cannot keep the GPU busy."
        ),
        evidence=[
            Evidence("kernels", len(j), "kernels", "CUPTI_ACTIVITY_KIND_KERNEL"),
            Evidence("kernels shorter than their launch", int(short.sum()), "kernels",
                     "kernel duration < launch API duration"),
            Evidence("median kernel duration", float(np.median(kd)), "ns", "cuda_gpu_kern_sum"),
            Evidence("median launch call duration", float(np.median(ld)), "ns", "cuda_api_sum"),
        ],
        fix="Capture the loop once as a CUDA Graph and replay it, or fuse the small kernels.",
        fix_cuda=("cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);\n"
                  "for (...) small<<<g, b, 0, s>>>(...);\ncudaStreamEndCapture(s, &graph);\n"
                  "cudaGraphInstantiate(&exec, graph, 0);\ncudaGraphLaunch(exec, s);"),
        fix_torch=("g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    out = step(static_in)\n"
                   "g.replay()        # or torch.compile(model, mode='reduce-overhead')"),
        gain=_gain(excess, ctx.wall_ns,
                   f"Σ(launch call − kernel duration) over kernels shorter than their launch = "
                   f"{fmt_time(excess)}", "upper bound"),
        verify="Re-run: cudaGraphLaunch replaces most cudaLaunchKernel calls, and the GPU idle "
               "time between kernels shrinks.",
    )]


def rule_gpu_idle(ctx: Context) -> list[Finding]:
    """GPU idle inside the iterations (or inside the GPU's active span when there are none)."""
    t = ctx.trace
    parts = [t.table(n, ["start", "end"]) for n in ("kernels", "memcpy", "memset")]
    parts = [p for p in parts if len(p)]
    if not parts:
        return []
    s = np.concatenate([p["start"].to_numpy(np.int64) for p in parts])
    e = np.concatenate([p["end"].to_numpy(np.int64) for p in parts])
    starts, ends = _iteration_ranges(t, ctx.summary)
    if len(starts):
        window_ns = int((ends - starts).sum())
        where = f"the {len(starts)} iterations of {ctx.summary['iterations']['range']}"
        busy = 0
        for a, b in zip(starts, ends, strict=False):
            cs = np.clip(s, a, b)
            ce = np.clip(e, a, b)
            keep = ce > cs
            busy += interval_union_ns(cs[keep], ce[keep])[0]
    else:
        a, b = int(s.min()), int(e.max())
        window_ns = b - a
        where = "the span from the first to the last GPU operation"
        busy = interval_union_ns(s, e)[0]
    idle = window_ns - busy
    if window_ns <= 0 or idle < 0.2 * window_ns or idle < 1_000_000:
        return []
    return [Finding(
        id="nsys.gpu-idle",
        title="The GPU sits idle between operations",
        severity=severity_for(pct(idle, window_ns)),
        source="nsys",
        summary=(
            f"The GPU was idle {fmt_time(idle)} of {fmt_time(window_ns)} ({pct(idle, window_ns)} %) "
            f"within {where}: the CPU did not queue work fast enough (allocation, synchronous calls, "
            "host code between launches)."
        ),
        evidence=[
            Evidence("window", window_ns, "ns", "NVTX_EVENTS" if len(starts) else "GPU activity span"),
            Evidence("GPU busy (union of kernels, copies, memsets)", busy, "ns", "CUPTI_ACTIVITY_KIND_*"),
            Evidence("GPU idle", idle, "ns", "window − busy"),
        ],
        fix="Remove host work from between GPU operations (the other findings name it), queue work "
            "asynchronously, and synchronize only when results are needed.",
        fix_cuda="// queue everything on a stream, synchronize once at the end\ncudaStreamSynchronize(s);",
        fix_torch="# avoid .item(), .cpu(), print(tensor) inside the loop: each one synchronizes",
        gain=_gain(idle, ctx.wall_ns, f"window − GPU busy = {fmt_time(window_ns)} − {fmt_time(busy)} = "
                   f"{fmt_time(idle)}", "upper bound"),
        verify="Re-run: GPU busy share of the iterations rises (`kernelscope summary`).",
    )]


def rule_setup_dominates(ctx: Context) -> list[Finding]:
    """One-time context/module setup (and one-time allocation) dominating a short run."""
    it = ctx.summary.get("iterations")
    if it:
        one = [a for a in it["api_one_time"] if a["category"] in ("setup", "allocation")]
    else:
        one = [c for c in ctx.summary["host"]["categories"] if c["category"] == "setup"]
    total = sum(int(a["total_ns"]) for a in one)
    if not ctx.wall_ns or total < 0.3 * ctx.wall_ns:
        return []
    cats = ", ".join(f"{a['category']} {fmt_time(a['total_ns'])}" for a in one)
    return [Finding(
        id="nsys.setup-dominates",
        title="One-time setup dominates this short run",
        severity="info",
        source="nsys",
        summary=(
            f"One-time CUDA work ({cats}) took {fmt_time(total)}, {pct(total, ctx.wall_ns)} % of the "
            f"{fmt_time(ctx.wall_ns)} capture. It is paid once per process: measure steady-state "
            "iterations (or run longer) before optimizing it."
        ),
        evidence=[Evidence(f"one-time {a['category']} API time", int(a["total_ns"]), "ns",
                           "CUPTI_ACTIVITY_KIND_RUNTIME outside the iteration ranges" if it
                           else "cuda_api_sum")
                  for a in one] + [Evidence("capture wall span", ctx.wall_ns, "ns", "all tables")],
        fix="Keep the process alive across runs (a server or a longer benchmark), load modules lazily "
            "(CUDA_MODULE_LOADING=LAZY, default since CUDA 12.2), and warm up before timing.",
        fix_cuda="cudaFree(0);   // create the context before the timed region",
        fix_torch="torch.cuda.init(); model(x)  # warm-up step before timing",
        gain=_gain(total, ctx.wall_ns, f"one-time API time = {fmt_time(total)} (per process start, "
                   "not per iteration)", "upper bound"),
        verify="Time only the iteration range; its median should not include this cost.",
    )]


def rule_expert(ctx: Context) -> list[Finding]:
    """The nsys analyze rules not already covered by the rules above."""
    from engine.analysis.nsys import analyze as expert

    out: list[Finding] = []
    # cuda_memcpy_async and cuda_memcpy_sync are covered by nsys.pageable-copies / nsys.sync-copies.
    for name in ("cuda_memset_sync", "cuda_api_sync", "gpu_gaps", "gpu_time_util"):
        res = expert.run_rule(ctx.trace, name, rows=-1)
        if res.table.empty:
            continue
        dur = int(res.table["Duration (ns)"].sum()) if "Duration (ns)" in res.table else 0
        out.append(Finding(
            id=f"nsys.expert.{name}",
            title=expert.RULES[name],
            severity="info",
            source="nsys",
            summary=res.explanation,
            evidence=[Evidence("rows", len(res.table), "rows", f"nsys analyze -r {name}"),
                      Evidence("total duration of the rows", dur, "ns", f"nsys analyze -r {name}")],
            fix=res.fix,
            gain=_gain(dur, ctx.wall_ns, f"Σ Duration of the {name} rows = {fmt_time(dur)}",
                       "upper bound") if name != "gpu_time_util" else None,
            verify=f"Re-run: `kernelscope analyze -r {name} REPORT` reports fewer rows.",
        ))
    return out


RULES: list[Callable[[Context], list[Finding]]] = [
    rule_capture_incomplete, rule_per_iteration_alloc, rule_pageable_copies, rule_sync_copies,
    rule_copy_compute_overlap, rule_default_stream, rule_launch_bound, rule_gpu_idle,
    rule_setup_dominates, rule_expert,
]


def nsys_findings(trace: Trace, *, reference: Trace | None = None,
                  summary: dict[str, Any] | None = None) -> list[Finding]:
    """Run every nsys rule on ``trace``.

    Args:
        trace: an opened nsys (or Kineto) trace.
        reference: optional report of the same machine with pinned copies (the pinned ceiling).
        summary: the trace's summary when already computed.

    """
    ctx = Context(trace, summary if summary is not None else summarize(trace), reference)
    out: list[Finding] = []
    for rule in RULES:
        out += rule(ctx)
    if any(f.id == "capture.incomplete" for f in out):
        # Gains from a partial capture would mislead: keep them as evidence only.
        for f in out:
            if f.gain is not None and f.id != "capture.incomplete":
                f.gain = Gain(None, None, "not computed: the capture is incomplete")
    return out
