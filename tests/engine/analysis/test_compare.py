"""Compare naive vs fixed fixtures; Mann-Whitney and bootstrap checked against hand-derived values."""

from __future__ import annotations

import itertools
import json
import math
import sqlite3

import numpy as np
import pytest

from engine.analysis.compare import (
    Iterations,
    bootstrap_median_diff_ci,
    compare_traces,
    iteration_stats,
    iterations,
    mann_whitney_u,
    result_sentence,
    speedup_sentence,
    steps_comparable,
)
from engine.cli import main
from engine.reports import open_report
from tests.conftest import FIXTURES, NSYS_DIR

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
TELEMETRY = FIXTURES / "telemetry" / "telemetry_h200.csv"


def nvtx_durations(path, text):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(
        "select end - start from NVTX_EVENTS n left join StringIds s on s.id = n.textId "
        "where coalesce(n.text, s.value) = ? and end is not null order by start", (text,)).fetchall()
    con.close()
    return [r[0] for r in rows]


def brute_force_p(x, y):
    """Two-sided exact p by enumerating every split of the pooled sample."""
    pooled = list(x) + list(y)
    n1 = len(x)

    def u_of(idx):
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in idx]
        return sum((ai > bj) + 0.5 * (ai == bj) for ai in a for bj in b)

    u_obs = u_of(tuple(range(n1)))
    us = [u_of(c) for c in itertools.combinations(range(len(pooled)), n1)]
    mean = n1 * len(y) / 2
    return sum(abs(u - mean) >= abs(u_obs - mean) - 1e-12 for u in us) / len(us), u_obs


@pytest.mark.parametrize("x,y", [
    ([1.0, 2, 3, 4, 5], [6.0, 7, 8, 9, 10]),
    ([3.1, 0.5, 2.2, 7.0], [4.4, 5.5, 1.1, 9.9, 8.8]),
    ([10.0, 11, 12], [1.0, 2, 13.5]),
])
def test_mann_whitney_exact_matches_enumeration(x, y):
    mw = mann_whitney_u(x, y)
    p, u = brute_force_p(x, y)
    assert mw.method == "exact"
    # U counts pairs where x beats y, i.e. the rank-sum definition.
    assert mw.u == pytest.approx(u)
    assert mw.p_value == pytest.approx(p)


def test_mann_whitney_normal_approximation_with_ties():
    x = [1, 2, 2, 3, 3, 3, 4, 5] * 4
    y = [3, 4, 4, 5, 5, 6, 6, 7] * 4
    mw = mann_whitney_u(x, y)
    assert mw.method.startswith("normal")
    # Hand computation of the tie-corrected z with continuity correction.
    allv = np.array(x + y, dtype=float)
    n1, n2, n = len(x), len(y), len(x) + len(y)
    _, t = np.unique(allv, return_counts=True)
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ((t ** 3 - t).sum()) / (n * (n - 1))))
    z = (abs(mw.u - n1 * n2 / 2) - 0.5) / sigma
    assert mw.p_value == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert mw.p_value < 1e-4


def test_bootstrap_ci_contains_true_difference_and_is_reproducible():
    rng = np.random.default_rng(1)
    a = rng.normal(100, 1, 30)
    b = rng.normal(90, 1, 30)
    lo, hi = bootstrap_median_diff_ci(a, b)
    assert lo < np.median(b) - np.median(a) < hi
    assert -11.5 < lo < hi < -8.5
    assert (lo, hi) == bootstrap_median_diff_ci(a, b)


def test_naive_vs_fixed_iteration_time_improves_significantly():
    a, b = open_report(NAIVE), open_report(FIXED)
    da = nvtx_durations(NAIVE, "iteration(naive)")
    db = nvtx_durations(FIXED, "iteration(fixed)")
    assert len(da) == len(db) == 5
    ia, ib = iterations(a), iterations(b)
    # steps timed on the GPU: within 2 % of the host ranges in these synchronized loops, except the
    # first, whose host range also holds the first cudaMalloc's set-up before any GPU work
    for mine, host in ((ia.durations_ns, da), (ib.durations_ns, db)):
        assert len(mine) == len(host)
        assert all(m == pytest.approx(h, rel=0.1) for m, h in zip(mine[1:], host[1:], strict=True))
    c = compare_traces(a, b)
    it = c.iterations
    assert it["median_ns_a"] == pytest.approx(float(np.median(da[1:])), rel=0.02)  # GPU vs host ranges
    assert it["median_ns_b"] == pytest.approx(float(np.median(db[1:])), rel=0.02)
    assert it["speedup"] == pytest.approx(np.median(da[1:]) / np.median(db[1:]), rel=0.02)  # GPU steps
    assert 4.4 < it["speedup"] < 4.7
    # Every fixed iteration is faster than every naive one: U = 16 of 16 and the exact two-sided
    # p for 4 vs 4 is 2 / C(8, 4) = 2/70.
    assert it["mann_whitney_u"] == 16
    assert it["p_value"] == pytest.approx(2 / 70)
    assert it["significant"] and it["verdict"] == "faster"
    lo, hi = it["delta_median_ci95_ns"]
    assert lo <= it["delta_median_ns"] <= hi < 0
    # Deltas by API: the 20 cudaMemcpy calls are gone, cudaMemcpyAsync is new.
    memcpy = next(r for r in c.api if r["name"] == "cudaMemcpy")
    assert (memcpy["count_a"], memcpy["count_b"]) == (20, 0)
    # Same GPU, driver, grids and bytes: no fairness warning.
    assert c.warnings == []
    assert c.facts["driver"] == ["580.159.04", "580.159.04"]


