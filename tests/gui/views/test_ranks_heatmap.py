"""The Ranks view's heat map on a job made by benchmarks/make_ranks64.py (real DDP ranks, one injected
straggler whose optimizer runs 2 ms longer a step): the straggler's row white, the others' red."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, object]]:
    out = tmp_path_factory.mktemp("ranks8_heat")
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "make_ranks64.py"), "--ranks", "8", "--kernels",
                    "4000", "--out", str(out), "--gpus-per-node", "4", "--straggler", "5", "--jobs", "1"],
                   check=True, capture_output=True, timeout=300)
    reports = sorted(out.glob("ranks8_rank*.sqlite"), key=lambda p: int(p.stem.rsplit("rank", 1)[1]))
    return reports, json.loads((out / "truth.json").read_text())


def test_the_straggler_is_white_and_the_ranks_waiting_for_it_red(qtbot, job) -> None:
    from engine.analysis.ranks import analyze_paths
    from engine.analysis.ranks.heat import wait_grid
    from gui.views.ranks_heatmap import SCALE, TOP_SHARE, WaitHeatMap, share_color
    from gui.views.ranks_view import median_step_ns
    from tests.gui.views.test_ranks_view import _drawn_shares

    reports, truth = job
    res = analyze_paths(reports, workers=0)
    assert res.straggler is not None and res.straggler.rank == truth["straggler"] == 5
    grid = wait_grid(res)
    labels, rows = grid.folded(shown=3)
    heat = WaitHeatMap()
    qtbot.addWidget(heat)
    step = median_step_ns(res)
    heat.set_rows(labels, rows, grid.steps, len(labels) - 1, step)
    drawn = _drawn_shares(type("V", (), {"heat": heat})())
    injected = float(truth["extra_ms"]) * 1e6  # type: ignore[arg-type]
    # the others wait about the injected 2 ms a step: as a share of the median step, red or deeper
    share = injected / step
    assert 0.1 < share < 0.5
    typical = np.median(drawn, axis=1)
    assert labels[0] == "rank 5" and typical[0] < 0.04  # the straggler waits for nobody: white
    assert np.all(typical[1:] >= 0.8 * min(share, TOP_SHARE))
    assert np.all(typical[1:] >= 0.1)  # past orange (8 %): red
    assert SCALE[0] == (0.0, (255, 255, 255)) and share_color(1.0) == SCALE[-1][1]


def test_past_max_columns_a_column_is_the_median_of_its_steps(qtbot) -> None:
    """8,518 steps (the 64-rank job's) with a job-wide pause every 13th step: the straggler's row stays white
    and the others' at their typical share, the pauses do not colour the columns they fall in."""
    from gui.views.ranks_heatmap import MAX_COLUMNS, WaitHeatMap, median_columns, share_color

    assert median_columns(np.array([[1.0, 5.0, 2.0, 7.0, 3.0]]), 2).tolist() == [[3.0, 4.5, 3.0]]
    n = 8518
    shares = np.zeros((3, n))
    shares[1:] = 0.139
    shares[:, ::13] = 3.0
    heat = WaitHeatMap()
    qtbot.addWidget(heat)
    heat.set_rows(["rank 43", "rank 27", "61 more ranks (median)"], shares * 1e7, np.arange(n), 2, int(1e7))
    assert heat.per_column == -(-n // MAX_COLUMNS) == 5 and "median of 5 steps" in heat.plot.toolTip()
    heat.image.render()
    img = heat.image.qimage
    assert (img.width(), img.height()) == (-(-n // 5), 3)
    top = [img.pixelColor(x, 2).getRgb()[:3] for x in range(img.width())]  # the image's last row: the first
    assert set(top) == {(255, 255, 255)}
    middle = {img.pixelColor(x, 1).getRgb()[:3] for x in range(img.width())}
    assert len(middle) == 1 and np.allclose(middle.pop(), share_color(0.139), atol=3)  # red, no pause in it
