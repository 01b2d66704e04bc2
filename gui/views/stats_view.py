"""Statistics view: the nsys-style reports (``nsys stats``) as sortable, filterable tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QItemSelectionModel, Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from gui.documents import OpenReports
from gui.views.base import ReportView
from gui.widgets.labels import muted
from gui.widgets.table import ReadOnlyTable
from gui.widgets.table_model import RAW_ROLE
from gui.workers import LoadedReport

DEFAULT_REPORT = "cuda_gpu_kern_sum"
#: text columns with names longer than this are elided around what tells their rows apart
LONG_TEXT = 40


def load_stats_module() -> Any:
    """``engine.analysis.nsys.stats``, or None while it is not part of this build."""
    try:
        from engine.analysis.nsys import stats
    except ImportError:
        return None
    if not hasattr(stats, "REPORTS") or not hasattr(stats, "run"):
        return None
    return stats


class StatsView(ReportView):
    """Pick a report, see it as a table; sort by any column, filter, copy, export CSV.

    Each table is computed in a worker thread; while one runs, only the latest request waits
    (the latest wins), and results are cached per report file.
    """

    key = "stats"
    #: (report name) emitted when a table is on screen (or when it failed / is unavailable);
    #: sig_ready follows it.
    sig_table_ready = Signal(str)

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent, title_size=None, margins=(10, 10, 10, 6))
        self.reports: OpenReports = reports
        self.sig_table_ready.connect(lambda _name: self.sig_ready.emit())
        self.stats = load_stats_module()
        # one table per (report, name), cached; while one is computed only the latest request waits
        self._calls = self.latest_call(self._on_result, self._on_error)
        self.current_name: str | None = None
        #: column -> the delegate that elides its long names (see _elide_names)
        self._delegates: dict[int, Any] = {}

        lay = self.vbox
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Report:"))
        self.combo = QComboBox()
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        bar.addWidget(self.combo)
        bar.addSpacing(16)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter rows (any column)…")
        self.filter.setClearButtonEnabled(True)
        self.filter.setMinimumWidth(260)
        bar.addWidget(self.filter, 1)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the selected cells as tab-separated text (Ctrl+C)")
        self.export_button = QPushButton("Export CSV…")
        bar.addWidget(self.copy_button)
        bar.addWidget(self.export_button)
        lay.addLayout(bar)
        self.description = muted("")
        lay.addWidget(self.description)

        self.table = ReadOnlyTable(rows=False)  # cells: copy any rectangle as TSV
        self.model, self.proxy = self.table.source, self.table.proxy
        self.table.horizontalHeader().setSortIndicatorShown(True)
        self.stack.add_page(self.table)
        lay.addWidget(self.stack, 1)
        self.status = muted("", wrap=False)
        lay.addWidget(self.status)

        if self.stats is None:
            self.combo.setEnabled(False)
            self.filter.setEnabled(False)
            self.export_button.setEnabled(False)
            self.copy_button.setEnabled(False)
        else:
            for name, desc in self.stats.REPORTS.items():
                self.combo.addItem(name, name)
                self.combo.setItemData(self.combo.count() - 1, desc, Qt.ItemDataRole.ToolTipRole)
            i = self.combo.findData(DEFAULT_REPORT)
            self.combo.setCurrentIndex(max(i, 0))

        self.combo.currentIndexChanged.connect(self._on_report_chosen)
        self.filter.textChanged.connect(self._on_filter)
        self.copy_button.clicked.connect(self.copy_selection)
        self.export_button.clicked.connect(self._on_export_clicked)
        copy_sc = QShortcut(QKeySequence(QKeySequence.StandardKey.Copy), self.table)
        copy_sc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        copy_sc.activated.connect(self.copy_selection)
        self.start_following()

    # -- public --------------------------------------------------------------------------------
    def select_report(self, name: str) -> None:
        i = self.combo.findData(name)
        if i < 0:
            raise KeyError(name)
        if i == self.combo.currentIndex():
            self._on_report_chosen(i)
        else:
            self.combo.setCurrentIndex(i)

    def copy_selection(self) -> str:
        """Copy the selected cells (raw values, tab-separated, in on-screen order) to the clipboard."""
        sel = self.table.selectionModel().selectedIndexes()
        if not sel:
            return ""
        rows = sorted({i.row() for i in sel})
        cols = sorted({i.column() for i in sel})
        chosen = {(i.row(), i.column()) for i in sel}
        lines = []
        for r in rows:
            vals = []
            for c in cols:
                if (r, c) not in chosen:
                    vals.append("")
                    continue
                v = self.proxy.index(r, c).data(RAW_ROLE)
                if isinstance(v, float) and v.is_integer():
                    v = int(v)
                vals.append("" if v is None else str(v))
            lines.append("\t".join(vals))
        text = "\n".join(lines)
        QGuiApplication.clipboard().setText(text)
        self.status.setText(f"Copied {len(chosen):,} cells.")
        return text

    def export_csv(self, path: str | Path) -> Path:
        """Write the current table (all rows, unfiltered) as nsys-style CSV."""
        df = self.model.df
        if df is None or self.stats is None:
            raise ValueError("there is no table to export")
        path = Path(path)
        try:
            path.write_text(self.stats.to_csv(df))
        except OSError as exc:
            msg = f"Could not write {path} ({exc.strerror}); choose another place."
            self.sig_message.emit(msg)
            raise
        self.sig_message.emit(f"Exported {self.current_name} ({len(df):,} rows) to {path}.")
        return path

    # -- slots ---------------------------------------------------------------------------------
    def on_report(self, report: LoadedReport | None) -> None:
        if self.stats is None:
            self._show_placeholder(
                "Statistics are not available in this build (the engine's statistics module is missing)."
            )
            self.sig_table_ready.emit("")
            return
        if report is None:
            self.model.set_frame(None)
            self._show_placeholder("Open a report to see its statistics.")
            return
        if report.is_ncu:
            self.model.set_frame(None)
            self._show_placeholder(f"{report.name} is an Nsight Compute report: it holds kernels profiled "
                                   "one at a time, with no timeline for nsys statistics. See the Kernels "
                                   "and Roofline views.")
            self.sig_table_ready.emit("")
            return
        self._request(report, self.combo.currentData())

    def _on_report_chosen(self, _index: int) -> None:
        name = self.combo.currentData()
        if self.stats is not None and name:
            self.description.setText(self.stats.REPORTS.get(name, ""))
        if self.reports.current is not None and name and not self.reports.current.is_ncu:
            self._request(self.reports.current, name)

    def _on_filter(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)
        self._update_status()

    def _on_export_clicked(self) -> None:
        if self.model.df is None:
            return
        base = self.reports.current.path.stem if self.reports.current else "report"
        path, _ = QFileDialog.getSaveFileName(self, "Export CSV", f"{base}_{self.current_name}.csv",
                                              "CSV files (*.csv);;All files (*)")
        if path:
            try:
                self.export_csv(path)
            except OSError:
                pass

    # -- computing tables in the background -------------------------------------------------------
    def _request(self, report: LoadedReport, name: str) -> None:
        if self.stats is not None:
            self.description.setText(self.stats.REPORTS.get(name, ""))
        key = (id(report), name)
        if key not in self._calls.cache:
            self._show_placeholder(f"Computing {name}…")
        self._calls.request(key, self.stats.run, report.trace, name, "frame")

    def _on_result(self, key: tuple[int, str], df: Any) -> None:
        rep_id, name = key
        if self.current_is(rep_id) and self.combo.currentData() == name:
            self._show_frame(name, df)

    def _on_error(self, key: tuple[int, str], msg: str) -> None:
        _, name = key
        self.sig_message.emit(f"{name}: {msg}")
        self._show_placeholder(msg)
        self.sig_table_ready.emit(name)

    # -- display ---------------------------------------------------------------------------------
    def _show_placeholder(self, text: str) -> None:
        self.show_placeholder(text)
        self.copy_button.setEnabled(False)
        self.status.setText("")

    def _show_frame(self, name: str, df: Any) -> None:
        self.current_name = name
        if df is None or not len(df):
            self.model.set_frame(df)
            why = self._why_empty(name)
            self._show_placeholder(f"{name} has no rows for this report: {why}.")
            self.export_button.setEnabled(False)
            self.sig_table_ready.emit(name)
            return
        self.model.set_frame(df)
        self._elide_names(df)
        self.table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.proxy.sort(-1)
        self.stack.show_page(self.table)
        self.export_button.setEnabled(True)
        self.copy_button.setEnabled(True)
        self._fit_columns()
        self._update_status()
        self.table.selectionModel().clearSelection()
        self.table.selectionModel().setCurrentIndex(self.proxy.index(0, 0),
                                                    QItemSelectionModel.SelectionFlag.NoUpdate)
        self.sig_table_ready.emit(name)

    def _elide_names(self, df: Any) -> None:
        """Long-text columns (kernel names) keep the part that tells their rows apart when cut.

        Cut in the middle, "sm80_xmma_gemm_f32f32_f32f3…4_execute_kernel__5x_cublas" reads the
        same for six GEMMs; :class:`~gui.widgets.elide.DistinctElideDelegate` keeps their
        "nn_n_tilesize128x128x8" instead. The tooltip has the full name.
        """
        from gui.widgets.elide import DistinctElideDelegate, source_column

        for c in list(self._delegates):
            self.table.setItemDelegateForColumn(c, None)  # type: ignore[arg-type]  # Qt accepts None
        self._delegates.clear()
        for c, name in enumerate(df.columns):
            col = df[name]
            if col.dtype.kind == "O" and col.astype(str).str.len().max() > LONG_TEXT:
                d = DistinctElideDelegate(source_column(self.proxy, c), self.table)
                self.table.setItemDelegateForColumn(c, d)
                self._delegates[c] = d

    def _fit_columns(self) -> None:
        self.table.resizeColumnsToContents()
        hh = self.table.horizontalHeader()
        for c in range(self.model.columnCount() - 1):  # the last one stretches
            hh.resizeSection(c, min(max(hh.sectionSize(c) + 12, 70), 520))

    def _update_status(self) -> None:
        total = self.model.rowCount()
        shown = self.proxy.rowCount()
        if shown == total:
            text = f"{total:,} row" if total == 1 else f"{total:,} rows"
        else:
            text = f"{shown:,} of {total:,} rows match the filter"
        self.status.setText(text)

    def _why_empty(self, name: str) -> str:
        report = self.reports.current
        if report is None or self.stats is None:
            return "no report"
        why: str = self.stats.why_empty(report.trace, name)
        return why
