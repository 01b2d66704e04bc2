"""Kernels view (Nsight Compute): the kernel table, the sections of the chosen kernel, and the rule
results ranked by estimated time saved ("what to fix first"); "Compare with:" another open report
shows the two side by side (before/after, kernels matched by name and launch order)."""

from __future__ import annotations

import html
import math
from typing import Any

from PySide6.QtCore import QItemSelectionModel, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gui import format as fmt
from gui.documents import OpenReports
from gui.views.base import ReportView
from gui.widgets.kernels_compare import CompareModel, compute_comparison
from gui.widgets.kernels_compare import headline as compare_headline
from gui.widgets.labels import WrapLabel, heading
from gui.widgets.sections_tree import SectionsTree
from gui.widgets.table import ReadOnlyTable
from gui.widgets.table_model import RAW_ROLE, DataFrameModel, NumericSortProxy
from gui.workers import LoadedReport

VERDICT_COLORS = {
    "memory-bound": "#2f6fba",
    "compute-bound": "#2e9e5b",
    "latency-bound": "#c0392b",
}


def compute(ncu: Any) -> dict[str, Any]:
    """Kernel table and the ranked fixes of an Nsight Compute report (runs in a worker thread).

    The headline's "Fix first", the kernel table's "Fix first" column and the "What to fix first"
    table all come from one list (:func:`engine.analysis.findings.ncu_fixes.fix_list`): one entry per kernel
    name and rule, with its gain per launch and over every launch.
    """
    from engine.analysis.findings.ncu_fixes import fix_list
    from engine.analysis.ncu.sections import kernel_table

    return {"kernels": kernel_table(ncu), "fixes": fix_list(ncu),
            "has_rules": any(True for _ in ncu.rule_records())}


def kernel_frame(kt: Any, fixes: list[Any] | None = None) -> Any:
    """The kernel table as shown (units in the column names, raw numbers for sorting).

    "Fix first" and "Fix saves %" are the best-ranked fix of the kernel's name in the fix list (the
    table below): the same entry, capped the same way, for each launch of that kernel.
    """
    import pandas as pd

    from engine.analysis.findings.ncu_fixes import first_per_kernel

    best = first_per_kernel(fixes or [])
    names = kt["short_name"].astype(str)
    return pd.DataFrame({
        "ID": kt["id"].astype("int64"),
        "Kernel": names,
        "Duration (µs)": kt["duration_ns"].astype(float) / 1e3,
        "Grid": kt["grid"].astype(str),
        "Block": kt["block"].astype(str),
        "Registers": kt["registers"],
        "SM %": kt["sm_throughput_pct"].astype(float),
        "Memory %": kt["memory_throughput_pct"].astype(float),
        "DRAM %": kt["dram_throughput_pct"].astype(float),
        "Achieved occupancy %": kt["achieved_occupancy_pct"].astype(float),
        "Theoretical occupancy %": kt["theoretical_occupancy_pct"].astype(float),
        "Bottleneck": kt["verdict"].astype(str),
        "Fix first": [best[n].title if n in best else "" for n in names],
        "Fix saves %": [best[n].pct_of_kernel if n in best else math.nan for n in names],
    })


def fixes_frame(fixes: list[Any]) -> Any:
    """The fix list as shown: one row per kernel name and rule, gains per launch and in total."""
    import pandas as pd

    def us(v: float | None) -> float:
        return math.nan if v is None else v / 1e3

    return pd.DataFrame({
        "Rank": [x.rank for x in fixes],
        "Kernel": [x.kernel for x in fixes],
        "Fix": [x.title for x in fixes],
        "Launches": [x.launches for x in fixes],
        "Saved per launch (µs)": [us(x.per_launch_ns) for x in fixes],
        "Saved in total (µs)": [us(x.gain_ns) for x in fixes],
        "Severity": [x.severity for x in fixes],
        "Note": [x.short_note() for x in fixes],
        "IDs": ["," + ",".join(str(i) for i in x.ids) + "," for x in fixes],
        "Message": [x.finding.summary.replace("\n", " ") for x in fixes],
    }, columns=FIX_COLUMNS)


#: the fix table's columns; the last two stay in the model (the filter and the message line read
#: them) but are not shown
FIX_COLUMNS = ["Rank", "Kernel", "Fix", "Launches", "Saved per launch (µs)", "Saved in total (µs)",
               "Severity", "Note", "IDs", "Message"]


