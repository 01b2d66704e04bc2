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
