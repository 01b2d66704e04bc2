"""A job made by benchmarks/make_ranks64.py (real DDP ranks, shifted clocks, jitter, one injected straggler):
the straggler named, what it costs, the clocks lined up; read once and then from the cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.ranks import analyze_paths
from engine.analysis.ranks.heat import wait_grid
from engine.analysis.ranks.store import cached_ranks, read_all

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, object]]:
    out = tmp_path_factory.mktemp("ranks8")
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "make_ranks64.py"), "--ranks", "8", "--kernels",
                    "4000", "--out", str(out), "--gpus-per-node", "4", "--straggler", "5", "--jobs", "1"],
                   check=True, capture_output=True, timeout=300)
    reports = sorted(out.glob("ranks8_rank*.sqlite"), key=lambda p: int(p.stem.rsplit("rank", 1)[1]))
    return reports, json.loads((out / "truth.json").read_text())


def test_the_injected_straggler_is_named_with_its_cost(job: tuple[list[Path], dict[str, object]]) -> None:
    reports, truth = job
    assert len(reports) == 8 and truth["straggler"] == 5
    res = analyze_paths(reports, workers=0)
    s = res.straggler
    assert s is not None and s.rank == truth["straggler"]
    injected = float(truth["extra_ms"]) * 1e6  # type: ignore[arg-type]
    # its optimizer runs 2 ms longer per step: the others wait that (less the jitter) with nothing to run
    assert 0.8 * injected <= s.cost_per_step_ns <= 1.1 * injected
    assert s.cause.startswith("+") and "GPU compute" in s.cause
    assert s.slow_step_share > 0.9 and s.last_share > 0.9
    # node 1's clock is off by the injected error: moved onto rank 0's, the ends of collectives agree
    error = truth["node_clock_error_ns"][1]  # type: ignore[index]
    assert abs(error) > 50_000 and "Clocks lined up on collective ends" in res.clock.sentence
    assert res.clock.nccl_end_spread_ns is not None and res.clock.nccl_end_spread_ns < 20_000
    for r in res.ranks:
        assert (r.device, r.host) == (r.rank % 4, f"node{r.rank // 4:02d}")
    # the heat map: the straggler first, waiting (almost) nothing in a typical step; every other rank
    # waits about the cost
    grid = wait_grid(res)
    assert grid is not None and grid.ranks[0] == 5 and sorted(grid.ranks) == list(range(8))
    typical = np.median(grid.wait_ns, axis=1)
    assert typical[0] < 0.1 * injected and np.all(typical[1:] > 0.8 * injected)
    assert np.all(np.diff(grid.mean_ns[1:]) <= 0)  # the others: most wait first
    labels, rows = grid.folded(shown=3)
    assert labels == ["rank 5", *(f"rank {r}" for r in grid.ranks[1:3]), "5 more ranks (median)"]
    assert rows.shape == (4, len(grid.steps))


def test_reports_are_read_once_then_from_the_cache(job: tuple[list[Path], dict[str, object]], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path))  # a cache of its own: nothing read yet
    reports, _truth = job
    assert all(cached_ranks(p) is None for p in reports[:3])
    first = read_all(reports[:3], workers=2)  # small reports: read here, each kept in the cache
    assert all(cached_ranks(p) is not None for p in reports[:3])
    again = read_all(reports[:3], workers=2)
    for a, b in zip(first, again, strict=True):
        assert [(r.pid, r.report, r.steps.count) for r in a] == [(r.pid, r.report, r.steps.count) for r in b]
        assert all(np.array_equal(x.nccl_end, y.nccl_end) for x, y in zip(a, b, strict=True))
    cold = analyze_paths(reports[:3], inputs=first)
    warm = analyze_paths(reports[:3])
    assert cold.to_json() == warm.to_json()
