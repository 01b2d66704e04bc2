"""Info view: what the file is, who wrote it, which tables it has and what it lacks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFormLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from gui import format as fmt
from gui.documents import OpenReports
from gui.views.base import ReportView
from gui.widgets.labels import heading, muted
from gui.workers import LoadedReport

if TYPE_CHECKING:
    from engine.reports.ncu import NcuReport


def _selectable(text: str) -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return lab


def ncu_producer(report: LoadedReport) -> str:
    """'Nsight Compute (report format 7), read with ncu-report 2026.3.1': what an .ncu-rep tells of
    its writer (the file stores its format version, not the ncu release that wrote it)."""
    ncu = report.ncu
    if ncu is None:
        return "Nsight Compute"
    if ncu.source != "ncu-rep":
        return "Nsight Compute (CSV export: ncu --import … --csv)"
    from engine.reports.ncu import report_format_version

    try:
        fmt_version = report_format_version(report.path)
    except OSError:
        fmt_version = None
    try:
        from importlib.metadata import version

        reader = f", read with ncu-report {version('ncu-report')}"
    except Exception:  # noqa: BLE001 - only decoration
        reader = ""
    fmt_text = f" (report format {fmt_version})" if fmt_version is not None else ""
    return f"Nsight Compute{fmt_text}{reader}"


def ncu_total_memory(ncu: NcuReport) -> int | None:
    """The profiled GPU's memory (``device__attribute_total_memory``); runs in a worker thread, since
    reading that attribute decodes the whole report."""
    k = ncu.kernels
    if not len(k):
        return None
    v = ncu.value(int(k.iloc[0]["ID"]), "device__attribute_total_memory")
    return None if v is None else int(v)


def gpu_text(gpu: dict[str, object]) -> str:
    """'NVIDIA H200 (132 SMs, 150.1 GB)'; the parts a report did not record are left out."""
    parts = []
    if gpu.get("smCount") is not None:
        parts.append(f"{gpu.get('smCount')} SMs")
    mem = gpu.get("totalMemory")
    if isinstance(mem, (int, float)) and mem == mem and mem > 0:
        parts.append(fmt.nbytes(mem))
    name = str(gpu.get("name") or "unnamed GPU")
    return f"{name} ({', '.join(parts)})" if parts else name


class InfoView(ReportView):
    """File facts in a form, then one row per table: rows captured or why it is missing."""

    key = "info"

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent, title_size=5, margins=(20, 14, 20, 14), spacing=10)
        self.reports: OpenReports = reports
        lay = self.vbox
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        self.form.setHorizontalSpacing(16)
        self.fields: dict[str, QLabel] = {}
        for key, label in (("file", "File"), ("kind", "Kind"), ("producer", "Written by"),
                           ("schema", "Schema"), ("gpus", "GPUs"), ("notes", "Notes"),
                           ("load", "Opened in")):
            self.fields[key] = _selectable("")
            self.form.addRow(muted(label + ":", wrap=False), self.fields[key])
        lay.addLayout(self.form)
        self.tables_heading = heading("Tables", 2)
        lay.addWidget(self.tables_heading)
        self.tables = QTableWidget(0, 3)
        self.tables.setHorizontalHeaderLabels(["Table", "Rows", "Contents"])
        self.tables.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)  # compact rows
        self.tables.verticalHeader().hide()
        self.tables.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tables.setAlternatingRowColors(True)
        self.tables.setWordWrap(False)
        hh = self.tables.horizontalHeader()
        hh.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        lay.addWidget(self.tables, 1)
        self.missing_heading = heading("Not in this capture", 2)
        lay.addWidget(self.missing_heading)
        self.missing = muted("")
        lay.addWidget(self.missing)
        lay.addStretch(0)  # takes the height a short table leaves (an ncu report's two rows)
        # An ncu report's GPU memory is a device attribute that decodes the whole report: read it off
        # the GUI thread, and only once this view is shown for that report.
        self._memory = self.latest_call(self._on_memory, lambda _key, _msg: None)
        reports.sig_summary_ready.connect(self._on_summary_ready)
        self.start_following()

    def _show_gpus(self, report: LoadedReport) -> None:
        if report.summary_error or not report.summary_ready:
            self.fields["gpus"].setText(report.summary_error and "–" or "…")
            return
        gpus = [g.to_json() for g in report.summary.report.gpus]
        ncu = report.ncu
        if ncu is not None and len(gpus) == 1 and gpus[0].get("totalMemory") is None:
            mem = self._memory.cache.get(id(report))
            if mem is not None:
                gpus[0]["totalMemory"] = mem
            elif self.isVisible():
                self._memory.request(id(report), ncu_total_memory, ncu)
        self.fields["gpus"].setText(", ".join(fmt.distinct([gpu_text(g) for g in gpus])) or "not recorded")

    def _on_memory(self, key: object, _mem: int | None) -> None:
        cur = self.reports.current
        if cur is not None and id(cur) == key:
            self._show_gpus(cur)
            self.sig_ready.emit()

    def _on_summary_ready(self, report: LoadedReport) -> None:
        if report is self.reports.current:
            self._show_gpus(report)
            if not report.is_ncu:  # the counts the open left for the summary's job are known now
                self._show_tables(report)
            if not self._memory.busy():  # else ready when the GPU memory arrives
                self.sig_ready.emit()

    def is_busy(self) -> bool:
        """True while the current report's summary (which names its GPUs) is being computed."""
        rep = self.reports.current
        return (rep is not None and not rep.summary_ready and not rep.summary_error) or super().is_busy()

    def on_report(self, report: LoadedReport | None) -> None:
        if report is None:
            self.title.setText("No report open")
            for f in self.fields.values():
                f.setText("")
            self.tables.setRowCount(0)
            self.missing.setText("")
            return
        info = report.trace.info
        self.title.setText(report.name)
        self.fields["file"].setText(str(info.path))
        self.fields["kind"].setText(fmt.KIND_LABELS.get(info.kind, info.kind))
        self.fields["producer"].setText(ncu_producer(report) if report.is_ncu
                                        else fmt.producer(info.kind, info.product_version))
        self.fields["schema"].setText(info.schema_version or "–")
        self._show_gpus(report)
        self.fields["notes"].setText("\n".join(info.notes) or "–")
        self.fields["load"].setText(f"{report.load_s:.2f} s")
        if report.is_ncu:
            self._show_ncu_tables(report)
        else:
            self._show_tables(report)

    def _show_tables(self, report: LoadedReport) -> None:
        from engine.reports.base import TABLES

        missing = report.trace.missing
        self.tables.setMaximumHeight(16_777_215)
        self.tables.setRowCount(len(TABLES))
        for r, (name, (_, desc)) in enumerate(TABLES.items()):
            rows = report.table_rows.get(name)
            text = desc if name not in missing else missing[name][:1].upper() + missing[name][1:]
            self._set_row(r, name, rows, text, grey=name in missing,
                          counting=rows is None and name in report.rows_left)
        lines = report.trace.missing_report()
        self.missing.setText("\n".join(f"• {m[0].upper()}{m[1:]}." for m in lines) if lines
                             else "Everything Kernelscope reads was captured.")

    def _show_ncu_tables(self, report: LoadedReport) -> None:
        """An ncu report has kernels and a GPU, no timeline: two rows and one sentence, not a
        grey row per timeline table."""
        ncu = report.ncu
        n = len(ncu.kernels) if ncu is not None else 0
        self.tables.setRowCount(2)
        self._set_row(0, "profiled kernels", n, "Kernels replayed one at a time by Nsight Compute, with "
                      "their metrics, sections and rule results (Kernels and Roofline views)")
        self._set_row(1, "gpus", report.table_rows.get("gpus"), "GPU information")
        hh = self.tables.horizontalHeader().sizeHint().height()
        self.tables.setMaximumHeight(hh + 2 * self.tables.rowHeight(0) + 2 * self.tables.frameWidth() + 2)
        self.missing.setText("• No timeline: Nsight Compute profiles kernels one at a time, so there are no "
                             "CUDA API calls, copies, NVTX ranges or streams. Open an Nsight Systems "
                             "report of the same run for those.")

    def _set_row(self, r: int, name: str, rows: int | None, text: str, grey: bool = False,
                 counting: bool = False) -> None:
        self.tables.setItem(r, 0, QTableWidgetItem(name))
        n = QTableWidgetItem("…" if counting else "–" if rows is None else fmt.count(rows))
        n.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.tables.setItem(r, 1, n)
        item = QTableWidgetItem(text)
        if grey:
            item.setForeground(Qt.GlobalColor.gray)
        item.setToolTip(text)
        self.tables.setItem(r, 2, item)

    def table_rows(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for r in range(self.tables.rowCount()):
            name, rows = self.tables.item(r, 0), self.tables.item(r, 1)
            if name is not None and rows is not None:
                out[name.text()] = rows.text()
        return out
