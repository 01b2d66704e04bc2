"""Ranks view on the real 2-GPU DDP recordings: the straggler marked with the engine's numbers, one row per
rank, the bars per step, the offer to treat rank reports as one job, a click that opens a rank's timeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import NSYS_DIR
from tests.engine.analysis import ddp_recordings as D
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

pytestmark = pytest.mark.skipif(not D.available(), reason="the 2-GPU DDP recordings are not in tests/data")


@pytest.fixture(scope="module")
def ddp_files(tmp_path_factory):
    return D.unpack(tmp_path_factory.mktemp("ddp_gui"), (*D.PER_RANK, *D.TORCHRUN))


def _table_is_the_cli(view, expected):
    """The table's cells, the headline and the evidence are the CLI's, to the character."""
    from engine.analysis.ranks.text import format_ranks, row_cells, straggler_parts

    shown = view.table.rows_text()
    for r, row in zip(expected.ranks, shown, strict=True):
        cli = row_cells(r)
        assert [row[h] for h in ("Step ms", "Median ms", "Compute ms", "NCCL ms", "Wait ms", "Exposed ms",
                                 "Idle ms", "Host ms")] == list(cli.values())
    text = format_ranks(expected)
    who, what = straggler_parts(expected)
    assert f"{who}; {what}" in text
    plain = view.headline.text().replace("<b style='color:#c0392b'>", "").replace("</b>", "")
    assert plain.startswith(f"{who} — {what}".replace("'", "&#x27;"))
    for e in expected.straggler.evidence:
        assert f"• {e}" in view.evidence.text() and f"  - {e}" in text
    pace = expected.pace
    assert pace.rank == expected.straggler.rank
    assert f"rank {pace.rank}'s step, {shown[pace.rank]['Step ms']} ms (mean over its" in view.evidence.text()


def _show(qtbot, window):
    window.set_view("ranks")
    view = window.views["ranks"]
    qtbot.waitUntil(lambda: (view.result is not None or view.stack.showing_placeholder())
                    and not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    return view


def test_per_rank_reports_are_one_job_with_the_straggler_marked(qtbot, window, ddp_files):
    from engine.analysis.ranks import analyze_paths

    r0, r1 = ddp_files[0], ddp_files[1]
    open_and_wait(qtbot, window, r0)
    open_and_wait(qtbot, window, r1)
    view = _show(qtbot, window)
    expected = analyze_paths([r0, r1])
    res = view.result
    assert [(r.rank, r.report) for r in res.ranks] == [(0, str(r0)), (1, str(r1))]
    assert res.straggler.rank == 1 and res.straggler.wait_per_step_ns == expected.straggler.wait_per_step_ns
    assert "Straggler: rank 1 (GPU 1)" in view.headline.text()
    assert "2 open reports look like the ranks of one job" in view.offer.text()
    assert any("look like the ranks of one job" in msg for _lvl, msg in window.log.entries)
    # one row per rank; the per-step bars are the engine's means over the steady steps, and add up to
    # the step the table and the evidence show
    assert view.rows_y == {0: 0.0, 1: -1.0}
    for r in expected.ranks:
        m = r.means()
        compute, wait, other, idle = view.bars_ms[r.rank]
        assert (compute, wait, idle) == (m["compute_ns"] / 1e6, m["wait_ns"] / 1e6, m["idle_ns"] / 1e6)
        assert wait + other == pytest.approx(m["nccl_ns"] / 1e6)
        assert compute + wait + other + idle == pytest.approx(r.step_ns / 1e6, abs=3e-6)
        assert wait <= wait + other <= r.step_ns / 1e6  # a wait within the NCCL time, within the step
    assert view.wait_blocks == sum(1 for c in expected.collectives for w in c.waits_ns.values() if w > 0)
    rows = view.table.source.df
    assert list(rows["Rank"]) == [0, 1] and list(rows[""]) == ["", "straggler"]
    _table_is_the_cli(view, expected)
    screenshot(window, "ranks_per_rank")
    # a click on rank 0's row opens its report in the Timeline
    with qtbot.waitSignal(view.sig_link, timeout=5000) as link:
        view.open_rank(view.rank_at(-0.1))
    assert link.args[0] == "timeline" and link.args[1]["rank"] == 0
    assert window.reports.current.path == r0
    assert window.tabs.currentWidget() is window.views["timeline"]


def test_one_report_around_torchrun_and_a_single_gpu_report(qtbot, window, ddp_files):
    open_and_wait(qtbot, window, ddp_files[2])
    view = _show(qtbot, window)
    assert [(r.rank, r.device) for r in view.result.ranks] == [(0, 0), (1, 1)]
    assert view.result.straggler.rank == 1
    assert view.job_combo.count() == 1 and view.offer.isHidden()
    open_and_wait(qtbot, window, NSYS_DIR / "host_overhead_naive.sqlite")
    qtbot.waitUntil(lambda: view.result is not None and len(view.result.ranks) == 1 and not view.is_busy(),
                    timeout=LOAD_TIMEOUT_MS)
    assert view.headline.text() == "No straggler among 1 rank(s)."
    assert view.job_combo.count() == 2


def test_opening_a_folder_of_rank_reports_opens_the_job(qtbot, window, ddp_files, tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    for p in ddp_files[:2]:
        (folder / p.name).symlink_to(p)
    (folder / "notes.txt").write_text("not a report")
    window.open_path(folder)
    qtbot.waitUntil(lambda: len(window.reports) == 2 and not window.is_loading(), timeout=LOAD_TIMEOUT_MS)
    assert sorted(r.name for r in window.reports.reports) == ["ddp_rank0.sqlite", "ddp_rank1.sqlite"]
    view = _show(qtbot, window)
    assert [r.rank for r in view.result.ranks] == [0, 1] and view.result.straggler.rank == 1
    assert view.job_combo.count() == 1


def test_steps_combo_recomputes_the_job_in_another_step_range(qtbot, window, tmp_path):
    """The Ranks view's Steps combo: the steps found from the GPU's work first, the job's NVTX ranges
    after; picking one recomputes the job in those steps (as `kernelscope ranks --range`)."""
    from benchmarks.check_steps_zoo import ZOO, sqlite_of
    from engine.analysis.ranks import analyze_paths
    from gui.views.ranks_view import AUTO_STEPS

    paths = [sqlite_of(ZOO / "tuned" / f"ddp2_gemm_rank{r}.sqlite.xz") for r in (0, 1)]
    for p in paths:
        open_and_wait(qtbot, window, p)
    view = _show(qtbot, window)
    items = [view.steps_combo.itemText(i) for i in range(view.steps_combo.count())]
    assert items[0] == AUTO_STEPS and "forward+backward" in items and "data" in items
    assert view.result.straggler.rank == 1 and "5.38 ms shorter" in view.headline.text()
    view.steps_combo.setCurrentText("forward+backward")
    view.steps_combo.activated.emit(items.index("forward+backward"))
    qtbot.waitUntil(lambda: view.result is not None and not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    expected = analyze_paths([str(p) for p in paths], range_name="forward+backward")
    assert [r.step_range for r in view.result.ranks] == ["forward+backward"] * 2
    assert [r.steps for r in view.result.ranks] == [r.steps for r in expected.ranks]
    screenshot(window, "ranks_steps_combo")


def test_many_nvtx_kernel_disagreements_are_one_sentence_with_the_list_on_hover(qtbot, window, ddp_files):
    """The notes above the charts stay one sentence each; the long list is the notes' tooltip."""
    from dataclasses import replace

    open_and_wait(qtbot, window, ddp_files[2])
    view = _show(qtbot, window)
    details = tuple(f"Rank {r}: {n} point-to-point (AllToAll, Send, Recv, ...) call(s) but 0 kernel(s)"
                    for r in range(8) for n in range(1, 9))
    note = (f"The NCCL NVTX ranges and the NCCL kernels disagree on {len(details)} operation(s) over 8 "
            f"rank(s) (e.g. {details[0]}; {len(details) - 1} more in the details).")
    view.show_result(replace(view.result, straggler=None, notes=(note,), details=details))
    assert view.evidence.text() == note + " (Hover for the list.)"
    assert view.evidence.text().count("call(s) but") == 1
    tip = view.evidence.toolTip().splitlines()
    assert tip[:40] == list(details[:40]) and tip[-1] == "… 24 more (kernelscope ranks --json)"
    view.show_result(replace(view.result, straggler=analyze_straggler(ddp_files[2]), notes=(note,),
                             details=details))
    assert note in view.clock.text() and view.clock.toolTip().startswith(details[0])


