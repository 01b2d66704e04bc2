"""GUI benchmark on a big report: launch, first timeline paint, zoom/pan frame times, peak memory.

Usage::

    .venv/bin/python benchmarks/bench_gui.py bench-data/big.sqlite [--runs 3] [--json out.json]

Each run starts the real app (``python -m gui.app REPORT --view timeline``, as a user would) in a
fresh process under ``QT_QPA_PLATFORM=offscreen`` (unless a display is set and ``--screen`` is
given). The child installs an event filter before the window exists and reports, as wall-clock
times since the parent spawned it:

- window shown: the first paint of the main window;
- report loaded: the engine finished opening and summarizing the report (worker thread);
- timeline painted: the first paint of the timeline canvas with real data in it (on a big nsys
  report the GPU lanes, read first from the columnar cache; the CUDA API lanes, NVTX ranges and GPU
  metrics follow: "all lanes painted"); beside it the app's CPU time up to it (every thread: on a
  busy 2-core machine the wait grows with it) and whether it read the GPU lanes' layout an earlier
  open kept (gui.timeline.gpu_layout);
- summary ready: the engine's summary (a worker thread, after the timeline) finished.

With ``--cold`` the first launch gets an empty cache directory (``KERNELSCOPE_CACHE``), so it pays
for building the report's columnar cache, and the later launches reuse it: the table then shows the
cold launch and the median of the warm ones side by side.

Then it drives the timeline through 50 scripted zooms and pans (wheel-sized zoom steps at
different places, drags, zoom all the way out and back in) and times each frame from the range
change to the end of a synchronous ``repaint()`` plus ``processEvents()``; the paint itself is
also timed inside ``paintEvent``. Peak memory is the app process's maximum resident set size
(``ru_maxrss``: its own pages and the memory-mapped cache pages it touched), at the end of the run
and when every lane was painted; and, sampled every 50 ms from /proc, the largest sum of the app's
RSS and that of the processes it started (the summary's child) while they ran together, which is
what the 2 GB goal bounds (their PSS sum, where shared pages count once, is printed beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGETS = {  # metric -> (target, unit); the first paint's is 3 s from 5M GPU operations (issue 16)
    "window_shown_s": (1.5, "s"),
    "timeline_first_paint_s": (2.0, "s"),
    "frame_p95_ms": (33.0, "ms"),
    "peak_total_rss_mb": (2048.0, "MB"),  # the app and the children it starts, summed while alive
}
BIG_EVENTS = 5_000_000


# -- memory of the app and the processes it starts (Linux /proc) -------------------------------------
def _status_mb(pid: int | str) -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of a process in MB (empty when it is gone)."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile"):
                    out[k] = int(v.split()[0]) / 1024.0
    except OSError:
        pass
    return out


def _pss_mb(pid: int | str) -> float:
    """Proportional set size in MB (pages shared by n processes count 1/n in each), 0 when gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _descendants(pid: int) -> list[int]:
    """Every process started by ``pid`` (and by those), from /proc/PID/task/*/children."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


class MemorySampler:
    """Samples the app's RSS and that of every child it starts, summed while alive together.

    ``ru_maxrss`` sees one process; the app computes its summary in a child process, so the whole
    app's peak is the largest sum over one sample of the app's and its children's RSS (and of
    their PSS, where pages both map, such as the report's cached columns, count once).
    """

    def __init__(self, interval_s: float = 0.05) -> None:
        import threading

        self.interval_s = interval_s
        self.peak: dict[str, float] = {"app_rss_mb": 0.0, "children_rss_mb": 0.0, "total_rss_mb": 0.0,
                                       "total_pss_mb": 0.0, "app_anon_mb": 0.0, "app_file_mb": 0.0}
        self.children_seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self.sample()
        return dict(self.peak, children_seen=float(self.children_seen))

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(self.interval_s):
            self.sample(pss=n % 4 == 0)  # smaps_rollup walks the page tables: every 4th sample
            n += 1

    def sample(self, pss: bool = True) -> None:
        me = os.getpid()
        app = _status_mb(me)
        kids = _descendants(me)
        self.children_seen = max(self.children_seen, len(kids))
        kid_rss = sum(_status_mb(k).get("VmRSS", 0.0) for k in kids)
        pk = self.peak
        pk["app_rss_mb"] = max(pk["app_rss_mb"], app.get("VmRSS", 0.0))
        pk["app_anon_mb"] = max(pk["app_anon_mb"], app.get("RssAnon", 0.0))
        pk["app_file_mb"] = max(pk["app_file_mb"], app.get("RssFile", 0.0))
        pk["children_rss_mb"] = max(pk["children_rss_mb"], kid_rss)
        pk["total_rss_mb"] = max(pk["total_rss_mb"], app.get("VmRSS", 0.0) + kid_rss)
        if pss:
            pk["total_pss_mb"] = max(pk["total_pss_mb"], _pss_mb(me) + sum(_pss_mb(k) for k in kids))


# -- child: runs inside the app's process ------------------------------------------------------------
class _Probe:
    """What the app does, timed from the parent's spawn: the marks, the frames and the memory.

    The event filter installed in the app (see :func:`child`) hands each paint to :meth:`on_paint`;
    the rest follows from the window's signals and the canvas' paints.
    """

    def __init__(self, app: Any, spawn_wall: float, out_path: str, settle_max: float) -> None:
        self.app, self.spawn_wall, self.out_path, self.settle_max = app, spawn_wall, out_path, settle_max
        self.marks: dict[str, float] = {}
        self.frames: list[dict[str, float]] = []
        self.busy_frames: list[dict[str, float]] = []
        self.sampler = MemorySampler()
        self.sampler.start()
        self.window: Any = None
        self.canvas: Any = None

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, time.time() - self.spawn_wall)

    def on_paint(self, obj: Any) -> None:
        """A widget paints: the window's first paint, and the timeline canvas once it exists."""
        from gui.main_window import MainWindow

        win = obj.window() if callable(obj.window) else None
        if isinstance(win, MainWindow) and "window_shown_s" not in self.marks:
            self.mark("window_shown_s")
            self.window = win
            win.sig_report_opened.connect(self._on_loaded)
            win.reports.sig_summary_ready.connect(lambda _r: self.mark("summary_ready_s"))
        if type(obj).__name__ == "TimelineCanvas" and self.canvas is None:
            self.canvas = obj
            obj.sig_painted.connect(self._on_canvas_painted)

    def _on_loaded(self, _report: object) -> None:
        self.mark("report_loaded_s")
        # `kernelscope-gui REPORT --view timeline` should already show it, but the window
        # re-selects the first tab when it builds its views; click the tab like a user would.
        if self.window.current_view() != "timeline":
            self.marks["view_reselected"] = 1.0
            self.window.set_view("timeline")

    def _on_canvas_painted(self, _ms: float) -> None:
        import resource

        from PySide6.QtCore import QTimer

        c = self.canvas
        if c is None or c.model is None:
            return
        if "timeline_first_paint_s" not in self.marks:
            self.mark("timeline_first_paint_s")
            # CPU of every thread of the app up to it: what a busy machine multiplies the wait by
            self.marks["first_paint_cpu_s"] = time.process_time()
            self.marks["gpu_layout_kept"] = float(self._layout_kept())
            QTimer.singleShot(0, self.drive_busy)
        if not c.model.pending and "all_lanes_paint_s" not in self.marks:
            self.mark("all_lanes_paint_s")
            self.marks["rss_at_all_lanes_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            now = _status_mb("self")
            self.marks["anon_at_all_lanes_mb"] = now.get("RssAnon", float("nan"))
            self.marks["file_at_all_lanes_mb"] = now.get("RssFile", float("nan"))

    def _layout_kept(self) -> bool:
        """True when an earlier open kept the GPU lanes' layout this first paint read (a big nsys
        report's second open; the first one keeps it after its first paint)."""
        report = self.window.reports.current if self.window is not None else None
        try:
            from engine.reports.nsys.timeline_reads import TimelineReads
            from gui.timeline.gpu_layout import NAME
        except ImportError:  # a Kernelscope from before the layout was kept (A/B runs)
            return False
        if report is None or getattr(report.trace, "column_store", None) is None:
            return False
        return TimelineReads(report.trace).kept(NAME) is not None

    def drive_busy(self) -> None:
        """The same sequence at once, while the other views may still work in the background."""
        from gui.workers import running_threads

        self.marks["busy_threads_at_start"] = float(len(running_threads()))
        self.busy_frames.extend(zoom_pan_sequence(self.canvas))
        self.settle()

    def settle(self) -> None:
        """Wait until the background work is done (it holds the GIL): the shown view's and the
        summary's (the window builds the other views only when their tab is clicked)."""
        from PySide6.QtCore import QTimer

        from gui.workers import running_threads

        busy = [k for k, v in self.window.views.items() if getattr(v, "is_busy", lambda: False)()]
        if self.window.is_summarizing():  # (its job may not have started yet: it waits its turn)
            busy.append("summary job")
        timeline_busy = "timeline" in busy or self.canvas.model is None or bool(self.canvas.model.pending)
        waited = time.time() - self.spawn_wall
        if timeline_busy or ((busy or running_threads()) and waited < self.settle_max):
            QTimer.singleShot(50, self.settle)  # every lane first; the other views' work up to a limit
            return
        if busy or running_threads():
            self.marks["frames_while_background_work"] = 1.0
        else:
            self.mark("views_idle_s")
        self.drive()

    def drive(self) -> None:
        """The scripted zooms and pans with nothing else running; then the result, and quit."""
        try:
            self.frames.extend(zoom_pan_sequence(self.canvas))
        finally:
            Path(self.out_path).write_text(json.dumps(self.result()))
            if self.marks.get("frames_while_background_work"):
                os._exit(0)  # closing would wait for a summary that cannot be cancelled midway
            self.window.close()
            self.app.quit()

    def result(self) -> dict[str, Any]:
        """The run's marks, frames and peak memory (what the parent reads back)."""
        import resource

        rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        kids_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        mem = self.sampler.stop()
        return {
            "marks": self.marks, "frames": self.frames, "busy_frames": self.busy_frames,
            "peak_rss_mb": rss_kb / 1024.0,
            # a child's own high-water mark (ru_maxrss of the waited-for children) and the
            # sampled peaks: the sum of the app's and its children's RSS (and PSS) at once
            "peak_child_rss_mb": max(kids_kb / 1024.0, mem["children_rss_mb"]),
            "peak_total_rss_mb": max(mem["total_rss_mb"], rss_kb / 1024.0),
            "peak_total_pss_mb": mem["total_pss_mb"],
            "children_seen": mem["children_seen"],
            "lanes": {ln.key: len(ln) for ln in self.canvas.model.lanes},
            "load_s_in_window": getattr(self.window.reports.current, "load_s", None),
        }


def child(report: str, spawn_wall: float, out_path: str, settle_max: float) -> int:
    """The app, started as a user would, with a probe that times it (see :class:`_Probe`)."""
    from PySide6.QtCore import QEvent, QObject, QTimer

    import gui.app as gapp

    app = gapp._make_app([])
    probe = _Probe(app, spawn_wall, out_path, settle_max)

    class Spy(QObject):
        def eventFilter(self, obj, ev):  # noqa: N802 - Qt override
            if ev.type() == QEvent.Type.Paint and hasattr(obj, "window"):
                probe.on_paint(obj)
            return False

    spy = Spy()
    app.installEventFilter(spy)
    QTimer.singleShot(int((settle_max + 120) * 1000), app.quit)  # never hang a benchmark
    rc = gapp.main([report, "--view", "timeline"])
    return int(rc)


def zoom_pan_sequence(canvas) -> list[dict[str, float]]:
    """50 zooms and pans over the whole capture; each frame timed to the end of its paint."""
    from PySide6.QtWidgets import QApplication

    m = canvas.model
    canvas.fit()
    canvas.repaint()
    QApplication.processEvents()
    a, b = m.activity_min, m.activity_max
    steps: list[tuple[str, float, float]] = []
    # dive into three places (8 wheel notches of 2x each), pan around there, come back out
    # (8 notches at 4x: 65,536x, from the whole capture down to tens of microseconds)
    for frac in (0.5, 0.13, 0.87):
        for _ in range(8):
            steps.append(("zoom", 4.0, a + frac * (b - a)))
        for d in (0.3, -0.6, 0.3):
            steps.append(("pan", d, 0.0))
        for _ in range(2):
            steps.append(("zoom", 1 / 256.0, a + frac * (b - a)))
    steps += [("fit", 0, 0), ("pan", 0.25, 0), ("pan", -0.25, 0), ("zoom", 1.25, a), ("zoom", 0.8, a)]
    steps += [("zoom", 8.0, a + 0.3 * (b - a))] * 4 + [("pan", 0.5, 0), ("fit", 0, 0)]
    assert len(steps) == 50, len(steps)
    out = []
    for kind, v, at in steps[:50]:
        t = time.perf_counter()
        cpu = time.thread_time()
        if kind == "zoom":
            canvas.zoom(v, at)
        elif kind == "pan":
            canvas.pan(v)
        else:
            canvas.fit()
        canvas.repaint()
        QApplication.processEvents()
        dt = (time.perf_counter() - t) * 1e3
        cpu_ms = (time.thread_time() - cpu) * 1e3
        modes = {mode for mode, _n in canvas.draw_stats.values()}
        visible = sum(n for _mode, n in canvas.draw_stats.values())
        out.append({"kind": kind, "frame_ms": dt, "cpu_ms": cpu_ms, "paint_ms": canvas.last_paint_ms,
                    "span_ns": canvas.t1 - canvas.t0, "visible_events": visible,
                    "aggregated": "coverage" in modes})
    return out


# -- parent ---------------------------------------------------------------------------------------------
def forget_summary(report: Path, cache: Path | None) -> bool:
    """Remove the report's cached summary (the app then computes it again); True if there was one."""
    if cache is not None:
        os.environ["KERNELSCOPE_CACHE"] = str(cache)  # where the launch's app keeps it
    sys.path.insert(0, str(REPO))
    try:
        from engine.analysis.findings.overview_store import cached_file
    except ImportError:  # a Kernelscope from before the summary was kept on disk (A/B runs)
        return False

    f = cached_file(report)
    kept = [] if f is None else list(f.parent.glob("overview-*.pickle"))  # every range and variant
    for k in kept:
        k.unlink()
    return bool(kept)


def run_once(report: Path, screen: bool, tmp: Path, cache: Path | None, settle_max: float,
             keep_summary: bool = False) -> dict:
    env = dict(os.environ)
    if not screen:
        env["QT_QPA_PLATFORM"] = "offscreen"
    env.setdefault("KERNELSCOPE_CONFIG", str(tmp / "config"))  # a fresh user: no restored layout
    if cache is not None:
        env["KERNELSCOPE_CACHE"] = str(cache)
    if not keep_summary:
        forget_summary(report, cache)
    out = tmp / f"result-{time.time_ns()}.json"
    spawn = time.time()
    cmd = [sys.executable, __file__, "--child", str(report), "--spawn", repr(spawn), "--out", str(out),
           "--settle-max", repr(settle_max)]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=settle_max + 300)
    wall = time.time() - spawn
    if not out.exists():
        raise SystemExit(f"the app did not report (exit {p.returncode}):\n{p.stderr[-3000:]}")
    r = json.loads(out.read_text())
    r["process_s"] = wall
    return r


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(runs: list[dict]) -> dict:
    """Medians of the marks and percentiles of the frames over ``runs``."""
    def med(key: str) -> float:
        return statistics.median(r["marks"].get(key, float("nan")) for r in runs)

    frames = [f for r in runs for f in r["frames"]]
    fr = [f["frame_ms"] for f in frames]
    agg = [f["frame_ms"] for f in frames if f["aggregated"]]
    det = [f["frame_ms"] for f in frames if not f["aggregated"]]
    return {
        "window_shown_s": med("window_shown_s"),
        "report_loaded_s": med("report_loaded_s"),
        "timeline_first_paint_s": med("timeline_first_paint_s"),
        "first_paint_cpu_s": med("first_paint_cpu_s"),
        "all_lanes_paint_s": med("all_lanes_paint_s"),
        "summary_ready_s": med("summary_ready_s"),
        "views_idle_s": med("views_idle_s"),
        "frame_p50_ms": pct(fr, 0.5), "frame_p95_ms": pct(fr, 0.95), "frame_max_ms": max(fr),
        "paint_p95_ms": pct([f["paint_ms"] for f in frames], 0.95),
        "frame_cpu_p95_ms": pct([f["cpu_ms"] for f in frames], 0.95),
        "aggregated_frame_p95_ms": pct(agg, 0.95), "detail_frame_p95_ms": pct(det, 0.95),
        "busy_frame_p95_ms": pct([f["frame_ms"] for r in runs for f in r["busy_frames"]], 0.95),
        "rss_at_all_lanes_mb": max(r["marks"].get("rss_at_all_lanes_mb", float("nan")) for r in runs),
        "anon_at_all_lanes_mb": max(r["marks"].get("anon_at_all_lanes_mb", float("nan")) for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "peak_child_rss_mb": max(r.get("peak_child_rss_mb", 0.0) for r in runs),
        "peak_total_rss_mb": max(r.get("peak_total_rss_mb", r["peak_rss_mb"]) for r in runs),
        "peak_total_pss_mb": max(r.get("peak_total_pss_mb", float("nan")) for r in runs),
        "n_frames": len(fr), "runs": len(runs),
    }


ROWS = [  # label, key, unit, goal key
    ("window shown after launch", "window_shown_s", "s", "window_shown_s"),
    ("report opened (engine, worker thread)", "report_loaded_s", "s", None),
    ("timeline first paint (GPU lanes)", "timeline_first_paint_s", "s", "timeline_first_paint_s"),
    ("  app CPU up to it (all its threads)", "first_paint_cpu_s", "s", None),
    ("all lanes painted (API, NVTX, metrics)", "all_lanes_paint_s", "s", None),
    ("zoom/pan frame p95 right after first paint", "busy_frame_p95_ms", "ms", None),
    ("summary ready (worker, after the timeline)", "summary_ready_s", "s", None),
    ("background work done (the view, the summary)", "views_idle_s", "s", None),
    ("zoom/pan frame p50", "frame_p50_ms", "ms", None),
    ("zoom/pan frame p95", "frame_p95_ms", "ms", "frame_p95_ms"),
    ("  aggregated frames p95", "aggregated_frame_p95_ms", "ms", None),
    ("  event-by-event frames p95", "detail_frame_p95_ms", "ms", None),
    ("paintEvent alone p95", "paint_p95_ms", "ms", None),
    ("GUI-thread CPU per frame p95", "frame_cpu_p95_ms", "ms", None),
    ("peak RSS when every lane was painted", "rss_at_all_lanes_mb", "MB", None),
    ("  of it anonymous (not file-backed)", "anon_at_all_lanes_mb", "MB", None),
    ("peak RSS of the app process", "peak_rss_mb", "MB", None),
    ("peak RSS of its child processes", "peak_child_rss_mb", "MB", None),
    ("peak RSS of app + children at once", "peak_total_rss_mb", "MB", "peak_total_rss_mb"),
    ("  peak PSS of app + children (shared once)", "peak_total_pss_mb", "MB", None),
]


def _evict(report: Path, cache: Path | None) -> None:
    """Drop the report and its cache directory from the OS page cache (benchmarks/bench_big.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_big import evict

    where = cache or (Path(os.environ["KERNELSCOPE_CACHE"]) if os.environ.get("KERNELSCOPE_CACHE") else None)
    n = evict([report] + ([where] if where is not None and where.exists() else []))
    print(f"evicted {n} files from the page cache ({report.name}, {where})", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", nargs="?", help="a big report (e.g. bench-data/big.sqlite)")
    ap.add_argument("--runs", type=int, default=3, help="fresh app launches (median is reported)")
    ap.add_argument("--cold", action="store_true",
                    help="first launch with an empty cache directory (builds the columnar cache), "
                         "the others reuse it; both are reported")
    ap.add_argument("--settle-max", type=float, default=300.0,
                    help="seconds after launch to wait for the background work before the frames")
    ap.add_argument("--screen", action="store_true", help="use the real display instead of offscreen")
    ap.add_argument("--keep-summary", action="store_true",
                    help="let a launch load the summary an earlier one kept in the cache (by default "
                         "each launch computes it, as on a report's first open: its memory counts)")
    ap.add_argument("--evict", action="store_true",
                    help="drop the report and the cache directory ($KERNELSCOPE_CACHE) from the OS page "
                         "cache (posix_fadvise DONTNEED) before each launch: a first open after a reboot")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--spawn", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    return ap


def _print_run(i: int, r: dict, cold: bool, settle_max: float) -> None:
    """One launch's line on stderr."""
    m = r["marks"]
    fr = [f["frame_ms"] for f in r["frames"]]
    if m.get("frames_while_background_work"):
        print(f"run {i + 1}: the frames were measured after {settle_max:g} s while other views "
              "(the summary) still worked; the app was stopped after them", file=sys.stderr)
    print(f"run {i + 1}{' (cold cache)' if cold else ''}: window "
          f"{m.get('window_shown_s', float('nan')):.2f} s, opened "
          f"{m.get('report_loaded_s', float('nan')):.2f} s, "
          f"timeline painted {m.get('timeline_first_paint_s', float('nan')):.2f} s "
          f"({m.get('first_paint_cpu_s', float('nan')):.2f} CPU s"
          f"{', GPU layout kept' if m.get('gpu_layout_kept') else ''}), all lanes "
          f"{m.get('all_lanes_paint_s', float('nan')):.2f} s, summary "
          f"{m.get('summary_ready_s', float('nan')):.2f} s, frames p50 {pct(fr, .5):.1f} "
          f"p95 {pct(fr, .95):.1f} ms, peak RSS {r['peak_rss_mb']:.0f} MB (app) "
          f"{r.get('peak_child_rss_mb', 0.0):.0f} MB (children) "
          f"{r.get('peak_total_rss_mb', r['peak_rss_mb']):.0f} MB (together)", file=sys.stderr)


def _print_table(report: Path, runs: list[dict], cols: dict[str, dict], goals: dict[str, float],
                 cold: bool) -> None:
    """The table of medians against the goals."""
    n_api = sum(v for k, v in runs[0]["lanes"].items() if k.startswith("api:"))
    n_gpu = sum(v for k, v in runs[0]["lanes"].items() if k.startswith("gpu:"))
    print(f"\nKernelscope GUI benchmark: {report.name} ({n_gpu:,} GPU operations, {n_api:,} CUDA API calls), "
          f"{len(runs)} launches" + (" (the first with an empty cache, median of the others)" if cold
                                     else " (median)"))
    head = "".join(f"{name:>14}" for name in cols)
    print(f"{'measure':44}{head}  {'goal':>10}  result")
    for label, key, unit, gk in ROWS:
        vals = "".join(f"{c[key]:>11.2f} {unit:<2}" for c in cols.values())
        if gk is None:
            print(f"{label:44}{vals}")
            continue
        goal = goals[gk]
        verdict = "  ".join(("PASS" if c[key] <= goal else "FAIL") + (f" ({n})" if len(cols) > 1 else "")
                            for n, c in cols.items())
        print(f"{label:44}{vals}  {'<= ' + format(goal, 'g') + ' ' + unit:>10}  {verdict}")


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.child:
        sys.path.insert(0, str(REPO))
        return child(args.child, args.spawn, args.out, args.settle_max)
    if not args.report:
        ap.error("give the report to benchmark, e.g. bench-data/big.sqlite")
    report = Path(args.report).resolve()
    if not report.exists():
        print(f"bench_gui: {report} does not exist; make one with benchmarks/device_make_big_report.sh.",
              file=sys.stderr)
        return 1
    if args.cold and args.runs < 2:
        ap.error("--cold needs --runs 2 or more (one cold launch, then warm ones)")
    import tempfile

    runs = []
    with tempfile.TemporaryDirectory(prefix="ks-bench-gui-") as tmp:
        cache = Path(tmp) / "cache" if args.cold else None
        for i in range(args.runs):
            if args.evict:
                _evict(report, cache)
            r = run_once(report, args.screen, Path(tmp), cache, args.settle_max, args.keep_summary)
            runs.append(r)
            _print_run(i, r, cache is not None and i == 0, args.settle_max)
    cols = {"cold cache": summarize(runs[:1]), "warm cache": summarize(runs[1:])} if args.cold else {
        "value": summarize(runs)}
    goals = {k: v[0] for k, v in TARGETS.items()}
    if sum(v for k, v in runs[0]["lanes"].items() if k.startswith("gpu:")) >= BIG_EVENTS:
        goals["timeline_first_paint_s"] = 3.0
    _print_table(report, runs, cols, goals, args.cold)
    load = os.getloadavg()[0]
    print(f"(machine: {os.cpu_count()} cores, load average {load:.1f} at the end; wall-clock numbers "
          "include waiting for a CPU)")
    if args.json:
        Path(args.json).write_text(json.dumps({"report": str(report), "events": runs[0]["lanes"],
                                               "goals": goals, "columns": cols, "load_average": load},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
