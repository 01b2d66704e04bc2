"""Every number holds on every report we have (issue 25): ``tests/invariants.py`` run over them all.

For each recording in ``tests/data/recordings`` (``.sqlite.xz`` / ``.json.xz``, decompressed once into
a temporary folder), each nsys export and Kineto trace in ``../shared/fixtures`` and each sample in
``resources/samples`` (the list ``benchmarks/check_invariants.py`` walks), ``kernelscope summary`` and
``kernelscope findings``, as JSON and as text, must break none of the rules: times ≥ 0, shares in
[0, 100 %], unions within the wall, parts within their whole, per-step figures within the step, the
parts' attributed shares of busy adding up to at most 100 %, no None/NaN/scientific notation in text.
``compare`` on a few pairs (a fix, Kineto runs, two ranks, two different ranges) must state the verdict
the test gives at its alpha and no speedup between different ranges. The last tests put defects back
and show the checker finds them.
"""

from __future__ import annotations

import contextlib
import io
import json
import lzma
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.cli.app import main
from tests.conftest import FIXTURES, REPO
from tests.invariants import check_compare, check_findings, check_summary, check_text

RECORDINGS = REPO / "tests" / "data" / "recordings"


def _sources() -> list[Path]:
    """The reports to check: recordings (compressed), the shared fixtures, the bundled samples."""
    xz = [p for p in sorted(RECORDINGS.rglob("*.xz"))
          if p.name.endswith((".sqlite.xz", ".json.xz")) and "oracles" not in p.parts]
    shared = sorted((FIXTURES / "nsys").glob("*.sqlite")) + sorted((FIXTURES / "torch").glob("*.json"))
    samples = sorted((REPO / "resources" / "samples").glob("*.sqlite"))
    return xz + shared + samples


def _id(p: Path) -> str:
    for root in (RECORDINGS, FIXTURES, REPO):
        if p.is_relative_to(root):
            return str(p.relative_to(root))
    return p.name


SOURCES = _sources()


@pytest.fixture(scope="session")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """A report ready to open: a recording decompressed (once per session), other files as they are."""
    folder = tmp_path_factory.mktemp("invariants")
    done: dict[Path, Path] = {}

    def get(source: Path) -> Path:
        if not source.name.endswith(".xz"):
            return source
        if source not in done:
            out = folder / _id(source).replace("/", "__")[:-3]
            out.write_bytes(lzma.decompress(source.read_bytes()))
            done[source] = out
        return done[source]

    return get


def _run(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(args)
    return rc, out.getvalue()


def violations(path: Path) -> list[str]:
    """Every rule ``summary`` and ``findings`` (JSON and text) break on one report."""
    rc, out = _run(["summary", "--json", str(path)])
    assert rc == 0, f"summary --json {path.name} failed"
    summary: dict[str, Any] = json.loads(out)
    found = [f"summary: {v}" for v in check_summary(summary)]
    found += [f"summary text: {v}" for v in check_text(_run(["summary", str(path)])[1])]
    rc, out = _run(["findings", "--json", str(path)])
    if rc == 0:
        found += [f"findings: {v}" for v in check_findings(json.loads(out), summary["wall"]["span_ns"])]
    found += [f"findings text: {v}" for v in check_text(_run(["findings", str(path)])[1])]
    return found


def test_the_reports_are_there() -> None:
    assert len([p for p in SOURCES if p.name.endswith(".xz")]) >= 50  # the recordings of the repository
    if not FIXTURES.is_dir():
        pytest.skip(f"no shared fixtures at {FIXTURES}")
    assert any(p.is_relative_to(FIXTURES) for p in SOURCES)


@pytest.mark.parametrize("source", SOURCES, ids=_id)
def test_every_number_holds(source: Path, unpacked: Callable[[Path], Path]) -> None:
    assert violations(unpacked(source)) == []


def _recording(name: str) -> Path:
    (hit,) = [p for p in SOURCES if p.name == f"{name}.xz"]
    return hit


#: pairs to compare: a fix (NVTX variant renamed), a fix of a GPU repeat's length, Kineto runs, two
#: ranks, and two different ranges (composed phases vs one outer range: a warning and no speedup)
PAIRS = [("host_overhead_naive.sqlite", "host_overhead_fixed.sqlite"),
         ("launch.sqlite", "launch_graph.sqlite"), ("train_bad_kineto.json", "train_fixed_kineto.json"),
         ("ddp_kineto_rank0_kineto.json", "ddp_kineto_rank1_kineto.json"),
         ("phases.sqlite", "outer_b.sqlite")]


def _report(name: str, unpacked: Callable[[Path], Path]) -> Path:
    shared = FIXTURES / "nsys" / name
    return shared if shared.exists() else unpacked(_recording(name))


def compare_violations(a: Path, b: Path) -> list[str]:
    """Every rule ``compare A B`` (JSON and text) breaks."""
    rc, out = _run(["compare", str(a), str(b), "--json"])
    assert rc == 0, f"compare {a.name} {b.name} failed"
    return check_compare(json.loads(out), _run(["compare", str(a), str(b)])[1])


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}-vs-{b}" for a, b in PAIRS])
def test_every_comparison_holds(a: str, b: str, unpacked: Callable[[Path], Path]) -> None:
    if a.startswith("host_overhead") and not FIXTURES.is_dir():
        pytest.skip(f"no shared fixtures at {FIXTURES}")
    assert compare_violations(_report(a, unpacked), _report(b, unpacked)) == []


