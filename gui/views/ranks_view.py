"""Ranks view: the ranks of a multi-GPU job on one time axis, where each step went, and the straggler.

One row per rank (its steps as bands, its GPU work, its NCCL kernels on their own lane), per-rank
bars of compute / NCCL wait / other NCCL / idle per step, the straggler marked in red with its
evidence, and a click on a rank opens that rank's report in the Timeline. The job is the current
report's: the other open reports named ``NAME_rank<N>`` in the same folder join it (the view offers
that when it sees them), or one report that holds several processes. Jobs and their reports are
ordered by rank number N (numerically), whatever order they loaded in.

Every number is the engine's (``RankRow.means()``, the straggler's fields) in the CLI's words
(``engine.analysis.ranks.text``): the headline, the table, the bars and ``kernelscope ranks`` agree.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.analysis.ranks.text import LEGEND, ms_cell
from gui.documents import OpenReports
from gui.format import is_missing, is_number
from gui.views.base import ReportView
from gui.views.ranks_heatmap import WaitHeatMap
from gui.widgets.axes import PlainAxis, style_plot, tick_font
from gui.widgets.labels import WrapLabel, swatch
from gui.widgets.table import ReadOnlyTable
from gui.widgets.table_model import DataFrameModel, _Index
from gui.workers import LoadedReport

COLORS = {"compute": "#1f5fa8", "nccl": "#e8871e", "wait": "#c0392b", "idle": "#c8ced6",
          "band_a": "#eef3f9", "band_b": "#f9fbfd", "straggler": "#fdecea"}
#: lanes are drawn with at most about this many blocks each (closer blocks merge, like a pixel would)
MAX_BLOCKS = 4000
#: at most this many note details in the notes' tooltip
MAX_TOOLTIP_DETAILS = 40
#: a job of more ranks than this shows the straggler and the ranks that wait most, the others folded
FOLD_AT = 16
#: steps are drawn as bands on the time plot up to this many per rank (the heat map shows more)
MAX_BANDS = 2000
#: the table shows this many rows at most (it scrolls)
MAX_TABLE_ROWS = 12


def rank_order(path: str) -> tuple[Any, ...]:
    """Sort key of a report in a job: its rank number N of ``NAME_rank<N>`` (numerically), then its path
    with numbers compared as numbers (``rank2`` before ``rank10``, the same order on every run)."""
    import re

    from engine.analysis.ranks.load import RANK_IN_NAME

    m = RANK_IN_NAME.search(Path(path).name)
    natural = tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", path))
    return (int(m.group(1)) if m else -1, natural)


def job_groups(reports: list[LoadedReport]) -> list[list[LoadedReport]]:
    """Open timeline reports grouped into jobs (``NAME_rank<N>`` of one folder together).

    Each job's reports are in rank order (:func:`rank_order`) and the jobs in the order of their
    first report's path: the same on every run, whichever report loaded last.
    """
    from engine.sessions.batch import jobs_of

    usable = [r for r in reports if not r.is_ncu]
    by_path = {str(r.path): r for r in usable}
    groups = jobs_of(sorted(by_path))
    # jobs_of keeps one of an .nsys-rep/.sqlite pair; a report it dropped stays a job of its own
    kept = {p for g in groups for p in g}
    groups += [[p] for p in by_path if p not in kept]
    groups = [sorted(g, key=rank_order) for g in groups]
    groups.sort(key=lambda g: rank_order(g[0])[1])
    return [[by_path[p] for p in g] for g in groups]


class RankTableModel(DataFrameModel):
    """The rank table's model: durations in ms with two decimals, as the CLI and the headline."""

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and index.isValid():
            v = self.raw(index.row(), index.column())
            if self.column_names()[index.column()] in TABLE_COLUMNS and is_number(v) and not is_missing(v):
                return ms_cell(float(v) * 1e6)
        return super().data(index, role)


#: the Steps combo's first entry: the steps each rank's GPU work shows (engine.analysis.stepfind)
AUTO_STEPS = "found from the GPU's work"


def compute(traces: list[Any], range_name: str | None = None) -> Any:
    """The analysis the view shows (runs in a worker thread).

    The engine reads each report's ranks once, in reader processes, and keeps them in its cache
    (``engine.analysis.ranks.store``): a 64-rank job opened again lines up from the cache.
    """
    from engine.analysis.ranks import analyze_paths

    return analyze_paths([str(t.info.path) for t in traces], range_name=range_name)


