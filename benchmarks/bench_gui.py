"""GUI benchmark on a big report: launch, first timeline paint, zoom/pan frame times, peak memory.

Usage::

    .venv/bin/python benchmarks/bench_gui.py bench-data/big.sqlite [--runs 3] [--json out.json]

Each run starts the real app (``python -m gui.app REPORT --view timeline``, as a user would) in a
fresh process under ``QT_QPA_PLATFORM=offscreen`` (unless a display is set and ``--screen`` is
given). The child installs an event filter before the window exists and reports, as wall-clock
times since the parent spawned it:

- window shown: the first paint of the main window;
- report loaded: the engine finished opening and summarizing the report (worker thread);
- timeline painted: the first paint of the timeline canvas with real data in it: the coarse
  overview (busy time per bucket from SQL aggregates, painted first on a big nsys report) or the
  full lanes, whichever comes first; both are also reported on their own ("overview first paint",
  "full lanes first paint").

Then it drives the timeline through 50 scripted zooms and pans (wheel-sized zoom steps at
different places, drags, zoom all the way out and back in) and times each frame from the range
change to the end of a synchronous ``repaint()`` plus ``processEvents()``; the paint itself is
also timed inside ``paintEvent``. Peak memory is the child's maximum resident set size.
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

REPO = Path(__file__).resolve().parents[1]
TARGETS = {  # metric -> (target, unit)
    "window_shown_s": (1.5, "s"),
    "timeline_first_paint_s": (2.0, "s"),
    "frame_p95_ms": (33.0, "ms"),
}


# -- child: runs inside the app's process ------------------------------------------------------------
def child(report: str, spawn_wall: float, out_path: str) -> int:
    import resource

    from PySide6.QtCore import QEvent, QObject, QTimer

    import gui.app as gapp

    marks: dict[str, float] = {}
    frames: list[dict[str, float]] = []
    busy_frames: list[dict[str, float]] = []
    app = gapp._make_app([])

    def mark(name: str) -> None:
        marks.setdefault(name, time.time() - spawn_wall)

    class Spy(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.window = None
            self.canvas = None

        def eventFilter(self, obj, ev):  # noqa: N802 - Qt override
            from gui.main_window import MainWindow

            if ev.type() == QEvent.Type.Paint and hasattr(obj, "window"):
                win = obj.window() if callable(obj.window) else None
                if isinstance(win, MainWindow) and "window_shown_s" not in marks:
                    mark("window_shown_s")
                    self.window = win
                    win.sig_report_opened.connect(self._on_loaded)
                if type(obj).__name__ == "TimelineCanvas" and self.canvas is None:
                    self.canvas = obj
                    obj.sig_painted.connect(self._on_canvas_painted)
            return False

        def _on_loaded(self, _report: object) -> None:
            mark("report_loaded_s")
            # `kernelscope-gui REPORT --view timeline` should already show it, but the window
            # re-selects the first tab when it builds its views; click the tab like a user would.
            if self.window.current_view() != "timeline":
                marks["view_reselected"] = 1.0
                self.window.set_view("timeline")

        def _on_canvas_painted(self, _ms: float) -> None:
            c = self.canvas
            if c is None:
                return
            if getattr(c, "overview", None) is not None:
                mark("overview_first_paint_s")
                mark("timeline_first_paint_s")
            if c.model is not None and "full_first_paint_s" not in marks:
                mark("full_first_paint_s")
                mark("timeline_first_paint_s")
                QTimer.singleShot(0, self.drive_busy)

        def drive_busy(self) -> None:
            """The same sequence at once, while the other views may still work in the background."""
            from gui.workers import running_threads

            marks["busy_threads_at_start"] = float(len(running_threads()))
            busy_frames.extend(zoom_pan_sequence(self.canvas))
            self.settle()

        def settle(self) -> None:
            """Wait until the other views' first background work is done (it holds the GIL)."""
            from gui.workers import running_threads

            busy = [k for k, v in self.window.views.items() if getattr(v, "is_busy", lambda: False)()]
            if (busy or running_threads()) and time.time() - spawn_wall < 90:
                QTimer.singleShot(50, self.settle)
                return
            mark("views_idle_s")
            self.drive()

        def drive(self) -> None:
            try:
                frames.extend(zoom_pan_sequence(self.canvas))
            finally:
                rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                model = self.canvas.model
                result = {
                    "marks": marks, "frames": frames, "busy_frames": busy_frames,
                    "peak_rss_mb": rss_kb / 1024.0,
                    "lanes": {ln.key: len(ln) for ln in model.lanes},
                    "load_s_in_window": getattr(self.window.reports.current, "load_s", None),
                }
                Path(out_path).write_text(json.dumps(result))
                self.window.close()
                app.quit()

    spy = Spy()
    app.installEventFilter(spy)
    QTimer.singleShot(120_000, app.quit)  # never hang a benchmark
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
def run_once(report: Path, screen: bool, tmp: Path) -> dict:
    env = dict(os.environ)
    if not screen:
        env["QT_QPA_PLATFORM"] = "offscreen"
    env.setdefault("KERNELSCOPE_CONFIG", str(tmp / "config"))  # a fresh user: no restored layout
    out = tmp / f"result-{time.time_ns()}.json"
    spawn = time.time()
    cmd = [sys.executable, __file__, "--child", str(report), "--spawn", repr(spawn), "--out", str(out)]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", nargs="?", help="a big report (e.g. bench-data/big.sqlite)")
    ap.add_argument("--runs", type=int, default=3, help="fresh app launches (median is reported)")
    ap.add_argument("--screen", action="store_true", help="use the real display instead of offscreen")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--spawn", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        sys.path.insert(0, str(REPO))
        return child(args.child, args.spawn, args.out)
    if not args.report:
        ap.error("give the report to benchmark, e.g. bench-data/big.sqlite")
    report = Path(args.report).resolve()
    if not report.exists():
        print(f"bench_gui: {report} does not exist; make one with benchmarks/device_make_big_report.sh.",
              file=sys.stderr)
        return 1
    import tempfile

    runs = []
    with tempfile.TemporaryDirectory(prefix="ks-bench-gui-") as tmp:
        for i in range(args.runs):
            r = run_once(report, args.screen, Path(tmp))
            runs.append(r)
            m = r["marks"]
            fr = [f["frame_ms"] for f in r["frames"]]
            print(f"run {i + 1}: window {m.get('window_shown_s', float('nan')):.2f} s, loaded "
                  f"{m.get('report_loaded_s', float('nan')):.2f} s, timeline painted "
                  f"{m.get('timeline_first_paint_s', float('nan')):.2f} s (overview "
                  f"{m.get('overview_first_paint_s', float('nan')):.2f} s, full lanes "
                  f"{m.get('full_first_paint_s', float('nan')):.2f} s), frames p50 {pct(fr, .5):.1f} "
                  f"p95 {pct(fr, .95):.1f} ms, peak RSS {r['peak_rss_mb']:.0f} MB", file=sys.stderr)

    def med(key: str) -> float:
        return statistics.median(r["marks"].get(key, float("nan")) for r in runs)

    frames = [f for r in runs for f in r["frames"]]
    fr = [f["frame_ms"] for f in frames]
    paint = [f["paint_ms"] for f in frames]
    cpu = [f["cpu_ms"] for f in frames]
    busy = [f["frame_ms"] for r in runs for f in r["busy_frames"]]
    agg = [f["frame_ms"] for f in frames if f["aggregated"]]
    det = [f["frame_ms"] for f in frames if not f["aggregated"]]
    res = {
        "report": str(report),
        "events": runs[0]["lanes"],
        "window_shown_s": med("window_shown_s"),
        "report_loaded_s": med("report_loaded_s"),
        "timeline_first_paint_s": med("timeline_first_paint_s"),
        "overview_first_paint_s": med("overview_first_paint_s"),
        "full_first_paint_s": med("full_first_paint_s"),
        "views_idle_s": med("views_idle_s"),
        "timeline_after_load_s": statistics.median(
            r["marks"]["timeline_first_paint_s"] - r["marks"]["report_loaded_s"] for r in runs),
        "frame_p50_ms": pct(fr, 0.5), "frame_p95_ms": pct(fr, 0.95), "frame_max_ms": max(fr),
        "paint_p50_ms": pct(paint, 0.5), "paint_p95_ms": pct(paint, 0.95),
        "frame_cpu_p50_ms": pct(cpu, 0.5), "frame_cpu_p95_ms": pct(cpu, 0.95),
        "aggregated_cpu_p95_ms": pct([f["cpu_ms"] for f in frames if f["aggregated"]], 0.95),
        "detail_cpu_p95_ms": pct([f["cpu_ms"] for f in frames if not f["aggregated"]], 0.95),
        "load_average_1min": os.getloadavg()[0], "cpu_cores": os.cpu_count(),
        "aggregated_frame_p95_ms": pct(agg, 0.95), "detail_frame_p95_ms": pct(det, 0.95),
        "n_frames": len(fr), "n_aggregated_frames": len(agg),
        "busy_frame_p50_ms": pct(busy, 0.5), "busy_frame_p95_ms": pct(busy, 0.95),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "runs": args.runs,
    }
    n_api = sum(v for k, v in res["events"].items() if k.startswith("api:"))
    n_gpu = sum(v for k, v in res["events"].items() if k.startswith("gpu:"))
    print(f"\nKernelscope GUI benchmark: {report.name} ({n_gpu:,} GPU operations, {n_api:,} CUDA API calls), "
          f"median of {args.runs} launches, {res['n_frames']} frames")
    rows = [
        ("window shown after launch", res["window_shown_s"], "s", "window_shown_s"),
        ("report loaded (engine, worker thread)", res["report_loaded_s"], "s", None),
        ("timeline first paint with data", res["timeline_first_paint_s"], "s", "timeline_first_paint_s"),
        ("  of which after the report loaded", res["timeline_after_load_s"], "s", None),
        ("  overview first paint (coarse, real data)", res["overview_first_paint_s"], "s", None),
        ("  full lanes first paint", res["full_first_paint_s"], "s", None),
        ("zoom/pan frame p50 right after first paint", res["busy_frame_p50_ms"], "ms", None),
        ("zoom/pan frame p95 right after first paint", res["busy_frame_p95_ms"], "ms", None),
        ("every view's first background work done", res["views_idle_s"], "s", None),
        ("zoom/pan frame p50 (after that)", res["frame_p50_ms"], "ms", None),
        ("zoom/pan frame p95", res["frame_p95_ms"], "ms", "frame_p95_ms"),
        ("  aggregated frames p95", res["aggregated_frame_p95_ms"], "ms", None),
        ("  event-by-event frames p95", res["detail_frame_p95_ms"], "ms", None),
        ("paintEvent alone p95", res["paint_p95_ms"], "ms", None),
        ("GUI-thread CPU per frame p50", res["frame_cpu_p50_ms"], "ms", None),
        ("GUI-thread CPU per frame p95", res["frame_cpu_p95_ms"], "ms", None),
        ("  aggregated frames CPU p95", res["aggregated_cpu_p95_ms"], "ms", None),
        ("  event-by-event frames CPU p95", res["detail_cpu_p95_ms"], "ms", None),
        ("peak memory (RSS)", res["peak_rss_mb"], "MB", None),
    ]
    print(f"{'measure':42} {'value':>10}  {'target':>9}  result")
    for label, v, unit, key in rows:
        if key is None:
            print(f"{label:42} {v:>8.2f} {unit:<2} {'':>9}  ")
            continue
        target, _u = TARGETS[key]
        ok = v <= target
        res[f"{key}_pass"] = ok
        print(f"{label:42} {v:>8.2f} {unit:<2} {'<= ' + format(target, 'g') + ' ' + unit:>9}  "
              f"{'PASS' if ok else 'FAIL'}")
    print(f"(machine: {res['cpu_cores']} cores, load average {res['load_average_1min']:.1f} at the end; "
          "wall-clock numbers include waiting for a CPU, the CPU rows do not)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
