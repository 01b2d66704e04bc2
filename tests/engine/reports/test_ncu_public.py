"""Nsight Compute reports written by other people (older ncu versions, other GPUs): both pages
byte-identical to what ncu 2025.3.1 prints for them (``../shared/fixtures/ncu_public.tar.xz``).

The 25 reports come from three public repositories (RTX 4090, Tesla T4, RTX 3050 Laptop), with
custom sections, section sets of older versions and reports without any rule result.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from engine.reports.ncu.section_defs import HeaderMetric, read_section_defs
from tests.conftest import FIXTURES, REPO

pytest.importorskip("ncu_report")

ARCHIVE = FIXTURES / "ncu_public.tar.xz"

#: Reports whose kernel names ncu simplifies in a way our rule does not reproduce (none now).
NAME_RULE_MISSES: set[str] = set()


def _names() -> list[str]:
    if not ARCHIVE.is_file():
        return []
    with tarfile.open(ARCHIVE) as tar:
        return sorted(Path(n).name[: -len(".ncu-rep")] for n in tar.getnames() if n.endswith(".ncu-rep"))


@pytest.fixture(scope="module")
def public_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not ARCHIVE.is_file():
        pytest.skip(f"{ARCHIVE} is missing")
    out = tmp_path_factory.mktemp("ncu_public")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(out, filter="data")
    return out / "ncu_public"


def _params() -> list[object]:
    out: list[object] = []
    for name in _names():
        miss = name in NAME_RULE_MISSES
        marks = [pytest.mark.xfail(strict=True, reason="kernel-name simplification")] if miss else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def test_the_archive_holds_the_25_reports() -> None:
    if not ARCHIVE.is_file():
        pytest.skip(f"{ARCHIVE} is missing")
    assert len(_names()) == 25


# Each report is read in a process of its own, as `kernelscope ncu R --page ...` does: within one
# process ncu_report (2026.3.1) may give a derived metric the unit it had in a report read before
# (derived__memory_l2_theoretical_sectors_global_excessive: "sector" instead of "byte").
_PAGES = """
import sys
from pathlib import Path
from engine.analysis.ncu.pages import details_csv, raw_csv
from engine.reports.ncu.decoders import read_ncu_rep
r = read_ncu_rep(sys.argv[1], use_cache=False)
Path(sys.argv[2]).write_text(details_csv(r))
Path(sys.argv[3]).write_text(raw_csv(r))
"""


@pytest.mark.parametrize("name", _params())
def test_pages_are_byte_identical(public_dir: Path, tmp_path: Path, name: str) -> None:
    details, raw = tmp_path / "details.csv", tmp_path / "raw.csv"
    report = public_dir / f"{name}.ncu-rep"
    subprocess.run([sys.executable, "-c", _PAGES, str(report), str(details), str(raw)],
                   check=True, cwd=REPO, timeout=120)
    oracles = public_dir / "oracles"
    assert details.read_text() == (oracles / f"{name}.details.csv").read_text()
    assert raw.read_text() == (oracles / f"{name}.raw.csv").read_text()


def test_stored_section_definitions_carry_arch_filters(public_dir: Path) -> None:
    # A T4 report (CC 7.5) written by an older ncu: "L2 Compression Success Rate" is stored with
    # the filter "8.0 and newer", so ncu leaves it out although ncu_report lists the metric.
    defs = read_section_defs(public_dir / "armleth__report_v2.ncu-rep")
    mwa = {m.label: m for m in defs["MemoryWorkloadAnalysis"].header}
    rate = mwa["L2 Compression Success Rate"]
    assert rate.resolve(75, lambda n: True) is None
    assert rate.resolve(89, lambda n: True) == "lts__average_gcomp_input_sector_success_rate.pct"
    labels = [label for _m, label in defs["MemoryWorkloadAnalysis"].header_rows(75, lambda n: True)]
    assert "L2 Compression Success Rate" not in labels and "Mem Busy" in labels
    # PM sampling: the cycle interval on Turing, the time interval (an option) from 8.6 on.
    pm = {m.label: m for m in defs["PmSampling"].header}["Maximum Sampling Interval"]
    assert pm.resolve(75, lambda n: True) == "profiler__pmsampler_interval_cycles"
    assert pm.resolve(90, lambda n: True) == "profiler__pmsampler_interval_time"


def test_unknown_architecture_values_do_not_constrain(public_dir: Path) -> None:
    # An RTX 3050 report stores the MC-channel metrics with ranges 8.7 and 10.1; ncu 2025.3.1 no
    # longer knows 10.1 (now 11.0), so that range reads as unbounded and the rows print as n/a.
    defs = read_section_defs(public_dir / "DarrenLu666888__profile.ncu-rep")
    mc = {m.label: m for m in defs["WorkloadDistribution"].header}["Average MC Channel Active Cycles"]
    assert mc.ranges == ((87, 87), (None, None))
    assert mc.resolve(86, lambda n: False) == "mcc__cycles_active.avg"
    known = HeaderMetric("mcc__cycles_active.avg", "x", ((87, 87), (110, 110)))
    assert known.resolve(90, lambda n: True) is None
