"""Timeline view: CUDA API calls per CPU thread, kernels / copies / memsets per GPU stream, NVTX
ranges and GPU metrics on one time axis, with hover tooltips, a details panel and a link to the
kernel's Nsight Compute results when an ncu report of the same run is open.

The lanes are built once per report in a worker thread (:func:`gui.timeline.kept_model.timeline_model`)
and kept while the report is open; the canvas draws level-of-detail from them. A big Nsight
Systems report (more than ``overview_min_events`` CUDA events) is read in stages from its columnar
cache (:mod:`gui.timeline.columnar`): the GPU lanes are painted as soon as they are read, the CUDA
API lanes, then NVTX and GPU metrics, join them keeping the visible range; the status line says
what is still being read and for how long.
"""

from __future__ import annotations

import html
import time
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from gui.documents import OpenReports
from gui.timeline import columnar as tcol
from gui.timeline import model as tm
from gui.timeline.kept_model import timeline_model
from gui.timeline.style import facts
from gui.views.base import ReportView
from gui.widgets.labels import MUTED, WrapLabel, heading
from gui.widgets.timeline_canvas import TimelineCanvas
from gui.workers import Job, LoadedReport, Worker

HINT = "Wheel: zoom · drag: pan · right-drag: zoom to range · click: details · Home: all"


LEGEND = (("Kernel", 0), ("H→D", 1), ("D→H", 2), ("D→D", 3), ("Memset", 5), ("Sync", 6),
          ("Copy call", 7), ("Launch", 8), ("Alloc/free", 9), ("Other API", 10), ("NVTX", 11))
#: zoomed out, API calls (all categories) and copies (all directions) are drawn merged, in colours of
#: their own
COVERAGE_LEGEND = "API (zoomed out)"
COPY_COVERAGE_LEGEND = "Copies (zoomed out)"


def legend_html() -> str:
    """Colour squares with what each colour means."""
    from gui.timeline.style import API_COVERAGE_COLOR, COPY_COVERAGE_COLOR, PALETTE

    entries = [(PALETTE[i], name) for name, i in LEGEND] + [
        (COPY_COVERAGE_COLOR, COPY_COVERAGE_LEGEND), (API_COVERAGE_COLOR, COVERAGE_LEGEND)]
    return "&nbsp;&nbsp;".join(
        f"<span style='color:{color}'>■</span>&nbsp;{html.escape(name)}" for color, name in entries)


class BuildWorker(Worker):
    """Build the timeline lanes of one report in the worker thread."""

    def __init__(self, report: LoadedReport) -> None:
        super().__init__()
        self.report = report

    def work(self) -> Any:
        return self.report, timeline_model(self.report.trace, self.cancel_event)


#: the stages of a big report's timeline: (stage, what it reads, what the later stages still read)
STAGES = (
    ("gpu", "kernels, copies and memsets", "CUDA API calls, NVTX ranges and GPU metrics"),
    ("api", "CUDA API calls", "NVTX ranges and GPU metrics"),
    ("rest", "NVTX ranges and GPU metrics", ""),
)


class StageWorker(Worker):
    """Load one stage of a big nsys report's timeline (gui.timeline.columnar) in the worker thread."""

    def __init__(self, report: LoadedReport, timeline: tcol.ColumnarTimeline, stage: int,
                 started: Any = None) -> None:
        super().__init__()
        self.report, self.timeline, self.stage = report, timeline, stage
        self.started = started  # the future of this stage when the loader started it already

    def work(self) -> Any:
        name, what, later = STAGES[self.stage]
        cold = name != "rest" and not self.timeline.cached(name)
        note = " (first open: building this report's column cache; later opens read it back)" if cold else ""
        self.sig_progress.emit(f"Reading the {what}{note}…")
        if self.started is not None:
            while not self.started.done():  # started while the window built its views
                self.check_cancel()
                time.sleep(0.01)
            self.started.result()  # its error, if any
        else:
            getattr(self.timeline, f"load_{name}")(self.cancel_event)
        return self.report, self.timeline.model(f"reading the {later}…" if later else "")


#: CUDA events (API calls, kernels, copies, memsets) above which the timeline is read in stages
#: from the columnar cache (gui.timeline.columnar), GPU lanes first
OVERVIEW_MIN_EVENTS = tcol.BIG_EVENTS


