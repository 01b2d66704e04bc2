"""The benchmark harness: time a kernels/ workload (or any callable) until its mean is known well.

* Timing: CUDA events (``torch.cuda.Event``) around each call on a GPU, so only GPU time between
  the two events counts; on CPU (or for host-bound workloads) ``time.perf_counter_ns`` around the
  call plus a device synchronize, and the result says the timing is host-side.
* Warm-up calls first (the first one also checks correctness), then repeats until the 95 % CI
  half-width of the mean is under ``target_rel_ci`` of the mean (after ``min_repeats``), or
  ``max_repeats`` or the time budget is reached.
* Optional L2 flush before every timed call (writes a buffer twice the L2 size; not timed).
* Rotating inputs: the workloads' ``rotate`` parameter cycles through that many input sets.
* Correctness: ‖out − ref‖ / ‖ref‖ in float64 against a per-dtype tolerance; NaN or Inf fails.
* Results: :class:`BenchResult` → JSON (``kernelscope.bench/1``) and CSV; sweeps give one row per
  parameter combination.

torch is imported inside functions only.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.sessions.confidence import SampleStats, summarize
from engine.system.atomic import atomic_write_text
from engine.system.errors import KernelscopeError

SCHEMA = "kernelscope.bench/1"

#: Largest accepted ‖out − ref‖ / ‖ref‖ per output dtype (tf32 is a parameter, its output is fp32).
TOLERANCES: dict[str, float] = {
    "float64": 1e-10, "float32": 1e-4, "tf32": 5e-3, "float16": 1e-2, "bfloat16": 2e-2,
}

EVENT_TIMER_NOTE = "GPU time between CUDA events recorded around each call"
HOST_TIMER_NOTE = ("timing is host-side (time.perf_counter_ns around each call plus a device "
                   "synchronize): it includes launch and Python overhead, unlike CUDA events")


class BenchError(KernelscopeError):
    """A benchmark could not run (bad options, unwritable output folder...)."""


@dataclass(frozen=True)
class BenchOptions:
    """How long and how carefully to measure.

    Attributes:
        warmup: Untimed calls before measuring (at least 1: the correctness check).
        min_repeats: Timed calls before the CI rule may stop the run.
        max_repeats: Hard limit on timed calls.
        target_rel_ci: Stop when the 95 % CI half-width is at most this fraction of the mean.
        budget_s: Stop timing after this many seconds of wall time.
        flush_l2: Write a buffer larger than the L2 cache before each timed call.
        timer: ``auto``, ``cuda`` (events) or ``host``.
        check: Compare the output with the reference.
        rtol: Tolerance override (None: by dtype, see TOLERANCES).
        cpu_threads: torch intra-op threads on CPU while measuring (None: torch's default). On a
            busy machine 1 avoids scheduler stalls of several ms per call.
    """

    warmup: int = 3
    min_repeats: int = 5
    max_repeats: int = 1000
    target_rel_ci: float = 0.01
    budget_s: float = 10.0
    flush_l2: bool = False
    timer: str = "auto"
    check: bool = True
    rtol: float | None = None
    cpu_threads: int | None = None

    def validate(self) -> None:
        """Raise BenchError on options that cannot work."""
        if self.warmup < 1 or self.min_repeats < 2 or self.max_repeats < self.min_repeats:
            raise BenchError("Benchmark options need warmup >= 1, min_repeats >= 2 and "
                             "max_repeats >= min_repeats.")
        if not self.target_rel_ci > 0 or not self.budget_s > 0:
            raise BenchError("The CI target and the time budget must be positive.")
        if self.timer not in ("auto", "cuda", "host"):
            raise BenchError(f"Timer '{self.timer}' is unknown; use auto, cuda or host.")


@dataclass
class Check:
    """Result of comparing an output with its reference."""

    rel_err: float | None
    tolerance: float | None
    ok: bool | None
    note: str = ""


@dataclass
class BenchResult:
    """One measured configuration. Times are nanoseconds."""

    workload: str
    params: dict[str, str]
    device: str
    device_name: str
    timer: str
    timer_note: str
    stats: SampleStats
    stop_reason: str
    warmup: int
    flush_l2: bool
    check: Check
    flop: float | None = None
    bytes: float | None = None
    samples_ns: list[float] = field(default_factory=list)
    torch_version: str | None = None

    @property
    def flop_per_s(self) -> float | None:
        """FLOP per second at the median time."""
        return self.flop / (self.stats.median * 1e-9) if self.flop and self.stats.median > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        """Bytes per second at the median time."""
        return self.bytes / (self.stats.median * 1e-9) if self.bytes and self.stats.median > 0 else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN/inf become None)."""
        d: dict[str, Any] = {
            "workload": self.workload, "params": self.params, "device": self.device,
            "device_name": self.device_name, "torch_version": self.torch_version, "timer": self.timer,
            "timer_note": self.timer_note, "warmup": self.warmup, "flush_l2": self.flush_l2,
            "stop_reason": self.stop_reason,
            "stats_ns": {k: _finite(v) for k, v in self.stats.as_dict().items()},
            "flop": self.flop, "bytes": self.bytes,
            "flop_per_s": self.flop_per_s, "bytes_per_s": self.bytes_per_s,
            "check": {k: _finite(v) if isinstance(v, float) else v for k, v in asdict(self.check).items()},
            "samples_ns": self.samples_ns,
        }
        return d

    def row(self) -> dict[str, Any]:
        """Flat row for CSV and tables (parameters prefixed with ``param.``)."""
        s = self.stats
        row: dict[str, Any] = {"workload": self.workload}
        row.update({f"param.{k}": v for k, v in self.params.items()})
        row.update({
            "device": self.device, "timer": self.timer, "n": s.n,
            "median_ns": s.median, "mean_ns": s.mean, "stdev_ns": s.stdev, "cv": s.cv,
            "ci95_low_ns": s.ci95_low, "ci95_high_ns": s.ci95_high,
            "ci95_half_width_ns": s.ci95_half_width, "min_ns": s.min, "max_ns": s.max,
            "stop_reason": self.stop_reason, "flop_per_s": self.flop_per_s,
            "bytes_per_s": self.bytes_per_s, "rel_err": self.check.rel_err,
            "tolerance": self.check.tolerance, "correct": self.check.ok,
        })
        return row


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def require_torch() -> Any:
    """Import torch, or say in one sentence how to install it."""
    try:
        import torch
    except ImportError:
        raise BenchError(
            "Benchmarks need PyTorch; install it with `pip install 'kernelscope[bench]'`."
        ) from None
    return torch


def tolerance_for(out: Any, params: Mapping[str, str] | None = None) -> float:
    """The tolerance for an output: by its dtype, or tf32's when the workload ran in tf32."""
    if params and params.get("dtype") == "tf32":
        return TOLERANCES["tf32"]
    name = str(getattr(out, "dtype", "float64")).replace("torch.", "")
    return TOLERANCES.get(name, TOLERANCES["float32"])


def relative_error(out: Any, ref: Any) -> float:
    """‖out − ref‖₂ / ‖ref‖₂ (see :func:`kernels.verify.relative_error`).

    Raises:
        BenchError: shapes differ.
    """
    from kernels.registry import WorkloadError
    from kernels.verify import relative_error as _rel

    try:
        return _rel(out, ref)
    except WorkloadError as exc:
        raise BenchError(str(exc)) from None


def _relative_error_torch(out: Any, ref: Any, chunk: int = 1 << 24) -> float:
    from kernels.verify import _relative_error_torch as _rel_torch

    return _rel_torch(out, ref, chunk)


def check_output(out: Any, ref: Any, params: Mapping[str, str] | None = None,
                 rtol: float | None = None) -> Check:
    """Compare one output with its reference; NaN/Inf in the output always fails."""
    tol = rtol if rtol is not None else tolerance_for(out, params)
    err = relative_error(out, ref)
    if math.isnan(err):
        return Check(rel_err=err, tolerance=tol, ok=False, note="output contains NaN or Inf")
    ok = err <= tol
    return Check(rel_err=err, tolerance=tol, ok=ok,
                 note="" if ok else f"relative error {err:.3g} exceeds tolerance {tol:.3g}")


def _l2_flusher(torch: Any, device: Any) -> Callable[[], None]:
    if device.type == "cuda":
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20)
    else:
        l2 = 64 << 20  # larger than the last-level cache of typical CPUs
    buf = torch.empty(max(2 * l2, 1 << 20) // 4, dtype=torch.float32, device=device)

    def flush() -> None:
        buf.fill_(1.0)

    return flush


def measure(fn: Callable[[], Any], reference: Callable[[], Any] | None, *, device: str = "cpu",
            options: BenchOptions | None = None, host_timer: bool = False,
            params: Mapping[str, str] | None = None, name: str = "callable") -> BenchResult:
    """Time ``fn`` (checked against ``reference``) with the rules of :class:`BenchOptions`.

    Args:
        fn: Runs the work once and returns its output.
        reference: Returns the expected output for the inputs of the last ``fn()`` call, or None.
        device: ``cuda`` or ``cpu``.
        options: Measurement options.
        host_timer: Force the host timer even on CUDA (host-bound workloads).
        params: Parameters, recorded in the result and used for the tolerance.
        name: Name recorded in the result.

    Returns:
        The measured result (``check.ok`` is False when the output is wrong; timing still runs).
    """
    opts = options or BenchOptions()
    opts.validate()
    torch = require_torch()
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    if opts.timer == "cuda" and not cuda:
        raise BenchError("CUDA-event timing needs device=cuda; use the host timer on CPU.")
    use_events = cuda and not host_timer and opts.timer != "host"
    threads_before = torch.get_num_threads()
    if opts.cpu_threads and not cuda:
        torch.set_num_threads(opts.cpu_threads)
    try:
        return _measure(torch, dev, fn, reference, opts, use_events, params, name, device)
    finally:
        torch.set_num_threads(threads_before)


def _measure(torch: Any, dev: Any, fn: Callable[[], Any], reference: Callable[[], Any] | None,
             opts: BenchOptions, use_events: bool, params: Mapping[str, str] | None, name: str,
             device: str) -> BenchResult:
    cuda = dev.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    nvtx = torch.cuda.nvtx if cuda else None
    if nvtx:
        nvtx.range_push(f"bench:{name}:warmup")
    out = fn()
    sync()
    if opts.check and reference is not None and out is not None:
        chk = check_output(out, reference(), params, opts.rtol)
    else:
        why = "no reference" if reference is None or out is None else "check disabled"
        chk = Check(None, None, None, why)
    for _ in range(opts.warmup - 1):
        fn()
    sync()
    if nvtx:
        nvtx.range_pop()
    flush = _l2_flusher(torch, dev) if opts.flush_l2 else None

    samples: list[float] = []
    reason = "max-repeats"
    t_start = time.perf_counter()
    if nvtx:
        nvtx.range_push(f"bench:{name}")
    try:
        while True:
            if flush is not None:
                flush()
            if use_events:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                samples.append(float(start.elapsed_time(end)) * 1e6)
            else:
                sync()
                t0 = time.perf_counter_ns()
                fn()
                sync()
                samples.append(float(time.perf_counter_ns() - t0))
            n = len(samples)
            if n >= opts.min_repeats and summarize(samples).rel_ci95_half_width <= opts.target_rel_ci:
                reason = "ci-target"
                break
            if n >= opts.max_repeats:
                break
            if time.perf_counter() - t_start >= opts.budget_s:
                reason = "time-budget"
                break
    finally:
        if nvtx:
            nvtx.range_pop()
    return BenchResult(
        workload=name, params=dict(params or {}), device=device, device_name=_device_name(torch, dev),
        timer="cuda-events" if use_events else "host",
        timer_note=EVENT_TIMER_NOTE if use_events else HOST_TIMER_NOTE,
        stats=summarize(samples), stop_reason=reason, warmup=opts.warmup, flush_l2=opts.flush_l2,
        check=chk, samples_ns=samples, torch_version=str(torch.__version__),
    )


def _device_name(torch: Any, dev: Any) -> str:
    if dev.type == "cuda":
        return str(torch.cuda.get_device_name(dev))
    return platform.processor() or platform.machine() or "cpu"


def run_workload(name: str, params: Mapping[str, str] | None = None,
                 options: BenchOptions | None = None) -> BenchResult:
    """Build the registered workload ``name`` with ``params`` and measure it.

    Raises:
        kernels.registry.WorkloadError: unknown workload, bad parameter, missing torch/GPU/triton.
        BenchError: bad options.
    """
    from kernels.registry import get_workload

    w = get_workload(name)
    p = w.resolve(params)
    fn, ref = w.make(p)
    work = w.work(p)
    r = measure(fn, ref, device=p["device"], options=options, host_timer=w.timer == "host", params=p,
                name=name)
    r.flop, r.bytes = work.flop, work.bytes
    return r


def expand_sweep(sweeps: Mapping[str, Sequence[str]]) -> list[dict[str, str]]:
    """Cartesian product of sweep values, first key varying slowest: {a:[1,2], b:[x]} → 2 dicts."""
    keys = list(sweeps)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(sweeps[k] for k in keys))]


