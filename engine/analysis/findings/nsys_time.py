"""nsys rules about time the GPU waits: launch overhead, idle gaps, one-time setup, nsys analyze.

Gains are measured in the steady-state steps when the trace has them (see ``gains.gain_from``),
capped by the GPU idle time they could fill: host-side overhead saves nothing while the GPU is
busy anyway.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.calls import CATEGORY_ORDER, ApiCalls, api_calls, is_blocking_sync
from engine.analysis.file_backed import gathered
from engine.analysis.findings.gains import HOST, Context, gain_from, severity_of
from engine.analysis.findings.model import Evidence, Finding, Gain, fmt_time, pct
from engine.analysis.ops import GpuOps, gpu_op_columns
from engine.analysis.summary import busy_between, busy_cum, interval_union_ns
from engine.analysis.tables import match_first_counted
from engine.reports.nsys import schema

#: Where the GPU busy time comes from: the export's kernel, copy and memset tables.
_GPU_TABLES = schema.KERNEL.removesuffix("KERNEL") + "*"

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy.typing as npt

    from engine.analysis.nsys.analyze.rule_rows import RuleRows
    from engine.reports.base import Trace


def _blocks(ctx: Context) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The union of every kernel, copy and memset (of the steps' process when there are steps)."""
    return gpu_op_columns(ctx.trace).blocks(None if ctx.steps is None else ctx.steps.pid)


