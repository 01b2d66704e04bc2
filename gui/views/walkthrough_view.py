"""Findings & walkthrough view: what to fix in the current report, with evidence and expected gain,
and a before/after check of a change against another open report (Mann-Whitney on iterations).

Everything is computed by the engine (``engine.analysis.findings``, ``engine.sessions.walkthrough``) in a
background thread; this module only shows it.

Checklist item states (open / applied / verified / rejected) are saved per project folder through
the same engine functions as ``kernelscope checklist --set`` (``DIR/.kernelscope/checklists.json``,
atomic writes): ticking an item marks it applied, unticking reopens it, "Reject" rejects it, and a
Verify that finds a significant gain marks the ticked items verified. The project folder defaults
to the report's folder and is remembered per report in the GUI settings.
"""

from __future__ import annotations

import hashlib
import html
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
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
from gui.views.base import ReportView, follow_current
from gui.widgets.labels import WrapLabel, heading
from gui.workers import LoadedReport
from gui.workers.latest import LatestCall

SEVERITY_COLORS = {"critical": "#b00020", "warning": "#b35c00", "info": "#5f6b7a"}
CHECKLIST = "roadmap"
STATE_COLORS = {"open": "#5f6b7a", "applied": "#b35c00", "verified": "#1e7d32", "rejected": "#b00020"}
SETTINGS_GROUP = "findings/project"
#: the widest the Subject column gets (a long kernel name is elided in the middle; hover for all)
SUBJECT_PX = 200


def compute(report: Any) -> dict[str, Any]:
    """Findings and the checklist items they trigger (runs in a worker thread).

    ``report`` is the window's :class:`LoadedReport`: nsys/Kineto findings are the ones computed
    with the summary the window already holds (one engine, no second opening of the file); a path
    is opened and read.
    """
    from engine.analysis.findings import findings_for
    from engine.analysis.findings.checklists import annotate, load_checklist

    if isinstance(report, LoadedReport) and report.is_ncu and report.ncu is not None:
        from engine.analysis.findings.ncu_all import ncu_findings_and_groups
        from engine.analysis.findings.ncu_fixes import rank_findings

        # the order of the Kernels view's "What to fix first" (one list, ties broken the same way)
        found = rank_findings(*ncu_findings_and_groups(report.ncu))
    elif isinstance(report, LoadedReport):
        found = findings_for(report.path) if report.is_ncu else list(report.findings)
    else:
        found = findings_for(report)
    cl = load_checklist(CHECKLIST)
    items = [r for r in annotate(cl, {f.id for f in found}, findings=found) if r["triggered_by"]]
    # the largest saving per step first, as `kernelscope walkthrough` lists them (an ncu report has
    # no steps: its largest saving over every launch first)
    per_step: dict[str, float] = {}
    for f in found:
        g = f.gain
        v = 0.0 if g is None else (g.seconds or 0.0) * 1e9 if f.source == "ncu" else (g.per_step_ns or 0.0)
        per_step[f.id] = max(per_step.get(f.id, 0.0), v)
    items.sort(key=lambda r: -max((per_step.get(i, 0.0) for i in r["triggered_by"]), default=0.0))
    both = None
    if isinstance(report, LoadedReport) and not report.is_ncu and found:
        from engine.analysis.findings.overview import combined

        both = combined(report.summary, found)
    return {"findings": found, "items": items, "if_all_applied": both}


def verify(baseline: Any, after: Any, findings: list[Any], items: list[str],
           project: Path | None = None, summary: Any = None) -> dict[str, Any]:
    """Before/after statistics and predicted gain (runs in a worker thread).

    With a ``project``, the ticked ``items`` get the verdict as their saved state (verified on a
    significant gain, applied otherwise), as ``kernelscope walkthrough verify`` does.
    """
    from engine.analysis.compare import iterations
    from engine.sessions.walkthrough import compare_runs, predicted_gain, record_verdict

    it = iterations(baseline)
    n = len(it.durations_ns) if it else 0
    steps = summary.iterations if summary is not None else None
    predicted, used = predicted_gain(findings, CHECKLIST, items, n,
                                     step_ns=steps.steady_median_ns if steps else None,
                                     gpu_busy_per_step_ns=steps.gpu_busy_per_step_ns if steps else None)
    out = compare_runs(baseline, after, predicted if items else None)
    out["findings_counted"] = used
    out["report"] = str(after.info.path)
    out["saved_to"] = None
    if project is not None and items:
        record_verdict(project, CHECKLIST, items, out)
        out["saved_to"] = str(project)
    return out


