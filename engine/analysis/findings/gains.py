"""Gains you can trust: measured in a window, capped by it, split into steady state and one-time.

Every nsys rule hands the time a fix would save to :func:`gain_from`, classified by where it
happens: inside the steady-state steps (after warm-up), or elsewhere (warm-up steps, start-up,
teardown). The steady part becomes a saving per step (at most the step itself); the rest is a
one-time saving, which never makes a finding critical. :func:`if_all_applied` adds findings up
without counting the same time twice: host-side findings share the GPU idle time of a step,
GPU-side findings share its GPU busy time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.findings.model import Finding, Gain, fmt_time, pct, severity_for

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.analysis.steps import Steps
    from engine.analysis.summary_model import Summary
    from engine.reports.base import Trace

#: overlap groups (see Gain.overlap)
HOST, GPU = "host", "gpu"


@dataclass
class Context:
    """What the rules share: the trace, its summary, its steps and an optional pinned reference."""

    trace: Trace
    summary: Summary
    reference: Trace | None = None
    steps: Steps | None = None
    #: the steps of every process (multi-process reports: one set each; the summary's first)
    all_steps: tuple[Steps, ...] = ()
    _cache: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, trace: Trace, summary: Summary, reference: Trace | None = None) -> Context:
        """The context of a trace, with the steps the summary chose (same range, same process)."""
        steps = None
        every: tuple[Steps, ...] = ()
        it = summary.iterations
        if it is not None:
            from engine.analysis.steps import summary_steps

            every = tuple(summary_steps(trace, it))
            steps = next((st for st in every if st.pid == it.pid), None)
        return cls(trace, summary, reference, steps, every)

    def for_steps(self, steps: Steps) -> Context:
        """The same context measured in another process's steps."""
        return Context(self.trace, self.summary, self.reference, steps, self.all_steps)

    @property
    def wall_ns(self) -> int:
        """Wall span of the capture in ns."""
        return int(self.summary.wall.span_ns)

    @property
    def n_steady(self) -> int:
        """Number of steady-state steps (0 without steps)."""
        return self.steps.steady_count if self.steps else 0

    @property
    def step_ns(self) -> float:
        """Median steady step (0 without steps)."""
        return self.steps.steady_median_ns if self.steps else 0.0

    def steady_mask(self, t: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which times fall inside a steady-state step."""
        if not self.steps:
            return np.zeros(len(t), dtype=bool)
        return self.steps.contains(t, steady_only=True)

    def host_steady_mask(self, t: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which host times (API calls) fall inside a steady step's host-side window."""
        if not self.steps:
            return np.zeros(len(t), dtype=bool)
        return self.steps.contains_host(t, steady_only=True)

    def steady_busy(self) -> npt.NDArray[np.int64]:
        """The GPU's busy time inside each steady step (its process's work, a union), once per context.

        Asked by the gain of every step-time rule and by the idle rules (5M steps: 0.4 s each).
        """
        if "steady_busy" not in self._cache:
            from engine.analysis.ops import gpu_op_columns
            from engine.analysis.summary import busy_between, busy_cum

            assert self.steps is not None
            bs, be = gpu_op_columns(self.trace).blocks(self.steps.pid)
            a, b = self.steps.window(steady_only=True)
            cum = busy_cum(self.trace, self.steps.pid, bs, be)
            self._cache["steady_busy"] = busy_between(bs, be, a, b, cum)
        out: npt.NDArray[np.int64] = self._cache["steady_busy"]
        return out

    def step_busy_idle(self) -> tuple[float, float]:
        """GPU busy and idle per steady step (the step's process, union over its GPU work)."""
        if "busy_idle" not in self._cache:
            busy, idle = 0.0, float(self.step_ns)
            if self.steps is not None and self.n_steady:
                a, b = self.steps.window(steady_only=True)
                per = self.steady_busy().astype(float)
                # per-step medians (steps timed on the GPU tile its time: a slow first step's busy
                # time must not eat the idle time of the median step)
                busy = float(np.median(per))
                idle = float(np.median((b - a) - per))
            self._cache["busy_idle"] = (
                busy, max(min(idle, self.step_ns - busy if busy < self.step_ns else idle), 0.0))
        value: tuple[float, float] = self._cache["busy_idle"]
        return value


def gain_from(ctx: Context, steady_ns: float, other_ns: float, formula: str, *,
              kind: str = "estimate", overlap: str = "") -> Gain:
    """A gain from the time saved inside the steady steps and elsewhere.

    Without steps the whole saving is measured against the capture (``steady_ns + other_ns``,
    capped at the wall span). With steps, the saving per step is ``steady_ns / steady steps``,
    capped at the step median, and the gain is one-time when no part of it is in the steady steps.
    A host-side saving (``overlap="host"``) is also capped by the GPU idle time it could fill, a
    GPU-side one by the GPU busy time: host overhead behind a busy GPU costs nothing.
    """
    steady_ns, other_ns = max(float(steady_ns), 0.0), max(float(other_ns), 0.0)
    wall = ctx.wall_ns
    busy_all = float(ctx.summary.gpu.busy_ns)
    cap_all = {HOST: max(wall - busy_all, 0.0), GPU: busy_all}.get(overlap, float(wall))
    total = min(steady_ns + other_ns, float(wall), cap_all) if wall else steady_ns + other_ns
    what = {HOST: "GPU idle", GPU: "GPU busy"}.get(overlap, "capture")
    notes = []
    if wall and steady_ns + other_ns > total:
        notes.append(f"capped at the {what} time {fmt_time(total)}")
    if not ctx.steps or not ctx.n_steady:
        tail = f" ({'; '.join(notes)})" if notes else ""
        return Gain(round(total / 1e9, 9), pct(total, wall), formula + tail, kind, window="capture",
                    window_ns=wall, overlap=overlap)
    busy, idle = ctx.step_busy_idle()
    cap = {HOST: idle, GPU: busy}.get(overlap, ctx.step_ns)
    raw = steady_ns / ctx.n_steady
    per_step = min(raw, ctx.step_ns, cap)
    # Under 0.1 % of the step is noise: what remains is paid once (start-up, warm-up, teardown).
    one_time = raw < 0.001 * ctx.step_ns and other_ns > 0
    capped = "" if per_step >= raw else (
        f" (capped at the {'GPU idle' if overlap == HOST else 'GPU busy' if overlap == GPU else 'step'} "
        f"time per step, {fmt_time(per_step)})")
    where = (f"; per steady step: {fmt_time(steady_ns)} over {ctx.n_steady} steps = {fmt_time(raw)}{capped}"
             if not one_time else
             "; all of it outside the steady steps (warm-up, start-up or teardown): paid once")
    return Gain(round(total / 1e9, 9), pct(total, wall), formula + where, kind,
                per_step_ns=None if one_time else round(per_step, 1),
                pct_of_step=None if one_time else pct(per_step, ctx.step_ns),
                window="capture" if one_time else "steady steps",
                window_ns=wall if one_time else int(round(ctx.step_ns)), one_time=one_time,
                overlap=overlap)


def severity_of(gain: Gain | None, *, critical: float = 20.0, warning: float = 5.0) -> str:
    """Severity from the share of the step (steady state) or of the capture; one-time ≤ warning."""
    if gain is None:
        return "info"
    if gain.one_time:
        return "warning" if (gain.pct_of_wall or 0) >= 50.0 else "info"
    share = gain.pct_of_step if gain.per_step_ns is not None else gain.pct_of_wall
    return severity_for(share, critical=critical, warning=warning)


@dataclass(frozen=True)
class Combined:
    """What the findings save together (see :func:`if_all_applied`).

    ``per_step_ns``: per steady step; ``seconds``: over the whole capture (a total, not per step).
    """

    per_step_ns: float | None
    seconds: float
    formula: str
    finding_ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``capture_seconds``: ``seconds``, named for what it is: over the capture)."""
        return {"per_step_ns": self.per_step_ns, "seconds": self.seconds, "capture_seconds": self.seconds,
                "formula": self.formula, "findings": list(self.finding_ids)}


def group_bound(values: list[tuple[str, float]], window: float, busy: float) -> tuple[float, str]:
    """Σ savings by overlap group, each group capped (host ≤ idle, GPU ≤ busy), the total ≤ window.

    Args:
        values: (overlap group, saving in ns) per finding.
        window: the step (or capture) length in ns.
        busy: GPU busy time in that window (idle = window − busy).

    """
    caps = {HOST: max(window - busy, 0.0), GPU: busy}
    total, parts = 0.0, []
    for group, label in ((HOST, "host-side, ≤ GPU idle"), (GPU, "GPU-side, ≤ GPU busy"), ("", "other")):
        s = sum(v for g, v in values if g == group)
        if s <= 0:
            continue
        got = min(s, caps[group]) if group in caps else s
        total += got
        cap = f" {fmt_time(caps[group])}" if group in caps else ""
        parts.append(f"{label}{cap}: {fmt_time(got)} of Σ {fmt_time(s)}")
    total = min(total, window)
    return total, "; ".join(parts) + f"; total ≤ {fmt_time(window)}: {fmt_time(total)}"


def if_all_applied(findings: list[Finding], *, step_ns: float | None = None,
                   gpu_busy_per_step_ns: float | None = None, wall_ns: int | None = None,
                   gpu_busy_ns: int | None = None) -> Combined:
    """An upper bound on the saving of applying every finding, without double counting.

    Host-side findings (allocation, synchronous calls, launch overhead, GPU idle) all save the
    time the GPU waits for the host, so together they save at most the GPU idle time; GPU-side
    findings (slow copies, missing overlap) save at most the GPU busy time; other findings add
    up. Per steady step when there are steps (never more than the step), else over the capture
    (never more than the capture).
    """
    used = [f for f in findings if f.gain is not None and f.gain.seconds is not None]
    steady = [f for f in used if f.gain and f.gain.per_step_ns is not None and not f.gain.one_time]

    bound = group_bound
    per_step: float | None = None
    formulas = []
    if steady and step_ns:
        values = [(f.gain.overlap, float(f.gain.per_step_ns or 0.0)) for f in steady if f.gain]
        per_step, text = bound(values, float(step_ns), float(gpu_busy_per_step_ns or 0.0))
        formulas.append(f"per steady step: {text}")
    seconds_ns = sum(float(f.gain.seconds or 0.0) * 1e9 for f in used if f.gain)
    if wall_ns:
        values = [(f.gain.overlap, float(f.gain.seconds or 0.0) * 1e9) for f in used if f.gain]
        seconds_ns, text = bound(values, float(wall_ns), float(gpu_busy_ns or 0))
        formulas.append(f"over the capture: {text}")
    return Combined(None if per_step is None else round(per_step, 1), round(seconds_ns / 1e9, 9),
                    " | ".join(formulas) or "no gains", tuple(f.id for f in used))