def _idle_in(ctx: Context, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> tuple[int, int]:
    """(window length, GPU idle inside it) summed over the windows [a, b)."""
    bs, be = _blocks(ctx)
    cum = busy_cum(ctx.trace, None if ctx.steps is None else ctx.steps.pid, bs, be)
    busy = int(busy_between(bs, be, a, b, cum).sum()) if len(a) else 0
    window = int((b - a).sum()) if len(a) else 0
    return window, max(window - busy, 0)


def _steady_idle(ctx: Context) -> tuple[int, int]:
    """:func:`_idle_in` of the steady steps (``ctx.steady_busy``: computed once for every rule)."""
    assert ctx.steps is not None
    a, b = ctx.steps.window(steady_only=True)
    window = int((b - a).sum()) if len(a) else 0
    return window, max(window - int(ctx.steady_busy().sum()), 0)


def _graph_launches(names: tuple[str, ...]) -> npt.NDArray[np.bool_]:
    """Which call names are graph launches (by name code; one False after them for "no name": -1)."""
    return np.array(["GraphLaunch" in n for n in names] + [False], dtype=bool)


def _kernel_launches(ops: GpuOps, calls: ApiCalls
                     ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """(kernel durations, launch call durations, launch starts) of the kernels whose launch call is known.

    The rows of an inner merge of the kernels with the launch calls on (process, correlation id),
    in kernel order; None when no kernel has its call.
    """
    launch_cat = CATEGORY_ORDER.index("launches")
    # a graph replay's kernels share one cudaGraphLaunch: no launch overhead of their own
    graph = _graph_launches(calls.names)
    if ops.calls_unique:
        # each (process, correlation id) has one call: the operations' own join, kept for launches
        is_k = ops.kind == 0
        row = ops.call_row[is_k]
        got = row >= 0
        rows_got = row[got]
        got[got] = (calls.category[rows_got] == launch_cat) & ~graph[np.where(calls.name[rows_got] >= 0,
                                                                               calls.name[rows_got], -1)]
        if not got.any():
            return None
        i = row[got]
        # (10M launches gathered from two 69M-row mapped columns: their pages handed back as it goes)
        a0 = gathered(calls.start, i, hand_back_each=True)
        a1 = gathered(calls.end, i, hand_back_each=True)
        return ops.end[is_k][got] - ops.start[is_k][got], a1 - a0, a0
    rows = (calls.category == launch_cat) & ~graph[np.where(calls.name >= 0, calls.name, -1)]
    lp, lc = calls.pid[rows].astype(np.int64), calls.corr[rows]
    l0, l1 = calls.start[rows], calls.end[rows]
    is_k = ops.kind == 0
    lut = np.array([calls.pid_code(p) for p in ops.pids] + [-2], dtype=np.int64)
    lut[lut == -1] = -2
    kp, kc = lut[ops.pid[is_k]], ops.corr[is_k]
    k0, k1 = ops.start[is_k], ops.end[is_k]
    idx, distinct = match_first_counted((kp, kc), (lp, lc))
    if len(lp) and 0 <= distinct < len(lp):
        # a (process, correlation id) with several launch calls: every pair, as the merge gives
        import pandas as pd

        j = pd.DataFrame({"p": kp, "c": kc, "s": k0, "e": k1}).merge(
            pd.DataFrame({"p": lp, "c": lc, "a0": l0, "a1": l1}), on=["p", "c"])
        if not len(j):
            return None
        return ((j["e"] - j["s"]).to_numpy(np.int64), (j["a1"] - j["a0"]).to_numpy(np.int64),
                j["a0"].to_numpy(np.int64))
    got = idx >= 0
    if not got.any():
        return None
    i = idx[got]
    kd = k1[got] - k0[got]
    return kd, l1[i] - l0[i], l0[i]


#: a host pause between two CUDA calls this long is host work (data loading, I/O, a sleep, logging);
#: shorter ones are Python and framework overhead between launches, which a CUDA graph removes too
#: (the launch-bound loop of the zoo: all its pauses are 50 µs - 1 ms, and the graph removed them)
HOST_GAP_NS = 1_000_000


def idle_causes(ctx: Context) -> dict[str, int] | None:
    """The steady steps' GPU idle time split by what the host did meanwhile (ns, summed over the steps).

    - ``sync``: after each blocking synchronization (stream/device/event sync, a synchronous copy)
      the GPU has drained its queue and idles until the next operation starts;
    - ``host``: otherwise, while the process's threads pause ≥ HOST_GAP_NS between two CUDA calls
      (data loading, Python, a sleep);
    - ``launch``: the rest, while the host is launching (inside launch calls or between calls close
      together): what capturing the step in a CUDA graph or fusing kernels removes.
    None without steady steps or API calls.
    """
    if ctx.steps is None or not ctx.n_steady:
        return None
    if "idle_causes" not in ctx._cache:  # asked by three rules: computed once per context
        ctx._cache["idle_causes"] = _idle_causes(ctx)
    out: dict[str, int] | None = ctx._cache["idle_causes"]
    return out


def _idle_causes(ctx: Context) -> dict[str, int] | None:
    assert ctx.steps is not None
    calls = api_calls(ctx.trace)
    code = calls.pid_code(ctx.steps.pid) if calls.n else -1
    if code < 0:
        return None
    a, b = ctx.steps.window(steady_only=True)
    window, idle = _steady_idle(ctx)
    if not idle:
        return {"idle": 0, "sync": 0, "host": 0, "launch": 0, "other": 0, "window": window}
    names = calls.names
    blocking = np.array([is_blocking_sync(n) for n in names] + [False], dtype=bool)
    graph = _graph_launches(names)
    launches = CATEGORY_ORDER.index("launches")
    lo, hi = float(a.min()), float(b.max())
    bs, be = _blocks(ctx)
    cum = busy_cum(ctx.trace, ctx.steps.pid, bs, be)

    def idle_of(x: npt.NDArray[np.int64], y: npt.NDArray[np.int64]) -> int:
        x = np.clip(x, lo, hi).astype(np.int64)
        y = np.clip(y, lo, hi).astype(np.int64)
        ok = y > x
        if not ok.any():
            return 0
        x, y = x[ok], y[ok]
        return int((y - x).sum() - busy_between(bs, be, x, y, cum).sum())

    # every thread of the process (PyTorch launches the backward pass from its autograd thread), the
    # calls from a little before the first steady step to the last one's end, in start order, a
    # chunk at a time; each cause is a sum over calls (or pairs of consecutive calls), so the chunks'
    # sums add up: the last call of a chunk waits for the next chunk's first start
    sync_idle = host_idle = launch_idle = 0
    prev: tuple[npt.NDArray[Any], ...] | None = None  # (start, end, running end, sync, launch) of it
    for cs, ce, cat, name in _calls_in_order(calls, code, int(a.min()) - int(1e9), int(b.max())):
        nm = np.where(name >= 0, name, len(names))
        is_sync, is_launch = blocking[nm], (cat == launches) & ~graph[nm]
        run_end = np.maximum.accumulate(ce)
        # after a sync: from its end to the next GPU start
        se = ce[is_sync]
        nxt = np.searchsorted(bs, se, side="left")
        sync_idle += idle_of(se, np.where(nxt < len(bs), bs[np.minimum(nxt, len(bs) - 1)], se))
        if prev is not None:  # the previous chunk's last call goes first
            np.maximum(run_end, prev[2][0], out=run_end)
            cs, ce, run_end, is_sync, is_launch = (np.concatenate([p, c]) for p, c in zip(
                prev, (cs, ce, run_end, is_sync, is_launch), strict=True))
        # host pauses: gaps in the union of every thread's calls (not right after a sync: counted there)
        gap_s, gap_e = run_end[:-1], cs[1:]
        long = (gap_e - gap_s >= HOST_GAP_NS) & ~is_sync[:-1]
        host_idle += idle_of(gap_s[long], gap_e[long])
        # while the host launches kernels one at a time: from each launch call (not a graph's) to the
        # next call, when that follows within HOST_GAP_NS (a graph's own gaps between its nodes are
        # not the host's)
        close = is_launch[:-1] & (cs[1:] - run_end[:-1] <= HOST_GAP_NS)
        launch_idle += idle_of(cs[:-1][close], np.maximum(ce[:-1][close], cs[1:][close]))
        prev = (cs[-1:], ce[-1:], run_end[-1:], is_sync[-1:], is_launch[-1:])
    if prev is None:
        return None
    cs, ce, run_end, _sync, is_launch = prev  # the last call: nothing follows it (its own end does)
    close = is_launch & (ce - run_end <= HOST_GAP_NS)
    launch_idle += idle_of(cs[close], ce[close])
    sync_idle, host_idle = min(sync_idle, idle), min(host_idle, max(idle - sync_idle, 0))
    launch_idle = min(launch_idle, max(idle - sync_idle - host_idle, 0))
    return {"idle": idle, "sync": sync_idle, "host": host_idle, "launch": launch_idle,
            "other": max(idle - sync_idle - host_idle - launch_idle, 0), "window": window}


#: API table rows read per chunk by :func:`_calls_in_order` (a 69M-call table: no full-length copies)
_CALL_ROWS = 1 << 22


def _calls_in_order(calls: ApiCalls, code: int, t0: int, t1: int) -> Iterator[tuple[npt.NDArray[Any], ...]]:
    """(start, end, category, name) of process ``code``'s calls starting in [t0, t1), in start order.

    Where the table holds them in start order (a profiler writes them so), the table is read a chunk
    of rows at a time; else they are sorted once (stable, as before).
    """
    st = calls.start

    def rows(lo: int, hi: int) -> npt.NDArray[np.int64]:
        s = st[lo:hi]
        return np.flatnonzero((calls.pid[lo:hi] == code) & (s >= t0) & (s < t1)) + lo

    last: int | None = None
    in_order = True
    for lo in range(0, len(st), _CALL_ROWS):
        ss = st[rows(lo, lo + _CALL_ROWS)]
        if len(ss):
            if (last is not None and int(ss[0]) < last) or not bool((ss[1:] >= ss[:-1]).all()):
                in_order = False
                break
            last = int(ss[-1])
    if in_order:
        for lo in range(0, len(st), _CALL_ROWS):
            idx = rows(lo, lo + _CALL_ROWS)
            if len(idx):
                yield st[idx], calls.end[idx], calls.category[idx], calls.name[idx]
        return
    sel = np.concatenate([rows(lo, lo + _CALL_ROWS) for lo in range(0, len(st), _CALL_ROWS)])
    order = sel[np.argsort(st[sel], kind="stable")]
    for lo in range(0, len(order), _CALL_ROWS):
        idx = order[lo:lo + _CALL_ROWS]
        yield st[idx], calls.end[idx], calls.category[idx], calls.name[idx]


def rule_launch_bound(ctx: Context) -> list[Finding]:
    """Many kernels shorter than their launch call, while the GPU has idle time to fill."""
    calls = api_calls(ctx.trace)
    ops = gpu_op_columns(ctx.trace)
    if ops.counts["kernels"] < 50 or not calls.n:
        return []
    joined = _kernel_launches(ops, calls)
    if joined is None:
        return []
    kd, ld, a0 = joined
    n_joined = len(kd)
    short = kd < ld
    if short.mean() < 0.5:
        return []
    excess = np.where(short, ld - kd, 0)
    steady = ctx.host_steady_mask(a0)
    causes = idle_causes(ctx)
    if ctx.steps is not None and ctx.n_steady:
        window, idle = _steady_idle(ctx)
        # what a CUDA graph removes: the GPU idle while the host launches (its launch calls and the
        # Python between them), at least the launch calls' excess over their kernels
        launching = causes["launch"] if causes else 0
        steady_ns = min(max(int(excess[steady].sum()), launching), idle)
        other_ns = 0
        where = f"the {ctx.n_steady} steady steps of {ctx.steps.range_name}"
    else:
        bs, be = _blocks(ctx)  # the first start and the last end of the GPU work
        a, b = bs[:1], be[-1:]
        window, idle = _idle_in(ctx, a, b)
        steady_ns, other_ns = 0, min(int(excess.sum()), idle)
        where = "the span from the first to the last GPU operation"
    if not window or idle < 0.1 * window:
        return []  # the GPU is busy: launch overhead is hidden behind the kernels
    if ctx.steps is not None and ctx.n_steady and steady_ns < 0.01 * window:
        return []  # the steps launch nothing one kernel at a time (a graph replay): nothing to remove
    raw = float(excess[steady].sum() if ctx.n_steady else excess.sum())
    if causes and causes["launch"] > raw:
        formula = (f"GPU idle while the host launches (inside launch calls or < {HOST_GAP_NS / 1e6:g} ms "
                   f"between CUDA calls, not after a synchronization) in {where} = "
                   f"{fmt_time(causes['launch'])} "
                   f"(Σ(launch call − kernel) = {fmt_time(raw)})")
    else:
        formula = (f"min(Σ(launch call − kernel) over kernels shorter than their launch, GPU idle) in "
                   f"{where} = min({fmt_time(raw)}, {fmt_time(idle)})")
    gain = gain_from(ctx, steady_ns, other_ns, formula, kind="upper bound", overlap=HOST)
    return [Finding(
        id="nsys.launch-bound",
        title="Kernels are shorter than their launch overhead",
        severity=severity_of(gain),
        source="nsys",
        summary=(
            f"{int(short.sum())} of {n_joined} kernels ran for less time than their launch call took "
            f"(median kernel {fmt_time(float(np.median(kd)))}, median launch "
            f"{fmt_time(float(np.median(ld)))}) and the GPU was idle {fmt_time(idle)} of "
            f"{fmt_time(window)} ({pct(idle, window)} %) in {where}: the CPU cannot keep it busy."
        ),
        evidence=[
            Evidence("kernels", n_joined, "kernels", schema.KERNEL),
            Evidence("kernels shorter than their launch", int(short.sum()), "kernels",
                     "kernel duration < launch API duration"),
            Evidence("median kernel duration", float(np.median(kd)), "ns", "cuda_gpu_kern_sum"),
            Evidence("median launch call duration", float(np.median(ld)), "ns", "cuda_api_sum"),
            Evidence("GPU idle in the window", idle, "ns", "window − union of GPU work"),
        ],
        fix="Capture the loop once as a CUDA Graph and replay it, or fuse the small kernels.",
        fix_cuda=("cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);\n"
                  "for (...) small<<<g, b, 0, s>>>(...);\ncudaStreamEndCapture(s, &graph);\n"
                  "cudaGraphInstantiate(&exec, graph, 0);\ncudaGraphLaunch(exec, s);"),
        fix_torch=("g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    out = step(static_in)\n"
                   "g.replay()        # or torch.compile(model, mode='reduce-overhead')"),
        gain=gain,
        verify="Re-run: cudaGraphLaunch replaces most cudaLaunchKernel calls, and the GPU idle "
               "time between kernels shrinks.",
    )]


def rule_sync_idle(ctx: Context) -> list[Finding]:
    """GPU idle after blocking synchronizations inside the steady steps (the queue drained)."""
    causes = idle_causes(ctx)
    if not causes or not causes["window"]:
        return []
    sync, window = causes["sync"], causes["window"]
    if sync < 0.05 * window or sync < 100_000:
        return []
    n = ctx.n_steady
    gain = gain_from(ctx, sync, 0, f"GPU idle from the end of each blocking synchronization to the next "
                     f"GPU operation in the {n} steady steps = {fmt_time(sync)}",
                     kind="upper bound", overlap=HOST)
    return [Finding(
        id="nsys.sync-idle",
        title="The GPU drains and waits after every synchronization",
        severity=severity_of(gain),
        source="nsys",
        summary=(f"After each blocking synchronization (stream, device or event sync, or a synchronous copy "
                 f"such as .item()) the GPU's queue is empty until the host launches again: "
                 f"{fmt_time(sync / n)} per step ({pct(sync, window)} % of the steps' time)."),
        evidence=[Evidence("GPU idle after synchronizations", sync, "ns",
                           "sync call end → next GPU operation, inside the steady steps"),
                  Evidence("GPU idle in the steady steps", causes["idle"], "ns", "window − GPU busy"),
                  Evidence("window", window, "ns", "steady steps")],
        fix="Synchronize once per iteration (or less): read results with non_blocking copies and check them "
            "a step later; remove syncs between operations.",
        fix_cuda="// one cudaStreamSynchronize(s) per iteration, not per operation",
        fix_torch="# keep the loss on the GPU and read it every N steps: total += loss.detach()",
        gain=gain,
        verify="Re-run: fewer synchronization calls per step and the GPU idle time after them shrinks.",
    )]


def rule_gpu_idle(ctx: Context) -> list[Finding]:
    """GPU idle inside the steady steps of each process; idle only in warm-up is a one-time cost."""
    if len(ctx.all_steps) > 1:
        out: list[Finding] = []
        for st in ctx.all_steps:
            for f in _gpu_idle(ctx.for_steps(st)):
                out.append(replace(f, subject=f"pid {st.pid}", summary=f"Process {st.pid}: {f.summary}"))
        return out
    return _gpu_idle(ctx)


def _idle_window(ctx: Context) -> tuple[int, int, str, str, int, int] | None:
    """(window, idle, where, source, steady idle, other idle) of the GPU idle finding, or None.

    The steady steps where there are some (else the warm-up steps, where idle is only there),
    or the span of GPU activity; None when the GPU is not idle enough there to report.
    """
    bs, be = _blocks(ctx)
    if not len(bs):
        return None
    if ctx.steps is not None and ctx.n_steady:
        window, idle = _steady_idle(ctx)
        where = f"the {ctx.n_steady} steady steps of {ctx.steps.range_name}"
        source = (f"{schema.NVTX} (steady steps)" if ctx.steps.method == "nvtx"
                  else f"steady steps ({'the GPU' if ctx.steps.method == 'gpu' else 'the GPU and NVTX'})")
        if idle >= 0.2 * window and idle >= 1_000_000:
            return window, idle, where, source, idle, 0
        warm = ctx.steps.warmup_flags
        if not warm.any():
            return None
        window, idle = _idle_in(ctx, ctx.steps.starts_ns[warm], ctx.steps.ends_ns[warm])
        if idle < 0.2 * window or idle < 1_000_000:
            return None
        return window, idle, f"the {int(warm.sum())} warm-up step(s) of {ctx.steps.range_name}", \
            "warm-up steps", 0, idle
    window, idle = _idle_in(ctx, bs[:1], be[-1:])
    if idle < 0.2 * window or idle < 1_000_000:
        return None
    return window, idle, "the span from the first to the last GPU operation", "GPU activity span", 0, idle


def _host_work_hint(ctx: Context, window: int, steady_ns: int) -> tuple[str, str, str, list[Evidence]]:
    """(why, fix, fix_torch, evidence) of the GPU idle finding: host code outside CUDA calls, if most."""
    why = "allocation, synchronous calls, host code between launches"
    extra: list[Evidence] = []
    fix = ("Remove host work from between GPU operations (the other findings name it), queue work "
           "asynchronously, and synchronize only when results are needed.")
    fix_torch = "# avoid .item(), .cpu(), print(tensor) inside the loop: each one synchronizes"
    api_ns = _api_in_steady_steps(ctx) if steady_ns else None
    if api_ns is not None and ctx.n_steady:
        outside = max(window - api_ns, 0)
        n = ctx.n_steady
        extra = [Evidence("CUDA API time in the steady steps (summed over threads)", api_ns, "ns",
                          "CUDA API calls starting in the steady steps"),
                 Evidence("host time outside CUDA API calls (at least)", outside, "ns",
                          "window − CUDA API time")]
        if outside >= 0.5 * window:
            why = (f"each step spent {fmt_time(api_ns / n)} in CUDA API calls and at least "
                   f"{fmt_time(outside / n)} ({pct(outside, window)} %) in host code outside them: "
                   "Python, framework or data loading between launches")
            fix = ("Most of each step is host code outside the CUDA API: make the host side cheaper "
                   "(larger batches, fewer and fused operations) or replay the step without it (CUDA "
                   "Graphs, torch.compile(mode='reduce-overhead')); queue work asynchronously and "
                   "synchronize only when results are needed.")
            fix_torch = ("step = torch.compile(step, mode='reduce-overhead')  # CUDA Graphs\n"
                         "# or: g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): out = step(static_in)")
    return why, fix, fix_torch, extra


def _gpu_idle(ctx: Context) -> list[Finding]:
    found = _idle_window(ctx)
    if found is None:
        return []
    window, idle, where, source, steady_ns, other_ns = found
    busy = window - idle
    formula = f"window − GPU busy = {fmt_time(window)} − {fmt_time(busy)} = {fmt_time(idle)}"
    causes = idle_causes(ctx) if steady_ns else None
    internal = 0
    if causes and causes["idle"]:
        # idle the host did not cause (gaps between the GPU's own dependent operations, a graph's
        # node-to-node latency) is not what host-side fixes remove
        internal = causes["other"]
        if internal > 0.5 * causes["idle"]:
            steady_ns = max(steady_ns - internal, 0)
            formula += (f"; of it {fmt_time(internal)} between the GPU's own operations while the host "
                        f"neither synchronized, paused nor launched (left out: not a host-side cost)")
    gain = gain_from(ctx, steady_ns, other_ns, formula, kind="upper bound", overlap=HOST)
    once = " This is a one-time cost (warm-up): it does not grow with the run." if gain.one_time else ""
    why, fix, fix_torch, extra = _host_work_hint(ctx, window, steady_ns)
    return [Finding(
        id="nsys.gpu-idle",
        title="The GPU sits idle between operations",
        severity=severity_of(gain),
        source="nsys",
        summary=(
            f"The GPU was idle {fmt_time(idle)} of {fmt_time(window)} ({pct(idle, window)} %) within "
            f"{where}: the CPU did not queue work fast enough ({why}).{once}"
        ),
        evidence=[
            Evidence("window", window, "ns", source),
            Evidence("GPU busy (union of kernels, copies, memsets)", busy, "ns", _GPU_TABLES),
            Evidence("GPU idle", idle, "ns", "window − busy"),
            *extra,
        ],
        fix=fix,
        fix_cuda="// queue everything on a stream, synchronize once at the end\ncudaStreamSynchronize(s);",
        fix_torch=fix_torch,
        gain=gain,
        verify="Re-run: GPU busy share of the steps rises (`kernelscope summary`).",
    )]


def _api_in_steady_steps(ctx: Context) -> int | None:
    """CUDA API time of the calls in the steady steps, summed over the process's threads.

    From the summary's steps; None where those are another process's or another range's.
    """
    it = ctx.summary.iterations
    st = ctx.steps
    if it is None or st is None or str(it.pid) != str(st.pid) or it.range != st.range_name:
        return None
    return sum(int(a.total_ns) for a in it.api_per_iteration)


def rule_setup_dominates(ctx: Context) -> list[Finding]:
    """One-time context/module setup (and one-time allocation) dominating a short run."""
    it = ctx.summary.iterations
    if it:
        one = [(a.category, a.total_ns) for a in it.api_one_time if a.category in ("setup", "allocation")]
    else:
        one = [(c.category, c.union_ns) for c in ctx.summary.host.categories if c.category == "setup"]
    total = min(sum(int(n) for _, n in one), ctx.wall_ns)
    if not ctx.wall_ns or total < 0.3 * ctx.wall_ns:
        return []
    cats = ", ".join(f"{c} {fmt_time(n)}" for c, n in one)
    gain = Gain(round(total / 1e9, 9), pct(total, ctx.wall_ns),
                f"one-time API time = {fmt_time(total)} (per process start, not per step)", "upper bound",
                window="capture", window_ns=ctx.wall_ns, one_time=True, overlap=HOST)
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
        evidence=[Evidence(f"one-time {c} API time", int(n), "ns",
                           f"{schema.RUNTIME} outside the steps" if it else "cuda_api_sum")
                  for c, n in one] + [Evidence("capture wall span", ctx.wall_ns, "ns", "all tables")],
        fix="Keep the process alive across runs (a server or a longer benchmark), load modules lazily "
            "(CUDA_MODULE_LOADING=LAZY, default since CUDA 12.2), and warm up before timing.",
        fix_cuda="cudaFree(0);   // create the context before the timed region",
        fix_torch="torch.cuda.init(); model(x)  # warm-up step before timing",
        gain=gain,
        verify="Time only the step range; its median should not include this cost.",
    )]