def step_choices(traces: list[Any]) -> list[str]:
    """What the Steps combo offers: the automatic steps, then the NVTX ranges that repeat in the job."""
    from engine.analysis.steps import range_names

    seen: dict[str, None] = {}
    for t in traces:
        try:
            for name in range_names(t):
                seen.setdefault(name, None)
        except Exception:  # noqa: BLE001 - a report without NVTX offers none
            continue
    return [AUTO_STEPS, *seen]


def coarse(starts: Any, ends: Any, max_blocks: int = MAX_BLOCKS) -> tuple[Any, Any]:
    """Merge blocks closer than span / max_blocks (level of detail for drawing)."""
    s, e = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    if len(s) <= max_blocks:
        return s, e
    gap = max(1, int((e.max() - s.min()) // max_blocks))
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] - e[:-1] > gap
    idx = np.flatnonzero(new)
    return s[idx], np.append(e[idx[1:] - 1], e[-1])


#: the table's per-step columns, headed as ``kernelscope ranks`` heads them: heading -> key of
#: RankRow.means() ("median": the median step)
TABLE_COLUMNS = {"Step ms": "step_ns", "Median ms": "median", "Compute ms": "compute_ns",
                 "NCCL ms": "nccl_ns", "Wait ms": "wait_ns", "Exposed ms": "exposed_wait_ns",
                 "Idle ms": "idle_ns", "Host ms": "host_ns"}


def rank_frame(res: Any) -> Any:
    """The rank table as the view shows it: per-step means in ms (the median step apart), by rank."""
    import pandas as pd

    rows = []
    for r in res.ranks:
        means = r.means()
        strag = res.straggler is not None and res.straggler.rank == r.rank
        row: dict[str, Any] = {"Rank": r.rank, "GPU": r.device, "Host": r.host or "",
                               "Report": Path(r.report).name, "Steps": r.steps}
        for head, key in TABLE_COLUMNS.items():
            ns = r.step_median_ns if key == "median" else means[key]
            row[head] = None if ns is None else ns / 1e6
        row[""] = "straggler" if strag else ""
        rows.append(row)
    return pd.DataFrame(rows)


def notes_tooltip(res: Any) -> str:
    """The details behind the notes (the long lists), for a tooltip; "" without any."""
    details = list(res.details)
    if not details:
        return ""
    more = len(details) - MAX_TOOLTIP_DETAILS
    return "\n".join(details[:MAX_TOOLTIP_DETAILS] + ([f"… {more} more (kernelscope ranks --json)"]
                                                       if more > 0 else []))


def _column(steps: Any, name: str) -> Any:
    """One StepCost field of every step, as an array (StepCosts hold arrays; a tuple is converted)."""
    from engine.analysis.ranks.model import StepCosts

    return StepCosts.of(steps).column(name)


def steady_range_ms(res: Any) -> tuple[float, float] | None:
    """(first steady step's start, last step's end) over all ranks, in ms; None without steps."""
    starts = [_column(r.counted_steps, "start_ns") for r in res.ranks]
    ends = [_column(r.per_step, "end_ns") for r in res.ranks]
    starts = [a for a in starts if len(a)]
    ends = [a for a in ends if len(a)]
    if not starts or not ends:
        return None
    return min(int(a.min()) for a in starts) / 1e6, max(int(a.max()) for a in ends) / 1e6


def median_step_ns(res: Any) -> int:
    """The job's median step (ns): the median over the ranks of each rank's median step (its mean step
    where a rank has no median); the heat map's colours are waits as shares of it."""
    steps = [r.step_median_ns if r.step_median_ns else r.step_ns for r in res.ranks]
    steps = [s for s in steps if s and s > 0]
    return int(np.median(steps)) if steps else 0


TIME_TITLE = "Ranks on one clock — click a rank to open its timeline"


def titled(plot: QWidget, title: str) -> tuple[QWidget, QLabel]:
    """``plot`` under a one-line ``title`` (a label: it never crops), and the label."""
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 4, 0, 0)
    lay.setSpacing(0)
    label = QLabel(title)
    label.setAlignment(Qt.AlignmentFlag.AlignHCenter)
    label.setStyleSheet("color: #2c3e50;")
    lay.addWidget(label)
    lay.addWidget(plot, 1)
    return box, label


