"""Our own .ncu-rep reader (engine/reports/ncu/: pb_results, own_reader, unit_lookup) against ``ncu_report``.

For every kernel and metric of every report we have (tests/data/ncu, the H100 recordings matrix,
../shared/fixtures/ncu and the 25 public reports), our decoder gives what NVIDIA's ``ncu_report``
gives: names, metric names, each metric's kind, value, instances and correlation ids, rule results,
NVTX state and section identifiers. The units come from ``ncu_report`` once and then from the user
cache: a second read needs no ``ncu_report`` at all and still prints NVIDIA's pages. Content the
decoder does not know (a value field, a file format) sends the report to ``ncu_report``.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from engine.reports.ncu.pb_results import PbUnsupported, read_results
from tests.conftest import FIXTURES, REPO

pytest.importorskip("ncu_report")

DATA = REPO / "tests" / "data"
PUBLIC = FIXTURES / "ncu_public.tar.xz"


def _reports() -> list[str]:
    out = [f"data:{p.relative_to(DATA)}" for p in sorted((DATA / "ncu").glob("*.ncu-rep.xz"))]
    out += [f"data:{p.relative_to(DATA)}" for p in sorted((DATA / "recordings" / "ncu").glob("*.ncu-rep.xz"))]
    out += [f"fixture:{p.name}" for p in sorted((FIXTURES / "ncu").glob("*.ncu-rep"))]
    if PUBLIC.is_file():
        with tarfile.open(PUBLIC) as tar:
            out += [f"public:{n}" for n in sorted(tar.getnames()) if n.endswith(".ncu-rep")]
    return out


def _materialize(ref: str, out: Path) -> Path:
    kind, name = ref.split(":", 1)
    if kind == "fixture":
        return FIXTURES / "ncu" / name
    target = out / Path(name).name.removesuffix(".xz")
    if kind == "data":
        with lzma.open(DATA / name, "rb") as f, target.open("wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
    else:
        with tarfile.open(PUBLIC) as tar:
            member = tar.extractfile(name)
            assert member is not None
            with target.open("wb") as g:
                shutil.copyfileobj(member, g, 1 << 20)
    return target


def test_every_report_is_compared() -> None:
    refs = _reports()
    assert sum(r.startswith("data:recordings") for r in refs) == 16
    assert sum(r.startswith("data:ncu/") for r in refs) == 2
    if PUBLIC.is_file():
        assert sum(r.startswith("public:") for r in refs) == 25


@pytest.mark.parametrize("ref", _reports())
def test_every_kernel_and_metric_equals_ncu_report(tmp_path: Path, ref: str) -> None:
    path = _materialize(ref, tmp_path)
    out = subprocess.run([sys.executable, "-m", "tests.engine.reports.ncu_pb_compare", str(path)],
                         cwd=REPO, capture_output=True, text=True, timeout=300, check=True).stdout
    got = json.loads(out)
    assert got["results"] > 0 and got["metrics"] > 100 * got["results"]
    assert got["diffs"] == []


def _recording(name: str, out: Path) -> Path:
    return _materialize(f"data:recordings/ncu/{name}.ncu-rep.xz", out)


def _oracle(name: str, page: str) -> str:
    with lzma.open(DATA / "recordings" / "ncu" / f"{name}.{page}.csv.xz", "rt", encoding="utf-8",
                   newline="") as f:
        return f.read()


_PAGES = """
import sys
from pathlib import Path
if sys.argv[4] == "no-wheel":
    sys.modules["ncu_report"] = None  # an import of ncu_report fails