def _rows_union(ctx: Context, s: npt.NDArray[np.int64], dur: npt.NDArray[np.int64]) -> tuple[int, int, int]:
    """(Σ duration, union in the steady steps, union elsewhere) of nsys analyze rows."""
    steady = ctx.steady_mask(s)
    u_in = interval_union_ns(s[steady], s[steady] + dur[steady])[0]
    u_out = interval_union_ns(s[~steady], s[~steady] + dur[~steady])[0]
    return int(dur.sum()), u_in, u_out


def _expert_rows(trace: Trace, name: str) -> RuleRows:
    """A rule's rows: numpy's from the columnar cache where they can be, else the rule's table."""
    from engine.analysis.nsys.analyze.rule_rows import RuleRows, rule_rows

    rows = rule_rows(trace, name)
    if rows is not None:
        return rows
    from engine.analysis.nsys import analyze as expert

    res = expert.run(trace, name, {"rows": -1})
    t = res.table
    if t.empty:
        z = np.zeros(0, dtype=np.int64)
        return RuleRows(0, z, z, res.explanation, res.fix)
    return RuleRows(len(t), t["Start (ns)"].to_numpy(np.int64), t["Duration (ns)"].to_numpy(np.int64),
                    res.explanation, res.fix)


def rule_expert(ctx: Context) -> list[Finding]:
    """The nsys analyze rules not already covered by the rules above."""
    from engine.analysis.nsys.analyze.common import RULES

    out: list[Finding] = []
    # cuda_memcpy_async and cuda_memcpy_sync are covered by nsys.pageable-copies / nsys.sync-copies.
    for name in ("cuda_memset_sync", "cuda_api_sync", "gpu_gaps", "gpu_time_util"):
        res = _expert_rows(ctx.trace, name)
        if not res.n:
            continue
        dur, u_in, u_out = _rows_union(ctx, res.start, res.dur)
        gain = None if name == "gpu_time_util" else gain_from(
            ctx, u_in, u_out, f"union of the {name} rows' intervals = {fmt_time(u_in + u_out)} "
            f"(their durations add up to {fmt_time(dur)}; overlapping rows of several threads or "
            "processes count once)", kind="upper bound", overlap=HOST)
        out.append(Finding(
            id=f"nsys.expert.{name}",
            title=RULES[name],
            severity="info",
            source="nsys",
            summary=res.explanation,
            evidence=[Evidence("rows", res.n, "rows", f"nsys analyze -r {name}"),
                      Evidence("total duration of the rows", dur, "ns", f"nsys analyze -r {name}")],
            fix=res.fix,
            gain=gain,
            verify=f"Re-run: `kernelscope analyze -r {name} REPORT` reports fewer rows.",
        ))
    return out