def load_item_states(project: Path) -> dict[str, dict[str, Any]]:
    """The project's saved states of the checklist's items (the CLI's file; empty if none)."""
    from engine.analysis.findings.checklists import load_states

    return load_states(project, CHECKLIST)


def save_item_state(project: Path, item_id: str, state: str, note: str = "") -> dict[str, Any]:
    """Save one item's state in the project, exactly as ``kernelscope checklist --set`` does."""
    from engine.analysis.findings.checklists import set_state

    return set_state(project, CHECKLIST, item_id, state, note)


def settings_key(report_path: Path) -> str:
    """QSettings key under which a report's project folder is remembered."""
    digest = hashlib.sha1(str(Path(report_path).resolve()).encode()).hexdigest()[:20]
    return f"{SETTINGS_GROUP}/{digest}"


def _gain_text(f: Any) -> str:
    """The engine's gain text: per steady step when there are steps, else over the capture."""
    from engine.analysis.findings.overview import gain_text

    g = f.gain
    if g is None or g.seconds is None:
        return "—"
    if f.source == "ncu":  # per launch and over every launch, as the Kernels view says it
        from engine.analysis.findings.ncu_fixes import finding_gain_words

        return finding_gain_words(f, short=True)
    return gain_text(f)


def detail_html(f: Any) -> str:
    """A finding as rich text for the detail pane."""
    from engine.analysis.findings import evidence_text

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


def _findings_table() -> QTableWidget:
    """Severity, finding, subject and gain: the gain never cut, a long subject elided in the middle."""
    table = QTableWidget(0, 4)
    table.setHorizontalHeaderLabels(["Severity", "Finding", "Subject", "Expected gain"])
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)  # compact rows
    table.verticalHeader().hide()
    hh = table.horizontalHeader()
    hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    # the gain is never cut; the subject (a kernel name) is elided in the middle when long and
    # the title takes the rest (hover either, or select the row, for all of it)
    hh.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
    hh.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
    table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    table.setWordWrap(False)
    return table


