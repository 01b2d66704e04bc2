"""The analyze rules against a second implementation, on every fixture and H100 recording, with
options that make every rule find many rows (gap=0, thresholds of 100 %, time windows, unlimited rows).

Every rule is written once over ``trace.columns`` (issue 24) and checked against its pandas
reference (tests/oracles/nsys_analyze_pandas.py: the general path the rules had before) on the
exports and on a Kineto trace. The CSV text must be the same bytes.
"""

from __future__ import annotations

import lzma
from pathlib import Path
from typing import Any

import pytest

from engine.analysis.nsys import analyze
from engine.analysis.nsys.analyze import gpu_activity
from engine.analysis.nsys.analyze.common import RuleResult, _resolve_options
from engine.reports import open_report
from engine.reports.base import Trace
from tests.conftest import FIXTURES as SHARED_FIXTURES
from tests.conftest import REPO
from tests.oracles.nsys_analyze_pandas import ORACLES

FIXTURES = sorted((REPO.parent / "shared" / "fixtures" / "nsys").glob("*.sqlite"))
if not FIXTURES:
    FIXTURES = sorted(Path("/work/shared/fixtures/nsys").glob("*.sqlite"))
KINETO = SHARED_FIXTURES / "torch" / "torch_sdpa_trace.json"
RECORDINGS = sorted((REPO / "tests" / "data" / "recordings" / "nsys").glob("*/*.sqlite.xz"))


def _reference_csv(trace: Trace, rule: str, opts: dict[str, Any]) -> str:
    """The rule's CSV from its pandas reference."""
    resolved = _resolve_options(rule, opts)
    return analyze.to_csv(RuleResult(rule, ORACLES[rule](trace, resolved), "", "", resolved))


def test_every_rule_has_a_reference() -> None:
    assert set(ORACLES) == set(analyze.RULES) == {rule for rule, _ in OPTIONS}


def test_rules_equal_their_reference_on_a_kineto_trace() -> None:
    trace = open_report(KINETO)
    checked = 0
    for rule, opts in OPTIONS:
        got = analyze.to_csv(analyze.run_rule(trace, rule, **opts))
        assert got == _reference_csv(trace, rule, opts), (rule, opts)
        checked += bool(got)
    assert checked >= 6  # gaps (gap=0), low use, synchronisations and pageable copies are found


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("fastrules")
    out = list(FIXTURES)
    for xz in RECORDINGS:
        dest = folder / xz.name[: -len(".xz")]
        dest.write_bytes(lzma.decompress(xz.read_bytes()))
        out.append(dest)
    return out


def _window(trace: Trace) -> dict[str, int]:
    """A window over the middle half of the kernels, so that it cuts through the ops."""
    k = trace.table("kernels", ["start", "end"])
    lo, hi = int(k["start"].min()), int(k["end"].max())
    return {"start": lo + (hi - lo) // 4, "end": hi - (hi - lo) // 4}


OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("gpu_gaps", {"gap": 0, "rows": -1}),
    ("gpu_gaps", {"gap": 0.01, "rows": 7}),
    ("gpu_gaps", {}),
    ("gpu_time_util", {"threshold": 100, "chunks": 1000, "rows": -1}),
    ("gpu_time_util", {"threshold": 60, "chunks": 7}),
    ("gpu_time_util", {}),
    ("cuda_api_sync", {"rows": -1}),
    ("cuda_api_sync", {"rows": 3}),
    ("cuda_memcpy_async", {"rows": -1}),
    ("cuda_memcpy_sync", {"rows": -1}),
    ("cuda_memcpy_sync", {"rows": 2}),
    ("cuda_memset_sync", {"rows": -1}),
]


def test_rules_equal_their_reference(reports: list[Path], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    checked = rows = 0
    for path in reports:
        trace = open_report(path)
        windows: list[dict[str, int]] = [{}]
        if trace.has("kernels"):
            windows.append(_window(trace))
        for rule, opts in OPTIONS:
            for window in windows:
                fast = analyze.run_rule(trace, rule, **opts, **window)
                assert analyze.to_csv(fast) == _reference_csv(trace, rule, {**opts, **window}), \
                    (path.name, rule, opts, window)
                checked += 1
                rows += len(fast.table)
        assert gpu_activity.groups(trace, (None, None))  # the trace has GPU ops
    assert checked >= len(OPTIONS) * 2 * 5
    assert rows > 1000  # the options above find many rows, ties included