def test_fairness_warns_on_different_work_and_one_sided_telemetry():
    c = compare_traces(open_report(FIXED), open_report(NSYS_DIR / "torch_sdpa_gemm.sqlite"),
                       telemetry_a=TELEMETRY)
    text = " ".join(c.warnings)
    assert "Different kernel launch counts: A 10, B 31" in text
    assert "Different bytes copied" in text
    assert "only one run" in text


def test_cli_compare_json(capsys):
    assert main(["compare", str(NAIVE), str(FIXED), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "kernelscope.compare/1"
    assert doc["iterations"]["verdict"] == "faster"
    assert main(["compare", str(NAIVE), str(FIXED)]) == 0
    assert "p=0.0286 < 0.05 -> faster" in capsys.readouterr().out


def test_the_verdict_follows_the_test_at_the_stated_alpha():
    """p = 0.034 < 0.05 with a bootstrap CI that touches 0 read "no significant change"; now "faster"."""
    a = [104, 109, 91, 104, 95, 100, 108, 95]
    b = [99, 88, 91, 104, 93, 95, 90, 87]
    it = iteration_stats(Iterations("step", [0, *a], 1), Iterations("step", [0, *b], 1))
    assert it["p_value"] < 0.05 and not it["ci_excludes_zero"]
    assert it["significant"] and it["verdict"] == "faster" and it["alpha"] == 0.05
    text = result_sentence(it)
    assert text.startswith(f"p={it['p_value']:.4f} < 0.05 -> faster") and "includes 0" in text
    same = iteration_stats(Iterations("step", [0, *a], 1), Iterations("step", [0, *a], 1))
    assert not same["significant"] and same["verdict"] == "no significant change"
    assert result_sentence(same).startswith("p=1.0000 >= 0.05 -> no significant change")


def test_steps_of_different_ranges_warn_and_give_no_speedup():
    """ "forward+backward" vs "data": two parts of a step, not one step before and after a fix."""
    a = Iterations("forward+backward", [0, *range(100, 110)], 1, "gpu+nvtx")
    b = Iterations("data", [0, *range(5, 15)], 1, "gpu+nvtx")
    assert not steps_comparable(a, b)
    it = iteration_stats(a, b)
    assert it["verdict"].startswith("not comparable") and not it["steps_comparable"]
    assert "no speedup" in speedup_sentence({**it, "speedup": None})
    # a fix may rename a variant or change how many operations a GPU repeat holds
    assert steps_comparable(Iterations("iteration(naive)", [1], 0, "gpu+nvtx"),
                            Iterations("iteration(fixed)", [1], 0, "gpu+nvtx"))
    assert steps_comparable(Iterations("GPU repeat of 485 ops", [1], 0, "gpu"),
                            Iterations("GPU repeat of 487 ops", [1], 0, "gpu"))
    assert not steps_comparable(Iterations("GPU repeat of 64 ops", [1], 0, "gpu"),
                                Iterations("train_step N", [1], 0, "gpu+nvtx"))


def test_compare_of_different_ranges_prints_no_speedup(tmp_path):
    import lzma
    from pathlib import Path

    from engine.analysis.compare import format_comparison

    zoo = Path(__file__).resolve().parents[2] / "data" / "recordings" / "zoo" / "tuned"
    paths = []
    for name in ("phases", "outer_b"):
        out = tmp_path / f"{name}.sqlite"
        out.write_bytes(lzma.decompress((zoo / f"{name}.sqlite.xz").read_bytes()))
        paths.append(out)
    c = compare_traces(open_report(paths[0]), open_report(paths[1]))
    assert c.iterations["speedup"] is None and not c.iterations["steps_comparable"]
    assert any("different ranges" in w and "no speedup" in w for w in c.warnings)
    text = format_comparison(c)
    assert "speedup" not in text.replace("no speedup", "") and "not comparable" in text