def steps_of(report: LoadedReport) -> Any:
    """The steps the report's summary chose (the engine's, cached per trace), or None (no summary yet)."""
    if not report.summary_ready:
        return None
    it = report.summary.iterations
    if it is None or report.in_child():
        # a report big enough for its summary to be computed in a child process: finding its steps
        # here again would cost the window gigabytes (big10m: 5M steps from 35M GPU operations, +3 GB)
        return None
    if report.trace.info.kind == "kineto":  # kept on disk with the PyTorch results: a second open loads them
        from engine.analysis.pytorch.kept_results import summary_steps
    else:
        from engine.analysis.steps import summary_steps

    return next((st for st in summary_steps(report.trace, it) if st.pid == it.pid), None)


def overview_source(report: LoadedReport, min_events: int) -> Any:
    """The SQLite export of ``report`` when it is a big nsys report (read in stages); else None."""
    if not tcol.is_big(report.trace, report.table_rows, min_events):
        return None
    return report.trace.info.sqlite_path


class TimelineView(ReportView):
    """The timeline of the current report plus a details panel for the clicked event.

    "Show in Kernels view" emits ``sig_link("kernels", hit)`` with the ncu result (a dict with the ncu
    report's path, ID and kernel name).
    """

    key = "timeline"
    shows_summary_later = True  # the steps' ruler and the first zoom to the steady steps

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent, title_size=None, margins=(10, 8, 10, 8))
        self.reports: OpenReports = reports
        self._models: dict[int, tm.TimelineModel] = {}
        self._job: Job | None = None
        self._old_jobs: list[Job] = []
        self._shown: LoadedReport | None = None
        self.overview_min_events = OVERVIEW_MIN_EVENTS
        self.current_event: dict[str, Any] | None = None
        self.current_ncu: dict[str, Any] | None = None
        self._stage_text = ""
        self._t_stages = 0.0
        #: reports whose GPU lanes the loader had started to read (LoadWorker's prefetch)
        self.prefetched_used = 0
        self._tick = QTimer(self)  # the elapsed seconds of a big report's stages, in the status line
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._on_tick)

        lay = self.vbox
        lay.addLayout(self._header_bar())
        self.status = WrapLabel("", muted=True)
        lay.addWidget(self.status)

        self.canvas = TimelineCanvas()
        side = self._details_side()
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.addWidget(self.canvas)
        self.split.addWidget(side)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 0)
        self.split.setSizes([1300, 260])  # the details panel: narrow until an event is clicked
        self.stack.add_page(self.split)
        self.stack.show_page(self.split)
        lay.addWidget(self.stack, 1)
        # The legend (with the zoomed-out colours) and the mouse hint on two lines: on one, the hint
        # was cut at its start once the legend had grown.
        self.legend = QLabel(legend_html())
        self.legend.setToolTip("Zoomed out, a pale band marks columns with any event and the solid "
                               "bar how busy the lane was in that column.")
        self.hint = QLabel(HINT)
        self.hint.setStyleSheet(f"color: {MUTED};")
        self.hint.setToolTip(HINT)
        for lab in (self.legend, self.hint):  # never let a long line widen the window
            lab.setMinimumWidth(1)
            lab.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
            lay.addWidget(lab)
        self._show_details(None)

        self.btn_in.clicked.connect(lambda: self.canvas.zoom(2.0))
        self.btn_out.clicked.connect(lambda: self.canvas.zoom(0.5))
        self.btn_fit.clicked.connect(self.canvas.fit)
        self.canvas.sig_range_changed.connect(self._on_range_changed)
        self.canvas.sig_event_clicked.connect(self._on_event_clicked)
        self.ncu_button.clicked.connect(self._on_show_in_kernels)
        reports.sig_added.connect(self._on_added)
        reports.sig_summary_ready.connect(self._on_summary_ready)
        self._zoomed: set[int] = set()  # reports whose timeline was opened on their steady steps
        self.start_following()

    def _header_bar(self) -> QHBoxLayout:
        """The title, the shown range and the zoom buttons."""
        bar = QHBoxLayout()
        self.title = heading("Timeline", 3)
        bar.addWidget(self.title)
        bar.addStretch(1)
        self.range_label = QLabel("")
        self.range_label.setStyleSheet(f"color: {MUTED};")
        bar.addWidget(self.range_label)
        self.btn_out = QPushButton("−")
        self.btn_out.setToolTip("Zoom out (-)")
        self.btn_in = QPushButton("+")
        self.btn_in.setToolTip("Zoom in (+)")
        self.btn_fit = QPushButton("Show all")
        self.btn_fit.setToolTip("Show the whole capture (Home)")
        for b in (self.btn_out, self.btn_in):
            b.setFixedWidth(34)
        for b in (self.btn_out, self.btn_in, self.btn_fit):
            bar.addWidget(b)
        return bar

    def _details_side(self) -> QWidget:
        """The details panel of the clicked event, with the link to its Nsight Compute result."""
        self.details = QTextBrowser()
        self.details.setOpenLinks(False)
        self.details.setMinimumWidth(260)
        self.ncu_button = QPushButton("Show in Kernels view")
        self.ncu_button.setEnabled(False)
        self.ncu_button.setToolTip("Open an Nsight Compute report of this run to link its kernels")
        side = QWidget()
        side_lay = QVBoxLayout(side)
        side_lay.setContentsMargins(0, 0, 0, 0)
        side_lay.addWidget(heading("Details", 1))
        side_lay.addWidget(self.details, 1)
        side_lay.addWidget(self.ncu_button)
        return side

    # -- hooks used by the window and --screenshot ------------------------------------------------
    def is_busy(self) -> bool:
        return self._job is not None

    def shutdown(self) -> None:
        for job in [self._job, *self._old_jobs]:
            if job is not None:
                job.stop()
        self._job = None
        self._old_jobs.clear()

    @property
    def model(self) -> tm.TimelineModel | None:
        return self.canvas.model

    # -- report changes ---------------------------------------------------------------------------
    def show_link(self, payload: object) -> None:
        """Zoom to ``{"range_ns": (start, end)}`` (from the PyTorch view's "Show on Timeline")."""
        if isinstance(payload, dict) and "range_ns" in payload:
            a, b = payload["range_ns"]
            pad = max((b - a) * 0.02, 1000.0)
            self.canvas.set_range(float(a) - pad, float(b) + pad)

    def on_report(self, report: LoadedReport | None) -> None:
        self._shown = report
        self._show_details(None)
        self.stack.show_page(self.split)
        self.legend.show()
        self.hint.show()
        if report is None:
            self.canvas.set_model(None)
            self.title.setText("Timeline")
            self.status.setText("Open a report to see its timeline.")
            return
        self.title.setText(f"Timeline — {report.name}")
        if report.is_ncu:
            self.canvas.set_model(None)
            self.status.setText("")
            self.legend.hide()
            self.hint.hide()
            self.show_placeholder(
                f"{report.name} is an Nsight Compute report: its kernels were profiled one at a time, "
                "so there is no timeline to draw. The Kernels and Roofline views show it.\n\nOpen an "
                "Nsight Systems report or PyTorch trace of the same run to see its timeline; its kernels "
                "then link to these results.")
            self.sig_ready.emit()
            return
        cached = self._models.get(id(report))
        if cached is not None:
            self._show_model(cached)
            return
        self.canvas.set_model(None)
        self.status.setText(f"Preparing the timeline of {report.name}…")
        if self._job is not None:  # the latest report wins; the old build is cancelled
            self._job.cancel()
            self._old_jobs.append(self._job)
            self._job = None
        prefetched, report.timeline_prefetch = report.timeline_prefetch, None  # used once
        if prefetched is None and overview_source(report, self.overview_min_events) is None:
            self._start_build(report)
            return
        self._t_stages = time.perf_counter()
        if prefetched is not None:  # the loader found it big and started its GPU lanes
            self.prefetched_used += 1
            self._run_stage(report, prefetched[0], 0, prefetched[1])
        else:
            self._run_stage(report, tcol.ColumnarTimeline(report.trace), 0)

    def _run_stage(self, report: LoadedReport, timeline: tcol.ColumnarTimeline, stage: int,
                   started: Any = None) -> None:
        """Start stage ``stage`` of a big report's timeline; the next starts when it is shown."""
        job = Job(StageWorker(report, timeline, stage, started), self)
        self._job = job
        job.sig_progress.connect(self._on_stage_progress)
        job.sig_finished.connect(self._on_stage)
        job.sig_errored.connect(self._on_build_failed)
        job.sig_done.connect(lambda j=job: self._on_stage_done(j, report, timeline, stage))
        self._stage_text = ""
        self._tick.start()
        job.start()

    def _on_stage_progress(self, msg: str) -> None:
        self._stage_text = msg
        self._on_tick()

    def _on_tick(self) -> None:
        if self._job is None or not self._stage_text:
            self._tick.stop()
            return
        msg = f"{self._stage_text} {time.perf_counter() - self._t_stages:.0f} s"
        if self.canvas.model is None:
            self.status.setText(msg)
            self.canvas.set_message(msg)
        else:
            self._show_model(self.canvas.model, msg)

    def _on_stage(self, result: tuple[LoadedReport, tm.TimelineModel]) -> None:
        report, model = result
        if not model.pending and report in self.reports.reports:
            self._models[id(report)] = model
        if report is self._shown:
            self.canvas.set_model(model, keep_range=self.canvas.model is not None)
            self._show_model(model)

    def _on_stage_done(self, job: Job, report: LoadedReport, timeline: tcol.ColumnarTimeline,
                       stage: int) -> None:
        if job is self._job:
            self._job = None
            ok = job.worker.cancel_event.is_set() is False and len(timeline.loaded) == stage + 1
            if (ok and stage + 1 < len(STAGES) and report is self._shown
                    and report in self.reports.reports):
                self._run_stage(report, timeline, stage + 1)
            else:
                self._tick.stop()
                self.sig_ready.emit()
        elif job in self._old_jobs:
            self._old_jobs.remove(job)
        job.deleteLater()

    def _start_build(self, report: LoadedReport) -> None:
        job = Job(BuildWorker(report), self)
        self._job = job
        job.sig_finished.connect(self._on_built)
        job.sig_errored.connect(self._on_build_failed)
        job.sig_done.connect(lambda j=job: self._on_job_done(j))
        job.start()

    def _on_built(self, result: tuple[LoadedReport, tm.TimelineModel]) -> None:
        report, model = result
        if report in self.reports.reports:
            self._models[id(report)] = model
        if report is self._shown:
            self._show_model(model)

    def _on_build_failed(self, msg: str) -> None:
        self.status.setText(f"The timeline could not be built: {msg}")
        self.sig_message.emit(f"Timeline: {msg}")

    def _on_job_done(self, job: Job) -> None:
        if job is self._job:
            self._job = None
            self.sig_ready.emit()
        elif job in self._old_jobs:
            self._old_jobs.remove(job)
        job.deleteLater()

    def on_removed(self, report: LoadedReport) -> None:
        self._models.pop(id(report), None)
        self._refresh_ncu()

    def _on_added(self, _report: LoadedReport) -> None:
        self._refresh_ncu()  # a newly opened ncu report may link the selected kernel

    def _show_model(self, model: tm.TimelineModel, pending: str = "") -> None:
        if self.canvas.model is not model:
            self.canvas.set_model(model)
        if self._shown is not None and self._shown.summary_ready:  # (never computed here: a GUI-thread wait)
            self._apply_steps(self._shown)
        c = model.counts()
        n_lanes = {g: sum(1 for ln in model.lanes if ln.group == g) for g in c}
        parts = [f"{c['api']:,} CUDA API calls on {n_lanes['api']} CPU thread(s)",
                 f"{c['gpu']:,} GPU operations on {n_lanes['gpu']} stream(s)"]
        if model.pending and not n_lanes["api"]:  # not read yet (a big report's first stage)
            parts = parts[1:]
        if n_lanes["nvtx"]:
            parts.append(f"{c['nvtx']:,} NVTX ranges")
        n_memory = sum(1 for ln in model.lanes if ln.key.startswith("memory:"))
        if n_lanes["metric"] - n_memory:
            parts.append(f"{n_lanes['metric'] - n_memory} GPU metrics")
        if n_memory:
            parts.append(f"{n_memory} GPU memory lane{'s' if n_memory > 1 else ''}")
        text = "; ".join(parts) + "."
        if model.missing:
            text += " " + " ".join(model.missing)
        pending = pending or (f"Still {model.pending}" if model.pending else "")
        self.status.setText(f"{text} {pending}" if pending else text)

    # -- steps -------------------------------------------------------------------------------------------
    def _on_summary_ready(self, report: LoadedReport) -> None:
        if report is self._shown and self.canvas.model is not None:
            self._apply_steps(report)

    def _apply_steps(self, report: LoadedReport) -> None:
        """The summary's steps as the step ruler; the first time, zoomed to the steady steps."""
        st = steps_of(report)
        if st is None:
            self.canvas.set_steps(None)
            return
        state = np.where(st.outlier_mask, 2, np.where(~st._steady_mask, 1, 0)).astype(np.int8)
        self.canvas.set_steps(st.starts_ns, st.ends_ns, state)
        if id(report) not in self._zoomed:
            self._zoomed.add(id(report))
            if self.canvas.visible_range() == self.canvas._fit_range:  # the user has not zoomed yet
                self.canvas.show_steady_steps(3)

    # -- range and selection ------------------------------------------------------------------------
    def _on_range_changed(self, t0: float, t1: float) -> None:
        from gui import format as fmt

        m = self.canvas.model
        if m is None:
            self.range_label.setText("")
            return
        self.range_label.setText(f"{fmt.duration(max(t0, 0))} – {fmt.duration(t1)}"
                                 f"  ({fmt.duration(t1 - t0)} shown)")

    def _on_event_clicked(self, rec: dict[str, Any] | None) -> None:
        self._show_details(rec)

    def _show_details(self, rec: dict[str, Any] | None) -> None:
        self.current_event = rec
        if rec is None:
            self.details.setHtml(f"<p style='color:{MUTED}'>Click an event in the timeline to see "
                                 "its details here.</p>")
            self.current_ncu = None
            self.ncu_button.setEnabled(False)
            return
        rows = "".join(
            f"<tr><td style='color:{MUTED}; padding-right:10px'>{html.escape(k)}</td>"
            f"<td>{html.escape(v)}</td></tr>" for k, v in facts(rec)
        )
        self.details.setHtml(f"<p><b>{html.escape(str(rec['name']))}</b></p><table>{rows}</table>"
                             + self._ncu_html(rec))

    def _ncu_html(self, rec: dict[str, Any]) -> str:
        self.current_ncu = self.find_ncu(rec)
        self.ncu_button.setEnabled(self.current_ncu is not None)
        if rec["kind"] != "kernel":
            return ""
        hit = self.current_ncu
        if hit is None:
            return (f"<p style='color:{MUTED}'>No Nsight Compute data for this launch: open an "
                    ".ncu-rep of the same run to link its kernels.</p>")
        dur = hit.get("duration_ns")
        from gui import format as fmt

        return (f"<p>Nsight Compute: result {hit.get('ID')} in {html.escape(hit['ncu_report'])}"
                f" ({fmt.duration(dur)} under ncu).</p>")

    def find_ncu(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """The ncu result of this kernel launch in any open ncu report (by name and launch order)."""
        m = self.canvas.model
        if rec.get("kind") != "kernel" or m is None:
            return None
        open_ncu = [rep for rep in self.reports.reports if rep.is_ncu]
        if not open_ncu:
            return None
        launch = m.launch_index(int(rec["row"]))  # a big report's: counted in SQLite, so only here
        for rep in open_ncu:
            hit = rep.ncu_result(str(rec["name"]), rec.get("shortName"), launch)
            if hit is not None:
                hit["ncu_report"] = rep.name
                hit["ncu_path"] = str(rep.path)
                hit["launch_index"] = launch
                return hit
        return None

    def _refresh_ncu(self) -> None:
        if self.current_event is not None:
            self._show_details(self.current_event)

    def _on_show_in_kernels(self) -> None:
        hit = self.current_ncu
        if hit is not None:
            # the receiver may switch reports (which clears the selection here): keep our copy
            self.sig_message.emit(f"Timeline: {hit.get('Kernel Name', '')} → Nsight Compute result "
                                  f"{hit.get('ID')} in {hit.get('ncu_report')}")
            self.sig_link.emit("kernels", dict(hit))
