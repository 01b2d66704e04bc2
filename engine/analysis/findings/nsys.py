"""Findings from an Nsight Systems trace (also Kineto traces, where the tables exist).

Each rule reads the common tables (``api``, ``memcpy``, ``kernels``, ``nvtx`` ...) and the
``summary`` breakdown, and returns zero or more :class:`~engine.analysis.findings.model.Finding`.
Gains are computed from the report's own numbers; each states its formula.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.calls import CATEGORY_ORDER, api_calls
from engine.analysis.findings.copycalls import copy_calls
from engine.analysis.findings.gains import GPU, HOST, Context, gain_from, severity_of
from engine.analysis.findings.model import Evidence, Finding, Gain, fmt_bytes, fmt_rate, fmt_time, pct
from engine.analysis.ops import gpu_op_columns
from engine.analysis.steps import pandas_order
from engine.analysis.summary import sum_count
from engine.analysis.tables import table_records, union_sorted, unique_first
from engine.reports.nsys import schema
from engine.system.arrays import distinct

if TYPE_CHECKING:
    from engine.analysis.summary_model import Summary
    from engine.reports.base import Trace

_DIRECTIONS = ("Host-to-Device", "Device-to-Host")

__all__ = ["Context", "copy_calls", "nsys_findings", "pinned_ceiling", "pinned_rates"]


def _distinct(codes: np.ndarray) -> set[int]:
    """The distinct values of a column of codes."""
    return set(distinct(codes).tolist())


def _value_counts(codes: np.ndarray, labels: list[str]) -> list[tuple[str, int]]:
    """(label, count) of codes, most first, ties in order of first appearance (``value_counts``)."""
    uniq, first, counts = unique_first(codes)
    seen = np.argsort(first, kind="stable")
    uniq, counts = uniq[seen], counts[seen]
    return [(labels[int(uniq[i])], int(counts[i])) for i in pandas_order(counts, ascending=False).tolist()]


def _host_memory(row_op: str, src: str, dst: str) -> str:
    if row_op.startswith("Host-to"):
        return str(src)
    if row_op.endswith("to-Host"):
        return str(dst)
    return str(src)


def _calibrated_rate(direction: str, trace: Trace) -> tuple[float, str] | None:
    """Pinned copy rate from ``kernelscope calibrate`` for the GPU the trace ran on (by UUID)."""
    uuids = [str(u) for u in (g["uuid"] for g in table_records(trace, "gpus", ["uuid"]))
             if u is not None and u == u and str(u)]  # (u == u: not NaN, as dropna drops)
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
    c = copy_calls(trace)
    if not len(c):
        return out
    for direction in _DIRECTIONS:
        sub = c.of_kinds(lambda op, s, d, direction=direction:
                         op == direction and _host_memory(direction, s, d) == "Pinned")
        if sub.any():
            nbytes = int(c.nbytes[sub].sum())
            ns = int(c.dur[sub].sum())
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

    for name in (str(g["name"]) for g in table_records(trace, "gpus", ["name"])):
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
    calls = api_calls(t)
    n_calls = calls.n
    if not n_calls:
        return []
    launches = int((calls.category == CATEGORY_ORDER.index("launches")).sum())
    memcpy = t.row_count("memcpy") or 0
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
            f"The report has {n_calls} CUDA API calls ({launches} kernel launches) and {memcpy} copies "
            f"but no kernel records: {why}. {reason} Numbers from this report understate the GPU work, "
            "so no gains are computed from it."
        ),
        evidence=[
            Evidence("CUDA API calls recorded", n_calls, "calls", schema.RUNTIME),
            Evidence("kernel launch calls", launches, "calls", schema.RUNTIME),
            Evidence("kernels recorded", 0, "kernels", f"{schema.KERNEL} (absent)"),
            Evidence("copies recorded", memcpy, "copies", schema.MEMCPY),
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
    """cudaMalloc/cudaFree (and friends) inside every steady-state step."""
    st = ctx.steps
    if st is None or not ctx.n_steady:
        return []
    n = ctx.n_steady
    calls = api_calls(ctx.trace)
    rows = (calls.pid == calls.pid_code(st.pid)) & (calls.category == CATEGORY_ORDER.index("allocation"))
    if calls.valid is not None:
        rows &= calls.valid
    start = calls.start[rows]
    inside = ctx.host_steady_mask(start)
    d = (calls.end[rows] - start)[inside]
    n_inside = len(d)
    total = int(d.sum()) if n_inside else 0
    steady_total = ctx.step_ns * n
    if n_inside < n or total < 0.01 * steady_total:
        return []
    by_name = sum_count(calls.name[rows][inside], d, calls.names)
    gain = gain_from(ctx, total, 0, f"allocation API time inside the {n} steady steps = {fmt_time(total)} "
                     "(allocate once, outside the loop)", overlap=HOST)
    ev = [
        Evidence("steady steps", n, "", f"NVTX range {st.range_name}"),
        Evidence("allocation API time inside the steady steps", total, "ns", schema.RUNTIME),
        Evidence("allocation calls inside the steady steps", n_inside, "calls",
                 schema.RUNTIME),
        Evidence("allocation time per step", total // n, "ns", schema.RUNTIME),
        Evidence("share of the step median", pct(total / n, ctx.step_ns) or 0.0, "%", schema.NVTX),
    ]
    for name, total_ns, count in by_name:
        ev.append(Evidence(f"{name} inside the steady steps", total_ns, "ns",
                           f"cuda_api_sum ({count} calls)"))
    sev = severity_of(gain)
    return [Finding(
        id="nsys.per-iteration-alloc",
        title="Memory is allocated and freed in every iteration",
        # A per-step cost grows with the run: never below "warning".
        severity="warning" if sev == "info" else sev,
        source="nsys",
        summary=(
            f"{n_inside} allocation/free calls inside the {n} steady {st.range_name} steps took "
            f"{fmt_time(total)} ({fmt_time(total / n)} per step); cudaFree also synchronizes the device. "
            f"Allocating once outside the loop saves about {fmt_time(gain.per_step_ns or 0)} per step."
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
               "iteration) and the step median drops by about the predicted time.",
    )]


def rule_pageable_copies(ctx: Context) -> list[Finding]:
    """Copies from/to pageable host memory, compared with the measured pinned ceiling."""
    c = copy_calls(ctx.trace)
    out: list[Finding] = []
    if not len(c):
        return out
    for direction in _DIRECTIONS:
        # _host_memory(direction, src, dst) == "Pageable": the destination's kind for to-Host copies
        dst_side = direction.endswith("to-Host") and not direction.startswith("Host-to")
        rows = np.flatnonzero(c.of_kinds(lambda op, s, d, direction=direction, dst_side=dst_side:
                                         op == direction and (d if dst_side else s) == "Pageable"))
        if not len(rows):
            continue
        durs = c.dur[rows]
        nbytes = int(c.nbytes[rows].sum())
        ns = int(durs.sum())
        if ns <= 0:
            continue
        achieved = nbytes / ns * 1e9
        if ns < 0.005 * ctx.wall_ns and (not ctx.n_steady or ns < 0.005 * ctx.step_ns * ctx.n_steady):
            continue  # a few tiny copies (a loss value, a flag): nothing to gain
        ceiling = pinned_ceiling(direction, ctx.trace, ctx.reference)
        ev = [
            Evidence("copies", len(rows), "copies", "cuda_gpu_mem_size_sum"),
            Evidence("bytes", nbytes, "B", "cuda_gpu_mem_size_sum"),
            Evidence("GPU copy time (summed over the copies)", ns, "ns", "cuda_gpu_mem_time_sum"),
            Evidence("achieved rate", round(achieved / 1e9, 3), "GB/s", schema.MEMCPY),
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
            steady = ctx.host_steady_mask(c.issued()[rows])
            moved = c.nbytes[rows].astype(float)
            saved = np.maximum(durs - moved / rate * 1e9, 0)
            gain = gain_from(ctx, float(saved[steady].sum()), float(saved[~steady].sum()),
                             f"copy time (summed) − bytes ÷ pinned rate = {fmt_time(ns)} − "
                             f"{fmt_bytes(nbytes)} ÷ {fmt_rate(rate)} = {fmt_time(ns - at_pinned)}",
                             overlap=GPU)
        word = "from" if direction == "Host-to-Device" else "to"
        out.append(Finding(
            id="nsys.pageable-copies",
            title=f"{direction} copies use pageable host memory",
            severity=severity_of(gain),
            source="nsys",
            subject=direction,
            summary=(
                f"{len(rows)} {direction} copies {word} pageable memory moved {fmt_bytes(nbytes)} at "
                f"{fmt_rate(achieved)}" + (
                    f"; at the pinned rate of {fmt_rate(ceiling[0])} they would take "
                    f"{fmt_time(at_pinned or 0)} instead of {fmt_time(ns)} (summed over the copies)."
                    if ceiling else ".")
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
    c = copy_calls(ctx.trace)
    if not len(c):
        return []
    rows = np.flatnonzero(c.of_api(lambda n: _SYNC_COPY.match(n)))
    if not len(rows):
        return []
    call_ns = c.api_end[rows] - c.api_start[rows]
    durs = c.dur[rows]
    api_ns = int(call_ns.sum())
    gpu_ns = int(durs.sum())
    # (clocks of two sources: on a Kineto trace a call can end before its copy, which is no time)
    blocked_extra = max(api_ns - gpu_ns, 0)
    # Copy/compute overlap that async copies allow, bounded by kernel time.
    o = gpu_op_columns(ctx.trace)
    kernel_ns = int(o.dur[o.kind == 0].sum())
    names = ", ".join(f"{n} ×{m}" for n, m in _value_counts(c.api[rows], c.api_names))
    ev = [
        Evidence("synchronous copy calls", len(rows), "calls", f"{schema.RUNTIME} ({names})"),
        Evidence("host time blocked in these calls", api_ns, "ns", "cuda_api_sum"),
        Evidence("GPU time of these copies (summed)", gpu_ns, "ns", "cuda_gpu_mem_time_sum"),
        Evidence("host time beyond the copies", blocked_extra, "ns",
                 "API duration − GPU copy duration (0 when the copies took longer)"),
        Evidence("kernel time (summed over kernels; overlap bound)", kernel_ns, "ns", "cuda_gpu_kern_sum"),
    ]
    extra = np.maximum(call_ns - durs, 0)
    steady = ctx.host_steady_mask(c.issued()[rows])
    gain = gain_from(ctx, float(extra[steady].sum()), float(extra[~steady].sum()),
                 f"Σ max(call duration − copy duration, 0) = {fmt_time(float(extra.sum()))} (calls "
                 f"{fmt_time(api_ns)}, copies {fmt_time(gpu_ns)}, both summed) of host blocking that "
                 "async calls return from at once; "
                 f"overlapping the copies with kernels could hide up to a further "
                 f"{fmt_time(min(gpu_ns, kernel_ns))} (min of copy and kernel time)", overlap=HOST)
    return [Finding(
        id="nsys.sync-copies",
        title="Synchronous copies serialize the host and the GPU",
        severity=severity_of(gain),
        source="nsys",
        summary=(
            f"{len(rows)} synchronous cudaMemcpy calls blocked the CPU thread for {fmt_time(api_ns)}, "
            + (f"{fmt_time(blocked_extra)} more than the copies themselves took on the GPU "
               if blocked_extra > 0 else "no more than the copies themselves took on the GPU ")
            + f"({fmt_time(gpu_ns)}, summed); while blocked, the CPU queues no work, so copies and kernels "
            "run one after another."
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


def _overlap_times(n_gpus: int, per_gpu: tuple[int, int, int],
                   unions: Callable[[], tuple[int, int]]) -> list[Evidence]:
    """Copy time, kernel time and their overlap as evidence, labelled as unions or sums.

    On one GPU they are unions; on several, each GPU's union summed over the GPUs (a sum, which
    may exceed the capture), with the unions over the GPUs (``unions()``: copies', kernels').
    """
    m_ns, k_ns, overlap = per_gpu
    if n_gpus <= 1:
        return [Evidence("copy time (union)", m_ns, "ns", schema.MEMCPY),
                Evidence("kernel time (union)", k_ns, "ns", schema.KERNEL),
                Evidence("copy/kernel overlap", overlap, "ns", "interval intersection")]
    over = f"summed over {n_gpus} GPUs (each GPU: the time one ran)"
    m_union, k_union = unions()
    return [Evidence(f"copy time {over}", m_ns, "ns", schema.MEMCPY),
            Evidence(f"kernel time {over}", k_ns, "ns", schema.KERNEL),
            Evidence(f"copy/kernel overlap {over}", overlap, "ns", "interval intersection per GPU"),
            Evidence("copy time (union over the GPUs)", m_union, "ns", schema.MEMCPY),
            Evidence("kernel time (union over the GPUs)", k_union, "ns", schema.KERNEL)]


def rule_copy_compute_overlap(ctx: Context) -> list[Finding]:
    """Copies and kernels never run at the same time."""
    o = gpu_op_columns(ctx.trace)
    is_k, is_m = o.kind == 0, o.kind == 1
    if not is_k.any() or not is_m.any():
        return []

    # in start order once: each union below is a masked pass over the same two columns
    # (the starts and ends: 35M operations, 0.56 GB, built a chunk at a time into file mappings)
    s, e = o.sorted_start, o.sorted_end
    dev_s = o.sorted_col(o.dev)
    kind_s = o.sorted_col(o.kind)

    def per_device(sel_k: np.ndarray, sel_m: np.ndarray) -> tuple[int, int, int]:
        """(kernel union, copy union, overlap) summed over GPUs: each GPU overlaps only itself."""
        tk = tm = tov = 0
        for dev in _distinct(dev_s[sel_k]) & _distinct(dev_s[sel_m]):
            on = dev_s == dev
            a, b = union_sorted(s, e, sel_k & on), union_sorted(s, e, sel_m & on)
            u = union_sorted(s, e, (sel_k | sel_m) & on)
            tk, tm, tov = tk + a, tm + b, tov + (a + b - u)
        return tk, tm, tov

    is_k, is_m = kind_s == 0, kind_s == 1
    both = _distinct(dev_s[is_k]) & _distinct(dev_s[is_m])  # the GPUs that copy and compute
    k_ns, m_ns, overlap = per_device(is_k, is_m)
    bound = min(k_ns, m_ns)
    if bound <= 0 or overlap > 0.1 * bound or bound < 0.02 * ctx.wall_ns:
        return []
    no_stream = {o.streams.index("")} if "" in o.streams else set()  # NULL: not counted (nunique)
    stream_s = o.sorted_col(o.stream)
    streams, mstreams = (len(_distinct(stream_s[sel]) - no_stream) for sel in (is_k, is_m))
    total_gain = bound - overlap
    steady_gain = 0
    if ctx.n_steady:
        steady = ctx.steady_mask(s)
        sk = per_device(is_k & steady, is_m & steady)
        steady_gain = max(min(sk[0], sk[1]) - sk[2], 0)
    gain = gain_from(ctx, steady_gain, max(total_gain - steady_gain, 0),
                     f"min(copy time, kernel time) − overlap = min({fmt_time(m_ns)}, {fmt_time(k_ns)}) − "
                     f"{fmt_time(overlap)} = {fmt_time(total_gain)} (perfect pipelining; per GPU"
                     + (f", summed over {len(both)} GPUs)" if len(both) > 1 else ")"),
                     kind="upper bound", overlap=GPU)
    n_gpus = len(both)
    times = _overlap_times(n_gpus, (m_ns, k_ns, overlap),
                           lambda: (union_sorted(s, e, is_m), union_sorted(s, e, is_k)))
    gpus, summed = (f"The {n_gpus} GPUs", f" (each GPU's time, summed over the {n_gpus} GPUs)") \
        if n_gpus > 1 else ("The GPU", "")
    return [Finding(
        id="nsys.no-copy-compute-overlap",
        title="Copies and kernels never overlap",
        severity=severity_of(gain, critical=50.0),
        source="nsys",
        summary=(
            f"{gpus} copied for {fmt_time(m_ns)} and computed for {fmt_time(k_ns)}, overlapping for "
            f"only {fmt_time(overlap)}{summed}. Splitting the work into chunks on two or more streams lets "
            f"the next chunk's copy run under the current chunk's kernels: up to {fmt_time(bound - overlap)}."
        ),
        evidence=[
            *times,
            Evidence("streams with kernels", int(streams), "streams", schema.KERNEL),
            Evidence("streams with copies", int(mstreams), "streams", schema.MEMCPY),
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
    c = copy_calls(ctx.trace)
    o = gpu_op_columns(ctx.trace)
    is_k = o.kind == 0
    if not len(c) or not is_k.any():
        return []
    sync_calls = c.of_api(lambda n: _SYNC_COPY.match(n))
    if not sync_calls.any():
        return []
    default_ids = set(int(s) for s in set(c.stream[sync_calls].tolist()))
    other = {int(o.streams[s]) for s in _distinct(o.stream[is_k])} - default_ids
    if not other:
        return []
    ops_default = int(np.isin(c.stream, list(default_ids)).sum())
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
            Evidence("operations on the default stream", ops_default, "ops", schema.MEMCPY),
            Evidence("default stream id", ",".join(map(str, sorted(default_ids))), "",
                     "streamId of synchronous cudaMemcpy"),
            Evidence("other streams with kernels", ",".join(map(str, sorted(other))), "",
                     schema.KERNEL),
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


def nsys_findings(trace: Trace, *, reference: Trace | None = None,
                  summary: Summary | None = None) -> list[Finding]:
    """Run every registered trace rule (``findings.registry``) on ``trace``.

    Args:
        trace: an opened nsys (or Kineto) trace.
        reference: optional report of the same machine with pinned copies (the pinned ceiling).
        summary: the trace's summary when already computed (the window's, the CLI's): the rules
            use its steps and numbers instead of computing them again.

    """
    from dataclasses import replace

    from engine.analysis.findings.registry import rules
    from engine.analysis.summary import summarize

    ctx = Context.build(trace, summary if summary is not None else summarize(trace), reference)
    out: list[Finding] = []
    for rule in rules("trace"):
        out += rule.load()(ctx)
    if any(f.id == "capture.incomplete" for f in out):
        # Gains from a partial capture would mislead: keep them as evidence only.
        out = [f if f.id == "capture.incomplete" else
               replace(f, severity="info", gain=None if f.gain is None else
                       Gain(None, None, "not computed: the capture is incomplete"))
               for f in out]
    return out