def run_sweep(name: str, params: Mapping[str, str] | None, sweeps: Mapping[str, Sequence[str]],
              options: BenchOptions | None = None,
              progress: Callable[[int, int, dict[str, str]], None] | None = None) -> list[BenchResult]:
    """Measure every combination of ``sweeps`` over the base ``params`` (one result each)."""
    combos = expand_sweep(sweeps) if sweeps else [{}]
    results = []
    for i, combo in enumerate(combos):
        if progress:
            progress(i, len(combos), combo)
        results.append(run_workload(name, {**(params or {}), **combo}, options))
    return results


def results_json(results: Sequence[BenchResult]) -> dict[str, Any]:
    """The JSON document for a run (schema ``kernelscope.bench/1``)."""
    return {"schema": SCHEMA, "results": [r.to_dict() for r in results]}


def results_csv(results: Sequence[BenchResult]) -> str:
    """One CSV row per result; parameter columns are the union over results."""
    rows = [r.row() for r in results]
    cols: list[str] = []
    for row in rows:
        cols += [k for k in row if k not in cols]
    buf = io.StringIO()
    wr = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    wr.writeheader()
    for row in rows:
        wr.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def write_results(results: Sequence[BenchResult], out_dir: Path) -> tuple[Path, Path]:
    """Write ``bench.json`` and ``bench.csv`` into ``out_dir`` (created); return both paths.

    Raises:
        BenchError: the folder cannot be created or written.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        jp, cp = out_dir / "bench.json", out_dir / "bench.csv"
        for path, text in ((jp, json.dumps(results_json(results), indent=1, allow_nan=False)),
                           (cp, results_csv(results))):
            atomic_write_text(path, text)
    except OSError as exc:
        raise BenchError(f"Cannot write benchmark results to {out_dir} ({exc.strerror or exc}); "
                         "choose a writable folder with --out.") from None
    return jp, cp


def format_table(results: Sequence[BenchResult]) -> str:
    """A readable table: swept parameters, median, CI, CV, throughput, check."""
    if not results:
        return "(no results)"
    varying = [k for k in results[0].params if len({r.params.get(k) for r in results}) > 1]
    header = [*varying, "median", "95% CI ±", "CV", "n", "stop", "TFLOP/s", "GB/s", "rel err", "check"]
    lines = [header]
    for r in results:
        s = r.stats
        tf = f"{r.flop_per_s / 1e12:.2f}" if r.flop_per_s else "-"
        gb = f"{r.bytes_per_s / 1e9:.2f}" if r.bytes_per_s else "-"
        e = r.check.rel_err
        err = "-" if e is None else (f"{e:.1e}" if math.isfinite(e) else "NaN")
        ok = {True: "ok", False: "FAIL", None: "-"}[r.check.ok]
        lines.append([*(r.params[k] for k in varying), _fmt_ns(s.median), _fmt_ns(s.ci95_half_width),
                      f"{s.cv * 100:.1f}%", str(s.n), r.stop_reason, tf, gb, err, ok])
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in lines]
    r0 = results[0]
    standalone_only = ("iters", "warmup")  # used by `python -m kernels.X`, not by the harness
    fixed = " ".join(f"{k}={v}" for k, v in r0.params.items()
                     if k not in varying and k not in standalone_only)
    head = f"{r0.workload} on {r0.device_name} ({r0.device}, timer: {r0.timer}) {fixed}"
    notes = [head, *out]
    if r0.timer == "host":
        notes.append(f"note: {r0.timer_note}.")
    return "\n".join(notes)


def _fmt_ns(ns: float) -> str:
    if not math.isfinite(ns):
        return "inf"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"