def analyze_straggler(path):
    from engine.analysis.ranks import analyze_paths

    return analyze_paths([path]).straggler


def test_rank_reports_are_ordered_by_their_number_whatever_loaded_last(qtbot, window, tmp_path):
    """NAME_rank<N> reports: the job lists them by N (rank2 before rank10), the same on every run and
    whichever order they loaded in."""
    from types import SimpleNamespace

    from benchmarks.check_steps_zoo import ZOO, sqlite_of
    from gui.views.ranks_view import job_groups, rank_order

    names = [f"/d/job_rank{n}.sqlite" for n in (10, 2, 0, 1)] + ["/d/other.sqlite", "/c/job_rank1.sqlite"]
    fake = [SimpleNamespace(path=n, is_ncu=False) for n in names]
    want = [["/c/job_rank1.sqlite"], ["/d/job_rank0.sqlite", "/d/job_rank1.sqlite", "/d/job_rank2.sqlite",
                                      "/d/job_rank10.sqlite"], ["/d/other.sqlite"]]
    assert [[r.path for r in g] for g in job_groups(fake)] == want
    assert [[r.path for r in g] for g in job_groups(fake[::-1])] == want
    assert rank_order("/d/job_rank2.sqlite") < rank_order("/d/job_rank10.sqlite")  # numerically
    assert rank_order("/c/job_rank1.sqlite") < rank_order("/d/job_rank1.sqlite")  # then by path
    folder = tmp_path / "ddp4"
    folder.mkdir()
    paths = []
    for r in (3, 1, 2, 0):  # loaded in this order: rank 0 last
        p = folder / f"ddp4_base_rank{r}.sqlite"
        p.symlink_to(sqlite_of(ZOO / "ddp4" / f"ddp4_base_rank{r}.sqlite.xz"))
        open_and_wait(qtbot, window, p)
        paths.append(p)
    view = _show(qtbot, window)
    qtbot.waitUntil(lambda: view.result is not None and len(view.result.ranks) == 4 and not view.is_busy(),
                    timeout=LOAD_TIMEOUT_MS)
    assert [r.name for r in view.job] == [f"ddp4_base_rank{r}.sqlite" for r in range(4)]
    assert [r.rank for r in view.result.ranks] == [0, 1, 2, 3]
    assert [Path(r.report).name for r in view.result.ranks] == [f"ddp4_base_rank{r}.sqlite" for r in range(4)]
    assert list(view.table.source.df["Rank"]) == [0, 1, 2, 3]
    assert view.job_combo.currentText() == "ddp4_base_rank0.sqlite … ddp4_base_rank3.sqlite (4 reports)"
    assert view.result.straggler is None and "against the job's step: rank" in view.evidence.text()


