"""PyTorch view: operators, modules, kernels and GPU memory of a PyTorch program.

Four pages over one background computation (``engine.analysis.pytorch``): the operator table
(grouped by name or by name and input shapes; a click lists the operator's kernels and its call
stack, and "Show on Timeline" zooms the Timeline to its calls), the module tree (forward and
backward apart, summing to the steps), the kernels with their operator and tensor-core use, and
the memory curves (allocated and reserved over time, with what was alive at the peak for a
memory snapshot).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui.documents import OpenReports
from gui.views.base import ReportView
from gui.widgets.labels import muted
from gui.widgets.table import ReadOnlyTable
from gui.workers import LoadedReport

PAGES = ("operators", "modules", "kernels", "memory")


def compute(trace: Any) -> dict[str, Any]:
    """Everything the pages show, computed in a worker thread (engine only, no Qt).

    Each object is kept on disk under the file's identity (engine.analysis.pytorch.kept_results):
    the next open of the same file loads them instead of computing them again. The events
    themselves (a 1 GB trace's: 160 MB pickled) are not read here: only a click on an operator needs
    them (:func:`events_of`).
    """
    from engine.analysis.pytorch import kept_results as kept
    from engine.analysis.pytorch.memory import alive_at_peak

    snapshot = trace.info.kind == "snapshot"
    out: dict[str, Any] = {**kept.views(trace), "alive": None, "snapshot": snapshot}
    curves = out["memory"].curves
    if snapshot and curves:
        out["alive"] = alive_at_peak(trace.columns_, max(curves, key=lambda c: c.peak_allocated))
    return out


def events_of(trace: Any) -> Any:
    """The trace's PyTorch events (built, or loaded from the cache, once per trace)."""
    from engine.analysis.pytorch.events import torch_events

    return torch_events(trace)


def first_call_span(ev: Any, calls: list[int]) -> tuple[int, int] | None:
    """The time span of an operator's first call that ran GPU work: its host range and its kernels."""
    from engine.analysis.pytorch.operators import descendants_gpu

    if not calls:
        return None
    for k, i in enumerate(calls[:50]):
        gpu = descendants_gpu(ev, [i], self_only=k > 0)  # the children of the first only (a full pass)
        if len(gpu):
            return (min(int(ev.start[i]), int(ev.gpu_start[gpu].min())),
                    max(int(ev.end[i]), int(ev.gpu_end[gpu].max())))
    return int(ev.start[calls[0]]), int(ev.end[calls[0]])


#: above this many samples a memory curve is drawn as its per-bucket min/max envelope
PLOT_POINTS = 40_000


def envelope(t: Any, v: Any, buckets: int) -> tuple[Any, Any]:
    """A step curve reduced to ``buckets`` spans: each span's minimum and maximum, in time order
    (so the peak stays exactly on the plot)."""
    import numpy as np

    n = len(v)
    size = -(-n // buckets)
    pad = size * buckets - n
    vv = np.concatenate([np.asarray(v, dtype=np.float64), np.full(pad, np.nan)]).reshape(buckets, size)
    tt = np.concatenate([np.asarray(t, dtype=np.float64), np.full(pad, np.nan)]).reshape(buckets, size)
    lo, hi = np.nanmin(vv, axis=1), np.nanmax(vv, axis=1)
    x = np.repeat(tt[:, 0], 2)
    y = np.column_stack([lo, hi]).ravel()
    keep = ~np.isnan(x)
    return x[keep], y[keep]


def _ms(ns: float) -> float:
    return round(ns / 1e6, 4)


class PytorchView(ReportView):
    """The PyTorch pages (see the module docstring)."""

    key = "pytorch"

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent, title_size=None, margins=(10, 8, 10, 6))
        self._calls = self.latest_call(self._on_result, self._on_error)
        self.result: dict[str, Any] | None = None
        self._trace: Any = None
        #: the pages filled from the current result (the others are filled when first shown)
        self._filled: set[int] = set()
        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_ops(), "Operators")
        self.tabs.addTab(self._build_modules(), "Modules")
        self.tabs.addTab(self._build_kernels(), "Kernels")
        self.tabs.addTab(self._build_memory(), "Memory")
        self.tabs.currentChanged.connect(self._fill_page)
        self.stack.add_page(self.tabs)
        self.vbox.addWidget(self.stack, 1)
        self.status = muted("", wrap=True)
        self.vbox.addWidget(self.status)
        self.start_following()

    # -- pages ---------------------------------------------------------------------------------------
    def _build_ops(self) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 6, 0, 0)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Group by:"))
        self.by = QComboBox()
        self.by.addItem("operator", "name")
        self.by.addItem("operator and input shapes", "shapes")
        bar.addWidget(self.by)
        self.op_filter = QLineEdit()
        self.op_filter.setPlaceholderText("Filter operators…")
        self.op_filter.setClearButtonEnabled(True)
        bar.addWidget(self.op_filter, 1)
        self.to_timeline = QPushButton("Show on Timeline")
        self.to_timeline.setToolTip("Zoom the Timeline to the selected operator's first call and its kernels")
        self.to_timeline.setEnabled(False)
        bar.addWidget(self.to_timeline)
        lay.addLayout(bar)
        split = QSplitter(Qt.Orientation.Vertical)
        self.ops_table = ReadOnlyTable()
        split.addWidget(self.ops_table)
        below = QWidget()
        bl = QHBoxLayout(below)
        bl.setContentsMargins(0, 0, 0, 0)
        self.op_kernels = ReadOnlyTable()
        bl.addWidget(self.op_kernels, 3)
        self.op_stack = QLabel("")
        self.op_stack.setWordWrap(True)
        self.op_stack.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.op_stack.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bl.addWidget(self.op_stack, 2)
        split.addWidget(below)
        split.setSizes([420, 200])
        lay.addWidget(split, 1)
        self.ops_note = muted("")
        lay.addWidget(self.ops_note)
        self.by.currentIndexChanged.connect(lambda _i: self._show_ops())
        self.op_filter.textChanged.connect(self.ops_table.proxy.setFilterFixedString)
        self.ops_table.proxy.setFilterKeyColumn(0)
        self.ops_table.clicked.connect(lambda _i: self._on_op_selected())
        self.to_timeline.clicked.connect(self._on_to_timeline)
        return page

    def _build_modules(self) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 6, 0, 0)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Module", "Calls", "Host (ms)", "GPU (ms)", "GPU %"])
        self.tree.header().setStretchLastSection(False)
        self.tree.setColumnWidth(0, 420)
        for c in range(1, 5):
            self.tree.setColumnWidth(c, 110)
        lay.addWidget(self.tree, 1)
        self.modules_note = muted("")
        lay.addWidget(self.modules_note)
        return page

    def _build_kernels(self) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 6, 0, 0)
        self.tc_label = QLabel("")
        self.tc_label.setWordWrap(True)
        lay.addWidget(self.tc_label)
        self.kernels_table = ReadOnlyTable()
        lay.addWidget(self.kernels_table, 1)
        return page

    def _build_memory(self) -> QWidget:
        page = QWidget()
        self._mem_layout = lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 6, 0, 0)
        self.mem_label = QLabel("")
        self.mem_label.setWordWrap(True)
        lay.addWidget(self.mem_label)
        self.mem_plot: Any = None  # made when the page is first filled (pyqtgraph is slow to import)
        self.alive_table = ReadOnlyTable()
        lay.addWidget(self.alive_table, 2)
        return page

    def _memory_plot(self) -> Any:
        if self.mem_plot is None:
            import pyqtgraph as pg

            self.mem_plot = pg.PlotWidget(background="w")
            self.mem_plot.showGrid(x=True, y=True, alpha=0.2)
            self.mem_plot.setLabel("left", "GPU memory (MiB)")
            self.mem_plot.setLabel("bottom", "time from the trace start (ms)")
            self.mem_plot.addLegend(offset=(10, 10))
            self._mem_layout.insertWidget(1, self.mem_plot, 3)
        return self.mem_plot

    # -- report --------------------------------------------------------------------------------------
    def on_report(self, report: LoadedReport | None) -> None:
        self.result = None
        self._trace = None if report is None else report.trace
        if report is None:
            self.show_placeholder("Open a PyTorch profiler trace, an nsys report of a PyTorch program or "
                                  "a memory snapshot to see its operators, modules, kernels and memory.")
            return
        if report.is_ncu:
            self.show_placeholder(f"{report.name} is an Nsight Compute report: the PyTorch pages need a "
                                  "timeline (a Kineto trace or an nsys report) or a memory snapshot.")
            self.sig_ready.emit()
            return
        if id(report) not in self._calls.cache:
            self.show_placeholder(f"Reading the PyTorch operators of {report.name}…")
        self._calls.request(id(report), compute, report.trace)

    def _on_result(self, key: Any, result: dict[str, Any]) -> None:
        if not self.current_is(key):
            return
        self.result = result
        self._filled.clear()
        self.stack.show_page(self.tabs)
        snapshot = result["snapshot"]
        for i in range(3):
            self.tabs.setTabEnabled(i, not snapshot)
        if snapshot and self.tabs.currentIndex() != 3:
            self.tabs.setCurrentIndex(3)  # fills it
        else:
            self._fill_page(self.tabs.currentIndex())
        self.sig_ready.emit()

    def _fill_page(self, index: int) -> None:
        """Fill page ``index`` from the result once (the page on screen first, the others when shown)."""
        if self.result is None or index in self._filled or index < 0 or not self.tabs.isTabEnabled(index):
            return
        self._filled.add(index)
        (self._show_ops, self._show_modules, self._show_kernels, self._show_memory)[index]()

    def _on_error(self, key: Any, msg: str) -> None:
        if self.current_is(key):
            self.show_placeholder(msg)
            self.sig_message.emit(msg)
            self.sig_ready.emit()

    # -- operators -----------------------------------------------------------------------------------
    def _show_ops(self) -> None:
        import pandas as pd

        if self.result is None or self.result.get("ops") is None:
            return
        table = self.result["ops"][self.by.currentData()]
        total = table.gpu_ns or 1
        rows = [{"Operator": r.key, "Kind": r.kind, "Calls": r.calls, "Host total (ms)": _ms(r.host_total_ns),
                 "Host self (ms)": _ms(r.host_self_ns), "GPU self (ms)": _ms(r.gpu_self_ns),
                 "GPU total (ms)": _ms(r.gpu_total_ns), "GPU self %": round(100.0 * r.gpu_self_ns / total, 2),
                 "Kernels": r.gpu_ops, "Input types": r.dtypes} for r in table.rows]
        self.ops_table.set_frame(pd.DataFrame(rows))
        self.ops_table.resizeColumnsToContents()
        self.ops_table.setColumnWidth(0, min(max(self.ops_table.columnWidth(0), 260), 520))
        linked = 100.0 * table.linked_gpu_ns / table.gpu_ns if table.gpu_ns else 0.0
        notes = [f"{len(table.rows):,} rows; GPU time {table.gpu_ns / 1e6:,.3f} ms, {linked:.1f} % launched "
                 "inside a recorded operator. Self GPU time: the kernels an operator launched itself; "
                 "total adds its child operators'."] + table.notes
        self.ops_note.setText(" ".join(notes))
        self.op_kernels.set_frame(None)
        self.op_stack.setText("Click an operator to see its kernels and where it was called.")
        self.to_timeline.setEnabled(False)

    def selected_op(self) -> str | None:
        idx = self.ops_table.selectionModel().selectedRows() if self.ops_table.selectionModel() else []
        if not idx:
            return None
        src = self.ops_table.proxy.mapToSource(idx[0])
        value = self.ops_table.source.raw(src.row(), 0)
        return None if value is None else str(value)

    def select_op(self, key: str) -> None:
        """Select the operator row ``key`` (as a click would)."""
        names = self.ops_table.column("Operator")
        row = names.index(key)
        proxy_row = self.ops_table.proxy.mapFromSource(self.ops_table.source.index(row, 0)).row()
        self.ops_table.selectRow(proxy_row)
        self._on_op_selected()

    def _on_op_selected(self) -> None:
        import pandas as pd

        from engine.analysis.pytorch.operators import (
            call_stack,
            calls_of,
            descendants_gpu,
            forward_of,
            op_kernels,
        )

        key = self.selected_op()
        if key is None or self.result is None:
            return
        ev = events_of(self._trace)
        table = self.result["ops"][self.by.currentData()]
        calls = calls_of(ev, table, key)
        gpu = descendants_gpu(ev, calls)
        rows = [{"Kernel": k["name"], "Count": k["count"], "Total (ms)": _ms(k["total_ns"]),
                 "Mean (us)": round(k["mean_ns"] / 1e3, 2)} for k in op_kernels(ev, gpu)]
        self.op_kernels.set_frame(pd.DataFrame(rows) if rows else None)
        self.op_kernels.resizeColumnsToContents()
        self.op_kernels.setColumnWidth(0, min(self.op_kernels.columnWidth(0), 460))
        stack: list[str] = []
        for i in calls[:200]:  # a call made from Python (backward calls run on autograd's thread)
            stack = call_stack(ev, i)
            if stack:
                break
        if not stack and calls:  # a backward-pass operator: where its forward operator was called
            fwd = forward_of(ev, calls[0])
            if fwd >= 0:
                stack = [f"(backward of {ev.label(fwd)}, whose forward call was:)", *call_stack(ev, fwd)]
        shapes = table.row(key).shapes
        text = [f"<b>{key}</b> — {len(calls):,} call(s), {len(gpu):,} GPU operation(s) with its children."]
        if shapes:
            text.append(f"Input shapes: {shapes}")
        text.append("<b>Called from</b> (innermost first):<br>" + "<br>".join(stack) if stack else
                    "No call stack was recorded (torch.profiler with_stack=True records one).")
        self.op_stack.setText("<br>".join(text))
        self._selected_span = first_call_span(ev, calls)
        self.to_timeline.setEnabled(bool(calls))

    def _on_to_timeline(self) -> None:
        span = getattr(self, "_selected_span", None)
        if span is not None:
            self.sig_link.emit("timeline", {"range_ns": span})

    # -- modules, kernels, memory ----------------------------------------------------------------------
    def _show_modules(self) -> None:
        tree = self.result.get("modules") if self.result else None
        self.tree.clear()
        if tree is None:
            return
        total = tree.root.gpu_ns or 1

        def add(parent: Any, node: Any) -> None:
            item = QTreeWidgetItem([node.label, f"{node.calls:,}", f"{node.host_ns / 1e6:,.3f}",
                                    f"{node.gpu_ns / 1e6:,.3f}", f"{100.0 * node.gpu_ns / total:.1f}"])
            for c in range(1, 5):
                item.setTextAlignment(c, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            (parent.addChild if isinstance(parent, QTreeWidgetItem) else parent.addTopLevelItem)(item)
            for child in node.children.values():
                add(item, child)

        add(self.tree, tree.root)
        self.tree.expandToDepth(3)
        self.modules_note.setText(" ".join([tree.sum_sentence(), f"Modules from: {tree.modules_from}.",
                                            *tree.notes]))

    def _show_kernels(self) -> None:
        import pandas as pd

        kt = self.result.get("kernels") if self.result else None
        if kt is None:
            return
        rows = [{"Kernel": r.name, "Calls": r.calls, "Total (ms)": _ms(r.total_ns),
                 "Mean (us)": round(r.mean_ns / 1e3, 2), "Share %": round(100 * r.share, 2),
                 "Tensor cores": "yes" if r.tensor_cores
                 else ("no (CUDA cores)" if r.cuda_core_math else "no"),
                 "Operator": r.op, "Outer operator": r.top_op, "Grid": r.grid, "Block": r.block}
                for r in kt.rows]
        self.kernels_table.set_frame(pd.DataFrame(rows) if rows else None)
        self.kernels_table.resizeColumnsToContents()
        self.kernels_table.setColumnWidth(0, min(max(self.kernels_table.columnWidth(0), 280), 520))
        self.tc_label.setText(
            f"<b>{100 * kt.tensor_share:.1f} %</b> of the kernel time ({kt.kernel_ns / 1e6:,.3f} ms) ran in "
            f"kernels that use tensor cores; {kt.cuda_core_math_ns / 1e6:,.3f} ms of matrix math ran on CUDA "
            "cores (from the kernels' names: wgmma/hmma/nvjet/tf32 vs sgemm/simt/f32f32).")

    def _show_memory(self) -> None:
        import numpy as np
        import pandas as pd
        import pyqtgraph as pg

        tl = self.result["memory"] if self.result else None
        plot = self._memory_plot()
        plot.clear()
        if tl is None:
            return
        colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
        lines = [tl.measures]
        for k, c in enumerate(tl.curves):
            if not len(c.time_ns):
                continue
            tag = f"GPU {c.device} " if len(tl.curves) > 1 else ""
            for series, name, style in ((c.allocated, "allocated", Qt.PenStyle.SolidLine),
                                        (c.reserved, "reserved", Qt.PenStyle.DashLine)):
                if series is None:
                    continue
                pen = pg.mkPen(colors[k % len(colors)], width=1.5, style=style)
                if len(series) > PLOT_POINTS:  # millions of allocator events: the peak of each pixel's span
                    x, y = envelope(c.time_ns, series, PLOT_POINTS // 2)
                    plot.plot(x / 1e6, y / 2**20, name=f"{tag}{name}", pen=pen)
                else:
                    x = np.append(c.time_ns, c.time_ns[-1]) / 1e6
                    y = np.asarray(series, dtype=np.float64) / 2**20
                    plot.plot(x, y, stepMode="center", name=f"{tag}{name}", pen=pen)
            i = c.peak_index
            if i >= 0:
                plot.addLine(x=c.time_ns[i] / 1e6, pen=pg.mkPen("#888", style=Qt.PenStyle.DotLine))
                peak = c.peak_allocated if c.allocated is not None else c.peak_reserved
                reserved = "" if c.reserved is None else f"; peak reserved {c.peak_reserved / 2**20:,.1f} MiB"
                lines.append(f"GPU {c.device}: peak {'allocated' if c.allocated is not None else 'reserved'} "
                             f"<b>{peak / 2**20:,.1f} MiB</b> ({peak:,} bytes) "
                             f"at {c.time_ns[i] / 1e6:,.3f} ms{reserved}.")
        self.mem_label.setText("<br>".join([*lines, *tl.notes]))
        alive = self.result.get("alive") if self.result else None
        if alive:
            self.alive_table.set_frame(pd.DataFrame([{"Alive at the peak, allocated at": a["where"],
                                                      "Blocks": a["blocks"],
                                                      "MiB": round(a["bytes"] / 2**20, 2)}
                                                     for a in alive]))
            self.alive_table.resizeColumnsToContents()
            self.alive_table.setColumnWidth(0, 720)
            self.alive_table.show()
        else:
            self.alive_table.set_frame(None)
            self.alive_table.hide()

    def show_page(self, page: str) -> None:
        """Show one of :data:`PAGES`."""
        self.tabs.setCurrentIndex(PAGES.index(page))
