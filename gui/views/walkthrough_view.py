"""Findings & walkthrough view: what to fix in the current report, with evidence and expected gain,
and a before/after check of a change against another open report (Mann-Whitney on iterations).

Everything is computed by the engine (``engine.analysis.rules``, ``engine.walkthrough``) in a
background thread; this module only shows it.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from gui.documents import OpenReports
from gui.views.background import LatestCall
from gui.views.common import WrapLabel, follow_current, heading
from gui.workers import LoadedReport

SEVERITY_COLORS = {"critical": "#b00020", "warning": "#b35c00", "info": "#5f6b7a"}
CHECKLIST = "roadmap"


def compute(path: Any) -> dict[str, Any]:
    """Findings and the checklist items they trigger (runs in a worker thread)."""
    from engine.analysis.rules import findings_for
    from engine.analysis.rules.checklists import annotate, load_checklist

    found = findings_for(path)
    cl = load_checklist(CHECKLIST)
    items = [r for r in annotate(cl, {f.id for f in found}) if r["triggered_by"]]
    return {"findings": found, "items": items}


def verify(baseline: Any, after: Any, findings: list[Any], items: list[str]) -> dict[str, Any]:
    """Before/after statistics and predicted gain (runs in a worker thread)."""
    from engine.analysis.compare import iterations
    from engine.walkthrough import compare_runs, predicted_gain

    it = iterations(baseline)
    n = len(it.durations_ns) if it else 0
    predicted, used = predicted_gain(findings, CHECKLIST, items, n)
    out = compare_runs(baseline, after, predicted if items else None)
    out["findings_counted"] = used
    return out


def _gain_text(f: Any) -> str:
    g = f.gain
    if g is None or g.seconds is None:
        return "—"
    pct = f" ({g.pct_of_wall:.1f} %)" if g.pct_of_wall is not None else ""
    return f"{'≤ ' if g.kind == 'upper bound' else ''}{g.seconds * 1e3:,.2f} ms{pct}"


def detail_html(f: Any) -> str:
    """A finding as rich text for the detail pane."""
    from engine.analysis.rules import evidence_text

    e = html.escape
    parts = [f"<h3 style='color:{SEVERITY_COLORS.get(f.severity, '#222')}'>{e(f.title)}</h3>",
             f"<p><b>{e(f.severity)}</b> · <code>{e(f.id)}</code>"
             + (f" · {e(f.subject)}" if f.subject else "") + "</p>", f"<p>{e(f.summary)}</p>", "<ul>"]
    parts += [f"<li>{e(ev.label)}: <b>{e(evidence_text(ev))}</b> <i>({e(ev.source)})</i></li>"
              for ev in f.evidence]
    parts.append("</ul>")
    if f.gain is not None:
        parts.append(f"<p><b>Expected gain:</b> {e(_gain_text(f))}<br><i>{e(f.gain.formula)}</i></p>")
    if f.fix:
        parts.append(f"<p><b>Fix:</b> {e(f.fix)}</p>")
    for label, code in (("CUDA C++", f.fix_cuda), ("PyTorch", f.fix_torch)):
        if code:
            parts.append(f"<p>{label}:</p><pre style='background:#f6f8fa'>{e(code)}</pre>")
    if f.verify:
        parts.append(f"<p><b>Verify:</b> {e(f.verify)}</p>")
    return "".join(parts)


class WalkthroughView(QWidget):
    sig_ready = Signal()
    sig_message = Signal(str)

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.reports = reports
        self.result: dict[str, Any] | None = None  # compute() of the current report
        self.verdict: dict[str, Any] | None = None  # verify() of the last check
        self._calls = LatestCall(self)
        self._calls.sig_result.connect(self._on_result)
        self._calls.sig_error.connect(self._on_error)
        self._checks = LatestCall(self)
        self._checks.sig_result.connect(self._on_verdict)
        self._checks.sig_error.connect(self._on_verify_error)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 10, 14, 8)
        self.title = heading("", 4)
        lay.addWidget(self.title)
        self.notes = WrapLabel(muted=True)
        lay.addWidget(self.notes)

        split = QSplitter(Qt.Orientation.Horizontal)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Severity", "Finding", "Subject", "Expected gain"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)  # compact rows
        self.table.verticalHeader().hide()
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.detail = QTextBrowser()
        self.detail.setOpenExternalLinks(False)
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 3)

        lay.addWidget(heading("Walkthrough: apply checklist items, record again, verify", 5))
        row = QHBoxLayout()
        self.items = QListWidget()
        self.items.setMaximumHeight(130)
        row.addWidget(self.items, 2)
        side = QVBoxLayout()
        side.addWidget(QLabel("Run after the change:"))
        self.after = QComboBox()
        side.addWidget(self.after)
        self.verify_button = QPushButton("Verify against this baseline")
        self.verify_button.clicked.connect(self._on_verify)
        side.addWidget(self.verify_button)
        side.addStretch(1)
        row.addLayout(side, 1)
        lay.addLayout(row)
        self.verdict_label = WrapLabel()
        lay.addWidget(self.verdict_label)

        follow_current(self, reports, self._on_current_changed)
        reports.sig_added.connect(lambda _r: self._fill_after())
        reports.sig_removed.connect(self._on_removed)
        self._on_current_changed(reports.current)

    # -- hooks ------------------------------------------------------------------------------------
    def is_busy(self) -> bool:
        return self._calls.busy() or self._checks.busy()

    def shutdown(self) -> None:
        self._calls.stop()
        self._checks.stop()

    # -- slots ------------------------------------------------------------------------------------
    def _on_removed(self, r: LoadedReport) -> None:
        self._calls.forget(id(r))
        self._fill_after()

    def _fill_after(self) -> None:
        cur = self.reports.current
        self.after.clear()
        for r in self.reports.reports:
            if r is not cur and not r.is_ncu:
                self.after.addItem(r.name, r)
        self.verify_button.setEnabled(self.after.count() > 0 and self.result is not None)

    def _on_current_changed(self, report: LoadedReport | None) -> None:
        self.result = None
        self.verdict = None
        self.table.setRowCount(0)
        self.items.clear()
        self.detail.clear()
        self.verdict_label.setText("")
        self._fill_after()
        if report is None:
            self.title.setText("No report open")
            self.notes.setText("Open a report to see what to fix.")
            return
        self.title.setText(f"Findings — {report.name}")
        self.notes.setText("Computing findings…")
        self._calls.request(id(report), compute, report.path)

    def _on_result(self, key: Any, result: dict[str, Any]) -> None:
        cur = self.reports.current
        if cur is None or id(cur) != key:
            return
        self.show_result(result)
        self.sig_ready.emit()

    def _on_error(self, key: Any, msg: str) -> None:
        self.sig_message.emit(f"Findings: {msg}")
        self.notes.setText(msg)
        self.sig_ready.emit()

    def show_result(self, result: dict[str, Any]) -> None:
        self.result = result
        found = result["findings"]
        self.notes.setText(f"{len(found)} findings, most severe first; gains are computed from this "
                           "report's own numbers (select one for the evidence, the formula and the fix)."
                           if found else "No findings: none of the rules fired on this report.")
        self.table.setRowCount(len(found))
        for i, f in enumerate(found):
            sev = QTableWidgetItem(f.severity)
            sev.setForeground(Qt.GlobalColor.white)
            sev.setBackground(_qcolor(SEVERITY_COLORS.get(f.severity, "#888")))
            cells = [sev, QTableWidgetItem(f.title), QTableWidgetItem(f.subject[:48]),
                     QTableWidgetItem(_gain_text(f))]
            for c, item in enumerate(cells):
                item.setToolTip(f.summary)
                self.table.setItem(i, c, item)
        self.items.clear()
        for it in result["items"]:
            li = QListWidgetItem(f"{it['id']}: {it['title']}  ← {', '.join(it['triggered_by'])}")
            li.setData(Qt.ItemDataRole.UserRole, it["id"])
            li.setFlags(li.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            li.setCheckState(Qt.CheckState.Unchecked)
            self.items.addItem(li)
        if found:
            self.table.selectRow(0)
        self._fill_after()

    def _on_selection(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or self.result is None:
            return
        self.detail.setHtml(detail_html(self.result["findings"][rows[0].row()]))

    def checked_items(self) -> list[str]:
        return [str(self.items.item(i).data(Qt.ItemDataRole.UserRole)) for i in range(self.items.count())
                if self.items.item(i).checkState() == Qt.CheckState.Checked]

    def _on_verify(self) -> None:
        base, after = self.reports.current, self.after.currentData()
        if base is None or after is None or self.result is None:
            return
        self.verdict_label.setText("Comparing iterations…")
        items = self.checked_items()
        self._checks.request((id(base), id(after), tuple(items)), verify, base.trace, after.trace,
                             self.result["findings"], items)

    def _on_verdict(self, key: Any, v: dict[str, Any]) -> None:
        self.verdict = v
        s = v["stats"]
        color = "#1e7d32" if v["verdict"] == "verified" else "#b00020"
        pred = v["predicted_per_iteration_ns"]
        lines = [f"<b style='color:{color}'>{v['verdict'].upper()}</b>: {html.escape(v['why'])} "
                 f"({s['test']}, n = {s['n_a']}/{s['n_b']} after warm-up; 95 % CI of the change "
                 f"{s['delta_median_ci95_ns'][0] / 1e6:,.2f} to "
                 f"{s['delta_median_ci95_ns'][1] / 1e6:,.2f} ms).",
                 f"Measured gain {v['measured_per_iteration_ns'] / 1e6:,.2f} ms per iteration (speedup "
                 f"{s['speedup']:.2f}x)"
                 + (f"; predicted {pred / 1e6:,.2f} ms from {', '.join(v['findings_counted'])}."
                    if pred is not None else "; tick checklist items to compare with their predicted gain.")]
        self.verdict_label.setText("<br>".join(lines))
        self.sig_ready.emit()

    def _on_verify_error(self, key: Any, msg: str) -> None:
        self.verdict_label.setText(html.escape(msg))
        self.sig_message.emit(f"Walkthrough: {msg}")
        self.sig_ready.emit()


def _qcolor(hex_color: str) -> Any:
    from PySide6.QtGui import QColor

    return QColor(hex_color)