def _drawn_shares(view):
    """The heat map as drawn (rows top to bottom, steps left to right): each pixel's colour read back to
    the share of the step it stands for (the nearest colour of the scale)."""
    import numpy as np
    from PySide6.QtWidgets import QApplication

    from gui.views.ranks_heatmap import TOP_SHARE, share_color

    QApplication.processEvents()
    if view.heat.image.qimage is None:  # a map not on screen: drawn now
        view.heat.image.render()
    img = view.heat.image.qimage  # one pixel a cell, through the colour table
    assert img is not None
    rgb = np.array([[img.pixelColor(x, y).getRgb()[:3] for x in range(img.width())]
                    for y in range(img.height())], dtype=float)
    levels = np.linspace(0.0, TOP_SHARE, 501)
    table = np.array([share_color(x) for x in levels], dtype=float)
    nearest = np.argmin(((rgb[:, :, None, :] - table[None, None]) ** 2).sum(axis=-1), axis=-1)
    drawn = levels[nearest]
    n_rows, n_cols = view.heat.shares.shape
    # the image is the rows bottom-up, transposed (x = step): back to rows x steps, top row first
    return drawn[::-1] if drawn.shape == (n_rows, n_cols) else drawn.T[::-1]


def test_heat_map_colours_are_waits_as_shares_of_the_step(qtbot, window, tmp_path, ddp_files):
    """No straggler (the real 4-rank H100 job): white and pale cells, none deep red (a quarter of the step);
    a straggler (the 2-rank job, rank 0 waits for rank 1 most of its step): the waiting rank's cells deep
    red, the straggler's white."""
    import numpy as np

    from benchmarks.check_steps_zoo import ZOO, sqlite_of
    from gui.views.ranks_heatmap import TOP_SHARE
    from gui.views.ranks_view import median_step_ns

    folder = tmp_path / "ddp4"
    folder.mkdir()
    for r in range(4):
        p = folder / f"ddp4_base_rank{r}.sqlite"
        p.symlink_to(sqlite_of(ZOO / "ddp4" / f"ddp4_base_rank{r}.sqlite.xz"))
        open_and_wait(qtbot, window, p)
    view = _show(qtbot, window)
    qtbot.waitUntil(lambda: view.result is not None and len(view.result.ranks) == 4 and not view.is_busy(),
                    timeout=LOAD_TIMEOUT_MS)
    assert view.result.straggler is None and view.headline.text() == "No straggler among 4 rank(s)."
    step = median_step_ns(view.result)
    assert view.heat.step_ns == step and 5e6 < step < 50e6  # the job's median step, ~12 ms
    assert np.allclose(view.heat.shares, view.grid.wait_ns / step)
    drawn = _drawn_shares(view)
    assert drawn.shape == view.heat.shares.shape
    assert np.allclose(drawn, np.minimum(view.heat.shares, TOP_SHARE), atol=0.01)  # the colours say the share
    assert float(drawn.max()) < 0.25  # no deep red
    assert float((drawn <= 0.04).mean()) > 0.95  # white or pale: a wait of a few per cent at most
    assert f"({step / 1e6:,.2f} ms)" in view.heat.legend_title.text() and "25 %" in view.heat.plot.toolTip()

    r0, r1 = ddp_files[0], ddp_files[1]
    open_and_wait(qtbot, window, r0)
    open_and_wait(qtbot, window, r1)
    view.job_combo.setCurrentIndex(next(i for i in range(view.job_combo.count())
                                        if "ddp_rank0" in view.job_combo.itemText(i)))
    qtbot.waitUntil(lambda: view.result is not None and len(view.result.ranks) == 2 and not view.is_busy(),
                    timeout=LOAD_TIMEOUT_MS)
    assert view.result.straggler.rank == 1 and view.heat.labels == ["⚠ rank 1", "rank 0"]
    drawn = _drawn_shares(view)
    assert float(np.median(view.heat.shares[1])) > 0.5  # rank 0 waits more than half of its step for rank 1
    assert float((drawn[1] >= 0.25).mean()) > 0.6 and float(drawn[0].max()) < 0.04
    screenshot(window, "ranks_heat_shares")
