"""CI gates on real reports: ncu metric thresholds and nsys timings against a baseline."""

from __future__ import annotations

import pytest

from engine.analysis.gate import EXIT_GATE_FAILED, GateError, load_rules, run_gates, to_markdown
from engine.cli import main
from engine.reports.ncu import parse_number
from tests.conftest import FIXTURES, NSYS_DIR, ORACLES

NCU_FIXED = FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep"
NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"


def oracle_metric(kernel: str, metric: str) -> float:
    """The metric as ncu itself printed it (--page raw --print-units base)."""
    import csv

    rows = list(csv.reader((ORACLES / "host_overhead_fixed.raw.csv").open()))
    header, data = rows[0], rows[2:]
    col = header.index(metric)
    name_col = header.index("Kernel Name")
    return next(parse_number(r[col]) for r in data if r[name_col].startswith(kernel))


def write(tmp_path, text):
    p = tmp_path / "gates.toml"
    p.write_text(text)
    return p


SEEDS = """
[[gate]]
name = "SM throughput"
metric = "sm_throughput_pct"
op = ">="
value = 85
kernel = "sgemm"
[[gate]]
name = "achieved occupancy"
metric = "achieved_occupancy_pct"
op = ">="
value = 70
[[gate]]
name = "L1 miss"
metric = "l1_miss_pct"
op = "<="
value = 15
kernel = "sgemm"
"""


def test_seed_thresholds_on_the_real_ncu_report(tmp_path):
    results = run_gates(NCU_FIXED, load_rules(write(tmp_path, SEEDS)))
    by = {(r.gate, r.subject): r for r in results}
    sm = by[("SM throughput", "sgemm_tiled")]
    sol = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    assert sm.value == pytest.approx(oracle_metric("void sgemm_tiled", sol))
    assert not sm.passed  # 73.4 % < 85 %
    occ_s = by[("achieved occupancy", "sgemm_tiled")]
    occ_x = by[("achieved occupancy", "saxpy")]
    assert occ_s.passed and occ_x.passed  # 97.5 % and 74.4 % >= 70 %
    assert occ_x.value == pytest.approx(
        oracle_metric("saxpy", "sm__warps_active.avg.pct_of_peak_sustained_active"))
    l1 = by[("L1 miss", "sgemm_tiled")]
    assert l1.value == pytest.approx(100 - oracle_metric("void sgemm_tiled", "l1tex__t_sector_hit_rate.pct"))
    assert not l1.passed
    md = to_markdown(NCU_FIXED, results)
    assert md.startswith("## Kernelscope gates: FAILED (2 of 4 checks)")
    assert "| **FAIL** | SM throughput | `sgemm_tiled` | 73.38 | >= 85 |" in md


def test_threshold_just_below_the_value_passes(tmp_path):
    v = oracle_metric("void sgemm_tiled", "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    rules = write(tmp_path, f'[[gate]]\nmetric = "sm_throughput_pct"\nvalue = {v - 0.01}\nkernel = "sgemm"\n')
    assert all(r.passed for r in run_gates(NCU_FIXED, load_rules(rules)))
    rules = write(tmp_path, f'[[gate]]\nmetric = "sm_throughput_pct"\nvalue = {v + 0.01}\nkernel = "sgemm"\n')
    assert not any(r.passed for r in run_gates(NCU_FIXED, load_rules(rules)))


TIMING = """
[[gate]]
name = "iteration time"
check = "iteration_time"
max_regression_pct = 5
[[gate]]
name = "kernel time"
check = "kernel_time"
max_regression_pct = 5
"""


def test_iteration_time_gate_fails_on_a_real_slowdown_and_passes_on_speedup(tmp_path, capsys):
    rules = write(tmp_path, TIMING)
    # naive measured against the fixed baseline: 4.35 ms -> 19.9 ms, p = 2/70.
    assert main(["gate", str(NAIVE), "--baseline", str(FIXED), "--rules", str(rules)]) == EXIT_GATE_FAILED
    out = capsys.readouterr().out
    assert "| **FAIL** | iteration time | `iteration(naive)` |" in out
    assert "p=0.0286" in out
    # The other way round the build passes; saxpy (in both) is within noise.
    md_path = tmp_path / "gate.md"
    argv = ["gate", str(FIXED), "--baseline", str(NAIVE), "--rules", str(rules), "-o", str(md_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Kernelscope gates: PASSED") and md_path.read_text() == out
    assert "`saxpy(int, float, const float *, float *)`" in out


def test_same_report_is_never_a_regression(tmp_path):
    results = run_gates(FIXED, load_rules(write(tmp_path, TIMING)), FIXED)
    assert results and all(r.passed for r in results)
    assert all(r.value == 0 for r in results)


def test_gate_errors(tmp_path, capsys):
    with pytest.raises(GateError, match="no \\[\\[gate\\]\\] tables"):
        load_rules(write(tmp_path, "x = 1\n"))
    with pytest.raises(GateError, match="op"):
        load_rules(write(tmp_path, '[[gate]]\nmetric = "a"\nop = "=="\nvalue = 1\n'))
    rules = write(tmp_path, TIMING)
    assert main(["gate", str(FIXED), "--rules", str(rules)]) == 1
    assert "--baseline" in capsys.readouterr().err
    assert main(["gate", str(FIXED), "--rules", str(write(tmp_path, SEEDS))]) == 1
    assert "not an ncu report" in capsys.readouterr().err