RULES_HIDDEN = ("IDs", "Message")
#: two-line headers, so every column fits the window without cutting its values
HEADER_LABELS = {
    "Duration (µs)": "Duration\n(µs)", "Registers": "Regis-\nters", "Memory %": "Memory\n%",
    "DRAM %": "DRAM\n%", "Achieved occupancy %": "Achieved\nocc. %",
    "Theoretical occupancy %": "Theoretical\nocc. %", "Fix saves %": "Fix saves\n%",
    "Saved per launch (µs)": "Saved per\nlaunch (µs)", "Saved in total (µs)": "Saved in\ntotal (µs)",
    "Launches": "Laun-\nches",
}


class _TipModel(DataFrameModel):
    """A DataFrameModel whose tooltips for some columns come from another column or list
    (the full kernel name behind the short one, the rule's message behind its name)."""

    def __init__(self) -> None:
        super().__init__()
        self.tips: dict[int, list[str | None]] = {}

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        cols = self.column_names()
        if (role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal
                and section < len(cols)):
            return HEADER_LABELS.get(cols[section], cols[section])
        if (role == Qt.ItemDataRole.ToolTipRole and orientation == Qt.Orientation.Horizontal
                and section < len(cols) and cols[section] in HEADER_LABELS):
            return cols[section]
        return super().headerData(section, orientation, role)

    def data(self, index: Any, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.ToolTipRole and index.isValid() and index.column() in self.tips:
            tips = self.tips[index.column()]
            return tips[index.row()] if index.row() < len(tips) else None
        return super().data(index, role)


def _table() -> tuple[ReadOnlyTable, _TipModel, NumericSortProxy]:
    view = ReadOnlyTable(_TipModel())
    assert isinstance(view.source, _TipModel)
    return view, view.source, view.proxy


class KernelsView(ReportView):
    key = "kernels"
    #: (kernel id) emitted when the user picks a kernel
    sig_kernel_selected = Signal(int)

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent, title_size=None)
        self.data: dict[str, Any] | None = None
        self.selected_id: int | None = None
        self._select_when_ready: int | None = None
        self.sections: dict[str, Any] = {}
        self._calls = self.latest_call(self._on_result, self._on_error)
        #: the comparison: the other report, which side the current one is, the result shown
        self.compare_with: LoadedReport | None = None
        self.current_is_before = False
        self.comparison: dict[str, Any] | None = None
        self._cmp_key: tuple[int, int] | None = None
        self._cmp_calls = self.latest_call(self._on_compare_result, self._on_compare_error)

        lay = self.vbox
        top = QHBoxLayout()
        self.title = heading("", 4)
        top.addWidget(self.title, 1)
        self.compare_bar = QWidget()
        cbar = QHBoxLayout(self.compare_bar)
        cbar.setContentsMargins(0, 0, 0, 0)
        cbar.addWidget(QLabel("Compare with:"))
        self.compare_combo = QComboBox()
        self.compare_combo.setMinimumContentsLength(24)
        self.compare_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.compare_combo.setToolTip("Another open Nsight Compute report: its kernels side by side with "
                                      "this report's, matched by name and launch order")
        cbar.addWidget(self.compare_combo)
        self.swap_button = QToolButton()
        self.swap_button.setText("⇄ Swap before/after")
        self.swap_button.setToolTip("By default the chosen report is the baseline (before) and this one "
                                    "the change (after); swap them")
        cbar.addWidget(self.swap_button)
        top.addWidget(self.compare_bar)
        lay.addLayout(top)
        self.headline = WrapLabel()
        lay.addWidget(self.headline)
        lay.addWidget(self.stack, 1)

        body = QSplitter(Qt.Orientation.Vertical)
        self.table, self.model, self.proxy = _table()
        body.addWidget(self.table)
        lower = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        llay = QVBoxLayout(left)
        llay.setContentsMargins(0, 4, 0, 0)
        self.details_title = WrapLabel("Sections")
        llay.addWidget(self.details_title)
        self.details = SectionsTree()
        llay.addWidget(self.details, 1)
        lower.addWidget(left)
        right = self._fixes_panel()
        lower.addWidget(right)
        lower.setStretchFactor(0, 2)
        lower.setStretchFactor(1, 3)
        body.addWidget(lower)
        body.setStretchFactor(0, 2)
        body.setStretchFactor(1, 3)
        self._body = self.stack.add_page(body)
        self.compare_page = QWidget()
        clay = QVBoxLayout(self.compare_page)
        clay.setContentsMargins(0, 0, 0, 0)
        self.compare_headline = WrapLabel()
        clay.addWidget(self.compare_headline)
        self.compare_model = CompareModel()
        self.compare_table = ReadOnlyTable(self.compare_model)
        self.compare_proxy = self.compare_table.proxy
        clay.addWidget(self.compare_table, 1)
        self.stack.add_page(self.compare_page)

        self.table.selectionModel().currentRowChanged.connect(self._on_row_changed)
        self.rules.selectionModel().currentRowChanged.connect(self._on_rule_changed)
        self.only_selected.toggled.connect(lambda _on: self._filter_rules())
        self.compare_combo.currentIndexChanged.connect(self._on_compare_chosen)
        self.swap_button.clicked.connect(self._swap)
        reports.sig_added.connect(lambda _r: self._refresh_compare_combo())
        self.start_following()

    def _fixes_panel(self) -> QWidget:
        """The "What to fix first" table (the fix list), its filter and the selected row's text."""
        right = QWidget()
        rlay = QVBoxLayout(right)
        rlay.setContentsMargins(0, 4, 0, 0)
        bar = QHBoxLayout()
        bar.addWidget(heading("What to fix first", 1))
        bar.addStretch(1)
        self.only_selected = QCheckBox("Only the selected kernel")
        bar.addWidget(self.only_selected)
        rlay.addLayout(bar)
        rlay.addWidget(WrapLabel(
            "One row per kernel and rule (Nsight Compute's rules and Kernelscope's findings), ranked by "
            "the time saved over every launch after its cap (the distance to the roofline); the Note says "
            "when a cap applies or the fix is not about the kernel's bottleneck.", muted=True))
        self.rules, self.rules_model, self.rules_proxy = _table()
        self.rules_proxy.setFilterKeyColumn(FIX_COLUMNS.index("IDs"))
        rlay.addWidget(self.rules, 1)
        self.rule_message = WrapLabel(muted=True)
        rlay.addWidget(self.rule_message)
        return right

    # -- slots ------------------------------------------------------------------------------------
    def on_report(self, report: LoadedReport | None) -> None:
        self.data = None
        self.selected_id = None
        self._refresh_compare_combo(update=False)
        self.headline.show()
        self.set_title("Kernels", report)
        if report is None:
            self.headline.setText("")
            self._show_placeholder("Open an Nsight Compute report (.ncu-rep) to see its kernels.")
            return
        if self.wrong_kind(report):
            self.headline.setText("")
            self._show_placeholder(
                f"{report.name} is not an Nsight Compute report. Profile the kernels with "
                "`ncu --set full -o report ./app` (or `kernelscope run` with ncu) and open the "
                ".ncu-rep here to see their throughput, occupancy, bottleneck and rule results.")
            self.sig_ready.emit()
            return
        self.headline.setText("Reading the kernels…")
        self._calls.request(id(report), compute, report.ncu)
        self._update_compare()

    def _on_result(self, key: Any, data: dict[str, Any]) -> None:
        if not self.current_is(key):
            return
        self.show_data(data)
        if self._select_when_ready is not None:
            kid, self._select_when_ready = self._select_when_ready, None
            self.select_row(kid)
        if self.compare_with is not None:  # the comparison stays on top while one is chosen
            self.stack.setCurrentWidget(self.compare_page)
            self.headline.hide()
        self.sig_ready.emit()

    def _on_error(self, key: Any, msg: str) -> None:
        self.sig_message.emit(f"Kernels: {msg}")
        self._show_placeholder(msg)
        self.sig_ready.emit()

    def _on_row_changed(self, current: Any, _prev: Any = None) -> None:
        if not current.isValid():
            return
        kid = int(self.proxy.index(current.row(), 0).data(RAW_ROLE))
        self.select_kernel(kid)

    def _on_rule_changed(self, current: Any, _prev: Any = None) -> None:
        if not current.isValid():
            return
        cols = self.rules_model.column_names()

        def text(name: str) -> str:
            return str(self.rules_proxy.index(current.row(), cols.index(name)).data(RAW_ROLE) or "")

        note = str(self.rules_proxy.index(current.row(), cols.index("Note")).data(Qt.ItemDataRole.ToolTipRole)
                   or "")
        self.rule_message.setText(f"<b>{html.escape(text('Fix'))}</b> in {html.escape(text('Kernel'))}: "
                                  f"{html.escape(text('Message'))}"
                                  + (f"<br><i>Note: {html.escape(note)}</i>" if note else ""))

    # -- comparison ---------------------------------------------------------------------------------
    def _refresh_compare_combo(self, update: bool = True) -> None:
        """List the other open Nsight Compute reports; keep the choice while it is still open."""
        cur = self.reports.current
        others = [r for r in self.reports.reports if r is not cur and r.is_ncu]
        keep = self.compare_with if self.compare_with in others else None
        combo = self.compare_combo
        combo.blockSignals(True)
        combo.clear()
        combo.addItem("—", None)
        for r in others:
            combo.addItem(r.name, id(r))
            combo.setItemData(combo.count() - 1, str(r.path), Qt.ItemDataRole.ToolTipRole)
        combo.setCurrentIndex(others.index(keep) + 1 if keep is not None else 0)
        combo.blockSignals(False)
        combo.setEnabled(bool(others))
        combo.setToolTip("Another open Nsight Compute report: its kernels side by side with this report's, "
                         "matched by name and launch order" if others else
                         "Open another Nsight Compute report (.ncu-rep) of the same program to compare "
                         "the two, before and after a change")
        self.compare_bar.setVisible(cur is not None and cur.is_ncu)
        self.swap_button.setEnabled(keep is not None)
        changed = keep is not self.compare_with
        self.compare_with = keep
        if update and changed:
            self._update_compare()

    def compare_to(self, report: LoadedReport | None) -> None:
        """Compare the current report with ``report`` (None: stop comparing), as the combo does."""
        i = self.compare_combo.findData(id(report)) if report is not None else 0
        self.compare_combo.setCurrentIndex(max(i, 0))

    def _on_compare_chosen(self, index: int) -> None:
        rid = self.compare_combo.itemData(index)
        self.compare_with = next((r for r in self.reports.reports if id(r) == rid), None)
        self.swap_button.setEnabled(self.compare_with is not None)
        self._update_compare()

    def _swap(self) -> None:
        self.current_is_before = not self.current_is_before
        self._update_compare()

    def _sides(self) -> tuple[LoadedReport, LoadedReport] | None:
        """(before, after) of the comparison chosen, or None."""
        cur, other = self.reports.current, self.compare_with
        if cur is None or other is None or not cur.is_ncu or not other.is_ncu:
            return None
        return (cur, other) if self.current_is_before else (other, cur)

    def _update_compare(self) -> None:
        sides = self._sides()
        if sides is None:
            self.comparison = None
            self._cmp_key = None
            self.compare_model.set_frame(None)
            self.headline.show()
            if self.stack.currentWidget() is self.compare_page:
                cur = self.reports.current
                if self.data is not None:
                    self.stack.setCurrentWidget(self._body)
                elif cur is not None and cur.is_ncu:
                    self._show_placeholder("Reading the kernels…")
            return
        before, after = sides
        self._cmp_key = (id(before), id(after))
        self.headline.hide()
        self.stack.setCurrentWidget(self.compare_page)
        self.compare_headline.setText(f"Comparing {before.name} (before) with {after.name} (after)…")
        self._cmp_calls.request(self._cmp_key, compute_comparison, before.ncu, after.ncu)

    def _on_compare_result(self, key: Any, result: dict[str, Any]) -> None:
        sides = self._sides()
        if sides is None or key != self._cmp_key:
            return
        before, after = sides
        self.comparison = result
        self.compare_model.set_result(result)
        self.compare_table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.compare_proxy.sort(-1)
        # The kernel name takes what the numbers leave (elided in the middle); those are never cut off.
        self.compare_table.stretch_column("Kernel")
        self.compare_headline.setText(compare_headline(result["table"], before.name, after.name))
        self.sig_ready.emit()

    def _on_compare_error(self, key: Any, msg: str) -> None:
        if key != self._cmp_key:
            return
        self.sig_message.emit(f"Kernels comparison: {msg}")
        self.compare_model.set_frame(None)
        self.compare_headline.setText(f"The reports could not be compared: {html.escape(msg)}")
        self.sig_ready.emit()

    def on_removed(self, report: LoadedReport) -> None:
        super().on_removed(report)
        self._refresh_compare_combo()

    # -- display ------------------------------------------------------------------------------------
    def _show_placeholder(self, text: str) -> None:
        self.show_placeholder(text)

    def show_data(self, data: dict[str, Any]) -> None:
        self.data = data
        kt, fixes = data["kernels"], data["fixes"]
        self.stack.setCurrentWidget(self._body)
        self.model.set_frame(kernel_frame(kt, fixes))
        kcol = self.model.column_names().index("Kernel")
        full: list[str | None] = [str(n) for n in kt["name"]] if "name" in kt.columns else []
        from engine.analysis.findings.ncu_fixes import first_per_kernel

        best = first_per_kernel(fixes)
        fcol = self.model.column_names().index("Fix first")
        self.model.tips = {kcol: full, fcol: [_fix_tip(best.get(str(n))) for n in kt["short_name"]]}
        self.table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.proxy.sort(-1)
        self.table.resizeColumnsToContents()
        # the kernel name and "Fix first" share what the numbers leave (elided in the middle; the
        # tooltips have them whole): no column is cut at the window's edge
        self.table.fit_columns("Kernel", "Fix first", 110, 110)
        self._show_fixes(kt, fixes)
        self.headline.setText("<br>".join(headline_lines(kt, fixes, data.get("has_rules", True))))
        if len(kt):
            self.table.selectionModel().setCurrentIndex(
                self.proxy.index(0, 0),
                QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)

    def _show_fixes(self, kt: Any, fixes: list[Any]) -> None:
        """Fill the "What to fix first" table from the fix list."""
        full_names = {str(s): str(n) for s, n in zip(kt["short_name"], kt["name"], strict=True)} \
            if "name" in kt.columns else {}
        rf = fixes_frame(fixes)
        self.rules_model.set_frame(rf)
        cols = self.rules_model.column_names()
        self.rules_model.tips = {
            cols.index("Kernel"): [full_names.get(x.kernel, x.kernel) for x in fixes],
            cols.index("Fix"): [x.finding.summary for x in fixes],
            cols.index("Note"): [x.note for x in fixes],
        }
        for name in RULES_HIDDEN:
            self.rules.setColumnHidden(cols.index(name), True)
        self.rules.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.rules_proxy.sort(-1)
        self.rules.resizeColumnsToContents()
        hh = self.rules.horizontalHeader()
        kc = cols.index("Kernel")
        hh.resizeSection(kc, min(hh.sectionSize(kc), 150))
        # the fix's title first, then the note (cap, verdict): both elided in the middle when short of
        # room (the tooltips and the line below the table have them whole)
        self.rules.fit_columns("Fix", "Note", 150, 140)

    def select_kernel(self, kid: int) -> None:
        """Show the sections and rule results of kernel ``kid``."""
        report = self.reports.current
        ncu = report.ncu if report is not None else None
        if ncu is None:
            return
        from engine.analysis.ncu.sections import kernel_sections

        self.selected_id = kid
        try:
            self.sections = kernel_sections(ncu, kid)
        except Exception as exc:  # noqa: BLE001 - one kernel's details must not take the view down
            from engine.system.errors import KernelscopeError

            msg = str(exc) if isinstance(exc, KernelscopeError) else (
                f"The sections of kernel {kid} could not be read ({type(exc).__name__}: {exc}).")
            self.sig_message.emit(f"Kernels: {msg}")
            self.sections = {}
            self.details.show_message(msg)
            self._filter_rules()
            return
        name = ""
        title = ""
        if self.data is not None:
            kt = self.data["kernels"]
            row = kt[kt["id"] == kid]
            if len(row):
                r = row.iloc[0]
                name = f"{r['short_name']} (ID {kid}) — {r['verdict']}: {r.get('verdict_reason', '')}"
                short = _elide_middle(str(r["short_name"]), 70)
                title = (f"<b>Sections of {html.escape(short)} (ID {kid})</b> — "
                         f"<span style='color:{VERDICT_COLORS.get(str(r['verdict']), '#2c3e50')}'>"
                         f"{html.escape(str(r['verdict']))}</span>: "
                         f"{html.escape(str(r.get('verdict_reason', '')))}")
        if not name:
            title = f"<b>Sections of kernel {kid}</b>"
        self.details_title.setText(title)
        self.details_title.setToolTip(name)
        self.details.show_sections(self.sections)
        self._filter_rules()
        self.sig_kernel_selected.emit(kid)

    def select_row(self, kid: int) -> None:
        """Select kernel ``kid`` in the table (which shows its sections)."""
        col = self.model.column_names().index("ID") if self.model.column_names() else -1
        for r in range(self.proxy.rowCount()):
            if col >= 0 and self.proxy.index(r, col).data(RAW_ROLE) == float(kid):
                self.table.selectionModel().setCurrentIndex(
                    self.proxy.index(r, 0),
                    QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
                self.table.scrollTo(self.proxy.index(r, 0))
                return

    def show_link(self, payload: object) -> None:
        """The Timeline's "Show in Kernels view": the linked ncu result (see show_ncu_result)."""
        if isinstance(payload, dict):
            self.show_ncu_result(payload)

    def show_ncu_result(self, hit: dict[str, Any]) -> None:
        """Show the ncu result a Timeline kernel links to (``ncu_path`` and ``ID`` of the hit)."""
        from pathlib import Path

        report = self.reports.find(Path(str(hit.get("ncu_path", ""))))
        if report is None or hit.get("ID") is None:
            return
        kid = int(hit["ID"])
        self.compare_to(None)  # the linked kernel's own sections, not a comparison
        if self.reports.current is report and self.data is not None:
            self.select_row(kid)
            return
        self._select_when_ready = kid
        self.reports.set_current(report)

    def copy_details(self) -> str:
        """Copy the selected section rows with ncu's base values (Ctrl+C in the tree)."""
        return self.details.copy_selection()

    def _filter_rules(self) -> None:
        if self.only_selected.isChecked() and self.selected_id is not None:
            self.rules_proxy.setFilterRegularExpression(f",{self.selected_id},")
        else:
            self.rules_proxy.setFilterRegularExpression("")

    # -- for tests --------------------------------------------------------------------------------
    def column(self, name: str, proxy: NumericSortProxy | None = None) -> list[Any]:
        p = proxy or self.proxy
        model = p.sourceModel()
        assert isinstance(model, DataFrameModel)
        c = model.column_names().index(name)
        return [p.index(r, c).data(RAW_ROLE) for r in range(p.rowCount())]

    def detail_texts(self) -> dict[str, dict[str, str]]:
        return self.details.texts()


def _elide_middle(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters with '…' in the middle (kernel names differ at both ends)."""
    if len(text) <= n:
        return text
    head = (n - 1) // 2
    return text[:head] + "…" + text[len(text) - (n - 1 - head):]


def headline_lines(kt: Any, fixes: list[Any], has_rules: bool = True) -> list[str]:
    """The headline: the kernels, their bottlenecks, and the first entry of the fix list."""
    total = float(kt["duration_ns"].sum())
    counts = kt["verdict"].value_counts()
    verdicts = ", ".join(f"{n} {v}" for v, n in counts.items())
    lines = [f"<b>{len(kt)}</b> profiled kernel{'s' if len(kt) != 1 else ''}, "
             f"{fmt.duration(total)} in total; bottlenecks: {verdicts}."]
    first = next((x for x in fixes if x.gain_ns is not None), None)
    if first is not None:
        kernel = html.escape(_elide_middle(first.kernel, 70))
        why = "" if first.agrees or not first.note else f" Why first: {html.escape(first.note)}."
        lines.append(f"Fix first: <b>{html.escape(first.title, quote=False)}</b> in <b>{kernel}</b> "
                     f"({html.escape(first.verdict)}): {html.escape(first.gain_words(), quote=False)}, "
                     f"rank 1 of the {len(fixes)} below (the Findings tab ranks the same list).{why}")
    elif fixes:
        lines.append(f"None of the {len(fixes)} findings below has an estimated gain.")
    elif has_rules:
        lines.append("Nsight Compute's rules give no optimization advice for these kernels, and no finding "
                     "applies.")
    else:
        lines.append("The report holds no rule results and no finding applies; profile with "
                     "`ncu --set full` for Nsight Compute's rules.")
    return lines


def _fix_tip(fix: Any) -> str | None:
    """The kernel table's tooltip on "Fix first": the gain and the note of that fix."""
    if fix is None:
        return None
    return f"{fix.title}: {fix.gain_words()}" + (f". {fix.note}" if fix.note else "")