from engine.analysis.ncu.pages import details_csv, raw_csv
from engine.reports.ncu.decoders import read_ncu_rep
r = read_ncu_rep(sys.argv[1], use_cache=False)
Path(sys.argv[2]).write_text(details_csv(r))
Path(sys.argv[3]).write_text(raw_csv(r))
"""


def _pages(report: Path, tmp: Path, *, wheel: bool = True, own: bool = True) -> tuple[str, str]:
    details, raw = tmp / "details.csv", tmp / "raw.csv"
    env = dict(os.environ, KERNELSCOPE_NCU_OWN="1" if own else "0")
    subprocess.run([sys.executable, "-c", _PAGES, str(report), str(details), str(raw),
                    "wheel" if wheel else "no-wheel"], check=True, cwd=REPO, timeout=120, env=env)
    return details.read_text(), raw.read_text()


def test_units_come_from_the_cache_the_second_time(tmp_path: Path) -> None:
    report = _recording("full", tmp_path)
    cache = Path(os.environ["KERNELSCOPE_CACHE"])
    assert _pages(report, tmp_path) == (_oracle("full", "details"), _oracle("full", "raw"))
    stored = list((cache / "ncu-units").glob("*.json"))
    assert len(stored) == 1
    units = json.loads(stored[0].read_text())
    assert units["gpu__time_duration.sum"] == "ns" and len(units) > 2000
    # ncu_report cannot be imported now: values from our decoder, units from the cache
    assert _pages(report, tmp_path, wheel=False) == (_oracle("full", "details"), _oracle("full", "raw"))


def test_without_ncu_report_and_cached_units_one_sentence(tmp_path: Path) -> None:
    report = _recording("basic", tmp_path)
    details = tmp_path / "d.csv"
    p = subprocess.run([sys.executable, "-c", _PAGES, str(report), str(details), str(tmp_path / "r.csv"),
                        "no-wheel"], cwd=REPO, timeout=120, capture_output=True, text=True)
    assert p.returncode != 0 and "pip install ncu-report" in p.stderr
    assert not details.exists()


def _patched(src: Path, dst: Path, old: bytes, new: bytes) -> Path:
    data = bytearray(src.read_bytes())
    at = data.find(old, 4096)
    assert at > 0
    data[at:at + len(old)] = new
    dst.write_bytes(bytes(data))
    return dst


def test_an_unknown_value_field_goes_to_ncu_report(tmp_path: Path) -> None:
    report = _recording("basic", tmp_path)
    # gpu__time_duration.sum's value {3: double} becomes {7: the same 8 bytes}, a field this reader
    # does not know (ncu_report skips it: the metric has no value there)
    acts = read_results(report)
    m = acts[0].metric_by_name("gpu__time_duration.sum")
    assert m is not None
    raw = m._b[m._start:m._end]
    assert raw[0] == 0x12 and raw[2] == 0x19  # {2: {3: double}}
    named = m._b[m._start - 4:m._end]  # with its name index: other metrics hold the same value
    changed = _patched(report, tmp_path / "changed.ncu-rep", named, named[:6] + b"\x39" + named[7:])
    bad = read_results(changed)[0].metric_by_name("gpu__time_duration.sum")
    assert bad is not None
    with pytest.raises(PbUnsupported):
        bad.kind()
    # The report is read by ncu_report then: the same pages as with our reader turned off.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _pages(changed, tmp_path / "a") == _pages(changed, tmp_path / "b", own=False)


def test_another_file_format_goes_to_ncu_report(tmp_path: Path) -> None:
    report = _recording("basic", tmp_path)
    data = bytearray(report.read_bytes())
    assert data[8:10] == b"\x08\x07"  # format 7
    data[9] = 8
    newer = tmp_path / "format8.ncu-rep"
    newer.write_bytes(bytes(data))
    with pytest.raises(PbUnsupported):
        read_results(newer)


def test_a_result_field_of_a_newer_format_goes_to_ncu_report(tmp_path: Path) -> None:
    report = _recording("basic", tmp_path)
    data = report.read_bytes()
    context_stream = b"\xb0\x01\x01\xb8\x01"  # ContextID (22) = 1, then StreamID (23)
    assert data.count(context_stream) == 4  # one a kernel
    # StreamID's key becomes field 40 (two bytes either way): a field this reader does not know
    newer = tmp_path / "field40.ncu-rep"
    newer.write_bytes(data.replace(context_stream, b"\xb0\x01\x01\xc0\x02", 1))
    assert len(read_results(report)) == 4
    with pytest.raises(PbUnsupported, match="field 40"):
        read_results(newer)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _pages(newer, tmp_path / "a") == _pages(newer, tmp_path / "b", own=False)