def shown_ranks(res: Any, grid: Any, show_all: bool) -> tuple[list[Any], list[Any]]:
    """(the rows drawn, the rows folded): every rank in rank order, or past FOLD_AT ranks, the straggler
    and the ranks that wait most (the heat map's first rows) with the others folded."""
    if show_all or grid is None or len(res.ranks) <= FOLD_AT:
        return list(res.ranks), []
    from engine.analysis.ranks.heat import SHOWN

    by_rank = {r.rank: r for r in res.ranks}
    first = [by_rank[k] for k in grid.ranks[:SHOWN]]
    return first, [by_rank[k] for k in grid.ranks[SHOWN:]]


class RanksView(ReportView):
    key = "ranks"

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent)
        import pyqtgraph as pg

        self._pg = pg
        self.reports: OpenReports = reports
        self.result: Any = None
        self.job: list[LoadedReport] = []
        self._range: str | None = None
        self._calls = self.latest_call(self._on_result, self._on_error)
        self.vbox.addLayout(self._build_top_bar())
        self.offer = WrapLabel(muted=True)
        self.vbox.addWidget(self.offer)
        self.headline = WrapLabel()
        self.vbox.addWidget(self.headline)
        self.evidence = WrapLabel(muted=True)
        self.vbox.addWidget(self.evidence)
        self.vbox.addWidget(self.stack, 1)

        self._body = self.stack.add_page(self._build_body(pg))
        #: for tests: rank -> row y on the time plot; rank -> (compute, nccl wait, other nccl, idle) ms
        self.rows_y: dict[int, float] = {}
        self.bars_ms: dict[int, tuple[float, float, float, float]] = {}
        self.x_range_ms: tuple[float, float] | None = None
        self.wait_blocks = 0
        #: the heat map's rows (engine.analysis.ranks.heat), and the ranks folded into its last row
        self.grid: Any = None
        self.folded: list[int] = []
        self._offered: set[tuple[str, ...]] = set()
        self.reports.sig_added.connect(lambda _r: self._refresh_jobs())
        self.start_following()

    def _build_top_bar(self) -> QHBoxLayout:
        """The job and steps choosers and the fold switch."""
        top = QHBoxLayout()
        top.addWidget(QLabel("Job:"))
        self.job_combo = QComboBox()
        self.job_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.job_combo.activated.connect(self._on_job_chosen)
        top.addWidget(self.job_combo)
        top.addSpacing(16)
        top.addWidget(QLabel("Steps:"))
        self.steps_combo = QComboBox()
        self.steps_combo.setEditable(True)  # a range name, or marker:TEXT (a GPU operation's name)
        self.steps_combo.setMinimumWidth(260)
        self.steps_combo.setToolTip("The steps every rank is measured in: found from each rank's GPU work, "
                                    "or an NVTX range that repeats, or type marker:TEXT to start a step at "
                                    "each GPU operation named like TEXT (CLI: kernelscope ranks --range).")
        self.steps_combo.activated.connect(self._on_steps_chosen)
        top.addWidget(self.steps_combo)
        top.addSpacing(16)
        self.show_all = QCheckBox("Show all ranks")
        self.show_all.setToolTip(f"Past {FOLD_AT} ranks the view shows the straggler and the ranks that "
                                 "wait most, the others folded into one row (their median); tick to show "
                                 "every rank.")
        self.show_all.toggled.connect(self._on_fold_toggled)
        self.show_all.setVisible(False)
        top.addWidget(self.show_all)
        top.addStretch(1)
        return top

    def _build_body(self, pg: Any) -> QWidget:
        """The heat map, the ranks on one clock, where each step went and the table."""
        body = QWidget()
        blay = QVBoxLayout(body)
        blay.setContentsMargins(0, 0, 0, 0)
        blay.addLayout(self._legend())
        font = tick_font(self.font())
        split = QSplitter(Qt.Orientation.Vertical)
        self.time_plot = pg.PlotWidget(background="w", axisItems={"bottom": PlainAxis("bottom")})
        self.bar_plot = pg.PlotWidget(background="w")
        for p in (self.time_plot, self.bar_plot):
            style_plot(p.getPlotItem(), font)
        self.time_plot.setLabel("bottom", "time since capture start (ms; the earliest rank's capture)")
        self.bar_plot.setLabel("bottom", "per step, mean of the steady steps (ms)")
        # titles above the plots, not in them: a plot given less than its items' height crops its scene
        # (the title went under the plot above's axis)
        time_box, self.time_title = titled(self.time_plot, TIME_TITLE)
        self.bar_box, _bar_title = titled(self.bar_plot, "Where each rank's step went")
        self.time_plot.scene().sigMouseClicked.connect(self._on_click)
        self.heat = WaitHeatMap()
        self.heat.sig_fold_clicked.connect(lambda: self.show_all.setChecked(True))
        split.addWidget(self.heat)
        split.addWidget(time_box)
        split.addWidget(self.bar_box)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 3)
        split.setStretchFactor(2, 2)
        self.table = ReadOnlyTable(RankTableModel(), elide=False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        split.addWidget(self.table)  # in the splitter: a job of many ranks scrolls its table
        split.setStretchFactor(3, 2)
        # at most what a 1600x1000 window has room for beside a 4-rank table (more: the splitter
        # lays its sections over each other)
        for w, h in ((self.heat, 150), (time_box, 150), (self.bar_box, 140)):
            w.setMinimumHeight(h)
        blay.addWidget(split, 1)
        self.legend_text = WrapLabel("(" + LEGEND + ")", muted=True)
        blay.addWidget(self.legend_text)
        self.clock = WrapLabel(muted=True)
        blay.addWidget(self.clock)
        return body

    @staticmethod
    def _legend() -> QHBoxLayout:
        legend = QHBoxLayout()
        for key, text in (("compute", "compute (GPU work)"), ("nccl", "NCCL kernels"),
                          ("wait", "NCCL wait for the last rank"), ("idle", "GPU idle"),
                          ("band_a", "steps")):
            legend.addWidget(swatch(COLORS[key]))
            legend.addWidget(QLabel(text))
            legend.addSpacing(12)
        legend.addStretch(1)
        return legend

    # -- the job ------------------------------------------------------------------------------------
    def _refresh_jobs(self) -> None:
        groups = job_groups(self.reports.reports)
        self.job_combo.blockSignals(True)
        self.job_combo.clear()
        for g in groups:
            label = g[0].name if len(g) == 1 else f"{g[0].name} … {g[-1].name} ({len(g)} reports)"
            self.job_combo.addItem(label, g)
        self.job_combo.blockSignals(False)
        multi = [g for g in groups if len(g) > 1]
        text = " ".join(f"{len(g)} open reports look like the ranks of one job ({g[0].name} … {g[-1].name}): "
                        "they are shown together here." for g in multi)
        self.offer.setText(text)
        self.offer.setVisible(bool(text))
        for g in multi:  # say it once per job in the log, wherever the user is looking
            key = tuple(sorted(str(r.path) for r in g))
            if key not in self._offered:
                self._offered.add(key)
                self.sig_message.emit(f"{len(g)} open reports look like the ranks of one job "
                                      f"({g[0].name} … {g[-1].name}); the Ranks view lines them up.")

    def _group_of(self, report: LoadedReport) -> list[LoadedReport]:
        for i in range(self.job_combo.count()):
            g = self.job_combo.itemData(i)
            if report in g:
                self.job_combo.setCurrentIndex(i)
                return list(g)
        return [report]

    def _on_job_chosen(self, index: int) -> None:
        g = self.job_combo.itemData(index)
        if g:
            self._show_job(list(g))

    def on_report(self, report: LoadedReport | None) -> None:
        self._refresh_jobs()
        if report is None:
            self.set_title("Ranks", None)
            self.headline.setText("")
            self.evidence.setText("")
            self.show_placeholder("Open the per-rank reports of a multi-GPU job (or one report recorded "
                                  "around torchrun) to line its ranks up.")
            return
        if report.is_ncu:
            self.set_title("Ranks", report)
            self.show_placeholder(f"{report.name} is an Nsight Compute report: it has no timeline to line "
                                  "ranks up on. Open nsys reports or PyTorch traces of each rank.")
            self.sig_ready.emit()
            return
        if self.job and report in self.job and self.result is not None:
            return  # another rank of the job shown: same picture
        self._show_job(self._group_of(report))

    def _show_job(self, job: list[LoadedReport], range_name: str | None = None) -> None:
        if job is not self.job:
            self.steps_combo.blockSignals(True)
            self.steps_combo.clear()
            for name in step_choices([r.trace for r in job]):
                self.steps_combo.addItem(name)
            self.steps_combo.blockSignals(False)
        self.job = job
        self.result = None
        self.title.setText(f"Ranks — {job[0].name}" + (f" and {len(job) - 1} more" if len(job) > 1 else ""))
        self.headline.setText("Lining the ranks up…" if range_name is None
                              else f"Lining the ranks up in steps of {range_name}…")
        self.evidence.setText("")
        self._range = range_name
        self._calls.request(self._key(), compute, [r.trace for r in job], range_name)

    def _key(self) -> tuple[Any, ...]:
        """The job and the steps asked for (each pair is computed once)."""
        return (*(id(r) for r in self.job), self._range)

    def _on_steps_chosen(self, _index: int) -> None:
        if not self.job:
            return
        text = self.steps_combo.currentText().strip()
        self._show_job(self.job, None if not text or text == AUTO_STEPS else text)

    def on_removed(self, report: LoadedReport) -> None:
        super().on_removed(report)
        if report in self.job:
            self.job = []
            self.result = None

    def _on_result(self, key: Any, res: Any) -> None:
        if key != self._key():
            return
        self.show_result(res)
        self.sig_ready.emit()

    def _on_error(self, key: Any, msg: str) -> None:
        self.sig_message.emit(f"Ranks: {msg}")
        self.headline.setText("")
        self.show_placeholder(msg)
        self.sig_ready.emit()

    # -- drawing ------------------------------------------------------------------------------------
    def show_result(self, res: Any) -> None:
        from engine.analysis.ranks.text import straggler_parts

        self.result = res
        s = res.straggler
        notes = " ".join(res.notes) + (" (Hover for the list.)" if res.details else "")
        tip = notes_tooltip(res)
        if s is not None:
            who, what = straggler_parts(res)
            cause = f" Its extra time: {s.cause}." if s.cause else ""
            self.headline.setText(f"<b style='color:#c0392b'>{html.escape(who)}</b> — {html.escape(what)}"
                                  f"{html.escape(cause)}")
            self.evidence.setText("\n".join("• " + e for e in s.evidence))
            self.evidence.setToolTip("")
        else:
            self.headline.setText(f"No straggler among {len(res.ranks)} rank(s).")
            self.evidence.setText(notes)
            self.evidence.setToolTip(tip)
        self.clock.setText("Clock: " + res.clock.sentence + ("  " + notes if s else ""))
        self.clock.setToolTip(tip if s else "")
        self.stack.show_page(self._body)
        from engine.analysis.ranks.heat import wait_grid

        self.grid = wait_grid(res)
        self.show_all.setVisible(len(res.ranks) > FOLD_AT)
        self._draw(res)
        self.table.set_frame(rank_frame(res))
        if len(res.ranks) <= MAX_TABLE_ROWS:
            self.table.fit_height()
        else:  # a job of many ranks: the table scrolls under the plots
            self.table.resizeRowsToContents()
            self.table.setMinimumHeight(0)
            self.table.setMaximumHeight(16_777_215)
            self.table.setMinimumHeight(self.table.horizontalHeader().height() + 4 * max(
                self.table.rowHeight(0), 18))

    def _on_fold_toggled(self, _checked: bool) -> None:
        if self.result is not None:
            self._draw(self.result)

    def _draw(self, res: Any) -> None:
        """The heat map, the time plot and the bars, with the ranks past FOLD_AT folded (unless shown)."""
        from engine.analysis.ranks.heat import SHOWN

        shown, folded = shown_ranks(res, self.grid, self.show_all.isChecked())
        self.folded = [r.rank for r in folded]
        if self.grid is not None:
            if folded:
                labels, rows = self.grid.folded(SHOWN)
                fold_row = len(labels) - 1
            else:
                labels, rows, fold_row = [f"rank {r}" for r in self.grid.ranks], self.grid.wait_ns, -1
            strag = res.straggler.rank if res.straggler is not None else None
            labels = [f"⚠ {t}" if strag is not None and t == f"rank {strag}" else t for t in labels]
            self.heat.set_rows(labels, rows, self.grid.steps, fold_row, median_step_ns(res))
        self.heat.setVisible(self.grid is not None)
        self._draw_time(res, shown)
        self._draw_bars(res, shown, folded)
        # many ranks: the heat map and the table say what the bars would (the room goes to them)
        self.bar_box.setVisible(len(res.ranks) <= FOLD_AT)

    def _row_label(self, r: Any, res: Any) -> str:
        gpu = f" · GPU {r.device}" if r.device is not None else ""
        strag = res.straggler is not None and res.straggler.rank == r.rank
        return f"{'⚠ ' if strag else ''}rank {r.rank}{gpu}"

    def _draw_time(self, res: Any, shown: list[Any]) -> None:
        pg = self._pg
        plot = self.time_plot
        plot.clear()
        self.rows_y.clear()
        lanes = {ln.rank: ln for ln in res.lanes}
        ticks = []
        for i, r in enumerate(shown):
            y = -float(i)
            self.rows_y[r.rank] = y
            ticks.append((y, self._row_label(r, res)))
            starts, ends = _column(r.per_step, "start_ns"), _column(r.per_step, "end_ns")
            if res.straggler is not None and res.straggler.rank == r.rank and len(starts):
                lo, hi = float(starts.min()) / 1e6, float(ends.max()) / 1e6
                if hi > lo:
                    plot.addItem(pg.BarGraphItem(x0=[lo], x1=[hi], y0=[y - 0.5], y1=[y + 0.5],
                                                 brush=COLORS["straggler"], pen=None))
            if 0 < len(starts) <= MAX_BANDS:  # more steps than that: the heat map shows them
                x0, x1 = starts / 1e6, ends / 1e6
                brushes = [COLORS["band_a"] if k % 2 == 0 else COLORS["band_b"] for k in range(len(x0))]
                plot.addItem(pg.BarGraphItem(x0=x0, x1=x1, y0=np.full(len(x0), y - 0.45), height=0.9,
                                             brushes=brushes, pen=pg.mkPen("#b8c7da", width=0.5)))
            ln = lanes.get(r.rank)
            if ln is None:
                continue
            lanes_of_rank = (((ln.compute_start, ln.compute_end), 0.05, 0.4, COLORS["compute"]),
                             ((ln.nccl_start, ln.nccl_end), -0.4, -0.05, COLORS["nccl"]))
            for (st, en), lo_y, hi_y, color in lanes_of_rank:
                cs, ce = coarse(st, en)
                if len(cs):
                    plot.addItem(pg.BarGraphItem(x0=cs / 1e6, x1=ce / 1e6, y0=np.full(len(cs), y + lo_y),
                                                 height=hi_y - lo_y, brush=color, pen=None))
        self._draw_waits(res)
        ax = plot.getPlotItem().getAxis("left")
        ax.setTicks([ticks])
        plot.getPlotItem().setYRange(-len(shown) + 0.4, 0.6, padding=0.02)
        hidden = len(res.ranks) - len(shown)
        # folded: no title (the room goes to the rows); the axis says which ranks are drawn
        self.time_title.setVisible(not hidden)
        plot.setLabel("bottom", "time since capture start (ms; the earliest rank's capture)" + (
            f" — {len(shown)} of {len(res.ranks)} ranks: the straggler and the ranks that wait most; "
            "click one to open its timeline" if hidden else ""))
        self.x_range_ms = steady_range_ms(res)
        if self.x_range_ms is not None:  # the steady steps, not the start-up before them
            plot.getPlotItem().setXRange(*self.x_range_ms, padding=0.01)
        else:
            plot.getPlotItem().autoRange()

    def _draw_waits(self, res: Any) -> None:
        """Red over the NCCL lane: each rank's kernel, from its start until the last rank started."""
        pg = self._pg
        x0: list[Any] = []
        x1: list[Any] = []
        ys: list[Any] = []
        self.wait_blocks = 0
        table = res.collectives
        if hasattr(table, "waits"):  # columns (engine.analysis.ranks.model.CollectiveTable)
            latest = table.start_ns + table.skew_ns
            for j, rank in enumerate(table.ranks):
                if rank not in self.rows_y:
                    continue
                w = table.waits[:, j]
                hit = w > 0
                self.wait_blocks += int(hit.sum())
                s, e = coarse(latest[hit] - w[hit], latest[hit])
                x0.append(s / 1e6)
                x1.append(e / 1e6)
                ys.append(np.full(len(s), self.rows_y[rank] - 0.4))
        else:
            for c in table:
                top = c.start_ns + c.start_skew_ns
                for rank, wait in c.waits_ns.items():
                    if wait > 0 and int(rank) in self.rows_y:
                        x0.append(np.array([(top - wait) / 1e6]))
                        x1.append(np.array([top / 1e6]))
                        ys.append(np.array([self.rows_y[int(rank)] - 0.4]))
                        self.wait_blocks += 1
        if x0:
            self.time_plot.addItem(pg.BarGraphItem(x0=np.concatenate(x0), x1=np.concatenate(x1),
                                                   y0=np.concatenate(ys), height=0.35, brush=COLORS["wait"],
                                                   pen=None))

    def _draw_bars(self, res: Any, shown: list[Any], folded: list[Any]) -> None:
        pg = self._pg
        plot = self.bar_plot
        plot.clear()
        self.bars_ms.clear()
        ticks = []
        rows: list[tuple[str, tuple[float, float, float, float], str, int | None]] = []
        for r in shown:
            m = r.means()
            parts = (m["compute_ns"] / 1e6, m["wait_ns"] / 1e6, max(0, m["nccl_ns"] - m["wait_ns"]) / 1e6,
                     m["idle_ns"] / 1e6)
            self.bars_ms[r.rank] = parts
            rows.append((self._row_label(r, res), parts, f"{ms_cell(r.step_ns)} ms", r.rank))
        if folded:  # the folded ranks as one bar: their mean
            means = [r.means() for r in folded]
            avg = {k: float(np.mean([m[k] for m in means])) for k in means[0]}
            parts = (avg["compute_ns"] / 1e6, avg["wait_ns"] / 1e6,
                     max(0.0, avg["nccl_ns"] - avg["wait_ns"]) / 1e6, avg["idle_ns"] / 1e6)
            rows.append((f"{len(folded)} more ranks (mean)", parts, f"{ms_cell(avg['step_ns'])} ms", None))
        for i, (label, parts, text_value, _rank) in enumerate(rows):
            y = -float(i)
            left = 0.0
            for value, key in zip(parts, ("compute", "wait", "nccl", "idle"), strict=True):
                if value > 0:
                    plot.addItem(pg.BarGraphItem(x0=[left], width=[value], y=[y], height=0.6,
                                                 brush=COLORS[key], pen=None))
                left += value
            text = pg.TextItem(text_value, color="#2c3e50", anchor=(0, 0.5))
            text.setPos(left, y)
            plot.addItem(text)
            ticks.append((y, label))
        plot.getPlotItem().getAxis("left").setTicks([ticks])
        widest = max((sum(p) for _, p, _, _ in rows), default=1.0)
        plot.getPlotItem().setXRange(0, widest * 1.12, padding=0)
        plot.getPlotItem().setYRange(-len(rows) + 0.5, 0.5, padding=0.05)

    # -- click: that rank's timeline ------------------------------------------------------------------
    def rank_at(self, y: float) -> int | None:
        """The rank whose row contains the plot's ``y``."""
        for rank, ry in self.rows_y.items():
            if abs(y - ry) <= 0.5:
                return rank
        return None

    def open_rank(self, rank: int) -> None:
        """Make that rank's report current and show it in the Timeline."""
        if self.result is None:
            return
        row = next((r for r in self.result.ranks if r.rank == rank), None)
        if row is None:
            return
        report = next((r for r in self.job if row.report in (str(r.path), str(r.trace.info.path))), None)
        if report is None:
            return
        self.reports.set_current(report)
        self.sig_message.emit(f"Ranks: rank {rank} is {report.name}" +
                              (f", process {row.pid}" if row.pid is not None else "") + ".")
        self.sig_link.emit("timeline", {"rank": rank, "pid": row.pid})

    def _on_click(self, ev: Any) -> None:
        vb = self.time_plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(ev.scenePos()):
            return
        rank = self.rank_at(vb.mapSceneToView(ev.scenePos()).y())
        if rank is not None:
            self.open_rank(rank)