class WalkthroughView(ReportView):
    key = "findings"

    def __init__(self, reports: OpenReports, parent: QWidget | None = None, settings: Any = None) -> None:
        super().__init__(reports, parent, layout=False)
        self.reports: OpenReports = reports
        self._settings = settings
        self.result: dict[str, Any] | None = None  # compute() of the current report
        self.verdict: dict[str, Any] | None = None  # verify() of the last check
        self.project: Path | None = None  # where the checklist item states are saved
        self.states: dict[str, dict[str, Any]] = {}  # item id -> saved entry (the CLI's format)
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
        self.table = _findings_table()
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.detail = QTextBrowser()
        self.detail.setOpenExternalLinks(False)
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 3)

        lay.addWidget(heading("Walkthrough: apply checklist items, record again, verify", 5))
        prow = QHBoxLayout()
        prow.addWidget(QLabel("Project folder:"))
        self.project_edit = QLineEdit()
        self.project_edit.setPlaceholderText(
            "folder whose .kernelscope/checklists.json keeps the item states")
        self.project_edit.editingFinished.connect(self._on_project_edited)
        prow.addWidget(self.project_edit, 1)
        self.project_button = QPushButton("Choose…")
        self.project_button.clicked.connect(self._on_choose_project)
        prow.addWidget(self.project_button)
        lay.addLayout(prow)
        self.project_note = WrapLabel(muted=True)
        lay.addWidget(self.project_note)
        row = QHBoxLayout()
        self.items = QListWidget()
        self.items.setMaximumHeight(130)
        self.items.itemChanged.connect(self._on_item_changed)
        self.items.itemSelectionChanged.connect(self._update_buttons)
        row.addWidget(self.items, 2)
        side = QVBoxLayout()
        self.reject_button = QPushButton("Reject selected item")
        self.reject_button.setToolTip(
            "Tried it and it did not help, or it does not apply: saved as rejected.")
        self.reject_button.clicked.connect(self._on_reject)
        side.addWidget(self.reject_button)
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
        reports.sig_summary_progress.connect(self._on_summary_progress)
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
            self.project = None
            self.project_edit.clear()
            self.project_note.setText("")
            self._update_buttons()
            return
        remembered = self.settings().value(settings_key(report.path))
        self.set_project(Path(str(remembered)) if remembered else report.path.resolve().parent,
                         remember=False)
        self.title.setText(f"Findings — {report.name}")
        doing = report.summary_progress if not report.summary_ready and report.summary_progress else ""
        self.notes.setText(f"Computing findings… {doing}".strip())
        self._calls.request(id(report), compute, report)

    def _on_summary_progress(self, report: LoadedReport) -> None:
        if report is self.reports.current and self.result is None and report.summary_progress:
            self.notes.setText(f"Computing findings… {report.summary_progress}")

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
        both = result.get("if_all_applied")
        bound = ""
        if both is not None and both.per_step_ns is not None:
            bound = (f" If all were applied: at most {both.per_step_ns / 1e6:,.2f} ms per step "
                     "(overlapping findings counted once).")
        unit = "over every launch" if found and all(f.source == "ncu" for f in found) else "per step"
        self.notes.setText(f"{len(found)} findings, largest expected saving {unit} first; gains are "
                           "computed from this report's own numbers, capped by the window they are "
                           f"measured in (select one for the evidence, the formula and the fix).{bound}"
                           if found else "No findings: none of the rules fired on this report.")
        self.table.setRowCount(len(found))
        for i, f in enumerate(found):
            sev = QTableWidgetItem(f.severity)
            sev.setForeground(Qt.GlobalColor.white)
            sev.setBackground(_qcolor(SEVERITY_COLORS.get(f.severity, "#888")))
            title = f"{f.title.removeprefix('Nsight Compute: ')} (ncu rule)" if f.id.startswith("ncu.rule.") \
                else f.title
            cells = [sev, QTableWidgetItem(title), QTableWidgetItem(f.subject),
                     QTableWidgetItem(_gain_text(f))]
            for c, item in enumerate(cells):
                item.setToolTip(f.subject if c == 2 and f.subject else f.summary)
                self.table.setItem(i, c, item)
        self.table.resizeColumnToContents(2)
        hh = self.table.horizontalHeader()
        hh.resizeSection(2, min(hh.sectionSize(2), SUBJECT_PX))

        self.items.blockSignals(True)
        try:
            self.items.clear()
            for it in result["items"]:
                li = QListWidgetItem()
                li.setData(Qt.ItemDataRole.UserRole, it["id"])
                li.setData(Qt.ItemDataRole.UserRole + 1, it)
                li.setFlags(li.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                self.items.addItem(li)
        finally:
            self.items.blockSignals(False)
        self._refresh_items()
        if found:
            self.table.selectRow(0)
        self._fill_after()

    def _on_selection(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or self.result is None:
            return
        self.detail.setHtml(detail_html(self.result["findings"][rows[0].row()]))

    # -- project folder and item states -------------------------------------------------------------
    def settings(self) -> Any:
        """The GUI settings (the window's file; made on first use when the view stands alone)."""
        if self._settings is None:
            from gui.settings import make_settings

            self._settings = make_settings()
        return self._settings

    def set_project(self, folder: Path, remember: bool = True) -> None:
        """Use ``folder`` for the item states (remembered for the current report) and load them."""
        self.project = Path(folder).expanduser()
        self.project_edit.setText(str(self.project))
        cur = self.reports.current
        if remember and cur is not None:
            self.settings().setValue(settings_key(cur.path), str(self.project))
            self.settings().sync()
        self.reload_states()

    def reload_states(self) -> None:
        """Read the project's checklist states again and show them next to the items."""
        from engine.analysis.findings.checklists import state_path
        from engine.system.errors import KernelscopeError

        self.states = {}
        if self.project is None:
            return
        path = state_path(self.project)
        try:
            self.states = load_item_states(self.project)
        except KernelscopeError as exc:
            self.project_note.setText(html.escape(str(exc)))
            self.sig_message.emit(f"Checklist: {exc}")
        else:
            n = sum(1 for e in self.states.values() if e.get("state", "open") != "open")
            self.project_note.setText(
                (f"Item states from {path} ({n} not open)." if path.exists() else
                 f"No saved states yet; ticking an item saves it in {path}.")
                + " Tick = applied, Reject = rejected, a significant Verify = verified; "
                "the same file as `kernelscope checklist roadmap --project DIR`.")
        self._refresh_items()

    def item_state(self, item_id: str) -> str:
        return str(self.states.get(item_id, {}).get("state", "open"))

    def _refresh_items(self) -> None:
        self.items.blockSignals(True)
        try:
            for i in range(self.items.count()):
                li = self.items.item(i)
                it = li.data(Qt.ItemDataRole.UserRole + 1)
                st = self.item_state(it["id"])
                entry = self.states.get(it["id"], {})
                li.setText(f"[{st}]  {it['id']}: {it['title']}  ← {', '.join(it['triggered_by'])}")
                li.setForeground(_qcolor(STATE_COLORS.get(st, "#222")))
                li.setCheckState(Qt.CheckState.Checked if st in ("applied", "verified")
                                 else Qt.CheckState.Unchecked)
                tip = [f"{st}" + (f" since {entry['updated']}" if entry.get("updated") else "")]
                if entry.get("note"):
                    tip.append(str(entry["note"]))
                li.setToolTip("\n".join(tip))
        finally:
            self.items.blockSignals(False)
        self._update_buttons()

    def _update_buttons(self) -> None:
        sel = self.items.selectedItems()
        self.reject_button.setEnabled(bool(sel) and self.project is not None
                                      and self.item_state(str(sel[0].data(Qt.ItemDataRole.UserRole)))
                                      != "rejected")

    def _save_state(self, item_id: str, state: str, note: str = "") -> bool:
        from engine.system.errors import KernelscopeError

        if self.project is None:
            return False
        try:
            self.states[item_id] = save_item_state(self.project, item_id, state, note)
        except KernelscopeError as exc:
            self.project_note.setText(html.escape(str(exc)))
            self.sig_message.emit(f"Checklist: {exc}")
            self._refresh_items()  # put the checkbox back as saved
            return False
        self.reload_states()
        return True

    def _on_item_changed(self, li: QListWidgetItem) -> None:
        item_id = str(li.data(Qt.ItemDataRole.UserRole))
        want = "applied" if li.checkState() == Qt.CheckState.Checked else "open"
        cur = self.item_state(item_id)
        if cur in (("applied", "verified") if want == "applied" else ("open", "rejected")):
            return  # already saved so
        self._save_state(item_id, want, "ticked in the Findings view" if want == "applied" else "")

    def _on_reject(self) -> None:
        sel = self.items.selectedItems()
        if sel:
            self._save_state(str(sel[0].data(Qt.ItemDataRole.UserRole)), "rejected",
                             "rejected in the Findings view")

    def _on_project_edited(self) -> None:
        text = self.project_edit.text().strip()
        if text and (self.project is None or Path(text).expanduser() != self.project):
            self.set_project(Path(text))

    def _on_choose_project(self) -> None:
        start = str(self.project) if self.project is not None else ""
        folder = QFileDialog.getExistingDirectory(self, "Project folder for the checklist states", start)
        if folder:
            self.set_project(Path(folder))

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
                             self.result["findings"], items, self.project,
                             base.summary if base.summary_ready else None)

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
        if v.get("saved_to"):
            lines.append(f"Saved: {', '.join(html.escape(i) for i in self.checked_items())} "
                         f"{'verified' if v['verdict'] == 'verified' else 'kept applied'} in "
                         f"{html.escape(v['saved_to'])}.")
            self.reload_states()
        self.verdict_label.setText("<br>".join(lines))
        self.sig_ready.emit()

    def _on_verify_error(self, key: Any, msg: str) -> None:
        self.verdict_label.setText(html.escape(msg))
        self.sig_message.emit(f"Walkthrough: {msg}")
        self.sig_ready.emit()


def _qcolor(hex_color: str) -> Any:
    from PySide6.QtGui import QColor

    return QColor(hex_color)