# -- the checker finds the defects when they are put back ----------------------------------------------
def test_a_verdict_against_the_test_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old rule (significant only when the bootstrap CI excludes 0 too) gave "p=0.0345 -> no change"."""
    from engine.analysis import compare

    real = compare.iteration_stats

    def old_rule(ia: Any, ib: Any) -> dict[str, Any]:
        it = real(ia, ib)
        it["significant"] = it["significant"] and it["ci_excludes_zero"]
        if not it["significant"]:
            it["verdict"] = it["test_result"] = "no significant change"
        return it

    a = compare.Iterations("step", [0, 104, 109, 91, 104, 95, 100, 108, 95], 1)
    b = compare.Iterations("step", [0, 99, 88, 91, 104, 93, 95, 90, 87], 1)

    def violations_of(stats: Callable[[Any, Any], dict[str, Any]]) -> list[str]:
        c = compare.Comparison("a", "b", stats(a, b), [], [], [])
        return check_compare(json.loads(json.dumps(c.to_dict())), compare.format_comparison(c))

    assert violations_of(real) == []
    monkeypatch.setattr(compare, "iteration_stats", old_rule)
    found = violations_of(compare.iteration_stats)
    assert any("-> 'no significant change'" in v for v in found), found
    assert any(v.startswith("compare text: 'p=0.0345") for v in found), found


def _fresh_cache(monkeypatch: pytest.MonkeyPatch, near: Path) -> None:
    """A new, empty cache: the command line keeps each report's overview, and a defect put back
    into the code must be computed, not read from an earlier run's entry."""
    import tempfile

    monkeypatch.setenv("KERNELSCOPE_CACHE", tempfile.mkdtemp(prefix="ks_inv_", dir=near.parent))


def test_a_negative_first_step_extra_is_caught(unpacked: Callable[[Path], Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the clamp, torch_train.json's first step "costs" -5.18 ms extra: the checker says so."""
    import numpy as np

    from engine.analysis import summary

    path = unpacked(_recording("torch_train.json"))
    assert violations(path) == []
    monkeypatch.setattr(summary, "first_step_extra_ns",
                        lambda d: int(d[0] - np.median(d[1:])) if len(d) > 1 else None)  # the old formula
    _fresh_cache(monkeypatch, path)  # the first run's overview is kept: compute again with the defect
    found = violations(path)
    assert any("first_iteration_extra_ns = -" in v and "< 0 (a time)" in v for v in found), found


def test_scientific_notation_in_text_is_caught(unpacked: Callable[[Path], Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizes printed as GB with 2 significant digits ("3.2e-08 GB", as the issue saw) are caught."""
    from engine.analysis import summary_text

    path = unpacked(_recording("ddp_torchrun.sqlite"))  # 32 B and 488 B copies
    monkeypatch.setattr(summary_text, "fmt_bytes", lambda n: f"{n / 1e9:.2g} GB")
    found = violations(path)
    assert any(v.startswith("summary text: text leaks") and "e-0" in v for v in found), found


def test_overlapping_parts_without_attributed_shares_are_caught(unpacked: Callable[[Path], Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts' union shares (156 % of busy on multistream) given as the attributed ones are caught."""
    from engine.analysis import summary

    path = unpacked(_recording("multistream.sqlite"))
    real = summary.sm.GpuPart

    def union_as_attributed(*args: Any) -> Any:
        p = real(*args)
        return real(*args[:8], p.pct_of_busy)

    monkeypatch.setattr(summary.sm, "GpuPart", union_as_attributed)
    _fresh_cache(monkeypatch, path)
    found = violations(path)
    assert any("attributed shares of busy add up to 156" in v for v in found), found
