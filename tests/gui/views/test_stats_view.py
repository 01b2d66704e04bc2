"""The statistics table: numeric sort, filter, copy as TSV, CSV export, report switching."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QItemSelection, QItemSelectionModel, QPoint, Qt
from PySide6.QtWidgets import QApplication

from tests.conftest import NSYS_DIR
from tests.gui.conftest import open_and_wait, wait_stats

GEMM = NSYS_DIR / "torch_sdpa_gemm.sqlite"


@pytest.fixture
def stats_view(qtbot, window):
    report = open_and_wait(qtbot, window, GEMM)
    view = wait_stats(qtbot, window, "cuda_api_sum")
    if view.stats is None:
        pytest.skip("engine.analysis.nsys.stats is not in this build")
    view.report = report
    return view


def _column(view, name):
    c = view.model.column_names().index(name)
    return [view.proxy.index(r, c).data(Qt.ItemDataRole.UserRole) for r in range(view.proxy.rowCount())]


def test_sort_numeric_column(qtbot, stats_view):
    view = stats_view
    df = view.stats.run_report(view.report.trace, "cuda_api_sum")
    col = view.model.column_names().index("Num Calls")
    view.table.sortByColumn(col, Qt.SortOrder.AscendingOrder)
    values = _column(view, "Num Calls")
    assert values == sorted(float(v) for v in df["Num Calls"])
    # numbers, not text: 2071 must come after 39 (text order would put "2071" first)
    assert values[-1] == float(df["Num Calls"].max())
    view.table.sortByColumn(col, Qt.SortOrder.DescendingOrder)
    assert _column(view, "Num Calls")[0] == float(df["Num Calls"].max())
    # clicking a header sorts too
    name_col = view.model.column_names().index("Name")
    header = view.table.horizontalHeader()
    x = header.sectionViewportPosition(name_col) + header.sectionSize(name_col) // 2
    qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, header.height() // 2))
    assert header.sortIndicatorSection() == name_col
    names = _column(view, "Name")
    assert names in (sorted(names, key=str.lower), sorted(names, key=str.lower, reverse=True))


def test_numbers_are_right_aligned_with_separators(stats_view):
    view = stats_view
    col = view.model.column_names().index("Total Time (ns)")
    idx = view.proxy.index(0, col)
    raw = idx.data(Qt.ItemDataRole.UserRole)
    assert idx.data() == f"{int(raw):,}"
    assert idx.data(Qt.ItemDataRole.TextAlignmentRole) & int(Qt.AlignmentFlag.AlignRight)


def test_filter_box(qtbot, stats_view):
    view = stats_view
    qtbot.keyClicks(view.filter, "memcpy")
    names = _column(view, "Name")
    assert names and all("memcpy" in n.lower() for n in names)
    assert "of" in view.status.text()
    view.filter.clear()
    assert view.proxy.rowCount() == view.model.rowCount()


def test_copy_selected_cells_as_tsv(qtbot, stats_view):
    view = stats_view
    cols = view.model.column_names()
    c0, c1 = cols.index("Num Calls"), cols.index("Name")
    sel = QItemSelection(view.proxy.index(0, c0), view.proxy.index(1, c0))
    sel.merge(QItemSelection(view.proxy.index(0, c1), view.proxy.index(1, c1)),
              QItemSelectionModel.SelectionFlag.Select)
    view.table.selectionModel().select(sel, QItemSelectionModel.SelectionFlag.ClearAndSelect)
    view.table.setFocus()
    QApplication.clipboard().clear()
    qtbot.keyClick(view.table, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    df = view.model.df
    expected = "\n".join(f"{df['Num Calls'].iloc[r]}\t{df['Name'].iloc[r]}" for r in (0, 1))
    assert QApplication.clipboard().text() == expected


def test_export_csv(qtbot, stats_view, tmp_path):
    view = stats_view
    out = view.export_csv(tmp_path / "api.csv")
    assert out.read_text() == view.stats.to_csv(view.stats.run_report(view.report.trace, "cuda_api_sum"))
    assert any("Exported cuda_api_sum" in m for _, m in view.window().log.entries)


def test_every_report_renders(qtbot, stats_view):
    view = stats_view
    for name in view.stats.REPORTS:
        view.select_report(name)
        qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
        df = view.stats.run_report(view.report.trace, name)
        if len(df):
            assert view.stack.currentWidget() is view.table
            assert view.model.rowCount() == len(df)
        else:
            assert "no rows" in view.stack.placeholder_text()


def test_latest_request_wins(qtbot, stats_view):
    view = stats_view
    for name in ("cuda_gpu_trace", "nvtx_sum", "cuda_gpu_kern_sum"):
        view.select_report(name)
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
    assert view.current_name == "cuda_gpu_kern_sum"
    assert "Instances" in view.model.column_names()


def test_kernel_names_keep_what_tells_them_apart(qtbot, window, tmp_path):
    """torch_train.json (Kineto): six cuBLAS GEMMs share 'sm80_xmma_gemm_f32f32_f32f3' and
    '_execute_kernel__5x_cublas'; cut in the middle they read the same. Each row keeps the part that
    differs ('nn_n_tilesize128x128'), the full name in the tooltip."""
    import lzma
    import shutil

    from tests.conftest import REPO

    path = tmp_path / "torch_train.json"
    with lzma.open(REPO / "tests/data/recordings/torch/torch_train.json.xz") as f, path.open("wb") as g:
        shutil.copyfileobj(f, g)
    open_and_wait(qtbot, window, path)
    view = wait_stats(qtbot, window, "cuda_gpu_kern_sum")
    qtbot.wait(50)
    c = view.model.column_names().index("Name")
    delegate = view.table.itemDelegateForColumn(c)
    width = view.table.columnWidth(c) - 8
    fm = view.table.fontMetrics()
    names = [view.proxy.index(r, c).data() for r in range(view.proxy.rowCount())]
    shown = [delegate.shown_text(view.proxy.index(r, c), width, fm.horizontalAdvance)
             for r in range(len(names))]
    middle = [fm.elidedText(n, Qt.TextElideMode.ElideMiddle, width) for n in names]
    assert len(set(middle)) < len(names)  # what the middle cut showed: identical rows
    assert len(set(names)) == len(names) == 54
    assert len(set(shown)) == len(shown)  # no two rows read the same
    assert all(fm.horizontalAdvance(s) <= width for s in shown)
    gemms = [s for n, s in zip(names, shown, strict=True) if n.startswith("sm80_xmma_gemm_f32f32_f32f32")]
    assert len(gemms) >= 6 and any("nn_n_tilesize128x128" in s for s in gemms)
    long = next(r for r, n in enumerate(names) if fm.horizontalAdvance(n) > width)
    assert view.proxy.index(long, c).data(Qt.ItemDataRole.ToolTipRole) == names[long]
