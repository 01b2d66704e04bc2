"""The PyTorch view on the H200 training-step recordings: operators, modules, kernels, memory."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

REC = REPO / "tests" / "data" / "recordings" / "torch"


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("torchgui")
    for name in ("torch_train.json", "torch_train_snapshot.pickle"):
        (out / name).write_bytes(lzma.decompress((REC / f"{name}.xz").read_bytes()))
    return out


def _show(qtbot, window, page: str):
    window.set_view("pytorch")
    view = window.views["pytorch"]
    qtbot.waitUntil(lambda: not view.is_busy() and view.result is not None, timeout=LOAD_TIMEOUT_MS)
    view.show_page(page)
    return view


def test_operators_modules_kernels_memory_of_a_training_step(qtbot, window, rec: Path) -> None:
    open_and_wait(qtbot, window, rec / "torch_train.json")
    view = _show(qtbot, window, "operators")
    ops = view.ops_table.column("Operator")
    assert ops[0] == "aten::mm" and "aten::addmm" in ops[:3]
    gpu = view.ops_table.column("GPU self (ms)")
    assert gpu[0] == pytest.approx(131.4999, abs=1e-3)  # = the sum of its 403 kernels in the raw events
    view.select_op("aten::mm")
    kernels = view.op_kernels.column("Kernel")
    assert any("simt_sgemm" in k for k in kernels)
    assert sum(view.op_kernels.column("Count")) == 403
    assert "torch_workbench.py" in view.op_stack.text()  # with_stack's Python frames
    assert view.to_timeline.isEnabled()
    screenshot(window, "pytorch_operators")

    with qtbot.waitSignal(window.views["timeline"].canvas.sig_range_changed, timeout=LOAD_TIMEOUT_MS,
                          raising=False):
        view.to_timeline.click()
    assert window.current_view() == "timeline"

    view = _show(qtbot, window, "modules")
    top = view.tree.topLevelItem(0)
    assert top.text(0) == "7 step(s)"
    assert [top.child(i).text(0) for i in range(top.childCount())] == ["forward", "backward", "optimizer",
                                                                       "other"]
    assert top.child(0).child(0).text(0) == "TinyGPT_0"
    screenshot(window, "pytorch_modules")

    view = _show(qtbot, window, "kernels")
    assert "0.0 %</b> of the kernel time" in view.tc_label.text()
    assert view.kernels_table.column("Tensor cores")[0] == "no (CUDA cores)"
    screenshot(window, "pytorch_kernels")

    view = _show(qtbot, window, "memory")
    truth = json.loads((REC / "torch_train_truth.json").read_text())
    assert f"({truth['max_memory_allocated']:,} bytes)" in view.mem_label.text()
    screenshot(window, "pytorch_memory")


def test_a_memory_snapshot_opens_on_the_memory_page(qtbot, window, rec: Path) -> None:
    open_and_wait(qtbot, window, rec / "torch_train_snapshot.pickle")
    view = _show(qtbot, window, "memory")
    assert view.tabs.currentIndex() == 3 and not view.tabs.isTabEnabled(0)
    truth = json.loads((REC / "torch_train_snapshot_truth.json").read_text())
    assert f"({truth['max_memory_allocated']:,} bytes)" in view.mem_label.text()
    assert "torch_workbench.py" in view.alive_table.column("Alive at the peak, allocated at")[0]
    screenshot(window, "pytorch_snapshot")


def test_memory_envelope_keeps_every_peak() -> None:
    import numpy as np

    from gui.views.pytorch_view import envelope

    rng = np.random.default_rng(7)
    v = rng.integers(0, 10**9, 1_000_003)
    t = np.cumsum(rng.integers(1, 100, len(v)))
    x, y = envelope(t, v, 1000)
    assert len(x) == len(y) <= 2000
    assert y.max() == v.max() and y.min() == v.min()
    assert bool((np.diff(x) >= 0).all())


def test_a_second_open_reads_only_what_the_page_on_screen_shows(qtbot, window, rec: Path) -> None:
    """Opened again (the results kept on disk), the view fills the operators page only: the events are read
    on the first operator click, the other pages and the memory plot when first shown."""
    from engine.analysis.tables import _MEMO
    from engine.reports import open_report
    from gui.views.pytorch_view import compute

    path = rec / "torch_train.json"
    compute(open_report(path))  # the first open: everything kept on disk
    again = open_report(path)
    result = compute(again)  # what the view reads for its first paint: the events are not among it
    assert "pytorch.events" not in _MEMO.get(again, {}) and set(result) == {
        "memory", "alive", "snapshot", "ops", "kernels", "modules"}
    report = open_and_wait(qtbot, window, path)
    view = _show(qtbot, window, "operators")
    assert view.ops_table.column("Operator")[0] == "aten::mm"
    assert view._filled == {0} and view.mem_plot is None and view.kernels_table.source.df is None
    assert view.tree.topLevelItemCount() == 0
    view.select_op("aten::mm")
    assert "pytorch.events" in _MEMO[report.trace] and sum(view.op_kernels.column("Count")) == 403
    view.show_page("kernels")
    assert view.kernels_table.column("Tensor cores")[0] == "no (CUDA cores)" and view.mem_plot is None
    view.show_page("memory")
    assert view.mem_plot is not None and view._filled == {0, 2, 3}
